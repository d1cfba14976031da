#!/bin/sh
# An MoE inference plan (Mixtral-8x7B, batch 8, one H200): a decode step's grouped expert GEMMs have two
# rows an expert, below the grouped tables' smallest point; they are priced from that point scaled by the
# rooflines with the operands' bytes (sim_costs.c, grouped_below_range_us), so the step takes at least its
# weights at the HBM rate, and the simulation does not stop on the ceiling check (it did: exit 3).
# usage: moe_infer.sh TACOSIM
set -eu
bin=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/moe_infer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/plan.json" <<J
{"schema":1,"kind":"inference","name":"mixtral-b8","model":"mixtral-8x7b","cluster":"h200x8-nvswitch",
 "layout":{"tp":1,"pp":1},"batch":{"size":8,"prompt":128,"generate":16},"kv_cache":"bf16","codec":{"kind":"none"}}
J
"$bin" simulate "$tmp/plan.json" --json "$tmp/out.json" > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; exit 1; }
tpot=$(grep -o '"tpot_s": *[0-9.e+-]*' "$tmp/out.json" | head -1 | sed 's/.*: *//')
weights=$(grep -o '"weights_bytes": *[0-9.e+-]*' "$tmp/out.json" | head -1 | sed 's/.*: *//')
# the H200's 4.8 TB/s: a decode step of batch 8 x top 2 over 8 experts reads (nearly) every weight
awk -v t="$tpot" -v w="$weights" 'BEGIN { f = w / 4.8e12; printf "TPOT %.4f s, weights at the HBM rate %.4f s\n", t, f; exit !(t >= f && t < 5 * f) }'

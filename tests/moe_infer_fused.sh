#!/bin/sh
# The inference plan field "moe_kernel" (plan_infer.h). A decode step of Mixtral-8x7B at batch 1 under TP 2
# on H100s: one token picks 2 of the 8 experts, so each GPU reads 32 layers x 2 experts x its half of an
# expert's three 4096 x 14336 matrices, 32 x 2 x 3 x 4096 x 7168 x 2 B = 11.27 GB, 3.36 ms at the H100's
# 3.35 TB/s. Under "fused" (one GEMM of the active experts side by side) the routed experts' GEMMs of a step
# take at least that and less than twice it; "per-expert" takes no less than "fused"; a bad value, or the
# field on a dense model, is an error naming the file and the field (exit 2); a plan without the field is
# priced as "fused".
# usage: moe_infer_fused.sh TACOSIM
set -eu
bin=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/moe_infer_fused.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
plan() { # NAME MODEL KERNEL
  cat > "$tmp/$1.json" <<J
{"schema":1,"kind":"inference","name":"$1","model":"$2","cluster":"h100x8-nvswitch",
 "layout":{"tp":2,"pp":1},"batch":{"size":1,"prompt":128,"generate":8},"codec":{"kind":"none"},"moe_kernel":"$3"}
J
}
experts() { grep -o '"experts_gemm_s": *[0-9.e+-]*' "$1" | tail -1 | sed 's/.*: *//'; } # the decode phase's
for k in fused per-expert; do
  plan "$k" mixtral-8x7b "$k"
  "$bin" simulate "$tmp/$k.json" --json "$tmp/$k.out" > "$tmp/$k.txt" 2>&1 || { cat "$tmp/$k.txt"; exit 1; }
done
# without the field: the default, fused (plan_infer.h), the same experts' time to the digit
plan default mixtral-8x7b fused
sed 's/,"moe_kernel":"fused"//' "$tmp/default.json" > "$tmp/default2.json"
grep -q moe_kernel "$tmp/default2.json" && { echo "default plan still names moe_kernel"; exit 1; }
"$bin" simulate "$tmp/default2.json" --json "$tmp/default.out" > "$tmp/default.txt" 2>&1 || { cat "$tmp/default.txt"; exit 1; }
f=$(experts "$tmp/fused.out") p=$(experts "$tmp/per-expert.out") d=$(experts "$tmp/default.out")
[ "$d" = "$f" ] || { echo "default moe_kernel: experts $d s, fused $f s"; exit 1; }
awk -v f="$f" -v p="$p" 'BEGIN { w = 32 * 2 * 3 * 4096 * 7168 * 2 / 3.35e12;
  printf "routed experts of a decode step: fused %.3f ms, per-expert %.3f ms, active weights at the HBM rate %.3f ms\n",
         f * 1e3, p * 1e3, w * 1e3; exit !(f >= w && f < 2 * w && p >= f) }'
# A decode step run as one CUDA graph (--decode graph) has a floor of its GEMMs' bytes at the HBM rate: a
# grouped GEMM's are its active experts' only (sim_grouped_idle_bytes). Qwen3-30B-A3B, batch 10 x top 8 over
# 128 experts: 128 (1 - (127/128)^80) = 59.5, so 60 experts of 3 x 2048 x 768 bf16 in each of 48 layers,
# 27.2 GB, 8.1 ms at 3.35 TB/s; all 128, 58.0 GB, 17.3 ms: the step's
# routed experts take at least the first and less than the second (they took 17.3 ms when all were counted).
cat > "$tmp/qwen.json" <<J
{"schema":1,"kind":"inference","name":"qwen","model":"qwen3-30b-a3b","cluster":"h100x8-nvswitch",
 "layout":{"tp":1,"pp":1},"batch":{"size":10,"prompt":128,"generate":8},"codec":{"kind":"none"},"moe_kernel":"fused"}
J
"$bin" simulate "$tmp/qwen.json" --decode graph --json "$tmp/qwen.out" > "$tmp/qwen.txt" 2>&1 || { cat "$tmp/qwen.txt"; exit 1; }
q=$(experts "$tmp/qwen.out")
awk -v q="$q" 'BEGIN { a = 48 * 60 * 3 * 2048 * 768 * 2 / 3.35e12; all = 48 * 128 * 3 * 2048 * 768 * 2 / 3.35e12;
  printf "Qwen3-30B-A3B graph decode step: routed experts %.3f ms, active weights %.3f ms, all weights %.3f ms\n",
         q * 1e3, a * 1e3, all * 1e3; exit !(q >= a && q < 0.9 * all) }'
bad() { # NAME MODEL KERNEL WHAT: exit 2 and the message names the file, the field and WHAT
  plan "$1" "$2" "$3"
  rc=0
  "$bin" simulate "$tmp/$1.json" > "$tmp/$1.txt" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] && grep -q "$1.json" "$tmp/$1.txt" && grep -q "moe_kernel" "$tmp/$1.txt" &&
    grep -q "$4" "$tmp/$1.txt" || { echo "$1: exit $rc"; cat "$tmp/$1.txt"; exit 1; }
}
bad unknown mixtral-8x7b grouped "fused"
bad dense llama3-8b fused "no experts"
echo ok

#!/bin/sh
# experiments/published/dgxc/breakdown.sh on one plan: every op of rank 0 lands in exactly one class
# (the seven class columns add up to the sum of `tacosim ops`), the attention column is the sum of
# fwd.attn and bwd.attn, the GEMM column that of the qkv / attn_out / fc1 / fc2 compute ops, and the
# predicted and exposed columns are those of `tacosim simulate --json`.
# usage: published_breakdown.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
command -v jq > /dev/null 2>&1 || { echo "jq missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/published_breakdown.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
p=gb200-n340b-128
plan="experiments/published/dgxc/plans/dgxc-$p.json"
bash "$src/experiments/published/dgxc/breakdown.sh" "$bin" "$p" > "$tmp/out" 2> "$tmp/err" ||
  { cat "$tmp/err"; echo "FAIL: breakdown.sh exit"; exit 1; }
cat "$tmp/out"
row=$(grep "^| $p |" "$tmp/out") || { echo "FAIL: no row for $p"; exit 1; }
col() { echo "$row" | awk -F'|' -v i="$1" '{ gsub(/ /, "", $(i + 2)); print $(i + 2) }'; }
(cd "$src" && "$bin" ops "$plan" 2> /dev/null) > "$tmp/ops"
(cd "$src" && "$bin" simulate "$plan" --json "$tmp/sim.json" > /dev/null 2>&1)
near() { # what, got, want, tolerance (s)
  awk -v g="$2" -v w="$3" -v t="$4" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= t) }' ||
    { echo "FAIL: $1: got $2, want $3"; exit 1; }
  echo "ok: $1: $2 (want $3)"
}
all=$(awk 'NR > 1 && $1 !~ /^#/ { t += $3 } END { printf "%.6f", t / 1000 }' "$tmp/ops")
sum=$(for i in 1 2 3 4 5 6 7; do col $i; done | awk '{ t += $1 } END { printf "%.6f", t }')
near "classes add up to every op of rank 0" "$sum" "$all" 0.004 # 7 columns rounded to 1 ms
attn=$(awk '$1 == "fwd.attn" || $1 == "bwd.attn" { t += $3 } END { printf "%.6f", t / 1000 }' "$tmp/ops")
near "attention column" "$(col 2)" "$attn" 0.0006
gemm=$(awk '$1 ~ /qkv|attn_out|fc1|fc2/ && $1 !~ /allgather|reducescatter|send|recv/ { t += $3 }
            END { printf "%.6f", t / 1000 }' "$tmp/ops")
near "GEMM column" "$(col 1)" "$gemm" 0.0006
near "predicted" "$(col 14)" "$(jq .iteration_time_s "$tmp/sim.json")" 0.0006
near "TP exposed" "$(col 9)" "$(jq .breakdown.tp_exposed_s "$tmp/sim.json")" 0.0006
[ "$(col 15)" = 2.189 ] || { echo "FAIL: published column $(col 15), want 2.189"; exit 1; }
echo "ok: published 2.189"

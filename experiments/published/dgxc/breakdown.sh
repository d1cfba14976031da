#!/usr/bin/env bash
# breakdown.sh — where each dgxc plan's predicted iteration goes, by op class.
#
#   experiments/published/dgxc/breakdown.sh [TACOSIM] [PLAN NAMES...]
#
# Per plan (default: the nine GB200 rows and the H100 rows of the same models, Llama 3.1 405B on
# 1,024 and Nemotron-4 340B on 256): rank 0's op costs from `tacosim ops` (the first pipeline stage,
# as simulated, costs summed by op name) grouped into classes, and the exposed communication, the
# bubble and the iteration from `tacosim simulate --json` (means over the simulated ranks).
# Classes of op names (rank 0):
#   gemm         qkv, attn_out, fc1, fc2 (forward chunks, dgrad, wgrad)
#   attention    fwd.attn, bwd.attn and their context-parallel pieces (fwd.attn.rowsKofN)
#   elementwise  norms, activation, RoPE, residuals, embedding lookup, the optimizer step
#   tp_comm      the tensor-parallel all-gathers / reduce-scatters (their cost, overlapped or not)
#   pp / dp / cp the stage sends and receives, the .dp collectives, the .cp all-gathers
# Columns in seconds; "exp." = exposed (the iteration waits on it). The sum of rank 0's classes is
# not the iteration: overlapped communication and the bubble are counted apart.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
T=${1:-$ROOT/build/sim/tacosim}
shift || true
plans=("$@")
[ ${#plans[@]} -gt 0 ] || plans=(gb200-405b-128 gb200-405b-256 gb200-405b-512 gb200-n340b-128 gb200-n340b-256
  gb200-n340b-512 gb200-n340b-s128 gb200-n340b-s256 gb200-n340b-s512 h100-405b-1024 h100-n340b-256)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
classify() {
  awk 'NR > 1 && $1 !~ /^#/ {
    n = $1; c = "elementwise"
    if (n ~ /\.dp$/ || n ~ /norm_grads/) c = "dp"
    else if (n ~ /send|recv/) c = "pp"
    else if (n ~ /\.cp$/) c = "cp"
    else if (n ~ /allgather|reducescatter|allreduce|alltoall/) c = "tp"
    else if (n ~ /^(fwd|bwd)\.attn(\.rows[0-9]+of[0-9]+)?$/) c = "attn"
    else if (n ~ /qkv|attn_out|fc1|fc2/) c = "gemm"
    s[c] += $3 / 1000 }
    END { printf "%.3f %.3f %.3f %.3f %.3f %.3f %.3f\n", s["gemm"], s["attn"], s["elementwise"], s["tp"], s["pp"], s["dp"], s["cp"] }'
}
echo "| plan | GEMM | attention | elementwise | TP comm (all) | PP comm | DP comm | CP comm | compute (mean) | TP exp. | PP exp. | DP exp. | CP exp. | bubble | predicted | published |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for p in "${plans[@]}"; do
  f="experiments/published/dgxc/plans/dgxc-$p.json"
  read -r g a e tp pp dp cp < <(cd "$ROOT" && "$T" ops "$f" 2> /dev/null | classify)
  (cd "$ROOT" && "$T" simulate "$f" --json "$tmp/$p.json" > /dev/null 2>&1)
  step=$(jq -r '.description' "$ROOT/$f" | grep -o 'published [0-9.]* s' | grep -o '[0-9.]*' || true)
  jq -r --arg p "$p" --arg row "$g $a $e $tp $pp $dp $cp" --arg pub "${step:--}" '
    ($row | split(" ")) as $r | .breakdown as $b |
    "| \($p) | \($r[0]) | \($r[1]) | \($r[2]) | \($r[3]) | \($r[4]) | \($r[5]) | \($r[6]) | \($b.compute_s*1000|round/1000) | \($b.tp_exposed_s*1000|round/1000) | \($b.pp_exposed_s*1000|round/1000) | \($b.dp_exposed_s*1000|round/1000) | \(($b.cp_exposed_s // 0)*1000|round/1000) | \($b.bubble_s*1000|round/1000) | \(.iteration_time_s*1000|round/1000) | \($pub) |"' "$tmp/$p.json"
done

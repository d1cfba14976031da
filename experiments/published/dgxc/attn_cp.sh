#!/usr/bin/env bash
# attn_cp.sh — how much of each dgxc plan's attention time comes from pricing its context-parallel
# pieces with the executor's attention tables instead of the calibration's cuDNN "fused" tables.
#
#   experiments/published/dgxc/attn_cp.sh [TACOSIM]
#
# tacosim prices attention pieces under context parallelism from the executor's per-shape tables
# (its warning: "CP pieces and MLA have no such points" in "attention_backends"."fused"). For each
# plan this sums rank 0's attention ops (tacosim ops: fwd.attn*, bwd.attn*, the CP all-gathers
# left out) as simulated, and again for a copy of the plan with context_parallel_size 1 and dp x cp
# (the same GPUs; each rank then runs the whole sequence's attention with the fused tables, for
# 1/cp of the micro-batches): the pieces of a causal, load-balanced CP ring add up to 1/cp of the
# whole sequence's attention (plan/README.md, "Context parallelism"), so the copy's rank-0 sum is
# what the original's pieces would cost at the fused tables' rate. The copy runs against
# topologies whose GPUs have 400 GiB (the memory check would refuse it; only the op prices are read).
# Prints, per plan: attention ms on rank 0 as simulated, at the fused rate, and the difference per iteration.
# An estimate, not a simulation: the difference would move the iteration by about that much on a
# stage-balanced pipeline.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../../.." && pwd)"
T=${1:-$ROOT/build/sim/tacosim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$ROOT/topologies" "$tmp/topo"
for g in H100-SXM GB200; do jq '.hbm_gib = 400' "$ROOT/topologies/gpus/$g.json" > "$tmp/topo/gpus/$g.json"; done
attn_ms() { awk '$1 ~ /^(fwd|bwd)\.attn(\.rows[0-9]+of[0-9]+)?$/ { t += $3 } END { printf "%.1f", t }'; }
printf "%-22s %4s %12s %14s %12s\n" plan cp "attn_ms_sim" "attn_ms_fused" "diff_ms"
for p in "$ROOT"/experiments/published/dgxc/plans/dgxc-gb200-405b-128.json "$ROOT"/experiments/published/dgxc/plans/dgxc-h100-405b-1024.json \
         "$ROOT"/experiments/published/dgxc/plans/dgxc-h100-70b-64.json "$ROOT"/experiments/published/dgxc/plans/dgxc-h100-8b-8.json; do
  cp_size=$(jq '.layout.context_parallel_size' "$p")
  a=$(cd "$ROOT" && "$T" ops "$p" 2> /dev/null | attn_ms)
  jq '.layout.dp *= .layout.context_parallel_size | .layout.context_parallel_size = 1' "$p" > "$tmp/cp1.json"
  b=$(cd "$ROOT" && TACOSIM_TOPOLOGIES_DIR="$tmp/topo" "$T" ops "$tmp/cp1.json" 2> /dev/null | attn_ms)
  awk -v n="$(basename "$p" .json)" -v c="$cp_size" -v a="$a" -v b="$b" \
    'BEGIN { printf "%-22s %4d %12.1f %14.1f %12.1f\n", n, c, a, b, a - b }'
done

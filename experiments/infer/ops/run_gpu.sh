#!/usr/bin/env bash
# run_gpu.sh — the per-op profile of the inference plans of plans.sh on one H100 or H200, from the repository
# root, building nothing (BIN: a tacorun built on the CPU machine, its libraries in LIB): each plan with
# `tacorun execute --decode-graph --ops-dir` (TTFT and TPOT timed as the validation runs time them, then 3
# profiled prefills and 3 eager decode steps, infer_prof.h). Outputs in OUT: gpu.txt, summary.txt, ops.tgz.
set -u
BIN=${BIN:-.devbin/v5/tacorun}
LIB=${LIB:-.devbin/h100/lib}
OUT=${OUT:-/tmp/ops}
export LD_LIBRARY_PATH=$PWD/$LIB:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s)
mkdir -p "$OUT/ops"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,memory.total --format=csv,noheader > "$OUT/gpu.txt" 2>&1
date -u >> "$OUT/gpu.txt"
case "$(head -1 "$OUT/gpu.txt")" in
  *H200*) PLANS=experiments/infer/v3/plans ;;
  *H100*) PLANS=experiments/validation/h100/infer-plans ;;
  *) echo "not an H100 or H200: $(head -1 "$OUT/gpu.txt")" | tee "$OUT/summary.txt"; exit 0 ;;
esac
LIMIT=${LIMIT:-300}
files=""
for f in $(experiments/infer/ops/plans.sh); do files="$files $PLANS/$f.json"; done
timeout "$LIMIT" "$BIN" execute $files --decode-graph --json-dir "$OUT/ops" --ops-dir "$OUT/ops" \
  > "$OUT/ops/execute.txt" 2>&1
echo "execute rc=$? ($(($(date +%s) - S)) s), $(ls "$OUT"/ops/*.ops.txt 2> /dev/null | wc -l) profiles" | tee "$OUT/summary.txt"
tar -czf "$OUT/ops.tgz" -C "$OUT" ops && rm -rf "$OUT/ops"

#!/usr/bin/env bash
# run_gpu.sh — the per-op profile of the inference plans of plans.sh on one H100 or H200, from the repository
# root, building nothing (BIN: a tacorun built on the CPU machine, its libraries in LIB): each plan with
# `tacorun execute --decode-graph --ops-dir` (TTFT and TPOT timed as the validation runs time them, then 3
# profiled prefills and 3 eager decode steps, infer_prof.h). Outputs in OUT: gpu.txt, summary.txt, ops.tgz.
set -u
OUT=${OUT:-/tmp/ops}
. scripts/gpu_env.sh
mkdir -p "$OUT/ops"
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
echo "execute rc=$? ($(el) s), $(ls "$OUT"/ops/*.ops.txt 2> /dev/null | wc -l) profiles" | tee "$OUT/summary.txt"
tar -czf "$OUT/ops.tgz" -C "$OUT" ops && rm -rf "$OUT/ops"

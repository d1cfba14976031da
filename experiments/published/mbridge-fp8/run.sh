#!/usr/bin/env bash
# run.sh — predicts the FP8-CS Llama pre-training rows of published.csv (Megatron-Bridge's performance
# summary archive, 25.11) with tacosim and compares tokens/s per GPU with the published figures.
#
#   experiments/published/mbridge-fp8/run.sh [--tacosim PATH] [--work DIR]
#
# Each row's plan is plans/mbridge-fp8-<name>.json; `tacosim simulate PLAN --json` (default calibration of
# the cluster's GPU, reduced mode) gives the iteration time t, and the predicted tokens/s per GPU is
# gbs x seq / (t x gpus). Writes table.txt here (error = predicted / published - 1). Nothing is fitted.
# Options (defaults in brackets):
#   --tacosim PATH   the simulator [build/sim/tacosim]
#   --work DIR       result JSON and stderr of each simulation [experiments/data/work/mbridge-fp8]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
. "$HERE/../set_opts.sh"
set_opts mbridge-fp8 2,13 "$@"
{
  printf '%-16s %-10s %6s %14s %14s %8s %10s\n' row system gpus published predicted error iter_s
  grep -v '^#' "$HERE/published.csv" | tail -n +2 | while IFS=, read -r name sys row gpus prec gbs mbs seq tp pp cp vp tok tfl; do
    plan="$HERE/plans/mbridge-fp8-$name.json"
    "$TACOSIM" simulate "$plan" --json "$WORK/$name.json" > /dev/null 2> "$WORK/$name.err"
    python3 - "$WORK/$name.json" "$name" "$sys" "$gpus" "$gbs" "$seq" "$tok" <<'PY'
import json, sys
res, name, system, gpus, gbs, seq, tok = sys.argv[1:]
t = json.load(open(res))["iteration_time_s"]
pred = int(gbs) * int(seq) / (t * int(gpus))
print("%-16s %-10s %6s %14.0f %14.0f %+7.1f%% %10.3f" % (name, system, gpus, float(tok), pred, 100 * (pred / float(tok) - 1), t))
PY
  done
} | tee "$HERE/table.txt"

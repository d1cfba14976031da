#!/usr/bin/env bash
# predict.sh — `tacosim ops` of the profiled inference plans (run_gpu.sh's list), into
# predicted-h100/ and predicted-h200/ (each GPU's shipped default calibration), from the repository root.
set -eu
SIM=${SIM:-build/sim/tacosim}
for g in h100 h200; do
  case $g in
    h100) PLANS=experiments/validation/h100/infer-plans ;;
    h200) PLANS=experiments/infer/v3/plans ;;
  esac
  mkdir -p experiments/infer/ops/predicted-$g
  for f in $(experiments/infer/ops/plans.sh); do
    "$SIM" ops "$PLANS/$f.json" 2> /dev/null | sed "s|$PWD/||g" > experiments/infer/ops/predicted-$g/$f.ops.txt
  done
done

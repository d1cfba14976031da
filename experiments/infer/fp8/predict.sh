#!/bin/bash
# Predicts a folder of one-GPU inference validation plans (PLANS/*.json; default: the FP8 KV cache
# plans, experiments/infer/fp8/plans) with tacosim simulate on the shipped default calibration (no
# --calibration flag: calibration/h200-nvlink.json for the h200x2-nvlink cluster). Run before the
# measured run and commit. experiments/infer/v3/predict.sh runs it on the v3 set.
# usage: experiments/infer/fp8/predict.sh [OUTD (experiments/infer/fp8/predicted)] [PLANS (experiments/infer/fp8/plans)]
#        [SIMULATE OPTIONS... (none), e.g. --decode graph]   (SIM= tacosim, default build/sim/tacosim)
set -eu
cd "$(dirname "$0")/../../.."
SIM=${SIM:-build/sim/tacosim}
OUTD=${1:-experiments/infer/fp8/predicted}
PLANS=${2:-experiments/infer/fp8/plans}
shift $(( $# < 2 ? $# : 2 ))
mkdir -p "$OUTD"
: > "$OUTD/warnings.txt"
for f in "$PLANS"/*.json; do
  n=$(basename "$f" .json)
  "$SIM" simulate "$f" "$@" --json "$OUTD/$n.json" > "$OUTD/$n.txt" 2>> "$OUTD/warnings.txt"
done
sort -u "$OUTD/warnings.txt" -o "$OUTD/warnings.txt"
echo "$(ls "$OUTD"/*.json | wc -l) predictions in $OUTD ($(wc -l < "$OUTD/warnings.txt") distinct warnings)"

#!/bin/bash
# Predicts the FP8 KV cache validation plans (plans/*.json) with tacosim simulate on the shipped
# default calibration (no --calibration flag: calibration/h200-nvlink.json for the h200x2-nvlink
# cluster). Run before the measured run and commit.
# usage: experiments/infer/fp8/predict.sh [OUTD (experiments/infer/fp8/predicted)]   (SIM= tacosim, default build/sim/tacosim)
set -eu
cd "$(dirname "$0")/../../.."
SIM=${SIM:-build/sim/tacosim}
OUTD=${1:-experiments/infer/fp8/predicted}
mkdir -p "$OUTD"
: > "$OUTD/warnings.txt"
for f in experiments/infer/fp8/plans/*.json; do
  n=$(basename "$f" .json)
  "$SIM" simulate "$f" --json "$OUTD/$n.json" > "$OUTD/$n.txt" 2>> "$OUTD/warnings.txt"
done
sort -u "$OUTD/warnings.txt" -o "$OUTD/warnings.txt"
echo "$(ls "$OUTD"/*.json | wc -l) predictions in $OUTD ($(wc -l < "$OUTD/warnings.txt") distinct warnings)"

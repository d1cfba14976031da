#!/bin/bash
# Predicts the inference validation plans of decode attention v3 (Llama-3 8B, Qwen2.5 7B and 14B, TP 1) (plans/*.json) with tacosim simulate on the shipped
# default calibration (no --calibration flag: calibration/h200-nvlink.json for the h200x2-nvlink
# cluster). Run before the measured run and commit.
# usage: experiments/infer/v3/predict.sh [OUTD (experiments/infer/v3/predicted)]   (SIM= tacosim, default build/sim/tacosim)
set -eu
cd "$(dirname "$0")/../../.."
SIM=${SIM:-build/sim/tacosim}
OUTD=${1:-experiments/infer/v3/predicted}
mkdir -p "$OUTD"
: > "$OUTD/warnings.txt"
for f in experiments/infer/v3/plans/*.json; do
  n=$(basename "$f" .json)
  "$SIM" simulate "$f" --json "$OUTD/$n.json" > "$OUTD/$n.txt" 2>> "$OUTD/warnings.txt"
done
sort -u "$OUTD/warnings.txt" -o "$OUTD/warnings.txt"
echo "$(ls "$OUTD"/*.json | wc -l) predictions in $OUTD ($(wc -l < "$OUTD/warnings.txt") distinct warnings)"

#!/bin/bash
# Predicts every validation plan with tacosim simulate, using the calibration files that
# carry the inference tables (experiments/infer/calibration/h200-<transport>.json, written by
# `tacorun calibrate-infer` on the GPU machine). Run before the measured run and commit.
# Usage: experiments/infer/predict.sh   (SIM= the tacosim binary, default build/sim/tacosim)
# CAL=default OUTD=experiments/infer/predicted-default: tacosim's own default calibration (no flag),
# then experiments/infer/table.sh experiments/infer/predicted-default gives the medians.
set -eu
cd "$(dirname "$0")/../.."
SIM=${SIM:-build/sim/tacosim}
CAL=${CAL:-experiments/infer/calibration}
OUTD=${OUTD:-experiments/infer/predicted}
mkdir -p "$OUTD"
# The tree keeps the inference calibrations gzipped (h200-<transport>.json.gz); the JSON beside it is
# unpacked on first use (git-ignored), so the path the predictions record stays the same.
for gz in "$CAL"/h200-*.json.gz; do [ -f "$gz" ] && [ ! -f "${gz%.gz}" ] && gzip -cd "$gz" > "${gz%.gz}"; done
: > "$OUTD/warnings.txt"
for f in experiments/infer/plans/infer-v-*.json; do
  n=$(basename "$f" .json)
  tr=$(echo "$n" | cut -d- -f3)
  cal=(--calibration "$CAL/h200-$tr.json")
  [ "$CAL" = default ] && cal=()
  "$SIM" simulate "$f" "${cal[@]}" --json "$OUTD/$n.json" > /dev/null 2>> "$OUTD/warnings.txt"
done
echo "$(ls "$OUTD"/infer-v-*.json | wc -l) predictions in $OUTD ($(sort -u "$OUTD/warnings.txt" | wc -l) distinct warnings)"

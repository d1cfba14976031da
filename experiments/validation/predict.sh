#!/usr/bin/env bash
# predict.sh — `tacosim simulate` of every plan in plans.txt, BEFORE it is
# measured: writes predicted/<tag>.json and predicted/README (the commit and the
# calibration files used). Runs from the repository root (the validation plans
# name their model by a path from there).
# usage: experiments/validation/predict.sh [TACOSIM]   (default build-final/sim/tacosim)
# PRED_DIR (default predicted): where to write; WHEN (default "before the GPU run"):
# said in the README (a re-prediction after the run says so); CALIB_DIR: take
# calibration/h200-<transport>.json from this folder instead of the default.
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM=${1:-build-final/sim/tacosim}
V=experiments/validation
P=$V/${PRED_DIR:-predicted}
mkdir -p $P
{
  echo "# predicted $(date -u +%FT%TZ) by $SIM at commit $(git rev-parse --short HEAD), ${WHEN:-before the GPU run}"
} >$P/README
grep -v '^#' $V/plans.txt | while read -r tag plan transport ranks; do
  cal=()
  [ -n "${CALIB_DIR:-}" ] && cal=(--calibration "$CALIB_DIR/h200-$transport.json")
  "$SIM" simulate "$plan" "${cal[@]}" --json "$P/$tag.json" >"$P/$tag.txt" 2>&1
  printf "%-24s %s  %s\n" "$tag" "$(grep -E '^iteration' $P/$tag.txt)" \
    "$(grep -E '^calibration' $P/$tag.txt | awk '{print $2}')" | tee -a $P/README
done

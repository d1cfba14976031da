#!/usr/bin/env bash
# predict.sh — `tacosim simulate` of every plan in plans.txt, BEFORE it is
# measured: writes predicted/<tag>.json and predicted/README (the commit and the
# calibration files used). Runs from the repository root (the validation plans
# name their model by a path from there).
# usage: experiments/validation/predict.sh [TACOSIM]   (default build-exec2/sim/tacosim)
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM=${1:-build-exec2/sim/tacosim}
V=experiments/validation
mkdir -p $V/predicted
{
  echo "# predicted $(date -u +%FT%TZ) by $SIM at commit $(git rev-parse --short HEAD), before the GPU run"
} >$V/predicted/README
grep -v '^#' $V/plans.txt | while read -r tag plan transport ranks; do
  "$SIM" simulate "$plan" --json "$V/predicted/$tag.json" >"$V/predicted/$tag.txt" 2>&1
  printf "%-24s %s  %s\n" "$tag" "$(grep -E '^iteration' $V/predicted/$tag.txt)" \
    "$(grep -E '^calibration' $V/predicted/$tag.txt | awk '{print $2}')" | tee -a $V/predicted/README
done

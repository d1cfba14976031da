#!/usr/bin/env bash
# predict.sh — `tacosim simulate` of every zoo plan (plans/*.json) with the
# shipped default calibration, BEFORE the plans are measured: writes
# predicted/<name>.json, .txt and predicted/README (commit, calibration, when).
# Runs from the repository root. usage: [ZOO_DIR=FOLDER] experiments/validation/zoo/predict.sh [TACOSIM]
set -euo pipefail
cd "$(dirname "$0")/../../.."
SIM=${1:-build/sim/tacosim}
Z=${ZOO_DIR:-experiments/validation/zoo} # ZOO_DIR: another folder of plans/ (experiments/validation/zoo2)
mkdir -p $Z/predicted
echo "# predicted $(date -u +%FT%TZ) by $SIM at commit $(git rev-parse --short HEAD), ${WHEN:-before the GPU run}; default calibration" >$Z/predicted/README
for plan in $Z/plans/*.json; do
  n=$(basename "$plan" .json)
  "$SIM" simulate "$plan" --json $Z/predicted/$n.json >$Z/predicted/$n.txt 2>&1
  printf "%-36s %s  %s\n" "$n" "$(grep -E '^iteration' $Z/predicted/$n.txt)" \
    "$(grep -E '^calibration' $Z/predicted/$n.txt | awk '{print $2}' | sed "s|$PWD/||")" | tee -a $Z/predicted/README
done

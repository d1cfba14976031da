#!/usr/bin/env bash
# The main job on the shipped defaults: summarise the GPT-3 175B plan on the
# 1,024-GPU H200 cluster, then predict one iteration without and with TACO
# and CAAT-Net, and compare the predictions.
set -euo pipefail
cd "$(dirname "$0")/.."
TACOSIM=build/sim/tacosim
mkdir -p out
$TACOSIM plan experiments/plans/gpt3-175b-1024.json
for variant in gpt3-175b-1024 gpt3-175b-1024-taco gpt3-175b-1024-caat; do
  plan=experiments/plans/$variant.json
  [ -f "$plan" ] || continue
  echo
  echo "== $variant =="
  $TACOSIM simulate "$plan" --json "out/$variant.json" --csv "out/$variant.csv"
done
echo
echo "results in out/ (JSON and CSV)"

#!/usr/bin/env bash
# predict_then_measure.sh — one GPU call that calibrates, predicts and measures,
# in an order that keeps every prediction ahead of its measurement and each
# transport's calibration next to its timed runs (the socket transport drifts
# 10-35 % between runs; calibration/README.md):
#   1. calibration/run_gpu.sh nvlink shm   compute tables + NVLink and shm collectives
#   2. exec_gpu.sh check predict timed-nvlink timed-shm
#   3. calibration/run_gpu.sh socket       socket collectives on step 1's compute tables
#   4. exec_gpu.sh predict timed-socket pack
#   5. the calibration folder into calib.tgz
# The predictions are written by the bundled tacosim on the GPU machine (stage
# predict of exec_gpu.sh) before the plans run; predicted/README has the times.
# Builds nothing. Needs BIN (tacorun) and SIM_BUNDLE (scripts/bundle-tacosim.sh)
# from the CPU machine. Files in $OUT: calib.tgz predicted.tgz results.tgz
# check.txt timing.txt summary.txt machine.txt.
set -u
cd "$(dirname "$0")/../.."
export OUT=${OUT:-/tmp/ptm-out} BIN=${BIN:-.devbin/lead/tacorun} SIM_BUNDLE=${SIM_BUNDLE:-.devbin/lead/tacosim.tar.xz}
export CALIB=$OUT/calib
mkdir -p "$CALIB"
V=experiments/validation
OUT=$CALIB calibration/run_gpu.sh nvlink shm
$V/exec_gpu.sh check predict timed-nvlink timed-shm
OUT=$CALIB COMPUTE_FROM=$CALIB/h200-nvlink.json calibration/run_gpu.sh socket
$V/exec_gpu.sh predict timed-socket pack
cat "$CALIB/summary.txt" >>"$OUT/summary.txt" 2>/dev/null
tar -czf "$OUT/calib.tgz" -C "$OUT" calib && rm -rf "$CALIB"
ls -la "$OUT"

#!/usr/bin/env bash
# run_gpu.sh — the power phase of `tacorun calibrate` on one GPU, from the repository root, building nothing (BIN:
# a tacorun built on the CPU machine, its libraries in LIB; NVML comes from the driver, libnvidia-ml.so.1):
#  1. gpu.txt: nvidia-smi's name, driver, power limit and max SM clock, and the date;
#  2. `tacorun calibrate --only power --power-json power.json --power-tsv power.tsv` (~40 s; its progress, one
#     line per pattern, in power.log). `calibrate` reads no calibration file and --only power writes none: the
#     compute tables (calibration/h100-sxm-nvlink.json, calibration/h200-nvlink.json) are neither needed nor touched.
#     Arguments are passed on to calibrate (e.g. --power-gemm MxNxK, repeatable).
# Outputs in OUT: gpu.txt, power.json, power.tsv, power.log, summary.txt (each step's exit status).
set -u
BIN=${BIN:-.devbin/v5/tacorun}
LIB=${LIB:-.devbin/h100/lib}
O=${OUT:-/tmp/power}
export LD_LIBRARY_PATH=$PWD/$LIB:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
mkdir -p "$O"
S=$(date +%s)
say() { echo "$*" | tee -a "$O/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader > "$O/gpu.txt" 2>&1
say "gpu rc=$? ($(head -1 "$O/gpu.txt"))"
date -u >> "$O/gpu.txt"
timeout 240 "$BIN" calibrate --only power --power-json "$O/power.json" --power-tsv "$O/power.tsv" "$@" > "$O/power.log" 2>&1
say "power rc=$? ($(($(date +%s) - S)) s)"
say "power: $(grep -c '] power: ' "$O/power.log") progress lines, $(grep -c '"name"' "$O/power.json" 2> /dev/null) samples"
tail -3 "$O/power.log" >> "$O/summary.txt"
say "done in $(($(date +%s) - S)) s"

#!/usr/bin/env bash
# run_gpu.sh — the power phase of `tacorun calibrate` on one GPU, from the repository root, building nothing (BIN:
# a tacorun built on the CPU machine, its libraries in LIB; NVML comes from the driver, libnvidia-ml.so.1):
#  1. gpu.txt (scripts/gpu_env.sh: nvidia-smi's name, driver, clocks, power limit, memory, and the date);
#  2. `tacorun calibrate --only power --power-json power.json --power-tsv power.tsv` (~40 s; its progress, one
#     line per pattern, in power.log). `calibrate` reads no calibration file and --only power writes none: the
#     compute tables (calibration/h100-sxm-nvlink.json, calibration/h200-nvlink.json) are neither needed nor touched.
#     Arguments are passed on to calibrate (e.g. --power-gemm MxNxK, repeatable).
# Outputs in OUT: gpu.txt, power.json, power.tsv, power.log, summary.txt (each step's exit status).
set -u
OUT=${OUT:-/tmp/power}
. scripts/gpu_env.sh
say "gpu: $(head -1 "$OUT/gpu.txt")"
timeout 240 "$BIN" calibrate --only power --power-json "$OUT/power.json" --power-tsv "$OUT/power.tsv" "$@" > "$OUT/power.log" 2>&1
say "power rc=$? ($(el) s)"
say "power: $(grep -c '] power: ' "$OUT/power.log") progress lines, $(grep -c '"name"' "$OUT/power.json" 2> /dev/null) samples"
tail -3 "$OUT/power.log" >> "$OUT/summary.txt"
say "done in $(el) s"

#!/bin/bash
# run_gpu.sh — tpo_sm.cu on one GPU (about a minute), from the repository root: builds it with nvcc
# (or uses $BIN), measures the GEMMs of two layer shapes beside n = 24, 16, 8, 4, 2 and 1 held SMs (TE's defaults 16 and 1; NeMo's configurations 2-24), and writes
# $OUT/tpo-sm-*.txt and $OUT/gpu.txt (default OUT=/tmp). Compare each ratio column with the last one
# (the simulator's sms / (sms - n)); README.md says what each column is.
set -u
O=${OUT:-/tmp}
B=${BIN:-}
if [ -z "$B" ]; then
  B=$O/tpo_sm
  nvcc -O2 -arch=sm_90 -o "$B" calibration/tpo-sm/tpo_sm.cu -lcublasLt || { echo "run_gpu.sh: nvcc failed" >&2; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > "$O/gpu.txt" 2>&1
date -u >> "$O/gpu.txt"
# GPT-3 175B, TP 8, micro 1 x seq 2048 (the main job); Llama 3.1 70B, TP 4, micro 1 x seq 8192 (dgxc, CP 2: 4096 tokens)
timeout 200 "$B" --hidden 12288 --tp 8 --tokens 2048 --sms-held 24,16,8,4,2,1 > "$O/tpo-sm-gpt3-175b-tp8.txt" 2>&1; echo "gpt3-175b rc=$?"
timeout 200 "$B" --hidden 8192 --tp 4 --tokens 4096 --sms-held 24,16,8,4,2,1 > "$O/tpo-sm-llama3-70b-tp4.txt" 2>&1; echo "llama3-70b rc=$?"
cat "$O"/tpo-sm-*.txt

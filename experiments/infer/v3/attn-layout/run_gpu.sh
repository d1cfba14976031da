#!/bin/bash
# One H200, from the repository root (binaries under .devbin/$BIN): decode attention v3 (BF16 and
# FP8 cache) timed by bench-decode for the three inference models' head layouts in one call, to see
# whether equal KV bytes take equal time across layouts (the shipped table is Llama-3 8B's only).
set -u
R=$PWD/.devbin/${BIN:-s1}; O=${OUT:-/tmp/attn-layout}; mkdir -p $O
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s); el() { echo $(( $(date +%s) - S )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $O/gpu.txt 2>&1; date -u >> $O/gpu.txt
for m in llama3-8b qwen2.5-7b qwen2.5-14b; do
  timeout 150 $R/tacorun bench-decode --model $m --attention-only --attention v3,v3fp8 --kv 128,512,1024,2048,4096,8192 > $O/bench_decode-$m.txt 2>&1
  echo "$m rc=$? $(el) s"
done
grep -h "^decode attention" $O/bench_decode-*.txt | head -3

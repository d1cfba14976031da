#!/bin/bash
# One H200, from the repository root (binaries under .devbin/$BIN/dev, libraries under .devbin/$BIN/lib):
# dev_decode_gemm_algos for the three inference models at batch 1, 4, 16; outputs in $OUT (default /tmp).
set -u
R=$PWD/.devbin/${BIN:-s3}; O=${OUT:-/tmp}
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $O/gpu.txt 2>&1; date -u >> $O/gpu.txt
for m in llama3-8b qwen2.5-7b qwen2.5-14b; do
  timeout 250 $R/dev/dev_decode_gemm_algos --model $m --batches 1,4,16 > $O/algos-$m.txt 2>&1
  echo "$m rc=$?"
done
grep -h "four projections\|checks" $O/algos-*.txt

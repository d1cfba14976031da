#!/bin/bash
# One H200, from the repository root (binaries under .devbin/$BIN): the decode attention checks of the
# zoo's other head layouts (bench-decode --check: G 1, 6, 8, 16 query heads a KV head), then
# calibrate-infer --decode-attention-only on copies of the three shipped H200 files: decode attention
# v3 and v3fp8 for every G of the zoo's head-dim-128 models at 1, 2, 4, 8 KV heads a GPU x batch
# 1..64 x length 128..8,192, grouped by batch x KV heads (the same measurement written into each file).
set -u
R=$PWD/.devbin/${BIN:-s3}; O=${OUT:-/tmp/attn-cal}; mkdir -p $O/cal
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s); el() { echo $(( $(date +%s) - S )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $O/gpu.txt 2>&1; date -u >> $O/gpu.txt
for m in gpt3-6.7b mixtral-8x22b llama3-70b qwen3-235b-a22b; do
  timeout 120 $R/tacorun bench-decode --model $m --check --attention v3,v3fp8 > $O/check-$m.txt 2>&1
  echo "check $m rc=$? $(el) s: $(grep -ci fail $O/check-$m.txt) lines say fail"; tail -2 $O/check-$m.txt
done
timeout 420 $R/tacorun calibrate-infer calibration/h200-nvlink.json calibration/h200-shm.json calibration/h200-socket.json \
  --decode-attention-only --models $PWD/models --out-dir $O/cal 2> $O/calibrate.err
echo "calibrate-infer rc=$? $(el) s"; grep "calibrate-infer:" $O/calibrate.err | tail -12
for f in $O/cal/*.json; do gzip -9 $f; done

#!/bin/bash
# One H200, from the repository root (binaries under .devbin/$BIN): calibrate-infer
# --decode-attention-only on a copy of the shipped calibration: decode attention v3 and v3fp8 for
# 1, 2, 4, 8 KV heads of 128 (4 query heads each) x batch 1..64 x length 128..8,192, grouped by
# batch x KV heads; merged into the shipped files by calibration/merge_infer.py.
set -u
R=$PWD/.devbin/${BIN:-s2}; O=${OUT:-/tmp/attn-cal}; mkdir -p $O/cal
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s); el() { echo $(( $(date +%s) - S )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $O/gpu.txt 2>&1; date -u >> $O/gpu.txt
timeout 400 $R/tacorun calibrate-infer calibration/h200-nvlink.json --decode-attention-only --models $PWD/models --out-dir $O/cal > $O/decode_attention.tsv 2> $O/calibrate.err
echo "calibrate-infer rc=$? $(el) s"; tail -3 $O/calibrate.err; wc -l $O/decode_attention.tsv
gzip -9 $O/cal/h200-nvlink.json && mv $O/cal/h200-nvlink.json.gz $O/calibrate-infer.json.gz && rmdir $O/cal

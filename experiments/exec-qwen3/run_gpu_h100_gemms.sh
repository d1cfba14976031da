#!/usr/bin/env bash
# run_gpu_h100_gemms.sh — on one H100, from the repository root, building nothing: the decode-sized GEMMs the H100's
# file lacks (`tacorun calibrate-infer --decode-gemms-only`: every zoo model's QKV, attention output, FC1, FC2 and
# logits at m = 1..64, TP 1/2/4/8; shapes the file has are kept, so the dense Qwen3 8B / 14B / 32B added to the zoo
# on 2026-12-07 are what gets timed), for calibration/h100-sxm-nvlink.json (merge: copy OUT's file over it after
# checking its diff adds only "gemm_infer" points). usage: OUT=DIR run_gpu_h100_gemms.sh [LIMIT_S (200)]
set -u
BIN=${BIN:-.devbin/v5/tacorun}
LIB=${LIB:-.devbin/h100/lib}
OUT=${OUT:-/tmp/h100gemm}
export LD_LIBRARY_PATH=$PWD/$LIB:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
nvidia-smi -L | grep -q H100 || { echo "not an H100: $(nvidia-smi -L | head -1)"; exit 0; }
mkdir -p "$OUT/gemm"
S=$(date +%s)
timeout "${1:-200}" "$BIN" calibrate-infer calibration/h100-sxm-nvlink.json --out-dir "$OUT/gemm" --models models \
  --decode-gemms-only > "$OUT/gemm/gemm.log" 2>&1
echo "calibrate-infer --decode-gemms-only rc=$? ($(($(date +%s) - S)) s)"
tail -3 "$OUT/gemm/gemm.log"
tar -czf "$OUT/gemm.tgz" -C "$OUT" gemm && rm -rf "$OUT/gemm"

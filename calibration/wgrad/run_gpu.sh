#!/usr/bin/env bash
# run_gpu.sh — the GEMM table alone, both accumulation classes of every key (tacorun calibrate
# --only gemm: "gemm" and "gemm_wgrad"), on the GPU of this machine, for calibration/merge_wgrad.py (calibration/wgrad/README.md).
# From the repository root, building nothing (BIN, LIB as calibration/h100/run_gpu.sh). Outputs in OUT: gemm.json,
# gemm.tsv (every pass of every key, with its layout), machine.txt, summary.txt.
set -u
BIN=${BIN:-.devbin/h100/tacorun}
LIB=${LIB:-.devbin/h100/lib}
OUT=${OUT:-/tmp/gemm-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$LIB:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models
S=$(date +%s)
{ nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv; date -u; } >"$OUT/machine.txt" 2>&1
models="$(ls models/*.json | paste -sd,),experiments/validation/models/swiglu-h4096.json"
timeout "${CAL_S:-240}" "$BIN" calibrate --only gemm --transport-name nvlink --models "$models" \
  --gemm-passes "${GEMM_PASSES:-4}" --gemm-tsv "$OUT/gemm.tsv" --out "$OUT/gemm.json" >"$OUT/gemm.log" 2>&1
echo "calibrate gemm rc=$? ($(($(date +%s) - S)) s): $(grep -m1 wrote "$OUT/gemm.log")" | tee "$OUT/summary.txt"
grep -E 'passes 1 and 2|gemm: pass' "$OUT/gemm.log" | tee -a "$OUT/summary.txt"
gzip -9 "$OUT/gemm.tsv" "$OUT/gemm.log"

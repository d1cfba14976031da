#!/usr/bin/env bash
# run_gpu.sh — the compute tables of one H100 in one GPU call (the file
# calibration/h100-sxm-nvlink.json is assembled from them on the CPU machine by
# calibration/h100/assemble.sh). Run from the repository root; builds nothing:
# BIN is a tacorun built on the CPU machine, its libraries in LIB.
# Outputs in $OUT (at most 8 files):
#   compute.json        tacorun calibrate --only gemm,attention,memory,clock,codec,moe,host
#   infer.json          compute.json + calibrate-infer --quick (decode GEMMs, decode and prefill attention)
#   attn-fused.json     attn_cudnn.py --backends fused (cuDNN SDPA) at the attention_shapes of compute.json
#   attn-fused-dropout.json  the same with --dropout 0.1
#   logs.tgz            progress logs, every GEMM pass (gemm.tsv), clock points, SM clock / power samples
#   summary.txt         one line per stage
set -u
BIN=${BIN:-.devbin/h100/tacorun}
LIB=${LIB:-.devbin/h100/lib}
OUT=${OUT:-/tmp/h100-out}
L=$OUT/logs
mkdir -p "$L"
export LD_LIBRARY_PATH=$PWD/$LIB:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TACOSIM_MODELS_DIR=$PWD/models
START=$(date +%s)
say() { echo "$*" | tee -a "$OUT/summary.txt"; }
elapsed() { echo $(($(date +%s) - START)); }
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit,power.max_limit,memory.total --format=csv
  nvidia-smi -q -d POWER,CLOCK | head -60
  lscpu | grep -E 'Model name|^CPU\(s\)'
  python3 -c 'import torch; print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version())' 2>&1
  date -u
} >"$L/machine.txt" 2>&1
head -3 "$L/machine.txt" | tee -a "$OUT/summary.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 250 >"$L/clocks.csv" 2>/dev/null &
SMI=$!
models="$(ls models/*.json | paste -sd,),experiments/validation/models/swiglu-h4096.json"

timeout "${CAL_S:-280}" "$BIN" calibrate --only gemm,attention,memory,clock,codec,moe,host --transport-name nvlink \
  --models "$models" --gemm-passes "${GEMM_PASSES:-4}" --gemm-tsv "$L/gemm.tsv" --clock-tsv "$L/clock.tsv" \
  --attn-tsv "$L/attn.tsv" --moe-tsv "$L/moe.tsv" --out "$OUT/compute.json" >"$L/calibrate.log" 2>&1
say "calibrate rc=$? ($(elapsed) s): $(grep -m1 wrote "$L/calibrate.log")"
grep -E 'passes 1 and 2|settle|gemm: pass|clock: window' "$L/calibrate.log" | tee -a "$OUT/summary.txt"

if [ -f "$OUT/compute.json" ]; then
  timeout "${ATTN_S:-110}" python3 calibration/attn_cudnn.py --shapes "$OUT/compute.json" --out "$OUT/attn-fused.json" \
    --backends fused --budget-s "${ATTN_BUDGET_S:-85}" >"$L/attn-fused.log" 2>&1
  say "attn fused rc=$? ($(elapsed) s): $(tail -1 "$L/attn-fused.log")"
  timeout "${ATTN_S:-110}" python3 calibration/attn_cudnn.py --shapes "$OUT/compute.json" --out "$OUT/attn-fused-dropout.json" \
    --backends fused --dropout 0.1 --budget-s "${ATTN_BUDGET_S:-85}" >"$L/attn-dropout.log" 2>&1
  say "attn fused dropout rc=$? ($(elapsed) s): $(tail -1 "$L/attn-dropout.log")"
  cp "$OUT/compute.json" "$OUT/infer.json"
  timeout "${INFER_S:-100}" "$BIN" calibrate-infer "$OUT/infer.json" --quick --models models >"$L/infer.log" 2>&1
  rc=$?
  say "calibrate-infer rc=$rc ($(elapsed) s): $(tail -1 "$L/infer.log")"
  [ $rc = 0 ] || rm -f "$OUT/infer.json"
fi
kill $SMI 2>/dev/null
awk -F', *' '{ c[NR] = $2; p[NR] = $3 } END { n = asort(c); asort(p); if (n) printf "SM clock median %d MHz (min %d, max %d), power median %.0f W (max %.0f), %d samples\n", c[int((n + 1) / 2)], c[1], c[n], p[int((n + 1) / 2)], p[n], n }' "$L/clocks.csv" | tee -a "$OUT/summary.txt"
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
say "done in $(elapsed) s"

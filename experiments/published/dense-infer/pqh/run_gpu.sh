#!/bin/bash
# run_gpu.sh — the per-query-head decode attention tables (sim/INFERENCE.md, "A measured per-query-head table") of
# one H100 or H200, from the repository root; builds nothing (BIN is a tacorun built elsewhere):
#   1. tacorun execute --infer-check: every inference check, the per-query-head kernel's among them (BF16 and FP8
#      caches, G 4 and 8); their lines go to check-pqh.txt; stops (exit 1) if any check fails;
#   2. tacorun calibrate-infer CAL --decode-attention-only --per-query-head --out-dir OUT/cal: the tables
#      "attention_decode_pqh[_fp8].g<G>" added to a copy of CAL (CAL's other tables as they are).
# Environment:
#   BIN  tacorun [.devbin/pqh/tacorun]
#   LIB  a folder put first on LD_LIBRARY_PATH, relative to the repository root or absolute: the libraries BIN
#        needs that the machine lacks (libjansson.so.4; the script names any still missing) [.devbin/pqh/lib]
#   OUT  where the outputs go [/tmp/pqh]: gpu.txt, check.txt, check-pqh.txt, calibrate.txt, cal/<CAL's name>
#   CAL  the calibration file the tables join [calibration/h200-nvlink.json on an H200, else
#        calibration/h100-sxm-nvlink.json]
#   CHECK_S, CAL_S  time limits of the two steps in seconds [120, 400]
# Merge afterwards (on the CPU machine):
#   python3 calibration/merge_decode_attn.py --tables-from OUT/cal/<name> --per-query-head CAL
set -u
BIN=${BIN:-.devbin/pqh/tacorun}
LIB=${LIB:-.devbin/pqh/lib}
case "$LIB" in /*) ;; *) LIB=$PWD/$LIB ;; esac
O=${OUT:-/tmp/pqh}
mkdir -p "$O/cal"
export LD_LIBRARY_PATH=$LIB:${LD_LIBRARY_PATH:-}${LD_LIBRARY_PATH:+:}/usr/local/cuda/lib64
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies NCCL_NVLS_ENABLE=0
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$name" in
  *H200*) cal=${CAL:-calibration/h200-nvlink.json} ;;
  *) cal=${CAL:-calibration/h100-sxm-nvlink.json} ;;
esac
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total,power.limit --format=csv,noheader
  date -u
  echo "BIN $BIN; CAL $cal"
} > "$O/gpu.txt" 2>&1
cat "$O/gpu.txt"
ldd "$BIN" | grep -i "not found" && echo "a library is missing (LIB=$LIB)"
S=$(date +%s)
timeout "${CHECK_S:-120}" "$BIN" execute --infer-check > "$O/check.txt" 2>&1
rc=$?
grep "per query head" "$O/check.txt" > "$O/check-pqh.txt"
cat "$O/check-pqh.txt"
tail -1 "$O/check.txt"
echo "infer-check rc=$rc ($(($(date +%s) - S)) s)"
if [ $rc -ne 0 ] || [ ! -s "$O/check-pqh.txt" ] || grep -q "^FAIL" "$O/check.txt"; then
  echo "check failed or missing: no tables"
  tail -5 "$O/check.txt"
  exit 1
fi
S=$(date +%s)
timeout "${CAL_S:-400}" "$BIN" calibrate-infer "$cal" --decode-attention-only --per-query-head --out-dir "$O/cal" \
  > "$O/calibrate.txt" 2>&1
rc=$?
cat "$O/calibrate.txt"
echo "calibrate-infer rc=$rc ($(($(date +%s) - S)) s)"
exit $rc

#!/bin/bash
# run_attn_gpu.sh — what the decode-attention drivers' run_gpu.sh share (dev/decode_attn_fp8, dev/decode_attn_pqh),
# from the repository root on one H100 or H200:
#   run_attn_gpu.sh BIN OUT CHECK_S TIME_S
# BIN --check (stops with 1 if a check fails), then BIN's timing at --peak-gbps 4800 (H200) or 3350 (H100), each
# within its timeout. LIB (environment): a folder, relative to the repository root, put first on LD_LIBRARY_PATH.
# Writes OUT/gpu.txt, check.txt, timing.txt; exits with the timing's status.
set -u
BIN=$1 O=$2 CHECK_S=$3 TIME_S=$4
mkdir -p "$O"
# the binary needs libcudart.so.13 besides the C/C++ runtime: LIB first, the CUDA toolkit's folders last
export LD_LIBRARY_PATH=${LIB:+$PWD/$LIB:}${LD_LIBRARY_PATH:-}${LD_LIBRARY_PATH:+:}/usr/local/cuda/lib64:/usr/local/cuda/lib
name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
case "$name" in
  *H200*) peak=4800 ;;
  *H100*) peak=3350 ;;
  *) peak=3350; echo "unknown GPU '$name': --peak-gbps $peak" ;;
esac
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total,power.limit --format=csv,noheader
  date -u
  echo "peak $peak GB/s; BIN $BIN"
} > "$O/gpu.txt" 2>&1
ldd "$BIN" | grep -i "not found" && echo "a library is missing (LIB=${LIB:-})"
timeout "$CHECK_S" "$BIN" --check > "$O/check.txt" 2>&1
rc=$?
tail -1 "$O/check.txt"
if [ $rc -ne 0 ]; then
  echo "check failed (rc=$rc): no timing"
  tail -5 "$O/check.txt"
  exit 1
fi
timeout "$TIME_S" "$BIN" --peak-gbps $peak --reps 20 > "$O/timing.txt" 2>&1
rc=$?
echo "timing rc=$rc"
cat "$O/timing.txt"
exit $rc

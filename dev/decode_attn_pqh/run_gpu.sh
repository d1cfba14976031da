#!/bin/bash
# One H100 or H200, from the repository root: dev_decode_attn_pqh --check (stops if a check
# fails), then its timing at --peak-gbps 4800 (H200) or 3350 (H100). Environment:
#   BIN  the driver (default build/dev/dev_decode_attn_pqh)
#   LIB  a folder, relative to the repository root, put first on LD_LIBRARY_PATH (default: none)
#   OUT  where the outputs go (default /tmp): gpu.txt, check.txt, timing.txt
# About 20-60 s in all (checks < 30 s; the timing's largest cache: the copies' 24 GiB at
# Llama 2 70B TP 1, batch 192 x 4,096, BF16).
set -u
BIN=${BIN:-build/dev/dev_decode_attn_pqh}
O=${OUT:-/tmp}
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
timeout 45 "$BIN" --check > "$O/check.txt" 2>&1
rc=$?
tail -1 "$O/check.txt"
if [ $rc -ne 0 ]; then
  echo "check failed (rc=$rc): no timing"
  tail -5 "$O/check.txt"
  exit 1
fi
timeout 70 "$BIN" --peak-gbps $peak --reps 20 > "$O/timing.txt" 2>&1
rc=$?
echo "timing rc=$rc"
cat "$O/timing.txt"
exit $rc

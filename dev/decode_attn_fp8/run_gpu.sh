#!/bin/bash
# One H100 or H200, from the repository root: dev_decode_attn_fp8 --check (stops if a check
# fails), then its timing at --peak-gbps 4800 (H200) or 3350 (H100), then the SASS counts
# (sass_count.py, where cuobjdump is found). Environment:
#   BIN  the driver (default build/dev/dev_decode_attn_fp8)
#   LIB  a folder, relative to the repository root, put first on LD_LIBRARY_PATH (default: none)
#   OUT  where the outputs go (default /tmp): gpu.txt, check.txt, timing.txt, sass.txt
# About 30-90 s in all (the timing's largest cache: 16.5 GiB).
set -u
BIN=${BIN:-build/dev/dev_decode_attn_fp8}
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
timeout 60 "$BIN" --check > "$O/check.txt" 2>&1
rc=$?
tail -1 "$O/check.txt"
if [ $rc -ne 0 ]; then
  echo "check failed (rc=$rc): no timing"
  tail -5 "$O/check.txt"
  exit 1
fi
timeout 150 "$BIN" --peak-gbps $peak --reps 20 > "$O/timing.txt" 2>&1
rc=$?
echo "timing rc=$rc"
cat "$O/timing.txt"
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$BIN" | python3 dev/decode_attn_fp8/sass_count.py > "$O/sass.txt" 2>&1
  cat "$O/sass.txt"
else
  echo "no cuobjdump here: no SASS counts" | tee "$O/sass.txt"
fi
exit $rc

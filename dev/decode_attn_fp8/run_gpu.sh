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
# check, GPU line and timing: dev/run_attn_gpu.sh
bash dev/run_attn_gpu.sh "$BIN" "$O" 60 150 || exit $?
if command -v cuobjdump > /dev/null; then
  cuobjdump -sass "$BIN" | python3 dev/decode_attn_fp8/sass_count.py > "$O/sass.txt" 2>&1
  cat "$O/sass.txt"
else
  echo "no cuobjdump here: no SASS counts" | tee "$O/sass.txt"
fi

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
# check, GPU line and timing: dev/run_attn_gpu.sh
bash dev/run_attn_gpu.sh "$BIN" "$O" 45 70

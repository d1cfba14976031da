#!/bin/sh
# PyTorch's caching allocator under Megatron-Core training on one GPU (alloc_frag.py); see README.md here.
# Usage: sh run_gpu.sh OUTDIR [alloc_frag.py options, e.g. --quick]   (from any directory; needs python3 with
#        torch and a CUDA GPU; no Transformer Engine, apex or network)
# Megatron-LM's megatron/ at 1e057005959b75e8bc62f610a335bd03080bc659 is read from the one export the host-time
# runs use, experiments/published/moe/host/megatron-src/ (ignored by git; its run_gpu.sh header says how to
# export it). Carry that folder to the GPU machine.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: run_gpu.sh OUTDIR [options]}
shift
mkdir -p "$OUT"
SRC="$HERE/../../published/moe/host/megatron-src"
test -d "$SRC/megatron/core" || { echo "run_gpu.sh: $SRC/megatron/core: missing (see header)" >&2; exit 2; }
export CUDA_DEVICE_MAX_CONNECTIONS=1 PYTHONUNBUFFERED=1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
# the whole run stops itself: alloc_frag.py's own budget (270 s) and per-configuration timeouts, and this
# outer limit in case the parent hangs
timeout -k 10 330 python3 "$HERE/alloc_frag.py" --out "$OUT" "$@" 2>&1 | tee "$OUT/log.txt"

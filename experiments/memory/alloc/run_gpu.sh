#!/bin/sh
# PyTorch's caching allocator under Megatron-Core training on one GPU (alloc_frag.py); see README.md here.
# Usage: sh run_gpu.sh OUTDIR [alloc_frag.py options, e.g. --quick]   (from any directory; needs python3 with
#        torch and a CUDA GPU; no Transformer Engine, apex or network)
# megatron-src/ is Megatron-LM's megatron/ at the commit below (as experiments/published/moe/host/); it is
# ignored by git. Export it on a machine with a clone of Megatron-LM:
#   mkdir -p megatron-src && git --git-dir=MEGATRON_LM_GIT archive 1e057005959b75e8bc62f610a335bd03080bc659 megatron \
#     | tar -x -C megatron-src && echo 1e057005959b75e8bc62f610a335bd03080bc659 > megatron-src/COMMIT
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: run_gpu.sh OUTDIR [options]}
shift
mkdir -p "$OUT"
test -d "$HERE/megatron-src/megatron/core" || { echo "run_gpu.sh: megatron-src/: missing (see header)" >&2; exit 2; }
export CUDA_DEVICE_MAX_CONNECTIONS=1 PYTHONUNBUFFERED=1
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || true
# the whole run stops itself: alloc_frag.py's own budget (270 s) and per-configuration timeouts, and this
# outer limit in case the parent hangs
timeout -k 10 330 python3 "$HERE/alloc_frag.py" --out "$OUT" "$@" 2>&1 | tee "$OUT/log.txt"

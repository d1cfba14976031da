#!/bin/sh
# Times one Megatron-Core MoE transformer layer on one GPU (layer_host.py); see README section
# "Megatron-Core's host time per MoE layer" in experiments/published/moe/README.md.
# Usage: sh run_gpu.sh OUTDIR [layer_host.py options, e.g. --only-grouped]   (from any directory; needs python3 with torch and a CUDA GPU)
#        sh run_gpu.sh OUTDIR --schedule   (the training schedule's host time; tables: python3 schedule_summary.py OUTDIR/layer_host.json)
# megatron-src/ is Megatron-LM's megatron/ at the commit the intra-node Qwen3 rows name; it is
# ignored by git. Export it on a machine with the mirror:
#   git --git-dir=MEGATRON_LM_GIT archive 1e057005959b75e8bc62f610a335bd03080bc659 megatron \
#     | tar -x -C megatron-src
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: run_gpu.sh OUTDIR [options]}
shift
mkdir -p "$OUT"
test -d "$HERE/megatron-src/megatron/core" || { echo "run_gpu.sh: megatron-src/: missing (see header)" >&2; exit 2; }
export CUDA_DEVICE_MAX_CONNECTIONS=1 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > "$OUT/gpu.txt" 2>&1 || true
python3 "$HERE/layer_host.py" --out "$OUT" "$@" 2>&1 | tee "$OUT/log.txt"

#!/bin/bash
# The inference validation run on 2 x H200 (from the repository root): every plan of
# experiments/infer/plans/ (Llama 3 8B TP2; NVLink, host shared memory, sockets; codecs none,
# TACO, CAAT-Net, both), one tacorun launch per transport. The predictions of these plans are
# committed before this runs (experiments/infer/predicted/). Writes $OUT/w2.tgz (logs and one
# measured result JSON per plan) and prints TTFT/TPOT per plan.
set -u
export NCCL_NVLS_ENABLE=0
BIN=${BIN:-.devbin/infer/tacorun}
OUT=${OUT:-/tmp/infer-out}
LIMIT=${LIMIT:-70}   # seconds per transport
W=/tmp/infer-run/w2   # outside $OUT: only the archive comes back
mkdir -p $W/logs $W/measured
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $W/logs/gpu.txt 2>&1
run() { # transport, then NCCL variables for it
  local tr=$1; shift
  echo "== $tr ($(( $(date +%s) - t0 )) s)"
  env "$@" timeout $LIMIT mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE \
    $(for v in "$@"; do echo -n "-x ${v%%=*} "; done) \
    $BIN execute experiments/infer/plans/infer-v-$tr-*.json --json-dir $W/measured > $W/logs/$tr.log 2>&1
  echo "rc=$?" | tee -a $W/logs/$tr.log
}
run nvlink NCCL_NVLS_ENABLE=0
run shm NCCL_P2P_DISABLE=1
run socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
echo "== done ($(( $(date +%s) - t0 )) s)"
tar czf $OUT/w2.tgz -C /tmp/infer-run w2
grep -hE "^# infer|^ttft|# transport" $W/logs/*.log | cut -c1-160

#!/bin/bash
# Second calibration run on 2 x H200 (from the repository root), after the first run's trial
# showed prefill compute over-predicted on NVLink (~13%) and the socket all-reduces
# under-predicted (~25%): calibrate what the executor runs, not the validation plans:
#   1. tacorun calibrate-infer on the three 2 x H200 files: decode GEMMs, the prefill GEMMs of
#      Llama 3 8B at TP 1/2/4/8 timed the executor's way (weights from HBM, activations fixed;
#      they replace the training table's points of those shapes), attention_decode,
#      attention_prefill, decode-sized memory-bound kernels;
#   2. tacorun calibrate-infer --collectives under mpirun -np 2 on each transport: the plain and
#      TACO all-reduce tables timed one process per GPU, as the executor runs them.
# Writes $OUT/w1b.tgz.
set -u
export NCCL_NVLS_ENABLE=0
BIN=${BIN:-.devbin/infer/tacorun}
OUT=${OUT:-/tmp/infer-out}
W=/tmp/infer-run/w1b   # outside $OUT: only the archive comes back
mkdir -p $W/logs $W/calib
pack() { tar czf $OUT/w1b.tgz -C /tmp/infer-run w1b; }
t0=$(date +%s)
echo "== calibrate-infer"
timeout 60 $BIN calibrate-infer calibration/h200-nvlink.json calibration/h200-shm.json calibration/h200-socket.json \
  --out-dir $W/calib --quick > $W/logs/calib.log 2>&1; echo "rc=$?" | tee -a $W/logs/calib.log; pack
coll() { # transport, NCCL variables
  local tr=$1; shift
  echo "== collectives $tr ($(( $(date +%s) - t0 )) s)"
  env "$@" timeout 40 mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE \
    $(for v in "$@"; do echo -n "-x ${v%%=*} "; done) \
    $BIN calibrate-infer $W/calib/h200-$tr.json --collectives > $W/logs/coll-$tr.log 2>&1
  echo "rc=$?" | tee -a $W/logs/coll-$tr.log; pack
}
coll nvlink NCCL_NVLS_ENABLE=0
coll shm NCCL_P2P_DISABLE=1
coll socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
echo "== done ($(( $(date +%s) - t0 )) s)"
grep -h "calibrate-infer" $W/logs/calib.log
grep -hE "allreduce (8192|65536|524288|1048576|67108864|134217728) B" $W/logs/coll-*.log

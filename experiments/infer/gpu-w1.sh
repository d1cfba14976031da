#!/bin/bash
# First GPU run of the inference executor on 2 x H200 (from the repository root):
#   1. tacorun execute --infer-check on 2 ranks (decode attention and RoPE vs the C reference,
#      TP2 vs TP1 logits, prefill vs decode, codec paths) and on 1 rank;
#   2. tacorun calibrate-infer: decode GEMMs, attention_decode, attention_prefill added to the
#      three 2 x H200 calibration files (written under $OUT/calib);
#   3. smoke timings of a few validation plans (NVLink, all codecs; sockets, plain) to size the
#      validation run.
# Writes $OUT/w1.tgz (logs, calibration files, result JSONs) and prints a summary.
set -u
export NCCL_NVLS_ENABLE=0
BIN=${BIN:-.devbin/infer/tacorun}
OUT=${OUT:-/tmp/infer-out}
W=/tmp/infer-run/w1   # outside $OUT: only the archive comes back
mkdir -p $W/logs $W/calib $W/smoke
t0=$(date +%s)
# the archive is rewritten after every step, so a run cut short still returns what it has
pack() { tar czf $OUT/w1.tgz -C /tmp/infer-run w1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > $W/logs/gpu.txt 2>&1
echo "== check (2 ranks)"; timeout 45 mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE $BIN execute --infer-check > $W/logs/check2.log 2>&1; echo "rc=$?" | tee -a $W/logs/check2.log; pack
echo "== check (1 rank)"; timeout 30 $BIN execute --infer-check > $W/logs/check1.log 2>&1; echo "rc=$?" | tee -a $W/logs/check1.log; pack
echo "== calibrate-infer ($(( $(date +%s) - t0 )) s)"
timeout 60 $BIN calibrate-infer calibration/h200-nvlink.json calibration/h200-shm.json calibration/h200-socket.json \
  --out-dir $W/calib --quick > $W/logs/calib.log 2>&1; echo "rc=$?" | tee -a $W/logs/calib.log; pack
echo "== smoke nvlink ($(( $(date +%s) - t0 )) s)"
timeout 45 mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE $BIN execute experiments/infer/plans/infer-v-nvlink-*.json \
  --json-dir $W/smoke > $W/logs/smoke-nvlink.log 2>&1; echo "rc=$?" | tee -a $W/logs/smoke-nvlink.log; pack
echo "== smoke socket ($(( $(date +%s) - t0 )) s)"
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo timeout 45 \
  mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE \
  -x NCCL_IB_DISABLE -x NCCL_SOCKET_IFNAME $BIN execute \
  experiments/infer/plans/infer-v-socket-b*-none.json experiments/infer/plans/infer-v-socket-b*-taco-caat.json \
  --json-dir $W/smoke > $W/logs/smoke-socket.log 2>&1; echo "rc=$?" | tee -a $W/logs/smoke-socket.log
echo "== done ($(( $(date +%s) - t0 )) s)"
tar czf $OUT/w1.tgz -C /tmp/infer-run w1
grep -E "^(ok|FAIL)|infer-check" $W/logs/check2.log | cut -c1-150
tail -2 $W/logs/check1.log
grep -E "calibrate-infer" $W/logs/calib.log
grep -E "^ttft|^# infer|# transport" $W/logs/smoke-*.log | cut -c1-200

#!/usr/bin/env bash
# bench_comm_all.sh — on a machine with 2 GPUs: the compressed-collective GPU
# test, the fault test (a killed rank), and the bench-comm sweep over the
# three transports of DESIGN.md (NVLink, host shared memory, sockets), one
# table per transport. Usage: bench_comm_all.sh TACORUN TEST_COLL_GPU OUTDIR
# Every step runs even if an earlier one failed; the summary is printed last.
# BENCH_COMM_TRANSPORTS: which sweeps (default "nvlink shm socket").
# BENCH_COMM_CODECS: codecs of the sweeps (default none,taco,caat,taco+caat,taco-direct,bf16-direct;
# taco-direct and bf16-direct rows appear over NVLink (GPU peer memory) and host shared memory
# (pinned host staging, kernels/coll_host.h), not over sockets).
# BENCH_COMM_HOST=0 skips the host-memory flavour's test, fault test and odd-size checks.
# BENCH_COMM_FAULTS / BENCH_COMM_ODDS: which fault tests ("nccl direct host") and odd-size
# checks ("direct host") to run (default all).
set -u
TACORUN=${1:?tacorun}; TESTBIN=${2:?test_coll_gpu}; OUT=${3:?outdir}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
mpi() { # mpirun forwarding the NCCL_* variables that are set
  local fwd=() v
  for v in $(env | grep -oE "^NCCL_[A-Z0-9_]*"); do fwd+=(-x "$v"); done
  timeout 150 mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$@"
}
ms() { echo $(( $(date +%s%N) / 1000000 )); }
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

{ date -u; nvidia-smi -L; nvidia-smi topo -m | head -3; } >>"$SUMMARY" 2>&1

# 1. Correctness, single process over both GPUs, 1 KiB .. 1 GiB.
t0=$(date +%s)
timeout 120 "$TESTBIN" >"$OUT/test_coll_gpu.log" 2>&1
rc=$?
note "test_coll_gpu: rc=$rc in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/test_coll_gpu.log")"
grep -E "^(FAIL|ERROR)" "$OUT/test_coll_gpu.log" | head -5 | tee -a "$SUMMARY"
# 1b. The same with the direct cases on the host-memory flavour (NCCL through shm).
if [ "${BENCH_COMM_HOST:-1}" = 1 ]; then
  t0=$(date +%s)
  TEST_COLL_HOST=1 timeout 150 "$TESTBIN" >"$OUT/test_coll_gpu-host.log" 2>&1
  rc=$?
  note "test_coll_gpu (host-memory direct path): rc=$rc in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/test_coll_gpu-host.log")"
  grep -E "^(FAIL|ERROR)" "$OUT/test_coll_gpu-host.log" | head -5 | tee -a "$SUMMARY"
fi

# 2. Fault: rank 1 kills itself mid-run; rank 0 must fail within --timeout-s.
# Calls 1-44 are the NCCL BF16 baseline (2 x (2 warm-up + 20 timed)); call 60
# falls in the compressed calls (the direct one: the one-shot all-reduce).
fault() { # $1: label, $2: codec, $3: log name, then more bench-comm options; rank 0's exit status and seconds go to the summary
  local codec=$2 name=$3
  rm -f /tmp/tacorun_ncclid
  local t0=$(ms)
  TACORUN_ID_FILE=/tmp/tacorun_ncclid TACORUN_RANK=1 TACORUN_NRANKS=2 TACORUN_LOCAL_RANK=1 \
    "$TACORUN" bench-comm --op allreduce --codec "$codec" --minbytes 64M --maxbytes 64M --iters 20 --warmup 2 \
    --timeout-s 10 --die-rank 1 --die-after 60 "${@:4}" >/tmp/fault_rank1.log 2>&1 &
  local p1=$!
  TACORUN_ID_FILE=/tmp/tacorun_ncclid TACORUN_RANK=0 TACORUN_NRANKS=2 TACORUN_LOCAL_RANK=0 \
    timeout 120 "$TACORUN" bench-comm --op allreduce --codec "$codec" --minbytes 64M --maxbytes 64M --iters 20 \
    --warmup 2 --timeout-s 10 --die-rank 1 --die-after 60 "${@:4}" >"$OUT/fault-$name.log" 2>&1
  local rc0=$?
  local dt=$(( $(ms) - t0 ))
  wait $p1; local rc1=$?
  note "fault ($1): rank 0 rc=$rc0 after ${dt} ms (bound: 10 s timeout + init), rank 1 rc=$rc1 (137 = SIGKILL)"
  tail -2 "$OUT/fault-$name.log" | tee -a "$SUMMARY"
  cat /tmp/fault_rank1.log >>"$OUT/fault-$name.log"
}
if [ "${BENCH_COMM_FAULT:-1}" = 1 ]; then # BENCH_COMM_FAULT=0 skips it (the path did not change)
  FAULTS=" ${BENCH_COMM_FAULTS:-nccl direct host} "
  case $FAULTS in *" nccl "*) fault "id-file, NCCL path" taco nccl ;; esac
  case $FAULTS in *" direct "*) fault "id-file, direct path" taco-direct direct --allreduce one-shot ;; esac
  case $FAULTS in *" host "*) [ "${BENCH_COMM_HOST:-1}" = 1 ] &&
    fault "id-file, host-memory direct path" taco-direct host --allreduce one-shot --transport shm ;; esac
fi

# 2b. The direct path under mpirun (one process per GPU, CUDA IPC): --check at odd
# sizes (x7.3 steps from 1030 B: multiples of neither the group nor the rank
# count), out of place and in place, up to 1 GiB.
# With BENCH_COMM_HOST=1 (default) also through host shared memory (the host-memory
# flavour, shared-memory objects mapped by both processes), with bf16-direct rows.
odd() { # $1: label, $2: --transport value
  for place in "" --inplace; do
    t0=$(date +%s)
    mpi "$TACORUN" bench-comm --op allreduce,allgather,reducescatter,sendrecv --codec taco-direct,bf16-direct --check \
      --iters 3 --warmup 1 --target-ms 20 --minbytes 1030 --maxbytes 1G --step-factor 7.3 $place --transport "$2" \
      >"$OUT/$1-odd${place}.dat" 2>/tmp/direct-odd.err
    note "$1 --check under mpirun ${place:-out-of-place}: rc=$? in $(( $(date +%s) - t0 )) s," \
      "$(grep -cE 'taco-direct|bf16-direct' "$OUT/$1-odd${place}.dat") rows, $(grep -c 'CHECK FAILED' "$OUT/$1-odd${place}.dat") failed"
    grep -v "^ *$" /tmp/direct-odd.err | tail -3 >>"$SUMMARY"
  done
}
if [ "${BENCH_COMM_ODD:-1}" = 1 ]; then
  ODDS=" ${BENCH_COMM_ODDS:-direct host} "
  case $ODDS in *" direct "*) odd direct p2p ;; esac
  case $ODDS in *" host "*) [ "${BENCH_COMM_HOST:-1}" = 1 ] && odd host shm ;; esac
fi

# 3. The sweep per transport, one process per GPU under mpirun.
sweep() { # $1: name, then bench-comm arguments
  local name=$1; shift
  local t0=$(date +%s)
  # BENCH_COMM_ARGS: more bench-comm options for every sweep (e.g. --graph)
  mpi "$TACORUN" bench-comm --op all --codec ${BENCH_COMM_CODECS:-none,taco,caat,taco+caat,taco-direct,bf16-direct} --check --iters 20 --warmup 3 \
    --target-ms 100 --chunk 1M,2M,4M,8M,16M,32M,64M --step-factor 4 ${BENCH_COMM_ARGS:-} "$@" >"$OUT/$name.dat" 2>"/tmp/$name.err"
  local rc=$?
  note "sweep $name: rc=$rc in $(( $(date +%s) - t0 )) s"
  grep -v "^ *$" "/tmp/$name.err" | tail -4 >>"$SUMMARY"
  grep -E "^# op:|^ +67108864 " "$OUT/$name.dat" | awk '{print "  " $0}' >>"$SUMMARY"
  grep -E "^# (tuned|CHECK)" "$OUT/$name.dat" >>"$SUMMARY"
}
TRANSPORTS=" ${BENCH_COMM_TRANSPORTS:-nvlink shm socket} "
unset NCCL_IB_DISABLE NCCL_SOCKET_IFNAME
case $TRANSPORTS in *" nvlink "*) sweep nvlink --transport p2p --minbytes 256K --maxbytes 256M ;; esac
case $TRANSPORTS in *" shm "*) sweep shm --transport shm --minbytes 256K --maxbytes 256M ;; esac
export NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo # NCCL's own: sockets over loopback
case $TRANSPORTS in *" socket "*) sweep socket --transport socket --minbytes 256K --maxbytes 64M ;; esac
cat "$SUMMARY"

#!/usr/bin/env bash
# bench_comm_all.sh — on a machine with 2 GPUs: the compressed-collective GPU
# test, the fault test (a killed rank), and the bench-comm sweep over the
# three transports of DESIGN.md (NVLink, host shared memory, sockets), one
# table per transport. Usage: bench_comm_all.sh TACORUN TEST_COLL_GPU OUTDIR
# Every step runs even if an earlier one failed; the summary is printed last.
set -u
TACORUN=${1:?tacorun}; TESTBIN=${2:?test_coll_gpu}; OUT=${3:?outdir}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
mpi() { # mpirun forwarding the NCCL_* and TACO_* variables that are set
  local fwd=() v
  for v in $(env | grep -oE '^(NCCL|TACO)_[A-Z0-9_]*'); do fwd+=(-x "$v"); done
  timeout 150 mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$@"
}
ms() { echo $(( $(date +%s%N) / 1000000 )); }
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

{ date -u; nvidia-smi -L; nvidia-smi topo -m | head -3; } >>"$SUMMARY" 2>&1

# 1. Correctness, single process over both GPUs, 1 KiB .. 1 GiB.
t0=$(date +%s)
timeout 240 "$TESTBIN" >"$OUT/test_coll_gpu.log" 2>&1
rc=$?
note "test_coll_gpu: rc=$rc in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/test_coll_gpu.log")"
grep -E "^(FAIL|ERROR)" "$OUT/test_coll_gpu.log" | head -5 | tee -a "$SUMMARY"

# 2. Fault: rank 1 kills itself mid-run; rank 0 must fail within --timeout-s.
fault() { # $1: label; rank 0's exit status and seconds go to the summary
  rm -f /tmp/tacorun_ncclid
  local t0=$(ms)
  TACORUN_ID_FILE=/tmp/tacorun_ncclid TACORUN_RANK=1 TACORUN_NRANKS=2 TACORUN_LOCAL_RANK=1 \
    "$TACORUN" bench-comm --op allreduce --codec taco --minbytes 64M --maxbytes 64M --iters 2000 --warmup 5 \
    --timeout-s 10 --die-rank 1 --die-after 12 >/tmp/fault_rank1.log 2>&1 &
  local p1=$!
  TACORUN_ID_FILE=/tmp/tacorun_ncclid TACORUN_RANK=0 TACORUN_NRANKS=2 TACORUN_LOCAL_RANK=0 \
    timeout 120 "$TACORUN" bench-comm --op allreduce --codec taco --minbytes 64M --maxbytes 64M --iters 2000 \
    --warmup 5 --timeout-s 10 --die-rank 1 --die-after 12 >"$OUT/fault.log" 2>&1
  local rc0=$?
  local dt=$(( $(ms) - t0 ))
  wait $p1; local rc1=$?
  note "fault ($1): rank 0 rc=$rc0 after ${dt} ms (bound: 10 s timeout + init), rank 1 rc=$rc1 (137 = SIGKILL)"
  tail -2 "$OUT/fault.log" | tee -a "$SUMMARY"
}
if [ "${BENCH_COMM_FAULT:-1}" = 1 ]; then # BENCH_COMM_FAULT=0 skips it (the path did not change)
  fault id-file
  cat /tmp/fault_rank1.log >>"$OUT/fault.log"
fi

# 3. The sweep per transport, one process per GPU under mpirun.
sweep() { # $1: name, then bench-comm arguments
  local name=$1; shift
  local t0=$(date +%s)
  # BENCH_COMM_ARGS: more bench-comm options for every sweep (e.g. --graph)
  mpi "$TACORUN" bench-comm --op all --codec none,taco,caat,taco+caat --check --iters 20 --warmup 3 \
    --target-ms 100 --chunk 1M,2M,4M,8M,16M,32M,64M --step-factor 4 ${BENCH_COMM_ARGS:-} "$@" >"$OUT/$name.dat" 2>"/tmp/$name.err"
  local rc=$?
  note "sweep $name: rc=$rc in $(( $(date +%s) - t0 )) s"
  grep -v "^ *$" "/tmp/$name.err" | tail -4 >>"$SUMMARY"
  grep -E "^# op:|^ +67108864 " "$OUT/$name.dat" | awk '{print "  " $0}' >>"$SUMMARY"
  grep -E "^# (tuned|CHECK)" "$OUT/$name.dat" >>"$SUMMARY"
}
unset NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_IB_DISABLE NCCL_SOCKET_IFNAME
sweep nvlink --minbytes 256K --maxbytes 256M
export NCCL_P2P_DISABLE=1
sweep shm --minbytes 256K --maxbytes 256M
export NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
sweep socket --minbytes 256K --maxbytes 64M
cat "$SUMMARY"

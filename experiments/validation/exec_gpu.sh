#!/usr/bin/env bash
# exec_gpu.sh — the executor on the 2 x H200 machine in one go: correctness
# checks, then timed plans per transport. Builds nothing: it runs the tacorun
# built on the CPU machine (BIN). Results land in $OUT:
#   check.txt     `tacorun execute --check` (2 ranks: TP2, DP2 vs TP1 vs float64)
#   timing.txt    every timed run's printout (median/min/max, MFU, per-op table)
#   results.tgz   the result JSON (schema of schema/result.h) of each timed run
#   machine.txt   GPU, driver, CUDA, NCCL
# usage: exec_gpu.sh STAGE...   (check, nvlink, codecs, dp, shm, socket, plan, nan)
# EXEC_NO_OVERLAP=1 / EXEC_FULL_SOFTMAX=1 turn the executor's two optimisations off.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-build-exec/runtime/tacorun}
OUT=${OUT:-/tmp/exec-out}
ITERS=${ITERS:-5} WARMUP=${WARMUP:-2}
mkdir -p "$OUT/json"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
PLANS=experiments/plans

mpi() { # mpirun -np 2, forwarding the NCCL_* variables that are set; bounded
  local limit=$1; shift
  local fwd=(-x LD_LIBRARY_PATH)
  for v in $(env | grep -o '^\(NCCL\|EXEC\)_[A-Z_]*'); do fwd+=(-x "$v"); done
  timeout "$limit" mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$BIN" "$@"
}

timed() { # timed PLAN TAG [iters warmup]
  local plan=$1 tag=$2 it=${3:-$ITERS} wu=${4:-$WARMUP}
  echo "=== $tag: $plan (transport ${TRANSPORT:-nvlink}, $it iterations after $wu warm-up) ===" >>"$OUT/timing.txt"
  mpi 90 execute "$PLANS/$plan.json" --iters "$it" --warmup "$wu" --json "$OUT/json/$tag.json" \
    --ops-csv "$OUT/json/$tag.ops.txt" >>"$OUT/timing.txt" 2>&1
  echo "rc=$?" >>"$OUT/timing.txt"
  grep -E "^# iteration time|^# model FLOPs" "$OUT/timing.txt" | tail -2 | sed "s/^/$tag: /"
}

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvcc --version 2>/dev/null | tail -1
  ls /usr/lib/x86_64-linux-gnu/libnccl.so* 2>/dev/null
  nvidia-smi topo -m
} >"$OUT/machine.txt" 2>&1

for stage in "$@"; do
  case $stage in
  check)
    mpi 120 execute --check >"$OUT/check.txt" 2>&1
    rc=$?
    echo "check rc=$rc" | tee -a "$OUT/check.txt"
    grep -E "passed|FAILED|worst|codec|loss:" "$OUT/check.txt" | head -30
    if [ $rc -ne 0 ]; then # the optimised paths failed: check the plain ones and time those instead
      EXEC_NO_OVERLAP=1 EXEC_FULL_SOFTMAX=1 mpi 120 execute --check >"$OUT/check_fallback.txt" 2>&1
      frc=$?
      echo "fallback check (EXEC_NO_OVERLAP=1 EXEC_FULL_SOFTMAX=1) rc=$frc" | tee -a "$OUT/check_fallback.txt"
      grep -E "passed|FAILED|worst" "$OUT/check_fallback.txt" | head -8
      [ $frc -eq 0 ] && export EXEC_NO_OVERLAP=1 EXEC_FULL_SOFTMAX=1
    fi
    ;;
  nvlink) TRANSPORT=nvlink timed gpt-h4096-tp2-none tp2-none-nvlink ;;
  codecs)
    for c in taco caat taco-caat; do TRANSPORT=nvlink timed gpt-h4096-tp2-$c tp2-$c-nvlink; done ;;
  dp) TRANSPORT=nvlink timed gpt-h4096-dp2 dp2-nvlink 3 1 ;;
  shm)
    for c in none taco caat; do
      NCCL_P2P_DISABLE=1 TRANSPORT=shm timed gpt-h4096-tp2-$c tp2-$c-shm 3 1
    done ;;
  socket)
    for c in none taco caat; do
      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo TRANSPORT=socket \
        timed gpt-h4096-tp2-$c tp2-$c-socket 2 1
    done ;;
  plan) # the same plans walked from plan_build_program()'s programs (--program plan)
    for c in tp2-none tp2-caat dp2; do
      tag=$c-nvlink-planprog
      echo "=== $tag ===" >>"$OUT/timing.txt"
      mpi 90 execute "$PLANS/gpt-h4096-$c.json" --program plan --iters "$ITERS" --warmup "$WARMUP" \
        --json "$OUT/json/$tag.json" --ops-csv "$OUT/json/$tag.ops.txt" >>"$OUT/timing.txt" 2>&1
      echo "rc=$?" >>"$OUT/timing.txt"
      grep -E "^# iteration time" "$OUT/timing.txt" | tail -1 | sed "s/^/$tag: /"
    done ;;
  nan)
    mpi 60 execute "$PLANS/gpt-h4096-tp2-none.json" --iters 3 --warmup 1 --inject-nan 1 >"$OUT/nan.txt" 2>&1
    echo "nan-injection rc=$? (2 ranks must stop naming step 1 and the tensor)" | tee -a "$OUT/nan.txt"
    grep "NaN" "$OUT/nan.txt" | head -3 ;;
  *) echo "unknown stage $stage" ;;
  esac
done
tar czf "$OUT/results.tgz" -C "$OUT" json && rm -rf "$OUT/json"

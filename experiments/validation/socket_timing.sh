#!/usr/bin/env bash
# socket_timing.sh — is the socket calibration's timing what makes it faster than the plans?
# In socket_rounds.sh (09:15 UTC) the calibrated 32 MiB all-reduce (7 batches of ONE launch, each after a
# one-element all-reduce that lines the ranks up) was 8-19 % faster than the same all-reduce inside the
# tp2-none-socket plan a minute later, in all three rounds, while bench-comm (15 launches back to back)
# had matched the plan in socket_drift.sh. ROUNDS times, in alternating order: the socket collectives
# calibrated as shipped (--comm-batch-us 1000: one launch per batch at this size) and with batches of at
# least BATCH_US (several launches back to back), bench-comm at 32 MiB, then the plan (PLAN_ITERS).
# usage: BIN=... OUT=... socket_timing.sh   (ROUNDS 3, BATCH_US 40000, PLAN_ITERS 3)
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:?tacorun}
ROUNDS=${ROUNDS:-3}
BATCH_US=${BATCH_US:-40000}
PLAN_ITERS=${PLAN_ITERS:-3}
PLAN=experiments/plans/gpt-h4096-tp2-none-socket.json
. experiments/validation/gpu_lib.sh # START, say, elapsed, mpi (uses OUT, BIN)
export BIN SOCKET_MAX=33554432 SOCKET_REPS=7
cal() { # cal NAME [BATCH_US]
  mkdir -p "$OUT/r$r/$1"
  OUT=$OUT/r$r/$1 COMPUTE_FROM=calibration/h200-nvlink.json CAL_SOCKET_S=90 SOCKET_BATCH_US=${2:-} \
    calibration/run_gpu.sh socket >/dev/null 2>&1
  say "round $r $1 ($(elapsed) s): $(grep -m1 'calibrate socket' "$OUT/r$r/$1/summary.txt")"
}
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then cal single; cal batched "$BATCH_US"; else cal batched "$BATCH_US"; cal single; fi
  (
    export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
    mpi 2 60 bench-comm --op allreduce --codec none --minbytes 32M --maxbytes 32M --iters 15 --warmup 3 \
      >"$OUT/r$r/bench.txt" 2>&1
    mpi 2 120 execute "$PLAN" --iters "$PLAN_ITERS" --warmup 1 --timeout 30 --ops-csv "$OUT/r$r/plan.ops.txt" \
      >"$OUT/r$r/plan.txt" 2>&1
  )
  say "round $r bench ($(elapsed) s): $(grep -E '^ *33554432' "$OUT/r$r/bench.txt" | head -1)"
  say "round $r plan ($(elapsed) s): $(grep -E 'tp_allreduce' "$OUT/r$r/plan.ops.txt" | head -2 | tr '\n' ' ')"
done
tar -czf "$OUT/timing.tgz" -C "$OUT" $(cd "$OUT" && ls -d r[0-9]*) && rm -rf "$OUT"/r[0-9]*

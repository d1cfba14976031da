#!/usr/bin/env bash
# socket_drift.sh — is the socket rows' prediction error the transport drifting, or something the
# plan does to its own collectives? One GPU call (nothing built there): ROUNDS times, a 32 MiB NCCL
# all-reduce timed back to back (bench-comm, as the calibration times it) and right after it the
# tp2-none-socket validation plan (its TP messages are 32 MiB all-reduces; the per-op profile gives
# each one's time inside the plan). If the plan's all-reduces track the bench of the same minute, the
# transport drifts; if they are slower by a steady factor, the plan slows them.
# usage: BIN=.../tacorun OUT=... socket_drift.sh   (ROUNDS 4, ITERS 2)
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:?tacorun}
OUT=${OUT:-/tmp/socket-drift}
ROUNDS=${ROUNDS:-4}
ITERS=${ITERS:-2}
PLAN=experiments/plans/gpt-h4096-tp2-none-socket.json
mkdir -p "$OUT"
. experiments/validation/gpu_lib.sh # START, say, elapsed, mpi (uses BIN)
export NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 \
  >"$OUT/clocks.csv" 2>/dev/null &
clocks=$!
for r in $(seq 1 "$ROUNDS"); do
  mpi 2 60 bench-comm --op allreduce --codec none --minbytes 32M --maxbytes 32M --iters 15 --warmup 3 \
    >"$OUT/bench-$r.txt" 2>&1
  say "round $r bench rc=$? ($(elapsed) s): $(grep -E '^ *33554432' "$OUT/bench-$r.txt" | head -1)"
  mpi 2 90 execute "$PLAN" --iters "$ITERS" --warmup 1 --timeout 30 --json "$OUT/plan-$r.json" \
    --ops-csv "$OUT/plan-$r.ops.txt" >"$OUT/plan-$r.txt" 2>&1
  say "round $r plan rc=$? ($(elapsed) s): $(grep -E '^# iteration time' "$OUT/plan-$r.txt" | tail -1)"
  grep -E 'tp_allreduce' "$OUT/plan-$r.ops.txt" | tee -a "$SUMMARY"
done
kill $clocks 2>/dev/null
wait $clocks 2>/dev/null
tar -czf "$OUT/raw.tgz" -C "$OUT" $(cd "$OUT" && ls bench-* plan-* clocks.csv) && rm -f "$OUT"/bench-* "$OUT"/plan-*

#!/usr/bin/env bash
# socket_rounds.sh — the socket plans' prediction error as a distribution, not one draw: ROUNDS times,
# the socket collectives calibrated (calibration/run_gpu.sh socket, compute tables from the shipped
# NVLink file), every socket plan predicted from that calibration on this machine (exec_gpu.sh
# predict: before it runs), then timed (exec_gpu.sh timed-socket). A model that is right on average
# gives errors that scatter around zero as wide as the transport moves between a calibration and the
# plans after it (run 11: 10-25 % within a minute); a biased one shifts them all.
# Builds nothing. Needs BIN (tacorun) and SIM_BUNDLE (scripts/bundle-tacosim.sh) from the CPU machine.
# usage: BIN=... SIM_BUNDLE=... OUT=... socket_rounds.sh   (ROUNDS 3; SOCKET_ITERS 6, SOCKET_PASSES 1,
#        SOCKET_REPS 7, SOCKET_MAX 64 MiB, DEADLINE 420 s: no round starts after DEADLINE - 90)
# $OUT gets rounds.tgz (r<k>/calib, r<k>/predicted, r<k>/measured, each round's summary) and summary.txt.
set -u
cd "$(dirname "$0")/../.."
: "${BIN:?tacorun}" "${SIM_BUNDLE:?simulator bundle}"
BASE=${OUT:?}
ROUNDS=${ROUNDS:-3}
DEADLINE=${DEADLINE:-420}
export SOCKET_ITERS=${SOCKET_ITERS:-6} SOCKET_PASSES=${SOCKET_PASSES:-1} SOCKET_REPS=${SOCKET_REPS:-7}
export SOCKET_MAX=${SOCKET_MAX:-67108864} BIN SIM_BUNDLE
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
V=experiments/validation
T0=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
for r in $(seq 1 "$ROUNDS"); do
  if [ "$(left)" -lt 90 ]; then
    echo "round $r: skipped ($(left) s left of the deadline)" >>"$BASE/summary.txt"
    continue
  fi
  R=$BASE/r$r
  mkdir -p "$R/calib"
  OUT=$R/calib COMPUTE_FROM=calibration/h200-nvlink.json CAL_SOCKET_S=60 calibration/run_gpu.sh socket >/dev/null 2>&1
  echo "round $r $(date -u +%T) calibration: $(grep -m1 'calibrate socket' "$R/calib/summary.txt")" >>"$BASE/summary.txt"
  [ -s "$R/calib/h200-socket.json" ] || continue
  OUT=$R CALIB=$R/calib BUDGET=$(($(left) - 20)) $V/exec_gpu.sh predict timed-socket >/dev/null 2>&1
  grep -E "socket rc=|predict" "$R/summary.txt" | sed "s/^/round $r: /" >>"$BASE/summary.txt"
  grep -h "iteration" "$R/predicted/README" 2>/dev/null | sed "s/^/round $r predicted: /" >>"$BASE/summary.txt"
done
tar -czf "$BASE/rounds.tgz" -C "$BASE" $(cd "$BASE" && ls -d r[0-9]*) && rm -rf "$BASE"/r[0-9]*
cat "$BASE/summary.txt"

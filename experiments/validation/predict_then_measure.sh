#!/usr/bin/env bash
# predict_then_measure.sh — one GPU call that checks, calibrates, predicts and
# measures, in an order that keeps every prediction ahead of its measurement
# and each transport's calibration next to its timed runs (the socket
# transport drifts 10-35 % between runs; calibration/README.md):
#   0. the GPU unit test of the cross-entropy kernels (TESTS_DIR/test_exec_ce_gpu)
#      and `tacorun execute --check`; a failed cross-entropy test switches the
#      rest of the call to the three-pass kernels (--variant ce=unfused, said in summary.txt)
#   1. calibration/run_gpu.sh nvlink shm   compute tables + NVLink and shm collectives
#   2. exec_gpu.sh predict timed-nvlink timed-shm
#   3. calibration/run_gpu.sh socket       socket collectives on step 1's compute tables
#   4. exec_gpu.sh predict timed-socket pack
#   5. the calibration folder into calib.tgz
# The predictions are written by the bundled tacosim on the GPU machine (stage
# predict of exec_gpu.sh) before the plans run; predicted/README has the times.
# Builds nothing. Needs BIN (tacorun), SIM_BUNDLE (scripts/bundle-tacosim.sh)
# and TESTS_DIR from the CPU machine. Files in $OUT: calib.tgz predicted.tgz
# results.tgz check.txt timing.txt summary.txt machine.txt (+ tests.txt in summary).
set -u
cd "$(dirname "$0")/../.."
export OUT=${OUT:-/tmp/ptm-out} BIN=${BIN:-.devbin/lead/tacorun} SIM_BUNDLE=${SIM_BUNDLE:-.devbin/lead/tacosim.tar.xz}
TESTS_DIR=${TESTS_DIR:-.devbin/lead}
export CALIB=$OUT/calib
mkdir -p "$CALIB"
V=experiments/validation
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# REUSE_CALIB=DIR: take h200-nvlink.json and h200-shm.json from DIR (e.g. the shipped calibration/)
# instead of measuring them; SKIP_CHECK=1: no GPU tests, no --check (a re-run of the same binaries)
if [ -x "$TESTS_DIR/test_exec_ce_gpu" ] && [ -z "${SKIP_CHECK:-}" ]; then
  timeout 60 "$TESTS_DIR/test_exec_ce_gpu" --bench >"$OUT/ce.txt" 2>&1
  rc=$?
  echo "test_exec_ce_gpu rc=$rc: $(tail -1 "$OUT/ce.txt")" >>"$OUT/summary.txt"
  grep "bench" "$OUT/ce.txt" >>"$OUT/summary.txt"
  if [ $rc -ne 0 ]; then
    export VARIANTS="${VARIANTS:+$VARIANTS }ce=unfused" # gpu_lib.sh / run_gpu.sh: --variant ce=unfused
    echo "cross-entropy test failed: the rest of this call runs --variant ce=unfused" >>"$OUT/summary.txt"
  fi
  cat "$OUT/ce.txt" >>"$OUT/summary.txt" && rm -f "$OUT/ce.txt"
fi
# DEADLINE (s from here, default 450): what would start later is skipped and
# whatever was measured is packed (a machine's time runs out, it is not extended)
DEADLINE=${DEADLINE:-450}
T0=$(date +%s)
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
pack_all() {
  cat "$CALIB/summary.txt" >>"$OUT/summary.txt" 2>/dev/null
  [ -d "$CALIB" ] && tar -czf "$OUT/calib.tgz" -C "$OUT" calib && rm -rf "$CALIB"
  BUDGET=0 $V/exec_gpu.sh pack >/dev/null 2>&1
  ls -la "$OUT"
}
trap 'pack_all; exit 1' TERM INT
# A failed calibration leaves the plans without costs: predict them with the
# shipped file of that transport instead, and say so (the table is then not this call's).
shipped_if_failed() { # shipped_if_failed TRANSPORT
  [ -s "$CALIB/h200-$1.json" ] && return 0
  cp "calibration/h200-$1.json" "$CALIB/" &&
    echo "CALIBRATION FAILED for $1: predicting with the shipped calibration/h200-$1.json" >>"$OUT/summary.txt"
}
[ -z "${SKIP_CHECK:-}" ] && $V/exec_gpu.sh check
if [ -n "${REUSE_CALIB:-}" ]; then
  cp "$REUSE_CALIB/h200-nvlink.json" "$REUSE_CALIB/h200-shm.json" "$CALIB/" &&
    echo "calibration: NVLink and shm files reused from $REUSE_CALIB" >>"$OUT/summary.txt"
else
  OUT=$CALIB calibration/run_gpu.sh nvlink shm
  shipped_if_failed nvlink
  shipped_if_failed shm
fi
BUDGET=$(($(left) - 110)) $V/exec_gpu.sh predict timed-nvlink timed-shm
if [ "$(left)" -gt 100 ]; then
  OUT=$CALIB COMPUTE_FROM=$CALIB/h200-nvlink.json CAL_SOCKET_S=$(($(left) - 45)) calibration/run_gpu.sh socket
  shipped_if_failed socket
  BUDGET=$(($(left) - 30)) $V/exec_gpu.sh predict timed-socket
  # POST_SOCKET_CAL=1: the socket collectives once more after the socket plans, into calib/after/ (not used by
  # any prediction: it shows how far the transport moved while the plans ran)
  if [ -n "${POST_SOCKET_CAL:-}" ] && [ "$(left)" -gt 40 ]; then
    mkdir -p "$CALIB/after"
    OUT=$CALIB/after COMPUTE_FROM=$CALIB/h200-socket.json SOCKET_PASSES=1 CAL_SOCKET_S=$(($(left) - 15)) \
      calibration/run_gpu.sh socket
  fi
else
  echo "socket stages skipped: $(left) s left of the deadline" >>"$OUT/summary.txt"
fi
pack_all

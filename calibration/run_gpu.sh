#!/usr/bin/env bash
# run_gpu.sh — the calibration files of the 2 x H200 machine in one GPU call:
# NVLink (everything), then host shared memory and sockets (collectives only,
# on the NVLink run's compute tables). The collectives run one process per
# GPU under mpirun, as the executor runs them. Builds nothing: it runs the
# tacorun built on the CPU machine (BIN). Results in $OUT (at most 8 files):
#   h200-nvlink.json h200-shm.json h200-socket.json   the calibration files
#   logs-STAGES.tgz  progress logs, GEMM passes (nvlink-gemm.tsv), the clock
#                 section's points (nvlink-clock.tsv), the collectives' per-size
#                 batch spread (*-spread.tsv), machine.txt
#   summary.txt   one line per stage
# usage: calibration/run_gpu.sh [nvlink] [nvlink-comm] [shm] [socket] [gemm] [clock]   (default: nvlink shm socket)
#   gemm: the GEMM table alone (gemm.json, logs/gemm.tsv; CAL_GEMM_S, default 120)
#   nvlink-comm: the NVLink collectives only, on the compute tables of COMPUTE_FROM
#   shm, socket: on the compute tables of COMPUTE_FROM (default: this run's NVLink file)
#   clock: the clock section alone (clock.json, logs/clock.tsv; one process, GPU 0, ~33 s)
# The NVLink stage measures the clock section too (~33 s, after the memory-bound
# kernels); shm and socket copy it from the NVLink file with the compute tables
# (--compute-from: same GPUs). CLOCK=0 skips it (tacorun calibrate --no-clock).
# Limits (s): CAL_NVLINK_S (240: since 2026-12-06 the stage includes the FP8 GEMM check and table,
# ~40 s on an H100), CAL_SHM_S (45), CAL_SOCKET_S (150); fallbacks 50 and 35.
# SOCKET_REPS (21): timed batches per size over sockets (9 elsewhere); SOCKET_PASSES (1): sweeps over
# the socket sizes, median kept (tacorun calibrate --comm-passes: that transport wanders over seconds);
# SOCKET_BATCH_US: the least duration of a timed socket batch (--comm-batch-us; default 1000 us).
# GEMM_PASSES (4): passes over the GEMM shapes, alternating direction (tacorun calibrate --gemm-passes).
set -u
cd "$(dirname "$0")/.."
BIN=${BIN:-.devbin/calib/tacorun}
OUT=${OUT:-/tmp/calib-out}
SOCKET_MAX=${SOCKET_MAX:-268435456} # sockets: up to 256 MiB (1 GiB takes 0.2-0.6 s per call there)
COMPUTE=${COMPUTE_FROM:-$OUT/h200-nvlink.json}
START=$(date +%s)
L=$OUT/logs
mkdir -p "$L"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }

# variant_args CMD: the --variant options of VARIANTS ("NAME=VALUE ...", ops_variants.h) for the
# tacorun commands that take them (execute, calibrate, train); nothing for the others.
variant_args() {
  case $1 in execute | calibrate | train) for v in ${VARIANTS:-}; do printf '%s\n' --variant "$v"; done ;; esac
}
mpi() { # mpi LIMIT CMD ARGS...: two ranks, forwarding the NCCL_* variables that are set, VARIANTS as options; bounded
  local limit=$1; shift
  local fwd=(-x LD_LIBRARY_PATH)
  for v in $(env | grep -o '^NCCL_[A-Z_]*'); do fwd+=(-x "$v"); done
  local cmd=$1; shift
  mapfile -t va < <(variant_args "$cmd")
  timeout "$limit" mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$BIN" "$cmd" "${va[@]}" "$@"
}

# SM clock, power and temperature of both GPUs every 200 ms while a stage runs
# (tacorun cannot read them: the toolkit here has no NVML to link), in
# logs/STAGE-clocks.csv; the summary gets the median SM clock and power of GPU 0.
CLOCKS_PID=
clocks_start() {
  CLOCKS_FILE="$L/$1-clocks.csv"
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits \
    -lms 200 >"$CLOCKS_FILE" 2>/dev/null &
  CLOCKS_PID=$!
}
clocks_stop() {
  [ -n "$CLOCKS_PID" ] || return 0
  kill "$CLOCKS_PID" 2>/dev/null
  wait "$CLOCKS_PID" 2>/dev/null
  CLOCKS_PID=
  local c p
  c=$(awk -F', *' '$2 == 0 { print $3 }' "$CLOCKS_FILE" | sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%d MHz (min %d, max %d, %d samples)", v[int((NR + 1) / 2)], v[1], v[NR], NR }')
  p=$(awk -F', *' '$2 == 0 { print $4 }' "$CLOCKS_FILE" | sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.0f W (max %.0f)", v[int((NR + 1) / 2)], v[NR] }')
  [ -n "$c" ] && say "GPU 0 while it ran: SM clock median $c, power median $p"
}

{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv
  nvidia-smi topo -m
  mpirun --version | head -1
} >"$L/machine.txt" 2>&1
[ -x "$BIN" ] || { say "no tacorun at $BIN"; exit 1; }

# the zoo by path (a tacorun built elsewhere has that machine's zoo folder compiled in)
models="$(ls models/*.json | paste -sd,),experiments/validation/models/swiglu-h4096.json"
clock_opt=()
[ "${CLOCK:-1}" = 0 ] && clock_opt=(--no-clock)
stages="${*:-nvlink shm socket}"

for s in $stages; do
  case $s in
  nvlink)
    clocks_start nvlink
    mpi "${CAL_NVLINK_S:-240}" calibrate --transport-name nvlink --models "$models" --out "$OUT/h200-nvlink.json" \
      --gemm-passes "${GEMM_PASSES:-4}" --gemm-tsv "$L/nvlink-gemm.tsv" --spread-tsv "$L/nvlink-spread.tsv" \
      --clock-tsv "$L/nvlink-clock.tsv" ${clock_opt[@]+"${clock_opt[@]}"} >"$L/nvlink.log" 2>&1
    say "calibrate nvlink rc=$? ($(elapsed) s): $(grep -m1 'wrote' "$L/nvlink.log")"
    clocks_stop
    grep -E 'passes 1 and 2|settle|gemm: pass|clock: window|clock section' "$L/nvlink.log" | tee -a "$SUMMARY"
    if ! grep -q wrote "$L/nvlink.log" && [ -f "$OUT/h200-nvlink.json" ]; then
      # the file holds the compute tables (saved before the collectives):
      # measure its collectives from one process instead, and say so
      timeout 50 "$BIN" calibrate --compute-from "$OUT/h200-nvlink.json" --transport-name nvlink \
        --out "$OUT/h200-nvlink.json" --spread-tsv "$L/nvlink-spread.tsv" >"$L/nvlink-single.log" 2>&1
      say "FALLBACK nvlink collectives from one process rc=$? ($(elapsed) s)"
    fi
    ;;
  gemm)
    # the GEMM table only (one process, GPU 0), every pass in gemm.tsv: for the held-out check
    clocks_start gemm
    timeout "${CAL_GEMM_S:-120}" "$BIN" calibrate --only gemm --gemm-passes "${GEMM_PASSES:-4}" --transport-name nvlink --models "$models" \
      --out "$OUT/gemm.json" --gemm-tsv "$L/gemm.tsv" >"$L/gemm.log" 2>&1
    say "calibrate gemm rc=$? ($(elapsed) s): $(grep -m1 'wrote' "$L/gemm.log")"
    clocks_stop
    grep -E 'passes 1 and 2|settle|gemm: pass' "$L/gemm.log" | tee -a "$SUMMARY"
    ;;
  clock)
    # the clock section alone (one process, GPU 0): speeds at duty cycles < 1, the window
    clocks_start clock
    timeout 120 "$BIN" calibrate --only clock --transport-name nvlink --out "$OUT/clock.json" \
      --clock-tsv "$L/clock.tsv" >"$L/clock.log" 2>&1
    say "calibrate clock rc=$? ($(elapsed) s): $(grep -m1 'clock: window' "$L/clock.log")"
    clocks_stop
    ;;
  nvlink-comm)
    [ -f "$COMPUTE" ] || { say "nvlink-comm: no file $COMPUTE to take the compute tables from"; continue; }
    mpi "${CAL_NVLINK_S:-150}" calibrate --compute-from "$COMPUTE" --transport-name nvlink \
      --out "$OUT/h200-nvlink.json" --spread-tsv "$L/nvlink-spread.tsv" >"$L/nvlink-comm.log" 2>&1
    say "calibrate nvlink-comm rc=$? ($(elapsed) s): $(grep -m1 'wrote' "$L/nvlink-comm.log")"
    ;;
  shm)
    [ -f "$COMPUTE" ] || { say "shm: no file $COMPUTE to take the compute tables from"; continue; }
    mpi "${CAL_SHM_S:-45}" calibrate --transport shm --quick --compute-from "$COMPUTE" \
      --transport-name shm --out "$OUT/h200-shm.json" --spread-tsv "$L/shm-spread.tsv" >"$L/shm.log" 2>&1
    say "calibrate shm rc=$? ($(elapsed) s): $(grep -m1 'wrote' "$L/shm.log")"
    if ! grep -q wrote "$L/shm.log"; then
      timeout 35 "$BIN" calibrate --transport shm --quick --compute-from "$COMPUTE" \
        --transport-name shm --out "$OUT/h200-shm.json" --spread-tsv "$L/shm-spread.tsv" >"$L/shm-single.log" 2>&1
      say "FALLBACK shm from one process rc=$? ($(elapsed) s)"
    fi
    ;;
  socket)
    [ -f "$COMPUTE" ] || { say "socket: no file $COMPUTE to take the compute tables from"; continue; }
    # sockets: batches of one size spread ~13 % (NVLink, shm ~3 %), so more of them for the median
    NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo mpi "${CAL_SOCKET_S:-150}" \
      calibrate --transport socket --quick --compute-from "$COMPUTE" --transport-name socket --max-bytes "$SOCKET_MAX" \
      --comm-reps "${SOCKET_REPS:-21}" --comm-passes "${SOCKET_PASSES:-1}" ${SOCKET_BATCH_US:+--comm-batch-us "$SOCKET_BATCH_US"} \
      --out "$OUT/h200-socket.json" \
      --spread-tsv "$L/socket-spread.tsv" >"$L/socket.log" 2>&1
    say "calibrate socket rc=$? ($(elapsed) s): $(grep -m1 'wrote' "$L/socket.log")"
    ;;
  *) say "unknown stage $s" ;;
  esac
done

for t in "$L"/*-spread.tsv; do
  [ -f "$t" ] || continue
  # median and p90 of the per-size spread
  tail -n +3 "$t" | cut -f7 | sort -g | awk -v f="$(basename "$t")" '{ v[NR] = $1 } END { if (!NR) exit; i = int(0.9 * NR); if (i < 1) i = 1; printf "%s: batch spread median %.1f%%, p90 %.1f%% over %d sizes\n", f, v[int((NR + 1) / 2)], v[i], NR }' |
    tee -a "$SUMMARY"
done
# one archive per call, named by its stages (a later call into the same OUT keeps the earlier one)
tar -czf "$OUT/logs-$(echo "$stages" | tr ' ' '-').tgz" -C "$OUT" logs && rm -rf "$L"
say "done in $(elapsed) s"

#!/usr/bin/env bash
# run_gpu.sh — the calibration files of the 2 x H200 machine in one GPU call:
# NVLink (everything), then host shared memory and sockets (collectives only,
# on the NVLink run's compute tables). The collectives run one process per
# GPU under mpirun, as the executor runs them. Builds nothing: it runs the
# tacorun built on the CPU machine (BIN). Results in $OUT (at most 8 files):
#   h200-nvlink.json h200-shm.json h200-socket.json   the calibration files
#   logs.tgz      progress logs, GEMM passes (nvlink-gemm.tsv), the
#                 collectives' per-size batch spread (*-spread.tsv), machine.txt
#   summary.txt   one line per stage
# usage: calibration/run_gpu.sh [nvlink] [nvlink-comm] [shm] [socket]   (default: nvlink shm socket)
#   nvlink-comm: the NVLink collectives only, on the compute tables of COMPUTE_FROM
#   shm, socket: on the compute tables of COMPUTE_FROM (default: this run's NVLink file)
# Limits (s): CAL_NVLINK_S (150), CAL_SHM_S (45), CAL_SOCKET_S (75); fallbacks 50 and 35.
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

mpi() { # mpi LIMIT ARGS...: two ranks, forwarding the NCCL_* variables that are set; bounded
  local limit=$1; shift
  local fwd=(-x LD_LIBRARY_PATH)
  for v in $(env | grep -o '^NCCL_[A-Z_]*'); do fwd+=(-x "$v"); done
  timeout "$limit" mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$BIN" "$@"
}

{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv
  nvidia-smi topo -m
  mpirun --version | head -1
} >"$L/machine.txt" 2>&1
[ -x "$BIN" ] || { say "no tacorun at $BIN"; exit 1; }

# the zoo by path (a tacorun built elsewhere has that machine's zoo folder compiled in)
models="$(ls models/*.json | paste -sd,),experiments/validation/models/swiglu-h4096.json"
stages="${*:-nvlink shm socket}"

for s in $stages; do
  case $s in
  nvlink)
    mpi "${CAL_NVLINK_S:-150}" calibrate --transport-name nvlink --models "$models" --out "$OUT/h200-nvlink.json" \
      --gemm-tsv "$L/nvlink-gemm.tsv" --spread-tsv "$L/nvlink-spread.tsv" >"$L/nvlink.log" 2>&1
    say "calibrate nvlink rc=$? ($(elapsed) s): $(grep -m1 'wrote' "$L/nvlink.log")"
    grep -E 'passes 1 and 2|settle' "$L/nvlink.log" | tee -a "$SUMMARY"
    if ! grep -q wrote "$L/nvlink.log" && [ -f "$OUT/h200-nvlink.json" ]; then
      # the file holds the compute tables (saved before the collectives):
      # measure its collectives from one process instead, and say so
      timeout 50 "$BIN" calibrate --compute-from "$OUT/h200-nvlink.json" --transport-name nvlink \
        --out "$OUT/h200-nvlink.json" --spread-tsv "$L/nvlink-spread.tsv" >"$L/nvlink-single.log" 2>&1
      say "FALLBACK nvlink collectives from one process rc=$? ($(elapsed) s)"
    fi
    ;;
  nvlink-comm)
    [ -f "$COMPUTE" ] || { say "nvlink-comm: no file $COMPUTE to take the compute tables from"; continue; }
    mpi "${CAL_NVLINK_S:-150}" calibrate --compute-from "$COMPUTE" --transport-name nvlink \
      --out "$OUT/h200-nvlink.json" --spread-tsv "$L/nvlink-spread.tsv" >"$L/nvlink-comm.log" 2>&1
    say "calibrate nvlink-comm rc=$? ($(elapsed) s): $(grep -m1 'wrote' "$L/nvlink-comm.log")"
    ;;
  shm)
    [ -f "$COMPUTE" ] || { say "shm: no file $COMPUTE to take the compute tables from"; continue; }
    NCCL_P2P_DISABLE=1 mpi "${CAL_SHM_S:-45}" calibrate --quick --compute-from "$COMPUTE" \
      --transport-name shm --out "$OUT/h200-shm.json" --spread-tsv "$L/shm-spread.tsv" >"$L/shm.log" 2>&1
    say "calibrate shm rc=$? ($(elapsed) s): $(grep -m1 'wrote' "$L/shm.log")"
    if ! grep -q wrote "$L/shm.log"; then
      NCCL_P2P_DISABLE=1 timeout 35 "$BIN" calibrate --quick --compute-from "$COMPUTE" \
        --transport-name shm --out "$OUT/h200-shm.json" --spread-tsv "$L/shm-spread.tsv" >"$L/shm-single.log" 2>&1
      say "FALLBACK shm from one process rc=$? ($(elapsed) s)"
    fi
    ;;
  socket)
    [ -f "$COMPUTE" ] || { say "socket: no file $COMPUTE to take the compute tables from"; continue; }
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo mpi "${CAL_SOCKET_S:-75}" \
      calibrate --quick --compute-from "$COMPUTE" --transport-name socket --max-bytes "$SOCKET_MAX" \
      --comm-reps 9 --out "$OUT/h200-socket.json" --spread-tsv "$L/socket-spread.tsv" >"$L/socket.log" 2>&1
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
tar -czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$L"
say "done in $(elapsed) s"

#!/usr/bin/env bash
# run_gpu.sh — the clock measurements of experiments/validation/clock/ in one
# GPU call on the 2 x H200 machine. Builds nothing: runs the tacorun built on
# the CPU machine (BIN). Results in $OUT:
#   clock.json       `tacorun calibrate --only clock` (the clock section alone, GPU 0)
#   logs-clock.tgz   clock.log, clock.tsv (every point), probe-{nvlink,shm,socket}.txt
#                    (tacorun probe-interleave), clocks.csv (nvidia-smi every 100 ms),
#                    stages.txt (UTC start/end of every stage), copy.log
#   summary.txt      one line per stage
# usage: experiments/validation/clock/run_gpu.sh [clock] [copy] [nvlink] [shm] [socket]
#        (default: all five; PROBE_ROUNDS (200) and PROBE_REPS (3) for the probes,
#         socket rounds 60)
set -u
cd "$(dirname "$0")/../../.."
BIN=${BIN:-.devbin/clockcal/tacorun}
OUT=${OUT:-/tmp/clock-out}
L=$OUT/logs
mkdir -p "$L"
export NCCL_NVLS_ENABLE=0 # never NVLink multicast
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
START=$(date +%s)
SUMMARY=$OUT/summary.txt
say() { echo "$*" | tee -a "$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }
stamp() { date -u +%H:%M:%S.%3N; }
mpi() { # mpi LIMIT ARGS...: two ranks, forwarding the NCCL_* variables that are set; bounded
  local limit=$1; shift
  local fwd=(-x LD_LIBRARY_PATH)
  for v in $(env | grep -o '^NCCL_[A-Z_]*'); do fwd+=(-x "$v"); done
  timeout "$limit" mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$BIN" "$@"
}
stage() { # stage NAME COMMAND...: runs it, logs its UTC start/end
  local name=$1; shift
  echo "$name start $(stamp)" >>"$L/stages.txt"
  "$@"
  local rc=$?
  echo "$name end $(stamp) rc=$rc" >>"$L/stages.txt"
  say "$name rc=$rc ($(elapsed) s)"
}

[ -x "$BIN" ] || { say "no tacorun at $BIN"; exit 1; }
{
  nvidia-smi --query-gpu=index,name,driver_version,clocks.max.sm,power.limit --format=csv
  mpirun --version | head -1
  date -u
} >"$L/machine.txt" 2>&1
"$BIN" calibrate --help | grep -q -- --no-clock || say "WARNING: this tacorun has no clock section"
nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 \
  >"$L/clocks.csv" 2>/dev/null &
SMI=$!

ROUNDS=${PROBE_ROUNDS:-200}
REPS=${PROBE_REPS:-3}
for s in ${*:-clock copy nvlink shm socket}; do
  case $s in
  clock)
    stage clock timeout 120 "$BIN" calibrate --only clock --transport-name nvlink --out "$OUT/clock.json" \
      --clock-tsv "$L/clock.tsv" >"$L/clock.log" 2>&1
    grep -E 'clock: (window|back to back)' "$L/clock.log" | tee -a "$SUMMARY"
    ;;
  copy)
    # --compute-from carries the clock section over (as run_gpu.sh's shm and socket stages do)
    [ -f "$OUT/clock.json" ] || { say "copy: no clock.json"; continue; }
    stage copy timeout 60 "$BIN" calibrate --quick --compute-from "$OUT/clock.json" --transport-name nvlink \
      --max-bytes 4096 --out "$OUT/copy.json" >"$L/copy.log" 2>&1
    python3 - "$OUT/clock.json" "$OUT/copy.json" <<'EOF' | tee -a "$SUMMARY"
import json, sys
a, b = (json.load(open(p)).get("clock") for p in sys.argv[1:3])
print("copy: clock section carried over by --compute-from:", a is not None and a == b)
EOF
    ;;
  nvlink) stage probe-nvlink mpi 90 probe-interleave --rounds "$ROUNDS" --reps "$REPS" >"$L/probe-nvlink.txt" 2>&1 ;;
  shm) stage probe-shm mpi 90 probe-interleave --transport shm --rounds "$ROUNDS" --reps "$REPS" >"$L/probe-shm.txt" 2>&1 ;;
  socket)
    NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo \
      stage probe-socket mpi 120 probe-interleave --transport socket --rounds 60 --reps "$REPS" >"$L/probe-socket.txt" 2>&1
    ;;
  *) say "unknown stage $s" ;;
  esac
done
kill "$SMI" 2>/dev/null
wait "$SMI" 2>/dev/null
tar -czf "$OUT/logs-clock.tgz" -C "$OUT" logs && rm -rf "$L"
say "done in $(elapsed) s"

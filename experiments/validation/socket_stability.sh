#!/usr/bin/env bash
# socket_stability.sh — why does the loopback socket transport move 10-30 % within minutes
# (socket_drift.sh), and does any launch setting hold it still? One GPU call, nothing built there.
# Three settings, taken in turn ROUNDS times so that a drift of the machine moves each alike:
#   default  as the validation runs launch ranks (mpirun --bind-to none, NCCL's socket defaults)
#   pinned   each rank and all its threads on its own CPUs (taskset: rank r on CPUs [r*N, r*N+N),
#            N = half the CPUs): tests whether the scheduler moving NCCL's socket threads onto
#            CPUs that spinning threads hold is what moves the transport (the last CPU is left to
#            the memcpy probe, MEMBW=.../membw_probe, host_probe/membw_probe.c)
#   threads  NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=2: several helper threads per connection
#            (tests whether one thread's placement is what moves it)
# Each turn: `tacorun probe-interleave` (REPS repetitions of its patterns, ROUNDS_PER_REP all-reduces
# of 32 MiB each; the b2b pattern is the back-to-back all-reduce as calibrate times it). Then the
# tp2-none-socket plan with PLAN_ITERS timed iterations under default and under pinned.
# vmstat 1 runs throughout (the 'st' column is time stolen by the host from this VM).
# usage: BIN=.../tacorun OUT=... [MEMBW=.../membw_probe] socket_stability.sh
#   (ROUNDS 3, REPS 4, ROUNDS_PER_REP 20, PLAN_ITERS 4; SETTINGS "default pinned threads",
#    PLAN_SETTINGS "default pinned default pinned")
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:?tacorun}
OUT=${OUT:-/tmp/socket-stability}
ROUNDS=${ROUNDS:-3}
REPS=${REPS:-4}
ROUNDS_PER_REP=${ROUNDS_PER_REP:-20}
PLAN_ITERS=${PLAN_ITERS:-4}
PLAN=experiments/plans/gpt-h4096-tp2-none-socket.json
mkdir -p "$OUT"
. experiments/validation/gpu_lib.sh # START, say, elapsed (uses OUT, BIN)
export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo
{ lscpu; lscpu -e; nproc; cat /proc/loadavg; } >"$OUT/cpus.txt" 2>&1
NCPU=$(nproc)
export HALF=$(((NCPU - 2) / 2)) # CPUs per pinned rank; the last CPU runs the memcpy probe
vmstat -t 1 >"$OUT/vmstat.txt" 2>&1 &
vm=$!
MEMBW=${MEMBW:-}
mb=
if [ -x "$MEMBW" ]; then # one core's memcpy bandwidth every 250 ms, beside everything else
  taskset -c $((NCPU - 1)) "$MEMBW" 900 250 >"$OUT/membw.tsv" 2>&1 &
  mb=$!
fi

# launch SETTING LIMIT ARGS...: two ranks of tacorun under the setting
launch() {
  local setting=$1 limit=$2; shift 2
  local fwd=(-x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -x NCCL_IB_DISABLE
             -x NCCL_SOCKET_IFNAME)
  case $setting in
  default) timeout "$limit" mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$BIN" "$@" ;;
  threads) NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=2 timeout "$limit" mpirun --allow-run-as-root -np 2 \
             --bind-to none "${fwd[@]}" -x NCCL_SOCKET_NTHREADS -x NCCL_NSOCKS_PERTHREAD "$BIN" "$@" ;;
  pinned) timeout "$limit" mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" -x HALF bash -c \
            'r=$OMPI_COMM_WORLD_RANK; exec taskset -c $((r * HALF))-$((r * HALF + HALF - 1)) "$0" "$@"' "$BIN" "$@" ;;
  esac
}

for r in $(seq 1 "$ROUNDS"); do
  for s in ${SETTINGS:-default pinned threads}; do
    launch $s 90 probe-interleave --rounds "$ROUNDS_PER_REP" --reps "$REPS" >"$OUT/probe-$s-$r.txt" 2>&1
    rc=$?
    # rank 0's b2b lines: median per call of each repetition
    say "round $r $s rc=$rc ($(elapsed) s) $(date -u +%T) b2b med/mean us: $(awk -F'\t' '$1==0 && $3 ~ /^b2b/ && $2>0 { printf "%.0f/%.0f ", $5, $8 }' "$OUT/probe-$s-$r.txt")"
  done
done
for s in ${PLAN_SETTINGS:-default pinned default pinned}; do
  launch $s 120 execute "$PLAN" --iters "$PLAN_ITERS" --warmup 1 --timeout 30 --ops-csv "$OUT/plan-$s.ops.txt" \
    >>"$OUT/plan-$s.txt" 2>&1
  say "plan $s rc=$? ($(elapsed) s) $(date -u +%T): $(grep -E '^# iteration time' "$OUT/plan-$s.txt" | tail -1 | sed 's/.*: median/median/')"
done
kill $vm $mb 2>/dev/null
wait $vm $mb 2>/dev/null
tar -czf "$OUT/raw.tgz" -C "$OUT" $(cd "$OUT" && ls probe-* plan-* vmstat.txt cpus.txt membw.tsv 2>/dev/null) &&
  rm -f "$OUT"/probe-* "$OUT"/plan-*
say "done in $(elapsed) s"

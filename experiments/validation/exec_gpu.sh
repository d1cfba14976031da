#!/usr/bin/env bash
# exec_gpu.sh — the executor on the 2 x H200 machine in one call: correctness
# checks, the fault tests, then every validation plan (plans.txt) timed in its
# transport. Builds nothing: it runs the tacorun built on the CPU machine (BIN).
# Results land in $OUT (at most 8 files):
#   machine.txt   GPU, driver, CUDA, NCCL, topology
#   check.txt     `tacorun execute --check` (2 ranks: TP1/TP2/DP2/PP2 vs float64, plan walker, NaN stop)
#   fault.txt     killed-rank tests: rank 1 SIGKILLs itself mid-run, rank 0 must exit non-zero in time
#   nan.txt       --inject-nan on a timed plan: both ranks stop naming the step and tensor
#   timing.txt    every timed run's printout (median/min/max, MFU, per-op table)
#   results.tgz   measured/<tag>.json (schema/result.h) and <tag>.ops.txt of each timed run
#   summary.txt   one line per stage
#   calib.tgz     (stage calibrate) calib/h200-{nvlink,shm,socket}.json and their logs
#   predicted.tgz (stage predict) predicted/<tag>.json, .txt and README: `tacosim simulate`
#                 of each plan, run here BEFORE its timed run, with this call's calibration
# usage: exec_gpu.sh [calibrate] [check] [fault] [nan] [predict] [timed] [timed-TRANSPORT] [pack]
#        (default: check fault nan timed pack); pack: measured/ and predicted/ into one archive
#        each (a later call that adds to them runs pack last)
# BUDGET (s, default 215): no timed plan starts after this much wall time.
# CLOCKS=1: also clocks.csv, the GPUs' SM clock and power every 100 ms during the timed plans.
# TAGS (plans.txt tags): time only these, e.g. TAGS="dp2-nvlink swiglu-dp2-shm" exec_gpu.sh check timed
# timed-nvlink, timed-shm, timed-socket: only the plans of that transport.
# predict: SIM_BUNDLE (a .tar.xz of tacosim, the shared libraries it links and
#   the dynamic loader, built on the CPU machine; the GPU machine has no SimGrid)
#   and CALIB (folder of h200-<transport>.json) must be set; predicts every plan of
#   plans.txt whose transport has a calibration file there and no prediction yet.
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-build-final/runtime/tacorun}
OUT=${OUT:-/tmp/exec-out}
BUDGET=${BUDGET:-215}
SOCKET_ITERS=${SOCKET_ITERS:-6} # timed iterations on sockets (noisiest transport: its iterations spread ~20 % inside one run; 2 until run 11)
NVLINK_ITERS=${NVLINK_ITERS:-4}
V=experiments/validation
. experiments/validation/gpu_lib.sh # START, say, elapsed, mpi

{
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  nvcc --version 2>/dev/null | tail -1
  ls /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/local/cuda/lib64/libnccl.so* 2>/dev/null
  nvidia-smi topo -m
  "$BIN" execute --help | head -3
} >"$OUT/machine.txt" 2>&1

# The NVLink calibration (every zoo model plus the validation-only model, with
# the executor's own GEMM layouts, attention and norm backward) and the
# collectives-only shm and socket files built on its compute tables.
stage_calibrate() {
  mkdir -p "$OUT/calib"
  local models
  models="$(cd models && ls ./*.json | sed 's|^\./||; s|\.json$||' | paste -sd,),$V/models/swiglu-h4096.json"
  timeout "${CAL_NVLINK_S:-130}" "$BIN" calibrate --transport-name nvlink --models "$models" \
    --out "$OUT/calib/h200-nvlink.json" >"$OUT/calib/nvlink.log" 2>&1
  local rc=$?
  say "calibrate nvlink rc=$rc ($(elapsed) s): $(grep -m1 -E 'wrote|written' "$OUT/calib/nvlink.log")"
  if [ $rc -eq 0 ]; then
    timeout "${CAL_SHM_S:-40}" "$BIN" calibrate --transport shm --quick --compute-from "$OUT/calib/h200-nvlink.json" \
      --transport-name shm --out "$OUT/calib/h200-shm.json" >"$OUT/calib/shm.log" 2>&1
    say "calibrate shm rc=$? ($(elapsed) s)"
    NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo timeout "${CAL_SOCKET_S:-70}" \
      "$BIN" calibrate --transport socket --quick --compute-from "$OUT/calib/h200-nvlink.json" --transport-name socket \
      --out "$OUT/calib/h200-socket.json" >"$OUT/calib/socket.log" 2>&1
    say "calibrate socket rc=$? ($(elapsed) s)"
  fi
  tar -czf "$OUT/calib.tgz" -C "$OUT" calib && rm -rf "$OUT/calib"
}

WALKER_OK=1 # cleared when --check fails (recorded; each plan still runs its own program first)
stage_check() {
  mpi 2 100 execute --check --timeout 20 >"$OUT/check.txt" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || WALKER_OK=0
  say "check rc=$rc ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
  grep -E "worst|FAILED|plan program" "$OUT/check.txt" | head -12 | tee -a "$SUMMARY"
}

# One killed-rank run without MPI (mpirun would kill rank 0 itself): rank 1
# SIGKILLs itself at iteration 3; rank 0 (--timeout 10) must end non-zero
# within the bound (timeout + the watchdog's 10 s).
fault_one() { # fault_one PLAN
  local plan=$1 idf=/tmp/tacorun-fault-id.$$
  rm -f "$idf" "$idf.t1"
  local env=(TACORUN_ID_FILE=$idf TACORUN_NRANKS=2)
  echo "=== fault: $plan ===" >>"$OUT/fault.txt"
  (env "${env[@]}" TACORUN_RANK=1 TACORUN_LOCAL_RANK=1 \
     timeout 90 "$BIN" execute "$plan" --iters 100000 --warmup 1 --timeout 10 --die-at 3 >"$OUT/fault.r1" 2>&1
   echo "$? $(date +%s.%N)" >"$idf.t1") &
  env "${env[@]}" TACORUN_RANK=0 TACORUN_LOCAL_RANK=0 \
    timeout 90 "$BIN" execute "$plan" --iters 100000 --warmup 1 --timeout 10 >"$OUT/fault.r0" 2>&1
  local rc0=$? t0
  t0=$(date +%s.%N)
  wait
  read -r rc1 t1 <"$idf.t1"
  { echo "--- rank 1 (rc $rc1) ---"; tail -5 "$OUT/fault.r1"; echo "--- rank 0 (rc $rc0) ---"; tail -8 "$OUT/fault.r0"; } \
    >>"$OUT/fault.txt"
  local after
  after=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", a - b }')
  local verdict=FAILED
  # passed: non-zero, not killed by `timeout`, within the bound, and because of the peer (communicators aborted)
  [ "$rc0" -ne 0 ] && [ "$rc0" -ne 124 ] && awk -v x="$after" 'BEGIN { exit !(x < 25) }' &&
    grep -q "aborted\|did not finish in time" "$OUT/fault.r0" && verdict=passed
  say "fault $plan: rank 1 rc=$rc1 (137 = SIGKILL), rank 0 rc=$rc0, rank 0 ended ${after} s after rank 1 died: $verdict"
  grep -E "rank 0:" "$OUT/fault.r0" | tail -1 | tee -a "$SUMMARY"
  rm -f "$OUT/fault.r0" "$OUT/fault.r1" "$idf" "$idf.t1"
}

stage_fault() {
  fault_one $V/plans/gpt-tiny-tp2-fault.json
  fault_one $V/plans/gpt-tiny-pp2-fault.json
}

stage_nan() {
  mpi 2 60 execute $V/plans/gpt-tiny-tp2-fault.json --iters 3 --warmup 1 --inject-nan 1 >"$OUT/nan.txt" 2>&1
  local rc=$?
  say "nan stop rc=$rc (expect 1): $(grep -m1 'NaN/Inf\|is NaN' "$OUT/nan.txt")"
}

timed_one() { # timed_one TAG PLAN TRANSPORT NP [--program builtin]
  local tag=$1 plan=$2 transport=$3 np=$4; shift 4
  local it=$NVLINK_ITERS wu=2 limit=60 envs=()
  case $transport in
  shm) it=3 wu=1 ;;
  socket) it=$SOCKET_ITERS wu=1 limit=90 envs=(NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=lo) ;;
  esac
  echo "=== $tag: $plan (transport $transport, $it iterations after $wu warm-up) $* ===" >>"$OUT/timing.txt"
  (
    for kv in "${envs[@]}"; do export "${kv?}"; done
    mpi "$np" "$limit" execute "$plan" --transport "${transport/nvlink/auto}" --iters "$it" --warmup "$wu" --timeout 30 --json "$OUT/measured/$tag.json" \
      --ops-csv "$OUT/measured/$tag.ops.txt" "$@"
  ) >>"$OUT/timing.txt" 2>&1
  local rc=$?
  echo "rc=$rc" >>"$OUT/timing.txt"
  say "$tag rc=$rc ($(elapsed) s): $(grep -E '^# iteration time' "$OUT/timing.txt" | tail -1 | sed 's/.*: median/median/')"
  return $rc
}

# tacosim on this machine through the loader it was bundled with (the GPU
# machine's C library may be older than the CPU machine's).
SIM_DIR=/tmp/tacosim-bundle
stage_predict() {
  [ -n "${SIM_BUNDLE:-}" ] && [ -n "${CALIB:-}" ] || { say "predict: SIM_BUNDLE and CALIB must be set"; return; }
  if [ ! -x $SIM_DIR/tacosim ]; then
    # a carried .tar.xz may have been decompressed in place (xz -d *.xz): take the .tar then (run 9 lost its
    # predictions on the GPU machine to that); GNU tar finds the compression itself
    local bundle=$SIM_BUNDLE
    [ -f "$bundle" ] || bundle=${SIM_BUNDLE%.xz}
    mkdir -p $SIM_DIR && tar -xf "$bundle" -C $SIM_DIR || { say "predict: cannot unpack $SIM_BUNDLE"; return; }
  fi
  local loader
  loader=$(ls $SIM_DIR/ld-linux-x86-64.so.2 2>/dev/null)
  local P=$OUT/predicted
  mkdir -p "$P"
  [ -f "$P/README" ] || echo "# predicted on the GPU machine by the bundled tacosim (commit $(cat $SIM_DIR/COMMIT 2>/dev/null)), before each plan's timed run, with this call's calibration files" >"$P/README"
  while read -r tag plan transport np; do
    [ -f "$P/$tag.json" ] && continue
    [ -f "$CALIB/h200-$transport.json" ] || continue
    TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies \
      timeout 60 $loader --library-path $SIM_DIR $SIM_DIR/tacosim simulate "$plan" --calibration "$CALIB/h200-$transport.json" \
      --json "$P/$tag.json" >"$P/$tag.txt" 2>&1
    printf "%-24s %s  predicted %s\n" "$tag" "$(grep -E '^iteration' "$P/$tag.txt")" "$(date -u +%FT%TZ)" | tee -a "$P/README"
  done < <(grep -v '^#' $V/plans.txt)
  say "predict ($(elapsed) s): $(ls "$P"/*.json 2>/dev/null | wc -l) plans predicted so far"
}

stage_timed() { # stage_timed [TRANSPORT]: every plan, or only those of one transport
  # most informative first: the new program walker, PP, DP buckets, the second model, the slow transports
  local order="tp2-none-nvlink pp2-nvlink dp2-nvlink swiglu-tp2-none-nvlink swiglu-pp2-nvlink tp2-none-shm
               tp2-caat-shm tp2-none-socket tp2-caat-socket swiglu-tp2-taco-socket tp2-taco-nvlink tp2-caat-nvlink
               swiglu-dp2-shm tp2-sp-none-shm tp2-sp-taco-shm pp2-none-shm pp2-taco-shm dp2-none-shm dp2-taco-shm 1gpu-nvlink"
  order=${TAGS:-$order} # TAGS="dp2-nvlink ...": only these
  local smi=
  if [ "${CLOCKS:-0}" = 1 ]; then # SM clock and power every 100 ms (clocks.csv; summary has each plan's start)
    nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 \
      >>"$OUT/clocks.csv" 2>&1 &
    smi=$!
  fi
  for tag in $order; do
    read -r _ plan transport np < <(grep "^$tag " $V/plans.txt)
    [ -n "${1:-}" ] && [ "$transport" != "$1" ] && continue
    [ -n "$smi" ] && say "start $tag $(date -u '+%Y/%m/%d %H:%M:%S.%3N')"
    if [ "$(elapsed)" -ge "$BUDGET" ]; then
      say "$tag: skipped (budget of $BUDGET s spent)"
      continue
    fi
    if ! timed_one "$tag" "$plan" "$transport" "$np" && [[ $tag != *pp2* ]]; then
      timed_one "$tag-builtin" "$plan" "$transport" "$np" --program builtin
    fi
  done
  if [ -n "$smi" ]; then
    kill "$smi" 2>/dev/null
    wait "$smi" 2>/dev/null
  fi
}

# the measured and predicted folders, one archive each (at most 8 files come back)
stage_pack() {
  [ -d "$OUT/measured" ] && [ -n "$(ls "$OUT/measured")" ] && tar -czf "$OUT/results.tgz" -C "$OUT" measured &&
    rm -rf "$OUT/measured"
  [ -d "$OUT/predicted" ] && tar -czf "$OUT/predicted.tgz" -C "$OUT" predicted && rm -rf "$OUT/predicted"
  return 0
}

[ $# -eq 0 ] && set -- check fault nan timed pack
for stage in "$@"; do
  case $stage in
  calibrate) stage_calibrate ;;
  check) stage_check ;;
  fault) stage_fault ;;
  nan) stage_nan ;;
  predict) stage_predict ;;
  timed) stage_timed ;;
  timed-nvlink | timed-shm | timed-socket) stage_timed "${stage#timed-}" ;;
  pack) stage_pack ;;
  *) echo "exec_gpu.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
done
say "done in $(elapsed) s"

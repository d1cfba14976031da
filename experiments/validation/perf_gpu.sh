#!/usr/bin/env bash
# perf_gpu.sh — the attention and MFU measurements on the 2 x H200 machine in
# one call, with binaries built on the CPU machine (nothing is built here):
#   flash.txt    tests/test_exec_flash_gpu --bench: the fused attention against
#                its float64 reference, then timed at the GPT h4096 TP2 shape;
#                tests/test_exec_norm_gpu --bench: the one-kernel norm backward
#                against float64, then timed against the three-kernel path
#   check.txt    `tacorun execute --check` (2 ranks) with EXEC_ATTN=flash: whole
#                models' gradients vs float64 through the fused attention
#   timing.txt   the GPT h4096 TP2 NVLink plan timed with each attention path,
#                alternating (unfused, v1, fa128, unfused, ...) so that drift
#                of the machine hits all alike; per-op tables in results.tgz
#   summary.txt  one line per run, and the table printed last
# usage: perf_gpu.sh [flash] [check] [timed]  (default: all three)
#   clocks.csv   SM clock, power, temperature of both GPUs every 100 ms during the
#                timed runs (nvidia-smi); summary.txt has each run's start time
# VARIANTS: the timed runs, NAME=ENV[,ENV...] words, default: the unfused
#   attention and three-kernel norm backward (base), the 64-row fused attention
#   kernels (v1), the 128-row ones (fa128), those with the one-kernel norm
#   backward (default: the executor's defaults), and the 8-warp forward with
#   float4 dQ atomics (w8v4), each repeated ROUNDS (2) times,
#   then EXTRA once (an ENV may set PLAN, e.g. the shm plan with NCCL_P2P_DISABLE=1).
# PLAN, NP (default the GPT h4096 TP2 NVLink plan on 2 ranks), ITERS (6).
set -u
cd "$(dirname "$0")/../.."
D=${DEVBIN:-.devbin/exec-perf}
BIN=$D/tacorun
OUT=${OUT:-/tmp/perf-out}
PLAN=${PLAN:-experiments/plans/gpt-h4096-tp2-none.json}
NP=${NP:-2}
ITERS=${ITERS:-6}
ROUNDS=${ROUNDS:-2}
VARIANTS=${VARIANTS:-"base=EXEC_ATTN=unfused,EXEC_NORM_BWD=unfused v1=EXEC_FLASH_FWD=v1,EXEC_FLASH_BWD=v1,EXEC_NORM_BWD=unfused fa128=EXEC_NORM_BWD=unfused default=EXEC_ATTN=flash w8v4=EXEC_FLASH_FWD=w8,EXEC_FLASH_BWD=v4"}
EXTRA=${EXTRA:-}
. experiments/validation/gpu_lib.sh # START, say, elapsed, mpi

stage_flash() {
  timeout 60 "$D/test_exec_flash_gpu" --bench >"$OUT/flash.txt" 2>&1
  say "flash test rc=$? ($(elapsed) s)"
  cat "$OUT/flash.txt" | tee -a "$SUMMARY"
  if [ -x "$D/test_exec_norm_gpu" ]; then
    echo "=== test_exec_norm_gpu --bench ===" >>"$OUT/flash.txt"
    timeout 60 "$D/test_exec_norm_gpu" --bench >>"$OUT/flash.txt" 2>&1
    say "norm test rc=$? ($(elapsed) s)"
    sed -n '/=== test_exec_norm_gpu/,$p' "$OUT/flash.txt" | tee -a "$SUMMARY"
  fi
}

stage_check() {
  EXEC_ATTN=flash mpi 2 100 execute --check --timeout 20 >"$OUT/check.txt" 2>&1
  local rc=$?
  say "check (EXEC_ATTN=flash) rc=$rc ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
  grep -E "worst|FAILED" "$OUT/check.txt" | head -6 | tee -a "$SUMMARY"
  if [ $rc -ne 0 ]; then # is it the fused attention? the same check on the unfused path
    echo "=== EXEC_ATTN=unfused ===" >>"$OUT/check.txt"
    EXEC_ATTN=unfused mpi 2 100 execute --check --timeout 20 >>"$OUT/check.txt" 2>&1
    say "check (EXEC_ATTN=unfused) rc=$? ($(elapsed) s)"
  fi
}

timed_one() { # timed_one TAG ENVS
  local tag=$1 envs=$2
  say "start $tag $(date -u '+%Y/%m/%d %H:%M:%S.%3N')"
  echo "=== $tag: ($envs, $ITERS iterations after 2 warm-up) ===" >>"$OUT/timing.txt"
  (
    IFS=, read -ra kvs <<<"$envs"
    for kv in "${kvs[@]}"; do export "${kv?}"; done
    echo "plan $PLAN"
    mpi "$NP" 60 execute "$PLAN" --iters "$ITERS" --warmup 2 --timeout 30 --json "$OUT/measured/$tag.json" \
      --ops-csv "$OUT/measured/$tag.ops.txt"
  ) >>"$OUT/timing.txt" 2>&1
  say "$tag rc=$? ($(elapsed) s): $(grep -E '^# iteration time' "$OUT/timing.txt" | tail -1 | sed 's/.*: median/median/')"
}

stage_timed() {
  local r v smi
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 \
    >"$OUT/clocks.csv" 2>&1 &
  smi=$!
  for r in $(seq 1 "$ROUNDS"); do
    for v in $VARIANTS; do timed_one "${v%%=*}-$r" "${v#*=}"; done
  done
  for v in $EXTRA; do timed_one "${v%%=*}" "${v#*=}"; done
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  tar -czf "$OUT/results.tgz" -C "$OUT" measured
  # attention rows of the per-op tables, side by side
  for f in "$OUT"/measured/*.ops.txt; do
    printf '%-12s %s\n' "$(basename "$f" .ops.txt)" \
      "$(awk '$1 == "fwd.attn" || $1 == "bwd.attn" || $1 == "bwd.ln1" || $1 == "bwd.ln2" { printf "%s %.1f us  ", $1, $4 }' "$f")"
  done | tee -a "$SUMMARY"
  rm -rf "$OUT/measured"
}

say "binaries of commit $(cat "$D/COMMIT" 2>/dev/null || echo '?'); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
[ $# -eq 0 ] && set -- flash check timed
for stage in "$@"; do
  case $stage in
  flash) stage_flash ;;
  check) stage_check ;;
  timed) stage_timed ;;
  *) echo "perf_gpu.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
done
say "done in $(elapsed) s"

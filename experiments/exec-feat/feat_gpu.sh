#!/usr/bin/env bash
# feat_gpu.sh — the executor's layout features on the 2 x H200 machine in one
# call: `tacorun execute --check` (TP1/TP2/DP2/PP2 against float64, and
# sequence parallelism, full/selective recomputation and ZeRO-1 against
# float64 and the runs without them), then one timed plan per feature next to
# the plan without it (TP2, TP2 + full / selective recompute, TP2 + SP; DP2,
# DP2 + ZeRO-1; PP2 1F1B, GPipe, interleaved; SwiGLU TP2 without and with
# GQA), h4096 8 layers on NVLink. Builds nothing: it runs
# the tacorun built on the CPU machine (BIN). At most 8 files land in $OUT:
#   check.txt    the --check printout
#   timing.txt   every timed run's printout
#   results.tgz  measured/<tag>.json and <tag>.ops.txt
#   summary.txt  one line per stage (printed last)
# usage: feat_gpu.sh [check] [timed]   (default: both; timed runs only if the check passed)
# TAGS: time only these tags (see PLANS below).
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:-.devbin/exec-feat/tacorun}
OUT=${OUT:-/tmp/feat-out}
ITERS=${ITERS:-4}
WARMUP=${WARMUP:-2}
BUDGET=${BUDGET:-100} # no timed plan starts after this much wall time (s)
START=$(date +%s)
mkdir -p "$OUT/measured"
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SUMMARY=$OUT/summary.txt
say() { echo "$*" >>"$SUMMARY"; }
elapsed() { echo $(($(date +%s) - START)); }
mpi() { # mpi LIMIT ARGS...: two ranks, forwarding the NCCL_*/EXEC_* variables that are set
  local limit=$1; shift
  local fwd=(-x LD_LIBRARY_PATH)
  for v in $(env | grep -o '^\(NCCL\|EXEC\)_[A-Z_]*' | sort -u); do fwd+=(-x "$v"); done
  timeout "$limit" mpirun --allow-run-as-root -np 2 --bind-to none "${fwd[@]}" "$BIN" "$@"
}

PLANS="tp2-rcfull experiments/exec-feat/plans/gpt-h4096-tp2-rcfull.json
tp2-rcsel experiments/exec-feat/plans/gpt-h4096-tp2-rcsel.json
tp2-sp experiments/plans/gpt-h4096-tp2-sp.json
dp2 experiments/plans/gpt-h4096-dp2.json
dp2-zero1 experiments/exec-feat/plans/gpt-h4096-dp2-zero1.json
pp2-gpipe experiments/exec-feat/plans/gpt-h4096-pp2-gpipe.json
pp2-interleaved experiments/plans/gpt-h4096-pp2-interleaved.json
swiglu-gqa-tp2 experiments/exec-feat/plans/swiglu-h4096-gqa-tp2.json
swiglu-tp2 experiments/validation/plans/swiglu-h4096-tp2-none.json
pp2 experiments/plans/gpt-h4096-pp2.json
tp2-none experiments/plans/gpt-h4096-tp2-none.json"

CHECK_OK=0
stage_check() {
  mpi 90 execute --check --timeout 20 >"$OUT/check.txt" 2>&1 </dev/null
  local rc=$?
  [ $rc -eq 0 ] && CHECK_OK=1
  say "check rc=$rc ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
}

stage_timed() {
  local tag plan
  while read -r tag plan; do
    [ -n "${TAGS:-}" ] && [[ " $TAGS " != *" $tag "* ]] && continue
    if [ "$(elapsed)" -ge "$BUDGET" ]; then say "$tag: skipped (budget of $BUDGET s spent)"; continue; fi
    echo "=== $tag: $plan ($ITERS iterations after $WARMUP warm-up) ===" >>"$OUT/timing.txt"
    # (stdin from /dev/null: mpirun would read the rest of the plan list)
    mpi 45 execute "$plan" --iters "$ITERS" --warmup "$WARMUP" --timeout 30 --json "$OUT/measured/$tag.json" \
      --ops-csv "$OUT/measured/$tag.ops.txt" >>"$OUT/timing.txt" 2>&1 </dev/null
    local rc=$?
    say "$tag rc=$rc ($(elapsed) s): $(grep -E '^# iteration time' "$OUT/timing.txt" | tail -1 | sed 's/.*: median/median/');$(grep -E '^# tokens/s' "$OUT/timing.txt" | tail -1 | sed 's/.*GPU memory in use/ memory/')"
  done <<<"$PLANS"
  tar -czf "$OUT/results.tgz" -C "$OUT" measured && rm -rf "$OUT/measured"
}

[ $# -eq 0 ] && set -- check timed
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader >>"$SUMMARY" 2>&1
for stage in "$@"; do
  case $stage in
  check) stage_check ;;
  timed) if [ $CHECK_OK -eq 1 ] || [ "${FORCE_TIMED:-0}" = 1 ]; then stage_timed; else say "timed: skipped (check failed)"; fi ;;
  *) echo "feat_gpu.sh: unknown stage '$stage'" >&2; exit 2 ;;
  esac
done
say "done in $(elapsed) s"
grep -E "worst|FAILED|zero1|largest" "$OUT/check.txt" | head -20
cat "$SUMMARY"

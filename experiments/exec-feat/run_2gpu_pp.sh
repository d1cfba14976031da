#!/usr/bin/env bash
# run_2gpu_pp.sh — pipeline parallelism in the executor on 2 x H200 (NVLink), in at most ~150 s:
#   1. `tacorun execute --check` on 2 ranks (PP2 1F1B / GPipe / interleaved and the uneven-stage
#      cases against float64; the lines of the pipeline checks go into the summary);
#   2. timed PP2 plans (gpt-h4096, 8 layers, 8 micro-batches of 2 x 2048, 1F1B): the activation slots
#      before (--variant pp-slots=per-micro: one slot per micro-batch, the executor before
#      2026-12-04) and after (the program's in-flight peak), and three uneven-stage plans. Each line
#      shows the measured median, every rank's slots, activation bytes and GPU memory in use
#      (cudaMemGetInfo), beside the prediction and the planner's memory committed before the run
#      (predicted-pp/README, tacosim simulate / tacosim plan).
# Run from the repository root with BIN (a tacorun built from the merged main) and OUT set; builds
# nothing. Writes $OUT/summary.txt, $OUT/run.log (every printout) and, without mpirun, $OUT/rank1.log.
set -u
: "${BIN:?set BIN to a tacorun}" "${OUT:?set OUT to a folder}"
mkdir -p "$OUT"
source experiments/validation/gpu_lib.sh
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
rmdir "$OUT/measured" 2>/dev/null # (gpu_lib.sh makes it; nothing lands there)
LOG=$OUT/run.log
: >"$LOG"
P=experiments/exec-feat/plans
say "run_2gpu_pp.sh $(date -u +%FT%TZ) BIN=$BIN"
nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1 | head -2 | while read -r l; do say "gpu: $l"; done

# 1. correctness
echo "=== execute --check (2 ranks) ===" >>"$LOG"
mpi 2 75 execute --check --timeout 20 >>"$LOG" 2>&1 </dev/null
rc=$?
say "check rc=$rc ($(elapsed) s): $(grep -E '^execute --check' "$LOG" | tail -1)"
grep -E 'plan program \(pp 2|4 layers, pp 2' "$LOG" | sed 's/^ */  /' | while read -r l; do say "  $l"; done

# 2. timed plans: TAG PLAN [VARIANT]
pred() { awk -v t="$1" '$1 == t { $1 = ""; print }' experiments/exec-feat/predicted-pp/README; }
timed() {
  local tag=$1 plan=$2 pred_tag=$3 variant=${4:-}
  if [ "$(elapsed)" -ge 135 ]; then say "$tag: skipped (135 s spent)"; return; fi
  echo "=== $tag: $plan ${variant:+(--variant $variant)} ===" >>"$LOG"
  local start=$(wc -l <"$LOG")
  VARIANTS=$variant mpi 2 30 execute "$plan" --iters 6 --warmup 2 --timeout 20 >>"$LOG" 2>&1 </dev/null
  local rc=$? part
  part=$(tail -n +"$start" "$LOG")
  say "$tag rc=$rc ($(elapsed) s): $(grep -E '^# iteration time' <<<"$part" | sed 's/.*: median/measured median/')"
  grep -E '^# memory rank' <<<"$part" | sed 's/^# memory /  measured /' | while read -r l; do say "  $l"; done
  [ $rc -eq 0 ] || grep -E 'error|exec|refus' <<<"$part" | tail -2 | while read -r l; do say "  $l"; done
  say "  predicted (tacosim simulate; tacosim plan memory): $(pred "$pred_tag")"
}
timed pp2-before "$P/gpt-h4096-pp2-exec.json" pp2-exec pp-slots=per-micro
timed pp2-after "$P/gpt-h4096-pp2-exec.json" pp2-exec
timed pp2-last3 "$P/gpt-h4096-pp2-last3.json" pp2-last3
timed pp2-first3 "$P/gpt-h4096-pp2-first3.json" pp2-first3
timed l9-pp2-acct-loss "$P/gpt-h4096-l9-pp2-acct-loss.json" l9-pp2-acct-loss
say "done in $(elapsed) s"

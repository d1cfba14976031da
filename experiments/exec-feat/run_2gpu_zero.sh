#!/usr/bin/env bash
# run_2gpu_zero.sh — the distributed optimizer's layouts in the executor on the
# 2 x H200 machine (NVLink): `tacorun execute --check` on 2 ranks (its
# dplate/f64, z1late/dp2, z1pg/dp2 columns (the relative-L2 table's last
# three) and its zero1 lines go
# into the summary), then 5 DP = 2 plans of llama3-8b cut to 4 layers
# (experiments/exec-feat/zero/plans): ZeRO-1, ZeRO-2, ZeRO-3, ZeRO-1 with
# overlap_param_gather, ZeRO-1 with overlap_grad_reduce false, each timed
# (--iters 6 --warmup 2) next to its prediction (zero/predicted/, made before
# the run with build/sim/tacosim simulate) and the executor's GPU memory in
# use (cudaMemGetInfo after the timed iterations) next to the planner's
# (memory_per_gpu_bytes of the prediction: plan_memory.c, what `tacosim plan`
# prints as the stage's total). ZeRO-2 and ZeRO-3 are refused by
# this executor (exit 2, NOT IMPLEMENTED): their lines record the refusal.
# Builds nothing. Run from the repository root:
#   BIN=<tacorun> OUT=<folder> experiments/exec-feat/run_2gpu_zero.sh
# Files in $OUT: summary.txt, check.txt (the --check printout), results.tgz (measured/<tag>.json and
# timing.txt, every timed run's printout).
set -u
: "${BIN:?set BIN to a tacorun}" "${OUT:?set OUT to a folder}"
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
. experiments/validation/gpu_lib.sh
D=experiments/exec-feat/zero
ITERS=6 WARMUP=2
BUDGET=${BUDGET:-110} # no timed plan starts after this much wall time (s)

nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader >>"$SUMMARY" 2>&1
mpi 2 90 execute --check --timeout 20 >"$OUT/check.txt" 2>&1 </dev/null
say "check rc=$? ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
grep -E "zero1 \(dp|^  worst|FAILED" "$OUT/check.txt" | head -30 >>"$SUMMARY"
# the relative-L2 table's header and worst line (the new rows dplate/f64, z1late/dp2, z1pg/dp2 are its last three columns)
grep -E "^  relative L2 error" "$OUT/check.txt" | head -1 >>"$SUMMARY"
say "$(printf '%-18s %4s %12s %12s %10s %10s' plan rc measured_ms predicted_ms mem_GiB plan_GiB)"
for tag in zero2 zero3 zero1 zero1-pg zero1-reduce-after; do # the refusals first: they take a second
  plan=$D/plans/$tag.json
  if [ "$(elapsed)" -ge "$BUDGET" ]; then say "$tag: skipped (budget of $BUDGET s spent)"; continue; fi
  echo "=== $tag: $plan ($ITERS iterations after $WARMUP warm-up) ===" >>"$OUT/measured/timing.txt"
  mpi 2 35 execute "$plan" --iters $ITERS --warmup $WARMUP --timeout 20 --json "$OUT/measured/$tag.json" \
    >"$OUT/measured/$tag.txt" 2>&1 </dev/null
  rc=$?
  cat "$OUT/measured/$tag.txt" >>"$OUT/measured/timing.txt"
  ms=$(grep -E '^# iteration time' "$OUT/measured/$tag.txt" | tail -1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p')
  mem=$(grep -E '^# tokens/s' "$OUT/measured/$tag.txt" | tail -1 | sed -n 's/.*GPU memory in use \([0-9.]*\) GiB.*/\1/p')
  read -r pred pmem < <(python3 -c "import json,sys; r = json.load(open(sys.argv[1]))
print('%.1f %.2f' % (1e3 * r['iteration_time_s'], r['memory_per_gpu_bytes'] / 2**30))" "$D/predicted/$tag.json" 2>/dev/null)
  say "$(printf '%-18s %4s %12s %12s %10s %10s' "$tag" "$rc" "${ms:--}" "${pred:--}" "${mem:--}" "${pmem:--}")"
  [ $rc -eq 0 ] || grep -m1 -E "layout\.|error" "$OUT/measured/$tag.txt" | cut -c1-200 >>"$SUMMARY"
done
rm -f "$OUT"/measured/zero*.txt
tar -czf "$OUT/results.tgz" -C "$OUT" measured && rm -rf "$OUT/measured"
say "done in $(elapsed) s"
cat "$SUMMARY"

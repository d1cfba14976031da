#!/bin/bash
# Every inference prediction the small-kernel tables can move, with the shipped default calibration
# (run before and after calibration/merge_small.py; experiments/infer/v3/README.md, "The small kernels
# of a decode step, timed as it runs them"):
#   OUT/v3-on, v3-off: the 26 plans of experiments/infer/v3, --decode graph, --prefill-clock on / off;
#   OUT/v3-first: assembled by ttft/first_plan.py (the run's real clock state);
#   OUT/v3-eager: the 26, eager decode (against the eager steps of the same runs);
#   OUT/tp2: the 24 shipped TP-2 plans (experiments/plans/infer-llama3-8b-tp2, eager);
#   OUT/zoo: experiments/validation/zoo/infer-plans (eager);
# each folder's warnings.txt (distinct lines) and OUT/warnings.txt (counts).
# usage: experiments/infer/v3/small/predict_all.sh OUT   (SIM= tacosim, default build/sim/tacosim)
set -eu
cd "$(dirname "$0")/../../../.."
SIM=${SIM:-build/sim/tacosim}
O=${1:?usage: predict_all.sh OUT}
P=experiments/infer/fp8/predict.sh
export SIM
$P "$O/v3-on" experiments/infer/v3/plans --decode graph > /dev/null
$P "$O/v3-off" experiments/infer/v3/plans --decode graph --prefill-clock off > /dev/null
$P "$O/v3-eager" experiments/infer/v3/plans > /dev/null
python3 experiments/infer/v3/ttft/first_plan.py "$O/v3-on" "$O/v3-off" "$O/v3-first" > /dev/null
$P "$O/tp2" experiments/plans/infer-llama3-8b-tp2 > /dev/null
$P "$O/zoo" experiments/validation/zoo/infer-plans > /dev/null
# warnings per plan: all, and those of a kernel table priced outside its measured range
count() { # DIR PLANS OPTIONS...
  local d=$1 plans=$2 all=0 kern=0 n=0 w
  shift 2
  for f in "$plans"/*.json; do
    w=$("$SIM" simulate "$f" "$@" 2>&1 >/dev/null | grep "warning" || true)
    all=$((all + $(printf '%s' "$w" | grep -c . || true)))
    kern=$((kern + $(printf '%s' "$w" | grep -c "kernel .*outside the measured range" || true)))
    n=$((n + 1))
  done
  echo "$d: $n plans, $all warnings ($kern of kernel tables outside their measured range), $(wc -l < "$O/$d/warnings.txt") distinct"
}
{ count v3-on experiments/infer/v3/plans --decode graph; count v3-eager experiments/infer/v3/plans
  count tp2 experiments/plans/infer-llama3-8b-tp2; count zoo experiments/validation/zoo/infer-plans; } | tee "$O/warnings.txt"

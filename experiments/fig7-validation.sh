#!/usr/bin/env bash
# Figure 7: predicted against measured iteration time. Every measured result
# (`tacorun execute --json`, "source": "measured") kept under
# experiments/validation/ is paired with a prediction of the same plan by
# `tacosim simulate`, with the measured calibration of the transport it ran on.
# Scatter with y = x and a +-10% band. Results named *-plain.json (the
# first executor, kept for the record) are left out, as validation.txt does.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { skip fig7 "jq (apt-get install jq) to read result files"; exit 3; }

VAL="$EXP/validation"
WORK="$DATA/work/fig7"
fresh_dir "$WORK"
: > "$WORK/pairs"
: > "$WORK/list"
n=0
# The run drawn: experiments/validation/measured/ when it holds results, else
# the newest earlier run kept as old/measured-<date>/. Each measured result's
# prediction is the file of the same name in the sibling predicted*/ folder
# (written by the executor's predict/validate scripts), else it is simulated
# here with the plan variant that names the transport's cluster (e.g.
# ...-socket.json) and that transport's measured calibration.
run=""
for d in "$VAL/measured" $(ls -d "$VAL"/old/measured-* 2> /dev/null | sort -r); do
  if ls "$d"/*.json > /dev/null 2>&1; then run="$d"; break; fi
done
[ -n "$run" ] && preds="$(dirname "$run")/$(basename "$run" | sed 's/measured/predicted/')"
while IFS= read -r f; do
  [ "$(jq -r '.source? // empty' "$f" 2> /dev/null)" = measured ] || continue
  tag="$(basename "$f" .json)"
  tag="${tag%-builtin}" # the executor suffixes the program it ran; predictions are named by plan
  tag="${tag%-plan}"
  t="$(jq -r '.machine.transport // "nvlink"' "$f")"
  case $t in *shm*) t=shm ;; *socket*) t=socket ;; *) t=nvlink ;; esac
  meas="$(jq -r '.iteration_time_s' "$f")"
  n=$((n + 1))
  if [ -f "$preds/$tag.json" ]; then
    echo "$meas $(jq -r '.iteration_time_s' "$preds/$tag.json") $t $tag" >> "$WORK/pairs"
    continue
  fi
  plan="$(jq -r '.plan' "$f")"
  for cand in "$plan" "$ROOT/$plan" "$VAL/$plan" "$VAL/plans/$(basename "$plan")" "$EXP/plans/$(basename "$plan")"; do
    [ -f "$cand" ] && { plan="$cand"; break; }
  done
  [ -f "$plan" ] || { echo "fig7: $f: its plan $plan is not in the repository: left out" >&2; continue; }
  variant="${plan%.json}-$t.json"
  [ "$t" != nvlink ] && [ -f "$variant" ] && plan="$variant"
  cal="$ROOT/calibration/h200-$t.json"
  [ -f "$cal" ] || cal="$(nvlink_calibration)"
  echo "$plan $cal $WORK/$tag.csv" >> "$WORK/list"
  echo "$meas SIM:$WORK/$tag.csv $t $tag" >> "$WORK/pairs"
done < <([ -n "$run" ] && find "$run" -maxdepth 1 -name '*.json' -not -name '*-plain.json' | sort)
if [ "$n" = 0 ]; then
  skip fig7 "measured results (tacorun execute --json, \"source\": \"measured\") under experiments/validation/"
  exit 3
fi
if [ -s "$WORK/list" ]; then need_tacosim && simulate_list "$WORK/list"; fi
out="$DATA/fig7-validation.dat"
{
  echo "# run: ${run#$ROOT/}; predictions: ${preds#$ROOT/} (else tacosim simulate)"
  echo "# measured_s predicted_s transport tag"
  while read -r meas pred t tag; do
    if [ "${pred#SIM:}" != "$pred" ]; then
      [ -f "${pred#SIM:}" ] || continue
      read -r pred _ < <(headline "${pred#SIM:}")
    fi
    echo "$meas $pred $t \"$tag\""
  done < "$WORK/pairs"
} > "$out"

plot fig7-validation 850 800 <<GP
set title "Predicted (tacosim simulate) against measured (tacorun execute) iteration time, 2 x H200\n(run ${run#$ROOT/experiments/})"
set xlabel "measured iteration time (s)"
set ylabel "predicted iteration time (s)"
set logscale xy
set grid
set key top left
set size square
stats "$out" using 1 nooutput
lo = STATS_min * 0.7
hi = STATS_max * 1.4
set xrange [lo:hi]
set yrange [lo:hi]
set samples 100
plot "+" using 1:(\$1*0.9):(\$1*1.1) with filledcurves fs transparent solid 0.2 lc rgb "gray50" title "±10%", \
     x lc rgb "black" dt 2 title "y = x", \
     "$out" using 1:(strcol(3) eq "nvlink" ? \$2 : NaN) with points pt 7 ps 1.5 title "NVLink", \
     "" using 1:(strcol(3) eq "shm" ? \$2 : NaN) with points pt 5 ps 1.5 title "host shared memory", \
     "" using 1:(strcol(3) eq "socket" ? \$2 : NaN) with points pt 9 ps 1.5 title "socket", \
     "" using 1:2:4 with labels offset 1,0.5 left font ",7" notitle
GP

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
# The run drawn: experiments/validation/measured/ (earlier runs are in git
# history, commit 3d19b07: validation/old/). Each measured result's
# prediction is the file of the same name in the sibling predicted*/ folder
# (written by the executor's predict/validate scripts), else it is simulated
# here with the plan variant that names the transport's cluster (e.g.
# ...-socket.json) and that transport's measured calibration.
run=""
for d in "$VAL/measured"; do
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

# Left: the scatter on log axes (ticks at every tenth of a decade that holds
# points). Right: the error of every plan by name, one row each, so the names
# never pile up where the NVLink runs crowd together near 0.35 s.
sort -k3,3 -k1,1g "$out" | awk '!/^#/ { printf "%d %s %s %s %.3f\n", n++, $1, $2, $3, ($2 / $1 - 1) * 100 }' \
  > "$DATA/work/fig7/errors"
nrows=$(wc -l < "$DATA/work/fig7/errors")
ytics=$(sort -k3,3 -k1,1g "$out" | awk '!/^#/ { gsub(/"/, "", $4); printf "%s\"%s\" %d", (n++ ? ", " : ""), $4, n - 1 }')
plot fig7-validation 1400 760 <<GP
set multiplot layout 1,2 title "Predicted (tacosim simulate, with the measured 2 x H200 calibrations) against measured (tacorun execute on 2 x H200, NVLink NV18; shm and sockets through NCCL's environment)\n(run ${run#$ROOT/experiments/})"
set xlabel "measured iteration time (s, log scale)"
set ylabel "predicted iteration time (s, log scale)"
set logscale xy
set grid
set key top left
set size ratio -1
stats "$out" using 1 nooutput
lo = STATS_min * 0.85
hi = STATS_max * 1.2
set xrange [lo:hi]
set yrange [lo:hi]
set xtics (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1, 1.5, 2, 3, 4, 5)
set ytics (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1, 1.5, 2, 3, 4, 5)
set mxtics 1
set mytics 1
set samples 100
plot "+" using 1:(\$1*0.9):(\$1*1.1) with filledcurves fs transparent solid 0.2 lc rgb "gray50" title "±10%", \
     x lc rgb "black" dt 2 title "y = x", \
     "$out" using 1:(strcol(3) eq "nvlink" ? \$2 : NaN) with points pt 7 ps 1.5 lc rgb "#0072b2" title "NVLink", \
     "" using 1:(strcol(3) eq "shm" ? \$2 : NaN) with points pt 5 ps 1.5 lc rgb "#e69f00" title "host shared memory", \
     "" using 1:(strcol(3) eq "socket" ? \$2 : NaN) with points pt 9 ps 1.5 lc rgb "#009e73" title "sockets"
unset logscale xy
set size noratio
set xrange [-12:12]
set yrange [-0.7:$nrows - 0.3]
set xtics -12, 2, 12 format "%g"
set ytics ($ytics) font ",9"
set xlabel "prediction error: predicted / measured - 1 (%)"
set ylabel ""
set key off
set grid xtics noytics
set arrow 1 from -10, graph 0 to -10, graph 1 nohead dt 2 lc rgb "gray40"
set arrow 2 from 10, graph 0 to 10, graph 1 nohead dt 2 lc rgb "gray40"
set arrow 3 from 0, graph 0 to 0, graph 1 nohead lc rgb "black"
plot "$DATA/work/fig7/errors" using (strcol(4) eq "nvlink" ? \$5 : NaN):1 with points pt 7 ps 1.5 lc rgb "#0072b2", \
     "" using (strcol(4) eq "shm" ? \$5 : NaN):1 with points pt 5 ps 1.5 lc rgb "#e69f00", \
     "" using (strcol(4) eq "socket" ? \$5 : NaN):1 with points pt 9 ps 1.5 lc rgb "#009e73", \
     "" using 5:1:(sprintf(" %+.1f%%", \$5)) with labels left offset 1,0 font ",8"
unset multiplot
GP

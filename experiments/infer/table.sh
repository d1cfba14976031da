#!/bin/bash
# Predicted against measured TTFT and TPOT of the validation plans, and the measured
# (and predicted) speedup of each codec over plain NCCL. Markdown on stdout.
# Usage: experiments/infer/table.sh [PREDICTED_DIR] [MEASURED_DIR]
set -eu
cd "$(dirname "$0")/../.."
P=${1:-experiments/infer/predicted}
M=${2:-experiments/infer/measured}
rows=$(mktemp)
for m in "$M"/infer-v-*.json; do
  n=$(basename "$m" .json)
  [ -f "$P/$n.json" ] || continue
  echo "$n $(jq -r '"\(.ttft_s) \(.tpot_s)"' "$P/$n.json") $(jq -r '"\(.ttft_s) \(.tpot_s)"' "$m")"
done > "$rows"
echo "| plan | TTFT pred ms | TTFT meas ms | err | TPOT pred ms | TPOT meas ms | err |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
awk '{ et=100*($2-$4)/$4; ep=100*($3-$5)/$5;
       printf "| %s | %.2f | %.2f | %+.1f%% | %.3f | %.3f | %+.1f%% |\n", $1, 1e3*$2, 1e3*$4, et, 1e3*$3, 1e3*$5, ep }' "$rows"
echo
awk '{ et=$2-$4; if (et<0) et=-et; ep=$3-$5; if (ep<0) ep=-ep; print 100*et/$4, 100*ep/$5 }' "$rows" > "$rows.err"
summ() { sort -g | awk '{ v[NR]=$1 } END { if (NR==0) { print "n/a"; exit }
  m = NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "median %.2f%%, max %.2f%% (%d plans)", m, v[NR], NR }'; }
echo "- |error| TTFT: $(cut -d' ' -f1 "$rows.err" | summ)"
echo "- |error| TPOT: $(cut -d' ' -f2 "$rows.err" | summ)"
echo "- |error| TTFT and TPOT together: $(tr ' ' '\n' < "$rows.err" | summ)"
echo
echo "Speedup over plain NCCL (plain time / codec time), measured (predicted):"
echo
echo "| transport | batch x prompt | TTFT taco | TTFT caat | TTFT taco+caat | TPOT taco | TPOT caat | TPOT taco+caat |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for tr in nvlink shm socket; do
  for pt in $(awk '{ print $1 }' "$rows" | grep -- "-$tr-" | sed -E 's/infer-v-[a-z]+-(b[0-9]+-p[0-9]+)-.*/\1/' | sort -u -V); do
    base="infer-v-$tr-$pt"
    line="| $tr | ${pt/-p/ x } |"
    for what in 2 3; do
      for cd in taco caat taco-caat; do
        v=$(awk -v a="$base-none" -v b="$base-$cd" -v c=$what '
              $1==a { pn=$c; mn=$(c+2) } $1==b { pc=$c; mc=$(c+2) }
              END { if (pc>0 && mc>0) printf "%.2f (%.2f)", mn/mc, pn/pc; else printf "-" }' "$rows")
        line="$line $v |"
      done
    done
    echo "$line"
  done
done
rm -f "$rows" "$rows.err"

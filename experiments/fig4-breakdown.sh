#!/usr/bin/env bash
# Figure 4: where the iteration goes — compute, exposed TP, PP and DP
# communication, and the pipeline bubble — for the example plans shipped in
# experiments/plans/ (simulated, mean over the representative ranks).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3

PLANS="${FIG4_PLANS:-gpt3-175b-1024 gpt3-175b-1024-taco gpt3-175b-1024-caat gpt3-175b-1024-taco-caat
  gpt3-175b-1024-sp gpt3-175b-1024-interleaved gpt3-13b-64 llama3-70b-1024 qwen2.5-7b-8gpu
  gpt-h4096-tp2-none gpt-h4096-tp2-taco gpt-h4096-tp2-none-socket gpt-h4096-tp2-taco-socket}"
WORK="$DATA/work/fig4"
fresh_dir "$WORK"
: > "$WORK/list"
for p in $PLANS; do
  [ -f "$EXP/plans/$p.json" ] || { echo "fig4: no plan experiments/plans/$p.json: left out" >&2; continue; }
  # the calibration tacosim picks for the plan's cluster: measured when there is one
  case $p in
    *-shm) cal="$ROOT/calibration/h200-shm.json" ;;
    *-socket) cal="$ROOT/calibration/h200-socket.json" ;;
    *) cal="$(nvlink_calibration)" ;;
  esac
  [ -f "$cal" ] || cal="$(nvlink_calibration)"
  echo "$EXP/plans/$p.json $cal $WORK/$p.csv" >> "$WORK/list"
done
simulate_list "$WORK/list"

out="$DATA/fig4-breakdown.dat"
{
  echo "# simulated breakdown (s): plan compute tp_exposed pp_exposed dp_exposed bubble iteration codec"
  for p in $PLANS; do
    f="$WORK/$p.csv"
    [ -f "$f" ] || continue
    read -r it _ _ _ _ comp tp pp dp codec bub < <(headline "$f")
    echo "\"$p\" $comp $tp $pp $dp $bub $it $codec"
  done
} > "$out"

plot fig4-breakdown 1400 750 <<GP
set title "Simulated (tacosim simulate; nothing measured): iteration-time breakdown of the plans in experiments/plans, costs from the measured 2 x H200 calibrations;\\nshare of the iteration, iteration time above each bar"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set grid ytics
set key outside right top
set xtics rotate by -30 scale 0 font ",9"
set ylabel "fraction of the iteration"
set yrange [0:1.15]
plot "$out" using (\$2/\$7):xtic(1) title "compute", "" using (\$3/\$7) title "TP exposed", \
     "" using (\$4/\$7) title "PP exposed", "" using (\$5/\$7) title "DP exposed", "" using (\$6/\$7) title "bubble", \
     "" using 0:(1.04):(sprintf("%.2f s", \$7)) with labels notitle font ",8"
GP

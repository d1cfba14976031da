#!/usr/bin/env bash
# Figure 8: training loss curves, baseline against TACO and CAAT-Net, from the
# loss logs of real training runs. Each run is a file named loss-<run>.dat
# under experiments/validation/ or experiments/data/: '#' comments, then
# "step loss" per line; the run name is the legend.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

mapfile -t logs < <(find "$EXP/validation" "$DATA" -maxdepth 2 -name 'loss-*.dat' 2> /dev/null | sort)
if [ "${#logs[@]}" = 0 ]; then
  skip fig8 "loss logs of training runs (experiments/validation/loss-<run>.dat: step loss)"
  exit 3
fi
cmd="plot"
for f in "${logs[@]}"; do
  name="$(basename "$f" .dat)"
  cmd="$cmd \"$f\" using 1:2 with lines lw 2 title \"${name#loss-}\","
done
plot fig8-loss 1100 650 <<GP
set title "Training loss (measured)"
set xlabel "step"
set ylabel "loss"
set grid
set key top right
${cmd%,}
GP

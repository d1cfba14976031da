#!/usr/bin/env bash
# Figure 8: training and validation loss of the same small GPT trained with each
# codec on the TP all-reduces (measured on 2 x H200, TP = 2, same seed and data
# order), from the logs of `tacorun train` kept in experiments/loss/loss-<codec>.csv
# (columns step,split,loss,lr,elapsed_s; '#' comments). Left: training loss, mean
# over a window of 50 steps; right: validation loss over the second half of the
# run, where the codecs' differences show (the periodic points are over 16 held-out batches,
# the last one over all 52, hence the kink at the end). See experiments/loss/README.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

LOSS="$EXP/loss"
mapfile -t logs < <(find "$LOSS" -maxdepth 1 -name 'loss-*.csv' 2> /dev/null | sort)
if [ "${#logs[@]}" = 0 ]; then
  skip fig8 "loss logs of training runs (experiments/loss/loss-<codec>.csv from experiments/loss/run.sh full)"
  exit 3
fi
# the baseline first, so it gets the first colour
mapfile -t logs < <(printf '%s\n' "${logs[@]}" | awk '/loss-none\.csv$/ { print; next } { rest = rest $0 "\n" } END { printf "%s", rest }')

work="$DATA/fig8"
mkdir -p "$work"
train_cmd="plot" val_cmd="plot"
last=0
for f in "${logs[@]}"; do
  name="$(basename "$f" .csv)"
  name="${name#loss-}"
  # training loss, moving mean over 50 steps; validation loss as logged
  awk -F, '!/^#/ && $2 == "train" { n++; s += $3; q[n] = $3; if (n > 50) s -= q[n - 50];
           if (n >= 50) print $1, s / 50 }' "$f" > "$work/$name.train"
  awk -F, '!/^#/ && $2 == "val" { print $1, $3 }' "$f" > "$work/$name.val"
  steps=$(awk 'END { print $1 }' "$work/$name.val")
  [ "${steps:-0}" -gt "$last" ] && last=$steps
  train_cmd="$train_cmd \"$work/$name.train\" using 1:2 with lines lw 1.5 title \"$name\","
  val_cmd="$val_cmd \"$work/$name.val\" using 1:2 with linespoints lw 2 pt 7 ps 0.6 title \"$name\","
done
plot fig8-loss 1400 600 <<GP
set multiplot layout 1,2 title "Measured: tacorun train, 25M-parameter byte-level GPT on the King James Bible, TP = 2 on 2 x H200 (NVLink); nothing simulated"
set grid
set xlabel "step"
set ylabel "training loss (nats/byte, mean of 50 steps; log scale)"
set logscale y
set yrange [0.8:4]
set ytics (0.8, 0.9, 1, 1.2, 1.5, 2, 2.5, 3, 4)
set mytics 1
set key top right
${train_cmd%,}
unset logscale y
set ytics autofreq
set autoscale y   # the second half of training: the codecs differ by ~1%, invisible on the first panel's range
set label 1 "last point: the whole held-out part;\nthe others: its first 16 batches" at graph 0.03, graph 0.08 left font ",10"
set xrange [$((last / 2)):$last]
set ylabel "validation loss (nats/byte, held-out 5%)"
set key top right
${val_cmd%,}
unset multiplot
GP

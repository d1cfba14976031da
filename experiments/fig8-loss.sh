#!/usr/bin/env bash
# Figure 8: validation loss with and without compression of the TP all-reduces.
# Left: the 124M-parameter byte-level GPT on the 25.7 MB English corpus (experiments/loss/corpus.sh),
# TP 2 emulated on one H200 (`tacorun train --tp-emulate 2`), every codec run kept in
# experiments/loss/emu/124m/<run>/loss-<codec>.csv, 2,000 steps (seed 1234 solid, seed 4321 dashed;
# the last point is over the whole held-out part; runs whose curve was not kept have no line, see
# experiments/loss/README.md).
# Middle: the same model shape with 24 heads of 32, TP 8 emulated (experiments/loss/emu/124m-tp8/):
# every codec run kept (seed 1234 solid, 4321 dashed; fp8-group and fp8-hadamard stopped before step 2,000).
# Right: the 25.4M GPT on the King James Bible, TP 2 measured on 2 x H200 (experiments/loss/
# loss-<codec>.csv) against the same runs emulated on one H200 (experiments/loss/emu/repro/),
# second half of training (the last point is over the whole held-out part, hence the kink).
# Log format: step,split,loss,lr,elapsed_s with '#' comments; the tree keeps the logs gzipped
# (loss-<codec>.csv.gz), a fresh run's plain loss-<codec>.csv is read the same way.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

LOSS="$EXP/loss"
log() { if [ -f "$1.gz" ]; then echo "$1.gz"; else echo "$1"; fi; }  # LOG.csv or LOG.csv.gz
codec_of() { local c; c=$(basename "$1"); c=${c%.gz}; c=${c%.csv}; echo "${c#loss-}"; }
mapfile -t big < <(find "$LOSS/emu/124m" -name 'loss-*.csv*' 2> /dev/null | sort)
if [ "${#big[@]}" = 0 ] || [ ! -f "$(log "$LOSS/loss-none.csv")" ]; then
  skip fig8 "loss logs (experiments/loss/emu/124m/*/loss-*.csv from experiments/loss/run-emu.sh big, experiments/loss/loss-*.csv)"
  exit 3
fi
work="$DATA/fig8"
mkdir -p "$work"
val() { gzip -cdf "$1" | awk -F, '!/^#/ && $2 == "val" { print $1, $3 }' > "$2"; }
right="plot"
declare -A colour=([none]=1 [taco-e4m3]=2 [fp8-tensor]=3 [fp8-group]=4 [fp8-hadamard]=6 [taco-e5m2]=7 [caat]=8 [taco+caat]=10)
# series LOG...: the gnuplot plot clauses of the kept runs' validation curves (seed 4321 dashed,
# TACO with the reshaping's group in its own colour), titled by the run folder without its tp<N>- prefix.
series() {
  local f run codec dt lc out="plot"
  for f in "$@"; do
    run=$(basename "$(dirname "$f")")
    codec=$(codec_of "$f")
    val "$f" "$work/$run.val"
    dt=1; case $run in *s4321*) dt=2 ;; esac
    lc=${colour[$codec]:-5}; case $run in *-gauto) lc=5 ;; esac
    out="$out \"$work/$run.val\" using 1:2 with linespoints lw 2 dt $dt pt 7 ps 0.5 lc $lc title \"${run#tp*-}\","
  done
  echo "$out"
}
left=$(series "${big[@]}")
mapfile -t tp8 < <(find "$LOSS/emu/124m-tp8" -name 'loss-*.csv*' 2> /dev/null | sort)
mid=$(series "${tp8[@]}")
for c in none taco-e4m3; do
  val "$(log "$LOSS/loss-$c.csv")" "$work/measured-$c.val"
  val "$(log "$LOSS/emu/repro/loss-$c.csv")" "$work/emulated-$c.val"
  right="$right \"$work/measured-$c.val\" using 1:2 with linespoints lw 2 pt 7 ps 0.6 lc ${colour[$c]} title \"$c, 2 x H200\","
  right="$right \"$work/emulated-$c.val\" using 1:2 with linespoints lw 2 dt 2 pt 6 ps 0.8 lc ${colour[$c]} title \"$c, emulated on 1 H200\","
done
plot fig8-loss 2100 600 <<GP
set multiplot layout 1,3
set grid
set xlabel "step"
set title "124M byte-level GPT, English corpus (KJV + kernel docs), TP 2 emulated on one H200"
set ylabel "validation loss (nats/byte, 16 held-out batches)"
set logscale y
set yrange [1.15:3]
set ytics (1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2, 2.5, 3)
set key top right
${left%,}
set title "the same shape with 24 heads, TP 8 emulated on one H200"
${mid%,}
unset logscale y
set autoscale y
set ytics auto
set title "25.4M GPT, King James Bible, TP 2: measured vs emulated"
set xrange [1000:2000]
set ylabel "validation loss (nats/byte)"
${right%,}
unset multiplot
GP

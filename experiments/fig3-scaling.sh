#!/usr/bin/env bash
# Figure 3: weak scaling of GPT-3 175B from 64 to 16,384 GPUs on the
# rail-optimized H200 cluster: TP8 x PP8 x DP (N/64), micro-batch 1, 1.5
# sequences per GPU per iteration (1,536 at 1,024 GPUs), ZeRO-1, 1F1B;
# uncompressed, TACO and CAAT-Net. Throughput per GPU, and the same relative
# to the uncompressed run on 64 GPUs (one reference for all three lines, so
# that the codecs' gain and the scaling loss show on one axis).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3

SIZES="${FIG3_GPUS:-64 128 256 512 1024 2048 4096 8192 16384}"
CODECS="none taco caat"
CAL="$(nvlink_calibration)"
WORK="$DATA/work/fig3"
fresh_dir "$WORK"
: > "$WORK/list"
# the largest runs first, so the last worker does not start the slowest one alone
for n in $(echo "$SIZES" | tr ' ' '\n' | sort -rn); do
  for c in $CODECS; do
    f="$WORK/$n-$c"
    write_plan "$f.json" gpt3-175b h200-16384-rail $((n / 64)) 8 8 1 $((n * 3 / 2)) 2048 "$c"
    echo "$f.json $CAL $f.csv" >> "$WORK/list"
  done
done
simulate_list "$WORK/list"

out="$DATA/fig3-scaling.dat"
{
  echo "# GPT-3 175B TP8 PP8, weak scaling (1.5 sequences per GPU), simulated, calibration $(basename "$CAL")"
  echo "# gpus tokps_gpu[none taco caat] per_gpu_vs_uncompressed_64[none taco caat]"
  declare -A first
  for n in $SIZES; do
    row="$n" eff=""
    for c in $CODECS; do
      f="$WORK/$n-$c.csv"
      if [ -f "$f" ]; then
        read -r _ t _ < <(headline "$f")
        pg=$(awk -v t="$t" -v n="$n" 'BEGIN { printf "%.3f", t / n }')
        [ -n "${first[none]:-}" ] || first[none]=$pg
        row="$row $pg"
        eff="$eff $(awk -v a="$pg" -v b="${first[none]}" 'BEGIN { printf "%.4f", a / b }')"
      else row="$row NaN" eff="$eff NaN"; fi
    done
    echo "$row$eff"
  done
} > "$out"

plot fig3-scaling 1300 600 <<GP
set datafile missing "NaN"
set multiplot layout 1,2 title "Simulated (tacosim simulate; nothing measured at this scale): GPT-3 175B weak scaling, TP8 PP8, 1.5 sequences per GPU,\non the rail-optimized H200 cluster h200-16384-rail, costs from the measured 2 x H200 NVLink calibration"
set logscale x 2
set xlabel "GPUs"
set grid
set key bottom left
set ylabel "tokens/s per GPU"
set yrange [0:*]
plot "$out" using 1:2 with linespoints lw 2 pt 7 lc rgb $C_NONE title "uncompressed", "" using 1:3 with linespoints lw 2 pt 5 lc rgb $C_TACO title "TACO", \
     "" using 1:4 with linespoints lw 2 pt 9 lc rgb $C_CAAT title "CAAT-Net"
set ylabel "tokens/s per GPU relative to the uncompressed run on 64 GPUs"
set yrange [0.94:1.06]
set key top right
plot "$out" using 1:5 with linespoints lw 2 pt 7 lc rgb $C_NONE title "uncompressed", "" using 1:6 with linespoints lw 2 pt 5 lc rgb $C_TACO title "TACO", \
     "" using 1:7 with linespoints lw 2 pt 9 lc rgb $C_CAAT title "CAAT-Net"
unset multiplot
GP

#!/usr/bin/env bash
# Figure 1: simulated throughput per GPU (tokens/s and TFLOP/s) of GPT-3 2.7B,
# 6.7B, 13B, 175B and Qwen2.5 7B, 14B, 72B at TP 2, 4 and 8, each under no
# compression, TACO, CAAT-Net and both. 64 GPUs of the rail-optimized H200
# cluster, sequence 2048, global batch 128, micro-batch 1, 1F1B, ZeRO-1; PP is
# the smallest that fits in HBM (then selective, then full recomputation).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3

MODELS="${FIG1_MODELS:-gpt3-2.7b gpt3-6.7b gpt3-13b gpt3-175b qwen2.5-7b qwen2.5-14b qwen2.5-72b}"
TPS="2 4 8"
CODECS="none taco caat taco+caat"
GPUS=64 GLOBAL=128 SEQ=2048 CLUSTER=h200-1024-rail
CAL="$(nvlink_calibration)"
WORK="$DATA/work/fig1"
fresh_dir "$WORK"
: > "$WORK/list"
: > "$WORK/layouts"

for m in $MODELS; do
  for tp in $TPS; do
    chosen=""
    for rc in none selective full; do
      for pp in 1 2 4 8 16 32 64; do
        [ $((GPUS % (tp * pp))) -eq 0 ] || continue
        dp=$((GPUS / (tp * pp)))
        write_plan "$WORK/probe.json" "$m" "$CLUSTER" "$dp" "$tp" "$pp" 1 "$GLOBAL" "$SEQ" none "$rc"
        if "$TACOSIM" plan "$WORK/probe.json" > /dev/null 2>&1; then chosen="$dp $pp $rc"; break 2; fi
      done
    done
    if [ -z "$chosen" ]; then
      echo "fig1: $m TP$tp: no layout fits (or TP$tp does not divide its heads): left out" >&2
      continue
    fi
    read -r dp pp rc <<< "$chosen"
    echo "$m $tp $dp $pp $rc" >> "$WORK/layouts"
    for c in $CODECS; do
      f="$WORK/$m-tp$tp-$c"
      write_plan "$f.json" "$m" "$CLUSTER" "$dp" "$tp" "$pp" 1 "$GLOBAL" "$SEQ" "$c" "$rc"
      echo "$f.json $CAL $f.csv" >> "$WORK/list"
    done
  done
done
rm -f "$WORK/probe.json"
simulate_list "$WORK/list"

# one row per model x TP: label, tokens/s/GPU and TFLOP/s/GPU for each codec
out="$DATA/fig1-throughput.dat"
{
  echo "# simulated on $GPUS GPUs of $CLUSTER, seq $SEQ, global batch $GLOBAL, calibration $(basename "$CAL")"
  echo "# label tokps_gpu[none taco caat taco+caat] tflops_gpu[none taco caat taco+caat]"
  while read -r m tp dp pp rc; do
    tok="" tfl=""
    for c in $CODECS; do
      f="$WORK/$m-tp$tp-$c.csv"
      if [ -f "$f" ]; then
        read -r _ tps tf _ < <(headline "$f")
        tok="$tok $(awk -v t="$tps" -v g=$GPUS 'BEGIN { printf "%.2f", t / g }')"
        tfl="$tfl $tf"
      else
        tok="$tok NaN" tfl="$tfl NaN"
      fi
    done
    [ "$rc" = none ] && rc="" || rc=" $rc-recompute"
    echo "\"$m TP$tp PP$pp$rc\"$tok$tfl"
  done < "$WORK/layouts"
} > "$out"
cat "$WORK"/*.err 2>/dev/null | sort -u | head -5 >&2 || true

# Top: each codec's speedup over the uncompressed run of the same layout (a
# linear axis around 1: the codecs differ by a few per cent, which a log axis
# of tokens/s hides). Bottom: TFLOP/s per GPU of all four.
plot fig1-throughput 1600 1000 <<EOF
set datafile missing "NaN"
set multiplot layout 2,1 title "Simulated (tacosim simulate; nothing measured): $GPUS H200 GPUs of $CLUSTER, seq $SEQ, global batch $GLOBAL,\\ncosts from the measured 2 x H200 NVLink calibration; TACO G = 128 E4M3, CAAT-Net p = 0.5 on the TP traffic"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key outside top center horizontal samplen 2 width 2
set xtics rotate by -30 scale 0 font ",9"
set rmargin 8
set lmargin 14
set ylabel "speedup over the uncompressed run\\n(tokens/s, same layout)"
set yrange [*<0.9:1.1<*]
set ytics 0.05
plot "$out" using (\$3 / \$2):xtic(1) lc rgb $C_TACO title "TACO", "" using (\$4 / \$2) lc rgb $C_CAAT title "CAAT-Net", \\
     "" using (\$5 / \$2) lc rgb $C_BOTH title "TACO+CAAT-Net", 1 with lines lc rgb "black" dt 2 notitle
set yrange [0:*]
set ytics autofreq
set ylabel "TFLOP/s per GPU (model FLOPs)"
plot "$out" using 6:xtic(1) lc rgb $C_NONE title "uncompressed", "" using 7 lc rgb $C_TACO title "TACO", \\
     "" using 8 lc rgb $C_CAAT title "CAAT-Net", "" using 9 lc rgb $C_BOTH title "TACO+CAAT-Net"
unset multiplot
EOF

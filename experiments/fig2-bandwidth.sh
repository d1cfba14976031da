#!/usr/bin/env bash
# Figure 2: speedup of TACO, CAAT-Net and both over no compression against the
# inter-GPU bandwidth, from PCIe class to NVLink class. One 8-GPU node whose
# intra-node fabric is written at each bandwidth (temporary cluster files of
# kind "pcie", so collectives follow the topology's alpha-beta and not the
# NVLink calibration); compute and codec kernels keep the measured H200 costs.
# GPT-3 13B TP8 and GPT-3 6.7B TP4 x DP2, seq 2048, global batch 16.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3

BWS="${FIG2_BANDWIDTHS:-4 8 16 25 50 100 200 300 450 900}"
CODECS="none taco caat taco+caat"
CAL="$(nvlink_calibration)"
WORK="$DATA/work/fig2"
fresh_dir "$WORK"
: > "$WORK/list"
cases="gpt3-13b:8:1 gpt3-6.7b:4:2"
for bw in $BWS; do
  cat > "$WORK/node-$bw.json" <<JSON
{ "schema": 1, "name": "node-$bw",
  "gpu": { "name": "H200", "bf16_tflops": 989, "hbm_gib": 141, "hbm_gbps": 4800 },
  "nodes": 1, "gpus_per_node": 8,
  "intra": { "kind": "pcie", "gbps_per_gpu": $bw, "latency_us": 2 } }
JSON
  for cs in $cases; do
    IFS=: read -r m tp dp <<< "$cs"
    for c in $CODECS; do
      f="$WORK/$m-$bw-$c"
      write_plan "$f.json" "$m" "$WORK/node-$bw.json" "$dp" "$tp" 1 1 16 2048 "$c"
      echo "$f.json $CAL $f.csv" >> "$WORK/list"
    done
  done
done
simulate_list "$WORK/list"

out="$DATA/fig2-bandwidth.dat"
{
  echo "# speedup over no compression (tokens/s ratio), simulated; calibration $(basename "$CAL") for compute and codec kernels"
  for cs in $cases; do
    IFS=: read -r m tp dp <<< "$cs"
    echo "# $m TP$tp DP$dp: gbps_per_gpu taco caat taco+caat"
    for bw in $BWS; do
      base="$WORK/$m-$bw-none.csv"
      [ -f "$base" ] || continue
      read -r _ t0 _ < <(headline "$base")
      row="$bw"
      for c in taco caat taco+caat; do
        if [ -f "$WORK/$m-$bw-$c.csv" ]; then
          read -r _ t _ < <(headline "$WORK/$m-$bw-$c.csv")
          row="$row $(awk -v a="$t" -v b="$t0" 'BEGIN { printf "%.4f", a / b }')"
        else row="$row NaN"; fi
      done
      echo "$row"
    done
    printf '\n\n'
  done
} > "$out"

# One colour per codec (lib.sh), one line style per model; the key sits in the
# empty lower left so that it hides neither the data nor the NVLink marker.
plot fig2-bandwidth 1200 700 <<GP
set datafile missing "NaN"
set title "Simulated (tacosim simulate; nothing measured): speedup over uncompressed TP traffic against inter-GPU bandwidth,\\none 8-GPU H200 node whose links are set to each bandwidth; compute and codec costs from the measured 2 x H200 calibration"
set logscale x
set xlabel "inter-GPU bandwidth per GPU per direction (GB/s, log scale)"
set ylabel "speedup (tokens/s ratio)"
set grid
set key bottom left box opaque
set xrange [3:1200]
set yrange [0.5:*]
set xtics (4, 8, 16, 25, 50, 100, 200, 450, 900)
set mxtics 1
set arrow from 25,graph 0 to 25,graph 1 nohead dt 3 lc rgb "gray40"
set label "PCIe Gen4" at 25,graph 0.95 offset 0.5,0 tc rgb "gray40"
set arrow from 450,graph 0 to 450,graph 1 nohead dt 3 lc rgb "gray40"
set label "NVLink 4" at 450,graph 0.95 offset 0.5,0 tc rgb "gray40"
plot 1 notitle lc rgb "black" dt 2, \\
  "$out" index 0 using 1:2 with linespoints lw 2 pt 7 lc rgb $C_TACO title "GPT-3 13B TP8: TACO", \\
  "" index 0 using 1:3 with linespoints lw 2 pt 5 lc rgb $C_CAAT title "GPT-3 13B TP8: CAAT-Net", \\
  "" index 0 using 1:4 with linespoints lw 2 pt 9 lc rgb $C_BOTH title "GPT-3 13B TP8: both", \\
  "" index 1 using 1:2 with linespoints lw 1.5 dt 2 pt 6 lc rgb $C_TACO title "GPT-3 6.7B TP4 DP2: TACO", \\
  "" index 1 using 1:3 with linespoints lw 1.5 dt 2 pt 4 lc rgb $C_CAAT title "GPT-3 6.7B TP4 DP2: CAAT-Net", \\
  "" index 1 using 1:4 with linespoints lw 1.5 dt 2 pt 8 lc rgb $C_BOTH title "GPT-3 6.7B TP4 DP2: both"
GP

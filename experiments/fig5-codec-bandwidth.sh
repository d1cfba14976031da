#!/usr/bin/env bash
# Figure 5: TACO codec kernels' device-memory bandwidth against message size,
# with the HBM ceiling. Measured on one H200 by `tacorun bench-codec`
# (experiments/data/measured/bench-codec-h200-round3.txt, the library's default variant;
# kernels/RESULTS.md says how it was run). Sizes 1 MiB .. 256 MiB: that run's
# 1 GiB timings are not reliable (the same kernel three times in a row differed
# by up to 17 points; kernels/RESULTS.md, round 3, final run), so they are left out. Bandwidth counts the bytes each
# kernel reads and writes: with x BF16 bytes and w = x/2 (1 + 8/G) wire bytes,
# encode x + w, decode w + x, decode-sum of two blocks 2w + x,
# decode-sum-encode of two blocks 3w.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

SRC="$DATA/measured/bench-codec-h200-round3.txt"
if [ ! -f "$SRC" ]; then
  skip fig5 "measured codec speeds ($SRC from tacorun bench-codec on the GPU machine)"
  exit 3
fi
variant=$(sed -n 's/^# library default: //p' "$SRC" | head -1)
out="$DATA/fig5-codec-bandwidth.dat"
{
  echo "# measured: $(head -1 "$SRC" | sed 's/^# bench-codec: //'); variant $variant (from experiments/data/measured/bench-codec-h200-round3.txt)"
  for G in 128 256; do
    for k in encode decode "decode-sum(k=2)" "decode-sum-encode(k=2)"; do
      echo "# $k G=$G: bf16_bytes us traffic_bytes gbps"
      awk -v k="$k" -v g="$G" -v v="$variant" '$1 == k && $2 == v && $3 == "bf16" && $4 == g && $5 < 1073741824 {
        printf "%s %s %.0f %s\n", $5, $7, $8 * $7 * 1e3, $8 }' "$SRC" | sort -n
      printf '\n\n'
    done
  done
} > "$out"
plot fig5-codec-bandwidth 1100 650 <<GP
set title "Measured (tacorun bench-codec on one H200; nothing simulated): TACO codec kernels, device-memory bandwidth"
set logscale x 2
set xlabel "message size (BF16 bytes)"
set ylabel "bytes read + written per second (GB/s)"
set format x "%.0b%B"
set grid
set key bottom right
set yrange [0:5000]
set arrow from graph 0,first 4276 to graph 1,first 4276 nohead lw 2 lc rgb "red"
set label "HBM ceiling: device-to-device copy, 4276 GB/s (measured)" at graph 0.02,first 4380 tc rgb "red"
set arrow from graph 0,first 4800 to graph 1,first 4800 nohead dt 2 lc rgb "gray40"
set label "datasheet 4800 GB/s" at graph 0.02,first 4900 tc rgb "gray40"
plot "$out" index 0 using 1:4 with linespoints lw 2 pt 7 title "encode G=128", \
     "" index 1 using 1:4 with linespoints lw 2 pt 5 title "decode G=128", \
     "" index 2 using 1:4 with linespoints lw 2 pt 9 title "decode-sum (2 blocks) G=128", \
     "" index 3 using 1:4 with linespoints lw 2 pt 11 title "decode-sum-encode (2 blocks) G=128", \
     "" index 4 using 1:4 with linespoints lw 1 dt 4 pt 6 title "encode G=256", \
     "" index 5 using 1:4 with linespoints lw 1 dt 4 pt 4 title "decode G=256"
GP

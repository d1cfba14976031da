#!/usr/bin/env bash
# Figure 5: TACO codec kernels' device-memory bandwidth against message size,
# with the HBM ceiling. Measured on an H200: the codec tables of the measured
# calibration (calibration/h200-nvlink.json, written by `tacorun calibrate`).
# Bandwidth counts the bytes each kernel reads and writes: with x BF16 bytes
# and w = x/2 (1 + 8/G) wire bytes, encode x + w, decode w + x, decode-sum of
# two blocks 2w + x, decode-sum-encode of two blocks 3w.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

CAL="$ROOT/calibration/h200-nvlink.json"
command -v jq > /dev/null || { skip fig5 "jq (apt-get install jq) to read $CAL"; exit 3; }
if [ ! -f "$CAL" ] || [ "$(jq -r '.derived' "$CAL")" != false ] || [ "$(jq -r '.kernels.taco_encode | length' "$CAL")" = 0 ]; then
  skip fig5 "measured codec kernel tables (calibration/h200-nvlink.json from tacorun calibrate)"
  exit 3
fi
out="$DATA/fig5-codec-bandwidth.dat"
{
  echo "# measured: $(jq -r '"\(.gpu), driver \(.driver), CUDA \(.cuda), \(.measured_at)"' "$CAL") (from calibration/h200-nvlink.json)"
  for G in 128 256; do
    for k in taco_encode taco_decode taco_decode_sum taco_decode_sum_encode; do
      echo "# $k G=$G: bf16_bytes us traffic_bytes gbps"
      jq -r --arg k "$k" --argjson g "$G" '.kernels[$k] // [] | map(select(.group == $g)) | sort_by(.bytes) | .[] |
        (.bytes / 2 * (1 + 8 / $g)) as $w |
        (if $k == "taco_encode" or $k == "taco_decode" then .bytes + $w
         elif $k == "taco_decode_sum" then 2 * $w + .bytes else 3 * $w end) as $t |
        "\(.bytes) \(.us) \($t) \($t / .us / 1000)"' "$CAL"
      printf '\n\n'
    done
  done
} > "$out"

plot fig5-codec-bandwidth 1100 650 <<GP
set title "TACO codec kernels on one H200: device-memory bandwidth (measured)"
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

#!/usr/bin/env bash
# Figure 6: TACO-compressed collectives against NCCL (BF16) per transport,
# measured on 2 x H200: NVLink, host shared memory (NCCL_P2P_DISABLE=1) and
# sockets over loopback. From the collective tables of the measured
# calibrations calibration/h200-{nvlink,shm,socket}.json (`tacorun
# calibrate`): speedup = NCCL time / compressed time at the same BF16 size,
# TACO G=128 (codec kernels included).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
command -v jq > /dev/null || { skip fig6 "jq (apt-get install jq) to read the calibrations"; exit 3; }

out="$DATA/fig6-collectives.dat"
drawn=""
{
  echo "# measured speedup of TACO G=128 collectives over NCCL BF16, 2 x H200 (from calibration/h200-<transport>.json)"
  for t in nvlink shm socket; do
    cal="$ROOT/calibration/h200-$t.json"
    for c in allreduce allgather reducescatter sendrecv; do
      echo "# $t $c: bytes nccl_us taco_us speedup"
      if [ -f "$cal" ] && [ "$(jq -r '.derived' "$cal")" = false ]; then
        jq -r --arg c "$c" '(.collectives[$c]["2"] // []) as $a | (.collectives[$c + ".taco128"]["2"] // []) as $b |
          $a[] | . as $p | ($b | map(select(.bytes == $p.bytes)) | .[0]) as $q | select($q != null) |
          "\($p.bytes) \($p.us) \($q.us) \($p.us / $q.us)"' "$cal"
        drawn="$drawn $t"
      fi
      printf '\n\n'
    done
  done
} > "$out"
if ! grep -qv '^#' <(grep . "$out"); then
  skip fig6 "measured collective tables (calibration/h200-{nvlink,shm,socket}.json from tacorun calibrate, or runtime/RESULTS-comm.md)"
  exit 3
fi

plot fig6-collectives 1500 550 <<GP
set multiplot layout 1,3 title "TACO (G=128) collectives vs NCCL BF16 on 2 x H200, per transport (measured; >1: compression wins)"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (BF16 bytes)"
set grid
set key top left font ",9"
set logscale y
set yrange [0.1:10]
set ylabel "speedup over NCCL"
do for [t=0:2] {
  set title word("NVLink shared-memory socket", t+1)
  plot 1 notitle lc rgb "black" dt 2, \
    "$out" index 4*t+0 using 1:4 with linespoints lw 2 pt 7 title "all-reduce (two-shot)", \
    "" index 4*t+1 using 1:4 with linespoints lw 2 pt 5 title "all-gather", \
    "" index 4*t+2 using 1:4 with linespoints lw 2 pt 9 title "reduce-scatter", \
    "" index 4*t+3 using 1:4 with linespoints lw 2 pt 11 title "send/recv"
}
unset multiplot
GP

#!/usr/bin/env bash
# Figure 6: TACO-compressed collectives against NCCL (BF16) per transport,
# measured on 2 x H200: NVLink, host shared memory (--transport shm) and
# sockets over loopback, by `tacorun bench-comm` (runtime/bench/bench_comm_all.sh;
# the tables experiments/data/measured/bench-comm-{nvlink,shm,socket}.dat, described in
# runtime/RESULTS-comm.md): speedup = NCCL BF16 time / compressed time at the
# same BF16 size, TACO G=128 (codec kernels included). NVLink and shm rows are
# the direct paths the library takes by default (rounds 4 and 5).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

out="$DATA/fig6-collectives.dat"
drawn=""
{
  echo "# measured speedup of TACO G=128 collectives over NCCL BF16, 2 x H200 (from experiments/data/measured/bench-comm-<transport>.dat; NVLink: round4-final-nvlink.dat, direct path; shm: round5-final-shm.dat, host-memory path, but send/recv)"
  for t in nvlink shm socket; do
    for c in allreduce allgather reducescatter sendrecv; do
      src="$DATA/measured/bench-comm-$t.dat" codec=taco
      # the direct rows of rounds 4 (NVLink) and 5 (shm: pinned host staging) are the paths the
      # library takes there by default; send/recv through shm still takes NCCL
      if [ "$t" = nvlink ] && [ -f "$DATA/measured/round4-final-nvlink.dat" ]; then
        src="$DATA/measured/round4-final-nvlink.dat" codec=taco-direct
      elif [ "$t" = shm ] && [ "$c" != sendrecv ] && [ -f "$DATA/measured/round5-final-shm.dat" ]; then
        src="$DATA/measured/round5-final-shm.dat" codec=taco-direct
      fi
      echo "# $t $c: bytes nccl_us taco_us speedup"
      if [ -f "$src" ]; then
        awk -v c="$c" -v codec="$codec" '/^# op: / { op = $3; next } /^#/ { next }
          op == c && NF >= 9 && $4 == "none" { base[$1] = $5 }
          op == c && NF >= 9 && $4 == codec && ($1 in base) { printf "%s %s %s %.4f\n", $1, base[$1], $5, base[$1] / $5 }' "$src"
        drawn="$drawn $t"
      fi
      printf '\n\n'
    done
  done
} > "$out"
if ! grep -qv '^#' <(grep . "$out"); then
  skip fig6 "measured collective tables (experiments/data/measured/bench-comm-{nvlink,shm,socket}.dat from runtime/bench/bench_comm_all.sh on 2 GPUs)"
  exit 3
fi
# The y axis spans the measured range (0.36x to 2.3x) with labelled ticks; one
# key, in the last panel, below its lines (the same four collectives in each).
plot fig6-collectives 1500 560 <<GP
set multiplot layout 1,3 title "Measured (tacorun bench-comm on 2 x H200; nothing simulated): TACO (G = 128) collectives against NCCL BF16 at the same BF16 size, codec kernels included; > 1: compression wins"
set logscale x 2
set format x "%.0b%B"
set xlabel "message size (BF16 bytes)"
set grid
set logscale y
set yrange [0.3:2.6]
set ytics (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 1, 1.2, 1.5, 2, 2.5)
set mytics 1
set ylabel "speedup over NCCL (log scale)"
array panel[3] = ["NVLink NV18: direct path", "host shared memory: pinned host staging", "sockets over loopback: through NCCL"]
do for [t=0:2] {
  set title panel[t+1] noenhanced
  if (t == 2) { set key bottom right font ",9" box opaque } else { set key off }
  plot 1 notitle lc rgb "black" dt 2, \\
    "$out" index 4*t+0 using 1:4 with linespoints lw 2 pt 7 title "all-reduce (one- or two-shot, the faster)", \\
    "" index 4*t+1 using 1:4 with linespoints lw 2 pt 5 title "all-gather", \\
    "" index 4*t+2 using 1:4 with linespoints lw 2 pt 9 title "reduce-scatter", \\
    "" index 4*t+3 using 1:4 with linespoints lw 2 pt 11 title "send/recv (NCCL's in shared memory too)"
}
unset multiplot
GP

#!/usr/bin/env bash
# Figure 9: codec error ablation — relative L2 error of FP8 per tensor, FP8 per
# group, FP8 per group after the Hadamard transform, and TACO (adaptive scale +
# Hadamard + dual scale), on Gaussian, heavy-tailed (Student t, 3), outlier-
# channel and near-zero tensors; and TACO's error against the group size.
# From `tacorun bench-codec --quality` (the CPU reference, bit-identical to the
# kernels); its output is kept in experiments/data/codec-quality.txt and rerun
# whenever tacorun is built.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

kept="$DATA/codec-quality.txt"
if [ -n "$TACORUN" ] && [ -x "$TACORUN" ]; then
  "$TACORUN" bench-codec --quality > "$kept.new" 2> /dev/null && mv "$kept.new" "$kept" || rm -f "$kept.new"
fi
[ -s "$kept" ] || { skip fig9 "experiments/data/codec-quality.txt (tacorun bench-codec --quality; build tacorun)"; exit 3; }

out="$DATA/fig9-codec-error.dat"
dists="gaussian student-t(3) outlier-ch(1%x100) near-zero(1e-3)"
{
  echo "# from experiments/data/codec-quality.txt: rel_l2 at G=128"
  for fp8 in e4m3 e5m2; do
    echo "# $fp8: distribution fp8-tensor fp8-group fp8-group+hadamard taco"
    for d in $dists; do
      awk -v d="$d" -v f="$fp8" '
        $1 == d && $2 == f && ($4 == "128" || $3 == "fp8-tensor") { v[$3] = $5 }
        END { printf "\"%s\" %s %s %s %s\n", d, v["fp8-tensor"], v["fp8-group"], v["fp8-group+hadamard"], v["taco"] }' "$kept"
    done
    printf '\n\n'
  done
  for d in $dists; do
    echo "# $d e4m3: G taco_rel_l2 fp8_group_rel_l2"
    awk -v d="$d" '$1 == d && $2 == "e4m3" && $3 == "taco" { t[$4] = $5 }
      $1 == d && $2 == "e4m3" && $3 == "fp8-group" { g[$4] = $5 }
      END { for (G = 32; G <= 512; G *= 2) if (G in t) print G, t[G], g[G] }' "$kept"
    printf '\n\n'
  done
} > "$out"

plot fig9-codec-error 1400 600 <<GP
set multiplot layout 1,2 title "Codec error ablation, computed on the CPU (tacorun bench-codec --quality: the C reference, bit-identical to the GPU kernels; nothing simulated); relative L2 error, lower is better"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set logscale y
set grid ytics
set key top left font ",9"
set title "E4M3, G = 128"
set ylabel "relative L2 error"
set xtics scale 0 font ",9"
plot "$out" index 0 using 2:xtic(1) title "FP8 per tensor", "" index 0 using 3 title "FP8 per group", \
     "" index 0 using 4 title "FP8 per group + Hadamard", "" index 0 using 5 title "TACO"
set style data linespoints
set title "TACO (E4M3) against the group size"
set logscale x 2
set xlabel "group size G"
set key top right
plot for [i=2:5] "$out" index i using 1:2 lw 2 lc i-1 title word("gaussian student-t(3) outlier-ch(1%x100) near-zero(1e-3)", i-1), \
     for [i=2:5] "" index i using 1:3 lw 1 dt 2 lc i-1 title word("gaussian student-t(3) outlier-ch(1%x100) near-zero(1e-3)", i-1)." (FP8 per group)"
unset multiplot
GP

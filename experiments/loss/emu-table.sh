#!/usr/bin/env bash
# emu-table.sh [DIR] — the tables of experiments/loss/README.md ("124M, TP 2 emulated") from the
# runs kept in DIR (experiments/loss/emu/124m: one folder per run, tp<TP>-s<SEED>-<codec>/ with
# loss-<codec>.csv and stats-<codec>.csv written by experiments/loss/run-emu.sh big):
#   1. validation loss (16 held-out batches) at each step every run reached, its difference to the
#      baseline of the same seed, and the mean training loss of the 100 steps before it;
#   2. the tensors the layer all-reduces carry: per logged step, over the 18 layers, the largest
#      max/RMS and kurtosis of each tensor class (baseline, seed 1234).
set -euo pipefail
dir=${1:-"$(dirname "$0")/emu/124m"}
[ -d "$dir" ] || { echo "emu-table.sh: no folder $dir" >&2; exit 2; }
echo "| run | last step | val loss @1500 | vs baseline (same seed) | val loss @1750 | vs baseline | train loss, mean of steps 1401-1500 |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
for d in "$dir"/tp*; do
  f=$(ls "$d"/loss-*.csv)
  run=$(basename "$d")
  seed=${run#tp*-s}; seed=${seed%%-*}
  base=$(ls "$dir"/tp2-s"$seed"-none/loss-none.csv)
  awk -F, -v run="$run" -v base="$base" '
    BEGIN { while ((getline l < base) > 0) { split(l, a, ","); if (a[2] == "val") b[a[1]] = a[3] } }
    !/^#/ && $2 == "val" { v[$1] = $3 }
    !/^#/ && $2 == "train" { last = $1; if ($1 > 1400 && $1 <= 1500) { s += $3; n++ } }
    function cell(k) { return (k in v) ? sprintf("%.4f", v[k]) : "-" }
    function diff(k) { return ((k in v) && (k in b)) ? sprintf("%+.2f%%", 100 * (v[k] - b[k]) / b[k]) : "-" }
    END { printf "| %s | %d | %s | %s | %s | %s | %s |\n", run, last, cell(1500), diff(1500), cell(1750), diff(1750),
          n ? sprintf("%.4f", s / n) : "-" }' "$f"
done
echo
echo "| step | attn_out max/RMS | attn_out kurtosis | fc2_out max/RMS | fc2_out kurtosis | fc1_dgrad max/RMS | fc1_dgrad kurtosis | qkv_dgrad max/RMS | qkv_dgrad kurtosis |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
awk -F, '!/^#/ && NR > 2 { k = $1 SUBSEP $3; if (!(k in m) || $7 > m[k]) { m[k] = $7; ml[k] = $2 } if (!(k in q) || $8 > q[k]) { q[k] = $8; ql[k] = $2 }
         steps[$1] = 1 }
  END { n = 0; for (s in steps) st[++n] = s + 0
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (st[j] < st[i]) { t = st[i]; st[i] = st[j]; st[j] = t }
        split("attn_out fc2_out fc1_dgrad qkv_dgrad", c, " ")
        for (i = 1; i <= n; i++) { printf "| %d |", st[i]
          for (j = 1; j <= 4; j++) { k = st[i] SUBSEP c[j]; printf " %.1f (L%d) | %.1f (L%d) |", m[k], ml[k], q[k], ql[k] }
          printf "\n" } }' "$dir"/tp2-s1234-none/stats-none.csv

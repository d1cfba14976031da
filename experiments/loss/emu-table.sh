#!/usr/bin/env bash
# emu-table.sh [DIR] — the tables of experiments/loss/README.md ("124M, TP 2 / TP 8 emulated") from the
# runs kept in DIR (experiments/loss/emu/124m, emu/124m-tp8: one folder per run, tp<TP>-s<SEED>-<codec>/ with
# loss-<codec>.csv and stats-<codec>.csv written by experiments/loss/run-emu.sh big):
# (The tree keeps the per-step logs gzipped, *.csv.gz; plain *.csv of a fresh run read the same way.)
#   1. validation loss (16 held-out batches) at steps 1000, 1500, 1750 where the run's curve is kept,
#      the final validation loss over the whole held-out part (summary.csv), its difference to the
#      baseline of the same TP and seed, and the training steps/s; a folder with only summary.csv is a run
#      whose curve was not kept;
#   1b. the seeds of the baseline, TACO E4M3 and per-tensor FP8: both, mean, spread;
#   2. the tensors the layer all-reduces carry: per logged step, over the 18 layers, the largest
#      max/RMS and kurtosis of each tensor class (baseline, seed 1234).
set -euo pipefail
dir=${1:-"$(dirname "$0")/emu/124m"}
[ -d "$dir" ] || { echo "emu-table.sh: no folder $dir" >&2; exit 2; }
# summary.csv: codec,params,steps,final_train,final_val,wall_s,train_s,steps_per_s,replica_spread
final() { tail -n +2 "$1/summary.csv" 2> /dev/null | cut -d, -f"$2"; }
echo "| run | last step | val @1000 | val @1500 | val @1750 | final validation (whole held-out part) | vs baseline (same seed) | training steps/s |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for d in "$dir"/tp*; do
  run=$(basename "$d")
  seed=${run#tp*-s}; seed=${seed%%-*}; tp=${run%%-*}
  f=$(ls "$d"/loss-*.csv* 2> /dev/null | head -1 || true)
  fv=$(final "$d" 5) bv=$(final "$dir/$tp-s$seed-none" 5) sps=$(final "$d" 8)
  awk -F, -v run="$run" -v fv="${fv:-}" -v bv="${bv:-}" -v sps="${sps:-}" '
    !/^#/ && $2 == "val" { v[$1] = $3 }
    !/^#/ && $2 == "train" { last = $1 }
    function cell(k) { return (k in v) ? sprintf("%.4f", v[k]) : "-" }
    END { if (!last && fv != "") last = "2000 (curve not kept)"
          printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", run, last, cell(1000), cell(1500), cell(1750),
            fv != "" ? sprintf("%.5f", fv) : "-", (fv != "" && bv != "") ? sprintf("%+.2f%%", 100 * (fv - bv) / bv) : "-",
            sps != "" ? sps : "-" }' <(gzip -cdf ${f:-/dev/null})
done
echo
echo "Seeds (final validation loss over the whole held-out part; spread: half the distance between the two seeds):"
echo
echo "| codec | seed 1234 | seed 4321 | mean | spread (+-) | mean vs baseline mean |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
tp=$(basename "$(ls -d "$dir"/tp*-s*-none | head -1)"); tp=${tp%%-*}  # the folder's TP (one per folder)
b1=$(final "$dir/$tp-s1234-none" 5) b2=$(final "$dir/$tp-s4321-none" 5)
for c in none taco-e4m3 fp8-tensor; do
  a=$(final "$dir/$tp-s1234-$c" 5) b=$(final "$dir/$tp-s4321-$c" 5)
  [ -n "$a" ] && [ -n "$b" ] || continue
  awk -v c="$c" -v a="$a" -v b="$b" -v b1="$b1" -v b2="$b2" 'BEGIN { m = (a + b) / 2; bm = (b1 + b2) / 2
    d = a - b; if (d < 0) d = -d
    printf "| %s | %.5f | %.5f | %.5f | %.5f (%.2f%%) | %+.2f%% |\n", c, a, b, m, d / 2, 100 * d / 2 / m, 100 * (m - bm) / bm }'
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
          printf "\n" } }' <(gzip -cdf "$(ls "$dir/$tp"-s1234-none/stats-none.csv* | head -1)")

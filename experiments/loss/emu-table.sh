#!/usr/bin/env bash
# emu-table.sh [DIR] — the tables of experiments/loss/README.md ("124M, TP 2 / TP 8 emulated") from the
# runs kept in DIR (experiments/loss/emu/124m, emu/124m-tp8: one folder per run, tp<TP>-s<SEED>-<codec>/ with
# loss-<codec>.csv and stats-<codec>.csv written by experiments/loss/run-emu.sh big):
# (The tree keeps the per-step logs gzipped, *.csv.gz; plain *.csv of a fresh run read the same way.)
#   1. validation loss (16 held-out batches) at steps 1000, 1500, 1750 where the run's curve is kept,
#      the final validation loss over the whole held-out part (summary.csv), its difference to the
#      baseline of the same TP and seed, and the training steps/s; a folder with only summary.csv is a run
#      whose curve was not kept;
#   1b. the seeds of the baseline, TACO E4M3, per-tensor FP8, the reshaping's choice and CAAT-Net: every
#       seed kept, mean, standard deviation, and the difference to the baseline paired by seed;
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
echo "Seeds (final validation loss over the whole held-out part; s.d.: the sample standard deviation over the"
echo "seeds; paired: the relative difference to the baseline of the same seed, its mean over the seeds both ran"
echo "and the standard error of that mean, s.d. / sqrt(n)):"
echo
echo "| codec | seeds | final validation, by seed | mean | s.d. | vs baseline, paired: mean +- s.e. (n) |"
echo "| --- | --- | --- | ---: | ---: | ---: |"
tp=$(basename "$(ls -d "$dir"/tp*-s*-none | head -1)"); tp=${tp%%-*}  # the folder's TP (one per folder)
runs() {  # "seed value" lines of codec $1's runs in the folder, by seed
  for d in "$dir/$tp"-s*-"$1"; do
    [ -d "$d" ] || continue
    s=$(basename "$d"); s=${s#"$tp"-s}; s=${s%%-*}
    [ "$(basename "$d")" = "$tp-s$s-$1" ] || continue
    v=$(final "$d" 5); [ -n "$v" ] && echo "$s $v"
  done | sort -n
}
paired() {  # the table row of codec $1 against codec $2 (default: the baseline)
  awk -v c="$1" '
    NR == FNR { base[$1] = $2; next }
    { seed[++n] = $1; val[n] = $2 }
    END { if (n < 1) exit
          for (i = 1; i <= n; i++) { m += val[i]; list = list (i > 1 ? ", " : "") sprintf("%.5f (%s)", val[i], seed[i]) }
          m /= n; for (i = 1; i <= n; i++) ss += (val[i] - m) ^ 2
          sd = n > 1 ? sqrt(ss / (n - 1)) : 0
          for (i = 1; i <= n; i++) if (seed[i] in base) { d[++k] = 100 * (val[i] - base[seed[i]]) / base[seed[i]]; dm += d[k] }
          if (k) { dm /= k; for (i = 1; i <= k; i++) ds += (d[i] - dm) ^ 2 }
          pr = k > 1 ? sprintf("%+.2f%% +- %.2f (%d)", dm, sqrt(ds / (k - 1)) / sqrt(k), k) : (k ? sprintf("%+.2f%% (1)", dm) : "-")
          printf "| %s | %d | %s | %.5f | %.5f (%.2f%%) | %s |\n", c, n, list, m, sd, 100 * sd / m, pr }' \
    <(runs "${2:-none}") <(runs "$1")
}
for c in none taco-e4m3 fp8-tensor taco-e4m3-gauto caat; do paired "$c"; done
echo
echo "TACO E4M3 against per-tensor FP8, same seed:"
echo
echo "| codec | seeds | final validation, by seed | mean | s.d. | vs fp8-tensor, paired: mean +- s.e. (n) |"
echo "| --- | --- | --- | ---: | ---: | ---: |"
paired taco-e4m3 fp8-tensor
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

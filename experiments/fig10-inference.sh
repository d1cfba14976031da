#!/usr/bin/env bash
# Figure 10: predicted TTFT and TPOT speedup of TACO, CAAT-Net and both over
# plain NCCL for tensor-parallel inference, against the batch size, one line
# style per link class. Llama 3 8B TP2 on 2 x H200, prompt 2048, 128 tokens
# generated, bf16 KV cache (sim/INFERENCE.md). The plans are the shipped
# experiments/plans/infer-llama3-8b-tp2/*-b1-* with batch and codec set by jq;
# each link class uses its measured calibration experiments/infer/calibration/h200-<transport>.json
# (with the inference tables of tacorun calibrate-infer), else calibration/h200-<transport>.json
# (a class whose calibration is missing or derived is left out). Measured
# speedups of the validation run (experiments/infer/measured/, tacorun execute on
# 2 x H200) are drawn as points where they exist (one symbol per link class).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3
command -v jq > /dev/null || { skip fig10 "jq (apt-get install jq) to write the plan variants"; exit 3; }

BATCHES="${FIG10_BATCHES:-1 2 4 8 16 32 64}"
LINKS="nvlink shm socket"
CODECS="taco caat taco+caat"
PLANS="$EXP/plans/infer-llama3-8b-tp2"
WORK="$DATA/work/fig10"
fresh_dir "$WORK"
: > "$WORK/list"
links=""
for t in $LINKS; do
  # the inference calibration (decode GEMMs, KV-cache attention: experiments/infer/) when present
  cal="$EXP/infer/calibration/h200-$t.json"  # kept gzipped in the tree, unpacked beside it (git-ignored)
  [ -f "$cal" ] || [ ! -f "$cal.gz" ] || gzip -cd "$cal.gz" > "$cal"
  [ -f "$cal" ] || cal="$ROOT/calibration/h200-$t.json"
  src="$PLANS/infer-llama3-8b-tp2-$t-b1-taco-caat.json"
  if [ ! -f "$cal" ] || [ "$(jq -r '.derived' "$cal")" != false ] || [ ! -f "$src" ]; then
    echo "fig10: leaving out $t: needs the measured calibration/h200-$t.json and $(basename "$src")" >&2
    continue
  fi
  links="$links $t"
  for b in $BATCHES; do
    for c in $CODECS; do
      f="$WORK/$t-b$b-${c/+/-}"
      jq --argjson b "$b" --arg c "$c" '
        .name = "fig10-\(.cluster)-b\($b)-\($c)" | del(.description) | .batch.size = $b |
        .codec = ({ "taco": { "kind": "taco", "group": 128, "fp8": "e4m3" },
                    "caat": { "kind": "caat", "p": 0.5 },
                    "taco+caat": { "kind": "taco+caat", "group": 128, "fp8": "e4m3", "p": 0.5 } }[$c])' \
        "$src" > "$f.plan.json"
      echo "$f.plan.json $cal $f.json" >> "$WORK/list"
    done
  done
done
[ -n "$links" ] || { skip fig10 "measured calibrations calibration/h200-{nvlink,shm,socket}.json (tacorun calibrate)"; exit 3; }

# shellcheck disable=SC2016
REUSE="${REUSE:-}" xargs -P "$JOBS" -L 1 sh -c '
  if [ -n "$REUSE" ] && [ -f "$3" ]; then exit 0; fi
  if "$0" simulate "$1" --calibration "$2" --json "$3" > /dev/null 2> "$3.err"; then rm -f "$3.err"; else rm -f "$3"; fi
' "$TACOSIM" < "$WORK/list"

out="$DATA/fig10-inference.dat"
{
  echo "# simulated (tacosim simulate; the measured points are in fig10-inference-measured.dat): Llama 3 8B TP2 on 2 x H200, prompt 2048, 128 generated, bf16 KV cache"
  echo "# speedup = plain NCCL time / codec time (tacosim simulate --json speedup.ttft, speedup.tpot; codec_auto sends plain where the codec loses)"
  echo "# TACO G=128 E4M3, CAAT-Net p=0.5; calibration experiments/infer/calibration/h200-<link>.json (else calibration/h200-<link>.json)"
  for t in $links; do
    echo "# $t: batch ttft_plain_s tpot_plain_s ttft_taco ttft_caat ttft_both tpot_taco tpot_caat tpot_both"
    for b in $BATCHES; do
      row="$b" plain=""
      ttft="" tpot=""
      for c in $CODECS; do
        j="$WORK/$t-b$b-${c/+/-}.json"
        if [ -f "$j" ]; then
          [ -n "$plain" ] || plain="$(jq -r '"\(.plain_nccl.ttft_s) \(.plain_nccl.tpot_s)"' "$j")"
          ttft="$ttft $(jq -r '.speedup.ttft * 10000 | round / 10000' "$j")"
          tpot="$tpot $(jq -r '.speedup.tpot * 10000 | round / 10000' "$j")"
        else
          echo "fig10: no prediction for $t batch $b $c: $(head -c 300 "$j.err" 2> /dev/null)" >&2
          ttft="$ttft NaN" tpot="$tpot NaN"
        fi
      done
      echo "$row ${plain:-NaN NaN}$ttft$tpot"
    done
    printf '\n\n'
  done
} > "$out"
if ! grep -v '^#' "$out" | grep -q '[0-9]'; then skip fig10 "any successful inference prediction (see $WORK/*.err)"; exit 3; fi

# Measured points of the validation run (experiments/infer/: Llama 3 8B TP2, 4 layers, 16
# generated, one prompt length per batch size), where they exist: the speedup of each codec over
# plain NCCL measured with tacorun execute, drawn as large open symbols at the plan's batch size.
MEAS="$EXP/infer/measured"
mout="$DATA/fig10-inference-measured.dat"
meas_links=""
if ls "$MEAS"/infer-v-*-none.json > /dev/null 2>&1; then
  {
    echo "# measured on 2 x H200 (tacorun execute, experiments/infer/README.md): Llama 3 8B TP2, 4 layers, 16 generated"
    echo "# speedup = plain NCCL time / codec time (TTFT, TPOT)"
    i=0
    for t in $LINKS; do
      ls "$MEAS"/infer-v-$t-*-none.json > /dev/null 2>&1 || continue
      meas_links="$meas_links $i:$t"
      i=$((i + 1))
      echo "# $t: batch prompt ttft_taco ttft_caat ttft_both tpot_taco tpot_caat tpot_both"
      for f in $(ls "$MEAS"/infer-v-$t-*-none.json | sort -V); do
        base=${f%-none.json}
        pt=${base##*-$t-}
        b=${pt%%-*}; b=${b#b}; pr=${pt##*-p}
        row="$b $pr" tt="" tp=""
        for c in taco caat taco-caat; do
          if [ -f "$base-$c.json" ]; then
            tt="$tt $(jq -n --slurpfile a "$f" --slurpfile c "$base-$c.json" '$a[0].ttft_s / $c[0].ttft_s * 10000 | round / 10000')"
            tp="$tp $(jq -n --slurpfile a "$f" --slurpfile c "$base-$c.json" '$a[0].tpot_s / $c[0].tpot_s * 10000 | round / 10000')"
          else
            tt="$tt NaN" tp="$tp NaN"
          fi
        done
        echo "$row$tt$tp"
      done
      printf '\n\n'
    done
  } > "$mout"
fi

# One colour per codec (lib.sh), one dash type per link class for the simulated
# lines, one symbol per link class for the measured points. The key is drawn
# once, below both panels, from entries that carry no data (NaN): colours,
# then dash types, then symbols; every data curve is untitled.
dash() { case $1 in nvlink) echo 1 ;; shm) echo 2 ;; *) echo 3 ;; esac; }
sym() { case $1 in nvlink) echo 6 ;; shm) echo 4 ;; *) echo 2 ;; esac; } # open circle, open square, x
name() { case $1 in nvlink) echo NVLink ;; shm) echo "shared memory" ;; *) echo sockets ;; esac; }
colour() { case $1 in taco) echo "$C_TACO" ;; caat) echo "$C_CAAT" ;; *) echo "$C_BOTH" ;; esac; }
keycmd() {
  local t cmd=""
  cmd="NaN with lines lw 3 lc rgb $C_TACO title \"TACO G=128\", NaN with lines lw 3 lc rgb $C_CAAT title \"CAAT-Net p=0.5\", NaN with lines lw 3 lc rgb $C_BOTH title \"TACO+CAAT-Net\""
  for t in nvlink shm socket; do
    cmd="$cmd, NaN with lines lw 2 dt $(dash $t) lc rgb \"black\" title \"simulated, $(name $t)\""
  done
  for t in nvlink shm socket; do
    cmd="$cmd, NaN with points pt $(sym $t) ps 2 lw 2 lc rgb \"black\" title \"measured, $(name $t)\""
  done
  echo "$cmd"
}
plotcmd() { # COLUMN_OFFSET: 4 for TTFT, 7 for TPOT; KEY: 1 to draw the key
  local off=$1 key=$2 idx=0 t c k cmd="plot 1 notitle lc rgb \"black\" dt 2"
  [ "$key" = 1 ] && cmd="$cmd, $(keycmd)"
  for t in $links; do
    k=0
    for c in taco caat both; do
      cmd="$cmd, \"$out\" index $idx using 1:$((off + k)) with linespoints lw 2 dt $(dash $t) pt 7 ps 0.7 lc rgb $(colour $c) notitle"
      k=$((k + 1))
    done
    idx=$((idx + 1))
  done
  # measured: columns 3.. of the measured file (TTFT 3-5, TPOT 6-8)
  local mo=$(( off == 4 ? 3 : 6 )) m mi mt
  for m in $meas_links; do
    mi=${m%%:*} mt=${m#*:}
    k=0
    for c in taco caat both; do
      cmd="$cmd, \"$mout\" index $mi using 1:$((mo + k)) with points pt $(sym "$mt") ps 2 lw 2 lc rgb $(colour $c) notitle"
      k=$((k + 1))
    done
  done
  echo "$cmd"
}

plot fig10-inference 1500 820 <<GP
set datafile missing "NaN"
set multiplot title "Llama 3 8B TP2 inference, speedup over plain NCCL. Lines: simulated (tacosim simulate, 32 layers, prompt 2048, 128 generated,\\nwith the measured 2 x H200 calibrations and inference tables of experiments/infer/calibration). Points: measured (tacorun execute on 2 x H200, 4 layers, 16 generated, experiments/infer)"
set logscale x 2
set xrange [0.8:80]
set xtics (1, 2, 4, 8, 16, 32, 64)
set xlabel "batch size (sequences)"
set ylabel "speedup over plain NCCL"
set grid
set key at screen 0.5, screen 0.2 center top vertical maxrows 3 width 2 spacing 1.1 font ",10" samplen 3 box
set yrange [*:*]
set size 0.5, 0.7
set origin 0, 0.23
set title "time to first token (prefill)"
$(plotcmd 4 1)
set key off
set origin 0.5, 0.23
set title "time per output token (decode)"
set label 99 "The simulated socket TPOT zigzags because the measured plain NCCL socket all-reduce table it reads point by point is not monotone\\n(16 KiB, batch 2: 136 us; 32 KiB, batch 4: 127 us; TACO's 86 us and 130 us): sockets over loopback move 10-25 % within a minute\\n(experiments/validation/README.md). The decode all-reduces are batch x 8 KiB." at screen 0.5, screen 0.075 center font ",9"
$(plotcmd 7 0)
unset multiplot
GP

#!/usr/bin/env bash
# run_gpu.sh — one H100 (or H200), from the repository root, building nothing (BIN: a tacorun built on the CPU
# machine, its libraries in LIB), with nvidia-smi sampling the SM clock and power every 20 ms throughout:
#  1. 2 s idle (the sampler's baseline);
#  2. `tacorun calibrate --only clock --clock-tsv` (GEMM and memory-bound bursts back to back and between idle gaps at
#     5 duties x 4 periods; its stderr stamps each point with the seconds since its start): the power each pattern draws
#     at the clock it runs, data for a clock model that finds a window's clock from its op mix under the power cap;
#  3. `tacorun calibrate-infer CAL --small-only` (the decode step's small kernels, and since 2026-12-07 the RoPE + KV
#     scatter at prefill sizes), for calibration/merge_small.py --only rope_scatter_fwd.
# Outputs in OUT: gpu.txt, steps.txt (each step's start and end, nvidia-smi's timestamp format), smi.csv, clock.log,
# clock.tsv, clock.json, small.tsv.gz, small.err, summary.txt.
set -u
OUT=${OUT:-/tmp/power}
. scripts/gpu_env.sh
now() { date '+%Y/%m/%d %H:%M:%S.%3N'; }
case "$(head -1 "$OUT/gpu.txt")" in
  *H200*) CAL=calibration/h200-nvlink.json ;;
  *H100*) CAL=calibration/h100-sxm-nvlink.json ;;
  *) say "not an H100 or H200: $(head -1 "$OUT/gpu.txt")"; exit 0 ;;
esac
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader,nounits -lms 20 > "$OUT/smi.csv" 2> /dev/null &
SMI=$!
step() { # step NAME TIMEOUT_S LOG COMMAND...
  local name=$1 t=$2 log=$3 a b rc
  shift 3
  a=$(now)
  timeout "$t" "$@" > "$log" 2>&1
  rc=$?
  b=$(now)
  echo "$name	$a	$b" >> "$OUT/steps.txt"
  say "$name rc=$rc ($(el) s)"
}
step idle 5 /dev/null sleep 2
step clock 120 "$OUT/clock.log" "$BIN" calibrate --only clock --clock-tsv "$OUT/clock.tsv" --out "$OUT/clock.json"
sleep 1
mkdir -p "$OUT/c"
step small 150 "$OUT/small.err" sh -c "'$BIN' calibrate-infer '$CAL' --out-dir '$OUT/c' --models models --small-only > '$OUT/small.tsv'"
kill $SMI 2> /dev/null
say "small: $(grep -c '^small' "$OUT/small.tsv") points, $(awk '$2 == "rope_scatter_fwd" && $5 >= 512' "$OUT/small.tsv" | wc -l) of the prefill's RoPE"
gzip -9 "$OUT/small.tsv"
rm -rf "$OUT/c"
say "done in $(el) s"

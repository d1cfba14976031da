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
BIN=${BIN:-.devbin/v5/tacorun}
LIB=${LIB:-.devbin/h100/lib}
O=${OUT:-/tmp/power}
export LD_LIBRARY_PATH=$PWD/$LIB:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
mkdir -p "$O"
S=$(date +%s)
say() { echo "$*" | tee -a "$O/summary.txt"; }
now() { date '+%Y/%m/%d %H:%M:%S.%3N'; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv,noheader > "$O/gpu.txt" 2>&1
date -u >> "$O/gpu.txt"
case "$(head -1 "$O/gpu.txt")" in
  *H200*) CAL=calibration/h200-nvlink.json ;;
  *H100*) CAL=calibration/h100-sxm-nvlink.json ;;
  *) say "not an H100 or H200: $(head -1 "$O/gpu.txt")"; exit 0 ;;
esac
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader,nounits -lms 20 > "$O/smi.csv" 2> /dev/null &
SMI=$!
step() { # step NAME TIMEOUT_S LOG COMMAND...
  local name=$1 t=$2 log=$3 a b rc
  shift 3
  a=$(now)
  timeout "$t" "$@" > "$log" 2>&1
  rc=$?
  b=$(now)
  echo "$name	$a	$b" >> "$O/steps.txt"
  say "$name rc=$rc ($(($(date +%s) - S)) s)"
}
step idle 5 /dev/null sleep 2
step clock 120 "$O/clock.log" "$BIN" calibrate --only clock --clock-tsv "$O/clock.tsv" --out "$O/clock.json"
sleep 1
mkdir -p "$O/c"
step small 150 "$O/small.err" sh -c "'$BIN' calibrate-infer '$CAL' --out-dir '$O/c' --models models --small-only > '$O/small.tsv'"
kill $SMI 2> /dev/null
say "small: $(grep -c '^small' "$O/small.tsv") points, $(awk '$2 == "rope_scatter_fwd" && $5 >= 512' "$O/small.tsv" | wc -l) of the prefill's RoPE"
gzip -9 "$O/small.tsv"
rm -rf "$O/c"
say "done in $(($(date +%s) - S)) s"

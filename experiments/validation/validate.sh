#!/usr/bin/env bash
# validate.sh — predicted vs measured iteration time for every plan measured on
# the 2 x H200 machine (experiments/validation/measured/, written by
# exec_gpu.sh through `tacorun execute --json`). Runs `tacosim simulate` on the
# same plan (the shm / socket variants of a plan name the cluster of that
# transport; the measured run used the NVLink plan file with NCCL forced onto
# that transport, which is the same plan on the same GPUs) and writes
#   predicted/<tag>.json       the predictions
#   validation.txt             one row per plan: predicted, measured, error; codec speedups
#   compare/<tag>.txt          `tacosim compare` of each pair (every figure)
# usage: validate.sh [TACOSIM]   (default build-exec/sim/tacosim)
set -euo pipefail
cd "$(dirname "$0")"
ROOT=../..
SIM=${1:-$ROOT/build-exec/sim/tacosim}
mkdir -p predicted compare
# tag  plan-file  transport
PAIRS="tp2-none-nvlink gpt-h4096-tp2-none nvlink
tp2-taco-nvlink gpt-h4096-tp2-taco nvlink
tp2-caat-nvlink gpt-h4096-tp2-caat nvlink
tp2-taco-caat-nvlink gpt-h4096-tp2-taco-caat nvlink
dp2-nvlink gpt-h4096-dp2 nvlink
tp2-none-shm gpt-h4096-tp2-none-shm shm
tp2-taco-shm gpt-h4096-tp2-taco-shm shm
tp2-caat-shm gpt-h4096-tp2-caat-shm shm
tp2-none-socket gpt-h4096-tp2-none-socket socket
tp2-taco-socket gpt-h4096-tp2-taco-socket socket
tp2-caat-socket gpt-h4096-tp2-caat-socket socket"

field() { # field FILE KEY -> number
  sed -n "s/.*\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -1
}

{
  echo "# predicted (tacosim simulate, calibration of the transport) vs measured (tacorun execute, median)"
  echo "# iteration time per plan on 2 x H200; error = (predicted - measured) / measured"
  printf "# %-22s %-8s %12s %12s %8s %10s %10s %8s\n" tag transport predicted_ms measured_ms err_pct \
    pred_speedup meas_speedup sp_err_pct
} >validation.txt
declare -A PRED MEAS
while read -r tag plan transport; do
  [ -f "measured/$tag.json" ] || { echo "skip $tag: not measured"; continue; }
  "$SIM" simulate "$ROOT/experiments/plans/$plan.json" --json "predicted/$tag.json" >/dev/null 2>&1
  "$SIM" compare "predicted/$tag.json" "measured/$tag.json" >"compare/$tag.txt" 2>&1 || true
  PRED[$tag]=$(field "predicted/$tag.json" iteration_time_s)
  MEAS[$tag]=$(field "measured/$tag.json" iteration_time_s)
done <<<"$PAIRS"
while read -r tag plan transport; do
  [ -n "${MEAS[$tag]:-}" ] || continue
  base="tp2-none-$transport"
  awk -v t="$tag" -v tr="$transport" -v p="${PRED[$tag]}" -v m="${MEAS[$tag]}" \
      -v pb="${PRED[$base]:-0}" -v mb="${MEAS[$base]:-0}" 'BEGIN {
    err = 100 * (p - m) / m
    if (pb > 0 && mb > 0 && t ~ /^tp2-/) {
      ps = pb / p; ms = mb / m; se = 100 * (ps - ms) / ms
      printf "  %-22s %-8s %12.1f %12.1f %+8.2f %10.3f %10.3f %+8.2f\n", t, tr, 1e3 * p, 1e3 * m, err, ps, ms, se
    } else
      printf "  %-22s %-8s %12.1f %12.1f %+8.2f %10s %10s %8s\n", t, tr, 1e3 * p, 1e3 * m, err, "-", "-", "-"
  }' >>validation.txt
done <<<"$PAIRS"
grep -v '^#' validation.txt | awk '{ e = $5 < 0 ? -$5 : $5; print e }' | sort -g |
  awk '{ v[++n] = $1 } END { med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
        printf "# %d plans: median |error| %.2f%%, max |error| %.2f%%\n", n, med, v[n] }' >>validation.txt
cat validation.txt

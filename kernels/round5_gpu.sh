#!/usr/bin/env bash
# round5_gpu.sh — the GPU run of round 5 (warp-tiled encode/decode options:
# two tiles of loads in flight, L2 evict-first hints, programmatic dependent
# launch, a full grid; streaming kernels of the encode's and decode's
# read/write mix as ceilings; back-to-back vs CUDA-graph launches), on one
# H200 of the 2 x H200 machine. Usage: round5_gpu.sh [all|check] BINDIR OUTDIR
#   BINDIR holds tacorun and test_kernels_gpu built for sm_90 (nothing is built here).
#   check: only the GPU test of the round-5 options with PDL and the full grid
#          (test_kernels_gpu --quick --options-only: 9 tile configurations, ~30 s;
#          give the call a limit of at least 70 s so that the logs come back).
# Steps: GPU test of the tiled variants and options (quick); every variant side
# by side at 64 MiB .. 1 GiB, G = 128 and 256 (E4M3, BF16); the same launches
# replayed from CUDA graphs; E5M2 and FP32 for three variants. Every step has
# its own timeout and runs even if an earlier one failed; a summary is printed
# last and everything is packed into OUTDIR/round5.tgz.
set -u
MODE=all
case "${1:-}" in all | check) MODE=$1; shift ;; esac
BIN=${1:?bindir}; OUT=${2:?outdir}
LOG=$(mktemp -d)/logs
mkdir -p "$LOG" "$OUT"
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
SUM="$LOG/summary.txt"
: >"$SUM"
note() { echo "$*" | tee -a "$SUM"; }
step() { # name timeout cmd...: runs, logs, notes rc and seconds
  local name=$1 to=$2; shift 2
  local t0=$(date +%s)
  timeout "$to" "$@" >"$LOG/$name.txt" 2>"$LOG/$name.err"
  local rc=$?
  note "$name: rc=$rc in $(( $(date +%s) - t0 )) s"
}
brief() { # the encode/decode/stream rows of a bench-codec log, short
  grep -vE "^#" "$LOG/$1.txt" | grep -E "^  (encode|decode|stream|copy)" | grep -vE "decode-sum" |
    awk '{printf "  %-17s %-40s %4s %11s %8s %6s %s %s\n", $1, $2, $4, $5, $8, $9, $(NF-1), $NF}' >>"$SUM"
}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory,clocks.sm,power.draw,temperature.gpu --format=csv; } >"$LOG/machine.txt" 2>&1

if [ "$MODE" = check ]; then
  step test-kernels-gpu-options 50 "$BIN/test_kernels_gpu" --quick --options-only
  grep -E "^(tiling|encode cases|PASS|FAIL)" "$LOG/test-kernels-gpu-options.txt" | head -40 >>"$SUM"
  tar -C "$(dirname "$LOG")" -czf "$OUT/round5-check.tgz" logs
  cp "$SUM" "$OUT/summary-check.txt"
  cat "$SUM"
  exit 0
fi
W=auto:stream:direct:auto
V=${TACO_R5_VARIANTS:-$W:auto:none,$W:warp:none,$W:warp:d2,$W:warp:ef,$W:warp:pdl,$W:warp:full,$W:warp:d2+pdl+full,$W:warp:d2+ef+pdl+full}
step bench 60 "$BIN/tacorun" bench-codec --sizes 64M,128M,256M,1G --groups 128,256 --reps 11 --variants "$V"
brief bench
step test-kernels-gpu 75 "$BIN/test_kernels_gpu" --quick --tiled-only
grep -E "^(tiling|0 per|encode cases|PASS|FAIL)" "$LOG/test-kernels-gpu.txt" | head -60 >>"$SUM"
step bench-graph 25 "$BIN/tacorun" bench-codec --graph --sizes 64M,256M --groups 128,256 --reps 9 \
  --variants "$W:warp:none,$W:warp:pdl,$W:warp:d2+pdl+full"
brief bench-graph
step bench-e5m2-fp32 25 "$BIN/tacorun" bench-codec --fp8 e5m2 --fp32 --sizes 64M,256M --groups 128,256 --reps 9 \
  --variants "${TACO_R5_SHORT:-$W:auto:none,$W:warp:pdl,$W:warp:d2+pdl+full}"
brief bench-e5m2-fp32
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >>"$LOG/machine.txt" 2>&1
tar -C "$(dirname "$LOG")" -czf "$OUT/round5.tgz" logs
cp "$SUM" "$OUT/summary.txt"
cat "$SUM"

#!/usr/bin/env bash
# round4_gpu.sh — the GPU runs of round 4 (warp-tiled encode/decode: pointer
# walks, balanced grids, bulk asynchronous copies into per-warp rings; the
# same-size copy kernel next to cudaMemcpy), on one H200 of the 2 x H200
# machine. Usage: round4_gpu.sh explore|final BINDIR OUTDIR
#   BINDIR holds tacorun and test_kernels_gpu built for sm_90.
#   explore: GPU test of the tiled variants (quick), the variants side by side
#            at 64 and 256 MiB (G = 128, 256; E4M3 BF16, then E5M2 and FP32 on
#            fewer variants), one Nsight Compute profile if ncu is installed.
#   final:   GPU test of the tiled variants and the defaults (quick), the
#            codec at 64 MiB .. 1 GiB, G = 128 and 256, the round-3 default
#            (grid) next to the new default (auto) and the tiled variants
#            (TACO_FINAL_VARIANTS), then E5M2 and FP32 (grid vs auto).
# Every step has its own timeout and runs even if an earlier one failed; a
# summary is printed last and everything is packed into OUTDIR/round4-MODE.tgz.
set -u
MODE=${1:?explore|final}; BIN=${2:?bindir}; OUT=${3:?outdir}
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
brief() { # the 64 MiB .. 1 GiB rows of a bench-codec log, short
  grep -vE "^#" "$LOG/$1.txt" | grep -E " (67108864|134217728|268435456|536870912|1073741824|2147483648) " |
    awk '{printf "  %-22s %-34s %-5s %4s %11s %8s %6s\n", $1, $2, $3, $4, $5, $8, $9}' >>"$SUM"
}
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.memory,clocks.sm,power.draw,temperature.gpu --format=csv; } >"$LOG/machine.txt" 2>&1

case "$MODE" in
explore)
  V=auto:stream:direct:auto:grid,auto:stream:direct:auto:warp,auto:stream:direct:auto:bulk2,auto:stream:direct:auto:bulk4
  V=$V,auto:stream:direct:auto:bulk8,auto:stream:direct:32:warp,auto:stream:direct:32:bulk4,shuffle:stream:direct:32:bulk4
  step bench-explore 60 "$BIN/tacorun" bench-codec --sizes 64M,256M --groups 128,256 --reps 7 --variants "$V"
  brief bench-explore
  step test-kernels-gpu-tiled 50 "$BIN/test_kernels_gpu" --quick --tiled-only
  grep -E "^(tiling|0 per|encode cases|PASS|FAIL)" "$LOG/test-kernels-gpu-tiled.txt" | head -40 >>"$SUM"
  step bench-explore-e5m2-fp32 30 "$BIN/tacorun" bench-codec --fp8 e5m2 --fp32 --sizes 64M --groups 128,256 --reps 7 \
    --variants auto:stream:direct:auto:grid,auto:stream:direct:auto:warp,auto:stream:direct:auto:bulk4
  brief bench-explore-e5m2-fp32
  ;;
final)
  step test-kernels-gpu-tiled 50 "$BIN/test_kernels_gpu" --quick --tiled-only
  grep -E "^(tiling|0 per|encode cases|PASS|FAIL)" "$LOG/test-kernels-gpu-tiled.txt" | head -40 >>"$SUM"
  V=${TACO_FINAL_VARIANTS:-auto:stream:direct:auto:grid,auto:stream:direct:auto:auto,auto:stream:direct:auto:warp,auto:stream:direct:auto:bulk2,auto:stream:direct:32:warp}
  step bench-final 60 "$BIN/tacorun" bench-codec --sizes 64M,256M,1G --groups 128,256 --reps 11 --variants "$V"
  brief bench-final
  step bench-final-e5m2-fp32 30 "$BIN/tacorun" bench-codec --fp8 e5m2 --fp32 --sizes 64M,256M --groups 128,256 --reps 11 \
    --variants auto:stream:direct:auto:grid,auto:stream:direct:auto:auto
  brief bench-final-e5m2-fp32
  ;;
*) echo "round4_gpu.sh: mode '$MODE': want explore or final" >&2; exit 2 ;;
esac
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >>"$LOG/machine.txt" 2>&1
tar -C "$(dirname "$LOG")" -czf "$OUT/round4-$MODE.tgz" logs
cp "$SUM" "$OUT/summary-$MODE.txt"
cat "$SUM"

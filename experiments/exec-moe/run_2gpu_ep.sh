#!/bin/bash
# run_2gpu_ep.sh — expert parallelism (ep 2 = dp 2) on 2 x H200 of one host: the 2-rank
# `tacorun execute --check` (its MoE EP check against float64 among the rest), then the EP 2 plans
# of plans/*-ep2*.json timed (--iters 6 --warmup 2): Mixtral 8x7B cut to 1 and 2 layers, token
# all-to-alls through NCCL plain and TACO-compressed (codec.ep taco).
# Predictions: predicted/<plan>.txt (tacosim simulate, committed before the run).
# Run from the repository root: BIN=<tacorun> OUT=<folder> experiments/exec-moe/run_2gpu_ep.sh
# Writes $OUT/summary.txt, $OUT/check.txt, $OUT/plans.txt (and rank1.log without mpirun).
# About 150 s of wall time at most (check 60, plans 4 x 22) (every command bounded); one failure does not stop the others.
set -u
: "${BIN:?set BIN to tacorun}" "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
. experiments/validation/gpu_lib.sh
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
say "# exec-moe EP 2 on 2 GPUs: $(date -u) $(git rev-parse --short HEAD 2>/dev/null)"
say "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

mpi 2 60 execute --check --timeout 20 >"$OUT/check.txt" 2>&1
say "check rc=$? ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
grep -E 'MoE EP|token all-to-alls|worst|FAILED' "$OUT/check.txt" | head -40 | tee -a "$SUMMARY"

say ""
say "| plan | rc | measured median (ms) | predicted (ms) |"
say "| --- | ---: | ---: | ---: |"
for p in mixtral-8x7b-l1-ep2 mixtral-8x7b-l1-ep2-taco mixtral-8x7b-l2-ep2 mixtral-8x7b-l2-ep2-taco; do
  echo "== $p" >>"$OUT/plans.txt"
  mpi 2 22 execute "experiments/exec-moe/plans/$p.json" --iters 6 --warmup 2 --timeout 20 >"$OUT/$p.tmp" 2>&1
  rc=$?
  cat "$OUT/$p.tmp" >>"$OUT/plans.txt"
  med=$(grep -oE 'median [0-9.]+ ms' "$OUT/$p.tmp" | head -1 | awk '{print $2}')
  [ -n "$med" ] || med="- ($(grep -m1 -E 'tacorun|rror|FAILED' "$OUT/$p.tmp" | cut -c1-110))"
  pred=$(awk '/^iteration/ {printf "%.1f", $2 * 1000}' "experiments/exec-moe/predicted/$p.txt")
  say "| $p | $rc | $med | $pred |"
  rm -f "$OUT/$p.tmp"
done
say "elapsed $(elapsed) s"

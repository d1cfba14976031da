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
. experiments/exec-moe/ep_rows.sh
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
say "# exec-moe EP 2 on 2 GPUs: $(date -u) $(git rev-parse --short HEAD 2>/dev/null)"
say "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

mpi 2 60 execute --check --timeout 20 >"$OUT/check.txt" 2>&1
say "check rc=$? ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
grep -E 'MoE EP|token all-to-alls|worst|FAILED' "$OUT/check.txt" | head -40 | tee -a "$SUMMARY"

plan_rows 2 22 20 mixtral-8x7b-l1-ep2 mixtral-8x7b-l1-ep2-taco mixtral-8x7b-l2-ep2 mixtral-8x7b-l2-ep2-taco
say "elapsed $(elapsed) s"

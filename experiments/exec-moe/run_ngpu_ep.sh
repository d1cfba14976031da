#!/bin/bash
# run_ngpu_ep.sh N — expert parallelism on N = 4 or 8 GPUs of one host (an 8-GPU H200 or H100 node):
# the N-rank `tacorun execute --check-moe` (the MoE checks alone: EP N = DP N plain and TACO, EP N/2 < DP N
# with expert-DP groups of 2, each against the float64 mean gradient over the N ranks' batches), then the
# plans of plans/ for N GPUs timed (--iters 6 --warmup 2):
#   N = 4: mixtral-8x7b-l1-ep4, -ep4-taco (dp 4 = ep 4), mixtral-8x7b-l1-ep2-dp4 (ep 2, expert-DP 2)
#   N = 8: mixtral-8x7b-l1-ep8, -ep8-taco (dp 8 = ep 8), mixtral-8x7b-l1-ep4-dp8 (ep 4, expert-DP 2)
# Predictions: predicted/<plan>.txt (tacosim simulate, committed before any run).
# Run from the repository root: BIN=<tacorun> OUT=<folder> experiments/exec-moe/run_ngpu_ep.sh 4
# Writes $OUT/summary.txt, $OUT/check.txt, $OUT/plans.txt (and rankN.log without mpirun).
# At most about 240 s of wall time (check 120, plans 3 x 40; every command bounded); one failure does not stop
# the others. (EP 2 on two GPUs: run_2gpu_ep.sh.)
set -u
N=${1:-}
case "$N" in
4) PLANS="mixtral-8x7b-l1-ep4 mixtral-8x7b-l1-ep4-taco mixtral-8x7b-l1-ep2-dp4" ;;
8) PLANS="mixtral-8x7b-l1-ep8 mixtral-8x7b-l1-ep8-taco mixtral-8x7b-l1-ep4-dp8" ;;
*) echo "usage: BIN=<tacorun> OUT=<folder> $0 4|8" >&2; exit 2 ;;
esac
: "${BIN:?set BIN to tacorun}" "${OUT:?set OUT to the output folder}"
mkdir -p "$OUT"
. experiments/validation/gpu_lib.sh
. experiments/exec-moe/ep_rows.sh
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
say "# exec-moe EP on $N GPUs: $(date -u) $(git rev-parse --short HEAD 2>/dev/null)"
say "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) x $(nvidia-smi -L 2>/dev/null | wc -l)"

mpi "$N" 120 execute --check-moe --timeout 30 >"$OUT/check.txt" 2>&1
say "check-moe rc=$? ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
grep -E 'MoE EP|token all-to-alls|worst|FAILED|not run' "$OUT/check.txt" | head -60 | tee -a "$SUMMARY"

plan_rows "$N" 40 25 $PLANS
say "elapsed $(elapsed) s"

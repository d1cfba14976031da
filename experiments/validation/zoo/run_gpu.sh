#!/usr/bin/env bash
# run_gpu.sh — on one H200, from the repository root, building nothing:
#   check.txt       `tacorun execute --check` (float64 reference against the
#                   executor on the tiny models, the llama/qwen/gpt family models
#                   with RoPE, QKV/linear biases and untied output weights
#                   among them; rt_ops selfcheck incl. RoPE and bias kernels)
#   timing.txt      every zoo plan (plans/*.json) timed: `tacorun execute PLAN
#                   --iters ITERS --warmup WARMUP --json measured/NAME.json`
#   measured.tgz    measured/NAME.json and the printouts
#   machine.txt     GPU, driver
# BIN (default build/runtime/tacorun), OUT (default /tmp/zoo-out), ITERS (8), WARMUP (3), SKIP_CHECK (set: no --check),
# PLANS_DIR (default experiments/validation/zoo/plans), INFER_DIR (default
# experiments/validation/zoo/infer-plans: inference plans, TTFT and TPOT).
set -u
BIN=${BIN:-build/runtime/tacorun}
OUT=${OUT:-/tmp/zoo-out}
ITERS=${ITERS:-8}
WARMUP=${WARMUP:-3}
PLANS_DIR=${PLANS_DIR:-experiments/validation/zoo/plans}
mkdir -p "$OUT/measured"
export NCCL_NVLS_ENABLE=0 TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
START=$(date +%s)
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv; date -u; } >"$OUT/machine.txt" 2>&1
[ -n "${SKIP_CHECK:-}" ] || timeout 300 "$BIN" execute --check >"$OUT/check.txt" 2>&1
echo "check rc=$? ($(( $(date +%s) - START )) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)" | tee "$OUT/summary.txt"
for plan in "$PLANS_DIR"/*.json; do
  n=$(basename "$plan" .json)
  timeout 150 "$BIN" execute "$plan" --iters "$ITERS" --warmup "$WARMUP" --json "$OUT/measured/$n.json" \
    >"$OUT/measured/$n.txt" 2>&1
  echo "$n rc=$? ($(( $(date +%s) - START )) s): $(grep -E 'iteration time' "$OUT/measured/$n.txt" | head -1)" | tee -a "$OUT/summary.txt"
done
# inference plans (one process, TP 1): TTFT and TPOT as `tacorun execute` measures them
for plan in "${INFER_DIR:-experiments/validation/zoo/infer-plans}"/*.json; do
  [ -f "$plan" ] || continue
  n=$(basename "$plan" .json)
  timeout 120 "$BIN" execute "$plan" --json "$OUT/measured/$n.json" >"$OUT/measured/$n.txt" 2>&1
  echo "$n rc=$? ($(( $(date +%s) - START )) s): $(grep -iE 'tpot|per output' "$OUT/measured/$n.txt" | head -1)" | tee -a "$OUT/summary.txt"
done
cat "$OUT"/measured/*.txt >"$OUT/timing.txt" 2>/dev/null
tar -czf "$OUT/measured.tgz" -C "$OUT" measured && rm -rf "$OUT/measured"

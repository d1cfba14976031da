#!/usr/bin/env bash
# run_2gpu.sh — on 2 x H200 (NVLink, one host), from the repository root, building nothing: every
# plan of experiments/validation/zoo2/plans timed by `tacorun execute` on dp x tp x pp processes
# (gpu_lib.sh's mpi: mpirun, or tacorun's id-file bootstrap where the machine has none).
#   summary.txt     one line per plan: status, median iteration time
#   measured.tgz    measured/NAME.json (the result schema, source "measured") and NAME.txt (printout)
# BIN (default build/runtime/tacorun), OUT (default /tmp/zoo2-out), ITERS (6), WARMUP (2),
# BUDGET (s, default 240: no plan starts after it).
set -u
BIN=${BIN:-build/runtime/tacorun}
OUT=${OUT:-/tmp/zoo2-out}
ITERS=${ITERS:-6}
WARMUP=${WARMUP:-2}
BUDGET=${BUDGET:-240}
Z=experiments/validation/zoo2
. experiments/validation/gpu_lib.sh # START, say, elapsed, mpi; $OUT/measured
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
for plan in $Z/plans/*.json; do
  n=$(basename "$plan" .json)
  if [ "$(elapsed)" -ge "$BUDGET" ]; then say "$n: skipped (budget of $BUDGET s spent)"; continue; fi
  np=$(python3 -c 'import json,sys; l=json.load(open(sys.argv[1]))["layout"]; print(l["dp"]*l["tp"]*l["pp"])' "$plan")
  mpi "$np" 120 execute "$plan" --iters "$ITERS" --warmup "$WARMUP" --timeout 60 --json "$OUT/measured/$n.json" \
    >"$OUT/measured/$n.txt" 2>&1
  say "$n rc=$? np=$np ($(elapsed) s): $(grep -E '^# iteration time' "$OUT/measured/$n.txt" | head -1 | sed 's/.*: median/median/')"
done
tar -czf "$OUT/measured.tgz" -C "$OUT" measured && rm -rf "$OUT/measured"

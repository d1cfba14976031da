#!/bin/bash
# run_2gpu.sh — the two-GPU run of 2026-12-04, prepared on the CPU machine (its predictions are
# committed beside it, before the run): on 2 x H200 of one host, from the repository root, building
# nothing, with BIN a tacorun built from this tree (and LD_LIBRARY_PATH holding what it links):
#   machine.txt        GPUs, topology, whether mpirun exists (gpu_lib.sh falls back on tacorun's
#                      id-file bootstrap), commit
#   v.tgz, v-summary   experiments/validation/exec_gpu.sh check fault nan timed: the 2-rank
#                      `execute --check`, the killed-rank and NaN tests, the NVLink and shm rows of
#                      plans.txt (the gpt-h4096 plans now say attention_backend "executor" and
#                      bias_fusion false; predictions in run12/predicted)
#   zoo2.tgz, zoo2-summary  experiments/validation/zoo2/run_2gpu.sh: 14 zoo-model plans at TP/PP/DP 2
#                      (predictions in zoo2/predicted)
#   infer.tgz          the 24 NVLink inference plans of experiments/infer/plans (Llama-3 8B TP 2) in one
#                      launch (predictions in experiments/infer/tp2-run2/predicted-{idle,warm}: the
#                      launch's first plan starts from idle, the others warm)
#   calib.tgz          `tacorun calibrate --only comm --coll-groups 32,512`: the compressed collectives
#                      at TACO groups 32 and 512 (the reshaping's choices at h 4096), to be merged into
#                      calibration/h200-nvlink.json with calibration/merge_tables.py-style care
# Bounded to ~540 s in all (each stage has its own limit). OUT (default /tmp/run12).
set -u
BIN=${BIN:?BIN: the tacorun to run}
OUT=${OUT:-/tmp/run12}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s)
el() { echo $(($(date +%s) - S)); }
{
  nvidia-smi -L
  nvidia-smi topo -m
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv
  echo "mpirun: $(command -v mpirun || echo none)"
  nproc
  date -u
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || cat "${COMMIT_FILE:-/dev/null}")"
} >"$OUT/machine.txt" 2>&1

echo "== validation rows ($(el) s)"
W=$(mktemp -d /tmp/run12.XXXXXX)
BIN=$BIN OUT=$W/v BUDGET=150 NVLINK_ITERS=6 \
  TAGS="tp2-none-nvlink pp2-nvlink dp2-nvlink swiglu-tp2-none-nvlink swiglu-pp2-nvlink tp2-taco-nvlink tp2-caat-nvlink 1gpu-nvlink tp2-none-shm tp2-caat-shm swiglu-dp2-shm tp2-sp-none-shm tp2-sp-taco-shm pp2-none-shm pp2-taco-shm dp2-none-shm dp2-taco-shm" \
  timeout 260 bash experiments/validation/exec_gpu.sh check fault nan timed pack
tar czf "$OUT/v.tgz" -C "$W" v
cp "$W/v/summary.txt" "$OUT/v-summary.txt"

echo "== zoo2 ($(el) s)"
BIN=$BIN OUT=$W/z BUDGET=150 timeout 200 bash experiments/validation/zoo2/run_2gpu.sh
cp "$W/z/measured.tgz" "$OUT/zoo2.tgz"
cp "$W/z/summary.txt" "$OUT/zoo2-summary.txt"

echo "== inference TP 2 ($(el) s)"
mkdir -p "$W/i/measured"
(
  OUT=$W/i
  . experiments/validation/gpu_lib.sh
  mpi 2 100 execute experiments/infer/plans/infer-v-nvlink-*.json --json-dir "$W/i/measured" >"$W/i/nvlink.log" 2>&1
  echo "rc=$?" >>"$W/i/nvlink.log"
)
tar czf "$OUT/infer.tgz" -C "$W" i

left=$((540 - $(el)))
echo "== calibrate comm G 32, 512 ($(el) s, $left s left)"
if [ $left -gt 60 ]; then
  mkdir -p "$W/c"
  (
    OUT=$W/c
    . experiments/validation/gpu_lib.sh
    mpi 2 $left calibrate --only comm --coll-groups 32,512 --max-bytes 268435456 --comm-reps 5 \
      --time-limit $((left - 10)) --out "$W/c/h200-nvlink-g32-g512.json" >"$W/c/log.txt" 2>&1
    echo "rc=$?" >>"$W/c/log.txt"
  )
  tar czf "$OUT/calib.tgz" -C "$W" c
fi
echo "== done ($(el) s)"
cat "$OUT/v-summary.txt" "$OUT/zoo2-summary.txt" | grep -v "^  " | cut -c1-150
grep -hE "^# infer|^ttft" "$W/i/nvlink.log" | head -30
tail -3 "$W/c/log.txt" 2>/dev/null

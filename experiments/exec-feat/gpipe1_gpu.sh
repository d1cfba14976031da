#!/usr/bin/env bash
# gpipe1_gpu.sh — GPipe at PP = 1 in the executor (every micro-batch keeps its activations): the GPU
# check (`tacorun execute --check`, whose gpipe1/f64 and gpipe1/dp2 columns are this schedule on one
# GPU over two micro-batches) and the TP2 NVLink plan timed against the same plan under 1F1B, two
# rounds in alternation. Builds nothing. usage: BIN=.../tacorun OUT=... gpipe1_gpu.sh
set -u
cd "$(dirname "$0")/../.."
BIN=${BIN:?tacorun}
OUT=${OUT:?}
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
MPI=(mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH)
timeout 120 "${MPI[@]}" "$BIN" execute --check --timeout 20 >"$OUT/check.txt" 2>&1
echo "check rc=$?: $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)" | tee -a "$OUT/summary.txt"
grep -E "gpipe|worst" "$OUT/check.txt" | head -8 | tee -a "$OUT/summary.txt"
for r in 1 2; do
  for plan in experiments/exec-feat/plans/gpt-h4096-tp2-gpipe.json experiments/plans/gpt-h4096-tp2-none.json; do
    tag=$(basename "$plan" .json)-r$r
    timeout 120 "${MPI[@]}" "$BIN" execute "$plan" --iters 4 --warmup 2 --timeout 30 --json "$OUT/$tag.json" \
      >"$OUT/$tag.txt" 2>&1
    echo "$tag rc=$?: $(grep -E '^# iteration time|GPU memory' "$OUT/$tag.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  done
done
tar -czf "$OUT/runs.tgz" -C "$OUT" $(cd "$OUT" && ls gpt-*) && rm -f "$OUT"/gpt-*

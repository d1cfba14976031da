#!/usr/bin/env bash
# run_gpu.sh — the inference executor's whole decode step over the batch x KV-length grid of issue 24 (batch
# 1-64, KV lengths 128-8,192) on one H100 or H200: `tacorun bench-decode-step` (runtime/bench/bench_decode_step.c)
# for Llama 3 8B over a BF16 and an FP8 KV cache and Qwen2.5 7B over BF16, each under `timeout 150`, from the
# repository root, building nothing (BIN: a tacorun built with bench-decode-step, its libraries in LIB).
# Defaults: the executor's decode attention, each step one CUDA graph launch, 5 warm-up + 20 timed steps a point,
# the HBM rate of the GPU catalogue's entry for the device found.
# Outputs in OUT: gpu.txt (nvidia-smi), summary.txt, and per run TAG.txt (the table) and TAG.csv (its rows).
set -u
OUT=${OUT:-/tmp/decode-grid}
. scripts/gpu_env.sh
if ! "$BIN" bench-decode-step --help > /dev/null 2>&1; then
  say "$BIN has no bench-decode-step (build this tree's tacorun and give it as BIN)"
  exit 1
fi
grid() { # grid TAG OPTIONS...
  local tag=$1
  shift
  timeout 150 "$BIN" bench-decode-step "$@" --csv "$OUT/$tag.csv" > "$OUT/$tag.txt" 2>&1
  local rc=$?
  say "$tag rc=$rc ($(el) s): $(grep -E '^# ([0-9]+ points|no point)' "$OUT/$tag.txt" | tail -1)"
  grep -c '^# skipped' "$OUT/$tag.txt" | sed 's/^/  points skipped (memory): /' | tee -a "$OUT/summary.txt"
}
grid llama3-8b-bf16 --model llama3-8b --kv-cache bf16
grid llama3-8b-fp8 --model llama3-8b --kv-cache fp8
grid qwen2.5-7b-bf16 --model qwen2.5-7b --kv-cache bf16
say "done in $(el) s"

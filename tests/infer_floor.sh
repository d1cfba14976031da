#!/bin/sh
# experiments/infer/floor.py: a decode step's weight + KV-cache read floor, against the figures
# runtime/RESULTS-decode.md counted by hand (2026-12-04 v3 section, one H200): Llama-3 8B b1 x 4,096
# 15.55 GB, 3.240 ms at 4.8 TB/s, TPOT 5.305 ms = 61.1 % of the floor, 80 % at 4.050 ms; Qwen2.5 14B
# b1 x 2,048 28.39 GB; the FP8 cache of Llama-3 8B b64 x 2,048: 80 % at 6.252 ms. Bad input: exit 2.
# Usage: infer_floor.sh PYTHON3 SOURCE_DIR
set -u
py=$1; src=$2; P=$src/experiments/infer/v3/plans
out=$("$py" "$src/experiments/infer/floor.py" --log "$src/experiments/infer/v3/run/execute-llama-bf16.txt" \
  "$P/llama3-8b-tp1-b1-p4096-g64-bf16.json" "$P/qwen2.5-14b-tp1-b1-p2048-g64-bf16.json" \
  "$P/llama3-8b-tp1-b64-p2048-g64-fp8.json") || { echo "floor.py failed: $out"; exit 1; }
echo "$out"
echo "$out" | grep -q '^| llama3-8b-tp1-b1-p4096-g64-bf16 | 15.01 | 0.54 | 15.55 | 3.240 | 5.305 | 2931 | 61.1 | 4.050 |$' ||
  { echo "FAIL: Llama-3 8B b1 x 4096"; exit 1; }
echo "$out" | grep -q '^| qwen2.5-14b-tp1-b1-p2048-g64-bf16 | 27.98 | 0.41 | 28.39 | 5.915 | - | - | - | 7.394 |$' ||
  { echo "FAIL: Qwen2.5 14B b1 x 2048"; exit 1; }
echo "$out" | grep -q '^| llama3-8b-tp1-b64-p2048-g64-fp8 | .* | 6.252 |$' || { echo "FAIL: FP8 cache b64 x 2048"; exit 1; }
"$py" "$src/experiments/infer/floor.py" "$src/experiments/plans/gpt3-13b-64.json" 2>/dev/null
[ $? -eq 2 ] || { echo "FAIL: a training plan not refused with exit 2"; exit 1; }
"$py" "$src/experiments/infer/floor.py" --peak-gbps 0 "$P/llama3-8b-tp1-b1-p4096-g64-bf16.json" 2>/dev/null
[ $? -eq 2 ] || { echo "FAIL: --peak-gbps 0 not refused with exit 2"; exit 1; }
echo ok

#!/bin/sh
# experiments/infer/coverage.py: which parts of a zoo model's inference prediction the default
# calibration prices from measured tables. Llama-3 8B at batch 1 x 128 tokens (BF16 and FP8 KV) is
# priced from measured tables alone (no warning); GPT-3 125M's decode attention (head dim 64) reads
# the plain table, which the simulator warns of and the script names; every warning line is classified (exit 0).
# Usage: infer_coverage.sh PYTHON3 TACOSIM SOURCE_DIR
set -u
py=$1; tacosim=$2; src=$3
out=$("$py" "$src/experiments/infer/coverage.py" "$tacosim" --models llama3-8b,gpt3-125m --points 1x128) || {
  echo "coverage.py failed: $out"; exit 1; }
echo "$out"
echo "$out" | grep -q '^| llama3-8b | 2 | 0 | 2 | no | - |$' || { echo "FAIL: llama3-8b b1 x 128 not priced from measured tables alone"; exit 1; }
echo "$out" | grep -q '^| gpt3-125m | 2 | 0 | [0-9]* | yes (head dim 64) |' || { echo "FAIL: gpt3-125m's plain-table decode attention not named"; exit 1; }
echo "$out" | grep -q '^| gpt3-125m | .*prefill attention unkeyed (head dim) 2' || { echo "FAIL: gpt3-125m's unkeyed prefill attention not counted"; exit 1; }
echo "$out" | grep -q '^| gpt3-125m | .*decode attention at another head dim (plain table) 2' || { echo "FAIL: gpt3-125m's plain-table decode attention not warned"; exit 1; }
echo ok

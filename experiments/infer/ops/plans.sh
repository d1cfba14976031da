#!/usr/bin/env bash
# plans.sh — the inference plans whose ops are profiled (names without .json; the same names in
# experiments/validation/h100/infer-plans and experiments/infer/v3/plans): every BF16-cache plan and three FP8 ones.
for m in llama3-8b-tp1-b1-p4096 llama3-8b-tp1-b1-p8128 llama3-8b-tp1-b4-p512 llama3-8b-tp1-b8-p4096 \
         llama3-8b-tp1-b16-p1024 llama3-8b-tp1-b32-p1024 llama3-8b-tp1-b64-p2048 qwen2.5-14b-tp1-b1-p2048 \
         qwen2.5-14b-tp1-b8-p1024 qwen2.5-14b-tp1-b64-p256 qwen2.5-7b-tp1-b1-p8192 qwen2.5-7b-tp1-b16-p512 \
         qwen2.5-7b-tp1-b64-p128; do
  echo "$m-g64-bf16"
done
for m in llama3-8b-tp1-b1-p4096 llama3-8b-tp1-b64-p2048 qwen2.5-14b-tp1-b1-p2048; do echo "$m-g64-fp8"; done

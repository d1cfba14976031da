#!/usr/bin/env bash
# prefill_ops.sh — prints the power phase's arguments for the prefill ops of the inference validation plans (one list,
# read by experiments/infer/op-power/run_gpu.sh and the README's command): the prefill-sized GEMMs of Llama-3 8B and
# Qwen2.5 14B (M = tokens) and one decode-sized GEMM, --power-gemm MxNxK; the executor's prefill attention of the
# three models' head layouts, --power-prefill-attn HLxKVLxDxBxS (with their amix- rows).
for s in 4096x28672x4096 4096x4096x14336 4096x6144x4096 4096x4096x4096 512x28672x4096 16384x28672x4096 \
  2048x27648x5120 64x28672x4096; do printf -- '--power-gemm %s ' "$s"; done
for s in 32x8x128x1x4096 32x8x128x1x8128 32x8x128x16x1024 32x8x128x64x2048 40x8x128x1x2048 40x8x128x64x256 \
  28x4x128x1x8192 28x4x128x64x128; do printf -- '--power-prefill-attn %s ' "$s"; done
echo

#!/usr/bin/env bash
# run_gpu.sh — on one H100 or H200, from the repository root, building nothing (BIN: a tacorun built on the CPU
# machine, its libraries in LIB), the two measurements the prefill-at-one-clock model is held against, on one card:
#  1. the power phase with the prefill-sized GEMMs and the executor's prefill attention shapes, back to back and
#     (the `amix-` rows) each attention mixed with the reference GEMM (calibration/power/README.md; ~150 s), for
#     calibration/merge_op_power.py;
#  2. the GPU's 26 inference validation plans (experiments/infer/v3/plans on an H200,
#     experiments/validation/h100/infer-plans on an H100) with `tacorun execute --decode-graph`, their TTFT and TPOT
#     for compare.py.
# Outputs in OUT: gpu.txt, summary.txt, power.json, power.tsv, power.log, infer.tgz (measured/*.json, the logs).
set -u
OUT=${OUT:-/tmp/op-power}
. scripts/gpu_env.sh
case "$(head -1 "$OUT/gpu.txt")" in
  *H200*) PLANS=experiments/infer/v3/plans ;;
  *H100*) PLANS=experiments/validation/h100/infer-plans ;;
  *) say "not an H100 or H200: $(head -1 "$OUT/gpu.txt")"; exit 0 ;;
esac
say "gpu: $(head -1 "$OUT/gpu.txt")"
G=""
for s in 4096x28672x4096 4096x4096x14336 4096x6144x4096 4096x4096x4096 512x28672x4096 16384x28672x4096 \
  2048x27648x5120 64x28672x4096; do G="$G --power-gemm $s"; done
A=""
for s in 32x8x128x1x4096 32x8x128x1x8128 32x8x128x16x1024 32x8x128x64x2048 40x8x128x1x2048 40x8x128x64x256 \
  28x4x128x1x8192 28x4x128x64x128; do A="$A --power-prefill-attn $s"; done
timeout 240 "$BIN" calibrate --only power --power-json "$OUT/power.json" --power-tsv "$OUT/power.tsv" $G $A \
  > "$OUT/power.log" 2>&1
say "power rc=$? ($(el) s): $(grep -c '^amix-' "$OUT/power.tsv" 2> /dev/null) amix rows"
I=$OUT/infer
mkdir -p "$I/measured"
run() { # run TAG LIMIT PLANS...
  local tag=$1 t=$2
  shift 2
  timeout "$t" "$BIN" execute "$@" --decode-graph --json-dir "$I/measured" > "$I/execute-$tag.txt" 2>&1
  say "infer $tag rc=$? ($(el) s)"
}
run qwen7b 45 $PLANS/qwen2.5-7b-*.json
run qwen14b 60 $PLANS/qwen2.5-14b-*.json
run llama-bf16 70 $PLANS/llama3-8b-*-bf16.json
run llama-fp8 70 $PLANS/llama3-8b-*-fp8.json
say "plans measured: $(ls "$I/measured" | wc -l)"
tar -czf "$OUT/infer.tgz" -C "$OUT" infer && rm -rf "$I"
say "done in $(el) s"

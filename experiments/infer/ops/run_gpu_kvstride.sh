#!/usr/bin/env bash
# run_gpu_kvstride.sh — does the KV caches' stride move the prefill attention? On one H100 or H200, from the
# repository root, building nothing (BIN: a tacorun built on the CPU machine, its libraries in LIB): the keyed
# prefill attention of Llama-3 8B, Qwen2.5 7B and 14B at TP 1 (batch 1-64, prompts 128-4,096) timed four times by
# `tacorun calibrate-infer --quick`, over caches of prompt positions a sequence (the tables' layout) and of
# prompt + 64 (the executor's, 64 generated tokens), alternating: a0 (0), b64 (64), c0 (0), d64 (64).
# Outputs in OUT: gpu.txt, errs.tgz (each run's progress lines, one a point). ~70 s.
set -u
OUT=${OUT:-/tmp/kvstride}
. scripts/gpu_env.sh
case "$(head -1 "$OUT/gpu.txt")" in *H100*) CAL=calibration/h100-sxm-nvlink.json ;; *) CAL=calibration/h200-nvlink.json ;; esac
for r in a0:0 b64:64 c0:0 d64:64; do
  t=${r%%:*} x=${r##*:}
  mkdir -p "$OUT/$t"
  timeout 200 "$BIN" calibrate-infer "$CAL" --out-dir "$OUT/$t" --models models --quick \
    --prefill-layouts llama3-8b:1,qwen2.5-7b:1,qwen2.5-14b:1 --prefill-prompts 128,256,512,1024,2048,4096 \
    --prefill-max-tokens 131072 --prefill-kv-extra "$x" 2> "$OUT/$t.err"
  echo "$t rc=$? $(grep -c 'attention_prefill .* us$' "$OUT/$t.err") points"
  rm -rf "${OUT:?}/$t"
done
tar -czf "$OUT/errs.tgz" -C "$OUT" a0.err b64.err c0.err d64.err && rm -f "$OUT"/*.err

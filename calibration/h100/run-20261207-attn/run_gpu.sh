#!/usr/bin/env bash
# run_gpu.sh — the inference executor's prefill attention (infer_prefill_attention: two batched GEMMs
# around a causal softmax, the S x S scores in device memory) timed on one H100 in the head layouts
# of the one-GPU inference validation plans: Llama-3 8B (32 / 8 heads of 128), Qwen2.5 7B (28 / 4),
# Qwen2.5 14B (40 / 8) at TP 1, and Llama-3 8B at TP 2 (16 / 4), prompts 128 .. 8,192 and 8,128,
# batch 1 .. 64 up to 131,072 tokens. The H100 file's keyed tables held the TP-2 layout only, and
# its attention_prefill.d128.s8128 was the H200's (taken by complete.py from the transferred H200
# file, whose FLOP-keyed transfer left it unchanged: the two GPUs have the same BF16 peak).
# From the repository root, building nothing (BIN: a tacorun built on the CPU machine, its
# libraries in LIB). Outputs in OUT: gpu.txt, summary.txt, attn.json.gz (the calibration file with
# the new tables, for calibration/merge_infer.py --take attention-prefill), attn.err.gz.
set -u
OUT=${OUT:-/tmp/attn}
. scripts/gpu_env.sh
mkdir -p "$OUT/c"
case "$(head -1 "$OUT/gpu.txt")" in
  *H100*) CAL=calibration/h100-sxm-nvlink.json ;;
  *H200*) CAL=calibration/h200-nvlink.json ;;
  *) say "not an H100 or H200: $(head -1 "$OUT/gpu.txt")"; exit 0 ;;
esac
timeout 300 "$BIN" calibrate-infer "$CAL" --out-dir "$OUT/c" --models models --quick \
  --prefill-layouts llama3-8b:1,qwen2.5-7b:1,qwen2.5-14b:1,llama3-8b:2 \
  --prefill-prompts 128,256,512,1024,2048,4096,8128,8192 --prefill-max-tokens 131072 2> "$OUT/attn.err"
say "calibrate-infer rc=$? ($(el) s): $(grep -c 'attention_prefill .* us$' "$OUT/attn.err") prefill attention points"
grep -E "s8128|s8192" "$OUT/attn.err" | grep " b1 " | head -8 | tee -a "$OUT/summary.txt"
gzip -9 -c "$OUT/c/$(basename "$CAL")" > "$OUT/attn.json.gz"
gzip -9 "$OUT/attn.err"
rm -rf "$OUT/c"
say "done ($(el) s)"

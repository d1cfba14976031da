#!/bin/sh
# plan_infer_decode_floor_bytes (plan/plan_infer_floor.c, the decode read floor `tacorun execute` prints)
# against experiments/infer/floor.py's step_floor_bytes on the same plans: the inference plans of
# experiments/infer/plans, experiments/infer/v3/plans and experiments/plans/infer-llama3-8b-tp2 (Llama-3 8B,
# Qwen2.5 7B / 14B: RMSNorm, SwiGLU, a QKV bias or none, TP 1 and 2, BF16 and FP8 caches) and plans written
# here for what those lack: GPT-3 1.3B (LayerNorm, GELU, biases on every linear layer) at TP 2 with
# layers_override and an odd generate, Qwen2.5 7B at TP 2 with an FP8 cache. The C count is read from
# `tacosim plan`'s "decode read floor per GPU" line (whole bytes); each must be within 1 byte of floor.py's.
# An MoE model (Mixtral 8x7B) is refused by both; Llama-3 8B with FP8 and with NVFP4 weights compared too.
# Usage: infer_floor_c.sh PYTHON3 TACOSIM SOURCE_DIR
set -u
py=$1; tacosim=$2; src=$3
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
plan() { # NAME MODEL TP BATCH PROMPT GENERATE KV LAYERS_OVERRIDE [EXTRA]
  cat > "$tmp/$1.json" <<JSON
{ "schema": 1, "kind": "inference", "name": "$1", "model": "$2", "cluster": "${CL:-h200x2-nvlink}",
  "layout": { "tp": $3, "pp": 1 }, "batch": { "size": $4, "prompt": $5, "generate": $6 },
  "kv_cache": "$7", "codec": { "kind": "none" }, "layers_override": $8${9:-} }
JSON
}
plan gpt3-1.3b-tp2-lo6 gpt3-1.3b 2 3 500 63 bf16 6
plan qwen2.5-7b-tp2-fp8 qwen2.5-7b 2 5 1000 17 fp8 null
plan mixtral-8x7b-tp2 mixtral-8x7b 2 1 128 16 bf16 null
plan llama3-8b-quant-fp8 llama3-8b 1 1 128 16 bf16 null ', "quantization": "fp8"'
CL=b200x8-nvswitch plan llama3-8b-quant-nvfp4 llama3-8b 2 4 256 32 fp8 null ', "quantization": "nvfp4"'
plans=$(ls "$src"/experiments/infer/plans/*.json "$src"/experiments/infer/v3/plans/*.json \
  "$src"/experiments/plans/infer-llama3-8b-tp2/*.json) || exit 1
plans="$plans $tmp/gpt3-1.3b-tp2-lo6.json $tmp/qwen2.5-7b-tp2-fp8.json $tmp/llama3-8b-quant-fp8.json $tmp/llama3-8b-quant-nvfp4.json"
# floor.py's bytes, one line a plan: PATH WEIGHTS KV
"$py" - "$src/experiments/infer" $plans > "$tmp/py.txt" <<'PY' || { echo "FAIL: floor.py's count failed"; exit 1; }
import json, sys
sys.path.insert(0, sys.argv[1])
import floor
for path in sys.argv[2:]:
    w, kv = floor.step_floor_bytes(json.load(open(path)), path)
    print(path, repr(w), repr(kv))
PY
n=0
for p in $plans; do
  c=$("$tacosim" plan "$p" | sed -n 's/.*decode read floor per GPU: \([0-9]*\) B weights + \([0-9]*\) B KV cache.*/\1 \2/p')
  [ -n "$c" ] || { echo "FAIL: $p: no decode read floor in tacosim plan's summary"; exit 1; }
  f=$(grep "^$p " "$tmp/py.txt" | cut -d' ' -f2-)
  awk -v c="$c" -v f="$f" -v p="$p" 'BEGIN { split(c, a, " "); split(f, b, " ");
      if (a[1] - b[1] > 1 || b[1] - a[1] > 1 || a[2] - b[2] > 1 || b[2] - a[2] > 1) {
        printf "FAIL: %s: C %s, floor.py %s (weights, KV cache bytes)\n", p, c, f; exit 1 } }' || exit 1
  n=$((n + 1))
done
[ "$n" -ge 120 ] || { echo "FAIL: only $n plans compared"; exit 1; }
echo "$n plans: the C floor equals floor.py's within a byte"
echo "e.g. $(sed -n 1p "$tmp/py.txt")"
"$tacosim" plan "$tmp/mixtral-8x7b-tp2.json" | grep -q 'decode read floor: not counted' ||
  { echo "FAIL: an MoE plan's floor counted"; exit 1; }
"$py" "$src/experiments/infer/floor.py" "$tmp/mixtral-8x7b-tp2.json" > /dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: floor.py did not refuse the MoE plan with exit 2"; exit 1; }
grep -q "^$tmp/llama3-8b-quant-nvfp4.json " "$tmp/py.txt" && grep -q "^$tmp/llama3-8b-quant-fp8.json " "$tmp/py.txt" ||
  { echo "FAIL: the FP8 / NVFP4 weight plans not compared"; exit 1; }
echo ok

#!/bin/sh
# The inference plan field "quantization" (plan_infer.h): "fp8" holds the linear layers' weights in E4M3 and
# runs their GEMMs in FP8. Llama-3 8B, TP 1, one H100, batch 1: the layers' linear weights are
# 32 x 4096 x (6144 + 4096 + 28672 + 14336) = 6,979,321,856 parameters, so FP8 holds exactly that many bytes
# less; a decode step reads them (6.98 GB) and the BF16 output layer (128,256 x 4,096 x 2 B = 1.05 GB), so
# its GEMMs take at least 8.03 GB / 3.35 TB/s = 2.40 ms, and well under the BF16 step's (15.0 GB of GEMM
# weights); the embedding's and the attention's time do not change. A GPU without FP8 tensor cores
# (A100) and an unknown value are errors naming the file and the field (exit 2); an MoE model is priced
# (tests/test_infer_moe_fp8.c checks it).
# usage: infer_fp8.sh TACOSIM
set -eu
bin=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infer_fp8.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
plan() { # NAME MODEL CLUSTER QUANT
  cat > "$tmp/$1.json" <<J
{"schema":1,"kind":"inference","name":"$1","model":"$2","cluster":"$3",
 "layout":{"tp":1,"pp":1},"batch":{"size":1,"prompt":128,"generate":8},"quantization":"$4"}
J
}
for q in none fp8; do
  plan "$q" llama3-8b h100x8-nvswitch "$q"
  "$bin" simulate "$tmp/$q.json" --json "$tmp/$q.out" > "$tmp/$q.txt" 2>&1 || { cat "$tmp/$q.txt"; exit 1; }
done
grep -q '"quantization": "fp8"' "$tmp/fp8.out" || { echo "the result does not record quantization fp8"; exit 1; }
grep -q '"quantization": "none"' "$tmp/none.out" || { echo "the result does not record quantization none"; exit 1; }
weights() { grep -o '"weights_bytes": *[0-9.e+-]*' "$1" | sed 's/.*: *//'; }
gemms() { grep -A1 '^  decode' "$1" | grep -o 'GEMMs *[0-9.]*' | sed 's/GEMMs *//'; } # ms, printed
attn() { grep -A1 '^  decode' "$1" | grep -o 'attention *[0-9.]*' | sed 's/attention *//'; }
awk -v b="$(weights "$tmp/none.out")" -v f="$(weights "$tmp/fp8.out")" 'BEGIN {
  printf "weights: bf16 %.0f B, fp8 %.0f B, difference %.0f (expected 6979321856; the JSON holds 10 digits)\n", b, f, b - f
  d = b - f - 6979321856; if (d < 0) d = -d
  exit !(d <= 1e-9 * b) }'
awk -v b="$(gemms "$tmp/none.txt")" -v f="$(gemms "$tmp/fp8.txt")" 'BEGIN { floor = (6979321856 + 128256 * 4096 * 2) / 3.35e12 * 1e3;
  printf "decode GEMMs: bf16 %.3f ms, fp8 %.3f ms, fp8 read floor %.3f ms\n", b, f, floor
  exit !(f >= floor && f < 0.75 * b) }'
[ "$(attn "$tmp/none.txt")" = "$(attn "$tmp/fp8.txt")" ] || { echo "decode attention moved with the weights' format"; exit 1; }
refused() { # NAME FIELD: exit 2 and a message naming the plan file and the field
  if "$bin" simulate "$tmp/$1.json" > "$tmp/$1.txt" 2>&1; then echo "$1: accepted"; exit 1; else rc=$?; fi
  [ $rc -eq 2 ] || { echo "$1: exit $rc, not 2"; cat "$tmp/$1.txt"; exit 1; }
  grep -q "$1.json" "$tmp/$1.txt" && grep -q "$2" "$tmp/$1.txt" || { echo "$1: message"; cat "$tmp/$1.txt"; exit 1; }
}
plan a100 llama3-8b a100x8-nvswitch fp8
refused a100 quantization
plan int4 llama3-8b h100x8-nvswitch int4
refused int4 quantization
echo "infer_fp8: ok"

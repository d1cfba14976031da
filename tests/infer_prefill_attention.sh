#!/bin/sh
# The inference plan field "prefill_attention" (plan_infer.h): "fused" and "flash" price a prefill's causal
# attention from the calibration's attention_backends tables, as serving engines run it, "executor" (the
# default) from the executor's own unfused tables. Llama-3 8B, one H100, batch 1 x 2,048 tokens: a layer's
# causal attention is 2 x 2 x 2048^2 x 4096 / 2 FLOP = 34.4 GFLOP, so 32 layers take at least 1.10 TFLOP /
# 989 TFLOP/s = 1.11 ms; the fused kernels are faster than the unfused executor's and no faster than that;
# decode is the same under all three; a plan without the field is "executor"; "unfused" is an error naming
# the file and the field (exit 2). fused-fp8: below.
# usage: infer_prefill_attention.sh TACOSIM
set -eu
bin=$1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infer_prefill_attention.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
plan() { # NAME FIELD
  cat > "$tmp/$1.json" <<J
{"schema":1,"kind":"inference","name":"$1","model":"llama3-8b","cluster":"h100x8-nvswitch",
 "layout":{"tp":1,"pp":1},"batch":{"size":1,"prompt":2048,"generate":4}$2}
J
}
attn() { grep -A1 "^  $2 " "$1" | grep -o 'attention *[0-9.]*' | sed 's/attention *//'; } # ms, printed
for a in executor fused flash; do
  plan "$a" ",\"prefill_attention\":\"$a\""
  "$bin" simulate "$tmp/$a.json" --json "$tmp/$a.out" > "$tmp/$a.txt" 2>&1 || { cat "$tmp/$a.txt"; exit 1; }
  grep -q "\"prefill_attention\": \"$a\"" "$tmp/$a.out" || { echo "$a: not recorded in the result"; exit 1; }
done
plan default ""
"$bin" simulate "$tmp/default.json" > "$tmp/default.txt" 2>&1 || { cat "$tmp/default.txt"; exit 1; }
[ "$(attn "$tmp/default.txt" prefill)" = "$(attn "$tmp/executor.txt" prefill)" ] || { echo "default is not executor"; exit 1; }
for a in fused flash; do
  awk -v x="$(attn "$tmp/executor.txt" prefill)" -v f="$(attn "$tmp/$a.txt" prefill)" -v n="$a" 'BEGIN {
    floor = 32 * 2 * 2 * 2048 * 2048 * 4096 / 2 / 989e12 * 1e3
    printf "prefill attention: executor %.3f ms, %s %.3f ms, floor %.3f ms\n", x, n, f, floor
    exit !(f >= floor && f < x) }'
  [ "$(attn "$tmp/$a.txt" 'decode')" = "$(attn "$tmp/executor.txt" 'decode')" ] || { echo "$a moved decode"; exit 1; }
done
# fused-fp8 (an FP8 context attention over an FP8 KV cache): the fused table's price over the calibration's
# attention_fp8 ratio, so faster than fused over the same FP8 cache and no faster than the causal FLOPs at the
# FP8 peak (1,979 TFLOP/s); decode as fused's; with a BF16 cache it is an error naming the file and the field
plan fusedkv ",\"kv_cache\":\"fp8\",\"prefill_attention\":\"fused\""
plan fp8 ",\"kv_cache\":\"fp8\",\"prefill_attention\":\"fused-fp8\""
for a in fusedkv fp8; do
  "$bin" simulate "$tmp/$a.json" --json "$tmp/$a.out" > "$tmp/$a.txt" 2>&1 || { cat "$tmp/$a.txt"; exit 1; }
done
grep -q '"prefill_attention": "fused-fp8"' "$tmp/fp8.out" || { echo "fused-fp8: not recorded in the result"; exit 1; }
awk -v f="$(attn "$tmp/fusedkv.txt" prefill)" -v g="$(attn "$tmp/fp8.txt" prefill)" 'BEGIN {
  floor = 32 * 2 * 2 * 2048 * 2048 * 4096 / 2 / 1979e12 * 1e3
  printf "prefill attention: fused %.3f ms, fused-fp8 %.3f ms, FP8 floor %.3f ms\n", f, g, floor
  exit !(g >= floor && g < f) }'
[ "$(attn "$tmp/fp8.txt" 'decode')" = "$(attn "$tmp/fusedkv.txt" 'decode')" ] || { echo "fused-fp8 moved decode"; exit 1; }
plan fp8bf16 ",\"prefill_attention\":\"fused-fp8\""
if "$bin" simulate "$tmp/fp8bf16.json" > "$tmp/fp8bf16.txt" 2>&1; then echo "fused-fp8 over BF16 accepted"; exit 1; else rc=$?; fi
[ $rc -eq 2 ] && grep -q "fp8bf16.json" "$tmp/fp8bf16.txt" && grep -q "prefill_attention" "$tmp/fp8bf16.txt" &&
  grep -q "kv_cache" "$tmp/fp8bf16.txt" || { echo "fused-fp8 over BF16: exit $rc"; cat "$tmp/fp8bf16.txt"; exit 1; }
plan bad ",\"prefill_attention\":\"unfused\""
if "$bin" simulate "$tmp/bad.json" > "$tmp/bad.txt" 2>&1; then echo "unfused accepted"; exit 1; else rc=$?; fi
[ $rc -eq 2 ] && grep -q "bad.json" "$tmp/bad.txt" && grep -q "prefill_attention" "$tmp/bad.txt" ||
  { echo "unfused: exit $rc"; cat "$tmp/bad.txt"; exit 1; }
echo "infer_prefill_attention: ok"

#!/bin/sh
# The inference plan field "decode_attention" (plan_infer.h; sim/INFERENCE.md, "Decode attention read per query head"):
# per-query-head prices a GQA model's decode attention as a kernel reading the KV cache once per query head. Llama-2 70B
# (64 query heads, 8 KV heads) on one H200 in FP8, batch 64, prompt 128, generate 64: the plan without the field is
# per-kv-head; per-query-head leaves the prefill alone and makes decode attention slower, by at most 8 times (the
# group: 8 times the bytes, on the ".g1" table, whose larger reads over more (sequence, head) pairs run at a higher rate
# than the ".g8" table's at a batch this small; the exact price is tests/test_infer.c's); the text names it and the result records it, and the result loads where results are read (tacosim
# compare), a bad value of it there refused; an MHA model (Llama-2 7B) gets the same prediction either way; a bad value
# and an MLA model are errors naming the file and the field (exit 2); tacosim search-infer --decode-attention gives it
# to every candidate, and each emitted plan keeps it and simulates to its row.
# usage: infer_decode_attention.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infer_decode_attention.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
m70="$src/experiments/published/torchtitan/models/llama2-70b.json"
m7="$src/experiments/published/dense-infer/models/llama2-7b.json"
plan() { # NAME MODEL EXTRA
  cat > "$tmp/$1.json" <<J
{"schema":1,"kind":"inference","name":"$1","model":"$2","cluster":"h200x8-nvswitch","layout":{"tp":1,"pp":1},
 "batch":{"size":64,"prompt":128,"generate":64},"quantization":"fp8","kv_cache":"fp8","prefill_attention":"flash"$3}
J
}
sim() { "$bin" simulate "$tmp/$1.json" --json "$tmp/$1.out" > "$tmp/$1.txt" 2> "$tmp/$1.err" || { cat "$tmp/$1.err"; exit 1; }; }
plan default "$m70" ""
plan kv "$m70" ',"decode_attention":"per-kv-head"'
plan q "$m70" ',"decode_attention":"per-query-head"'
plan mha-kv "$m7" ""
plan mha-q "$m7" ',"decode_attention":"per-query-head"'
for p in default kv q mha-kv mha-q; do sim "$p"; done
grep -q "^decode attention: per-query-head" "$tmp/q.txt" || { echo "FAIL: per-query-head not printed"; exit 1; }
if grep -q "^decode attention:" "$tmp/kv.txt"; then echo "FAIL: the default printed"; exit 1; fi
python3 - "$tmp" <<'P'
import json, sys
d = sys.argv[1]
r = {n: json.load(open("%s/%s.out" % (d, n))) for n in ("default", "kv", "q", "mha-kv", "mha-q")}
assert r["default"]["decode_attention"] == r["kv"]["decode_attention"] == "per-kv-head", r["default"].get("decode_attention")
assert r["q"]["decode_attention"] == "per-query-head"
for k in ("ttft_s", "tpot_s", "total_s"):
    assert r["default"][k] == r["kv"][k], k
assert r["q"]["ttft_s"] == r["kv"]["ttft_s"], "per-query-head moved the prefill"
# a decode step's attention: tpot less everything else, which the field does not change
att = lambda n: float(open("%s/%s.txt" % (d, n)).read().split("decode (per token)")[1].split("attention")[1].split()[0].rstrip(","))
a_kv, a_q = att("kv"), att("q")
rest = lambda n: r[n]["tpot_s"] * 1e3 - att(n)
assert abs(rest("q") - rest("kv")) < 1e-3, (rest("q"), rest("kv"))
assert a_kv < a_q <= 8 * a_kv * 1.0001, (a_kv, a_q)
assert r["mha-q"]["tpot_s"] == r["mha-kv"]["tpot_s"] and r["mha-q"]["ttft_s"] == r["mha-kv"]["ttft_s"]
print("decode attention a step: per KV head %.3f ms, per query head %.3f ms (%.2fx)" % (a_kv, a_q, a_q / a_kv))
P
"$bin" compare "$tmp/q.out" "$tmp/q.out" > /dev/null || { echo "FAIL: the per-query-head result does not load"; exit 1; }
sed 's/"decode_attention": "per-query-head"/"decode_attention": "per-head"/' "$tmp/q.out" > "$tmp/badres.json"
rc=0; "$bin" compare "$tmp/badres.json" "$tmp/badres.json" > /dev/null 2> "$tmp/badres.err" || rc=$?
[ "$rc" = 2 ] && grep -q decode_attention "$tmp/badres.err" || { echo "FAIL: bad result field: rc $rc"; exit 1; }
refused() { # NAME: exit 2 naming the file and the field
  rc=0; "$bin" simulate "$tmp/$1.json" > "$tmp/$1.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] && grep -q "$1.json" "$tmp/$1.txt" && grep -q "decode_attention" "$tmp/$1.txt" ||
    { echo "FAIL: $1: exit $rc"; cat "$tmp/$1.txt"; exit 1; }
}
plan bad "$m70" ',"decode_attention":"per-head"'
refused bad
cat > "$tmp/mla.json" <<J
{"schema":1,"kind":"inference","name":"mla","model":"deepseek-v3","cluster":"h200x8-nvswitch","layout":{"tp":8,"pp":1},
 "batch":{"size":1,"prompt":128,"generate":8},"quantization":"fp8","kv_cache":"fp8","prefill_attention":"flash",
 "decode_attention":"per-query-head"}
J
refused mla
# search-infer: the field given to every candidate, kept by each emitted plan, which simulates to its row
"$bin" search-infer --model "$m70" --cluster h200x8-nvswitch --prompt 128 --generate 64 --batches 16,64 --tp 1,2 \
  --kv-cache fp8 --quantization fp8 --decode-attention per-query-head --top 100 --json "$tmp/s.json" \
  --emit-plans "$tmp/plans" > "$tmp/s.txt"
grep -q "decode attention per-query-head" "$tmp/s.txt" || { echo "FAIL: search header"; exit 1; }
for p in "$tmp"/plans/*.json; do
  grep -q '"decode_attention": "per-query-head"' "$p" || { echo "FAIL: $p lost the field"; exit 1; }
  "$bin" simulate "$p" --json "${p%.json}.out" > /dev/null 2>&1 || { echo "FAIL: simulate $p"; exit 1; }
done
python3 - "$tmp" <<'P'
import glob, json, os, sys
d = sys.argv[1]
s = json.load(open(d + "/s.json"))
assert s["decode_attention"] == "per-query-head" and s["rows"], s.get("decode_attention")
for r in s["rows"]:
    (out,) = [p for p in glob.glob(d + "/plans/*.out") if os.path.basename(p).startswith("%02d-" % r["rank"])]
    o = json.load(open(out))
    assert o["decode_attention"] == "per-query-head"
    assert abs(o["tpot_s"] - r["tpot_s"]) <= 1e-9 * r["tpot_s"], (o["tpot_s"], r["tpot_s"])
print("search-infer: %d rows, each emitted plan per-query-head and simulated to its row" % len(s["rows"]))
P
rc=0; "$bin" search-infer --model "$m70" --cluster h200x8-nvswitch --prompt 128 --generate 64 \
  --decode-attention per-head > /dev/null 2> "$tmp/sbad.err" || rc=$?
[ "$rc" = 2 ] && grep -q -- "--decode-attention" "$tmp/sbad.err" || { echo "FAIL: --decode-attention per-head: rc $rc"; exit 1; }
echo "infer_decode_attention: ok"

#!/bin/sh
# tacosim search-infer (sim/search_infer.c): Llama-3 8B on an 8 x H100 node, prompt 512, generate 64, batches
# 1, 8, 64 at TP 1, 2 (every KV cache and weight format): each candidate is counted once (predicted within the
# limits, refused by the plan rules, over a limit or not predictable); the rows are ranked by tokens/s per GPU;
# every emitted plan, simulated by tacosim simulate, gives the row's TTFT, TPOT and tokens/s; --tpot-max drops
# exactly the candidates above it; on an A100 (no FP8 tensor cores) no candidate has FP8 weights; on a B200 (FP4
# tensor cores) the default weights are bf16, fp8 and nvfp4, and nvfp4 candidates are ranked; bad options (nvfp4 on
# an H100 among them) are errors (exit 2); --ep searches an MoE model's attention-DP layouts, whose emitted plans
# simulate to their rows.
# usage: search_infer.sh TACOSIM
set -eu
bin=$1
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/search_infer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
args="--model llama3-8b --cluster h100x8-nvswitch --prompt 512 --generate 64 --batches 1,8,64 --tp 1,2"
"$bin" search-infer $args --top 100 --json "$tmp/all.json" --emit-plans "$tmp/plans" > "$tmp/all.txt"
for p in "$tmp"/plans/*.json; do
  "$bin" simulate "$p" --json "${p%.json}.out" > /dev/null 2>&1 || { echo "simulate $p failed"; exit 1; }
done
"$bin" search-infer $args --tpot-max 7 --json "$tmp/lim.json" > "$tmp/lim.txt"
# --headroom 62: 18 of the H100's 80 GiB for the plan's memory: BF16 weights (15.0 GiB), a BF16 cache of batch 64
# (4.5 GiB) and the runtime (1.1 GiB) do not fit
"$bin" search-infer $args --headroom 62 --json "$tmp/head.json" > /dev/null
"$bin" search-infer --model llama3-8b --cluster a100x8-nvswitch --prompt 512 --generate 64 --batches 1,8 --json "$tmp/a100.json" > /dev/null
"$bin" search-infer --model llama3-8b --cluster b200x8-nvswitch --prompt 512 --generate 64 --batches 1,64 --tp 1 --json "$tmp/b200.json" > /dev/null
python3 - "$tmp" <<'P'
import glob, json, os, sys
d = sys.argv[1]
a = json.load(open(d + "/all.json"))
c, rows = a["counts"], a["rows"]
assert c["candidates"] == 3 * 2 * 2 * 2 == len(rows) + c["refused"] + c["over_headroom"] + c["over_limits"] + c["failed"], c
g = [r["tokens_per_gpu_s"] for r in rows]
assert g == sorted(g, reverse=True), "not ranked by tokens/s per GPU"
for r in rows:
    assert abs(r["tokens_per_gpu_s"] * r["tp"] * r["pp"] - r["tokens_per_s"]) <= 1e-6 * r["tokens_per_s"], r
plans = sorted(glob.glob(d + "/plans/*.out"))
assert len(plans) == len(rows), (len(plans), len(rows))
for r in rows:
    (out,) = [p for p in plans if os.path.basename(p).startswith("%02d-" % r["rank"])]
    s = json.load(open(out))
    for k in ("ttft_s", "tpot_s", "tokens_per_s"):
        assert abs(s[k] - r[k]) <= 1e-9 * r[k], (out, k, s[k], r[k])
    assert s["quantization"] == r["quantization"]
lim = json.load(open(d + "/lim.json"))
over = [r for r in rows if r["tpot_s"] > 0.007]
assert over and lim["counts"]["over_limits"] == len(over) and all(r["tpot_s"] <= 0.007 for r in lim["rows"]), lim["counts"]
assert len(lim["rows"]) == len(rows) - len(over)
head = json.load(open(d + "/head.json"))
assert head["counts"]["over_headroom"] > 0 and all(r["memory_per_gpu_bytes"] <= 18 * 2**30 for r in head["rows"]), head["counts"]
assert len(head["rows"]) == len(rows) - head["counts"]["over_headroom"]
a100 = json.load(open(d + "/a100.json"))
assert a100["rows"] and all(r["quantization"] == "none" for r in a100["rows"]), "FP8 weights on an A100"
assert a100["counts"]["candidates"] == 2 * 4 * 2 * 1, a100["counts"]  # batches x tp 1..8 x kv x bf16 weights
b200 = json.load(open(d + "/b200.json"))
assert b200["counts"]["candidates"] == 2 * 1 * 2 * 3, b200["counts"]  # batches x tp x kv x none, fp8, nvfp4
assert {r["quantization"] for r in b200["rows"]} == {"none", "fp8", "nvfp4"}, b200["rows"]
print("search_infer: %d rows, %d refused, best %s at %.0f tok/s/GPU; all %d emitted plans simulate to the rows"
      % (len(rows), c["refused"], rows[0]["name"], rows[0]["tokens_per_gpu_s"], len(plans)))
P
bad() { # EXPECTED_TEXT ARGS...: exit 2 and the text on standard error
  want=$1; shift
  if "$bin" search-infer "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"; then echo "accepted: $*"; exit 1; else rc=$?; fi
  [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/bad.err" || { echo "exit $rc for $*:"; cat "$tmp/bad.err"; exit 1; }
}
bad "required" --model llama3-8b --cluster h100x8-nvswitch --prompt 512
bad "--kv-cache" $args --kv-cache int4
bad "--tpot-max" $args --tpot-max -3
bad "no model named" --model llama9 --cluster h100x8-nvswitch --prompt 512 --generate 64
bad "quantization" --model llama3-8b --cluster a100x8-nvswitch --prompt 512 --generate 64 --quantization fp8 --batches 1 --tp 1 --kv-cache bf16
bad "no candidate fits" $args --tpot-max 0.001
bad "fp4_tflops" $args --quantization nvfp4
bad "--ep" $args --ep -1
# --ep: an MoE model's layouts with attention data parallelism (ep 1, 2) beside TP (ep 0); each counted once, and
# every emitted plan, attention_dp ones included, simulates to its row
moe="--model qwen3-30b-a3b --cluster h100x8-nvswitch --prompt 256 --generate 16 --batches 8,32 --tp 2,4 --ep 0,1,2 --kv-cache fp8 --quantization none"
"$bin" search-infer $moe --top 100 --json "$tmp/moe.json" --emit-plans "$tmp/moe" > /dev/null
for p in "$tmp"/moe/*.json; do
  "$bin" simulate "$p" --json "${p%.json}.out" > /dev/null 2>&1 || { echo "simulate $p failed"; exit 1; }
done
python3 - "$tmp" <<'P'
import glob, json, os, sys
d = sys.argv[1]
a = json.load(open(d + "/moe.json"))
c, rows = a["counts"], a["rows"]
assert c["candidates"] == 2 * 2 * 3 == len(rows) + c["refused"] + c["over_headroom"] + c["over_limits"] + c["failed"], c
adp = [r for r in rows if r["attention_dp"]]
assert adp and {r["ep"] for r in adp} == {1, 2} and all(r["ep"] == 1 for r in rows if not r["attention_dp"]), rows
for r in rows:
    (out,) = [p for p in glob.glob(d + "/moe/*.out") if os.path.basename(p).startswith("%02d-" % r["rank"])]
    s = json.load(open(out))
    for k in ("ttft_s", "tpot_s", "tokens_per_s"):
        assert abs(s[k] - r[k]) <= 1e-9 * r[k], (out, k, s[k], r[k])
print("search_infer --ep: %d rows, %d with attention_dp; all emitted plans simulate to the rows" % (len(rows), len(adp)))
P
echo "search_infer.sh: passed"

#!/bin/sh
# tacosim search-infer --inflight (sim/search_infer.c): Llama-3 8B on an 8 x H100 node, prompt 1,000, generate 1,000,
# FP8 weights and cache, TP 1 and 2, max_batch = the engine's heuristic (0) and 64, 256, 1,024, 4,096: a max_batch
# that the KV-cache fit (or the heuristic) resolves to another candidate's is predicted once and counted; every
# other candidate is counted once; the rows are ranked by the steady state's tokens/s per GPU; every emitted plan
# is an in-flight plan that tacosim simulate predicts to the row's TTFT, TPOT and tokens/s; the rows' batches are
# at most the KV-cache fit, and a capped row's batch is its cap; --tpot-max drops exactly the candidates above it;
# --cuda-graph-max-batch 0 goes into every emitted plan, whose simulation then counts no graph pool before the KV
# cache; 0 without --inflight, --kv-cache-fraction and --cuda-graph-max-batch without it, and a bad graph batch are
# errors (exit 2).
# usage: search_infer_inflight.sh TACOSIM
set -eu
bin=$1
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/search_infer_inflight.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
args="--model llama3-8b --cluster h100x8-nvswitch --prompt 1000 --generate 1000 --tp 1,2 --kv-cache fp8 --quantization fp8 --inflight --batches 0,64,256,1024,4096"
"$bin" search-infer $args --top 100 --json "$tmp/all.json" --emit-plans "$tmp/plans" > "$tmp/all.txt"
for p in "$tmp"/plans/*.json; do
  "$bin" simulate "$p" --json "${p%.json}.out" > /dev/null 2>&1 || { echo "simulate $p failed"; exit 1; }
done
"$bin" search-infer $args --tpot-max 30 --json "$tmp/lim.json" > /dev/null
python3 - "$tmp" <<'P'
import glob, json, os, sys
d = sys.argv[1]
a = json.load(open(d + "/all.json"))
c, rows = a["counts"], a["rows"]
assert a["mode"] == "inflight", a["mode"]
assert c["candidates"] + c["duplicates"] == 2 * 5, c
assert c["candidates"] == len(rows) + c["refused"] + c["over_headroom"] + c["over_limits"] + c["failed"], c
assert c["duplicates"] > 0, "4,096 sequences of 2,000 tokens do not fit an H100: that cap must resolve to another's"
g = [r["tokens_per_gpu_s"] for r in rows]
assert g == sorted(g, reverse=True), "not ranked by tokens/s per GPU"
keys = [(r["tp"], r["batch"]) for r in rows]
assert len(keys) == len(set(keys)), "a resolved max_batch predicted twice"
plans = sorted(glob.glob(d + "/plans/*.out"))
assert len(plans) == len(rows), (len(plans), len(rows))
for r in rows:
    (out,) = [p for p in plans if os.path.basename(p).startswith("%02d-" % r["rank"])]
    s = json.load(open(out))
    assert s.get("mode") == "inflight", (out, s.get("mode"))
    for k in ("ttft_s", "tpot_s", "tokens_per_s"):
        assert abs(s[k] - r[k]) <= 1e-9 * r[k], (out, k, s[k], r[k])
    fit = s["inflight"]["kv_fit_batch"]
    assert r["batch"] <= fit and r["in_flight"] <= r["batch"] + 1e-9, (r, fit)
    cap = r["name"].split("-ifb")[1].split("-")[0]
    if cap not in ("", "auto") and int(cap) <= fit:
        assert r["batch"] == int(cap), (r["name"], r["batch"])
lim = json.load(open(d + "/lim.json"))
over = [r for r in rows if r["tpot_s"] > 0.030]
assert over and lim["counts"]["over_limits"] == len(over) and all(r["tpot_s"] <= 0.030 for r in lim["rows"]), lim["counts"]
assert len(lim["rows"]) == len(rows) - len(over)
print("search_infer_inflight: %d rows, %d duplicates, best %s (max_batch %d) at %.0f tok/s/GPU; all %d emitted plans "
      "simulate to the rows" % (len(rows), c["duplicates"], rows[0]["name"], rows[0]["batch"], rows[0]["tokens_per_gpu_s"],
                                len(plans)))
P
"$bin" search-infer --model llama3-8b --cluster h100x8-nvswitch --prompt 1000 --generate 1000 --tp 1 --kv-cache fp8 \
  --quantization fp8 --inflight --batches 0 --cuda-graph-max-batch 0 --emit-plans "$tmp/nog" > /dev/null
set -- "$tmp"/nog/*.json
[ $# -eq 1 ] && [ -f "$1" ] || { echo "--cuda-graph-max-batch 0: want one emitted plan"; exit 1; }
"$bin" simulate "$1" --json "$tmp/nog.out" > /dev/null 2>&1 || { echo "simulate $1 failed"; exit 1; }
python3 - "$1" "$tmp/nog.out" <<'P'
import json, sys
p, r = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert p["inflight"]["cuda_graph_max_batch"] == 0, p["inflight"]
m = r["inflight"]["engine_memory"]
assert m["cuda_graph_max_batch"] == 0 and m["cuda_graph_batch"] == 0 and m["cuda_graph_bytes"] == 0, m
assert m["profile_peak_bytes"] > 0 and m["profile_tokens"] == r["inflight"]["max_num_tokens"], m
P
bad() { # EXPECTED_TEXT ARGS...: exit 2 and the text on standard error
  want=$1; shift
  if "$bin" search-infer "$@" > "$tmp/bad.out" 2> "$tmp/bad.err"; then echo "accepted: $*"; exit 1; else rc=$?; fi
  [ $rc -eq 2 ] && grep -q -- "$want" "$tmp/bad.err" || { echo "exit $rc for $*:"; cat "$tmp/bad.err"; exit 1; }
}
static="--model llama3-8b --cluster h100x8-nvswitch --prompt 1000 --generate 1000 --tp 1"
bad "only with --inflight" $static --batches 0,8
bad "goes with --inflight" $static --batches 8 --kv-cache-fraction 0.95
bad "kv-cache-fraction" $static --inflight --kv-cache-fraction 1.5
bad "goes with --inflight" $static --batches 8 --cuda-graph-max-batch 64
bad "cuda-graph-max-batch" $static --inflight --cuda-graph-max-batch -1
bad "cuda-graph-max-batch" $static --inflight --cuda-graph-max-batch 12x
echo "search_infer_inflight.sh: passed"

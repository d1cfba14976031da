#!/bin/sh
# The result files that `tacosim simulate --json` writes for an in-flight plan (one with attention DP and EP too) and
# for an MLA model's plan load
# where every result is read (`tacosim compare`, schema/result.c, which refuses unknown fields), and a field
# changed to what the writer never writes is refused with exit 2 naming it.
# usage: infer_result_load.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/infer_result_load.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$bin" simulate "$src/experiments/published/inflight-infer/plans/trt10-8b-h100-tp1-i128-o2048.json" \
  --json "$tmp/inflight.json" > /dev/null 2>&1
"$bin" simulate "$src/experiments/published/mla-infer/plans/kernel-fm19-h16.json" --json "$tmp/mla.json" > /dev/null 2>&1
"$bin" simulate "$src/experiments/published/inflight-infer/plans/trt10-qwen3-235b-h200-tp8-i1000-o2000.json" \
  --json "$tmp/adp.json" > /dev/null 2>&1
for f in inflight mla adp; do
  "$bin" compare "$tmp/$f.json" "$tmp/$f.json" > "$tmp/$f.out" || { echo "FAIL: compare of the $f result"; exit 1; }
  grep -q "^tpot " "$tmp/$f.out" || { echo "FAIL: no tpot row for the $f result"; exit 1; }
done
sed 's/"chunked_prefill": false/"chunked_prefill": 3/' "$tmp/inflight.json" > "$tmp/bad1.json"
sed 's/"kv_cache": "latent"/"kv_cache": "heads"/' "$tmp/mla.json" > "$tmp/bad2.json"
sed 's/"attention_dp": true/"attention_dp": 8/' "$tmp/adp.json" > "$tmp/bad3.json"
for b in bad1:inflight.chunked_prefill bad2:mla.kv_cache bad3:layout.attention_dp; do
  f=${b%%:*} field=${b#*:}
  rc=0
  "$bin" compare "$tmp/$f.json" "$tmp/$f.json" > /dev/null 2> "$tmp/$f.err" || rc=$?
  [ "$rc" = 2 ] && grep -q "$field" "$tmp/$f.err" || { echo "FAIL: $f: rc $rc, $(cat "$tmp/$f.err")"; exit 1; }
done
echo "ok: in-flight (attention DP too) and MLA results load; bad fields refused"

#!/usr/bin/env bash
# run_gpu.sh — decode attention v5 (over the FP8 cache: the cached positions as the mma's rows,
# runtime/ops/infer_decode.h) on one H100 or H200, from the repository root, building nothing
# (BIN: a tacorun built on the CPU machine, its libraries in LIB):
#  1. `tacorun execute --infer-check` (v5 over both caches against the C reference, with the rest)
#     and `tacorun bench-decode --check` (v5 over BF16: v3's bits); 1b. `calibrate-infer --small-only` (small.tsv.gz:
#     the decode step's small kernels, the QKV bias pass among them, for calibration/merge_small.py);
#  2. bench-decode timing v3fp8 / v4fp8 / v5fp8 side by side (Llama-3 8B and Qwen2.5 14B layouts);
#  3. `tacorun calibrate-infer CAL --decode-attention-only --decode-attention v5` (the GPU's decode
#     attention tables with v5: BF16 = v4's kernel, FP8 = v5's), for merge_decode_attn.py --tables-from;
#  4. the 26 inference validation plans with `--decode-graph --decode-attention v5` (experiments/infer/v3/plans
#     on an H200, experiments/validation/h100/infer-plans on an H100).
#  5. `calibrate-infer CAL --decode-attention-only --per-query-head` (the per-query-head tables), time left;
#  (on an H100 whose v5 tables are in calibration/h100/run-20261206-v5: steps 1 and 1b, and two plans
#   executed for the executor's decode floor line, floor/)
#  6. on an H200, `calibrate-infer CAL --decode-gemms-only` with the time left (the shapes its file lacks).
# Outputs in OUT: gpu.txt, summary.txt, check.tgz, bench.txt, cal.tgz, infer.tgz, pqh.tgz (gemm.tgz).
set -u
OUT=${OUT:-/tmp/v5}
. scripts/gpu_env.sh
export NCCL_NVLS_ENABLE=0
mkdir -p "$OUT/c"
case "$(head -1 "$OUT/gpu.txt")" in
  *H200*) CAL=calibration/h200-nvlink.json PLANS=experiments/infer/v3/plans PEAK=4800 ;;
  *H100*) CAL=calibration/h100-sxm-nvlink.json PLANS=experiments/validation/h100/infer-plans PEAK=3350 ;;
  *) say "not an H100 or H200: $(head -1 "$OUT/gpu.txt")"; exit 0 ;;
esac
timeout 60 "$BIN" execute --infer-check > "$OUT/c/infer-check.txt" 2>&1
say "infer-check rc=$? ($(el) s): $(tail -1 "$OUT/c/infer-check.txt")"
grep -E "v5|FAIL" "$OUT/c/infer-check.txt" | head -20
say "per-query-head checks: $(grep -c "^ok .*per query head" "$OUT/c/infer-check.txt") ok of $(grep -c "per query head" "$OUT/c/infer-check.txt")"
timeout 60 "$BIN" bench-decode --check > "$OUT/c/bench-check.txt" 2>&1
say "bench-decode --check rc=$? ($(el) s): $(grep -c ' ok$' "$OUT/c/bench-check.txt") ok, $(grep -c FAILED "$OUT/c/bench-check.txt") failed"
tar -czf "$OUT/check.tgz" -C "$OUT" c && rm -rf "$OUT/c"
# 1b. the small kernels of a decode step (their tables, the QKV bias pass at decode sizes among them: merge_small.py)
mkdir -p "$OUT/c"
timeout 60 "$BIN" calibrate-infer "$CAL" --out-dir "$OUT/c" --models models --small-only > "$OUT/small.tsv" 2> "$OUT/small.err"
say "calibrate-infer --small-only rc=$? ($(el) s): $(grep -c '^small' "$OUT/small.tsv") points, $(grep -c 'bias_fwd' "$OUT/small.tsv") of the bias"
rm -rf "$OUT/c"
gzip -9 "$OUT/small.tsv"
if [ "$PEAK" = 3350 ] && [ -e calibration/h100/run-20261206-v5/decode-attention-v5.json.gz ]; then
  say "an H100: its v5 tables, plans and per-query-head tables ran on 2026-12-06 (calibration/h100/run-20261206-v5); checks, small kernels and two plans (the executor's floor line)"
  mkdir -p "$OUT/floor"
  timeout 90 "$BIN" execute $PLANS/llama3-8b-tp1-b1-p4096-g64-bf16.json $PLANS/llama3-8b-tp1-b64-p2048-g64-fp8.json \
    --decode-graph --decode-attention v5 --json-dir "$OUT/floor" > "$OUT/floor/execute.txt" 2>&1
  say "floor plans rc=$? ($(el) s)"
  grep -E "decode floor" "$OUT/floor/execute.txt" | tee -a "$OUT/summary.txt"
  exit 0
fi
for m in llama3-8b qwen2.5-14b; do
  timeout 90 "$BIN" bench-decode --model $m --attention-only --attention v3fp8,v4fp8,v5fp8 --batches 1,8,32,64,128 \
    --kv 1024,4096,8192 --peak-gbps $PEAK >> "$OUT/bench.txt" 2>&1
  say "bench $m rc=$? ($(el) s)"
done
grep -E "v5fp8/v3fp8" "$OUT/bench.txt" | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {print "v5fp8/v3fp8 over", NR, "points: min", a[1], "median", a[int((NR+1)/2)], "max", a[NR]}' | tee -a "$OUT/summary.txt"
mkdir -p "$OUT/cal"
timeout 120 "$BIN" calibrate-infer "$CAL" --out-dir "$OUT/cal" --models models --decode-attention-only --decode-attention v5 > "$OUT/cal/cal-v5.log" 2>&1
say "calibrate-infer v5 rc=$? ($(el) s)"
tar -czf "$OUT/cal.tgz" -C "$OUT" cal && rm -rf "$OUT/cal"
I=$OUT/infer
infer_plans "$I" $PLANS --decode-attention v5
tar -czf "$OUT/infer.tgz" -C "$OUT" infer && rm -rf "$I"
# 5. the per-query-head decode attention tables (sim/INFERENCE.md, "A measured per-query-head table"; its check
#    ran in step 1), for merge_decode_attn.py --tables-from ... --per-query-head
R=$((330 - $(el)))
if [ $R -gt 30 ]; then
  mkdir -p "$OUT/pqh"
  timeout $R "$BIN" calibrate-infer "$CAL" --out-dir "$OUT/pqh" --models models --decode-attention-only --per-query-head > "$OUT/pqh/pqh.log" 2>&1
  say "calibrate-infer --per-query-head rc=$? ($(el) s, limit $R s)"
  tar -czf "$OUT/pqh.tgz" -C "$OUT" pqh && rm -rf "$OUT/pqh"
fi
# 6. (H200) the decode GEMMs the H200 files lack (the MoE models' shapes; shapes a file has are kept)
R=$((360 - $(el)))
if [ "$PEAK" = 4800 ] && [ $R -gt 30 ]; then
  mkdir -p "$OUT/gemm"
  timeout $R "$BIN" calibrate-infer "$CAL" --out-dir "$OUT/gemm" --models models --decode-gemms-only > "$OUT/gemm/gemm.log" 2>&1
  say "calibrate-infer --decode-gemms-only rc=$? ($(el) s, limit $R s)"
  tar -czf "$OUT/gemm.tgz" -C "$OUT" gemm && rm -rf "$OUT/gemm"
fi
say "done in $(el) s"

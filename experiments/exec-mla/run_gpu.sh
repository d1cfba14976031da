#!/usr/bin/env bash
# run_gpu.sh — DeepSeek-V3's layers in the training executor on one H100 or H200, from the repository root, building
# nothing (BIN: tacorun; TESTS: the folder holding test_rt_ops_gpu and test_moe_route_group_gpu; their libraries in LIB):
#  1. test_rt_ops_gpu (the MLA kernels among every layer kernel, against their plain-C references) and
#     test_moe_route_group_gpu (the sigmoid, group-limited top-k, its backward and the bias update, bit for bit);
#  2. `tacorun execute --check-mla` (three MLA models against float64) and `--check-moe` (DeepSeek-V3's router among
#     the MoE checks);
#  3. the mla-tiny plan of this GPU timed with its per-op profile (predicted/: made before the run);
#  4. with the time left (LIMIT_S, default 150 s), `tacorun calibrate --only attention` into OUT/attn/ (the attention
#     tables timed again, to set against the shipped file's of the same GPU).
# Outputs: OUT/mla.tgz.
set -u
BIN=${BIN:-.devbin/v5/tacorun}
TESTS=${TESTS:-.devbin/v5}
LIB=${LIB:-.devbin/h100/lib}
OUT=${OUT:-/tmp/mla}
O=$OUT/mla
export LD_LIBRARY_PATH=$PWD/$LIB:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s)
el() { echo $(($(date +%s) - S)); }
mkdir -p "$O/measured"
nvidia-smi --query-gpu=name,driver_version,power.limit --format=csv,noheader > "$O/gpu.txt" 2>&1
case "$(head -1 "$O/gpu.txt")" in
  *H100*) PLAN=experiments/exec-mla/mla-tiny-1gpu-h100.json ;;
  *) PLAN=experiments/plans/mla-tiny-1gpu.json ;;
esac
timeout 60 "$TESTS/test_rt_ops_gpu" > "$O/rt_ops.txt" 2>&1
echo "rt_ops rc=$? ($(el) s): $(grep -c 'mla' "$O/rt_ops.txt") mla lines, $(grep -ciE 'fail' "$O/rt_ops.txt") failing; $(tail -1 "$O/rt_ops.txt")"
grep -iE "mla|fail" "$O/rt_ops.txt" | head -12
timeout 60 "$TESTS/test_moe_route_group_gpu" > "$O/route.txt" 2>&1
echo "route_group rc=$? ($(el) s)"; tail -12 "$O/route.txt"
timeout 150 "$BIN" execute --check-mla > "$O/check-mla.txt" 2>&1
echo "execute --check-mla rc=$? ($(el) s): $(tail -1 "$O/check-mla.txt")"
grep -iE "passed|fail|loss|steps" "$O/check-mla.txt" | head -16
timeout 150 "$BIN" execute --check-moe > "$O/check-moe.txt" 2>&1
echo "execute --check-moe rc=$? ($(el) s): $(tail -1 "$O/check-moe.txt")"
grep -iE "deepseek|sigmoid|bias|fail" "$O/check-moe.txt" | head -12
p=$(basename "$PLAN" .json)
timeout 120 "$BIN" execute "$PLAN" --json "$O/measured/$p.json" --ops-csv "$O/measured/$p-ops.csv" > "$O/execute-$p.txt" 2>&1
echo "execute $p rc=$? ($(el) s): $(grep -m1 'iteration time' "$O/execute-$p.txt")"
grep -E "memory rank|GPU memory" "$O/execute-$p.txt" | head -2
R=$((${1:-150} - $(el)))
if [ "$R" -gt 30 ]; then
  mkdir -p "$O/attn"
  timeout "$R" "$BIN" calibrate --only attention --out "$O/attn/attention.json" --attn-tsv "$O/attn/attention.tsv" > "$O/attn/log.txt" 2>&1
  echo "calibrate --only attention rc=$? ($(el) s, limit $R s)"; tail -2 "$O/attn/log.txt"
fi
tar -czf "$OUT/mla.tgz" -C "$OUT" mla && rm -rf "$O"

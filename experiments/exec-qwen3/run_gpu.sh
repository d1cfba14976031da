#!/usr/bin/env bash
# run_gpu.sh — Qwen3's attention in the training executor (wide heads, the QK norm) on one H100 or H200, from the
# repository root, building nothing (BIN: tacorun, TEST: tests/test_rt_ops_gpu, both built on the CPU machine;
# their libraries in LIB):
#  1. test_rt_ops_gpu: every layer kernel against its plain-C reference, rt_qk_norm_fwd / _bwd at head_dim 64, 128, 256;
#  2. `tacorun execute --check` (the dense Qwen3-like configuration among the one-GPU checks against float64) and
#     `--check-moe` (the MoE one);
#  3. the plans of plans/ for this GPU, timed (predicted/ holds `tacosim simulate` of each, made before the run);
#  4. the inference executor (2026-12-07): `execute --infer-check` (the QK norm + RoPE against the plain-C reference,
#     a Qwen3-like model's consistency checks), then the Qwen3 8B inference plan with --decode-graph (predicted on the
#     H200: predicted/qwen3-8b-infer-b16-p1024-g64-graph.json; on an H100 the run is not the predicted machine);
#  5. on an H100, the plans qwen3-8b-infer-*-h100.json (batch 1-64, prompts 1,024-8,192, BF16 and FP8 caches) with
#     --decode-graph, predicted with the H100's file before the run (predicted/*-h100-graph.json; the b16 x 1,024 one
#     after its first run, with the model unchanged).
# `run_gpu.sh --timed-only` skips steps 1, 2 and 4's checks (when they passed on this GPU kind already).
# Outputs in OUT/qwen3.tgz (the folder qwen3/): gpu.txt, rt_ops.txt, check.txt, check-moe.txt, execute-*.txt, infer-check.txt, measured/.
set -u
BIN=${BIN:-.devbin/v5/tacorun}
TEST=${TEST:-.devbin/v5/test_rt_ops_gpu}
LIB=${LIB:-.devbin/h100/lib}
O=${OUT:-/tmp/qwen3}/qwen3
export LD_LIBRARY_PATH=$PWD/$LIB:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s)
el() { echo $(($(date +%s) - S)); }
mkdir -p "$O/measured"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$O/gpu.txt" 2>&1
case "$(head -1 "$O/gpu.txt")" in
  *H100*) SUF=-h100 ;;
  *) SUF= ;;
esac
CHECKS=1
[ "${1:-}" = --timed-only ] && CHECKS=0   # the checks passed on this GPU kind already: the timed plans alone
if [ $CHECKS = 1 ]; then
timeout 60 "$TEST" > "$O/rt_ops.txt" 2>&1
echo "rt_ops rc=$? ($(el) s): $(grep -ciE 'qk_norm' "$O/rt_ops.txt") qk_norm lines; $(tail -1 "$O/rt_ops.txt")"
grep -iE "qk_norm|fail" "$O/rt_ops.txt" | head -8
timeout 150 "$BIN" execute --check > "$O/check.txt" 2>&1
echo "execute --check rc=$? ($(el) s): $(tail -1 "$O/check.txt")"
grep -iE "qwen|fail" "$O/check.txt" | head -12
timeout 120 "$BIN" execute --check-moe > "$O/check-moe.txt" 2>&1
echo "execute --check-moe rc=$? ($(el) s): $(tail -1 "$O/check-moe.txt")"
grep -iE "qwen|head_dim|fail" "$O/check-moe.txt" | head -8
fi
for p in qwen3-tiny-1gpu qwen3-30b-a3b-l2-1gpu; do
  timeout 120 "$BIN" execute experiments/exec-qwen3/plans/$p$SUF.json --json "$O/measured/$p$SUF.json" > "$O/execute-$p$SUF.txt" 2>&1
  echo "execute $p$SUF rc=$? ($(el) s): $(grep -m1 -iE 'iteration' "$O/execute-$p$SUF.txt")"
done
if [ $CHECKS = 1 ]; then
timeout 60 "$BIN" execute --infer-check > "$O/infer-check.txt" 2>&1
echo "execute --infer-check rc=$? ($(el) s): $(tail -1 "$O/infer-check.txt")"
grep -iE "qwen3|QK norm|fail" "$O/infer-check.txt" | head -12
fi
p=qwen3-8b-infer-b16-p1024-g64
timeout 120 "$BIN" execute experiments/exec-qwen3/plans/$p.json --decode-graph --json-dir "$O/measured" > "$O/execute-$p.txt" 2>&1
echo "execute $p rc=$? ($(el) s): $(grep -m2 -iE 'ttft|decode graph' "$O/execute-$p.txt" | tr '\n' ' ')"
# on an H100, Qwen3 8B at batch 1-64, prompts 1,024-8,192, BF16 and FP8 caches (predicted before the run, 2026-12-07)
if [ -n "$SUF" ]; then
  for f in experiments/exec-qwen3/plans/qwen3-8b-infer-*-h100.json; do
    p=$(basename "$f" .json)
    timeout 120 "$BIN" execute "$f" --decode-graph --json-dir "$O/measured" > "$O/execute-$p.txt" 2>&1
    echo "execute $p rc=$? ($(el) s): $(grep -m1 -E '^ttft' "$O/execute-$p.txt")"
    grep -m1 -E '^decode graph' "$O/execute-$p.txt"
  done
fi
# at most a few files come back from a GPU machine: one archive
tar -czf "${OUT:-/tmp/qwen3}/qwen3.tgz" -C "${OUT:-/tmp/qwen3}" qwen3 && rm -rf "$O"

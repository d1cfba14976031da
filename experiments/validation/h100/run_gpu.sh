#!/usr/bin/env bash
# run_gpu.sh — on one H100, from the repository root, building nothing (BIN: a tacorun built on the CPU
# machine, its libraries in LIB): the 10 training plans (plans/) through experiments/validation/zoo/run_gpu.sh
# (8 timed iterations after 3, no --check), then the 26 inference plans (infer-plans/) with
# `tacorun execute --decode-graph` as experiments/infer/v3 ran them. Outputs in OUT: machine.txt,
# summary.txt, timing.txt, measured.tgz (training), infer.tgz (execute-*.txt and the result files).
set -u
BIN=${BIN:-.devbin/h100/tacorun}
LIB=${LIB:-.devbin/h100/lib}
OUT=${OUT:-/tmp/h100-val}
V=experiments/validation/h100
export LD_LIBRARY_PATH=$PWD/$LIB:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies NCCL_NVLS_ENABLE=0
S=$(date +%s)
BIN=$BIN OUT=$OUT SKIP_CHECK=1 PLANS_DIR=$V/plans INFER_DIR=/nonexistent experiments/validation/zoo/run_gpu.sh
I=$OUT/infer
mkdir -p "$I/measured"
run() { # run TAG LIMIT PLANS...
  local tag=$1 t=$2
  shift 2
  timeout "$t" "$BIN" execute "$@" --decode-graph --json-dir "$I/measured" >"$I/execute-$tag.txt" 2>&1
  echo "infer $tag rc=$? ($(($(date +%s) - S)) s)" | tee -a "$OUT/summary.txt"
}
run qwen7b 45 $V/infer-plans/qwen2.5-7b-*.json
run qwen14b 60 $V/infer-plans/qwen2.5-14b-*.json
run llama-bf16 70 $V/infer-plans/llama3-8b-*-bf16.json
run llama-fp8 70 $V/infer-plans/llama3-8b-*-fp8.json
tar -czf "$OUT/infer.tgz" -C "$OUT" infer && rm -rf "$I"
echo "done in $(($(date +%s) - S)) s" | tee -a "$OUT/summary.txt"

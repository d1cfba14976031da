#!/bin/bash
# One H200, from the repository root (binaries under .devbin/$BIN): the 26 plans of
# experiments/infer/v3 timed by tacorun execute --decode-graph (as ../run_gpu.sh did with the
# one-pass sampling), with today's executor; predictions committed before: predicted/.
set -u
R=$PWD/.devbin/${BIN:-s1}; O=${OUT:-/tmp/sample-exec}; mkdir -p $O/measured
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s); el() { echo $(( $(date +%s) - S )); }
P=experiments/infer/v3/plans
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $O/gpu.txt 2>&1; date -u >> $O/gpu.txt
run() { tag=$1; t=$2; shift 2; timeout $t stdbuf -oL $R/tacorun execute "$@" --decode-graph --json-dir $O/measured > $O/execute-$tag.txt 2>&1; echo "$tag rc=$? $(el) s"; }
run qwen7b 60 $P/qwen2.5-7b-*.json
run qwen14b 80 $P/qwen2.5-14b-*.json
run llama-bf16 90 $P/llama3-8b-*-bf16.json
run llama-fp8 90 $P/llama3-8b-*-fp8.json
grep -hE "^# (llama|qwen)[^:]*:|^ttft|^decode graph|rror" $O/execute-*.txt | sed 's/ (min[^)]*)//g; s/(one graph launch a step; [^)]*)//; s/: llama.*//; s/: qwen.*//' | cut -c1-160
cd $O && tar czf measured.tgz measured && rm -rf measured
echo "total $(el) s"

#!/bin/bash
# one call: infer-check (the Qwen-style additions), the 26 plans of experiments/infer/v3 timed by
# tacorun execute --decode-graph (as experiments/infer/fp8's run B), then calibrate-infer if time is left
B=.devbin/infer3
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/$B/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies NCCL_NVLS_ENABLE=0
S=$(date +%s); LIMIT=${LIMIT:-135}
el() { echo $(( $(date +%s) - S )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $OUT/gpu.txt 2>&1; date -u >> $OUT/gpu.txt
timeout 20 stdbuf -oL $B/tacorun execute --infer-check > $OUT/infer-check.txt 2>&1; echo "infer-check rc=$? $(el) s"
run() { tag=$1; t=$2; shift 2; mkdir -p $OUT/measured; timeout $t stdbuf -oL $B/tacorun execute "$@" --decode-graph --json-dir $OUT/measured > $OUT/execute-$tag.txt 2>&1; echo "$tag rc=$? $(el) s"; }
run qwen7b 25 $B/plans/qwen2.5-7b-*.json
run qwen14b 35 $B/plans/qwen2.5-14b-*.json
run llama-bf16 45 $B/plans/llama3-8b-*-bf16.json
run llama-fp8 45 $B/plans/llama3-8b-*-fp8.json
echo "== checks"; grep -E "FAIL|qwen2-style|infer-check:" $OUT/infer-check.txt | head -20
echo "== execute"; grep -hE "^# (llama|qwen)[^:]*:|^ttft|^decode graph|rror" $OUT/execute-*.txt | sed 's/ (min[^)]*)//g; s/(one graph launch a step; [^)]*)//; s/: llama.*//; s/: qwen.*//' | cut -c1-200
R=$(( LIMIT - $(el) ))
if [ $R -gt 45 ]; then
  mkdir -p $OUT/cal; cp $B/h200-nvlink.json $OUT/cal/in.json
  timeout $R $B/tacorun calibrate-infer $OUT/cal/in.json --out-dir $OUT/cal/out --models $B/models --quick > $OUT/calibrate-infer.txt 2>&1; echo "calibrate-infer rc=$? $(el) s (limit $R s)"
  tail -3 $OUT/calibrate-infer.txt
else echo "calibrate-infer not run: $R s left"; fi
echo "total $(el) s"

#!/bin/bash
# One GPU call (issue 24, after experiments/infer/v3's run): tacorun calibrate-infer on a copy of the
# shipped h200-nvlink.json with a zoo of the three validated models only, so the decode GEMM
# shapes of Llama-3 8B (control), Qwen2.5 7B and 14B (TP 1/2/4/8, m = 1..64) are re-timed (the
# file's "gemm_infer" points are not in its training "gemm" list, so they are timed again), and
# prefill attention is timed in the 26 plans' head layouts (TP 1: 32/8, 28/4, 40/8 heads of 128)
# at batch 1..64 x prompt 128..8,192 (and 8,128), batch x prompt <= 131,072 tokens.
# Binaries, libraries, models and the calibration copy under the device copy's .devbin/infer4.
B=.devbin/infer4
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
S=$(date +%s)
mkdir -p $OUT/r/in $OUT/r/out
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; date -u; } > $OUT/r/gpu.txt 2>&1
cp $B/h200-nvlink.json $OUT/r/in/h200-nvlink.json
timeout 110 $B/tacorun calibrate-infer $OUT/r/in/h200-nvlink.json --out-dir $OUT/r/out --models $B/models \
  --prefill-layouts llama3-8b:1,qwen2.5-7b:1,qwen2.5-14b:1 --prefill-prompts 128,256,512,1024,2048,4096,8128,8192 \
  --prefill-max-tokens 131072 > $OUT/r/calibrate-infer.txt 2>&1
echo "calibrate-infer rc=$? $(( $(date +%s) - S )) s" | tee -a $OUT/r/gpu.txt
rm -f $OUT/r/in/h200-nvlink.json
grep -v "attention_prefill .* us$" $OUT/r/calibrate-infer.txt | tail -8
grep -c "attention_prefill .* us$" $OUT/r/calibrate-infer.txt
tar czf $OUT/recal.tgz -C $OUT r && rm -rf $OUT/r && ls -la $OUT

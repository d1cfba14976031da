#!/bin/bash
# tacorun bench-graph on one H200 (issue 24: the decode step's kernels alone / queued / in a CUDA graph)
B=.devbin/inferg
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
S=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; date -u; } > $OUT/gpu.txt 2>&1
timeout 40 $B/tacorun bench-graph --models $B/models > $OUT/bench-graph.txt 2>&1
echo "llama3-8b rc=$? $(( $(date +%s) - S )) s" >> $OUT/gpu.txt
timeout 20 $B/tacorun bench-graph --models $B/models --model qwen2.5-7b --layers 28 --batch 16 --len 512 >> $OUT/bench-graph.txt 2>&1
echo "qwen2.5-7b rc=$? $(( $(date +%s) - S )) s" >> $OUT/gpu.txt
cat $OUT/gpu.txt $OUT/bench-graph.txt

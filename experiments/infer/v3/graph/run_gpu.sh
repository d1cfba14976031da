#!/bin/bash
# One GPU call (issue 24): tacorun bench-graph on one H200, the decode step's kernels alone / queued /
# in a CUDA graph (Llama-3 8B at b1 x 4096, b16 x 1024, b64 x 2048; Qwen2.5 7B at b16 x 512).
# The tacorun binary, the libraries the GPU machine lacks (lib/) and the model zoo (models/) go under
# the device copy's .devbin/ folder B (default .devbin/graph). Output: $OUT/gpu.txt, $OUT/bench-graph.txt.
B=${B:-.devbin/graph}
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
S=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; date -u; } > $OUT/gpu.txt 2>&1
timeout 40 $B/tacorun bench-graph --models $B/models > $OUT/bench-graph.txt 2>&1
echo "llama3-8b rc=$? $(( $(date +%s) - S )) s" >> $OUT/gpu.txt
timeout 20 $B/tacorun bench-graph --models $B/models --model qwen2.5-7b --layers 28 --batch 16 --len 512 >> $OUT/bench-graph.txt 2>&1
echo "qwen2.5-7b rc=$? $(( $(date +%s) - S )) s" >> $OUT/gpu.txt
cat $OUT/gpu.txt $OUT/bench-graph.txt

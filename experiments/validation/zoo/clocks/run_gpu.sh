#!/bin/bash
# G6 on one H200: SM clock and power (nvidia-smi, 50 ms) while the GEMM table's shapes of Llama-3 8B run
# back to back (calibrate --only gemm), while memory-bound kernels run back to back, and during a training
# run of the zoo plan llama3-8b-l4-m1-s4096 (the executor). Files in $OUT.
set -u
R=${R:-$PWD/.devbin/bias}; S=$(date +%s)
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > $OUT/clocks.csv 2>&1 &
SMI=$!
mark() { echo "$(date -u '+%Y/%m/%d %H:%M:%S.%3N') $*" >> $OUT/phases.txt; }
sleep 2; mark idle-end
mark gemm-start
timeout 120 $R/tacorun calibrate --only gemm --no-clock --models llama3-8b --tp 1 --tokens 4096,8192 --gemm-passes 2 --gemm-tsv $OUT/gemm.tsv --out /tmp/g.json > $OUT/gemm.log 2>&1
mark gemm-end; sleep 3; mark mem-start
timeout 60 $R/tacorun calibrate --only memory --no-clock --models llama3-8b --tp 1 --out /tmp/m.json > $OUT/mem.log 2>&1
mark mem-end; sleep 3; mark exec-start
timeout 120 $R/tacorun execute experiments/validation/zoo/plans/llama3-8b-l4-m1-s4096.json --iters 30 --warmup 3 > $OUT/exec.txt 2>&1
mark exec-end; sleep 1
kill $SMI; wait $SMI 2>/dev/null
echo "total $(( $(date +%s) - S )) s"; cat $OUT/phases.txt; wc -l $OUT/clocks.csv; tail -2 $OUT/gemm.log

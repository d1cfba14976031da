#!/bin/bash
# Llama-3 8B's GEMM shapes at TP 1 timed with the shipped table's protocol (four alternating passes,
# geometric mean, the clocks settled first), to compare with the shipped points. Files in $OUT.
set -u
R=${R:-$PWD/.devbin/r10}; S=$(date +%s)
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
{ nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm --format=csv; date -u; echo "commit $(cat $R/COMMIT)"; } > $OUT/gpu.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > $OUT/clocks.csv 2>&1 &
SMI=$!
timeout 240 $R/tacorun calibrate --only gemm --no-clock --models llama3-8b --tp 1 --gemm-tsv $OUT/gemm.tsv --out $OUT/gemm.json > $OUT/gemm.log 2>&1
echo "gemm rc=$? ($(( $(date +%s) - S )) s)" | tee -a $OUT/gpu.txt
kill $SMI; wait $SMI 2>/dev/null
tail -3 $OUT/gemm.log

#!/bin/bash
# One H200, from the repository root: tacorun calibrate-infer --small-only on a copy of the shipped file.
set -u
R=$PWD/.devbin/small; O=${OUT:-/tmp/small-out}; mkdir -p $O/cal
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > $O/smi.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 200 > $O/smi-log.csv 2>&1 &
SMI=$!
date -u > $O/when.txt
timeout 120 $R/tacorun calibrate-infer calibration/h200-nvlink.json --small-only --models $PWD/models --out-dir $O/cal > $O/small.tsv 2> $O/small.err
echo "rc $?" >> $O/small.err
date -u >> $O/when.txt
kill $SMI 2>/dev/null
gzip -9 $O/cal/h200-nvlink.json
tail -5 $O/small.err; wc -l $O/small.tsv

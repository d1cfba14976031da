#!/bin/bash
# One H200, from the repository root (binaries under .devbin/$BIN): the greedy sampling's
# two-pass kernel checked (its GPU test, the tiny model's decode by --infer-check) and timed
# beside the one-pass kernel it replaces (dev_decode_argmax), then calibrate-infer --small-only,
# whose "argmax" points calibration/merge_small.py --only argmax merges.
set -u
R=$PWD/.devbin/${BIN:-s1}; O=${OUT:-/tmp/sample-out}; mkdir -p $O/cal
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
S=$(date +%s); el() { echo $(( $(date +%s) - S )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader > $O/gpu.txt 2>&1; date -u >> $O/gpu.txt
timeout 60 $R/tests/test_infer_argmax_gpu > $O/test_argmax.txt 2>&1; echo "test_infer_argmax_gpu rc=$? $(el) s"; tail -1 $O/test_argmax.txt
{ timeout 60 $R/dev/dev_decode_argmax --vocab 32000,128256,152064,256000 --batches 1,2,4,8,16,32,64
  timeout 60 $R/dev/dev_decode_argmax --vocab 128256,152064 --batches 1,16,64 --tp 2
  timeout 60 $R/dev/dev_decode_argmax --vocab 128256,152064 --batches 1,16,64 --tp 8; } > $O/dev_argmax.txt 2>&1
echo "dev_decode_argmax rc=$? $(el) s"; cat $O/dev_argmax.txt
timeout 60 $R/tacorun execute --infer-check > $O/infer-check.txt 2>&1; echo "infer-check rc=$? $(el) s"; grep -E "FAIL|infer-check:" $O/infer-check.txt | head
timeout 150 $R/tacorun calibrate-infer calibration/h200-nvlink.json --small-only --models $PWD/models --out-dir $O/cal > $O/small.tsv 2> $O/small.err
echo "calibrate-infer rc=$? $(el) s"; tail -3 $O/small.err; grep -c "argmax" $O/small.tsv
rm -rf $O/cal

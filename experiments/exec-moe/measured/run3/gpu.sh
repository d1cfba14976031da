#!/bin/bash
# run 3 (2026-12-04, commit 6116ce6), GPU call 1: calibrate --only moe (grouped GEMMs up to 16 TFLOP, moe-tiny
# included: calibration/moe/h200-moe-run2.*), the exec-moe plans re-timed, moe-tiny under --variant
# gemm-cache=scan|hash alternated. Call 2 (warm, a minute later) ran this script again with the calibrate line
# replaced by `true` and packed every output (call 1 brought back only 8 files: call1/).
# Run from the repository root with the binary, its libraries, plans, models and topologies under .devbin/moegg.
D=.devbin/moegg
export LD_LIBRARY_PATH=$PWD/$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
export TACOSIM_MODELS_DIR=$PWD/$D/models TACOSIM_TOPOLOGIES_DIR=$PWD/$D/topologies
L=$OUT/log.txt; T0=$(date +%s)
st() { echo "[$(( $(date +%s) - T0 )) s] $*" >> $L; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader; cat $D/COMMIT; ldd $D/tacorun | grep "not found"; } > $L 2>&1
timeout 150 $D/tacorun calibrate --only moe --gpus 1 --transport-name nvlink --out $OUT/h200-moe.json --moe-tsv $OUT/h200-moe.tsv > $OUT/calibrate-moe.log 2>&1
st "calibrate rc $?"
for p in mixtral-8x22b-l1-1gpu mixtral-8x7b-l1-1gpu mixtral-8x7b-l2-1gpu mixtral-8x7b-l2-m2-1gpu moe-tiny-1gpu; do
  timeout 90 $D/tacorun execute $D/plans/$p.json --iters 6 --warmup 2 --json $OUT/$p.json --ops-csv $OUT/$p.ops.csv > $OUT/$p.txt 2>&1
  st "$p rc $?"
done
for r in 1 2; do for v in scan hash; do
  timeout 60 $D/tacorun execute $D/plans/moe-tiny-1gpu.json --iters 20 --warmup 2 --variant gemm-cache=$v --json $OUT/moe-tiny-$v$r.json --ops-csv $OUT/moe-tiny-$v$r.ops.csv > $OUT/moe-tiny-$v$r.txt 2>&1
  st "moe-tiny $v $r rc $?"
done; done

#!/bin/bash
# the host-launch GPU call: calibrate --only host (twice), PyTorch's per-op cost, moe-tiny and mixtral-8x7b-l1 timed
D=.devbin/hostlaunch
export LD_LIBRARY_PATH=$PWD/$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0
L=$OUT/log.txt
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ldd $D/tacorun | grep "not found"; } > $L 2>&1
for i in 1 2; do timeout 120 $D/tacorun calibrate --only host --out $OUT/host$i.json >> $L 2>&1; echo "calibrate $i rc $?" >> $L; done
timeout 120 python3 $D/torch_launch.py --json $OUT/torch.json >> $L 2>&1; echo "torch rc $?" >> $L
for p in moe-tiny-1gpu mixtral-8x7b-l1-1gpu; do
  timeout 150 $D/tacorun execute $D/plans/$p.json --iters $([ $p = moe-tiny-1gpu ] && echo 20 || echo 6) --warmup 2 --ops-csv $OUT/$p.ops.csv > $OUT/$p.txt 2>&1
  echo "$p rc $?" >> $L
done
grep -h "host:\|us per op\|sync:" $L; grep -h -i "median\|iteration time" $OUT/*.txt | head; tail -3 $L

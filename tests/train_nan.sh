#!/bin/sh
# Fault test of `tacorun train --inject-nan` with TP emulated on one GPU: a NaN
# in rank 0's partial of step 2's first layer all-reduce. Through TACO the
# codec sends it as zero, so the run must stop at step 2 naming the layer, the
# tensor and the count; uncompressed, the NaN reaches the loss, which stops the
# run at the same step. Both exit 1. Skips (77) without a GPU.
# usage: train_nan.sh TACORUN CORPUS
set -u
bin=$1 corpus=$2
out=${TMPDIR:-/tmp}/train_nan.$$
trap 'rm -f "$out"' EXIT
small="--hidden 128 --layers 2 --heads 2 --seq 32 --batch 4 --steps 4 --eval-every 1000 --eval-batches 1 --warmup 1"
check() { # codec, expected message (grep -E)
  "$bin" train --corpus "$corpus" --tp-emulate 2 --codec "$1" $small --inject-nan 2 >"$out" 2>&1
  rc=$?
  if grep -q "no CUDA device\|cudaErrorNoDevice\|CUDA driver" "$out"; then echo "no GPU: skipped"; exit 77; fi
  cat "$out"
  if [ "$rc" -ne 1 ]; then echo "FAIL ($1): exit $rc, expected 1"; exit 1; fi
  if ! grep -Eq "$2" "$out"; then echo "FAIL ($1): no line matching: $2"; exit 1; fi
  echo "ok ($1): exit 1 and: $2"
}
check taco-e4m3 "step 2: TP all-reduce of layer 0 attn_out \(emulated TP 2\): the TACO encode met 1 NaN/Inf values"
check none "step 2: (loss is NaN|gradient of .* has [0-9]+ NaN/Inf values)"
echo "train_nan: both reports as expected"

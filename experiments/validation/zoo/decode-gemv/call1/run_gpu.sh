#!/bin/bash
# A record of the run: its --decode-gemm options and bench-decode's GEMV columns are gone; the kernel
# it timed (the first version) is not kept (commit b6fcf31), its successor is in dev/decode_gemv_tc/.
# call 1 (issue 24, decode GEMM): checks (bench-decode --check: GEMV + attention; execute --infer-check),
# GEMV vs cuBLASLt on Llama-3 8B / Qwen2.5 7B / 14B projections (batch 1..16), TPOT of the batch <= 16
# BF16 plans with --decode-gemm gemv and cublaslt, then calibrate-infer --decode-gemms-only (GEMV as run).
B=.devbin/decode
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/$B/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies NCCL_NVLS_ENABLE=0
S=$(date +%s); el() { echo $(( $(date +%s) - S )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; date -u; } > $OUT/gpu.txt 2>&1
timeout 40 $B/tacorun bench-decode --check > $OUT/bench_check.txt 2>&1; echo "bench-check rc=$? $(el) s"
for m in llama3-8b qwen2.5-7b qwen2.5-14b; do
  timeout 40 $B/tacorun bench-decode --model $m --gemm-only --batches 1,2,4,8,16,32,64 > $OUT/bench_gemm-$m.txt 2>&1; echo "bench $m rc=$? $(el) s"
done
timeout 30 $B/tacorun execute --infer-check > $OUT/infer-check.txt 2>&1; echo "infer-check rc=$? $(el) s"
P=""; for p in llama3-8b-tp1-b1-p4096 llama3-8b-tp1-b4-p512 llama3-8b-tp1-b8-p4096 llama3-8b-tp1-b16-p1024 qwen2.5-7b-tp1-b1-p8192 qwen2.5-7b-tp1-b16-p512 qwen2.5-14b-tp1-b1-p2048 qwen2.5-14b-tp1-b8-p1024; do P="$P $B/plans/$p-g64-bf16.json"; done
for v in gemv cublaslt; do
  mkdir -p $OUT/m-$v; timeout 75 $B/tacorun execute $P --decode-graph --prefill-reps 1 --decode-gemm $v --json-dir $OUT/m-$v > $OUT/execute-$v.txt 2>&1; echo "execute $v rc=$? $(el) s"
done
mkdir -p $OUT/cal; cp $B/h200-nvlink.json $OUT/cal/in.json
timeout 40 $B/tacorun calibrate-infer $OUT/cal/in.json --out-dir $OUT/cal/out --models $B/models --decode-gemms-only > $OUT/calibrate-infer.txt 2>&1; echo "calibrate-infer rc=$? $(el) s"
rm -f $OUT/cal/in.json; tail -2 $OUT/calibrate-infer.txt
echo "== checks"; grep -E "^checks|FAILED|DIFFERS" $OUT/bench_check.txt | head; grep -E "FAIL|infer-check:|decode GEMMs" $OUT/infer-check.txt | head
echo "== gemm (us: cublaslt gemv gemv-wide)"
for m in llama3-8b qwen2.5-7b qwen2.5-14b; do grep -E "^  -> " $OUT/bench_gemm-$m.txt | sed "s/^/$m/"; grep "^layer proj" $OUT/bench_gemm-$m.txt; done
echo "== execute"; for v in gemv cublaslt; do grep -hE "^# (llama|qwen)[^:]*:|^decode graph" $OUT/execute-$v.txt | sed 's/(one graph launch a step; [^)]*)//; s/: llama.*//; s/: qwen.*//; s/graph tokens equal to eager/eq/' | cut -c1-150 | sed "s/^/$v /"; done
echo "total $(el) s"

#!/bin/bash
# A record of the run: its --decode-gemm options and bench-decode's GEMV columns are gone since the
# kernel moved to dev/decode_gemv_tc/ (dev/README.md); dev_decode_gemv_tc checks and times it now.
# call 2 (issue 24, decode GEMM, second kernel): checks (bench-decode --check: GEMV prmt/prmt-pdl/mov +
# attention through the merged launcher; execute --infer-check), GEMV kinds vs cuBLASLt on Llama-3 8B /
# Qwen2.5 7B / 14B projections, TPOT of the batch <= 16 BF16 plans with --decode-gemm gemv-pdl and cublaslt
# (gemv: the Llama ones), calibrate-infer --decode-gemms-only: gemv-pdl over the zoo, cublaslt over 3 models.
B=.devbin/decode
export LD_LIBRARY_PATH=$PWD/$B/lib:${LD_LIBRARY_PATH:-} TACOSIM_MODELS_DIR=$PWD/$B/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies NCCL_NVLS_ENABLE=0
S=$(date +%s); el() { echo $(( $(date +%s) - S )); }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader; date -u; } > $OUT/gpu.txt 2>&1
timeout 30 $B/tacorun bench-decode --check > $OUT/bench_check.txt 2>&1; echo "bench-check rc=$? $(el) s"
timeout 30 $B/tacorun bench-decode --model llama3-8b --gemm-only --batches 1,2,4,8,16 > $OUT/bench_gemm-llama3-8b.txt 2>&1; echo "bench llama rc=$? $(el) s"
for m in qwen2.5-7b qwen2.5-14b; do
  timeout 30 $B/tacorun bench-decode --model $m --gemm-only --batches 1,4,16 > $OUT/bench_gemm-$m.txt 2>&1; echo "bench $m rc=$? $(el) s"
done
timeout 25 $B/tacorun execute --infer-check > $OUT/infer-check.txt 2>&1; echo "infer-check rc=$? $(el) s"
L=""; for p in llama3-8b-tp1-b1-p4096 llama3-8b-tp1-b4-p512 llama3-8b-tp1-b8-p4096 llama3-8b-tp1-b16-p1024; do L="$L $B/plans/$p-g64-bf16.json"; done
Q=""; for p in qwen2.5-7b-tp1-b1-p8192 qwen2.5-7b-tp1-b16-p512 qwen2.5-14b-tp1-b1-p2048 qwen2.5-14b-tp1-b8-p1024; do Q="$Q $B/plans/$p-g64-bf16.json"; done
ex() { v=$1; shift; mkdir -p $OUT/m-$v; timeout 40 $B/tacorun execute "$@" --decode-graph --prefill-reps 1 --decode-gemm $v --json-dir $OUT/m-$v > $OUT/execute-$v.txt 2>&1; echo "execute $v rc=$? $(el) s"; }
ex gemv-pdl $L $Q; ex cublaslt $L $Q; ex gemv $L
mkdir -p $OUT/cal/in $OUT/cal/gemv-pdl $OUT/cal/cublaslt; cp $B/h200-nvlink.json $OUT/cal/in/h200-nvlink.json
timeout 30 $B/tacorun calibrate-infer $OUT/cal/in/h200-nvlink.json --out-dir $OUT/cal/gemv-pdl --models models --decode-gemms-only --decode-gemm gemv-pdl > $OUT/calibrate-infer-gemv-pdl.txt 2>&1; echo "cal gemv-pdl rc=$? $(el) s"
timeout 15 $B/tacorun calibrate-infer $OUT/cal/in/h200-nvlink.json --out-dir $OUT/cal/cublaslt --models $B/models --decode-gemms-only --decode-gemm cublaslt > $OUT/calibrate-infer-cublaslt.txt 2>&1; echo "cal cublaslt rc=$? $(el) s"
tail -qn1 $OUT/calibrate-infer-*.txt
rm -rf $OUT/cal/in; (cd $OUT && tar czf cal.tgz cal m-gemv m-gemv-pdl m-cublaslt && rm -rf cal m-gemv m-gemv-pdl m-cublaslt)
echo "== checks"; grep -E "^checks|FAILED|DIFFERS" $OUT/bench_check.txt | head -5; grep -E "FAIL|infer-check:|decode GEMMs" $OUT/infer-check.txt | head -5
for m in llama3-8b qwen2.5-7b qwen2.5-14b; do grep -E "^  -> " $OUT/bench_gemm-$m.txt | sed "s/^/$m/" | grep -E "m=(1|16):" | cut -c1-140; grep "^layer proj" $OUT/bench_gemm-$m.txt | cut -c1-200; done
echo "== execute"; for v in gemv-pdl cublaslt gemv; do grep -hE "^# (llama|qwen)[^:]*:|^decode graph|rror" $OUT/execute-$v.txt | sed 's/(one graph launch a step; [^)]*)//; s/: llama.*//; s/: qwen.*//; s/graph tokens equal to eager/eq/; s/against eager tpot_s/eager/; s/ steps x batch [0-9]*; FNV-1a/ /; s/decode graph: //; s/# //' | cut -c1-110 | paste - - | sed "s/^/$v /"; done
echo "total $(el) s"

#!/bin/bash
# One H200, from the repository root: bash .devbin/ttft/go.sh   (issue 24; branch ttft, commit in COMMIT)
#  1. tacorun calibrate --only host: the host section with graph_gap_us (new), and bench-graph (same code) beside it
#  2. tacorun bench-burst: a GEMM's speed by time since a burst from 2 s idle (3 shapes)
#  2b. tacorun calibrate-infer as experiments/infer/v3/recal did (its prefill GEMMs and attention: at what clock?)
#  3. tacorun execute on 7 of the 26 validation plans (--decode-graph, as the validation), --prefill-reps 9,
#     printing the timed prefills in order; then b4 x 512 alone after 3 s idle with 30 prefills (1.5 s of them),
#     and Qwen 7B b16 x 512 alone with 12
#  an nvidia-smi log every 20 ms (SM clock, power, temperature) all along.
# Everything in $OUT/ttft.tgz (logs under ttft/); a summary last. ~185 s.
set -u
S=$(date +%s); R=$PWD/.devbin/ttft; O=${OUT:-/tmp/ttft-out}; W=/tmp/ttft; rm -rf $W; mkdir -p $W $O
export LD_LIBRARY_PATH=$R/lib:${LD_LIBRARY_PATH:-} NCCL_NVLS_ENABLE=0 TACOSIM_MODELS_DIR=$R/models TACOSIM_TOPOLOGIES_DIR=$R/topologies
T=$R/tacorun
el() { echo $(( $(date +%s) - S )); }
# lim N: N s, or what is left of 225 s (the call stays under 240 s with the packing); 1 when none is left
lim() { local l=$(( 225 - $(el) )); [ $l -lt $1 ] && echo $(( l > 5 ? l : 1 )) || echo $1; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; date -u; cat $R/COMMIT; } > $W/gpu.txt 2>&1
Q=timestamp,clocks.sm,power.draw.instant,power.draw,temperature.gpu
nvidia-smi --query-gpu=$Q --format=csv,noheader -i 0 >/dev/null 2>&1 || Q=timestamp,clocks.sm,power.draw,temperature.gpu
echo "smi fields: $Q" >> $W/gpu.txt
nvidia-smi --query-gpu=$Q --format=csv,noheader -i 0 -lms 20 > $W/smi.csv 2>&1 &
SMI=$!
# stages in nvidia-smi's timestamp format (local time) and Unix seconds, to align the logs
stage() { echo "$(date '+%Y/%m/%d %H:%M:%S.%N|%s.%N' | sed 's/\.\([0-9]\{3\}\)[0-9]*|/.\1|/') $(el) s: $*" >> $W/stages.txt; }

stage host; timeout $(lim 25) $T calibrate --only host --transport-name nvlink --out $W/host.json > $W/host.log 2>&1; echo "host rc=$? $(el) s" >> $W/gpu.txt
stage bench-graph; timeout $(lim 20) $T bench-graph > $W/bench-graph.txt 2>&1; echo "bench-graph rc=$? $(el) s" >> $W/gpu.txt
stage calibrate-infer; mkdir -p $W/ci/in $W/ci/out; cp $R/h200-nvlink.json $W/ci/in/
timeout $(lim 35) $T calibrate-infer $W/ci/in/h200-nvlink.json --out-dir $W/ci/out --models $R/zoo3 \
  --prefill-layouts llama3-8b:1,qwen2.5-7b:1,qwen2.5-14b:1 --prefill-prompts 128,256,512,1024,2048,4096,8128,8192 \
  --prefill-max-tokens 131072 > $W/calibrate-infer.txt 2>&1; echo "calibrate-infer rc=$? $(el) s" >> $W/gpu.txt
rm -f $W/ci/in/h200-nvlink.json
sleep 2
for shape in "2048 28672 4096" "4096 4096 2048" "16384 28672 4096"; do
  set -- $shape; stage "burst $1x$2x$3"
  timeout $(lim 20) $T bench-burst --m $1 --n $2 --k $3 --idle-ms 2000 --ms 1500 --reps 3 > $W/burst-$1x$2x$3.txt 2>&1
  echo "burst $1x$2x$3 rc=$? $(el) s" >> $W/gpu.txt
done
sleep 2
P=$R/plans
stage execute-seq; timeout $(lim 80) $T execute $P/llama3-8b-tp1-b4-p512-g64-bf16.json $P/llama3-8b-tp1-b4-p512-g64-fp8.json \
  $P/llama3-8b-tp1-b1-p4096-g64-bf16.json $P/llama3-8b-tp1-b16-p1024-g64-bf16.json $P/qwen2.5-14b-tp1-b1-p2048-g64-bf16.json \
  $P/qwen2.5-7b-tp1-b16-p512-g64-bf16.json $P/qwen2.5-7b-tp1-b1-p8192-g64-bf16.json \
  --decode-graph --prefill-reps 9 > $W/execute-seq.txt 2>&1; echo "execute-seq rc=$? $(el) s" >> $W/gpu.txt
sleep 3
stage execute-alone; timeout $(lim 20) $T execute $P/llama3-8b-tp1-b4-p512-g64-bf16.json --decode-graph --prefill-reps 30 \
  > $W/execute-alone.txt 2>&1; echo "execute-alone rc=$? $(el) s" >> $W/gpu.txt
sleep 3
stage execute-alone-qwen7b; timeout $(lim 20) $T execute $P/qwen2.5-7b-tp1-b16-p512-g64-bf16.json --decode-graph --prefill-reps 12 \
  > $W/execute-alone-qwen7b.txt 2>&1; echo "execute-alone-qwen7b rc=$? $(el) s" >> $W/gpu.txt
stage end
kill $SMI 2>/dev/null; wait $SMI 2>/dev/null
gzip -f $W/smi.csv
tar -czf $O/ttft.tgz -C /tmp ttft
echo "== summary ($(el) s)"; cat $W/gpu.txt
grep -E "graph gap" $W/host.log $W/bench-graph.txt
python3 -c "import json; print('host section:', json.load(open('$W/host.json')).get('host'))" 2>&1 | cut -c1-400
for f in $W/burst-*.txt; do echo "-- $f"; head -1 $f; grep -E "^\| (0-5|20-30|40-50|50-60|60-80|80-100|100-125|150-200|200-250|300-400|500-750|1000-1500) " $f; tail -1 $f; done
grep -hE "^# (llama|qwen)[^:]*:|^ttft|^prefill times" $W/execute-*.txt | sed 's/: llama.*//; s/: qwen.*//; s/tpot_s.*//'

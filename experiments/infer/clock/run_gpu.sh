#!/usr/bin/env bash
# run_gpu.sh — the SM clock and board power of the inference executor's prefills, on one H100 or H200, from the
# repository root, building nothing (BIN: a tacorun built on the CPU machine, its libraries in LIB).
# Each plan of ../ops/plans.sh (the GPU's validation plans) is copied with "generate": 2, so that its run is
# set-up, a warm-up prefill, 2 decode steps and the 3 timed prefills back to back (plan/plan_infer.h), and run
# alone by `tacorun execute --decode-graph` while nvidia-smi samples the SM clock and the board power every 10 ms.
# clock.py reads the samples inside each run's window. OPS=1 adds `--ops-dir` (after the timed prefills, 3 profiled
# ones and 3 eager decode steps, op by op: ../ops/README.md), so that the GEMMs' in-prefill times come from the
# same card as the clock.
# Outputs in OUT: gpu.txt, summary.txt, clock.tgz (smi.csv, windows.tsv, each plan's execute output).
set -u
OUT=${OUT:-/tmp/clock}
. scripts/gpu_env.sh
mkdir -p "$OUT/clock/plans"
case "$(head -1 "$OUT/gpu.txt")" in
  *H200*) PLANS=experiments/infer/v3/plans ;;
  *H100*) PLANS=experiments/validation/h100/infer-plans ;;
  *) echo "not an H100 or H200: $(head -1 "$OUT/gpu.txt")" | tee "$OUT/summary.txt"; exit 0 ;;
esac
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw.instant,power.draw,utilization.gpu --format=csv,noheader,nounits \
  -lms 10 > "$OUT/clock/smi.csv" 2> "$OUT/clock/smi.err" &
SMI=$!
sleep 2
for f in $(experiments/infer/ops/plans.sh); do
  p="$OUT/clock/plans/$f.json"
  sed 's/"generate": *[0-9]*/"generate": 2/' "$PLANS/$f.json" > "$p"
  t0=$(date -u '+%Y/%m/%d %H:%M:%S.%N')
  ops=""
  [ "${OPS:-0}" = 1 ] && ops="--ops-dir $OUT/clock/ops" && mkdir -p "$OUT/clock/ops"
  timeout 120 "$BIN" execute "$p" --decode-graph $ops > "$OUT/clock/$f.txt" 2>&1
  rc=$?
  t1=$(date -u '+%Y/%m/%d %H:%M:%S.%N')
  printf '%s\t%s\t%s\t%s\n' "$f" "$t0" "$t1" "$rc" >> "$OUT/clock/windows.tsv"
  sleep 1
done
kill $SMI
echo "clock: $(wc -l < "$OUT/clock/windows.tsv") plans, $(wc -l < "$OUT/clock/smi.csv") samples, $(el) s" \
  | tee "$OUT/summary.txt"
tar -czf "$OUT/clock.tgz" -C "$OUT" clock && rm -rf "$OUT/clock"

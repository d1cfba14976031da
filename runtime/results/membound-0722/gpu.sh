#!/usr/bin/env bash
# gpu.sh — the memory-bound kernel round on the 2 x H200 machine in one call
# (nothing built there): the kernels' reference checks and micro-benchmarks,
# old binaries (HEAD before the change) and new, then `tacorun execute --check`
# with the new tacorun, then the GPT h4096 TP2 NVLink plan timed with the old
# and new tacorun alternating (old, new, old, new, ... ROUNDS times).
# var/: the norm backward test built with other NORM_STAGES / NORM_ROWS (bench only).
# usage: DEVBIN=.devbin/execmem OUT=... gpu.sh   (ROUNDS 4, ITERS 8)
set -u
cd "$(dirname "$0")/../../.."
D=${DEVBIN:-.devbin/execmem}
OUT=${OUT:-/tmp/membound-out}
ROUNDS=${ROUNDS:-4}
ITERS=${ITERS:-8}
PLAN=experiments/plans/gpt-h4096-tp2-none.json
BIN=$D/new/tacorun
. experiments/validation/gpu_lib.sh # START, say, elapsed, mpi (uses BIN)

say "old: commit $(cat $D/old/COMMIT), new: $(cat $D/new/COMMIT); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
for v in new old; do
  timeout 90 "$D/$v/test_rt_ops_gpu" --bench >"$OUT/kernels-$v.txt" 2>&1
  say "test_rt_ops_gpu $v rc=$? ($(elapsed) s)"
  grep -E "^bench|FAIL|all passed" "$OUT/kernels-$v.txt" | tee -a "$SUMMARY"
  echo "=== test_exec_norm_gpu --bench ===" >>"$OUT/kernels-$v.txt"
  timeout 60 "$D/$v/test_exec_norm_gpu" --bench >>"$OUT/kernels-$v.txt" 2>&1
  say "test_exec_norm_gpu $v rc=$? ($(elapsed) s)"
  sed -n '/=== test_exec_norm_gpu/,$p' "$OUT/kernels-$v.txt" | grep -E "^bench|FAIL|all passed" | tee -a "$SUMMARY"
done

# other stage depths / rows a group of the new norm backward (NORM_STAGES, NORM_ROWS at compile time; new: 4, 2)
for t in "$D"/var/test_exec_norm_gpu_*; do
  [ -x "$t" ] || continue
  echo "=== $(basename "$t") --bench ===" >>"$OUT/kernels-var.txt"
  timeout 60 "$t" --bench >>"$OUT/kernels-var.txt" 2>&1
  say "$(basename "$t") rc=$?: $(grep -E '^bench|FAIL' "$OUT/kernels-var.txt" | tail -2 | tr '\n' ' ')"
done

mpi 2 100 execute --check --timeout 20 >"$OUT/check.txt" 2>&1
say "check (new) rc=$? ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
grep -E "worst|FAILED" "$OUT/check.txt" | head -6 | tee -a "$SUMMARY"

nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 \
  >"$OUT/clocks.csv" 2>&1 &
smi=$!
for r in $(seq 1 "$ROUNDS"); do
  for v in old new; do
    BIN=$D/$v/tacorun
    tag=$v-$r
    say "start $tag $(date -u '+%Y/%m/%d %H:%M:%S')"
    echo "=== $tag ($BIN, $ITERS iterations after 2 warm-up) ===" >>"$OUT/timing.txt"
    mpi 2 60 execute "$PLAN" --iters "$ITERS" --warmup 2 --timeout 30 --ops-csv "$OUT/measured/$tag.ops.txt" \
      >>"$OUT/timing.txt" 2>&1
    say "$tag rc=$? ($(elapsed) s): $(grep -E '^# iteration time' "$OUT/timing.txt" | tail -1 | sed 's/.*: median/median/'); $(grep -E 'MFU' "$OUT/timing.txt" | tail -1 | grep -oE 'MFU [0-9.]+%')"
  done
done
kill "$smi" 2>/dev/null
wait "$smi" 2>/dev/null
for f in "$OUT"/measured/*.ops.txt; do
  printf '%-6s %s\n' "$(basename "$f" .ops.txt)" \
    "$(awk '$1 ~ /^(fwd.ln1|bwd.ln1|bwd.ln2|optimizer.adamw)$/ { printf "%s %.1f us  ", $1, $4 }' "$f")"
done | tee -a "$SUMMARY"
tar -czf "$OUT/ops.tgz" -C "$OUT" measured && rm -rf "$OUT/measured"
gzip -f "$OUT/clocks.csv"
say "done in $(elapsed) s"

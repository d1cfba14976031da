#!/bin/bash
# 2 x H200, round 6b: the direct two-shot all-reduce with one piece and the own
# reduced block pushed by the copy engine (TACO_DIRECT_AR=copy) against the default.
set -u
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
B=$PWD/.devbin/ar2
R=$OUT/r; mkdir -p "$R"
S=$R/summary.txt
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
{ date -u; nvidia-smi -L; } > "$S" 2>&1
TEST_COLL_ONLY=direct-allreduce TEST_COLL_MAX_BYTES=268435456 timeout 30 "$B/test_coll_gpu" > "$R/test.log" 2>&1
echo "test rc=$? at $(el) s: $(tail -1 "$R/test.log")" >> "$S"
grep -c '^ok' "$R/test.log" >> "$S"; grep -E '^(FAIL|ERROR)' "$R/test.log" | head -5 >> "$S"
run() { # name, env...
  local name=$1; shift
  env "$@" timeout 14 mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH \
    -x TACO_DIRECT_AR -x TACO_DIRECT_AR_PIECES -x TACO_DIRECT_AR_OWN \
    "$B/tacorun" bench-comm --op allreduce --codec taco-auto --minbytes 16M --maxbytes 256M --step-factor 4 \
    --iters 20 --warmup 5 --check ${EXTRA:-} > "$R/bench-$name.dat" 2>&1
  echo "$name rc=$? at $(el) s" >> "$S"
  grep -E '^ +(16777216|67108864|268435456) ' "$R/bench-$name.dat" | sed "s/^/$name /" >> "$S"
}
for rep in 1 2 3; do
  run whole-$rep TACO_DIRECT_AR=whole TACO_DIRECT_AR_PIECES=2 TACO_DIRECT_AR_OWN=dup
  run copy1-$rep TACO_DIRECT_AR=copy TACO_DIRECT_AR_PIECES=2 TACO_DIRECT_AR_OWN=dup
done
EXTRA=--inplace run copy1-inplace TACO_DIRECT_AR=copy TACO_DIRECT_AR_PIECES=2 TACO_DIRECT_AR_OWN=dup
# references in the same call: one piece duplicated, and round 6's pipe 2 pieces copy
run pipe1dup TACO_DIRECT_AR=pipe TACO_DIRECT_AR_PIECES=1 TACO_DIRECT_AR_OWN=dup
run pipe2copy TACO_DIRECT_AR=pipe TACO_DIRECT_AR_PIECES=2 TACO_DIRECT_AR_OWN=copy
tar czf "$OUT/r.tgz" -C "$OUT" r
cp "$S" "$OUT/summary.txt"

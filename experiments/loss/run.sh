#!/usr/bin/env bash
# experiments/loss/run.sh — the training-loss runs of issue 8 on the GPU machine
# (2 x H200, TP = 2 under mpirun, one process per GPU), from the repository root.
#
#   experiments/loss/run.sh smoke   the per-tensor FP8 kernels against their C reference, then
#                                   every codec for SMOKE_STEPS steps (timing) and the baseline of
#                                   a larger model (BIG_MODEL) for the model choice
#   experiments/loss/run.sh full    every codec for STEPS steps (the loss curves)
#
# Environment: TACORUN (.devbin/train/tacorun), CORPUS (.devbin/train/kjv.txt: the King James
# Bible as text, `bible gen1:1-rev22:21 > kjv.txt` with the Debian packages bible-kjv and
# bible-kjv-text), ATTN (unfused: tacorun train --variant attn=), MODEL, STEPS (2000), EVAL_EVERY (200), EVAL_BATCHES (16), CODECS, LIMIT (seconds for the whole
# training command), OUT (where the results go; default experiments/loss/out), NOISE_SEED (full:
# also the baseline from this seed, as loss-none-seed<S>.csv, for the seed-to-seed spread).
# Writes OUT/loss.tgz (every CSV and log) and OUT/summary.csv; prints the summary last.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 # never NVLink multicast
mode=${1:-smoke}
TACORUN=${TACORUN:-.devbin/train/tacorun}
ATTN=${ATTN:-unfused}
CORPUS=${CORPUS:-.devbin/train/kjv.txt}
OUT=${OUT:-experiments/loss/out}
MODEL=${MODEL:-"--hidden 512 --layers 8 --heads 8 --seq 256 --batch 16 --lr 6e-4 --warmup 100"}
BIG_MODEL=${BIG_MODEL:-"--hidden 768 --layers 12 --heads 12 --seq 256 --batch 16 --lr 6e-4 --warmup 100"}
CODECS=${CODECS:-none,taco-e4m3,taco-e5m2,fp8-tensor,caat,taco+caat}
STEPS=${STEPS:-2000}
EVAL_EVERY=${EVAL_EVERY:-200}
EVAL_BATCHES=${EVAL_BATCHES:-16} # batches of the periodic validation (the final one takes all 52)
SMOKE_STEPS=${SMOKE_STEPS:-300}
LIMIT=${LIMIT:-400}
case $mode in smoke | full) ;; *) echo "run.sh: mode '$mode' is not smoke or full" >&2; exit 2 ;; esac
for f in "$TACORUN" "$CORPUS"; do [ -e "$f" ] || { echo "run.sh: missing $f" >&2; exit 2; }; done

run="$OUT/run"
mkdir -p "$run"
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  nvidia-smi topo -m | head -4
  echo "corpus $CORPUS $(wc -c < "$CORPUS") bytes, sha256 $(sha256sum "$CORPUS" | cut -c1-16)"
  echo "mode $mode; model $MODEL; codecs $CODECS; --variant attn=$ATTN"
  ldd "$TACORUN" | grep "not found" || true
} > "$run/machine.txt" 2>&1
cat "$run/machine.txt"

# The executor's unfused attention (checked against the float64 reference on these GPUs) unless
# ATTN says otherwise (tacorun train --variant attn=...): the fused attention kernel was new and
# not yet run on a GPU when these runs were made.
mpi() { timeout "$1" mpirun --allow-run-as-root -np 2 --bind-to none -x NCCL_NVLS_ENABLE "${@:2}"; }
rc=0
if [ "$mode" = smoke ]; then
  timeout 60 "$TACORUN" train --check-codec > "$run/check-codec.txt" 2>&1
  echo "check-codec: exit $?"; tail -1 "$run/check-codec.txt"
  mkdir -p "$run/smoke" "$run/big"
  # shellcheck disable=SC2086
  mpi "$LIMIT" "$TACORUN" train --variant attn="$ATTN" --corpus "$CORPUS" --codec "$CODECS" $MODEL --steps "$SMOKE_STEPS" \
    --eval-every 100 --eval-batches 8 --out-dir "$run/smoke" > "$run/smoke.log" 2>&1 || rc=$?
  echo "smoke runs: exit $rc"
  # shellcheck disable=SC2086
  mpi 90 "$TACORUN" train --variant attn="$ATTN" --corpus "$CORPUS" --codec none $BIG_MODEL --steps 200 --eval-every 100 \
    --eval-batches 8 --out-dir "$run/big" > "$run/big.log" 2>&1
  echo "larger model: exit $?"
  summary="$run/smoke/summary.csv"
else
  timeout 60 "$TACORUN" train --check-codec > "$run/check-codec.txt" 2>&1
  echo "check-codec: exit $?"; tail -1 "$run/check-codec.txt"
  # shellcheck disable=SC2086
  mpi "$LIMIT" "$TACORUN" train --variant attn="$ATTN" --corpus "$CORPUS" --codec "$CODECS" $MODEL --steps "$STEPS" \
    --eval-every "$EVAL_EVERY" --eval-batches "$EVAL_BATCHES" --out-dir "$run" > "$run/train.log" 2>&1 || rc=$?
  echo "full runs: exit $rc"
  summary="$run/summary.csv"
  if [ -n "${NOISE_SEED:-}" ] && [ "$rc" = 0 ]; then
    # the baseline again from another seed (other initial weights and batches): the spread
    # between two seeds is the scale against which the codecs' differences are read
    mkdir -p "$run/seed"
    # shellcheck disable=SC2086
    mpi "$LIMIT" "$TACORUN" train --variant attn="$ATTN" --corpus "$CORPUS" --codec none $MODEL --steps "$STEPS" --seed "$NOISE_SEED" \
      --eval-every "$EVAL_EVERY" --eval-batches "$EVAL_BATCHES" --out-dir "$run/seed" > "$run/train-seed$NOISE_SEED.log" 2>&1 || rc=$?
    echo "baseline, seed $NOISE_SEED: exit $rc"
    mv "$run/seed/loss-none.csv" "$run/loss-none-seed$NOISE_SEED.csv" 2> /dev/null
    tail -n +2 "$run/seed/summary.csv" 2> /dev/null | sed "s/^none,/none-seed$NOISE_SEED,/" >> "$summary"
    rm -rf "$run/seed"
  fi
fi
grep -h "tacorun train:" "$run"/*.log | head -5
tar czf "$OUT/loss.tgz" -C "$OUT" run
cp "$summary" "$OUT/summary.csv" 2> /dev/null
[ "$mode" = smoke ] && cat "$run/big/summary.csv" 2> /dev/null
column -t -s, "$OUT/summary.csv" 2> /dev/null || cat "$OUT/summary.csv"
rm -rf "$run"
exit $rc

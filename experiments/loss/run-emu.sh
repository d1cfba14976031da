#!/usr/bin/env bash
# experiments/loss/run-emu.sh MODE — the loss runs of issue 25 on ONE GPU: tensor parallelism
# emulated (`tacorun train --tp-emulate K`: K ranks as threads, the real collective's codec kernels
# in its order, runtime/train/train_emu.h). From the repository root of the GPU machine.
#
#   check   the emulated all-reduce (GPU) against its C reference, and the per-tensor FP8 kernels
#   repro   the kept TP 2 runs of experiments/loss/ (25.4M, King James Bible, 2,000 steps, seed 1234,
#           --variant attn=unfused as they ran) emulated on one GPU, for the comparison with the curves
#           measured on two GPUs (REPRO_CODECS)
#   big     the 124M-parameter runs (BIG_MODEL) on the English corpus (experiments/loss/corpus.sh):
#           JOBS, a ;-separated list of "TP SEED CODEC[,CODEC...] [EXTRA OPTIONS]", PAR of them at a
#           time (a job whose options hold --group G names its folder ...-gG, e.g. -gauto)
#   probe   whether this tacorun reproduces a kept run: PROBE_JOB ("TP SEED CODEC [EXTRA]", BIG_MODEL)
#           for PROBE_STEPS steps, its losses (step-0 validation, every training step) against the
#           kept curve PROBE_REF (loss-<codec>.csv[.gz]) within PROBE_TOL relative (1e-4: with the
#           default atomic sums two runs of one binary differ by ~1e-6 at step 0 and ~1e-5 by step 20,
#           runtime/RESULTS-exec.md; 0 with --variant reduce=ordered on both sides); the learning rate of
#           a step inside the warm-up does not depend on --steps. Exit 1 if one differs or none compared.
#
# Environment: TACORUN (.devbin/emu/tacorun), KJV (.devbin/emu/kjv.txt), CORPUS
# (.devbin/emu/english.txt, or english.txt.gz next to it, unpacked on the fly), OUT (experiments/loss/out),
# STEPS (2000), PAR (3), LIMIT (seconds per job), UNTIL (big: an epoch second by which every job has
# stopped: a job's limit is cut to it, and a job is not started with less than MINLEFT (150) seconds
# left: so that a machine lent for a fixed time returns whole runs), PACK (big: a .tgz file that
# receives OUT at the end, for machines that return a limited number of files), PROBE_JOB
# ("8 1234 none"), PROBE_REF, PROBE_STEPS (40). Every job writes OUT/<name>/ (loss-<codec>.csv,
# stats-<codec>.csv, summary.csv, train.log).
set -uo pipefail
export NCCL_NVLS_ENABLE=0
mode=${1:-check}
TACORUN=${TACORUN:-.devbin/emu/tacorun}
KJV=${KJV:-.devbin/emu/kjv.txt}
CORPUS=${CORPUS:-.devbin/emu/english.txt}
OUT=${OUT:-experiments/loss/out}
STEPS=${STEPS:-2000}
PAR=${PAR:-3}
LIMIT=${LIMIT:-570}
REPRO_CODECS=${REPRO_CODECS:-none taco-e4m3 fp8-tensor}
REPRO_MODEL="--hidden 512 --layers 8 --heads 8 --seq 256 --batch 16 --lr 6e-4 --warmup 100"
BIG_MODEL=${BIG_MODEL:-"--hidden 768 --layers 18 --heads 12 --seq 256 --batch 32 --lr 6e-4 --warmup 100"}
JOBS=${JOBS:-"2 1234 none;2 1234 taco-e4m3;2 1234 fp8-tensor"}
UNTIL=${UNTIL:-}
MINLEFT=${MINLEFT:-150}
PACK=${PACK:-}
PROBE_JOB=${PROBE_JOB:-"8 1234 none"}
PROBE_REF=${PROBE_REF:-}
PROBE_STEPS=${PROBE_STEPS:-40}  # below the validation interval (250): the kept curve has no other validation there
mkdir -p "$OUT"
corpus() {  # CORPUS present (unpacked from CORPUS.gz if need be), recorded in the machine file
  if [ ! -e "$CORPUS" ] && [ -e "$CORPUS.gz" ]; then gzip -dc "$CORPUS.gz" > "$CORPUS"; fi
  [ -e "$CORPUS" ] || { echo "run-emu.sh: missing $CORPUS" >&2; exit 2; }
  echo "corpus $CORPUS $(wc -c < "$CORPUS") bytes, sha256 $(sha256sum "$CORPUS" | cut -c1-16)" >> "$OUT/machine-$mode.txt"
}
{
  date -u +"date %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
  echo "mode $mode; tacorun $(sha256sum "$TACORUN" | cut -c1-16)"
  ldd "$TACORUN" | grep "not found" || true
} > "$OUT/machine-$mode.txt" 2>&1
cat "$OUT/machine-$mode.txt"

case $mode in
check)
  "$TACORUN" train --check-emu > "$OUT/check-emu.txt" 2>&1; echo "check-emu: exit $?"; tail -1 "$OUT/check-emu.txt"
  "$TACORUN" train --check-codec > "$OUT/check-codec.txt" 2>&1; echo "check-codec: exit $?"; tail -1 "$OUT/check-codec.txt"
  ;;
repro)
  # one process per codec, all at once (the runs do not share state; the numerics do not depend on it)
  for c in $REPRO_CODECS; do
    d="$OUT/repro-$c"; mkdir -p "$d"
    # shellcheck disable=SC2086
    timeout "$LIMIT" "$TACORUN" train --variant attn=unfused --tp-emulate 2 --corpus "$KJV" --codec "$c" $REPRO_MODEL \
      --steps "$STEPS" --eval-every 200 --eval-batches 16 --out-dir "$d" > "$d/train.log" 2>&1 &
  done
  wait
  for c in $REPRO_CODECS; do tail -1 "$OUT/repro-$c/summary.csv"; done
  ;;
big)
  corpus
  IFS=';' read -r -a jobs <<< "$JOBS"
  running=0
  for j in "${jobs[@]}"; do
    if [ "$running" -ge "$PAR" ]; then wait -n; running=$((running - 1)); fi
    limit=$LIMIT
    if [ -n "$UNTIL" ]; then
      left=$((UNTIL - $(date +%s)))
      if [ "$left" -lt "$MINLEFT" ]; then echo "not started, $left s left before UNTIL: $j" | tee -a "$OUT/machine-$mode.txt"; continue; fi
      if [ "$left" -lt "$limit" ]; then limit=$left; fi
    fi
    read -r tp seed codecs extra <<< "$j"
    tag=""  # a job with --group G|auto in its extra options gets -gG / -gauto in its folder's name
    if [[ " ${extra:-} " =~ \ --group\ ([^ ]+) ]]; then tag="-g${BASH_REMATCH[1]}"; fi
    d="$OUT/big-tp$tp-s$seed-${codecs//,/+}$tag"; mkdir -p "$d"
    echo "$(date -u +%H:%M:%S) start $(basename "$d"), limit $limit s" >> "$OUT/machine-$mode.txt"
    # shellcheck disable=SC2086
    timeout "$limit" "$TACORUN" train --tp-emulate "$tp" --corpus "$CORPUS" --codec "$codecs" $BIG_MODEL --seed "$seed" \
      --steps "$STEPS" --eval-every 250 --eval-batches 16 --stats-every 250 ${extra:-} --out-dir "$d" > "$d/train.log" 2>&1 &
    running=$((running + 1))
  done
  wait
  for d in "$OUT"/big-*; do echo "$d: $(tail -n +2 "$d/summary.csv" 2> /dev/null | tr '\n' ' ')"; grep -h "tacorun train:" "$d/train.log" | head -2; done
  if [ -n "$PACK" ]; then tar -czf "$PACK" -C "$(dirname "$OUT")" "$(basename "$OUT")" && echo "packed $OUT into $PACK"; fi
  ;;
probe)
  corpus
  [ -e "$PROBE_REF" ] || { echo "run-emu.sh: PROBE_REF '$PROBE_REF' is not a file (a kept loss-<codec>.csv[.gz])" >&2; exit 2; }
  if ! [[ "$PROBE_STEPS" =~ ^[0-9]+$ ]] || [ "$PROBE_STEPS" -lt 1 ] || [ "$PROBE_STEPS" -ge 250 ]; then
    echo "run-emu.sh: PROBE_STEPS '$PROBE_STEPS' is not a whole number in [1, 249]" >&2; exit 2
  fi
  read -r tp seed codecs extra <<< "$PROBE_JOB"
  d="$OUT/probe-tp$tp-s$seed-${codecs//,/+}"; mkdir -p "$d"
  # shellcheck disable=SC2086
  timeout "$LIMIT" "$TACORUN" train --tp-emulate "$tp" --corpus "$CORPUS" --codec "$codecs" $BIG_MODEL --seed "$seed" \
    --steps "$PROBE_STEPS" --eval-every 250 --eval-batches 16 ${extra:-} --out-dir "$d" > "$d/train.log" 2>&1
  echo "probe: tacorun exit $?"
  # the kept rows up to PROBE_STEPS (the final validation of the probe is over the whole held-out part: not compared)
  gzip -cdf "$PROBE_REF" | awk -F, -v n="$PROBE_STEPS" -v ref="$PROBE_REF" -v tol="${PROBE_TOL:-1e-4}" '
    NR == FNR { if ($1 ~ /^[0-9]+$/ && $1 + 0 <= n) k[$1 "," $2] = $3; next }
    ($1 "," $2) in k { c++; d = $3 - k[$1 "," $2]; if (d < 0) d = -d
      if (d > tol * (k[$1 "," $2] < 0 ? -k[$1 "," $2] : k[$1 "," $2])) { bad++; if (bad <= 3) print "differs: step " $1 " " $2 " " $3 ", kept " k[$1 "," $2] } }
    END { printf "probe: %d losses compared with %s, %d differ\n", c, ref, bad; exit (c == 0 || bad > 0) }' - "$d/loss-${codecs//,/+}.csv" \
    | tee "$d/compare.txt"
  ;;
*) echo "run-emu.sh: mode '$mode' is not check, repro, big or probe" >&2; exit 2 ;;
esac

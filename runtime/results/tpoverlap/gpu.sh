#!/usr/bin/env bash
# gpu.sh — layout.tp_overlap_chunks on the 2 x H200 machine in one call
# (nothing built there): `tacorun execute --check` (includes the ovl2/f64 and
# ovl2/tp2 columns: TP2 with attn_out and fc2 in 2 row chunks against float64
# and against the unsplit TP2 run), then the GPT h4096 TP2 NVLink plan with
# k = 1 (experiments/plans/gpt-h4096-tp2-none.json), 2 and 4 (experiments/exec-feat/plans/),
# alternating k1 k2 k4 k1 k2 k4 ... ROUNDS times, each ITERS timed iterations
# after 2 warm-up and one profiled iteration (ops.txt per run, in ops.tgz).
# kKsN variants: K chunks with EXEC_TP_OVERLAP_SM_MARGIN=N (runtime/exec_step.c).
# usage: DEVBIN=.devbin/tpoverlap OUT=... runtime/results/tpoverlap/gpu.sh  (ROUNDS 3, ITERS 8)
set -u
cd "$(dirname "$0")/../../.."
D=${DEVBIN:-.devbin/tpoverlap}
OUT=${OUT:-/tmp/tpoverlap-out}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-8}
BIN=$D/tacorun
. experiments/validation/gpu_lib.sh # START, say, elapsed, mpi (uses BIN)
P=experiments/exec-feat/plans # (runtime/results/tpoverlap/plans/ when it ran)
# a variant: kK (K chunks) or kKsN (K chunks, the chunk GEMMs beside an all-reduce on the SMs less N:
# EXEC_TP_OVERLAP_SM_MARGIN=N)
plan_of() { local k=${1#k}; k=${k%%s*}; case $k in 1) echo experiments/plans/gpt-h4096-tp2-none.json ;; *) echo "$P/gpt-h4096-tp2-none-ovl$k.json" ;; esac; }
margin_of() { case $1 in *s*) echo "${1##*s}" ;; *) echo 0 ;; esac; }

say "tacorun: $(cat $D/COMMIT); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
mpi 2 100 execute --check --timeout 20 >"$OUT/check.txt" 2>&1
say "check rc=$? ($(elapsed) s): $(grep -E '^execute --check' "$OUT/check.txt" | tail -1)"
grep -E "relative L2 error|worst|FAILED" "$OUT/check.txt" | head -8 | tee -a "$SUMMARY"

for r in $(seq 1 "$ROUNDS"); do
  for k in ${KS:-k1 k2 k4 k2s16 k4s16}; do
    tag=$k-$r
    if [ "$(elapsed)" -gt "${BUDGET_S:-150}" ]; then say "skip $tag: $(elapsed) s used"; continue; fi
    say "start $tag $(date -u '+%Y/%m/%d %H:%M:%S')"
    echo "=== $tag ($(plan_of $k), $ITERS iterations after 2 warm-up) ===" >>"$OUT/timing.txt"
    EXEC_TP_OVERLAP_SM_MARGIN=$(margin_of $k) mpi 2 60 execute "$(plan_of $k)" --iters "$ITERS" --warmup 2 --timeout 30 --ops-csv "$OUT/measured/$tag.ops.txt" \
      >>"$OUT/timing.txt" 2>&1
    say "$tag rc=$? ($(elapsed) s): $(grep -E '^# iteration time' "$OUT/timing.txt" | tail -1 | sed 's/.*: median/median/'); $(grep -E 'MFU' "$OUT/timing.txt" | tail -1 | grep -oE 'MFU [0-9.]+%')"
  done
done
for f in "$OUT"/measured/*-1.ops.txt; do
  echo "== $(basename "$f")"
  grep -E "^(fwd\.(attn_out|fc2)|tpstream)" "$f"
done | tee -a "$SUMMARY"
tar -czf "$OUT/ops.tgz" -C "$OUT" measured && rm -rf "$OUT/measured"
say "done in $(elapsed) s"

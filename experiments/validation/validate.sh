#!/usr/bin/env bash
# validate.sh — predicted (predicted/<tag>.json, written by predict.sh BEFORE
# the GPU run) vs measured (measured/<tag>.json from exec_gpu.sh; a tag measured
# with the executor's built-in PP = 1 program is measured/<tag>-builtin.json)
# for every plan of plans.txt. Writes validation.txt (one row per plan:
# iteration time, error, codec speedup over the same plan uncompressed in the
# same transport: the tag with its codec replaced by none) and compare/<tag>.txt (`tacosim compare`, every figure).
# usage: experiments/validation/validate.sh [TACOSIM]   (default build-final/sim/tacosim)
# PRED_DIR, MEAS_DIR, COMPARE_DIR (default predicted, measured, compare) and
# TABLE (default validation.txt) pick other folders; WHEN says when the
# predictions were made (default "before the run").
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM=${1:-build-final/sim/tacosim}
V=experiments/validation
PD=$V/${PRED_DIR:-predicted} MD=$V/${MEAS_DIR:-measured} CD=$V/${COMPARE_DIR:-compare} TABLE=$V/${TABLE:-validation.txt}
mkdir -p $CD
field() { sed -n "s/.*\"$2\": *\([-0-9.eE+]*\).*/\1/p" "$1" | head -1; }
declare -A PRED MEAS PROG
while read -r tag plan transport ranks; do
  m=$MD/$tag.json prog=plan
  [ -f "$m" ] || { m=$MD/$tag-builtin.json; prog=builtin; }
  [ -f "$m" ] || { echo "skip $tag: not measured" >&2; continue; }
  "$SIM" compare "$PD/$tag.json" "$m" >"$CD/$tag.txt" 2>&1 || true
  PRED[$tag]=$(field "$PD/$tag.json" iteration_time_s)
  MEAS[$tag]=$(field "$m" iteration_time_s)
  PROG[$tag]=$prog
done < <(grep -v '^#' $V/plans.txt)
{
  echo "# predicted (tacosim simulate ${WHEN:-before the run}, calibration of the transport) vs measured (tacorun execute,"
  echo "# median) iteration time on 2 x H200; error = (predicted - measured) / measured; speedup = the same plan"
  echo "# uncompressed (tag with none for the codec) / this plan; program: what the executor ran (plan = the plan's own"
  echo "# program, builtin = the executor's PP = 1 program)"
  printf "# %-24s %-7s %-8s %12s %12s %8s %8s %8s %8s\n" tag transp program predicted_ms measured_ms err_pct \
    pred_sp meas_sp sp_err
  while read -r tag plan transport ranks; do
    [ -n "${MEAS[$tag]:-}" ] || continue
    # the same plan uncompressed: the codec in the tag replaced by none (tp2-taco-nvlink -> tp2-none-nvlink)
    base=$(echo "$tag" | sed -E 's/-(taco|caat)-/-none-/')
    awk -v t="$tag" -v tr="$transport" -v pg="${PROG[$tag]}" -v p="${PRED[$tag]}" -v m="${MEAS[$tag]}" \
      -v pb="${PRED[$base]:-0}" -v mb="${MEAS[$base]:-0}" 'BEGIN {
      err = 100 * (p - m) / m
      if (pb > 0 && mb > 0 && t ~ /-(taco|caat)-/) {
        ps = pb / p; ms = mb / m
        printf "  %-24s %-7s %-8s %12.1f %12.1f %+8.2f %8.3f %8.3f %+8.2f\n", t, tr, pg, 1e3 * p, 1e3 * m, err, ps, ms, 100 * (ps - ms) / ms
      } else
        printf "  %-24s %-7s %-8s %12.1f %12.1f %+8.2f %8s %8s %8s\n", t, tr, pg, 1e3 * p, 1e3 * m, err, "-", "-", "-"
    }'
  done < <(grep -v '^#' $V/plans.txt)
} >$TABLE
grep -v '^#' $TABLE | awk '{ e = $6 < 0 ? -$6 : $6; print e }' | sort -g |
  awk '{ v[++n] = $1 } END { med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2;
        printf "# %d plans: median |error| %.2f%%, max |error| %.2f%%\n", n, med, v[n] }' >>$TABLE
cat $TABLE

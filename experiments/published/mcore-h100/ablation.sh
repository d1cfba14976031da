#!/usr/bin/env bash
# ablation.sh — the error of each Megatron-Core r0.8.0 H100 row with the
# layout features of issue 22 added one at a time, from the plans as they
# were before them (the shipped plans with the fields below removed).
#
#   experiments/published/mcore-h100/ablation.sh [--tacosim PATH]
#
# Variants (each from the plans without the fields):
#   before          none of them (the plans as of issue 19)
#   +param-gather   layout.overlap_param_gather true (--overlap-param-gather)
#   +tp-overlap     layout.tp_comm_overlap true on the rows with TP > 1 (--tp-comm-overlap)
#   both            both: the shipped plans
# Errors: (predicted - published) / published TFLOP/s per GPU, FLOPs counted
# as ../run.sh counts them for this set (Megatron-LM core_v0.8.0). Prints a
# markdown table; simulations one at a time, default calibration.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/../../lib.sh" # ROOT TACOSIM
while [ $# -gt 0 ]; do
  case $1 in
    --tacosim) TACOSIM=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ablation.sh: unknown option \"$1\"" >&2; exit 2 ;;
  esac
done
[ -x "${TACOSIM:-}" ] || { echo "ablation.sh: no tacosim binary (--tacosim PATH)" >&2; exit 2; }
command -v jq > /dev/null || { echo "ablation.sh: jq is needed" >&2; exit 2; }
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
source "$HERE/set.conf"
variants="before +param-gather +tp-overlap both"
rows=$(awk -F, '/^#/ || !NF { next } !h { for (i = 1; i <= NF; i++) c[$i] = i; h = 1; next }
  { print $c["name"], $c["gpus"], $c["hidden"], $c["layers"], $c["batch"], $c["tflops_per_gpu"] }' "$HERE/published.csv")
printf '| plans |'
while read -r name _; do printf ' %s |' "$name"; done <<< "$rows"
printf ' median | max |\n|---|'
while read -r _; do printf -- '---|'; done <<< "$rows"
printf -- '---|---|\n'
for v in $variants; do
  errs=""
  while read -r name gpus h l B tf; do
    plan="$HERE/plans/mcore-$(echo "$name" | tr A-Z a-z).json"
    base='del(.layout.overlap_param_gather, .layout.tp_comm_overlap)'
    case $v in
      before) f="$base" ;;
      +param-gather) f="$base | .layout.overlap_param_gather = true" ;;
      +tp-overlap) f="$base | if .layout.tp > 1 then .layout.tp_comm_overlap = true else . end" ;;
      both) f="$base | .layout.overlap_param_gather = true | if .layout.tp > 1 then .layout.tp_comm_overlap = true else . end" ;;
    esac
    jq "$f" "$plan" > "$TMP/p.json"
    (cd "$ROOT" && "$TACOSIM" simulate "$TMP/p.json" --json "$TMP/r.json" > /dev/null 2> "$TMP/err") ||
      { echo "ablation.sh: $name $v failed:" >&2; tail -3 "$TMP/err" >&2; exit 1; }
    t=$(jq -r '.iteration_time_s' "$TMP/r.json")
    errs="$errs $(awk -v B="$B" -v s="$seq" -v l="$l" -v h="$h" -v V="$vocab" -v n="$gpus" -v t="$t" -v tp="$tf" \
      'BEGIN { F = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)); printf "%+.1f", 100 * (F / (t * n) / 1e12 - tp) / tp }')"
  done <<< "$rows"
  echo "$v $errs" | awk '{ printf "| %s |", $1; for (i = 2; i <= NF; i++) { printf " %s |", $i; a[i - 1] = $i < 0 ? -$i : $i }
    n = NF - 1; for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
    printf " %.1f | %.1f |\n", (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2), a[n] }'
done

#!/usr/bin/env bash
# table.sh — the published MoE rows (published.csv) predicted by tacosim, each plan as shipped and with
# its host_framework set to "executor" (the executor's launch costs instead of the framework's measured
# host time: the column before the framework model), side by side; writes table.txt beside this script.
#   experiments/published/moe/table.sh [--calibration FILE]
# Run from the repository root's build: TACOSIM (default build/sim/tacosim).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
TACOSIM=${TACOSIM:-$ROOT/build/sim/tacosim}
export TACOSIM_MODELS_DIR=${TACOSIM_MODELS_DIR:-$ROOT/models}
CAL=()
if [ "${1:-}" = "--calibration" ]; then CAL=(--calibration "$2"); fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# plan : published step time (s), the row of published.csv it predicts (the plan's description says which)
ROWS="qwen3-235b-a22b-256-h100-tp4ep8:29.0
qwen3-235b-a22b-256-h100-tp4ep8-16k:11.38
qwen3-235b-a22b-256-h100-tp2ep8-a2a:24.2
qwen3-235b-a22b-256-h100-tp2ep32:19.7
qwen3-235b-a22b-256-gb200-tp1ep8:25.87
mixtral-8x22b-128-h100-tp2ep8:4.27
mixtral-8x22b-128-h100-tp2ep8-drop:4.22"
run() { # plan json -> "iteration host_wait"
  (cd "$ROOT" && "$TACOSIM" simulate "$1" "${CAL[@]}" --json "$TMP/r.json" > /dev/null 2> "$TMP/err") ||
    { cat "$TMP/err" >&2; exit 1; }
  jq -r '"\(.iteration_time_s) \(.breakdown.host_wait_s // 0)"' "$TMP/r.json"
}
{
  echo "# Published MoE rows (published.csv) against tacosim simulate; $(date -u +%F) $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo +changes)"
  cal=${CAL[1]:-the cluster default}
  echo "# calibration: $cal; host: the plan's host_framework (shipped) or \"executor\""
  printf "%-36s %-14s %9s | %9s %7s %8s | %9s %7s %8s\n" plan host_framework pub_s exec_s err_% hostw_s shipped_s err_% hostw_s
  errs=""
  while IFS=: read -r name pub; do
    plan="$HERE/$name.json"
    fw=$(jq -r '.host_framework // "executor"' "$plan")
    jq '.host_framework = "executor"' "$plan" > "$TMP/exec.json"
    read -r te we < <(run "$TMP/exec.json")
    read -r ts ws < <(run "$plan")
    ee=$(awk -v t="$te" -v p="$pub" 'BEGIN { printf "%+.1f", (t / p - 1) * 100 }')
    es=$(awk -v t="$ts" -v p="$pub" 'BEGIN { printf "%+.1f", (t / p - 1) * 100 }')
    printf "%-36s %-14s %9.2f | %9.3f %7s %8.3f | %9.3f %7s %8.3f\n" "$name" "$fw" "$pub" "$te" "$ee" "$we" "$ts" "$es" "$ws"
    errs="$errs $ee:$es"
  done <<< "$ROWS"
  echo "# err_% = predicted / published step time - 1 (-: predicted fast)"
  stat() { # column of |errors| -> "median max"
    tr ' ' '\n' | grep . | tr -d '+-' | sort -g | awk '{ v[NR] = $1 } END {
      m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.1f %.1f\n", m, v[NR] }'
  }
  read -r m1 x1 < <(echo "$errs" | tr ' ' '\n' | cut -d: -f1 | stat)
  read -r m2 x2 < <(echo "$errs" | tr ' ' '\n' | cut -d: -f2 | stat)
  echo "# median |error| $m1 % (executor) -> $m2 % (shipped); max $x1 % -> $x2 % over $(echo $errs | wc -w) rows"
} | tee "$HERE/table.txt"

#!/usr/bin/env bash
# sim/compare_builds.sh OLD_TACOSIM [NEW_TACOSIM] [PLAN...] — the predicted
# iteration time of each plan (default: experiments/plans/*.json) by two
# tacosim binaries, side by side, with the relative difference and each one's
# wall time. For checking that a change to the simulator's speed leaves its
# predictions as they were (sim/RESULTS.md). Reduced mode, default calibration.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OLD="${1:?usage: compare_builds.sh OLD_TACOSIM [NEW_TACOSIM] [PLAN...]}"
NEW="${2:-$ROOT/build/sim/tacosim}"
shift $(( $# >= 2 ? 2 : 1 ))
PLANS=("$@")
[ ${#PLANS[@]} -gt 0 ] || PLANS=("$ROOT"/experiments/plans/*.json)
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "compare_builds.sh: $b is not executable" >&2; exit 1; }; done
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
# one plan by one binary: "iteration_s wall_s", or "failed(rc) wall_s"
one() {
  local bin="$1" plan="$2" out="$TMP/r.json" t0 t1 rc=0
  rm -f "$out"
  t0=$(date +%s.%N)
  "$bin" simulate "$plan" --json "$out" >/dev/null 2>"$TMP/err" || rc=$?
  t1=$(date +%s.%N)
  if [ "$rc" -eq 0 ] && [ -s "$out" ]; then
    python3 -c 'import json,sys; print("%.9g" % json.load(open(sys.argv[1]))["iteration_time_s"])' "$out"
  else
    echo "failed($rc)"
  fi
  python3 -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$t0" "$t1"
}
printf '%-34s %14s %14s %10s %8s %8s\n' plan old_iter_s new_iter_s diff old_wall new_wall
for plan in "${PLANS[@]}"; do
  # inference plans have no iteration time
  grep -q '"kind": *"inference"' "$plan" && continue
  mapfile -t o < <(one "$OLD" "$plan")
  mapfile -t n < <(one "$NEW" "$plan")
  diff=$(python3 -c 'import sys
try: a, b = float(sys.argv[1]), float(sys.argv[2]); print("%+.4f%%" % (100 * (b - a) / a) if a else "-")
except ValueError: print("-")' "${o[0]}" "${n[0]}")
  printf '%-34s %14s %14s %10s %8s %8s\n' "$(basename "$plan" .json)" "${o[0]}" "${n[0]}" "$diff" "${o[1]}" "${n[1]}"
done

#!/usr/bin/env bash
# sim/bench.sh [BUILD_DIR] — simulator speed benchmarks (printed, not asserted):
# wall and CPU time of one predicted iteration, pinned to one core, for the
# 1,024-GPU GPT-3 175B plan (target <= 2 s), its TACO variant, the 16,384-GPU
# plan (target <= 15 s), and the 64-GPU plan in full and reduced modes.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="${1:-$ROOT/build}"
TACOSIM="$BUILD/sim/tacosim"
CAL="$ROOT/calibration/h200-derived.json"
[ -x "$TACOSIM" ] || { echo "bench.sh: $TACOSIM not built" >&2; exit 1; }
PIN=""
command -v taskset >/dev/null && PIN="taskset -c 0"
printf '# %-28s %-8s %10s %8s %8s %10s %8s\n' plan mode iter_s wall_s cpu_s tokens/s MFU
run() {
  local plan="$1" mode="$2" out
  out="$(mktemp)"
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$out.time" $PIN "$TACOSIM" simulate "$ROOT/experiments/plans/$plan.json" \
    --calibration "$CAL" --mode "$mode" --json "$out" >/dev/null 2>&1
  t1=$(date +%s.%N)
  python3 - "$plan" "$mode" "$out" "$out.time" "$t0" "$t1" <<'PY'
import json, sys
plan, mode, res, tfile, t0, t1 = sys.argv[1:]
r = json.load(open(res))
u, s = map(float, open(tfile).read().split()[-2:])
print(f"  {plan:<28} {mode:<8} {r['iteration_time_s']:10.4f} {float(t1)-float(t0):8.2f} {u+s:8.2f} "
      f"{r['tokens_per_s']:10.0f} {100*r['mfu']:7.1f}%")
PY
  rm -f "$out" "$out.time"
}
run gpt3-175b-1024 reduced
run gpt3-175b-1024-taco reduced
run gpt3-175b-1024-caat reduced
run gpt3-175b-1024-taco-caat reduced
run gpt3-175b-16384 reduced
run gpt3-13b-64 reduced
run gpt3-13b-64 full

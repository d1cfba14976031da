#!/usr/bin/env bash
# experiments/host-launch/predict.sh [TACOSIM] — the predictions of runtime/RESULTS-exec.md "The host in
# the simulator" and experiments/published/moe/README.md "The host-bound hypothesis, modelled": the MoE
# plans of experiments/exec-moe/ with the shipped calibration, and the published Qwen3-235B plan with
# the calibration's host costs, PyTorch's measured ones, and a sweep of host_launch_us (a sensitivity,
# never shipped). Writes predicted/*.txt; ~3 min of CPU.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
SIM="${1:-$ROOT/build/sim/tacosim}"
OUT="$ROOT/experiments/host-launch/predicted"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$OUT"
with() { # PLAN KEY=VALUE... -> a copy of PLAN with those top-level fields
  local plan="$1"; shift
  python3 - "$plan" "$TMP/p.json" "$@" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for kv in sys.argv[3:]:
    k, v = kv.split("=")
    p[k] = float(v)
json.dump(p, open(sys.argv[2], "w"))
PY
  echo "$TMP/p.json"
}
iter() {
  "$SIM" simulate "$@" --json "$TMP/r.json" >/dev/null 2>&1
  python3 -c 'import json,sys; print("%.6f" % json.load(open(sys.argv[1]))["iteration_time_s"])' "$TMP/r.json"
}
{
  echo "# plan predicted_s (shipped calibration: host clock on)"
  for p in "$ROOT"/experiments/exec-moe/plans/*.json; do echo "$(basename "$p" .json) $(iter "$p")"; done
  t="$ROOT/experiments/exec-moe/plans/moe-tiny-1gpu.json"
  for L in 8 10 12; do echo "moe-tiny-1gpu host_launch_us=$L $(iter "$(with "$t" host_launch_us=$L)")"; done
} | tee "$OUT/exec-moe.txt"
q="$ROOT/experiments/published/moe/qwen3-235b-a22b-256-h100-tp4ep8.json"
{
  echo "# Qwen3-235B-A22B 256 H100 (94 layers, embedding and loss accounted as layers), predicted_s"
  echo "calibration $(iter "$q")"
  echo "pytorch host_launch_us=11.11 host_sync_us=22.75 $(iter "$(with "$q" host_launch_us=11.11 host_sync_us=22.75)")"
  for L in 20 30 40 60; do echo "host_launch_us=$L $(iter "$(with "$q" host_launch_us=$L)")"; done
} | tee "$OUT/qwen3.txt"

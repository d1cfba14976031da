#!/usr/bin/env bash
# experiments/moe-a2a/table.sh TACOSIM PLAN... — each plan simulated with --alltoall flows (the default) and
# --alltoall analytic (approximate): iteration time both ways, the analytic one's error, EP exposed both ways,
# CPU seconds (user + sys) both ways. Reduced mode, default calibration. experiments/RESULTS-search.md has
# the table of 2026-12-05.
set -euo pipefail
BIN="${1:?usage: table.sh TACOSIM PLAN...}"
shift
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
printf '%-46s %12s %12s %9s %9s %9s %8s %8s\n' plan flows_s analytic_s error ep_flows ep_anal cpu_fl cpu_an
for p in "$@"; do
  for m in flows analytic; do
    /usr/bin/time -f "%U %S" -o "$TMP/t.$m" "$BIN" simulate "$p" --alltoall "$m" --json "$TMP/r.$m.json" \
      >/dev/null 2>"$TMP/err.$m" || { echo "$(basename "$p" .json): $m failed: $(tail -1 "$TMP/err.$m")"; continue 2; }
  done
  python3 - "$p" "$TMP" <<'PY'
import json, os, sys
plan, tmp = sys.argv[1], sys.argv[2]
f = json.load(open(os.path.join(tmp, "r.flows.json")))
a = json.load(open(os.path.join(tmp, "r.analytic.json")))
cpu = lambda m: sum(map(float, open(os.path.join(tmp, "t." + m)).read().split()))
x, y = f["iteration_time_s"], a["iteration_time_s"]
print("%-46s %12.6f %12.6f %+8.3f%% %9.4f %9.4f %8.2f %8.2f" % (os.path.basename(plan)[:-5], x, y, 100 * (y - x) / x,
      f["breakdown"]["ep_exposed_s"], a["breakdown"]["ep_exposed_s"], cpu("flows"), cpu("analytic")))
PY
done

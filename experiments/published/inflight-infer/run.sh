#!/usr/bin/env bash
# run.sh — predicts the published in-flight batching rows of published.csv (sources in README.md) with tacosim and
# compares them with the published figures.
#
#   experiments/published/inflight-infer/run.sh [--tacosim PATH] [--work DIR]
#
# Each row whose predict column is yes has its plan in plans/<name>.json (an inference plan with an "inflight"
# object with the run's number of requests), simulated with the default calibration of its cluster (`tacosim
# simulate PLAN --json`): the output tokens/s of the TP group over the finite run of that many requests
# (`inflight.run.tokens_per_s`: the published unit, README.md "What each figure measures"), and the steady
# state's (`tokens_per_s`) beside it. Rows with predict "no: REASON" are listed with their reason. Writes
# table.txt here (error = predicted run / published - 1; the steady state's error, the batch in flight and the
# mean step; median and max |error| per source and GPU and over all rows). Nothing is fitted.
# Options (defaults in brackets):
#   --tacosim PATH   the simulator [build/sim/tacosim]
#   --work DIR       result JSON, printed report and stderr of each simulation [experiments/data/work/inflight-infer]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
. "$HERE/../set_opts.sh"
set_opts inflight-infer 2,14 "$@"
rows="$WORK/rows.csv"
: > "$rows"
grep -v '^#' "$HERE/published.csv" | tail -n +2 | while IFS=, read -r name src gpu model tp prompt generate pub unit predict; do
  if [ "$predict" != yes ]; then
    echo "$name,$src,$gpu,$tp,$prompt,$generate,$unit,$pub,,,,,$predict" >> "$rows"
    continue
  fi
  out="$WORK/$name"
  "$TACOSIM" simulate "$HERE/plans/$name.json" --json "$out.json" > "$out.txt" 2> "$out.err" ||
    { cat "$out.err" >&2; echo "run.sh: simulation of $name failed" >&2; exit 1; }
  pred=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
f = d["inflight"]
print("%.6g,%.6g,%.1f,%.6g" % (f["run"]["tokens_per_s"], d["tokens_per_s"], f["in_flight"], f["step_s"] * 1e3))' "$out.json")
  echo "$name,$src,$gpu,$tp,$prompt,$generate,$unit,$pub,$pred,yes" >> "$rows"
done
python3 - "$rows" "$HERE/.." <<'PY' | tee "$HERE/table.txt"
import csv, sys
sys.path.insert(0, sys.argv[2])
from error_summary import print_summary
rows = list(csv.reader(open(sys.argv[1])))
print("# Predicted (tacosim simulate, in-flight steady state, default calibration) against published in-flight batching")
print("# throughput (published.csv). error = predicted / published - 1; + where the prediction is the larger figure.")
print("# predicted: the finite run of the published number of requests; steady: the steady state (error beside it);")
print("# in flight: sequences in the steady state's batch; step: its mean engine step (= TPOT), ms.")
print("%-34s %-6s %-5s %3s %12s %10s %10s %8s %8s %9s %9s" % ("row", "source", "gpu", "tp", "isl/osl", "published",
      "predicted", "error", "steady", "in flight", "step ms"))
errs = {}
for name, src, gpu, tp, isl, osl, unit, pub, pred, steady, inflight, step, predict in rows:
    io = isl + "/" + osl
    if predict != "yes":
        print("%-34s %-6s %-5s %3s %12s %10s %10s  %s" % (name, src, gpu, tp, io, pub, "-", "not predicted (" + predict[4:] + ")"))
        continue
    e = float(pred) / float(pub) - 1
    errs.setdefault(src + " " + gpu, []).append(e)
    print("%-34s %-6s %-5s %3s %12s %10.0f %10.0f %+7.1f%% %+7.1f%% %9s %9.2f" % (name, src, gpu, tp, io, float(pub),
          float(pred), 100 * e, 100 * (float(steady) / float(pub) - 1), inflight, float(step)))
print_summary(errs)
PY

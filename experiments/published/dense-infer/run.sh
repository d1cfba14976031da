#!/usr/bin/env bash
# run.sh — predicts the published dense serving rows of published.csv (sources in README.md) with tacosim and
# compares them with the published figures.
#
#   experiments/published/dense-infer/run.sh [--tacosim PATH] [--work DIR]
#
# Each row whose predict column is yes has its plan in plans/<name>.json, simulated with the default calibration
# of its cluster (`tacosim simulate PLAN --json`). The prediction is turned into the published unit the way the
# benchmark measures (README.md, "What each figure measures"): tput_gpu (TensorRT-LLM gptSessionBenchmark from
# v0.6.1, per GPU) batch x generate / total_s / tp; tput_total (TensorRT-LLM v0.5.0, lmdeploy profile_generation)
# batch x generate / total_s; ftl (first token of a batch-1 request) ttft_s in ms; latency (vLLM benchmark_latency)
# total_s in s; total_s = TTFT + (generate - 1) x TPOT, one generate() call. Rows with predict "no: REASON" are listed with their reason. Writes table.txt here
# (error = predicted / published - 1; median and max |error| per source and GPU and over all rows). Nothing is fitted.
# Options (defaults in brackets):
#   --tacosim PATH   the simulator [build/sim/tacosim]
#   --work DIR       result JSON, printed report and stderr of each simulation [experiments/data/work/dense-infer]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
. "$HERE/../set_opts.sh"
set_opts dense-infer 2,16 "$@"
rows="$WORK/rows.csv"
: > "$rows"
grep -v '^#' "$HERE/published.csv" | tail -n +2 | while IFS=, read -r name src kind gpu model tp batch prompt generate pub unit predict; do
  if [ "$predict" != yes ]; then
    echo "$name,$src,$gpu,$kind,$unit,$pub,,$predict" >> "$rows"
    continue
  fi
  out="$WORK/$name"
  "$TACOSIM" simulate "$HERE/plans/$name.json" --json "$out.json" > "$out.txt" 2> "$out.err" ||
    { cat "$out.err" >&2; echo "run.sh: simulation of $name failed" >&2; exit 1; }
  pred=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
kind, tp, batch, generate = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if kind == "ftl": v = d["ttft_s"] * 1e3
elif kind == "tput_gpu": v = batch * generate / d["total_s"] / tp
elif kind == "tput_total": v = batch * generate / d["total_s"]
elif kind == "latency": v = d["total_s"]
else: sys.exit("run.sh: unknown kind " + kind)
print("%.6g" % v)' "$out.json" "$kind" "$tp" "$batch" "$generate")
  echo "$name,$src,$gpu,$kind,$unit,$pub,$pred,yes" >> "$rows"
done
python3 - "$rows" "$HERE/.." <<'PY' | tee "$HERE/table.txt"
import csv, sys
sys.path.insert(0, sys.argv[2])
from error_summary import print_summary
rows = list(csv.reader(open(sys.argv[1])))
print("# Predicted (tacosim simulate, default calibration) against published dense serving figures (published.csv).")
print("# error = predicted / published - 1; + where the prediction is the larger figure (a throughput predicted high,")
print("# a first-token latency predicted long).")
print("%-36s %-9s %-5s %-10s %10s %10s %8s" % ("row", "source", "gpu", "unit", "published", "predicted", "error"))
errs = {}
for name, src, gpu, kind, unit, pub, pred, predict in rows:
    if predict != "yes":
        print("%-36s %-9s %-5s %-10s %10s %10s  %s" % (name, src, gpu, unit, pub, "-", "not predicted (" + predict[4:] + ")"))
        continue
    e = float(pred) / float(pub) - 1
    errs.setdefault(src + " " + gpu, []).append(e)
    print("%-36s %-9s %-5s %-10s %10.2f %10.2f %+7.1f%%" % (name, src, gpu, unit, float(pub), float(pred), 100 * e))
print_summary(errs)
PY

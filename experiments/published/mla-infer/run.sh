#!/usr/bin/env bash
# run.sh — predicts the published MLA (DeepSeek-V3 / R1) rows of published.csv (sources in README.md) with
# tacosim and compares them with the published figures.
#
#   experiments/published/mla-infer/run.sh [--tacosim PATH] [--work DIR]
#
# Each row whose predict column is yes has its plan in plans/<name>.json, simulated with the default calibration
# of its cluster (`tacosim simulate PLAN --json`). A kernel row's prediction is the decode step's MLA attention
# (the result's mla.decode_attention_s, in ms; the plan has one layer and one decode step). Rows with predict
# "no: REASON" are listed with their reason. Writes table.txt here (error = predicted / published - 1). Nothing
# is fitted.
# Options (defaults in brackets):
#   --tacosim PATH   the simulator [build/sim/tacosim]
#   --work DIR       result JSON, printed report and stderr of each simulation [experiments/data/work/mla-infer]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
. "$HERE/../set_opts.sh"
set_opts mla-infer 2,14 "$@"
{
  echo "# Predicted (tacosim simulate, default calibration) against published MLA serving figures (published.csv)."
  echo "# error = predicted / published - 1."
  printf '%-26s %-8s %-6s %5s %10s %10s %8s\n' row source unit batch published predicted error
  grep -v '^#' "$HERE/published.csv" | tail -n +2 |
    while IFS=, read -r name kind batch prompt generate pub unit src predict; do
      if [ "$predict" != yes ]; then
        printf '%-26s %-8s %-6s %5s %10s %10s  not predicted (%s)\n' "$name" "$src" "$unit" "$batch" "$pub" - \
          "${predict#no: }"
        continue
      fi
      out="$WORK/$name"
      "$TACOSIM" simulate "$HERE/plans/$name.json" --json "$out.json" > "$out.txt" 2> "$out.err" ||
        { cat "$out.err" >&2; echo "run.sh: simulation of $name failed" >&2; exit 1; }
      python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
kind, name, src, unit, batch, pub = sys.argv[2:]
if kind == "kernel": v = d["mla"]["decode_attention_s"] * 1e3
else: sys.exit("run.sh: unknown kind " + kind)
print("%-26s %-8s %-6s %5s %10.4f %10.4f %+7.1f%%" % (name, src, unit, batch, float(pub), v, 100 * (v / float(pub) - 1)))' \
        "$out.json" "$kind" "$name" "$src" "$unit" "$batch" "$pub"
    done
} | tee "$HERE/table.txt"

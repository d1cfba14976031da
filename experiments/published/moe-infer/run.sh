#!/usr/bin/env bash
# run.sh — predicts the published MoE serving rows of published.csv (sources in README.md) with tacosim under
# both settings of the inference plan's "moe_kernel" and compares them with the published figures.
#
#   experiments/published/moe-infer/run.sh [--tacosim PATH] [--work DIR]
#
# Each row's plan is plans/<name>.json (written with "moe_kernel": "fused", what the published engines ran);
# the per-expert prediction simulates a copy with "per-expert". A kernel row's prediction is the decode
# step's routed experts' GEMMs (the JSON's decode.experts_gemm_s: the layer's fused MoE at `batch` tokens);
# a tpot row's the time per output token (tpot_s, ms); an e2e row's is the batch's whole time, TTFT + (generate - 1) x TPOT (total_s), which is what vLLM's
# benchmark_latency.py times. Writes table.txt here (error = predicted / published - 1). Nothing is fitted.
# Options (defaults in brackets):
#   --tacosim PATH   the simulator [build/sim/tacosim]
#   --work DIR       result JSON and stderr of each simulation [experiments/data/work/moe-infer]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
. "$HERE/../set_opts.sh"
set_opts moe-infer 2,15 "$@"
predict() { # PLAN KIND KERNEL: the prediction in the row's unit (ms for a kernel row, s for an e2e row)
  local plan="$WORK/$(basename "$1" .json)-$3.json"
  sed "s/\"moe_kernel\": \"fused\"/\"moe_kernel\": \"$3\"/" "$1" > "$plan"
  "$TACOSIM" simulate "$plan" --json "${plan%.json}.out" > /dev/null 2> "${plan%.json}.err" ||
    { cat "${plan%.json}.err" >&2; exit 1; }
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
k = sys.argv[2]
print("%.4f" % (d["decode"]["experts_gemm_s"] * 1e3 if k == "kernel" else d["tpot_s"] * 1e3 if k == "tpot" else d["total_s"]))' "${plan%.json}.out" "$2"
}
{
  printf '%-22s %-6s %5s %10s %10s %8s %10s %8s\n' row unit batch published fused error per-expert error
  grep -v '^#' "$HERE/published.csv" | tail -n +2 | while IFS=, read -r name kind batch prompt generate pub src; do
    f=$(predict "$HERE/plans/$name.json" "$kind" fused)
    p=$(predict "$HERE/plans/$name.json" "$kind" per-expert)
    python3 -c 'import sys
n, k, b, pub, f, p = sys.argv[1:]
pub, f, p = float(pub), float(f), float(p)
print("%-22s %-6s %5s %10.4f %10.4f %+7.1f%% %10.4f %+7.1f%%" % (n, "s" if k == "e2e" else "ms", b, pub, f,
      100 * (f / pub - 1), p, 100 * (p / pub - 1)))' "$name" "$kind" "$batch" "$pub" "$f" "$p"
  done
} | tee "$HERE/table.txt"

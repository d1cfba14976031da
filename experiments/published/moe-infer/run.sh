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
# benchmark_latency.py times; a tput_gpu row's (TensorRT-LLM gptSessionBenchmark, tok/s/GPU) batch x generate /
# total_s / tp; an ftl row's (its first-token latency, ms) ttft_s. Writes table.txt here (error = predicted /
# published - 1). Nothing is fitted.
# Options (defaults in brackets):
#   --tacosim PATH   the simulator [build/sim/tacosim]
#   --work DIR       result JSON, printed report and stderr of each simulation [experiments/data/work/moe-infer]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
. "$HERE/../set_opts.sh"
set_opts moe-infer 2,16 "$@"
predict() { # PLAN KIND KERNEL: the prediction in the row's unit (ms for kernel, tpot and ftl rows, s for an e2e
  # row, tok/s/GPU for a tput_gpu row)
  local plan="$WORK/$(basename "$1" .json)-$3.json"
  sed "s/\"moe_kernel\": \"fused\"/\"moe_kernel\": \"$3\"/" "$1" > "$plan"
  "$TACOSIM" simulate "$plan" --json "${plan%.json}.out" > "${plan%.json}.txt" 2> "${plan%.json}.err" ||
    { cat "${plan%.json}.err" >&2; exit 1; }
  python3 -c 'import json, sys
d, p, k = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3]
b, g, tp = p["batch"]["size"], p["batch"]["generate"], p["layout"]["tp"]
v = {"kernel": lambda: d["decode"]["experts_gemm_s"] * 1e3, "tpot": lambda: d["tpot_s"] * 1e3,
     "e2e": lambda: d["total_s"], "tput_gpu": lambda: b * g / d["total_s"] / tp, "ftl": lambda: d["ttft_s"] * 1e3}
print("%.4f" % v[k]())' "${plan%.json}.out" "$plan" "$2"
}
{
  printf '%-27s %-6s %5s %10s %10s %8s %10s %8s\n' row unit batch published fused error per-expert error
  grep -v '^#' "$HERE/published.csv" | tail -n +2 | while IFS=, read -r name kind batch prompt generate pub src; do
    f=$(predict "$HERE/plans/$name.json" "$kind" fused)
    p=$(predict "$HERE/plans/$name.json" "$kind" per-expert)
    python3 -c 'import sys
n, k, b, pub, f, p = sys.argv[1:]
pub, f, p = float(pub), float(f), float(p)
print("%-27s %-6s %5s %10.4f %10.4f %+7.1f%% %10.4f %+7.1f%%" % (n, {"e2e": "s", "tput_gpu": "tok/s"}.get(k, "ms"), b, pub, f,
      100 * (f / pub - 1), p, 100 * (p / pub - 1)))' "$name" "$kind" "$batch" "$pub" "$f" "$p"
  done
} | tee "$HERE/table.txt"

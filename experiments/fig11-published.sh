#!/usr/bin/env bash
# Figure 11: predicted against published TFLOP/s per GPU for published
# large-scale training runs (Narayanan et al. SC'21 Table 1 on A100, the
# Megatron-Core r0.8.0 weak-scaling table on H100, Meta's Llama 3 405B on
# H100, NVIDIA's DGX Cloud Benchmarking BF16 rows on GB200 and H100), one
# colour per GPU generation. experiments/published/run.sh does the work (simulations, the
# tables experiments/published/table.txt and SET/table.txt, the figure);
# experiments/published/README.md says where each figure comes from.
# Skipped while a cluster its plans name is not in topologies/.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_tacosim || exit 3
command -v jq > /dev/null || { skip fig11 "jq (apt-get install jq) to read result files"; exit 3; }
missing=""
for c in $(jq -r '.cluster' "$EXP"/published/*/plans/*.json | sort -u); do
  [ -f "$ROOT/topologies/$c.json" ] || missing="$missing $c"
done
if [ -n "$missing" ]; then
  skip fig11 "clusters not in topologies/:$missing"
  exit 3
fi
exec "$EXP/published/run.sh" --tacosim "$TACOSIM" --jobs "$JOBS"

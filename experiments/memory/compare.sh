#!/usr/bin/env bash
# The memory estimate (tacosim plan, the largest stage) against what the executor
# measured on the H200:
# - the gpt-h4096 validation plans (experiments/validation/plans.txt; memory_per_gpu
#   in experiments/validation/compare/<tag>.txt, the current validation run: the
#   "old" column is its "predicted", the estimate of that time, before fused
#   attention and the overheads);
# - the zoo validation plans on one GPU (experiments/validation/zoo/plans/, measured
#   in zoo run 10: experiments/validation/zoo/run10/<tag>.json.gz): recomputation
#   (none, selective, full), GPipe, GQA, RoPE and SwiGLU models; no "old" column.
# "+ s x s" adds what this executor keeps and fused-attention training does not:
# the softmax probabilities of every layer and activation slot it holds, and
# three score-sized scratch buffers (dP, scores, dS; runtime/exec/exec_model.c).
# "+ loss" further takes off what the executor's loss keeps less than Megatron-LM's:
# its one-pass cross-entropy writes the bf16 logits' gradient over the logits in the
# forward and keeps that (2 bytes per logit) where the model counts Megatron-LM's
# saved fp32 softmax (4 bytes; plan_head_held_bytes), for every micro-batch the run
# holds at once on the loss's stage: all of them under GPipe at PP 1, one under 1F1B.
# PP > 1 rows: not taken off (the executor's slots there wait for the slot fix).
# experiments/memory/gpipe_buffers.py lists both sides buffer by buffer.
# "+ codec" further adds what the executor's compressed collectives hold beyond the model's
# (plan/plan_memory_codec.c, plan/README.md "Codec buffers"): experiments/memory/codec_buffers.py
# mirrors the executor's allocations (the NCCL path's four wire buffers, the direct path's
# double-buffered staging, the bounce buffers, CAAT-Net's FP32 copy) for the transport the row
# ran on, less the model's encoded buffers (tacosim plan's note).
# Usage: experiments/memory/compare.sh [build/sim/tacosim]
set -euo pipefail
cd "$(dirname "$0")/../.."
T=${1:-build/sim/tacosim}

# row TAG PLAN MEASURED_GIB OLD_GIB|- TRANSPORT: one line of the table
row() {
  local tag=$1 plan=$2 meas=$3 old=$4 transport=$5 new extra summary codec
  summary=$("$T" plan "$plan")
  new=$(awk '/^  stage [0-9]/ && $NF == "%" {if ($8 > m) m = $8} END {print m}' <<<"$summary")
  # the executor's codec buffers less the model's (0 on one GPU)
  codec=$(awk -v x="$(python3 experiments/memory/codec_buffers.py "$plan" "$transport")" \
    '/encoded buffers,/ {m = $(NF - 2)} END {print x - m}' <<<"$summary")
  # executor's s x s buffers: micro x heads/tp x seq^2 x 2 bytes, (P buffers + 3) of them
  extra=$(python3 - "$plan" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
name = p["model"]
m = json.load(open(name if "/" in name or name.endswith(".json") else "models/%s.json" % name))
l, b = p["layout"], p["batch"]
tp, pp, dp = l["tp"], l["pp"], l["dp"]
layers = p.get("layers_override") or m["layers"]
micros = b["global"] // (b["micro"] * dp)
slots = micros if pp > 1 or p.get("schedule", "1f1b") == "gpipe" else 1  # nslots (exec_model.c)
# P: one per layer and slot without recomputation, one shared by all with it
held = layers // pp * slots if l.get("recompute", "none") == "none" else 1
score = b["micro"] * m["heads"] // tp * b["seq"] ** 2 * 2
# the loss: 2 bytes per logit less, for each micro-batch held on the loss's stage (PP 1 only)
vocab = -(-m["vocab"] // (128 * tp)) * 128  # per rank, padded to 128 x tp
held_loss = (micros if p.get("schedule", "1f1b") == "gpipe" else 1) if pp == 1 else 0
print((held + 3) * score / 2 ** 30, -2 * b["micro"] * b["seq"] * vocab * held_loss / 2 ** 30)
PY
)
  awk -v t="$tag" -v o="$old" -v m="$meas" -v n="$new" -v x="${extra% *}" -v l="${extra#* }" -v c="$codec" \
    'BEGIN {printf "%-36s %9.2f %9s %9.2f %+7.1f%% %10.2f %+7.1f%% %9.2f %+7.1f%% %9.2f %+7.1f%%\n", t, m, o == "-" ? "-" : sprintf("%.2f", o), n,
            100*(n/m-1), n+x, 100*((n+x)/m-1), n+x+l, 100*((n+x+l)/m-1), n+x+l+c, 100*((n+x+l+c)/m-1)}'
}

printf "%-36s %9s %9s %9s %8s %10s %8s %9s %8s %9s %8s\n" tag measured old new "new err" "+ s x s" "err" "+ loss" "err" "+ codec" "err"
grep -v '^#' experiments/validation/plans.txt | while read -r tag plan transport _; do
  c=experiments/validation/compare/$tag.txt
  [ -f "$c" ] || continue
  read -r old meas < <(awk '/^memory_per_gpu/ {print $2/2^30, $3/2^30}' "$c")
  row "$tag" "$plan" "$meas" "$old" "$transport"
done
for plan in experiments/validation/zoo/plans/*.json; do
  tag=$(basename "$plan" .json)
  m=experiments/validation/zoo/run10/$tag.json.gz
  [ -f "$m" ] || continue
  meas=$(gzip -dc "$m" | python3 -c 'import json, sys; print(json.load(sys.stdin)["memory_per_gpu_bytes"] / 2**30)')
  row "zoo/$tag" "$plan" "$meas" - nvlink
done

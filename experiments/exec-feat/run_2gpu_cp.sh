#!/usr/bin/env bash
# run_2gpu_cp.sh — context parallelism (issue 22) on the 2 x H200 machine, what of it runs today:
#   1. the ring attention's kernels on one GPU, forward AND backward (runtime/ops/cp_attention.cu:
#      each CP rank's block attention, log-sum-exp combine, dQ and the dK/dV accumulators handed
#      round the ring), against float64 (tests/test_cp_attention_gpu.cu; the backward was checked
#      only on the CPU (--host) when this script was written);
#   2. `tacorun execute` on a CP 2 plan of 2 ranks: still refused (exit 2, layout.context_parallel_size
#      named), and with TACO on the KV ring refused naming codec.cp.kind: the 2-rank ring in the
#      executor (NCCL send/recv of KV blocks, CP gradient all-reduce, the loss over both ranks) is
#      NOT IMPLEMENTED, so no CP plan is timed and no `execute --check` of CP runs here.
# Run from the repository root with BIN (tacorun of the merged main) and OUT set; builds nothing.
# TEST_CP: the kernel test binary [$(dirname BIN)/../tests/test_cp_attention_gpu].
# Writes $OUT/summary.txt and $OUT/cp_kernels.txt. At most ~70 s of wall time.
set -u
: "${BIN:?BIN=path to tacorun}" "${OUT:?OUT=output folder}"
TEST_CP=${TEST_CP:-$(dirname "$BIN")/../tests/test_cp_attention_gpu}
source experiments/validation/gpu_lib.sh
export TACOSIM_MODELS_DIR=$PWD/models TACOSIM_TOPOLOGIES_DIR=$PWD/topologies
say "run_2gpu_cp.sh $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)"

# 1. the kernels, forward and backward, on GPU 0
if [ -x "$TEST_CP" ]; then
  CUDA_VISIBLE_DEVICES=0 timeout 60 "$TEST_CP" >"$OUT/cp_kernels.txt" 2>&1
  rc=$?
  say "cp kernels (fwd 24 cases + bwd 12 cases, test_cp_attention_gpu): rc $rc"
  grep -E '^(PASS|FAIL)' "$OUT/cp_kernels.txt" | tee -a "$SUMMARY" >/dev/null
  grep -E '^(ok|FAIL) +bwd' "$OUT/cp_kernels.txt" | tee -a "$SUMMARY" >/dev/null
else
  say "cp kernels: $TEST_CP not found (set TEST_CP): NOT RUN"
fi

# 2. the executor on a CP 2 plan: the refusal and the field it names (no GPU touched)
plan=$(mktemp /tmp/cp2-plan.XXXXXX.json)
for codec in none taco; do
  extra=""
  [ $codec = taco ] && extra=', "codec": { "cp": { "kind": "taco", "group": 128, "fp8": "e4m3" } }'
  cat >"$plan" <<JSON
{ "schema": 1, "model": "gpt-tiny", "cluster": "h200x2-nvlink",
  "layout": { "dp": 1, "tp": 1, "pp": 1, "context_parallel_size": 2 },
  "batch": { "micro": 1, "global": 1, "seq": 256 }, "schedule": "1f1b",
  "hidden_dropout": 0, "attention_backend": "executor", "bias_fusion": false $extra }
JSON
  timeout 20 "$BIN" execute "$plan" >"$plan.log" 2>&1
  rc=$?
  say "execute cp 2 (codec.cp $codec): exit $rc: $(grep -m1 -E 'context_parallel_size|codec\.cp' "$plan.log" || tail -1 "$plan.log")"
  rm -f "$plan.log"
done
rm -f "$plan"
say "total wall $(elapsed) s"

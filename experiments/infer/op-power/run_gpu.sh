#!/usr/bin/env bash
# run_gpu.sh — on one H100 or H200, from the repository root, building nothing (BIN: a tacorun built on the CPU
# machine, its libraries in LIB), the two measurements the prefill-at-one-clock model is held against, on one card:
#  1. the power phase with the prefill-sized GEMMs and the executor's prefill attention shapes
#     (calibration/power/prefill_ops.sh), back to back and (the `amix-` rows) each attention mixed with the
#     reference GEMM (calibration/power/README.md; ~130 s), for
#     calibration/merge_op_power.py;
#  2. the GPU's 26 inference validation plans (experiments/infer/v3/plans on an H200,
#     experiments/validation/h100/infer-plans on an H100) with `tacorun execute --decode-graph`, their TTFT and TPOT
#     for compare.py.
# Outputs in OUT: gpu.txt, summary.txt, power.json, power.tsv, power.log, infer.tgz (measured/*.json, the logs).
set -u
OUT=${OUT:-/tmp/op-power}
. scripts/gpu_env.sh
case "$(head -1 "$OUT/gpu.txt")" in
  *H200*) PLANS=experiments/infer/v3/plans ;;
  *H100*) PLANS=experiments/validation/h100/infer-plans ;;
  *) say "not an H100 or H200: $(head -1 "$OUT/gpu.txt")"; exit 0 ;;
esac
say "gpu: $(head -1 "$OUT/gpu.txt")"
timeout 240 "$BIN" calibrate --only power --power-json "$OUT/power.json" --power-tsv "$OUT/power.tsv" \
  $(calibration/power/prefill_ops.sh) > "$OUT/power.log" 2>&1
say "power rc=$? ($(el) s): $(grep -c '^amix-' "$OUT/power.tsv" 2> /dev/null) amix rows"
I=$OUT/infer
infer_plans "$I" $PLANS
say "plans measured: $(ls "$I/measured" | wc -l)"
tar -czf "$OUT/infer.tgz" -C "$OUT" infer && rm -rf "$I"
say "done in $(el) s"

#!/bin/bash
# Predicts the inference validation plans of decode attention v3 (Llama-3 8B, Qwen2.5 7B and 14B,
# TP 1; plans/*.json) with tacosim simulate on the shipped default calibration, through
# experiments/infer/fp8/predict.sh. Run before the measured run and commit.
# usage: experiments/infer/v3/predict.sh [OUTD (experiments/infer/v3/predicted)] [SIMULATE OPTIONS... (none)]
#        (SIM= tacosim, default build/sim/tacosim); the runs were timed with --decode-graph, so
#        `experiments/infer/v3/predict.sh experiments/infer/v3/graph/predicted --decode graph` prices them so
#        (experiments/infer/v3/README.md, "The decode step as a CUDA graph")
set -eu
exec "$(dirname "$0")/../fp8/predict.sh" "${1:-experiments/infer/v3/predicted}" experiments/infer/v3/plans "${@:2}"

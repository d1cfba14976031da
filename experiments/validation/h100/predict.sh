#!/usr/bin/env bash
# predict.sh — the H100 validation's predictions, written before the GPU run: the 10 training plans
# (plans/: the zoo plans of experiments/validation/zoo on the h100x8-nvswitch cluster) into predicted/,
# the 26 inference plans (infer-plans/: experiments/infer/v3's, likewise) with --decode graph (the run
# times CUDA-graph decode steps) into predicted-infer/; tacosim's default calibration for an H100-SXM
# cluster (calibration/h100-sxm-nvlink.json). usage: experiments/validation/h100/predict.sh [TACOSIM]
set -eu
cd "$(dirname "$0")/../../.."
SIM=${1:-build/sim/tacosim}
ZOO_DIR=experiments/validation/h100 WHEN="before the H100 run" experiments/validation/zoo/predict.sh "$SIM"
SIM=$SIM experiments/infer/fp8/predict.sh experiments/validation/h100/predicted-infer experiments/validation/h100/infer-plans --decode graph

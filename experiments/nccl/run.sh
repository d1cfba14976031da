#!/usr/bin/env bash
# The NCCL model (sim/sim_nccl.c) against published nccl-tests figures
# (experiments/nccl/data/, each file names its source) and against every
# measured point of the three 2 x H200 calibration curves; markdown on stdout
# (the tables of experiments/nccl/RESULTS.md). Needs the CPU build in build/.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake --build build --target bench_nccl_model >/dev/null
build/tests/bench_nccl_model .

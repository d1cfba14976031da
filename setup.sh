#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install dependencies, build, and
# run the main job on the shipped defaults (predict GPT-3 175B on the
# 1,024-GPU H200 cluster, TP8 PP8 DP16, with and without TACO).
set -euo pipefail
cd "$(dirname "$0")"
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
scripts/main-job.sh

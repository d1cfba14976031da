#!/usr/bin/env bash
# Installs what tacosim needs on Debian 12 (run as root or with sudo).
# The CUDA toolkit (nvcc, cuBLAS, NCCL) is optional: without it only the CPU
# half (plan, simulator, references, tests) is built.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake pkg-config \
  libsimgrid-dev libjansson-dev libcunit1-dev libopenmpi-dev openmpi-bin libtcmalloc-minimal4 \
  gnuplot-nox pngquant jq clang libclang-rt-14-dev bible-kjv bible-kjv-text xz-utils >/dev/null

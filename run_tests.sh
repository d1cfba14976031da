#!/usr/bin/env bash
# Runs every test: the normal build, an ASan+UBSan build of the CPU code, and
# a short libFuzzer run of each JSON loader. GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")"
JOBS="$(nproc)"
echo "== build and test (release) =="
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"
echo "== build and test (ASan + UBSan, CPU code) =="
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTACOSIM_SANITIZE=ON -DTACOSIM_CUDA=OFF >/dev/null
cmake --build build-asan -j"$JOBS"
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$JOBS" -LE nosan
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz the JSON loaders =="
  scripts/fuzz.sh 20
fi
echo "all tests passed"

#!/usr/bin/env bash
# scripts/fuzz.sh SECONDS — builds every libFuzzer target (CMake targets named
# fuzz_*) in build-fuzz with clang, ASan and UBSan, runs each for SECONDS, and
# fails if any of them finds a crash, a leak, undefined behaviour or a hang.
#
# Adding a target for a new loader takes three steps, none of them here:
#   1. tests/fuzz/fuzz_<what>.c with LLVMFuzzerTestOneInput() calling your
#      *_from_json_text() (see tests/fuzz/fuzz_model.c);
#   2. in your tests/<module>.cmake:
#        if(TACOSIM_FUZZ)
#          include(${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz.cmake)
#          tacosim_add_fuzzer(fuzz_<what> fuzz/fuzz_<what>.c <your library>)
#        endif()
#   3. seed inputs (valid files) in tests/fuzz/corpus/fuzz_<what>/, and
#      optionally a dictionary in tests/fuzz/fuzz_<what>.dict.
# New inputs libFuzzer finds go to build-fuzz/corpus/<target>/ (not the source
# tree); a crashing input is saved as build-fuzz/artifacts/<target>-crash-*.
set -euo pipefail
SECS="${1:-20}"
case "$SECS" in '' | *[!0-9]*) echo "usage: $0 SECONDS" >&2; exit 2 ;; esac
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$ROOT/build-fuzz"
CC_FUZZ="${CC_FUZZ:-$(command -v clang || command -v clang-14 || true)}"
if [ -z "$CC_FUZZ" ]; then
  echo "fuzz.sh: clang is required (libFuzzer)" >&2
  exit 1
fi

# The libraries are instrumented too, so libFuzzer sees their coverage.
SAN_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
mkdir -p "$BUILD"
CC="$CC_FUZZ" cmake -S "$ROOT" -B "$BUILD" -DCMAKE_C_COMPILER="$CC_FUZZ" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTACOSIM_FUZZ=ON -DTACOSIM_CUDA=OFF -DCMAKE_C_FLAGS="$SAN_FLAGS" >"$BUILD/configure.log" 2>&1 || {
  cat "$BUILD/configure.log" >&2
  exit 1
}

mapfile -t TARGETS < <(cmake --build "$BUILD" --target help | grep -oE '\bfuzz_[A-Za-z0-9_]+' | sort -u)
if [ "${#TARGETS[@]}" -eq 0 ]; then
  echo "fuzz.sh: no fuzz_* targets" >&2
  exit 1
fi
cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}"

mkdir -p "$BUILD/artifacts" "$BUILD/logs"
# LeakSanitizer cannot run where ptrace is forbidden (some containers); then
# fuzz without leak detection rather than fail on every target.
LEAKS=1
probe="$(find "$BUILD" -type f -name "${TARGETS[0]}" -perm -u+x | head -n 1)"
empty="$BUILD/artifacts/empty-input"
: >"$empty"
if [ -n "$probe" ] && ASAN_OPTIONS=detect_leaks=1 "$probe" "$empty" 2>&1 |
   grep -q "LeakSanitizer has encountered a fatal error"; then
  echo "fuzz.sh: LeakSanitizer does not work here; fuzzing without leak detection" >&2
  LEAKS=0
fi
failed=()
for t in "${TARGETS[@]}"; do
  exe="$(find "$BUILD" -type f -name "$t" -perm -u+x | head -n 1)"
  if [ -z "$exe" ]; then
    echo "fuzz.sh: $t was not built" >&2
    failed+=("$t")
    continue
  fi
  work="$BUILD/corpus/$t"
  mkdir -p "$work"
  args=(-max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1
        -artifact_prefix="$BUILD/artifacts/$t-")
  [ -f "$ROOT/tests/fuzz/$t.dict" ] && args+=(-dict="$ROOT/tests/fuzz/$t.dict")
  dirs=("$work")
  [ -d "$ROOT/tests/fuzz/corpus/$t" ] && dirs+=("$ROOT/tests/fuzz/corpus/$t")
  printf '%-20s %ss ... ' "$t" "$SECS"
  log="$BUILD/logs/$t.log"
  if ASAN_OPTIONS="detect_leaks=$LEAKS:abort_on_error=0" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
     timeout $((SECS + 120)) "$exe" "${args[@]}" "${dirs[@]}" >"$log" 2>&1; then
    runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')"
    echo "ok ($runs inputs)"
  else
    echo "FAILED (log: $log)"
    tail -n 40 "$log" >&2
    failed+=("$t")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: ${#TARGETS[@]} target(s) ran ${SECS}s each without a failure"

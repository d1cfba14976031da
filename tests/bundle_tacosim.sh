#!/usr/bin/env bash
# bundle_tacosim.sh TACOSIM SOURCE_DIR — the bundle of scripts/bundle-tacosim.sh
# runs where SimGrid is not installed: through its own dynamic loader and
# libraries, from another directory, with the zoo named by TACOSIM_MODELS_DIR
# and TACOSIM_TOPOLOGIES_DIR; its prediction equals the installed binary's.
set -euo pipefail
sim=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
XZ_OPT=-0 "$src/scripts/bundle-tacosim.sh" "$sim" "$tmp/bundle.tar.xz" >/dev/null # fastest xz: the test checks the contents
mkdir "$tmp/b"
tar -xJf "$tmp/bundle.tar.xz" -C "$tmp/b"
loader=$(ls "$tmp"/b/ld-linux* | head -1)
plan=$src/experiments/plans/gpt-h4096-tp2-none-shm.json
cal=$src/calibration/h200-shm.json
want=$("$sim" simulate "$plan" --calibration "$cal" | awk '/^iteration/ {print $2}')
got=$(cd "$tmp" && env -i TACOSIM_MODELS_DIR="$src/models" TACOSIM_TOPOLOGIES_DIR="$src/topologies" \
  "$loader" --library-path "$tmp/b" "$tmp/b/tacosim" simulate "$plan" --calibration "$cal" | awk '/^iteration/ {print $2}')
echo "iteration: installed $want s, bundled $got s ($(ls "$tmp/b" | wc -l) files in the bundle)"
[ -n "$want" ] && [ "$want" = "$got" ]

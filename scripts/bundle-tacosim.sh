#!/usr/bin/env bash
# bundle-tacosim.sh — tacosim with the shared libraries it links (SimGrid and
# its dependencies, the C and C++ runtimes) and the dynamic loader, as one
# .tar.xz that runs on a Linux x86-64 machine without SimGrid (the GPU machine:
# experiments/validation/exec_gpu.sh, stage predict).
# usage: scripts/bundle-tacosim.sh TACOSIM OUT.tar.xz
set -euo pipefail
sim=$1 out=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$sim" "$dir/tacosim"
ldd "$sim" | awk '/=> \//{print $3} $1 ~ /^\/lib/{print $1}' | sort -u | while read -r lib; do
  cp -L "$lib" "$dir/"
done
git -C "$(dirname "$0")/.." rev-parse --short HEAD >"$dir/COMMIT" 2>/dev/null || echo unknown >"$dir/COMMIT"
tar -cJf "$out" -C "$dir" .
echo "$out: $(du -h "$out" | cut -f1), $(ls "$dir" | wc -l) files"

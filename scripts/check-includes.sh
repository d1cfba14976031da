#!/usr/bin/env bash
# check-includes.sh — the arrows between the module folders, read from the
# #include "..." lines of every tracked C/CUDA source, and a check that they
# point one way only (no cycle between folders) and only where ARCHITECTURE.md
# allows. A header is looked up by name in the including folder first, then
# in the folders below; tests/ and fuzz targets may include anything. A folder
# inside a module that has a row of its own in the table (runtime/exec, ...) is
# a module of its own: runtime/tacorun.c is the module runtime.
#
#   scripts/check-includes.sh          check; prints the folder graph; exit 1 on a cycle or a
#                                      forbidden arrow (naming the file and line)
#   scripts/check-includes.sh --dot    the graph as Graphviz dot
set -euo pipefail
cd "$(dirname "$0")/.."
git rev-parse --git-dir > /dev/null 2>&1 || { echo "check-includes: not a git checkout: skipped"; exit 77; }

# Allowed arrows (folder -> folders it may include from), as in ARCHITECTURE.md.
declare -A ALLOWED=(
  [common]=""
  [models]="common"
  [topologies]="common"
  [schema]="common"
  [plan]="models topologies schema common"
  [sim]="plan models topologies schema common"
  [kernels]="common"
  [runtime]="runtime/exec runtime/infer runtime/calibrate runtime/bench runtime/train"
  [runtime/ops]="common"
  [runtime/nccl]="kernels schema common"
  [runtime/exec]="runtime/ops runtime/nccl kernels plan models topologies schema common"
  [runtime/infer]="runtime/ops runtime/nccl kernels plan models topologies schema common"
  [runtime/calibrate]="runtime/infer runtime/ops runtime/nccl kernels plan models topologies schema common"
  [runtime/bench]="runtime/ops runtime/nccl kernels models schema common"
  [runtime/train]="runtime/exec runtime/ops runtime/nccl kernels plan models topologies schema common"
  [calibration]="schema common"
  [experiments]="sim plan models topologies schema common"
  [dev]="runtime/ops kernels models common"
)

mode=${1:-check}
files=$(git ls-files --cached --others --exclude-standard '*.c' '*.h' '*.cu' '*.cuh' | grep -v '^tests/')
# header name -> the folders that hold it
declare -A HOME_OF
# module_of PATH: sets `top` to the module that holds PATH (its first folder, or its first two
# when the table has a row for them).
module_of() {
  top=${1%%/*}
  local rest=${1#*/}
  if [[ $rest == */* && -n "${ALLOWED[$top/${rest%%/*}]+set}" ]]; then top=$top/${rest%%/*}; fi
}
for f in $(git ls-files --cached --others --exclude-standard '*.h' '*.cuh'); do
  module_of "$f"
  b=${f##*/}
  HOME_OF[$b]="${HOME_OF[$b]:-} $top"
done

declare -A EDGES
bad=0
while IFS=: read -r file line inc; do
  module_of "$file"
  name=${inc##*/}
  homes=${HOME_OF[$name]:-}
  [ -n "$homes" ] || continue # a system or generated header
  # the including folder's own copy wins
  if [[ " $homes " == *" $top "* ]]; then continue; fi
  for h in $homes; do
    EDGES["$top -> $h"]=1
    if [[ " ${ALLOWED[$top]:-} " != *" $h "* ]]; then
      echo "check-includes: $file:$line: $top/ includes \"$inc\" from $h/: not an allowed arrow" >&2
      bad=1
    fi
  done
done < <(grep -n -H -o -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' $files |
  sed -E 's/^([^:]+):([0-9]+):.*"([^"]+)"/\1:\2:\3/')

if [ "$mode" = --dot ]; then
  echo "digraph folders {"
  for e in "${!EDGES[@]}"; do echo "  ${e// -> / -> };"; done | sort
  echo "}"
  exit 0
fi

# cycle check over the folder graph (depth-first search)
declare -A STATE
cycle=""
visit() {
  local n=$1 e
  STATE[$n]=1
  for e in "${!EDGES[@]}"; do
    [ "${e%% -> *}" = "$n" ] || continue
    local m=${e##* -> }
    if [ "${STATE[$m]:-0}" = 1 ]; then cycle="$n -> $m"; return; fi
    [ "${STATE[$m]:-0}" = 0 ] && visit "$m"
    [ -z "$cycle" ] || return
  done
  STATE[$n]=2
}
for e in "${!EDGES[@]}"; do
  n=${e%% -> *}
  [ "${STATE[$n]:-0}" = 0 ] && visit "$n"
  [ -z "$cycle" ] || break
done
printf '%s\n' "${!EDGES[@]}" | sort
if [ -n "$cycle" ]; then
  echo "check-includes: cycle between folders through $cycle" >&2
  exit 1
fi
[ "$bad" = 0 ] || exit 1
echo "check-includes: $(printf '%s\n' "${!EDGES[@]}" | wc -l) arrows between folders, no cycle, all allowed"

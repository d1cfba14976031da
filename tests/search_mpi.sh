#!/bin/sh
# search_mpi.sh MPIEXEC SEARCH_CLI — `tacosim search` under mpirun -np 2
# prints the ranking that one process prints (the lines that differ by
# design, times and the worker count, removed), and spreads its simulations
# over both processes ("in each of 2 MPI processes").
set -u
mpiexec=$1 cli=$2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
args="--model gpt3-1.3b --cluster h200x2-socket --global-batch 16 --max-micro 4 --simulate 4 --top 3 --no-progress"
"$cli" $args --jobs 1 --json "$dir/one.json" > "$dir/one.txt" || { echo "one process failed"; exit 1; }
"$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$cli" $args --jobs 1 --json "$dir/two.json" > "$dir/two.txt" 2> "$dir/two.err" ||
  { echo "mpirun failed"; cat "$dir/two.err"; exit 1; }
grep -q "in each of 2 MPI processes" "$dir/two.txt" || { echo "not spread over 2 processes:"; cat "$dir/two.txt"; exit 1; }
strip() { grep -v -e '^time ' -e '^simulated ' "$1"; }
strip "$dir/one.txt" > "$dir/one.cmp"
strip "$dir/two.txt" > "$dir/two.cmp"
if ! diff "$dir/one.cmp" "$dir/two.cmp"; then echo "rankings differ"; exit 1; fi
lines=$(grep -c 'x$' "$dir/one.cmp")
[ "$lines" -ge 3 ] || { echo "too few rows ($lines)"; cat "$dir/one.txt"; exit 1; }
echo "same ranking under mpirun -np 2 ($lines rows and speedups compared)"

#!/bin/sh
# search_mpi.sh MPIEXEC SEARCH_CLI — `tacosim search` under mpirun -np 2
# spreads its simulations over both processes ("in each of 2 MPI processes")
# and prints what one process prints: with --exhaustive the whole report (the
# time, worker and simulation-CPU lines removed: measurements), with pruning the ranked rows.
set -u
mpiexec=$1 cli=$2
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
args="--model gpt3-1.3b --cluster h200x2-socket --global-batch 16 --max-micro 4 --simulate 4 --top 3 --no-progress --jobs 1"
run2() { "$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$cli" $args "$@" 2> "$dir/err" || { echo "mpirun failed"; cat "$dir/err"; exit 1; }; }
"$cli" $args --exhaustive > "$dir/one.txt" || { echo "one process failed"; exit 1; }
run2 --exhaustive > "$dir/two.txt"
run2 > "$dir/two-pruned.txt"
for f in two two-pruned; do
  grep -q "in each of 2 MPI processes" "$dir/$f.txt" || { echo "$f: not spread over 2 processes:"; cat "$dir/$f.txt"; exit 1; }
done
strip() { grep -v -e '^time ' -e '^simulated ' -e '^ *--exhaustive:' -e '^ *simulations: .* CPU' "$1"; }
strip "$dir/one.txt" > "$dir/one.cmp"
strip "$dir/two.txt" > "$dir/two.cmp"
diff "$dir/one.cmp" "$dir/two.cmp" || { echo "reports differ (--exhaustive)"; exit 1; }
rows() { grep -E '^ +[0-9]+  tp' "$1"; }
rows "$dir/one.txt" > "$dir/one.rows"
rows "$dir/two-pruned.txt" > "$dir/two.rows"
diff "$dir/one.rows" "$dir/two.rows" || { echo "ranked rows differ (pruned, 2 processes)"; exit 1; }
n=$(wc -l < "$dir/one.rows")
[ "$n" -eq 3 ] || { echo "expected 3 ranked rows, got $n"; cat "$dir/one.txt"; exit 1; }
echo "same report under mpirun -np 2 (exhaustive), same $n ranked rows pruned; $(grep 'simulations avoided' "$dir/two-pruned.txt")"

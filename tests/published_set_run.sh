# published_set_run.sh — sourced by the published_*_infer.sh tests: runs experiments/published/$set/run.sh with
# the tacosim $bin in a scratch copy of the tree $tmp (removed on exit; the run writes table.txt, which the
# repository's copy must not get from a test): the set copied, models, topologies and calibration linked, and the
# repository paths in $links (optional) linked too. Leaves $set_dir (the copy, with its new table.txt), $tmp/work
# (each simulation's JSON, printed report and stderr) and $tmp/out. Needs bin, src and set. Exits 77 without
# python3 (the tests' checks are python), 1 when run.sh fails or writes no table.
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/published_$set.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/experiments/published"
for d in models topologies calibration ${links:-}; do
  mkdir -p "$(dirname "$tmp/$d")"
  ln -s "$src/$d" "$tmp/$d"
done
cp "$src/experiments/published/set_opts.sh" "$src/experiments/published/error_summary.py" "$tmp/experiments/published/"
cp -r "$src/experiments/published/$set" "$tmp/experiments/published/"
set_dir="$tmp/experiments/published/$set"
rm -f "$set_dir/table.txt"
rc=0
bash "$set_dir/run.sh" --tacosim "$bin" --work "$tmp/work" > "$tmp/out" 2> "$tmp/err" || rc=$?
[ "$rc" = 0 ] || { cat "$tmp/err"; echo "FAIL: run.sh exit $rc"; exit 1; }
[ -s "$set_dir/table.txt" ] || { echo "FAIL: no table.txt"; exit 1; }

#!/bin/sh
# experiments/published/run.sh on two rows of the dgxc set, in a scratch copy of the tree (the run
# writes tables, which the repository's copies must not get from a test): the NeMo 2 FLOP count
# (nemo) gives back the published step times from the derived TF/s, the per-row gpu column
# labels the GB200 and H100 rows, and a row whose predict column says no is not run.
# usage: published_dgxc.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
command -v jq > /dev/null 2>&1 || { echo "jq missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/published_dgxc.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/experiments/published"
for d in models topologies calibration; do ln -s "$src/$d" "$tmp/$d"; done
cp "$src/experiments/lib.sh" "$tmp/experiments/"
cp "$src/experiments/published/run.sh" "$tmp/experiments/published/"
cp -r "$src/experiments/published/dgxc" "$tmp/experiments/published/"
run="$tmp/experiments/published/run.sh"
bash "$run" --tacosim "$bin" --sets dgxc --only "dgxc-h100-8b-8 dgxc-gb200-405b-128" --no-figure \
  > "$tmp/out" 2> "$tmp/err" || { cat "$tmp/err"; echo "FAIL: run.sh exit $?"; exit 1; }
cat "$tmp/out"
# set gpu row gpus layout pub_TF/s pred_TF/s err pub_it_s ...
row() { awk -v n="$1" '$1 == "dgxc" && $3 == n { print $2, $4, $6, $9 }' "$tmp/out"; }
want() { # row, expected "gpu gpus pub_tflops pub_iter_s"
  got=$(row "$1")
  [ "$got" = "$2" ] || { echo "FAIL: $1: got \"$got\", want \"$2\""; exit 1; }
  echo "ok: $1: $got"
}
# 8B: 128 x 4.74e14 / 12.27 s / 8 GPUs (the README's own count) = 618.6 TF/s, MFU 62.5 % of 989
want h100-8b-8 "H100 8 618.6 12.270"
# 405B on GB200 with the publisher's g = 16: 64 x 2.17e16 / 9.347 s / 128 = 1161.6 TF/s, MFU 47.4 % of 2450
want gb200-405b-128 "GB200 128 1161.6 9.347"
# a row whose predict column says no (none in the set today: the scratch copy marks one) is not in the
# list: nothing to run, exit 2
csv="$tmp/experiments/published/dgxc/published.csv"
sed -i 's/^\(4,h100-405b-512,.*\),yes$/\1,no/' "$csv"
grep -q '^4,h100-405b-512,.*,no$' "$csv" || { echo "FAIL: could not mark the row predict=no"; exit 1; }
rc=0
bash "$run" --tacosim "$bin" --sets dgxc --only "dgxc-h100-405b-512" --no-figure > "$tmp/out2" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "nothing to run" "$tmp/out2" || { cat "$tmp/out2"; echo "FAIL: predict=no row: exit $rc"; exit 1; }
echo "ok: h100-405b-512 (predict no) left out"

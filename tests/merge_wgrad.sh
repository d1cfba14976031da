#!/bin/sh
# calibration/merge_wgrad.py on a hand-made file: of two keys a new run timed both ways, the one the file
# holds as a weight gradient (layout 2 in the class file) moves to "gemm_wgrad" and takes the run's BF16
# timing in "gemm"; the one it holds as a BF16 product stays and gains the run's weight-gradient timing;
# a key only the file has is left alone; merging twice changes nothing; the result loads in tacosim.
# usage: merge_wgrad.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/merge_wgrad.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
head='"schema":1,"gpu":"NVIDIA H200","driver":"d","cuda":"13.0","nccl":"2","transport":"nvlink","measured_at":"t"'
cat > "$tmp/file.json" <<J
{$head,"gemm":[{"m":8192,"n":28672,"k":4096,"us":3000},{"m":4096,"n":4096,"k":8192,"us":500},{"m":1024,"n":1024,"k":1024,"us":10}]}
J
cat > "$tmp/new.json" <<J
{$head,"measured_at":"new","gemm":[{"m":8192,"n":28672,"k":4096,"us":2640},{"m":4096,"n":4096,"k":8192,"us":505},{"m":2048,"n":2048,"k":2048,"us":30}],
 "gemm_wgrad":[{"m":8192,"n":28672,"k":4096,"us":2990},{"m":4096,"n":4096,"k":8192,"us":560}]}
J
printf 'm\tn\tk\tlayout\tswap_mn\tpass1_us\n8192\t28672\t4096\t2\t0\t3000\n4096\t4096\t8192\t0\t0\t500\n1024\t1024\t1024\t0\t0\t10\n' > "$tmp/classes.tsv"
python3 "$src/calibration/merge_wgrad.py" --from "$tmp/new.json" --classes "$tmp/classes.tsv" "$tmp/file.json"
cp "$tmp/file.json" "$tmp/once.json"
python3 "$src/calibration/merge_wgrad.py" --from "$tmp/new.json" --classes "$tmp/classes.tsv" "$tmp/file.json"
python3 - "$tmp" <<'P'
import json, sys
d = sys.argv[1]
f, once = json.load(open(d + "/file.json")), json.load(open(d + "/once.json"))
g = {(p["m"], p["n"], p["k"]): p["us"] for p in f["gemm"]}
w = {(p["m"], p["n"], p["k"]): p["us"] for p in f["gemm_wgrad"]}
assert g == {(8192, 28672, 4096): 2640, (4096, 4096, 8192): 500, (1024, 1024, 1024): 10}, g  # no new key taken
assert w == {(8192, 28672, 4096): 3000, (4096, 4096, 8192): 560}, w  # the old weight gradient kept, the other added
f.pop("notes"), once.pop("notes")
assert f == once, "merging twice changed the file"
print("merge_wgrad: ok")
P
"$bin" derive-calibration --gpu A100-SXM4-80GB --from "$tmp/file.json" "$tmp/a100.json"
grep -q '"gemm_wgrad"' "$tmp/a100.json"
echo "merge_wgrad.sh: passed"

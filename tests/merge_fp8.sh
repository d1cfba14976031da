#!/bin/sh
# calibration/merge_fp8.py on hand-made files: the run's "gemm_fp8" list goes into a file (sorted by n, k, m,
# right after its GEMM lists), replacing the one it had; no other table changes; merging twice is merging
# once; a file of another GPU and a run without the list are refused; the result loads in tacosim and its
# FP8 list moves to another GPU with FP8.
# usage: merge_fp8.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/merge_fp8.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
meta='"schema":1,"gpu":"NVIDIA H200","driver":"d","cuda":"13.0","nccl":"2","transport":"nvlink"'
head="$meta,\"measured_at\":\"t\""
cat > "$tmp/file.json" <<J
{$head,"notes":"old","gemm":[{"m":4096,"n":4096,"k":4096,"us":200},{"m":8192,"n":14336,"k":4096,"us":1300}],
 "gemm_fp8":[{"m":1,"n":16,"k":16,"us":5}],
 "kernels":{"norm":[{"bytes":1048576,"us":3}]}}
J
cat > "$tmp/run.json" <<J
{$meta,"measured_at":"run","gemm_fp8":[{"m":8192,"n":14336,"k":4096,"us":700},{"m":4096,"n":4096,"k":4096,"us":110}]}
J
python3 "$src/calibration/merge_fp8.py" --from "$tmp/run.json" "$tmp/file.json"
cp "$tmp/file.json" "$tmp/once.json"
python3 "$src/calibration/merge_fp8.py" --from "$tmp/run.json" "$tmp/file.json"
cmp "$tmp/file.json" "$tmp/once.json" || { echo "merging twice changed the file"; exit 1; }
python3 - "$tmp" <<'P'
import json, sys
d = sys.argv[1]
f = json.load(open(d + "/file.json"))
assert list(f)[list(f).index("gemm") + 1] == "gemm_fp8", list(f)  # right after the GEMM list
assert f["gemm_fp8"] == [{"m": 4096, "n": 4096, "k": 4096, "us": 110},
                         {"m": 8192, "n": 14336, "k": 4096, "us": 700}], f["gemm_fp8"]  # replaced, sorted
assert [p["us"] for p in f["gemm"]] == [200, 1300] and f["kernels"] == {"norm": [{"bytes": 1048576, "us": 3}]}  # the rest as it was
assert f["notes"].startswith("old; gemm_fp8: 2 keys from ") and f["notes"].count("merge_fp8.py") == 1, f["notes"]
print("merge_fp8: ok")
P
# --add: the file keeps its keys and times (a key both have keeps the file's), gains the run's others, sorted;
# twice is once
cat > "$tmp/add.json" <<J
{$meta,"measured_at":"add","gemm_fp8":[{"m":4096,"n":4096,"k":4096,"us":999},{"m":2,"n":16,"k":16,"us":6}]}
J
cp "$tmp/once.json" "$tmp/added.json"
python3 "$src/calibration/merge_fp8.py" --add --from "$tmp/add.json" "$tmp/added.json"
cp "$tmp/added.json" "$tmp/added1.json"
python3 "$src/calibration/merge_fp8.py" --add --from "$tmp/add.json" "$tmp/added.json"
cmp "$tmp/added.json" "$tmp/added1.json" || { echo "--add twice changed the file"; exit 1; }
python3 - "$tmp" <<'P'
import json, sys
f = json.load(open(sys.argv[1] + "/added.json"))
assert f["gemm_fp8"] == [{"m": 2, "n": 16, "k": 16, "us": 6}, {"m": 4096, "n": 4096, "k": 4096, "us": 110},
                         {"m": 8192, "n": 14336, "k": 4096, "us": 700}], f["gemm_fp8"]
assert f["notes"].endswith("gemm_fp8: 1 keys added from " + sys.argv[1] + "/add.json (add, merge_fp8.py)"), f["notes"]
print("merge_fp8 --add: ok")
P
# refused: a file of another GPU; a run without the list; a repeated shape
sed 's/NVIDIA H200/NVIDIA H100 80GB HBM3/' "$tmp/file.json" > "$tmp/h100.json"
if python3 "$src/calibration/merge_fp8.py" --from "$tmp/run.json" "$tmp/h100.json" 2> "$tmp/err"; then exit 1; fi
grep -q "not of the same GPU" "$tmp/err"
echo "{$head,\"gemm\":[{\"m\":1,\"n\":16,\"k\":16,\"us\":5}]}" > "$tmp/nofp8.json"
if python3 "$src/calibration/merge_fp8.py" --from "$tmp/nofp8.json" "$tmp/once.json" 2> "$tmp/err"; then exit 1; fi
grep -q "gemm_fp8: missing or empty" "$tmp/err"
echo "{$head,\"gemm_fp8\":[{\"m\":1,\"n\":16,\"k\":16,\"us\":5},{\"m\":1,\"n\":16,\"k\":16,\"us\":6}]}" > "$tmp/rep.json"
if python3 "$src/calibration/merge_fp8.py" --from "$tmp/rep.json" "$tmp/once.json" 2> "$tmp/err"; then exit 1; fi
grep -q "gemm_fp8\[1\]: shape (1, 16, 16) repeated" "$tmp/err"
# tacosim reads the result, and a run's list alone (what --only gemm_fp8 writes); the list moves to the H100's FP8 peak
"$bin" derive-calibration --gpu H100-SXM --from "$tmp/file.json" "$tmp/h100-derived.json"
grep -q '"gemm_fp8"' "$tmp/h100-derived.json"
"$bin" derive-calibration --gpu H100-SXM --from "$tmp/run.json" "$tmp/run-derived.json"
grep -q '"gemm_fp8"' "$tmp/run-derived.json"
echo "merge_fp8.sh: passed"

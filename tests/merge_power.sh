#!/bin/sh
# calibration/merge_power.py on hand-made files: a "power" section generated from known parameters (P_c(f) =
# 100 + d_c (f / 2000)^2, d_gemm 800, d_mem 400, idle 50 W, cap 700 W; speeds (f / f_ref)^1 and ^0.5) goes into
# a file of the same GPU, replacing the one it had; no other table changes; merging twice is merging once; a
# file of another GPU and a section without its "mem" sample are refused naming the field; `tacosim
# calibration-fit` on the result (and on the section alone) recovers the parameters, and on a file without the
# section exits 2 naming it.
# usage: merge_power.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/merge_power.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
meta='"schema":1,"gpu":"NVIDIA H100 80GB HBM3","driver":"d","cuda":"13.0","nccl":"2","transport":"nvlink"'
cat > "$tmp/file.json" <<J
{$meta,"measured_at":"t","notes":"old","gemm":[{"m":4096,"n":4096,"k":4096,"us":200}],
 "kernels":{"norm":[{"bytes":1048576,"us":3}]}}
J
python3 - "$tmp" <<'P'
import json, sys
d = sys.argv[1]
def power(g, m, i, f):
    u = (f / 2000.0) ** 2
    return g * (100 + 800 * u) + m * (100 + 400 * u) + i * 50
fg, fm = 2000 * 0.75 ** 0.5, 2000.0
pats = [("gemm", 1, 0, 0, fg), ("mem", 0, 1, 0, fm), ("mix50", 0.5, 0.5, 0, 1900), ("gemm_idle", 0.6, 0, 0.4, 1980),
        ("mem_idle", 0, 0.5, 0.5, 1500), ("mix_slow", 0.3, 0.6, 0.1, 1200)]
samples = [{"name": n, "gemm": g, "mem": m, "idle": i, "period_us": 2000, "power_w": round(power(g, m, i, f), 9),
            "sm_mhz": round(f, 9), "gemm_speed": round(f / fg, 12) if g else 0,
            "mem_speed": round((f / fm) ** 0.5, 12) if m else 0} for n, g, m, i, f in pats]
sec = {"cap_w": 700, "f_max_mhz": 2000, "idle_w": 50, "gpu": "NVIDIA H100 80GB HBM3", "gemm": "4096^3 BF16 GEMM",
       "mem": "96 MiB add", "samples": samples}
json.dump(sec, open(d + "/power.json", "w"))
json.dump({"power": dict(sec, gpu="NVIDIA H200")}, open(d + "/other_gpu.json", "w"))
bad = dict(sec, samples=[s for s in samples if s["name"] != "mem"])
json.dump(bad, open(d + "/no_mem.json", "w"))
P
python3 "$src/calibration/merge_power.py" --from "$tmp/power.json" "$tmp/file.json"
cp "$tmp/file.json" "$tmp/once.json"
python3 "$src/calibration/merge_power.py" --from "$tmp/power.json" "$tmp/file.json"
python3 - "$tmp" <<'P'
import json, sys
d = sys.argv[1]
f, once = json.load(open(d + "/file.json")), json.load(open(d + "/once.json"))
assert {k: v for k, v in f.items() if k != "notes"} == {k: v for k, v in once.items() if k != "notes"}  # twice: once
assert f["power"] == json.load(open(d + "/power.json")), "the section as given"
assert f["gemm"] == [{"m": 4096, "n": 4096, "k": 4096, "us": 200}] and f["kernels"] == {"norm": [{"bytes": 1048576, "us": 3}]}
assert f["notes"].startswith("old; power: ") and "merge_power.py" in f["notes"], f["notes"]
print("merge_power: ok")
P
if python3 "$src/calibration/merge_power.py" --from "$tmp/other_gpu.json" "$tmp/file.json" 2> "$tmp/err"; then
  echo "a section of another GPU was merged"; exit 1
fi
grep -q "not of the same GPU" "$tmp/err" || { cat "$tmp/err"; exit 1; }
if python3 "$src/calibration/merge_power.py" --from "$tmp/no_mem.json" "$tmp/file.json" 2> "$tmp/err"; then
  echo "a section without its mem sample was merged"; exit 1
fi
grep -q "power.samples: no sample named \"mem\"" "$tmp/err" || { cat "$tmp/err"; exit 1; }
"$bin" calibration-fit "$tmp/file.json" > "$tmp/fit.txt"
cat "$tmp/fit.txt"
grep -q "a 2.00, s 100.000 W, d_gemm 800.000 W, d_mem 400.000 W; rms residual 0.000 W" "$tmp/fit.txt" ||
  { echo "the fit did not recover the parameters"; exit 1; }
grep -q "gemm (f / 1732.05[0-9]* MHz)^1.0000 over 3 samples, mem (f / 2000 MHz)^0.5000 over 3 samples" "$tmp/fit.txt" ||
  { echo "the speed laws were not recovered"; exit 1; }
# the section alone (merge_power.py's input) fits the same
"$bin" calibration-fit "$tmp/power.json" > "$tmp/fit_alone.txt"
cmp "$tmp/fit.txt" "$tmp/fit_alone.txt" || { echo "the section alone fits otherwise"; exit 1; }
# without the section: calibration-fit refuses it, exit 2 naming the field
python3 - "$tmp" <<'P'
import json, sys
d = sys.argv[1]
f = json.load(open(d + "/file.json"))
del f["power"]
json.dump(f, open(d + "/bare.json", "w"))
P
set +e
"$bin" calibration-fit "$tmp/bare.json" 2> "$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "bare.json: power: missing" "$tmp/err" || { echo "rc $rc"; cat "$tmp/err"; exit 1; }
echo "merge_power.sh: ok"

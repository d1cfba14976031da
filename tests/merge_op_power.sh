#!/bin/sh
# calibration/merge_op_power.py on the committed H100 power phase (calibration/power/h100-20261207-attn/power.tsv):
# the section's figures as its rows give them (the GEMM class the median of the prefill-sized shapes: 703.93 W at
# 1,383.3 MHz; g 1.1594, b 0.4515; 8 attention rows; no attention exponent: the TSV has no amix- rows); merged into
# a file of the same GPU that `tacosim simulate` then reads; with amix- rows added by hand at a known law
# ((f / f_b2b)^0.3 at 0.9 x and 0.8 x the back-to-back clocks) the attention exponent is 0.3; a file of another
# GPU and a TSV without the "mem" row are refused naming the file or the row.
# usage: merge_op_power.sh SOURCE_DIR
set -eu
src=$1
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/merge_op_power.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tsv=$src/calibration/power/h100-20261207-attn/power.tsv
merge=$src/calibration/merge_op_power.py
python3 "$merge" --from "$tsv" --print > "$tmp/sec.json"
python3 - "$tmp/sec.json" <<'P'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["gemm"] == {"power_w": 703.93, "mhz": 1383.3}, s["gemm"]
assert s["mem"] == {"power_w": 465.6, "mhz": 1980.0}, s["mem"]
assert (s["power_exponent"], s["speed_exponent"], s["mem_power_exponent"]) == (1.1594, 0.4515, 0.0), s
assert len(s["attention_prefill"]) == 8 and "attention_speed_exponent" not in s, s
a = [r for r in s["attention_prefill"] if (r["heads"], r["batch"], r["seq"]) == (32, 1, 4096)]
assert a == [{"heads": 32, "kv_heads": 8, "head_dim": 128, "batch": 1, "seq": 4096, "power_w": 689.92, "mhz": 1866.2}], a
P
# into a file of the same GPU, read back by the loader
cat > "$tmp/file.json" <<J
{"schema":1,"gpu":"NVIDIA H100 80GB HBM3","driver":"d","cuda":"13.0","nccl":"2","transport":"nvlink",
 "measured_at":"t","notes":"old","gemm":[{"m":4096,"n":4096,"k":4096,"us":200}]}
J
python3 "$merge" --from "$tsv" "$tmp/file.json" > /dev/null
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); assert c['op_power']['gemm']['mhz']==1383.3 and 'merge_op_power.py' in c['notes']" "$tmp/file.json"
# amix- rows at a known law: the attention exponent comes back
python3 - "$tsv" "$tmp/mix.tsv" <<'P'
import sys
lines = open(sys.argv[1]).read().splitlines()
cols = [l for l in lines if l.startswith("name\t")][0].split("\t")
out = list(lines)
for l in lines:
    f = l.split("\t")
    if f[0] in ("attn-32x8x128x1x4096", "attn-32x8x128x64x2048"):
        for k, r in (("amix-32x8x128x1x4096", 0.9), ("amix-32x8x128x64x2048", 0.8)):
            if k[5:] == f[0][5:]:
                g = list(f)
                g[0] = k
                g[cols.index("mhz_mean")] = "%.4f" % (float(f[cols.index("mhz_mean")]) * r)
                g[cols.index("mem_speed")] = "%.10f" % (r ** 0.3)
                out.append("\t".join(g))
open(sys.argv[2], "w").write("\n".join(out) + "\n")
P
python3 "$merge" --from "$tmp/mix.tsv" --print | python3 -c "import json,sys; s=json.load(sys.stdin); assert abs(s['attention_speed_exponent']-0.3) < 1e-3, s['attention_speed_exponent']"
# refused: a file of another GPU; a TSV without the "mem" row
sed 's/NVIDIA H100 80GB HBM3/NVIDIA H200/' "$tmp/file.json" > "$tmp/other.json"
if python3 "$merge" --from "$tsv" "$tmp/other.json" 2> "$tmp/err"; then echo "another GPU's file accepted"; exit 1; fi
grep -q "not of the same GPU" "$tmp/err"
grep -v '^mem	' "$tsv" > "$tmp/nomem.tsv"
if python3 "$merge" --from "$tmp/nomem.tsv" --print 2> "$tmp/err"; then echo "a TSV without mem accepted"; exit 1; fi
grep -q "nomem.tsv: mem: no such row" "$tmp/err"
echo "merge_op_power: ok"

#!/bin/sh
# experiments/published/dense-infer/run.sh end to end, in a scratch copy of the tree (the run writes table.txt,
# which the repository's copy must not get from a test): every predicted row is in the table with the figure
# its kind asks of the simulation's JSON (tput_gpu: batch x generate / total_s / tp; tput_total: batch x
# generate / total_s; ftl: ttft_s in ms; latency: total_s), every predict=no row is listed as not predicted,
# and each source and GPU gets a median / max line.
# usage: published_dense_infer.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
command -v python3 > /dev/null 2>&1 || { echo "python3 missing: skipped"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/published_dense_infer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/experiments/published/torchtitan"
for d in models topologies calibration; do ln -s "$src/$d" "$tmp/$d"; done
ln -s "$src/experiments/published/torchtitan/models" "$tmp/experiments/published/torchtitan/models"
cp "$src/experiments/published/set_opts.sh" "$tmp/experiments/published/"
cp -r "$src/experiments/published/dense-infer" "$tmp/experiments/published/"
set_dir="$tmp/experiments/published/dense-infer"
rm -f "$set_dir/table.txt"
rc=0
bash "$set_dir/run.sh" --tacosim "$bin" --work "$tmp/work" > "$tmp/out" 2> "$tmp/err" || rc=$?
[ "$rc" = 0 ] || { cat "$tmp/err"; echo "FAIL: run.sh exit $rc"; exit 1; }
[ -s "$set_dir/table.txt" ] || { echo "FAIL: no table.txt"; exit 1; }
python3 - "$set_dir/published.csv" "$set_dir/table.txt" "$tmp/work" <<'PY'
import csv, json, sys
pub, table, work = sys.argv[1:]
rows = [r for r in csv.reader(l for l in open(pub) if not l.startswith('#'))][1:]
lines = {l.split()[0]: l.split() for l in open(table) if l.strip() and not l.startswith('#')}
summary = {' '.join(l.split()[:2]) for l in open(table) if l.strip() and not l.startswith('#')}
bad = 0
sources = set()
for name, src, kind, gpu, model, tp, b, p, g, figure, unit, predict in rows:
    got = lines.get(name)
    if got is None:
        print("FAIL: %s not in the table" % name); bad += 1; continue
    if predict != "yes":
        if got[5] != "-" or "not predicted" not in " ".join(got):
            print("FAIL: %s (predict %s) shown as predicted" % (name, predict)); bad += 1
        continue
    sources.add(src + " " + gpu)
    d = json.load(open("%s/%s.json" % (work, name)))
    tp, b, g = int(tp), int(b), int(g)
    want = {"ftl": d["ttft_s"] * 1e3, "latency": d["total_s"], "tput_total": b * g / d["total_s"],
            "tput_gpu": b * g / d["total_s"] / tp}[kind]
    pred, err = float(got[5]), float(got[6].rstrip('%'))
    if abs(pred - want) > 0.006 + 1e-4 * want or abs(err - 100 * (want / float(figure) - 1)) > 0.06:
        print("FAIL: %s: table %s %s, want %.2f" % (name, got[5], got[6], want)); bad += 1
    else:
        print("ok: %-34s %-10s %10.2f %s" % (name, kind, want, got[6]))
for s in sources:
    if s not in summary:
        print("FAIL: no summary line for %s" % s); bad += 1
sys.exit(1 if bad else 0)
PY

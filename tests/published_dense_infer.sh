#!/bin/sh
# experiments/published/dense-infer/run.sh end to end, in a scratch copy of the tree (the run writes table.txt,
# which the repository's copy must not get from a test): every predicted row is in the table with the figure
# its kind asks of the simulation's JSON (tput_gpu: batch x generate / total_s / tp; tput_total: batch x
# generate / total_s; ftl: ttft_s in ms; latency: total_s), every predict=no row is listed as not predicted,
# and each source and GPU gets a median / max line.
# usage: published_dense_infer.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
set=dense-infer links=experiments/published/torchtitan/models
. "$(dirname "$0")/published_set_run.sh"
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

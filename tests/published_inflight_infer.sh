#!/bin/sh
# experiments/published/inflight-infer/run.sh end to end, in a scratch copy of the tree (the run writes table.txt,
# which the repository's copy must not get from a test): every predicted row is in the table with the finite run's
# output tokens/s of its simulation's JSON (inflight.run.tokens_per_s) and its error against the published figure,
# the steady state's error beside it, every predict=no row listed as not predicted, a summary line per source and GPU.
# usage: published_inflight_infer.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
set=inflight-infer
. "$(dirname "$0")/published_set_run.sh"
python3 - "$set_dir/published.csv" "$set_dir/table.txt" "$tmp/work" <<'PY'
import csv, json, sys
pub, table, work = sys.argv[1:]
rows = [r for r in csv.reader(l for l in open(pub) if not l.startswith('#'))][1:]
lines = {l.split()[0]: l.split() for l in open(table) if l.strip() and not l.startswith('#')}
summary = {' '.join(l.split()[:2]) for l in open(table) if l.strip() and not l.startswith('#')}
bad = 0
sources = set()
for name, src, gpu, model, tp, isl, osl, figure, unit, predict in rows:
    got = lines.get(name)
    if got is None:
        print("FAIL: %s not in the table" % name); bad += 1; continue
    if predict != "yes":
        if got[6] != "-" or "not predicted" not in " ".join(got):
            print("FAIL: %s (predict %s) shown as predicted" % (name, predict)); bad += 1
        continue
    sources.add(src + " " + gpu)
    d = json.load(open("%s/%s.json" % (work, name)))
    want, steady = d["inflight"]["run"]["tokens_per_s"], d["tokens_per_s"]
    pred, err, serr = float(got[6]), float(got[7].rstrip('%')), float(got[8].rstrip('%'))
    if (abs(pred - want) > 0.6 + 1e-4 * want or abs(err - 100 * (want / float(figure) - 1)) > 0.06 or
            abs(serr - 100 * (steady / float(figure) - 1)) > 0.06):
        print("FAIL: %s: table %s %s %s, want %.1f" % (name, got[6], got[7], got[8], want)); bad += 1
    else:
        print("ok: %-34s %10.1f %s" % (name, want, got[7]))
for s in sources:
    if s not in summary:
        print("FAIL: no summary line for %s" % s); bad += 1
sys.exit(1 if bad else 0)
PY

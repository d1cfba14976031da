#!/bin/sh
# experiments/published/mla-infer/run.sh end to end, in a scratch copy of the tree (the run writes table.txt,
# which the repository's copy must not get from a test): every row of published.csv is in the table; a predicted
# row's figure is what its kind reads from its simulation's JSON (kernel: mla.decode_attention_s in ms, the
# result recording the latent cache of 1,152 bytes a token a layer) and its error that figure over the published
# one less 1; a row not predicted is listed with its reason.
# usage: published_mla_infer.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
set=mla-infer
. "$(dirname "$0")/published_set_run.sh"
python3 - "$set_dir/published.csv" "$set_dir/table.txt" "$tmp/work" <<'PY'
import csv, json, sys
pub, table, work = sys.argv[1:]
rows = [r for r in csv.reader(l for l in open(pub) if not l.startswith('#'))][1:]
lines = {l.split()[0]: l for l in open(table) if l.strip() and not l.startswith(('#', 'row'))}
bad = 0
for name, kind, batch, prompt, generate, figure, unit, source, predict in rows:
    line = lines.get(name)
    if line is None:
        print("FAIL: %s not in the table" % name); bad += 1; continue
    if predict != "yes":
        if "not predicted (" + predict[4:] + ")" not in line:
            print("FAIL: %s: reason missing: %s" % (name, line.strip())); bad += 1
        else:
            print("ok: %-26s not predicted" % name)
        continue
    d = json.load(open("%s/%s.json" % (work, name)))
    if d["mla"]["kv_bytes_per_token_layer"] != 1152.0:
        print("FAIL: %s: latent bytes %s, want 1152" % (name, d["mla"]["kv_bytes_per_token_layer"])); bad += 1
    want = {"kernel": lambda: d["mla"]["decode_attention_s"] * 1e3}[kind]()
    f = line.split()
    pred, err = float(f[5]), float(f[6].rstrip('%'))
    if abs(pred - want) > 1e-4 + 1e-6 * want or abs(err - 100 * (want / float(figure) - 1)) > 0.06:
        print("FAIL: %s: table %s %s, want %.4f" % (name, f[5], f[6], want)); bad += 1
    else:
        print("ok: %-26s %-8s %s %s" % (name, kind, f[5], f[6]))
sys.exit(1 if bad else 0)
PY

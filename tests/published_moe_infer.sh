#!/bin/sh
# experiments/published/moe-infer/run.sh end to end, in a scratch copy of the tree (the run writes table.txt,
# which the repository's copy must not get from a test): every row of published.csv is in the table, and its
# fused and per-expert figures are what its kind reads from the two simulations' JSON (kernel: the decode
# step's experts_gemm_s in ms; tpot: tpot_s in ms; e2e: total_s; tput_gpu: batch x generate / total_s / tp;
# ftl: ttft_s in ms), each error the figure over the published one less 1; the FP8 rows' results record
# quantization fp8.
# usage: published_moe_infer.sh TACOSIM SOURCE_DIR
set -eu
bin=$1 src=$2
set=moe-infer
. "$(dirname "$0")/published_set_run.sh"
python3 - "$set_dir/published.csv" "$set_dir/table.txt" "$tmp/work" <<'PY'
import csv, json, sys
pub, table, work = sys.argv[1:]
rows = [r for r in csv.reader(l for l in open(pub) if not l.startswith('#'))][1:]
lines = {l.split()[0]: l.split() for l in open(table) if l.strip() and not l.startswith('row')}
bad = 0
for name, kind, batch, prompt, generate, figure, source in rows:
    got = lines.get(name)
    if got is None:
        print("FAIL: %s not in the table" % name); bad += 1; continue
    for col, kernel in ((4, "fused"), (6, "per-expert")):
        d = json.load(open("%s/%s-%s.out" % (work, name, kernel)))
        p = json.load(open("%s/%s-%s.json" % (work, name, kernel)))
        b, g, tp = p["batch"]["size"], p["batch"]["generate"], p["layout"]["tp"]
        want = {"kernel": lambda: d["decode"]["experts_gemm_s"] * 1e3, "tpot": lambda: d["tpot_s"] * 1e3,
                "e2e": lambda: d["total_s"], "tput_gpu": lambda: b * g / d["total_s"] / tp,
                "ftl": lambda: d["ttft_s"] * 1e3}[kind]()
        pred, err = float(got[col]), float(got[col + 1].rstrip('%'))
        # run.sh rounds the prediction to 4 decimals, then computes the error from it, printed to 0.1
        if abs(pred - want) > 1e-4 + 1e-6 * want or abs(err - 100 * (round(want, 4) / float(figure) - 1)) > 0.051:
            print("FAIL: %s %s: table %s %s, want %.4f" % (name, kernel, got[col], got[col + 1], want)); bad += 1
        elif p.get("quantization") == "fp8" and d.get("quantization") != "fp8":
            print("FAIL: %s %s: the result does not record quantization fp8" % (name, kernel)); bad += 1
    if got and not bad:
        print("ok: %-28s %-8s %s %s" % (name, kind, got[4], got[5]))
sys.exit(1 if bad else 0)
PY

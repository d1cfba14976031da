#!/usr/bin/env python3
"""table.py — predicted (predicted/, written before the run) against measured
(measured/, tacorun execute on one H200) iteration times of the zoo plans, and
TTFT/TPOT of the inference plans (predicted-infer/). Markdown on stdout.
usage: experiments/validation/zoo/table.py [PREDICTED_DIR MEASURED_DIR]   (from anywhere; default
predicted/ and measured/; a run folder's NAME.json.gz are read too, e.g. run7/predicted run7)"""
import glob, gzip, json, os, statistics, sys
Z = os.path.dirname(os.path.abspath(__file__))
PRED = os.path.abspath(sys.argv[1]) if len(sys.argv) > 2 else os.path.join(Z, "predicted")
MEAS = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else os.path.join(Z, "measured")


def load(path):
    """A result file, plain or gzipped (NAME.json or NAME.json.gz); None when neither exists."""
    if os.path.exists(path):
        return json.load(open(path))
    if os.path.exists(path + ".gz"):
        return json.load(gzip.open(path + ".gz"))
    return None


rows, errs = [], []
names = sorted({os.path.basename(p)[:-5] for p in glob.glob(os.path.join(Z, "plans", "*.json"))} |
               {os.path.basename(p)[:-5] for p in glob.glob(os.path.join(PRED, "*.json"))})
for n in names:
    pr, me = load(os.path.join(PRED, n + ".json")), load(os.path.join(MEAS, n + ".json"))
    if not (pr and me):
        rows.append(f"| {n} | - | - | not measured |")
        continue
    a, b = pr["iteration_time_s"], me["iteration_time_s"]
    err = 100 * (a - b) / b
    errs.append(abs(err))
    rows.append(f"| {n} | {a * 1e3:.1f} | {b * 1e3:.1f} | {err:+.2f}% |")
print("| plan | predicted ms | measured ms | error |")
print("| --- | ---: | ---: | ---: |")
print("\n".join(rows))
if errs:
    print(f"\n{len(errs)} plans: median |error| {statistics.median(errs):.2f}%, max |error| {max(errs):.2f}%")
inf = sorted(glob.glob(os.path.join(Z, "infer-plans", "*.json")))
if inf:
    print("\n| inference plan | TTFT pred ms | TTFT meas ms | error | TPOT pred ms | TPOT meas ms | error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p in inf:
        n = os.path.basename(p)[:-5]
        pr, me = os.path.join(Z, "predicted-infer", n + ".json"), os.path.join(Z, "measured", n + ".json")
        if not (os.path.exists(pr) and os.path.exists(me)):
            print(f"| {n} | - | - | not measured | | | |")
            continue
        a, b = json.load(open(pr)), json.load(open(me))
        print(f"| {n} | {a['ttft_s'] * 1e3:.2f} | {b['ttft_s'] * 1e3:.2f} | {100 * (a['ttft_s'] / b['ttft_s'] - 1):+.1f}% "
              f"| {a['tpot_s'] * 1e3:.3f} | {b['tpot_s'] * 1e3:.3f} | {100 * (a['tpot_s'] / b['tpot_s'] - 1):+.1f}% |")

#!/usr/bin/env python3
"""table.py — predicted (predicted/, written before the run) against measured
(measured/, tacorun execute on one H200) iteration times of the zoo plans, and
TTFT/TPOT of the inference plans (predicted-infer/). Markdown on stdout.
usage: experiments/validation/zoo/table.py   (from anywhere)"""
import json, os, statistics, glob
Z = os.path.dirname(os.path.abspath(__file__))
rows, errs = [], []
for p in sorted(glob.glob(os.path.join(Z, "plans", "*.json"))):
    n = os.path.basename(p)[:-5]
    pr, me = os.path.join(Z, "predicted", n + ".json"), os.path.join(Z, "measured", n + ".json")
    if not (os.path.exists(pr) and os.path.exists(me)):
        rows.append(f"| {n} | - | - | not measured |")
        continue
    a, b = json.load(open(pr))["iteration_time_s"], json.load(open(me))["iteration_time_s"]
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

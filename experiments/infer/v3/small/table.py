#!/usr/bin/env python3
"""table.py — the small-kernel tables' effect (README "The small kernels of a decode step, timed as it
runs them"): BEFORE and AFTER folders of predict_all.sh against the 26 measured runs of ../run/ (TTFT in
the run's real clock state: v3-first/first-of-process; TPOT of the graph steps: v3-on, --decode graph;
TPOT of the eager steps of the same runs: v3-eager, eager decode), then the 24 TP-2 plans' predictions
(tp2; no measurement of today's executor at TP 2). Markdown on stdout.
usage: experiments/infer/v3/small/table.py BEFORE AFTER
"""
import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("graph_table", os.path.join(os.path.dirname(here), "graph", "table.py"))
gtable = importlib.util.module_from_spec(_spec)  # ../graph/table.py: eager_measured, and ../table.py as v3table
_spec.loader.exec_module(gtable)

v3table = gtable.v3table
v3table.run = os.path.join(os.path.dirname(here), "run")  # it reads sys.argv[1] as its run folder


pred, mm = gtable.pred, gtable.stat  # a prediction's (TTFT, TPOT); median / max |error|


def main():
    b, a = sys.argv[1:3]
    meas, eager = v3table.measured(), gtable.eager_measured()
    cols = {"TTFT (first of process)": ("v3-first/first-of-process", 0, meas, "ttft"),
            "TPOT graph steps (--decode graph)": ("v3-on", 1, meas, "tpot"),
            "TPOT eager steps (eager model)": ("v3-eager", 1, eager, None)}
    print("| plan | TPOT graph meas ms | before | after | TPOT eager meas ms | before | after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    errs = {c: ([], []) for c in cols}
    for n in sorted(meas, key=v3table.key):
        row = []
        for c, (sub, i, m, k) in cols.items():
            mv = m[n][k] if k else m[n]
            e0, e1 = (pred(os.path.join(d, sub), n)[i] / mv - 1 for d in (b, a))
            errs[c][0].append(e0), errs[c][1].append(e1)
            row.append((mv, e0, e1))
        g, ea = row[1], row[2]
        print(f"| {n} | {1e3 * g[0]:.3f} | {100 * g[1]:+.1f} % | {100 * g[2]:+.1f} % | {1e3 * ea[0]:.3f} | "
              f"{100 * ea[1]:+.1f} % | {100 * ea[2]:+.1f} % |")
    print("\n| 26 plans, median / max \\|error\\| | before | after |\n| --- | ---: | ---: |")
    for c, (e0, e1) in errs.items():
        print(f"| {c} | {mm(e0)} | {mm(e1)} |")
    print("\n| TP-2 plan (eager) | TTFT ms before -> after | TPOT ms before -> after |\n| --- | --- | --- |")
    for f in sorted(os.listdir(os.path.join(b, "tp2"))):
        if f.endswith(".json"):
            n = f[:-5]
            (t0, p0), (t1, p1) = pred(os.path.join(b, "tp2"), n), pred(os.path.join(a, "tp2"), n)
            print(f"| {n} | {1e3 * t0:.3f} -> {1e3 * t1:.3f} ({100 * (t1 / t0 - 1):+.1f} %) | "
                  f"{1e3 * p0:.3f} -> {1e3 * p1:.3f} ({100 * (p1 / p0 - 1):+.1f} %) |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""table.py — the greedy sampling's change (README "Greedy sampling"): the 26 plans of
experiments/infer/v3 measured with the one-pass sampling (../run/) and with the two-pass one
(run-2026-12-04/), each against the predictions made for it before its run (../small/after/:
the sampling unpriced; predicted/: priced from its measured table). TTFT in the run's real clock
state (v3-first/first-of-process), TPOT of the graph steps (v3-on) and of the eager steps of the
same runs (v3-eager). Markdown on stdout.
usage: experiments/infer/v3/sample/table.py
"""
import json
import os
import re
import statistics

here = os.path.dirname(os.path.abspath(__file__))
v3 = os.path.dirname(here)


def measured(run):
    out = {}
    for name in sorted(os.listdir(run)):
        if not name.startswith("execute-"):
            continue
        for blk in re.split(r"^(?=# \S+: )", open(os.path.join(run, name)).read(), flags=re.M):
            m = re.match(r"# (\S+): ", blk)
            t = re.search(r"^ttft_s ([\d.]+)", blk, re.M)
            g = re.search(r"^decode graph: tpot_s ([\d.]+).* against eager tpot_s ([\d.]+)", blk, re.M)
            if m and t and g:
                out[m.group(1)] = (float(t.group(1)), float(g.group(1)), float(g.group(2)))
    return out


def pred(d, n):
    r = [json.load(open(os.path.join(d, sub, n + ".json"))) for sub in ("v3-first/first-of-process", "v3-on", "v3-eager")]
    return r[0]["ttft_s"], r[1]["tpot_s"], r[2]["tpot_s"]


def key(n):
    m = re.match(r"(.*)-tp1-b(\d+)-p(\d+)-g\d+-(\w+)", n)
    return (m.group(1), m.group(4), int(m.group(2)), int(m.group(3)))


def mm(v):
    a = [abs(x) for x in v]
    return f"{100 * statistics.median(a):.1f} / {100 * max(a):.1f} %"


def main():
    old, new = measured(os.path.join(v3, "run")), measured(os.path.join(here, "run-2026-12-04"))
    before, after = os.path.join(v3, "small", "after"), os.path.join(here, "predicted")
    print("| plan | TPOT graph ms, one-pass -> two-pass | change | error before | error after | "
          "TPOT eager ms | change | error before | error after |")
    print("| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |")
    err = {k: ([], []) for k in ("ttft", "graph", "eager")}
    for n in sorted(new, key=key):
        if n not in old:
            continue
        pb, pa = pred(before, n), pred(after, n)
        for i, k in enumerate(("ttft", "graph", "eager")):
            err[k][0].append(pb[i] / old[n][i] - 1)
            err[k][1].append(pa[i] / new[n][i] - 1)
        cells = [n]
        for i in (1, 2):
            cells += [f"{1e3 * old[n][i]:.3f} -> {1e3 * new[n][i]:.3f}", f"{100 * (new[n][i] / old[n][i] - 1):+.1f} %",
                      f"{100 * err['graph' if i == 1 else 'eager'][0][-1]:+.1f} %",
                      f"{100 * err['graph' if i == 1 else 'eager'][1][-1]:+.1f} %"]
        print("| " + " | ".join(cells) + " |")
    summary(err, "before (one-pass run, sampling unpriced)", "after (two-pass run, sampling priced)")


def summary(err, before, after):
    """The median / max |error| table of err {ttft, graph, eager: (before errors, after errors)}."""
    print()
    print(f"| {len(err['ttft'][0])} plans, median / max \\|error\\| | {before} | {after} |")
    print("| --- | ---: | ---: |")
    for k, label in (("ttft", "TTFT (first of process)"), ("graph", "TPOT graph steps (--decode graph)"),
                     ("eager", "TPOT eager steps (eager model)")):
        print(f"| {label} | {mm(err[k][0])} | {mm(err[k][1])} |")


if __name__ == "__main__":
    main()

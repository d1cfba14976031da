#!/usr/bin/env python3
"""compare.py — the 26 measured runs of experiments/infer/v3 (run/execute-*.txt, the table of
../table.py) against two prediction folders, BEFORE and AFTER (`tacosim simulate ... --json`,
e.g. ../graph/predicted and ttft/predicted): TTFT and TPOT per plan, then median / max |error|
per model and over all. Markdown on stdout.
usage: experiments/infer/v3/ttft/compare.py BEFORE_DIR AFTER_DIR
"""
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(here))
import table as v3table  # noqa: E402

v3table.run = os.path.join(os.path.dirname(here), "run")  # it reads sys.argv[1] as its run folder


def med_max(v):
    a = [abs(x) for x in v]
    return f"{100 * statistics.median(a):.1f} / {100 * max(a):.1f} %"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: compare.py BEFORE_DIR AFTER_DIR")
    before, after = sys.argv[1:]
    meas = v3table.measured()
    print("| plan | TTFT meas ms | before ms | err | after ms | err | TPOT meas ms | before err | after err |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    errs = {}
    for n in sorted(meas, key=v3table.key):
        b = json.load(open(os.path.join(before, n + ".json")))
        a = json.load(open(os.path.join(after, n + ".json")))
        m = meas[n]
        e = [b["ttft_s"] / m["ttft"] - 1, a["ttft_s"] / m["ttft"] - 1,
             b["tpot_s"] / m["tpot"] - 1, a["tpot_s"] / m["tpot"] - 1]
        errs[n] = e
        print(f"| {n} | {m['ttft'] * 1e3:.1f} | {b['ttft_s'] * 1e3:.1f} | {100 * e[0]:+.1f} % | "
              f"{a['ttft_s'] * 1e3:.1f} | {100 * e[1]:+.1f} % | {m['tpot'] * 1e3:.3f} | {100 * e[2]:+.1f} % | "
              f"{100 * e[3]:+.1f} % |")
    print()
    print("| set | plans | TTFT before | TTFT after | TPOT before | TPOT after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    groups = {}
    for n, e in errs.items():
        groups.setdefault(v3table.key(n)[0], []).append(e)
    groups["**all**"] = list(errs.values())
    for g, rows in groups.items():
        print(f"| {g} | {len(rows)} | " + " | ".join(med_max([r[i] for r in rows]) for i in range(4)) + " |")


if __name__ == "__main__":
    main()

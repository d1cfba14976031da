#!/usr/bin/env python3
"""table.py — experiments/infer/v3's 26 measured runs (../run/execute-*.txt, the
measurements of 2026-12-04 06:58 UTC) against two sets of predictions on the default
calibration: before (../predicted/, committed before the run) and after the re-timed
decode GEMMs and the keyed prefill attention tables of this folder were merged
(predicted/, made after the measurements, from calibrate-infer's tables, not from the
runs). Prints markdown: one row per plan, then median / max |error| per set.
usage: experiments/infer/v3/recal/table.py [AFTER_DIR (predicted)]
"""
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(here))
import table as v3  # noqa: E402

v3.run = os.path.join(os.path.dirname(here), "run")
after_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "predicted")


def pred(d, n):
    p = json.load(open(os.path.join(d, n + ".json")))
    return p["ttft_s"], p["tpot_s"]


def stat(errs, i):
    e = [abs(x[i]) for x in errs]
    return f"{100*statistics.median(e):.1f} / {100*max(e):.1f} %"


def main():
    meas = v3.measured()
    print("| plan | TTFT meas ms | before | after ms | after err | TPOT meas ms | before | after ms | after err |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    eb, ea = {}, {}
    for n in sorted(meas, key=v3.key):
        m = meas[n]
        b, a = pred(os.path.join(os.path.dirname(here), "predicted"), n), pred(after_dir, n)
        eb[n] = (b[0] / m["ttft"] - 1, b[1] / m["tpot"] - 1)
        ea[n] = (a[0] / m["ttft"] - 1, a[1] / m["tpot"] - 1)
        print(f"| {n} | {m['ttft']*1e3:.3f} | {100*eb[n][0]:+.1f} % | {a[0]*1e3:.3f} | {100*ea[n][0]:+.1f} % | "
              f"{m['tpot']*1e3:.3f} | {100*eb[n][1]:+.1f} % | {a[1]*1e3:.3f} | {100*ea[n][1]:+.1f} % |")
    print()
    print("| set | plans | TTFT before | TTFT after | TPOT before | TPOT after |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    groups = {}
    for n in meas:
        mdl, kv = v3.key(n)[:2]
        groups.setdefault(mdl, []).append(n)
        groups.setdefault(f"all {kv}", []).append(n)
    groups["**all**"] = list(meas)
    for g, ns in groups.items():
        b, a = [eb[n] for n in ns], [ea[n] for n in ns]
        print(f"| {g} | {len(ns)} | {stat(b, 0)} | {stat(a, 0)} | {stat(b, 1)} | {stat(a, 1)} |")


if __name__ == "__main__":
    main()

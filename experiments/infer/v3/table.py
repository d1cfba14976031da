#!/usr/bin/env python3
"""table.py — the inference validation of decode attention v3 (issue 24): predicted
(predicted/*.json, tacosim simulate on the default calibration, committed before
the run) against measured (run/execute-*.txt, `tacorun execute --decode-graph`:
TTFT median of 3 prefills after one warm-up, TPOT median of the CUDA-graph decode
steps after 2). Prints markdown: one row per plan, then median / max |error| per
model and KV type and over all plans.
usage: experiments/infer/v3/table.py [RUN_DIR (experiments/infer/v3/run)] [PREDICTED_DIR (experiments/infer/v3/predicted)]
"""
import glob
import json
import os
import re
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
run = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "run")
predicted = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "predicted")


def measured():
    out = {}
    for path in sorted(glob.glob(os.path.join(run, "execute-*.txt"))):
        for blk in re.split(r"^(?=# \S+: )", open(path).read(), flags=re.M):
            m = re.match(r"# (\S+): ", blk)
            t = re.search(r"^ttft_s ([\d.]+)", blk, re.M)
            g = re.search(r"^decode graph: tpot_s ([\d.]+)", blk, re.M)
            if m and t and g:
                out[m.group(1)] = dict(ttft=float(t.group(1)), tpot=float(g.group(1)))
    return out


def key(n):
    m = re.match(r"(.*)-tp1-b(\d+)-p(\d+)-g\d+-(\w+)", n)
    return (m.group(1), m.group(4), int(m.group(2)), int(m.group(3)))


def summary(label, rows):
    et = [abs(r[0]) for r in rows]
    ep = [abs(r[1]) for r in rows]
    return (f"| {label} | {len(rows)} | {100*statistics.median(et):.1f} / {100*max(et):.1f} % | "
            f"{100*statistics.median(ep):.1f} / {100*max(ep):.1f} % |")


def main():
    meas = measured()
    print("| plan | TTFT pred ms | TTFT meas ms | err | TPOT pred ms | TPOT meas ms | err |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    errs = {}
    for n in sorted(meas, key=key):
        p = json.load(open(os.path.join(predicted, n + ".json")))
        m = meas[n]
        et, ep = p["ttft_s"] / m["ttft"] - 1, p["tpot_s"] / m["tpot"] - 1
        errs[n] = (et, ep)
        print(f"| {n} | {p['ttft_s']*1e3:.3f} | {m['ttft']*1e3:.3f} | {100*et:+.1f} % | "
              f"{p['tpot_s']*1e3:.3f} | {m['tpot']*1e3:.3f} | {100*ep:+.1f} % |")
    print()
    print("| set | plans | TTFT median / max \\|error\\| | TPOT median / max \\|error\\| |")
    print("| --- | ---: | ---: | ---: |")
    groups = {}
    for n, e in errs.items():
        mdl, kv = key(n)[:2]
        groups.setdefault(f"{mdl} {kv}", []).append(e)
    for g in sorted(groups):
        print(summary(g, groups[g]))
    for kv in ("bf16", "fp8"):
        print(summary(f"all {kv}", [e for n, e in errs.items() if key(n)[1] == kv]))
    print(summary("**all**", list(errs.values())))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""split.py — TTFT of the 26 one-GPU plans: the prediction split into GEMMs / attention / other (the
"of compute" line of `tacosim simulate`), the measured medians and ranges (run/, and ../fp8/run-b/ for
the 14 Llama plans), the error, and the speed the GEMMs would need for the prediction to equal the
v3 median (the other parts as predicted). Sorted by measured TTFT. A diagnostic table, not a fit.

usage (repository root): python3 experiments/infer/v3/ttft/split.py [TACOSIM (build/sim/tacosim)]
"""
import glob
import os
import re
import subprocess
import sys


def measured(files):
    d = {}
    for f in files:
        name = None
        for line in open(f):
            m = re.match(r"# (\S+): ", line)
            if m:
                name = m.group(1)
            m = re.match(r"ttft_s (\S+) \(min (\S+) max (\S+)", line)
            if m and name:
                d[name] = tuple(float(x) * 1e3 for x in m.groups())
    return d


def main():
    sim = sys.argv[1] if len(sys.argv) > 1 else "build/sim/tacosim"
    here = "experiments/infer/v3"
    v3 = measured(glob.glob(f"{here}/run/execute-*.txt"))
    runb = measured(glob.glob("experiments/infer/fp8/run-b/execute-*.txt"))
    rows = []
    for p in sorted(glob.glob(f"{here}/plans/*.json")):
        n = os.path.basename(p)[:-5]
        out = subprocess.run([sim, "simulate", p], capture_output=True, text=True, check=True).stdout
        ttft = float(re.search(r"time to first token\s+([\d.]+) ms", out).group(1))
        g, a, o = map(float, re.search(r"of compute: GEMMs\s+([\d.]+), attention\s+([\d.]+), other\s+([\d.]+)",
                                       out).groups())
        rows.append((n, ttft, g, a, o))
    rows.sort(key=lambda r: v3[r[0]][0])
    print("| plan | TTFT pred ms | GEMMs / attention / other ms | meas ms (v3: median, min-max of 3) | run B median ms "
          "| err (v3) | GEMM speed that would match v3 |")
    print("| --- | ---: | --- | --- | ---: | ---: | ---: |")
    for n, t, g, a, o in rows:
        med, lo, hi = v3[n]
        rb = f"{runb[n][0]:.1f}" if n in runb else ""
        print(f"| {n} | {t:.1f} | {g:.1f} / {a:.1f} / {o:.1f} | {med:.1f} ({lo:.1f}-{hi:.1f}) | {rb} | "
              f"{100 * (t / med - 1):+.1f} % | {g / (med - a - o):.3f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""ratios.py: per number of held SMs, the median over the GEMMs of a tpo_sm run.log of
t_idle/t_all ("margin": TE's set_sm_margin true, the GEMM told sms - n, beside n held SMs) and
t_nomargin/t_all ("nomargin": set_sm_margin false), with min and max, then the calibration
file's "tp_comm_overlap_sm" section to paste.

    python3 calibration/tpo-sm/ratios.py calibration/tpo-sm/measured/h100-20261205-1422/run.log
"""
import json
import re
import statistics
import sys


def parse(path):
    gpu, sms, rows = None, None, []
    cols = None
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.strip()
            m = re.match(r"# tpo_sm: (.+), (\d+) SMs;", line)
            if m:
                if gpu is not None and (gpu, sms) != (m.group(1), int(m.group(2))):
                    sys.exit(f"{path}:{ln}: a second GPU ({m.group(1)}) in one run.log")
                gpu, sms = m.group(1), int(m.group(2))
                continue
            if line.startswith("# gemm "):
                cols = line[2:].split()
                continue
            if not line or line.startswith("#") or cols is None:
                continue
            f_ = line.split()
            if len(f_) != len(cols):
                continue  # rc lines, nvidia-smi, date
            r = dict(zip(cols, f_))
            try:
                rows.append({"gemm": r["gemm"], "shape": (r["m"], r["n"], r["k"]), "held": int(r["held"]),
                             "t_all": float(r["t_all"]), "t_idle": float(r["t_idle"]),
                             "t_nomargin": float(r["t_nomargin"])})
            except (KeyError, ValueError) as e:
                sys.exit(f"{path}:{ln}: bad row ({e})")
    if not rows or sms is None:
        sys.exit(f"{path}: no tpo_sm rows")
    return gpu, sms, rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    gpu, sms, rows = parse(path)
    held = sorted({r["held"] for r in rows})
    print(f"# {path}: {gpu}, {sms} SMs, {len(rows)} rows, {len(rows) // len(held)} GEMMs per n")
    print(f"{'n':>3} {'rule':>6} | {'margin med':>10} {'min':>6} {'max':>6} | {'nomargin med':>12} {'min':>6} {'max':>6}")
    points = []
    for n in held:
        a = [r["t_idle"] / r["t_all"] for r in rows if r["held"] == n]
        b = [r["t_nomargin"] / r["t_all"] for r in rows if r["held"] == n]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{n:>3} {sms / (sms - n):6.4f} | {ma:10.4f} {min(a):6.4f} {max(a):6.4f} | "
              f"{mb:12.4f} {min(b):6.4f} {max(b):6.4f}")
        points.append({"held": n, "margin": round(ma, 4), "nomargin": round(mb, 4)})
    sec = {"tp_comm_overlap_sm": {"measured_on": gpu, "sms": sms, "source": path, "points": points}}
    print(json.dumps(sec, indent=2))


if __name__ == "__main__":
    main()

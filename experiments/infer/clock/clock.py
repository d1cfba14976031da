#!/usr/bin/env python3
"""clock.py — the SM clock and board power of each plan's prefills, from run_gpu.sh's output.

usage: clock.py DIR   (DIR: clock.tgz unpacked, the folder holding smi.csv, windows.tsv, PLAN.txt)

For each plan: the nvidia-smi samples inside its host window (execute's start to end) where the GPU was busy
(utilization > 0 and instantaneous power above idle + 150 W, idle the median power outside every window) and
the clock below the maximum (the set-up's memory-bound fill and the decode steps run at the maximum clock and
below the threshold, the prefills above it); their count, the median and 10th / 90th percentiles of the SM
clock, the median power, and the TTFT `tacorun execute` printed (median of the 3 timed prefills)."""
import datetime
import os
import re
import statistics
import sys


def ts(s):
    s = s.strip()
    head, _, frac = s.partition(".")
    return datetime.datetime.strptime(head, "%Y/%m/%d %H:%M:%S") + datetime.timedelta(
        microseconds=int((frac + "000000")[:6]) if frac else 0)


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(round(q * (len(v) - 1)))))]


def main():
    d = sys.argv[1]
    samples = []
    for line in open(os.path.join(d, "smi.csv")):
        f = [x.strip() for x in line.split(",")]
        try:
            samples.append((ts(f[0]), float(f[1]), float(f[2]), float(f[4])))
        except (ValueError, IndexError):
            continue
    wins = []
    for line in open(os.path.join(d, "windows.tsv")):
        name, t0, t1, rc = line.rstrip("\n").split("\t")
        wins.append((name, ts(t0), ts(t1), rc))
    inside = lambda t: any(a <= t <= b for _, a, b, _ in wins)
    idle = statistics.median([s[2] for s in samples if not inside(s[0])] or [0.0])
    fmax = max(s[1] for s in samples)
    print(f"# {len(samples)} samples; idle (outside every run) {idle:.0f} W; busy: utilization > 0, power > "
          f"{idle + 150:.0f} W")
    print("plan\trc\tttft_ms\tbusy\tmhz_median\tmhz_p10\tmhz_p90\tpower_w_median\tat_max_clock")
    for name, a, b, rc in wins:
        busy = [s for s in samples if a <= s[0] <= b and s[3] > 0 and s[2] > idle + 150]
        m = re.search(r"ttft_s ([0-9.]+)", open(os.path.join(d, name + ".txt")).read())
        ttft = f"{1e3 * float(m.group(1)):.1f}" if m else "-"
        if not busy:
            print(f"{name}\t{rc}\t{ttft}\t0\t-\t-\t-\t-\t-")
            continue
        mhz = [s[1] for s in busy]
        print(f"{name}\t{rc}\t{ttft}\t{len(busy)}\t{statistics.median(mhz):.0f}\t{pct(mhz, 0.1):.0f}\t"
              f"{pct(mhz, 0.9):.0f}\t{statistics.median([s[2] for s in busy]):.0f}\t"
              f"{sum(1 for x in mhz if x >= fmax) / len(mhz):.2f}")


if __name__ == "__main__":
    main()

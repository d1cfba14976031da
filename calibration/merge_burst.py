#!/usr/bin/env python3
"""merge_burst.py — the clock section's burst profile ("clock"."burst") from a
`tacorun bench-burst` output (runtime/bench/bench_burst.c) into calibration
files of the same GPU, changing nothing else. FILE's notes get
"; burst: SRC (merge_burst.py)" appended.

bench-burst runs one GEMM back to back after a long idle and prints, per bin
of time since the burst began ("| 0-5 | ... | median |", ms), the mean speed
of the launches that started there against the burst's sustained end (the
state the back-to-back tables are timed in). Each bin becomes
{"from_us", "to_us", "gemm_speed"} with the median column. Only the inference
prefill reads it (sim/INFERENCE.md, "The prefill clock"); the training
simulator's clock model and every training prediction ignore it. A file
without a clock section is refused (the profile belongs to it).

usage: merge_burst.py --from BENCH_BURST.txt [--gpu NAME] FILE...
"""
import argparse
import json
import re
import sys

from merge_infer import append_note, data_json


def burst_bins(path):
    """The bins of a bench-burst output: [(from_us, to_us, speed)], sorted."""
    bins = []
    for line in open(path):
        m = re.match(r"\| ([\d.]+)-([\d.]+) \|.* ([\d.]+) \|$", line.strip())
        if m:
            a, b, v = map(float, m.groups())
            bins.append((a * 1000, b * 1000, v))
    if not bins:
        sys.exit(f"merge_burst.py: {path}: no bins of tacorun bench-burst")
    bins.sort()
    if bins[0][0] != 0:
        sys.exit(f"merge_burst.py: {path}: the first bin starts at {bins[0][0]} us, not at the burst's start")
    for (a0, b0, _), (a1, _, _) in zip(bins, bins[1:]):
        if a1 < b0:
            sys.exit(f"merge_burst.py: {path}: bins overlap at {a1} us")
    return bins


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True, help="tacorun bench-burst output")
    ap.add_argument("--gpu", default="NVIDIA H200", help="the GPU the bench ran on (default NVIDIA H200)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    bins = burst_bins(a.src)
    for path in a.files:
        cal = json.load(open(path))
        if cal.get("gpu") != a.gpu:
            sys.exit(f"merge_burst.py: {path} is of {cal.get('gpu')}, the bench of {a.gpu}")
        if "clock" not in cal:
            sys.exit(f"merge_burst.py: {path} has no clock section (the burst profile belongs to it)")
        cal["clock"]["burst"] = [{"from_us": f, "to_us": t, "gemm_speed": round(v, 4)} for f, t, v in bins]
        append_note(cal, f"; burst: {a.src} (merge_burst.py)")
        with open(path, "w") as f:
            f.write(data_json(cal) + "\n")
        print(f"{path}: clock.burst, {len(bins)} bins, speed {bins[0][2]:.3f} at 0-{bins[0][1] / 1000:.0f} ms, "
              f"{bins[-1][2]:.3f} at {bins[-1][0] / 1000:.0f}-{bins[-1][1] / 1000:.0f} ms")


if __name__ == "__main__":
    main()

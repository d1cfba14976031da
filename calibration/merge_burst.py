#!/usr/bin/env python3
"""merge_burst.py — the clock section's burst profile ("clock"."burst") from a
`tacorun bench-burst` output (runtime/bench/bench_burst.c) into calibration
files of the same GPU, changing nothing else. FILE's notes get
"; burst: SRC (merge_burst.py)" appended, in place of an earlier "burst: " clause.

bench-burst runs one GEMM back to back after a long idle and prints, per bin
of time since the burst began ("| 0-5 | ... | median |", ms), the mean speed
of the launches that started there against the burst's sustained end (the
state the back-to-back tables are timed in). Each bin becomes
{"from_us", "to_us", "gemm_speed"} with the median column. Only the inference
prefill reads it (sim/INFERENCE.md, "The prefill clock"); the training
simulator's clock model and every training prediction ignore it. A file
without a clock section is refused (the profile belongs to it).

--from-clock instead derives the profile from FILE's own clock section, until bench-burst has run: at its
longest period, the bursts whose idle before them is at least as long as they are (duty <= 0.5: the
periodic state nearest a burst from idle) give the mean speed S(b) of a burst of b = duty x period;
differenced, b_i S_i - b_(i-1) S_(i-1) over b_i - b_(i-1) from b_0 = 0, they are the speeds of the bins
[b_(i-1), b_i). A lower bound on a burst from a long idle (more idle, more budget); after the last bin
the speed is 1.

usage: merge_burst.py (--from BENCH_BURST.txt | --from-clock) [--gpu NAME] FILE...
"""
import argparse
import re
import sys

from merge_infer import append_note, load_bench_target, write_calibration


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


def clock_bins(clock):
    """The burst profile a clock section's longest period implies (--from-clock): [(from_us, to_us, speed)]."""
    period = max(p["period_us"] for p in clock["points"])
    pts = sorted((p["duty"] * period, p["gemm_speed"]) for p in clock["points"]
                 if p["period_us"] == period and p["duty"] <= 0.5)
    if not pts:
        sys.exit(f"merge_burst.py: the clock section's {period:.0f}-us row has no point of duty <= 0.5")
    bins, b0, w0 = [], 0.0, 0.0
    for b, speed in pts:
        bins.append((round(b0, 1), round(b, 1), (b * speed - w0) / (b - b0)))
        b0, w0 = b, b * speed
    return bins, period


def main():
    ap = argparse.ArgumentParser()
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--from", dest="src", help="tacorun bench-burst output")
    src.add_argument("--from-clock", action="store_true", help="derive it from each FILE's own clock section")
    ap.add_argument("--gpu", default="NVIDIA H200", help="the GPU the bench ran on (default NVIDIA H200)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    bins = burst_bins(a.src) if a.src else None
    for path in a.files:
        cal = load_bench_target("merge_burst.py", path, a.gpu, "clock", "the burst profile belongs to it")
        if a.from_clock:
            bins, period = clock_bins(cal["clock"])
            note = f"; burst: the clock section's {period / 1000:.0f}-ms row, duty <= 0.5 (merge_burst.py --from-clock)"
        else:
            note = f"; burst: {a.src} (merge_burst.py)"
        cal["clock"]["burst"] = [{"from_us": f, "to_us": t, "gemm_speed": round(v, 4)} for f, t, v in bins]
        # the profile replaces the one before: so does its note clause
        cal["notes"] = "; ".join(c for c in cal.get("notes", "").split("; ") if not c.startswith("burst: "))
        append_note(cal, note)
        write_calibration(path, cal)
        print(f"{path}: clock.burst, {len(bins)} bins, speed {bins[0][2]:.3f} at 0-{bins[0][1] / 1000:.0f} ms, "
              f"{bins[-1][2]:.3f} at {bins[-1][0] / 1000:.0f}-{bins[-1][1] / 1000:.0f} ms")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""passes.py — how much of the GEMM table's held-out error is measurement noise.

`tacorun calibrate --gemm-tsv FILE` writes every pass's time of every GEMM
(the calibration file holds their median). This script
  1. prints how far two passes of the same run lie apart (median |p1 - p2| /
     mean), overall and by GEMM duration;
  2. writes the calibration file again with pass 1 only, pass 2 only and the
     median of the passes, runs the held-out check (calib_heldout) on each and
     prints its GEMM rows, so the effect of the second pass is measured on the
     same data;
  3. with --old FILE, the median difference against another calibration file
     on the shapes both hold (the run-to-run difference between two GPU calls).

usage: passes.py CALIBRATION.json GEMM.tsv --heldout build-x/tests/calib_heldout [--old OLD.json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def rel(a, b):
    return abs(a - b) / (0.5 * (a + b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("calibration")
    ap.add_argument("tsv")
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--old")
    a = ap.parse_args()

    rows = []
    with open(a.tsv) as f:
        head = f.readline().rstrip("\n").split("\t")
        npass = sum(1 for h in head if h.startswith("pass"))
        for line in f:
            v = line.rstrip("\n").split("\t")
            m, n, k = int(v[0]), int(v[1]), int(v[2])
            t = [float(x) for x in v[5 : 5 + npass]]
            rows.append(((m, n, k), t))
    if npass < 2:
        sys.exit("passes.py: the TSV has one pass; nothing to compare")

    print(f"{a.tsv}: {len(rows)} GEMMs, {npass} passes")
    buckets = [(0, 20), (20, 100), (100, 1000), (1000, 1e12)]
    print("| GEMM time (us) | n | median |p1-p2|/mean | p90 |")
    print("|---|---:|---:|---:|")
    for lo, hi in [(0, 1e12)] + buckets:
        d = sorted(rel(t[0], t[1]) for _, t in rows if t[0] > 0 and t[1] > 0 and lo <= 0.5 * (t[0] + t[1]) < hi)
        if d:
            label = "all" if hi == 1e12 and lo == 0 else f"{lo:g}-{hi:g}"
            print(f"| {label} | {len(d)} | {100 * d[len(d) // 2]:.2f}% | {100 * d[int(0.9 * (len(d) - 1))]:.2f}% |")
    slow = [t[1] / t[0] for _, t in rows if t[0] > 0 and t[1] > 0]
    print(f"pass 2 / pass 1: median {statistics.median(slow):.4f} (a drift between the passes shows here)")

    with open(a.calibration) as f:
        cal = json.load(f)
    by_key = {key: t for key, t in rows}
    variants = {"pass 1 only": lambda t: t[0], "pass 2 only": lambda t: t[1],
                "median of the passes (the file)": lambda t: statistics.median([x for x in t if x > 0])}
    for label, pick in variants.items():
        c = dict(cal)
        g = []
        for p in cal["gemm"]:
            t = by_key.get((p["m"], p["n"], p["k"]))
            if t and all(x > 0 for x in t):
                q = dict(p)
                q["us"] = pick(t)
                g.append(q)
            else:
                g.append(p)
        c["gemm"] = g
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tf:
            json.dump(c, tf)
            path = tf.name
        try:
            out = subprocess.run([a.heldout, path], capture_output=True, text=True, check=True).stdout
        finally:
            os.unlink(path)
        print(f"\nheld-out, GEMMs from {label}:")
        for line in out.splitlines():
            if line.startswith("| gemm"):
                print(line)

    if a.old:
        with open(a.old) as f:
            old = {(p["m"], p["n"], p["k"]): p["us"] for p in json.load(f)["gemm"]}
        new = {(p["m"], p["n"], p["k"]): p["us"] for p in cal["gemm"]}
        both = [k for k in new if k in old]
        d = sorted(rel(new[k], old[k]) for k in both)
        ratio = statistics.median(new[k] / old[k] for k in both)
        big = sorted(rel(new[k], old[k]) for k in both if old[k] >= 1000)
        print(f"\nagainst {a.old}: {len(both)} shapes in both, median difference {100 * d[len(d) // 2]:.2f}%"
              f" ({100 * big[len(big) // 2]:.2f}% over the {len(big)} of >= 1 ms), new / old median {ratio:.4f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""passes.py — what the GEMM table's held-out error is made of: measurement noise or interpolation.

`tacorun calibrate --gemm-tsv FILE` writes every pass's time of every GEMM (the
calibration file holds their geometric mean; passes alternate direction: 1, 3,
... forward over the shape list, 2, 4, ... in reverse). This script
  1. prints how far the passes of one run lie apart (median |p1 - p2| / mean),
     overall and by GEMM duration, and the drift between passes;
  2. writes the calibration file again with the GEMM table made from one pass,
     the forward or reverse passes, the median and the geometric mean of the
     passes, runs the held-out check (calib_heldout) on each and prints its
     GEMM rows: what each way of combining the passes does on the same data;
  3. with --other TSV (the passes of another GPU run, same shapes): the held-out
     check of each run and of both together, and the correlation of the signed
     held-out errors of the two runs. Errors that come back in an independent
     run are the shapes' own (interpolation between points that cuBLASLt runs
     with different kernels); errors that do not are noise;
  4. with --old FILE, the median difference against another calibration file
     on the shapes both hold.

usage: passes.py CALIBRATION.json GEMM.tsv --heldout build-x/calib_heldout [--other GEMM2.tsv] [--old OLD.json]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile


def rel(a, b):
    return abs(a - b) / (0.5 * (a + b))


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v))


def read_tsv(path):
    rows = {}
    with open(path) as f:
        head = f.readline().rstrip("\n").split("\t")
        npass = sum(1 for h in head if h.startswith("pass"))
        for line in f:
            v = line.rstrip("\n").split("\t")
            rows[(int(v[0]), int(v[1]), int(v[2]))] = [float(x) for x in v[5 : 5 + npass]]
    return rows, npass


def heldout(cal, table, tool, points=False):
    """GEMM rows of calib_heldout on `cal` with its GEMM times from `table` (shape -> us);
    with points, also the signed log error of every held-out shape."""
    c = dict(cal)
    c["gemm"] = [dict(p, us=table.get((p["m"], p["n"], p["k"]), p["us"])) for p in cal["gemm"]]
    with tempfile.TemporaryDirectory() as d:
        path, pts = os.path.join(d, "c.json"), os.path.join(d, "points.tsv")
        with open(path, "w") as f:
            json.dump(c, f)
        out = subprocess.run([tool, "--points", pts, path], capture_output=True, text=True, check=True).stdout
        err = {}
        if points:
            with open(pts) as f:
                f.readline()
                for line in f:
                    v = line.split("\t")
                    err[(int(v[0]), int(v[1]), int(v[2]))] = math.log(float(v[5]) / float(v[4]))
    rows = [line for line in out.splitlines() if line.startswith("| gemm") or line.startswith("|   of which")]
    return rows, err


def variants(rows, npass):
    ok = {key: t for key, t in rows.items() if all(x > 0 for x in t)}
    v = {f"pass {i + 1} only ({'reverse' if i % 2 else 'forward'})": {k: t[i] for k, t in ok.items()}
         for i in range(npass)}
    if npass > 2:
        v["forward passes, geometric mean"] = {k: geomean(t[0::2]) for k, t in ok.items()}
    v["median of the passes (files before 2026-11-30 03:00)"] = {k: statistics.median(t) for k, t in ok.items()}
    v["geometric mean of the passes (the file)"] = {k: geomean(t) for k, t in ok.items()}
    return v


def corr(a, b):
    n = len(a)
    ma, mb = sum(a) / n, sum(b) / n
    c = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    return c / math.sqrt(sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("calibration")
    ap.add_argument("tsv")
    ap.add_argument("--heldout", required=True)
    ap.add_argument("--other")
    ap.add_argument("--old")
    a = ap.parse_args()

    rows, npass = read_tsv(a.tsv)
    if npass < 2:
        sys.exit("passes.py: the TSV has one pass; nothing to compare")
    print(f"{a.tsv}: {len(rows)} GEMMs, {npass} passes")
    buckets = [(0, 20), (20, 100), (100, 1000), (1000, 1e12)]
    print("| GEMM time (us) | n | median |p1-p2|/mean | p90 |")
    print("|---|---:|---:|---:|")
    for lo, hi in [(0, 1e12)] + buckets:
        d = sorted(rel(t[0], t[1]) for t in rows.values() if t[0] > 0 and t[1] > 0 and lo <= 0.5 * (t[0] + t[1]) < hi)
        if d:
            label = "all" if hi == 1e12 and lo == 0 else f"{lo:g}-{hi:g}"
            print(f"| {label} | {len(d)} | {100 * d[len(d) // 2]:.2f}% | {100 * d[int(0.9 * (len(d) - 1))]:.2f}% |")
    for i in range(1, npass):
        r = statistics.median(t[i] / t[0] for t in rows.values() if t[0] > 0 and t[i] > 0)
        print(f"pass {i + 1} / pass 1: median {r:.4f}")

    with open(a.calibration) as f:
        cal = json.load(f)
    for label, table in variants(rows, npass).items():
        print(f"\nheld-out, GEMMs from {label}:")
        print("\n".join(heldout(cal, table, a.heldout)[0]))

    if a.other:
        other, npass2 = read_tsv(a.other)
        both = [k for k in rows if k in other and all(x > 0 for x in rows[k] + other[k])]
        run1 = {k: geomean(rows[k]) for k in both}
        run2 = {k: geomean(other[k]) for k in both}
        joint = {k: geomean(rows[k] + other[k]) for k in both}
        print(f"\nagainst {a.other} ({npass2} passes), {len(both)} shapes in both:")
        d = sorted(abs(math.log(run1[k] / run2[k])) for k in both)
        print(f"  the two runs' tables differ by {100 * d[len(d) // 2]:.2f}% (median over shapes)")
        r1, e1 = heldout(cal, run1, a.heldout, True)
        r2, e2 = heldout(cal, run2, a.heldout, True)
        rj, _ = heldout(cal, joint, a.heldout)
        print("  held-out, this run:\n" + "\n".join(r1[:1]) + "\n  the other run:\n" + "\n".join(r2[:1]))
        print("  both runs' passes together (geometric mean):\n" + "\n".join(rj[:1]))
        common = [k for k in e1 if k in e2]
        x, y = [e1[k] for k in common], [e2[k] for k in common]
        print(f"  signed held-out errors of the two runs: correlation {corr(x, y):.3f} over {len(common)} shapes;"
              f" median |error| of their mean {100 * statistics.median(abs(0.5 * (p + q)) for p, q in zip(x, y)):.2f}%,"
              f" median |difference| {100 * statistics.median(abs(p - q) for p, q in zip(x, y)):.2f}%")

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

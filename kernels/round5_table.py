#!/usr/bin/env python3
"""round5_table.py — tables of kernels/RESULTS.md round 5 from bench-codec logs.

Usage: round5_table.py BENCH_LOG [G ...]
Prints, per kernel and variant (BF16 rows), GB/s and % of 4,276 GB/s at each
size, % of the same-size cudaMemcpy and of the variant's mix ceiling
(stream r2w1 for the encode, r1w2 for the decode), and a least-squares fit
time = fixed + bytes / steady over the 64 MiB .. 256 MiB sizes (the per-launch
cost and the sustained rate)."""
import collections
import sys

CEIL = 4276.0


def rows(path):
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        if len(f) < 9:
            continue
        kv = dict(x.split("=", 1) for x in f if "=" in x)
        yield dict(kernel=f[0], variant=f[1], dtype=f[2], G=int(f[3]), size=int(f[4]), us=float(f[6]),
                   gbps=float(f[7]), copy=kv.get("copy%"), mix=kv.get("mix%"))


def fit(points):
    """least squares us = a + b * bytes; returns (a us, 1/b in GB/s)"""
    n = len(points)
    if n < 2:
        return None
    sx = sum(p[0] for p in points); sy = sum(p[1] for p in points)
    sxx = sum(p[0] * p[0] for p in points); sxy = sum(p[0] * p[1] for p in points)
    b = (n * sxy - sx * sy) / (n * sxx - sx * sx)
    a = (sy - b * sx) / n
    return a, 1e-3 / b  # bytes / us -> GB/s: bytes/(b us) = 1/b B/us = 1e-3/b GB/s


def main():
    path = sys.argv[1]
    groups = [int(g) for g in sys.argv[2:]] or [128, 256]
    data = collections.defaultdict(dict)
    for r in rows(path):
        if r["dtype"] != "bf16":
            continue
        data[(r["kernel"], r["variant"], r["G"])][r["size"]] = r
    sizes = sorted({s for d in data.values() for s in d})
    mib = lambda s: f"{s >> 20} MiB" if s < 1 << 30 else f"{s >> 30} GiB"
    print("| kernel | variant | G | " + " | ".join(mib(s) for s in sizes) + " | fit 64-256 MiB: fixed us, steady GB/s (%) |")
    print("|---|---|---|" + "---|" * len(sizes) + "---|")
    for (k, v, g), d in sorted(data.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        if g not in groups or k.startswith("decode-sum") or k == "encode-unfused":
            continue
        cells = []
        for s in sizes:
            r = d.get(s)
            if not r:
                cells.append("")
                continue
            c = f"{r['gbps']:.0f} ({100 * r['gbps'] / CEIL:.1f})"
            if r["copy"]:
                c += f" c{r['copy']} m{r['mix']}"
            cells.append(c)
        pts = [(d[s]["gbps"] * d[s]["us"] * 1e3, d[s]["us"]) for s in sizes if s in d and s <= 256 << 20]
        ft = fit(pts)
        fs = f"{ft[0]:.1f} us, {ft[1]:.0f} ({100 * ft[1] / CEIL:.1f})" if ft else ""
        print(f"| {k} | {v} | {g} | " + " | ".join(cells) + f" | {fs} |")


if __name__ == "__main__":
    main()

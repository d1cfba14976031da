#!/usr/bin/env python3
"""transfer_check.py — the calibration transfer against a measurement of the
target GPU: each point of a file measured on GPU B (MEASURED) against the
same point of a file measured on GPU A and transferred onto B
(TRANSFERRED, `tacosim derive-calibration --gpu B --from A.json`), and
against A's own measurement (RAW, untransferred) for scale.

Prints markdown tables of measured / transferred (1.00: the transfer priced
the point as B ran it; below 1: B ran faster than priced) by class: GEMMs
(by their time on B), the executor's attention per shape (forward,
backward), cuDNN's fused attention (attention_backends.fused), and the
memory-bound kernel tables (points matched by bytes). Shows the median,
the 10th and 90th percentiles and the time-weighted ratio (sum measured /
sum transferred) of each class.

usage: transfer_check.py MEASURED TRANSFERRED RAW
"""
import json
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * (len(v) - 1))))]


def row(name, pairs):
    """pairs: (measured, transferred, raw) times of one class's points."""
    if not pairs:
        return f"| {name} | 0 | - | - | - | - | - |"
    r = [m / t for m, t, _ in pairs]
    weighted = sum(m for m, _, _ in pairs) / sum(t for _, t, _ in pairs)
    raw = sum(m for m, _, _ in pairs) / sum(a for _, _, a in pairs)
    return (f"| {name} | {len(pairs)} | {statistics.median(r):.3f} | {pct(r, 0.1):.3f} | {pct(r, 0.9):.3f} | "
            f"{weighted:.3f} | {raw:.3f} |")


def gemm_pairs(m, t, a):
    key = lambda g: (g["m"], g["n"], g["k"])
    tt = {key(g): g["us"] for g in t["gemm"]}
    aa = {key(g): g["us"] for g in a["gemm"]}
    return [(g["us"], tt[key(g)], aa[key(g)]) for g in m["gemm"] if key(g) in tt and key(g) in aa]


def shape_key(s):
    return tuple(s[k] for k in ("head_dim", "seq", "batch", "heads", "kv_heads", "causal"))


def attn_pairs(ms, ts, as_, field):
    tt = {shape_key(s): s for s in ts}
    aa = {shape_key(s): s for s in as_}
    return [(s[field], tt[shape_key(s)][field], aa[shape_key(s)][field]) for s in ms
            if shape_key(s) in tt and shape_key(s) in aa]


def kernel_pairs(m, t, a, skip):
    out = {}
    for name, points in m["kernels"].items():
        if skip(name) or name not in t["kernels"] or name not in a["kernels"]:
            continue
        tt = {p["bytes"]: p["us"] for p in t["kernels"][name] if "bytes" in p}
        aa = {p["bytes"]: p["us"] for p in a["kernels"][name] if "bytes" in p}
        pairs = [(p["us"], tt[p["bytes"]], aa[p["bytes"]]) for p in m["kernels"][name]
                 if "bytes" in p and p["bytes"] in tt and p["bytes"] in aa]
        if pairs:
            out[name] = pairs
    return out


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__.strip().splitlines()[-1])
    m, t, a = (load(p) for p in sys.argv[1:])
    print(f"measured: {m['gpu']} ({m['measured_at']}); transferred: {t['gpu']} ({t['notes'][:60]}...); "
          f"raw: {a['gpu']} ({a['measured_at']})\n")
    print("| class | points | median measured / transferred | p10 | p90 | time-weighted | measured / raw (time-weighted) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    g = gemm_pairs(m, t, a)
    print(row("GEMMs, all", g))
    for lo, hi, label in ((0, 100, "< 100 us"), (100, 1000, "100 us - 1 ms"), (1000, 1e12, ">= 1 ms")):
        print(row(f"GEMMs {label} (on the measured GPU)", [p for p in g if lo <= p[0] < hi]))
    print(row("attention, executor, forward", attn_pairs(m["attention_shapes"], t["attention_shapes"], a["attention_shapes"], "fwd_us")))
    print(row("attention, executor, backward", attn_pairs(m["attention_shapes"], t["attention_shapes"], a["attention_shapes"], "bwd_us")))
    for backend in ("fused", "fused_dropout"):
        mb = m.get("attention_backends", {}).get(backend, [])
        tb = t.get("attention_backends", {}).get(backend, [])
        ab = a.get("attention_backends", {}).get(backend, [])
        print(row(f"attention, cuDNN {backend}, forward", attn_pairs(mb, tb, ab, "fwd_us")))
        print(row(f"attention, cuDNN {backend}, backward", attn_pairs(mb, tb, ab, "bwd_us")))
    decode = lambda n: n.startswith(("attention", "gemm")) or "." in n
    k = kernel_pairs(m, t, a, decode)
    allk = [p for pairs in k.values() for p in pairs]
    print(row(f"memory-bound and codec kernels ({len(k)} tables)", allk))
    big = [p for p in allk if p[0] >= 100]
    print(row("  of them >= 100 us", big))
    print("\nPer kernel table (time-weighted measured / transferred, points):\n")
    print("| table | points | time-weighted | median | measured / raw |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in sorted(k):
        pairs = k[name]
        w = sum(x for x, _, _ in pairs) / sum(y for _, y, _ in pairs)
        raw = sum(x for x, _, _ in pairs) / sum(z for _, _, z in pairs)
        print(f"| {name} | {len(pairs)} | {w:.3f} | {statistics.median(x / y for x, y, _ in pairs):.3f} | {raw:.3f} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""attn_loo.py — leave-one-out check of the "attention_shapes" lookup
(schema/calibration_attn.c, schema_lookup_attn): each measured shape is left
out and priced from the others by the same rule (launch 3 us + roofline time
over the 1/d^2-weighted efficiency of the 16 nearest shapes in (ln d, ln s,
ln b*h, ln h/kv); the roofline of the H200 cluster file: 989 TFLOP/s, 4.8 TB/s),
forward and backward; also with every shape of the same (d, s, h, kv) left out
(the query's batch neighbours gone). Prints median / p90 / max |error|.
usage: attn_loo.py CALIBRATION.json"""
import json, math, statistics, sys

PEAK, HBM, LAUNCH = 989e12, 4800e9, 3.0

def flops(p, bwd):
    f = 4.0 * p["batch"] * p["heads"] * p["seq"] ** 2 * p["head_dim"] * (0.5 if p["causal"] else 1)
    return 2.5 * f if bwd else f

def nbytes(p, bwd):
    tok = p["batch"] * p["seq"] * p["head_dim"] * 2.0
    return tok * (4 * p["heads"] + 4 * p["kv_heads"]) if bwd else tok * (2 * p["heads"] + 2 * p["kv_heads"])

def roof(p, bwd):
    return max(flops(p, bwd) / PEAK, nbytes(p, bwd) / HBM) * 1e6

def coords(p):
    return (math.log(p["head_dim"]), math.log(p["seq"]), math.log(p["batch"] * p["heads"]), math.log(p["heads"] / p["kv_heads"]))

def price(q, pts, bwd):
    cq = coords(q)
    near = sorted(((sum((a - b) ** 2 for a, b in zip(coords(p), cq)), i) for i, p in enumerate(pts) if p["causal"] == q["causal"]))[:16]
    zero = near[0][0] == 0
    w = e = 0.0
    for d2, i in near:
        if zero and d2 > 0:
            break
        p = pts[i]
        t = p["bwd_us" if bwd else "fwd_us"]
        wi = 1.0 if zero else 1.0 / d2
        w += wi
        e += wi * roof(p, bwd) / (t - LAUNCH)
    return LAUNCH + roof(q, bwd) * w / e

pts = json.load(open(sys.argv[1]))["attention_shapes"]
for family in (False, True):
    for bwd in (False, True):
        err = []
        for i, q in enumerate(pts):
            same = lambda p: (p["head_dim"], p["seq"], p["heads"], p["kv_heads"]) == (q["head_dim"], q["seq"], q["heads"], q["kv_heads"])
            rest = [p for j, p in enumerate(pts) if j != i and not (family and same(p))]
            t = q["bwd_us" if bwd else "fwd_us"]
            err.append(abs(price(q, rest, bwd) / t - 1) * 100)
        err.sort()
        print(f"{'without its batch family' if family else 'one point left out':26s} {'bwd' if bwd else 'fwd'}: "
              f"{len(err)} shapes, median {statistics.median(err):.2f} %, p90 {err[int(0.9 * len(err))]:.2f} %, max {err[-1]:.2f} %")

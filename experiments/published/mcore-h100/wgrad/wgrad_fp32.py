#!/usr/bin/env python3
"""wgrad_fp32.py — what Megatron-LM's gradient-accumulation fusion costs a weight-gradient GEMM.

With --gradient-accumulation-fusion (Megatron-LM's default; core_v0.8.0 keeps fp32 `main_grad` buffers,
`grad_reduce_in_fp32` / the bf16 rule of megatron/training/arguments.py), each linear layer's weight
gradient is not written as a bf16 GEMM output: the GEMM accumulates into the fp32 main_grad (beta = 1),
reading and writing 4 bytes per weight instead of writing 2. tacosim prices a wgrad GEMM from its bf16
GEMM table. This times both forms on this GPU at each Megatron-Core H100 row's per-layer wgrad shapes
(tokens = micro-batch x 4,096 as the inner dimension; QKV, attention projection, FC1, FC2 sharded by TP):
  bf16   torch.mm(x^T, dy)                                  (bf16 out)
  fp32   torch.addmm(main_grad, x^T, dy, out_dtype=float32)  (fp32 out, beta = 1: the fused accumulation)
(hidden and layers from ../published.csv, TP, PP and micro-batch from ../plans/), each the median of --reps after 3 warm-ups, back to back, after 2 s of 8192^3 GEMMs (clocks settled).
Check: fp32 result of one accumulation equals main_grad + the fp32 product within bf16 GEMM tolerance.
usage: wgrad_fp32.py [--reps 15] [--out OUT.json]
"""
import argparse
import csv
import json
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def rows():
    """row name -> (hidden, tp, micro-batch, layers per stage): hidden and layers from ../published.csv,
    tp, pp and the micro-batch from ../plans/mcore-<name>.json (tune.sh's choice)."""
    out = {}
    with open(os.path.join(HERE, "..", "published.csv")) as f:
        for r in csv.DictReader(line for line in f if not line.startswith("#")):
            plan = json.load(open(os.path.join(HERE, "..", "plans", f"mcore-{r['name'].lower()}.json")))
            lay = plan["layout"]
            out[r["name"]] = (int(r["hidden"]), lay["tp"], plan["batch"]["micro"], int(r["layers"]) // lay["pp"])
    return out


SEQ = 4096


def timed(fn, reps):
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    for _ in range(3):
        fn()
    t = []
    for _ in range(reps):
        ev[0].record()
        fn()
        ev[1].record()
        ev[1].synchronize()
        t.append(1e3 * ev[0].elapsed_time(ev[1]))
    return statistics.median(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.manual_seed(1234)
    ha = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(200):
        ha @ ha
    e1.record()
    e1.synchronize()
    heat_ms = e0.elapsed_time(e1) / 200
    for _ in range(int(2000 / heat_ms)):
        ha @ ha
    del ha
    # the check, one small shape: fp32 accumulation against main_grad + the fp32 product
    x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(512, 384, device="cuda", dtype=torch.bfloat16)
    mg = torch.randn(256, 384, device="cuda", dtype=torch.float32)
    got = torch.addmm(mg, x.t(), dy, out_dtype=torch.float32)
    want = mg + x.t().float() @ dy.float()
    err = ((got - want).abs().max() / want.abs().max()).item()
    ok = err < 1e-2
    print(f"check: max |err| / max |ref| {err:.2e} (tolerance 1e-2): {'ok' if ok else 'FAILED'}")
    if not ok:
        sys.exit(1)
    res = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "heater_tflops": 2 * 8192 ** 3 / heat_ms / 1e9,
           "reps": a.reps, "check_rel_err": err, "rows": {}}
    print("row    gemm    m x n (weight)      k (tokens)  bf16 us   fp32-acc us  ratio")
    for row, (h, tp, mb, lps) in rows().items():
        k = mb * SEQ
        shapes = {"qkv": (h, 3 * h // tp), "proj": (h // tp, h), "fc1": (h, 4 * h // tp), "fc2": (4 * h // tp, h)}
        out = {}
        for name, (m, n) in shapes.items():
            x = torch.randn(k, m, device="cuda", dtype=torch.bfloat16)
            dy = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
            mg = torch.zeros(m, n, device="cuda", dtype=torch.float32)
            tb = timed(lambda: torch.mm(x.t(), dy), a.reps)
            tf = timed(lambda: torch.addmm(mg, x.t(), dy, out_dtype=torch.float32, out=mg), a.reps)
            out[name] = {"m": m, "n": n, "k": k, "bf16_us": round(tb, 2), "fp32_acc_us": round(tf, 2)}
            print(f"{row:6s} {name:5s} {m:6d} x {n:6d} {k:10d} {tb:10.1f} {tf:12.1f} {tf / tb:6.3f}")
            del x, dy, mg
        tb = sum(v["bf16_us"] for v in out.values())
        tf = sum(v["fp32_acc_us"] for v in out.values())
        res["rows"][row] = {"hidden": h, "tp": tp, "micro_batch": mb, "layers_per_stage": lps, "gemms": out,
                            "layer_bf16_us": round(tb, 2), "layer_fp32_acc_us": round(tf, 2)}
        print(f"{row:6s} layer  {tb:.1f} -> {tf:.1f} us ({100 * (tf / tb - 1):+.1f} %)")
        torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()

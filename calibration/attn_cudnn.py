#!/usr/bin/env python3
"""attn_cudnn.py — times attention implementations other than tacosim's
executor kernel at the shapes of the calibration's "attention_shapes" section
(runtime/calibrate/calibrate_attn.c), for the calibration's
"attention_backends" section (schema/calibration_attn.c, schema/README.md).

Each backend is PyTorch's scaled_dot_product_attention pinned to one kernel
with torch.nn.attention.sdpa_kernel:
  fused    SDPBackend.CUDNN_ATTENTION   cuDNN's fused flash attention, what
           Transformer Engine's FusedAttention (Megatron --attention-backend
           fused, and TE's choice on Hopper) calls
  flash    SDPBackend.FLASH_ATTENTION   FlashAttention-2 (Megatron
           --attention-backend flash runs TE's FlashAttention, the flash-attn
           package's kernels)
  unfused  SDPBackend.MATH              Q.K^T, softmax, P.V as separate kernels
           (Megatron --attention-backend unfused / local; Megatron's own
           softmax is one fused kernel, torch's math path several: an upper
           bound for it). Only sequences <= --unfused-max-seq.
bf16, causal, grouped-query heads with enable_gqa, layout (batch, heads, seq,
head_dim). Forward and backward are timed separately with CUDA events, as
calibrate_attn.c times the executor: "in step" (the default), each launch
between 8192^3 bf16 GEMMs of about 3x its length after the GEMMs have run a
second, so the clocks are a training step's; --context alone times them back
to back. 2 untimed repetitions, then the median of --reps.

Checks first: for every backend and head dimension one small shape with fresh
random inputs against an fp32 reference (the math backend on fp32 copies):
output and the three gradients within 2e-2 of the reference's largest value.
A backend that fails a check is not timed. A shape a backend refuses
(RuntimeError) is left out and counted. --budget-s stops timing when spent
(what was left out is counted in the output and on stdout).

--dropout P (0 < P < 1): the same kernels with attention dropout (dropout_p = P on
the probabilities, Megatron-LM's --attention-dropout; the mask drawn inside the
kernel, forward and backward), written as "fused_dropout" / "flash_dropout". Their
check is statistical, as a random mask allows: the outputs and gradients are
finite, a single dropout output differs from the no-dropout one, and the mean of 32
dropout outputs (fresh masks) is at least 3 x closer to it than one is (inverted
dropout is unbiased: the error of the mean falls as 1/sqrt(32), 5.7 x).

usage: attn_cudnn.py --shapes SHAPES.json --out OUT.json [--backends fused,flash,unfused]
       [--context step|alone] [--reps 9] [--budget-s 150] [--unfused-max-seq 4096] [--dropout 0]
SHAPES.json: a calibration file (its "attention_shapes" give the shapes) or a list of points.
"""
import argparse
import datetime
import json
import math
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

BACKENDS = {"fused": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION, "unfused": SDPBackend.MATH}
HEAT_N = 8192


def sdpa(q, k, v, be, dropout=0.0):
    with sdpa_kernel([BACKENDS[be]]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout,
                                              enable_gqa=k.shape[1] != q.shape[1])


def tensors(s, dtype=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    b, h, kv, n, d = s["batch"], s["heads"], s["kv_heads"], s["seq"], s["head_dim"]
    mk = lambda hh: torch.randn(b, hh, n, d, device="cuda", dtype=dtype, generator=g).requires_grad_()
    q, k, v = mk(h), mk(kv), mk(kv)
    do = torch.randn(b, h, n, d, device="cuda", dtype=dtype, generator=g)
    return q, k, v, do


def check(be, d, kv_ratio):
    """One small shape against fp32 math: max |err| / max |ref| of out, dq, dk, dv."""
    s = {"batch": 2, "heads": 4 * kv_ratio, "kv_heads": 4, "seq": 512, "head_dim": d}
    q, k, v, do = tensors(s, seed=1234 + d + kv_ratio)
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    with sdpa_kernel([SDPBackend.MATH]):
        ref = F.scaled_dot_product_attention(q32, k32, v32, is_causal=True, enable_gqa=kv_ratio > 1)
    ref.backward(do.float())
    out = sdpa(q, k, v, be)  # fresh tensors, gradients start as None
    out.backward(do)
    worst = 0.0
    for got, want in ((out, ref), (q.grad, q32.grad), (k.grad, k32.grad), (v.grad, v32.grad)):
        worst = max(worst, ((got.float() - want).abs().max() / want.abs().max()).item())
    return worst


def check_dropout(be, d, kv_ratio, p):
    """Dropout's statistical check (module docstring): (error of one, error of the mean of 32),
    each max |x - no-dropout| / max |no-dropout|; raises ValueError on a non-finite value."""
    s = {"batch": 2, "heads": 4 * kv_ratio, "kv_heads": 4, "seq": 512, "head_dim": d}
    q, k, v, do = tensors(s, seed=1234 + d + kv_ratio)
    with torch.no_grad():
        ref = sdpa(q, k, v, be).float()
        outs = [sdpa(q, k, v, be, p).float() for _ in range(32)]
    out = sdpa(q, k, v, be, p)
    out.backward(do)
    for t in outs + [out.float(), q.grad, k.grad, v.grad]:
        if not torch.isfinite(t).all():
            raise ValueError("a non-finite value")
    scale = ref.abs().max()
    one = ((outs[0] - ref).abs().max() / scale).item()
    mean = ((torch.stack(outs).mean(0) - ref).abs().max() / scale).item()
    return one, mean


class Bench:
    def __init__(self, context):
        self.context = context
        self.ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        self.ha = torch.randn(HEAT_N, HEAT_N, device="cuda", dtype=torch.bfloat16)
        self.hb = torch.randn(HEAT_N, HEAT_N, device="cuda", dtype=torch.bfloat16)
        self.hc = torch.empty(HEAT_N, HEAT_N, device="cuda", dtype=torch.bfloat16)
        self.heat(2)
        e0, e1 = self.ev[0], self.ev[1]
        e0.record()
        self.heat(4)
        e1.record()
        e1.synchronize()
        self.heat_us = 1e3 * e0.elapsed_time(e1) / 4
        self.heat(int(1e6 / self.heat_us) + 1)  # a second of GEMMs: the clocks settle at the power cap

    def heat(self, n):
        for _ in range(n):
            torch.matmul(self.ha, self.hb, out=self.hc)

    def once(self, q, k, v, do, be, per, dropout=0.0):
        ev = self.ev
        q.grad = k.grad = v.grad = None
        self.heat(per)
        ev[0].record()
        out = sdpa(q, k, v, be, dropout)
        ev[1].record()
        self.heat(per)
        ev[2].record()
        out.backward(do)
        ev[3].record()
        self.heat(per)
        ev[3].synchronize()
        return 1e3 * ev[0].elapsed_time(ev[1]), 1e3 * ev[2].elapsed_time(ev[3])

    def time(self, s, be, reps, dropout=0.0):
        q, k, v, do = tensors(s)
        for _ in range(2):
            self.once(q, k, v, do, be, 0, dropout)
        a = sorted(self.once(q, k, v, do, be, 0, dropout) for _ in range(3))
        af, ab = a[1]
        per = 0
        if self.context == "step":
            per = max(1, math.ceil(3.0 * (af + ab) / 2.0 / self.heat_us))
            self.heat(int(0.1e6 / self.heat_us) + 1)
        tf, tb = [], []
        for r in range(-2, reps):
            f, b = self.once(q, k, v, do, be, per, dropout)
            if r >= 0:
                tf.append(f), tb.append(b)
        del q, k, v, do
        return sorted(tf)[reps // 2], sorted(tb)[reps // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--backends", default="fused,flash,unfused")
    ap.add_argument("--context", choices=["step", "alone"], default="step")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--budget-s", type=float, default=150.0)
    ap.add_argument("--unfused-max-seq", type=int, default=4096)
    ap.add_argument("--dropout", type=float, default=0.0)
    a = ap.parse_args()
    if not 0.0 <= a.dropout < 1.0:
        sys.exit(f"attn_cudnn.py: --dropout: {a.dropout} is not in [0, 1)")
    suffix = "_dropout" if a.dropout > 0 else ""
    t0 = time.time()
    src = json.load(open(a.shapes))
    pts = src["attention_shapes"] if isinstance(src, dict) else src
    keys = ("head_dim", "seq", "batch", "heads", "kv_heads")
    shapes = [{k: p[k] for k in keys} for p in pts if p.get("causal", True)]
    backends = [b for b in a.backends.split(",") if b]
    for b in backends:
        if b not in BACKENDS:
            sys.exit(f"attn_cudnn.py: --backends: unknown backend \"{b}\" (fused, flash, unfused)")
    props = torch.cuda.get_device_properties(0)
    res = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(),
           "measured_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "context": a.context, "reps": a.reps, "dropout": a.dropout, "checks": {}, "left_out": {},
           "attention_backends": {}}
    ok = []
    for be in backends:
        worst, refused, passed, checked = 0.0, 0, True, 0
        for d in sorted({s["head_dim"] for s in shapes}):
            for r in (1, 4):
                try:
                    if a.dropout > 0:
                        one, mean = check_dropout(be, d, r, a.dropout)
                        print(f"check {be}{suffix} d={d} group {r}: one {one:.3e}, mean of 32 {mean:.3e}")
                        passed = passed and one > 0 and mean * 3 <= one
                        checked += 1
                        worst = max(worst, mean / one if one > 0 else math.inf)
                    else:
                        worst = max(worst, check(be, d, r))
                except (RuntimeError, ValueError) as ex:
                    refused += 1
                    passed = passed and not isinstance(ex, ValueError)
                    print(f"check {be} d={d} group {r}: refused: {str(ex).splitlines()[0][:120]}")
        if a.dropout > 0:
            passed = passed and checked > 0
            res["checks"][be + suffix] = {"max_mean_over_one": worst, "refused": refused, "passed": passed}
            print(f"check {be}{suffix}: mean-of-32 error / one error at most {worst:.3f} (needs <= 1/3), "
                  f"{refused} shapes refused")
        else:
            res["checks"][be] = {"max_rel_err": worst, "refused": refused}
            print(f"check {be}: max |err| / max |ref| {worst:.2e} (tolerance 2e-2), {refused} shapes refused")
            passed = worst <= 2e-2
        if passed:
            ok.append(be)
    bench = Bench(a.context)
    print(f"heater GEMM {bench.heat_us:.0f} us ({2 * HEAT_N ** 3 / bench.heat_us / 1e6:.0f} TFLOP/s)")
    for be in ok:
        out, refused, skipped = [], 0, 0
        for s in shapes:
            if be == "unfused" and s["seq"] > a.unfused_max_seq:
                skipped += 1
                continue
            if time.time() - t0 > a.budget_s:
                skipped += 1
                continue
            try:
                f, b = bench.time(s, be, a.reps, a.dropout)
            except (RuntimeError, torch.OutOfMemoryError) as ex:
                refused += 1
                print(f"{be} {s}: refused: {str(ex).splitlines()[0][:120]}")
                torch.cuda.empty_cache()
                continue
            out.append(dict(s, causal=True, fwd_us=round(f, 3), bwd_us=round(b, 3)))
            print(f"{be} d={s['head_dim']} seq={s['seq']} b={s['batch']} heads={s['heads']}/{s['kv_heads']}: "
                  f"fwd {f:.1f} bwd {b:.1f} us")
        torch.cuda.empty_cache()
        res["attention_backends"][be + suffix] = out
        res["left_out"][be + suffix] = {"refused": refused, "not_timed": skipped}
        print(f"{be}{suffix}: {len(out)} shapes timed, {refused} refused, {skipped} not timed ({time.time() - t0:.0f} s)")
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("backend shapes  median fwd/bwd us  sum fwd+bwd ms")
    for be, out in res["attention_backends"].items():
        if out:
            mf = sorted(p["fwd_us"] for p in out)[len(out) // 2]
            mb = sorted(p["bwd_us"] for p in out)[len(out) // 2]
            ex = {tuple(p[k] for k in keys): p for p in pts if "fwd_us" in p}
            both = [p for p in out if tuple(p[k] for k in keys) in ex]
            r = (sum(p["fwd_us"] + p["bwd_us"] for p in both) /
                 max(1e-9, sum(ex[tuple(p[k] for k in keys)]["fwd_us"] + ex[tuple(p[k] for k in keys)]["bwd_us"] for p in both)))
            print(f"{be:8s} {len(out):6d}  {mf:8.1f} {mb:8.1f}  {sum(p['fwd_us'] + p['bwd_us'] for p in out) / 1e3:10.1f}"
                  f"  x{r:.3f} of the shapes file's own times over {len(both)} shapes")


if __name__ == "__main__":
    main()

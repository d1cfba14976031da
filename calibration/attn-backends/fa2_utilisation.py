#!/usr/bin/env python3
"""fa2_utilisation.py — the share of the GPU's BF16 tensor-core peak that FlashAttention-2 reaches
on this GPU, measured the way its papers report it, for the catalogue's `flash2_bf16_util` figure
(topologies/README.md; sim/README.md, "Calibration transfer").

FlashAttention-2 is PyTorch's scaled_dot_product_attention pinned to SDPBackend.FLASH_ATTENTION (the
flash-attn kernels; calibration/attn_cudnn.py times the same backend for the calibration). The shapes
are those of FlashAttention-2's and -3's benchmark figures: bf16, 16,384 tokens a batch (batch = 16,384 /
seq), hidden 2,048 (heads = 2,048 / head_dim), head_dim 64 and 128, seq 512 to 16,384, causal and not.
FLOPs as those papers count them: forward 4 seq^2 head_dim heads batch, halved when causal; backward
2.5x the forward. Checked first against an fp32 math-backend reference at a small shape (output and
gradients within 2e-2 of the reference's largest value). Each timing: 3 untimed runs, then the median
of --reps CUDA-event timings; forward and forward + backward separately (backward = the difference).

usage: fa2_utilisation.py [--peak-tflops 989] [--reps 10] [--json OUT.json]
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def check(dev):
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 4, 256, 128, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    ref = [t.detach().float().requires_grad_() for t in (q, k, v)]
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    with sdpa_kernel(SDPBackend.MATH):
        r = F.scaled_dot_product_attention(*ref, is_causal=True)
    g = torch.randn_like(r)
    o.backward(g.bfloat16())
    r.backward(g)
    worst = 0.0
    for a, b in [(o, r)] + [(x.grad, y.grad) for x, y in zip((q, k, v), ref)]:
        worst = max(worst, ((a.float() - b).abs().max() / b.abs().max()).item())
    return worst


def time_ms(fn, reps):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    dev = "cuda"
    err = check(dev)
    print(f"check flash vs fp32 math: worst {err:.2e} (tol 2e-2) {'ok' if err <= 2e-2 else 'FAILED'}")
    if err > 2e-2:
        return 1
    print(f"gpu {torch.cuda.get_device_name()}, torch {torch.__version__}, peak {a.peak_tflops} TFLOP/s")
    print(f"{'head_dim':>8} {'seq':>6} {'causal':>6} {'fwd_ms':>8} {'fwd_TF/s':>9} {'fwd_%':>6} {'bwd_ms':>8} "
          f"{'bwd_TF/s':>9} {'bwd_%':>6} {'f+b_%':>6}")
    rows = []
    for d in (64, 128):
        heads = 2048 // d
        for seq in (512, 1024, 2048, 4096, 8192, 16384):
            batch = 16384 // seq
            for causal in (False, True):
                q, k, v = (torch.randn(batch, heads, seq, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                           for _ in range(3))
                dout = torch.randn(batch, heads, seq, d, device=dev, dtype=torch.bfloat16)

                def fwd():
                    with torch.no_grad(), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                def fwd_bwd():
                    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    torch.autograd.grad(o, (q, k, v), dout)

                tf, tfb = time_ms(fwd, a.reps), time_ms(fwd_bwd, a.reps)
                tb = tfb - tf
                flops = 4.0 * seq * seq * d * heads * batch * (0.5 if causal else 1.0)
                r = dict(head_dim=d, seq=seq, batch=batch, heads=heads, causal=causal, fwd_ms=tf, bwd_ms=tb,
                         fwd_tflops=flops / tf / 1e9, bwd_tflops=2.5 * flops / tb / 1e9,
                         both_tflops=3.5 * flops / tfb / 1e9)
                rows.append(r)
                print(f"{d:>8} {seq:>6} {str(causal):>6} {tf:8.3f} {r['fwd_tflops']:9.1f} "
                      f"{100 * r['fwd_tflops'] / a.peak_tflops:5.1f}% {tb:8.3f} {r['bwd_tflops']:9.1f} "
                      f"{100 * r['bwd_tflops'] / a.peak_tflops:5.1f}% {100 * r['both_tflops'] / a.peak_tflops:5.1f}%")
                del q, k, v, dout
    best = max(rows, key=lambda r: r["both_tflops"])
    bestf = max(rows, key=lambda r: r["fwd_tflops"])
    print(f"best forward {bestf['fwd_tflops']:.1f} TFLOP/s ({100 * bestf['fwd_tflops'] / a.peak_tflops:.1f} %), "
          f"best forward + backward {best['both_tflops']:.1f} ({100 * best['both_tflops'] / a.peak_tflops:.1f} %)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "peak_tflops": a.peak_tflops,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

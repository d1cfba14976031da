#!/usr/bin/env python3
"""A decode step against its read floor (issue 24: "time per output token >= 80 % of the weight +
KV-cache read floor ... achieved GB/s and % of floor per point").

The floor of one decode step on one GPU, as runtime/RESULTS-decode.md counts it: the weights it
streams (every layer's linear weights, biases and norms, the final norm and the output head; the
embedding reads only the batch's rows, not counted; BF16, but the linear layers' weights at 1 byte under
"quantization": "fp8" and 0.5625 under "nvfp4", their per-tensor scales not counted), plus the KV cache at the mean decode length
(prompt + generate / 2 positions a sequence), BF16 2 bytes an element, an FP8 cache 1 + 4 / head_dim
(E4M3 codes and an FP32 scale a position and KV head, as the executor stores them); layers, the head
and the cache split over TP. Read at --peak-gbps (4,800: the H200's datasheet HBM rate).

Usage: experiments/infer/floor.py [--peak-gbps G] [--log FILE]... PLAN.json...
  --log FILE: a `tacorun execute PLAN... [--decode-graph]` log; each plan's TPOT is taken from it
  (the CUDA-graph steps' where the log has them, else the eager steps'). Prints a markdown table:
  the floor in GB and ms, and with a TPOT the achieved GB/s, % of the floor and the TPOT 80 % needs.
Dense models only (an MoE step reads only its routed experts' weights); exit 2 on bad input."""
import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# bytes a parameter of the linear layers' weights (qkv, attention out, fc1, fc2) by the plan's "quantization"
# (plan/plan.h, PLAN_NVFP4_BYTES_PER_PARAM: E2M1 values and an E4M3 scale every 16); the rest stays BF16
LINEAR_BYTES = {"none": 2.0, "fp8": 1.0, "nvfp4": 0.5 + 1.0 / 16.0}


def fail(msg):
    print(f"floor.py: {msg}", file=sys.stderr)
    sys.exit(2)


def load_model(name, plan_path):
    path = name if name.endswith(".json") else os.path.join(ROOT, "models", name + ".json")
    if not os.path.exists(path):
        fail(f"{plan_path}: model: no model file {path}")
    return json.load(open(path))


def step_floor_bytes(plan, plan_path):
    """The bytes one decode step reads on one GPU: (weights, KV cache)."""
    m = load_model(plan["model"], plan_path)
    if m.get("experts", 0) or m.get("attention") == "mla":
        fail(f"{plan_path}: model: {m['name']} is an MoE or MLA model; this floor is for dense models")
    tp = plan.get("layout", {}).get("tp", 1)
    b = plan["batch"]
    batch, prompt, gen = b["size"], b["prompt"], b["generate"]
    h, heads, kv = m["hidden"], m["heads"], m["kv_heads"]
    hd = m.get("head_dim") or h // heads
    ffn, layers = m["ffn_hidden"], plan.get("layers_override") or m["layers"]
    ffn_mats = 3 if m["activation"] == "swiglu" else 2
    qkv_out = (heads + 2 * kv) * hd
    linear = h * qkv_out + heads * hd * h + ffn_mats * h * ffn  # qkv, attention out, fc1, fc2
    bias = 0
    if m.get("qkv_bias") or m.get("linear_bias"):
        bias += qkv_out
    if m.get("linear_bias"):
        bias += h + (ffn_mats - 1) * ffn + h
    norm_params = h if m["norm"] == "rmsnorm" else 2 * h
    quant = plan.get("quantization", "none")
    if quant not in LINEAR_BYTES:
        fail(f"{plan_path}: quantization: '{quant}' (want {', '.join(LINEAR_BYTES)})")
    weights = LINEAR_BYTES[quant] * layers * linear / tp + \
        2.0 * (layers * (bias / tp + 2 * norm_params) + norm_params + m["vocab"] * h / tp)
    elem = 2.0 if plan.get("kv_cache", "bf16") == "bf16" else 1.0 + 4.0 / hd
    kv_bytes = 2.0 * layers * (kv / tp) * hd * elem * batch * (prompt + gen / 2)
    return weights, kv_bytes


def tpots_from_logs(paths):
    """plan name -> TPOT in s: a log's `# NAME: ...` header, its `tpot_s X` line, and a later
    `decode graph: tpot_s X` line (the CUDA-graph steps), which wins."""
    out = {}
    for path in paths:
        name = None
        for line in open(path):
            h = re.match(r"# ([\w.\-]+): ", line)
            if h:
                name = h.group(1)
                continue
            g = re.match(r"decode graph: tpot_s ([\d.eE+-]+)", line)
            t = re.search(r"(?:^|\s)tpot_s ([\d.eE+-]+)", line)
            if name and g:
                out[name] = float(g.group(1))
            elif name and t and not line.startswith("decode graph"):
                out.setdefault(name, float(t.group(1)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peak-gbps", type=float, default=4800.0)
    ap.add_argument("--log", action="append", default=[])
    ap.add_argument("plans", nargs="+")
    a = ap.parse_args()
    if a.peak_gbps <= 0:
        fail("--peak-gbps: must be > 0")
    tpots = tpots_from_logs(a.log)
    print("| plan | weights GB | KV cache GB | read floor GB | floor ms | TPOT ms | GB/s | % of floor | TPOT for 80 % |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for path in a.plans:
        try:
            plan = json.load(open(path))
        except (OSError, ValueError) as ex:
            fail(f"{path}: {ex}")
        if plan.get("kind") != "inference":
            fail(f"{path}: kind: not an inference plan")
        w, kvb = step_floor_bytes(plan, path)
        floor = w + kvb
        floor_ms = floor / (a.peak_gbps * 1e9) * 1e3
        name = plan["name"]
        t = tpots.get(name)
        if t is None:
            meas = "| - | - | - |"
        else:
            meas = f"| {t * 1e3:.3f} | {floor / t / 1e9:.0f} | {100 * floor_ms / (t * 1e3):.1f} |"
        print(f"| {name} | {w / 1e9:.2f} | {kvb / 1e9:.2f} | {floor / 1e9:.2f} | {floor_ms:.3f} {meas} "
              f"{floor_ms / 0.8:.3f} |")


if __name__ == "__main__":
    main()

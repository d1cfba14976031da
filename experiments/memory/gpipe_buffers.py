#!/usr/bin/env python3
"""gpipe_buffers.py — buffer by buffer, what the memory model counts (plan/plan_memory.c,
models/model_totals.c) and what `tacorun execute` allocates (runtime/exec/exec_model.c
exec_model_create: model_alloc_params, _layers, _head, _backward; runtime/ops/exec_gemm.c's
workspace) for the one-GPU zoo plans of experiments/validation/zoo/plans/, from the plans'
shapes. The executor's total is set against the memory it measured in zoo run 10
(experiments/validation/zoo/run10/<tag>.json.gz, memory_per_gpu_bytes): the rest is the CUDA
context, kernel images and cuBLASLt state (the model's 1.09 GiB, plan/plan_memory.c). The
model's total is checked against `tacosim plan` when a tacosim binary is given.

Dense models, PP = 1, TP = 1, fused attention and the fused loss (the zoo plans' settings);
the executor's 128-element alignment of each tensor is ignored (< 0.01 %).

Usage: experiments/memory/gpipe_buffers.py [build/sim/tacosim] [TAG ...]"""

import gzip
import json
import os
import re
import subprocess
import sys

GIB = 2 ** 30
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def load(tag):
    p = json.load(open(os.path.join(ROOT, "experiments/validation/zoo/plans/%s.json" % tag)))
    m = json.load(open(os.path.join(ROOT, "models/%s.json" % p["model"])))
    return p, m


def shapes(p, m):
    b, lay = p["batch"], p["layout"]
    assert lay["tp"] == 1 and lay["pp"] == 1 and lay["dp"] == 1, "one-GPU plans only"
    assert p.get("hidden_dropout", 0.1) == 0, "plans without hidden dropout only (the model's terms below)"
    s = dict(
        L=p.get("layers_override") or m["layers"], h=m["hidden"], a=m["heads"], kvh=m.get("kv_heads", m["heads"]),
        f=m["ffn_hidden"], swiglu=m["activation"] == "swiglu", ln=m["norm"] == "layernorm",
        rope=m.get("position") == "rope", qkv_bias=m.get("qkv_bias", False), lin_bias=m.get("linear_bias", False),
        untied=not m.get("tied_embeddings", False), micro=b["micro"], seq=b["seq"],
        micros=b["global"] // b["micro"], gpipe=p.get("schedule", "1f1b") == "gpipe",
        rec={"none": 0, "selective": 1, "full": 2}[lay.get("recompute", "none")])
    s["V"] = -(-m["vocab"] // 128) * 128  # padded to 128 x tp (models/, exec_model.c model_dims)
    s["T"] = s["micro"] * s["seq"]
    s["d"] = s["h"] // s["a"]
    s["kv"] = s["kvh"] * s["d"]
    s["qkv"] = s["h"] + 2 * s["kv"]
    s["ul"] = s["f"] * (2 if s["swiglu"] else 1)
    return s


def params(s):
    """exec_ref_tensors: the executor's list (the model counts the same parameters)."""
    h, L = s["h"], s["L"]
    layer = (2 if s["ln"] else 1) * 2 * h + h * s["qkv"] + (s["qkv"] if s["qkv_bias"] else 0) + h * h \
        + h * s["ul"] + s["f"] * h + ((h + s["ul"] + h) if s["lin_bias"] else 0)
    P = s["V"] * h + (0 if s["rope"] else s["seq"] * h) + L * layer + (2 if s["ln"] else 1) * h
    return P + (s["V"] * h if s["untied"] else 0)


def model_terms(s):
    """plan_memory_of_stage at PP 1 (no SP, no dropout, fused attention and loss), bytes by term."""
    T, h, L, M = s["T"], s["h"], s["L"], s["micros"]
    held = M if s["gpipe"] else 1  # plan_held_peak at PP 1: GPipe every micro-batch, 1F1B one
    fused_layer = T * (8 * h + (2 * h + 2 * s["kv"]) + 2 * s["kv"] + 2 * h + 2 * s["f"] * (2 if s["swiglu"] else 1)
                       + 2 * s["f"])  # model_activation_bytes_per_layer, selective (no scores)
    lse = 4 * T * s["a"]
    per_layer = {0: fused_layer + lse, 1: fused_layer, 2: 2 * T * h}[s["rec"]]
    P = params(s)
    t = {
        "weights + gradients + optimizer (2 + 4 + 12 B/param)": 18 * P,
        "layers' held activations (x micro-batches held)": per_layer * L * held,  # (plan_head_held_bytes below)
        "loss: model fp32 softmax, executor bf16 logits/dlogits": 4 * T * s["V"] * held,
        "head: final norm in/out, lm_head input": (4 * h + (8 if s["ln"] else 4)) * T * held,
        "full recompute: the layer being recomputed": (fused_layer + lse) if s["rec"] == 2 else 0,
        "s x s: P, dP, scores, dS": 0,
        # plan_bwd_transient_bytes (TP 1, no SP, no dropout): the largest of fc2's backward (dy h + the
        # activation's gradient f), the activation's (dy h + g f, fc2's saved input released) and fc1's
        # (dy h + its input gradient h, the f and g f saved inputs released)
        "backward gradient buffers (dx, dqkv, dattn, du, da)": 2 * max(T * (h + s["f"]), T * (h + s["ul"]),
                                                                       T * (2 * h) - T * s["f"]),
        "fused attention backward: fp32 dQ accum + row sums": 4 * T * (s["a"] * s["d"] + s["a"]),
        "tokens, labels, loss stats": 0,
        "GEMM workspace + runtime (context, cuBLASLt)": int(1.09 * GIB) + (32 << 20),
    }
    return t


def executor_terms(s):
    """exec_model_create's allocations, grouped as model_terms."""
    T, h, L, M = s["T"], s["h"], s["L"], s["micros"]
    slots = M if s["gpipe"] else 1  # nslots: all_micros = pp == 1 && gpipe (exec_timed.c)
    scores = s["micro"] * s["a"] * s["seq"] ** 2 * 2
    layer_set = T * (h + s["qkv"] + h + h + h + s["ul"] + s["f"]) * 2 + 4 * T * 4  # n1 qkv attn x_mid n2 u a, mean/rstd
    held_sets = {0: L * slots, 1: L * slots, 2: 0}[s["rec"]]
    per_slot_P = s["rec"] == 0
    t = {
        "weights + gradients + optimizer (2 + 4 + 12 B/param)": 18 * params(s),
        "layers' held activations (x micro-batches held)": L * slots * T * h * 2 + held_sets * layer_set,
        "loss: model fp32 softmax, executor bf16 logits/dlogits": slots * T * s["V"] * 2,  # bf16 logits, then dlogits
        "head: final norm in/out, lm_head input": slots * (2 * T * h * 2 + 2 * T * 4) + T * h * 2,  # + proj once
        "full recompute: the layer being recomputed": layer_set if s["rec"] == 2 else 0,
        "s x s: P, dP, scores, dS": (L * slots if per_slot_P else 1) * scores + 3 * scores,
        "backward gradient buffers (dx, dqkv, dattn, du, da)": T * (3 * h + s["qkv"] + h + s["ul"] + s["f"]) * 2,
        "fused attention backward: fp32 dQ accum + row sums": 0,
        "tokens, labels, loss stats": 2 * M * T * 4 + 4 * T * 4,
        "GEMM workspace + runtime (context, cuBLASLt)": 32 << 20,
    }
    return t


def measured(tag):
    with gzip.open(os.path.join(ROOT, "experiments/validation/zoo/run10/%s.json.gz" % tag)) as f:
        return json.load(f)["memory_per_gpu_bytes"]


def tacosim_total(binary, tag):
    out = subprocess.run([binary, "plan", os.path.join(ROOT, "experiments/validation/zoo/plans/%s.json" % tag)],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if re.match(r"^  stage 0 ", line):
            return float(line.split()[7]) * GIB
    raise SystemExit("%s: no stage 0 memory line in tacosim plan's output" % tag)


def main():
    args = sys.argv[1:]
    binary = args.pop(0) if args and os.path.exists(args[0]) and not args[0].endswith(".json") else None
    tags = args or sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "experiments/validation/zoo/plans"))
                          if f.endswith("-gpipe.json"))
    for tag in tags:
        s = shapes(*load(tag))
        mt, et = model_terms(s), executor_terms(s)
        print("%s: micro %d x seq %d (T %d tokens), %d micro-batches, vocab %d, %d layers, recompute %s, %s"
              % (tag, s["micro"], s["seq"], s["T"], s["micros"], s["V"], s["L"], ["none", "selective", "full"][s["rec"]],
                 "gpipe" if s["gpipe"] else "1f1b"))
        print("  %-56s %12s %12s %12s" % ("buffer", "model GiB", "executor GiB", "model - exec"))
        for k in mt:
            print("  %-56s %12.3f %12.3f %+12.3f" % (k, mt[k] / GIB, et[k] / GIB, (mt[k] - et[k]) / GIB))
        ms, es, meas = sum(mt.values()), sum(et.values()), measured(tag)
        print("  %-56s %12.3f %12.3f %+12.3f" % ("total", ms / GIB, es / GIB, (ms - es) / GIB))
        line = "  measured %.3f GiB: executor's own buffers %.3f, rest %.3f (the model's runtime term: 1.09)" % (
            meas / GIB, (es - (32 << 20)) / GIB, (meas - es + (32 << 20)) / GIB)
        if binary:
            line += "; tacosim plan %.3f GiB (this script's model total %.3f)" % (tacosim_total(binary, tag) / GIB, ms / GIB)
        print(line)


if __name__ == "__main__":
    main()

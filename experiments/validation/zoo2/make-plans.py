#!/usr/bin/env python3
"""make-plans.py — the 2-GPU zoo validation plans (plans/*.json): zoo models as published (RoPE,
QKV/linear biases, untied heads as their model files say), layers cut to fit two H200s, at TP 2,
PP 2 and DP 2, with the codecs on the TP all-reduces. Each plan says what the executor runs
(its own attention, unfused biases, no dropout), so prediction and run are the same program.
Run from anywhere; rewrites plans/."""
import json, os

HERE = os.path.dirname(os.path.abspath(__file__))
CODECS = {
    "none": {"kind": "none"},
    "taco": {"kind": "taco", "group": 128, "fp8": "e4m3"},
    "caat": {"kind": "caat", "p": 0.5},
}

# name, model, layers, (dp, tp, pp), micro, global, seq, recompute, schedule, sp, zero1, codec
ROWS = [
    ("llama3-8b-l4-tp2-m1-s4096", "llama3-8b", 4, (1, 2, 1), 1, 8, 4096, "none", "1f1b", False, False, "none"),
    ("llama3-8b-l4-tp2-m1-s4096-taco", "llama3-8b", 4, (1, 2, 1), 1, 8, 4096, "none", "1f1b", False, False, "taco"),
    ("llama3-8b-l4-tp2-m1-s4096-caat", "llama3-8b", 4, (1, 2, 1), 1, 8, 4096, "none", "1f1b", False, False, "caat"),
    ("llama3-8b-l4-tp2-sp-m2-s4096-sel", "llama3-8b", 4, (1, 2, 1), 2, 8, 4096, "selective", "1f1b", True, False, "none"),
    ("llama3-8b-l8-pp2-m1-s4096", "llama3-8b", 8, (1, 1, 2), 1, 8, 4096, "none", "1f1b", False, False, "none"),
    ("llama3-8b-l4-dp2-m1-s4096", "llama3-8b", 4, (2, 1, 1), 1, 8, 4096, "none", "1f1b", False, False, "none"),
    ("llama3-8b-l4-dp2-m1-s4096-zero1", "llama3-8b", 4, (2, 1, 1), 1, 8, 4096, "none", "1f1b", False, True, "none"),
    ("qwen2.5-7b-l4-tp2-m2-s4096", "qwen2.5-7b", 4, (1, 2, 1), 2, 8, 4096, "none", "1f1b", False, False, "none"),
    ("qwen2.5-7b-l8-pp2-m2-s2048-full", "qwen2.5-7b", 8, (1, 1, 2), 2, 16, 2048, "full", "1f1b", False, False, "none"),
    ("gpt3-6.7b-l4-tp2-m2-s2048", "gpt3-6.7b", 4, (1, 2, 1), 2, 16, 2048, "none", "1f1b", False, False, "none"),
    ("gpt3-6.7b-l4-tp2-m2-s2048-taco", "gpt3-6.7b", 4, (1, 2, 1), 2, 16, 2048, "none", "1f1b", False, False, "taco"),
    ("gpt3-6.7b-l4-dp2-m2-s2048", "gpt3-6.7b", 4, (2, 1, 1), 2, 16, 2048, "none", "1f1b", False, False, "none"),
    ("gpt3-13b-l4-tp2-m1-s2048-full", "gpt3-13b", 4, (1, 2, 1), 1, 8, 2048, "full", "1f1b", False, False, "none"),
    ("llama3-70b-l2-tp2-m1-s4096-sel", "llama3-70b", 2, (1, 2, 1), 1, 4, 4096, "selective", "1f1b", False, False, "none"),
]


def plan(row):
    name, model, layers, (dp, tp, pp), micro, glob, seq, rec, sched, sp, z1, codec = row
    c = CODECS[codec]
    return {
        "schema": 1,
        "name": name,
        "description": f"{model} cut to {layers} layers (published layers: RoPE/biases/untied as its model file "
                       f"says) on 2 x H200 NVLink, dp {dp} tp {tp} pp {pp}, micro {micro} x seq {seq}, global "
                       f"{glob}, recompute {rec}, {sched}, TP codec {codec}",
        "model": model,
        "cluster": "h200x2-nvlink",
        "layout": {"dp": dp, "tp": tp, "pp": pp, "vpp": 1, "sequence_parallel": sp, "order": "tp-dp-pp",
                   "zero1": z1, "recompute": rec},
        "batch": {"micro": micro, "global": glob, "seq": seq},
        "attention_backend": "executor",
        "bias_fusion": False,
        "hidden_dropout": 0,
        "schedule": sched,
        "layers_override": layers,
        "codec": {"tp_fwd": c, "tp_bwd": c, "pp": {"kind": "none"}, "dp": {"kind": "none"}},
    }


os.makedirs(os.path.join(HERE, "plans"), exist_ok=True)
for r in ROWS:
    with open(os.path.join(HERE, "plans", r[0] + ".json"), "w") as f:
        json.dump(plan(r), f, indent=2)
        f.write("\n")
print(len(ROWS), "plans in", os.path.join(HERE, "plans"))

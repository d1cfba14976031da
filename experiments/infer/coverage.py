#!/usr/bin/env python3
"""Which parts of a zoo model's inference prediction the default calibration prices from measured
tables, and which from rules (issue 24: "tacosim simulate on any inference plan uses measured tables
with no flag").

For each zoo model, one inference plan per (batch, prompt, KV cache) point on h200x8-nvswitch at the
smallest TP of 1, 2, 4, 8 whose memory fits, 64 tokens generated, simulated by `tacosim simulate` with
no --calibration (the shipped default file). Every warning line is put in a class; a line no class
knows stops the script (exit 1), so a new fallback cannot pass unreported. Decode attention at a head
dim other than 128 reads the plain "attention_decode" table (Llama-3 8B's layout at TP 2, head dim 128;
sim/sim_infer.c, decode_attention_s): a warning since 2026-12-06 (it was silent before), and the column
"decode attention from the plain table" names it from the model file as well.

Usage: experiments/infer/coverage.py TACOSIM [--models a,b,...] [--points 1x128,16x1024,64x8192]
Prints a markdown table, one row a model. Exit 0, or 1 on an unclassified warning or a simulator
failure (exit status other than 0 and the memory refusal)."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (class, pattern): the first match names a warning line
CLASSES = [
    ("prefill GEMM m beyond the table", r"gemm along m \(n=\d+ k=\d+\): (\d+) outside the measured range"),
    ("GEMM n or k off the table", r"gemm along [nk] \("),
    ("GEMM shape by nearest shapes", r"gemm \(nearest shapes\)"),
    ("prefill attention unkeyed (head dim)", r'no "attention_prefill\.d\d+\.s\d+" table'),
    ("prefill attention past its key", r"kernel attention_prefill\.d\d+\.s\d+: .* outside the measured range"),
    ("decode attention at another head dim (plain table)", r"decode attention at head dim \d+ is priced from the plain"),
    ("decode attention group not measured", r"kernel attention_decode(_fp8)?\.g\d+: group \d+ not measured"),
    ("decode attention bytes off the table", r"kernel attention_decode(_fp8)?(\.g\d+)?: .* outside the measured range"),
    ("collective by the NCCL model (no N-rank table)", r'no "(allreduce|allgather|reducescatter|alltoall)\.\d+" table'),
    ("collective size off the table", r"(allreduce|allgather|reducescatter|alltoall)(\.\w+)*: .* outside the measured range"),
    ("small kernel size off the table", r"kernel \w+(\.\w+)?: .* outside the measured range"),
]


def classify(line):
    for name, pat in CLASSES:
        if re.search(pat, line):
            return name
    return None


def head_dim(model):
    m = json.load(open(os.path.join(ROOT, "models", model + ".json")))
    if m.get("attention") == "mla":
        return None
    return m.get("head_dim") or m["hidden"] // m["heads"]


def simulate(tacosim, tmp, model, batch, prompt, kv):
    max_seq = json.load(open(os.path.join(ROOT, "models", model + ".json")))["max_seq"]
    prompt = min(prompt, max_seq - 64)
    for tp in (1, 2, 4, 8):
        name = f"{model}-tp{tp}-b{batch}-p{prompt}-{kv}"
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            json.dump({"schema": 1, "kind": "inference", "name": name, "model": model, "cluster": "h200x8-nvswitch",
                       "layout": {"tp": tp, "pp": 1}, "batch": {"size": batch, "prompt": prompt, "generate": 64},
                       "kv_cache": kv, "codec": {"kind": "none"}}, f)
        r = subprocess.run([tacosim, "simulate", path], capture_output=True, text=True)
        if r.returncode == 2 and re.search(r"needs [\d.]+ GiB per GPU|layout\.tp: \d+ does not divide", r.stderr):
            continue  # does not fit, or TP does not split the heads: the next TP
        return name, r.returncode, r.stderr
    return f"{model}-b{batch}-p{prompt}-{kv}", None, "no TP of 1-8 fits"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tacosim")
    ap.add_argument("--models", default=",".join(sorted(f[:-5] for f in os.listdir(os.path.join(ROOT, "models"))
                                                       if f.endswith(".json"))))
    ap.add_argument("--points", default="1x128,16x1024,64x8192")
    a = ap.parse_args()
    points = [tuple(int(x) for x in p.split("x")) for p in a.points.split(",")]
    rows, bad = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for model in a.models.split(","):
            counts, plans, clean, unfit = {}, 0, 0, 0
            for b, s in points:
                for kv in ("bf16", "fp8"):
                    name, rc, err = simulate(a.tacosim, tmp, model, b, s, kv)
                    if rc is None:
                        unfit += 1
                        continue
                    if rc != 0:
                        print(f"{name}: tacosim exit {rc}: {err.strip()}", file=sys.stderr)
                        bad = 1
                        continue
                    plans += 1
                    lines = [l for l in err.splitlines() if "warning" in l]
                    clean += not lines
                    for l in lines:
                        c = classify(l)
                        if c is None:
                            print(f"{name}: unclassified warning: {l}", file=sys.stderr)
                            bad = 1
                            c = "unclassified"
                        counts[c] = counts.get(c, 0) + 1
            d = head_dim(model)
            silent = "yes (head dim %d)" % d if d is not None and d != 128 else "no"
            rows.append((model, plans, unfit, clean, silent, counts))
    print("| model | plans simulated | no TP of 1-8 fits | without a warning | decode attention from the plain table | "
          "warnings by class (lines) |")
    print("| --- | ---: | ---: | ---: | --- | --- |")
    for model, plans, unfit, clean, silent, counts in rows:
        cl = "; ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"
        print(f"| {model} | {plans} | {unfit} | {clean} | {silent} | {cl} |")
    return bad


if __name__ == "__main__":
    sys.exit(main())

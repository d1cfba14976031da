#!/usr/bin/env python3
"""op_classes.py - where tacosim puts the time of each Megatron-Core H100 row, by op class.

    experiments/published/mcore-h100/op_classes.py [--tacosim PATH] [--table FILE]

For every plan of this set it runs `tacosim ops PLAN` (each op's simulated cost
on rank 0, the first pipeline stage) and sums the compute ops into classes:
GEMMs (qkv, attn_out, fc1, fc2 and the logits GEMM, whose forward and dgrad
tacosim merges with the cross-entropy kernels: all three taken at the time of
its weight gradient, an op of its own), attention, the cross-entropy, memory-bound
kernels (norms, activation, residuals, embedding) and the optimizer step;
collectives are left out (their exposed part is in the predicted iteration).
It prints one markdown row per plan with:

- the published and predicted iteration (from --table, the set's table.txt
  written by ../run.sh) and the error of predicted TFLOP/s per GPU;
- each class in ms, the GEMMs with the TFLOP/s they are priced at (their
  FLOPs counted here: 24 T h^2 / tp per layer and micro-batch forward, three
  passes, T the tokens of a micro-batch);
- compute as a share of the published iteration;
- the GEMM TFLOP/s at which the GEMMs alone would close the gap (every
  other part of the predicted iteration held);
- two costs of Megatron-Core r0.8.0 that tacosim does not price, at the H100's
  HBM rate (topologies/gpus/H100-SXM.json): the per-iteration memset of the
  fp32 gradient buffer (DistributedDataParallel.zero_grad_buffer, 4 bytes per
  parameter of the rank, embeddings included) and, as an upper bound, the fp32
  main_grad read and write of every weight-gradient GEMM under
  gradient_accumulation_fusion (+6 bytes per weight and micro-batch against
  the bf16 output the GEMM tables price), both as if nothing hid them.

Reads: plans/, models/, published.csv, --table; nothing is written. Exit 2 on
bad input (a missing file or row), 1 when tacosim fails.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
H100_HBM_BYTES_PER_S = 3350e9  # topologies/gpus/H100-SXM.json hbm_gbps
COLLECTIVE = re.compile(r"(allgather|reducescatter|allreduce|alltoall|send|recv|\.dp$)")


def die(msg, code=2):
    print(f"op_classes.py: {msg}", file=sys.stderr)
    sys.exit(code)


def op_class(name):
    if COLLECTIVE.search(name):
        return None
    if re.search(r"\.attn$", name):
        return "attention"
    if "loss" in name:
        return "loss"
    if re.search(r"(qkv|attn_out|fc1|fc2)", name):
        return "gemm"
    if "optim" in name:
        return "optimizer"
    return "memory"


def published_rows():
    rows = {}
    with open(os.path.join(HERE, "published.csv")) as f:
        lines = [l for l in f if l.strip() and not l.startswith("#")]
    for r in csv.DictReader(lines):
        rows[r["name"].lower()] = r
    return rows


def table_rows(path):
    """name -> (published s, predicted s, error %) from run.sh's table."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 10 and w[0] == "mcore-h100":
                out[w[2].lower()] = (float(w[8]), float(w[9]), float(w[7]))
    return out


def ops_by_class(tacosim, plan):
    """(ms per class, whether this rank holds the loss) from `tacosim ops`."""
    run = subprocess.run([tacosim, "ops", plan], cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        die(f"{tacosim} ops {plan} failed ({run.returncode}): {run.stderr.strip()}", 1)
    agg, logits_gemm_ms = {}, None
    for line in run.stdout.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _count, total_ms = line.split()[:3]
        c = op_class(name)
        if c:
            agg[c] = agg.get(c, 0.0) + float(total_ms)
        if name == "bwd.loss.wgrad":  # the logits GEMM's weight gradient, an op of its own
            logits_gemm_ms = 3 * float(total_ms)
    if logits_gemm_ms is not None:
        # the logits GEMM (forward, dgrad, wgrad: equal FLOPs) moves from the loss to the GEMMs; its
        # forward and dgrad share an op with the cross-entropy kernels, so all three are taken at the
        # wgrad's time
        agg["gemm"] = agg.get("gemm", 0.0) + logits_gemm_ms
        agg["loss"] = agg.get("loss", 0.0) - logits_gemm_ms
    return agg, logits_gemm_ms is not None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tacosim", default=os.path.join(ROOT, "build", "sim", "tacosim"),
                    help="the simulator [build/sim/tacosim]")
    ap.add_argument("--table", default=os.path.join(HERE, "table.txt"),
                    help="run.sh's table of this set [mcore-h100/table.txt]")
    a = ap.parse_args()
    for path, what in ((a.tacosim, "--tacosim"), (a.table, "--table")):
        if not os.path.exists(path):
            die(f"{what} {path}: no such file")
    pub, tab = published_rows(), table_rows(a.table)
    print("| row (micro-batches x size) | published / predicted iteration (s), error | GEMM ms (priced TF/s) "
          "| attention ms | cross-entropy ms | memory-bound + optimizer ms | compute ms, % of published "
          "| GEMM TF/s closing the gap alone | zero_grad_buffer memset ms | fp32 main_grad, upper bound ms "
          "| these two, % of published |")
    print("|" + " --- |" * 11)
    for name, r in pub.items():
        plan_path = os.path.join(HERE, "plans", f"mcore-{name}.json")
        with open(plan_path) as f:
            plan = json.load(f)
        with open(os.path.join(ROOT, plan["model"])) as f:
            model = json.load(f)
        if name not in tab:
            die(f"{a.table}: no row {name} (run ../run.sh first)")
        pub_s, pred_s, err = tab[name]
        h, layers, vocab = model["hidden"], model["layers"], model["vocab"]
        tp, pp, dp = int(r["tp"]), int(r["pp"]), int(r["dp"])
        micro, seq = plan["batch"]["micro"], plan["batch"]["seq"]
        n_micro = int(r["batch"]) // dp // micro
        agg, holds_loss = ops_by_class(a.tacosim, os.path.relpath(plan_path, ROOT))
        gemm_flops = 3 * 24.0 * micro * seq * h * h / tp * (layers // pp) * n_micro
        if holds_loss:  # this rank (the first stage) is also the last: its logits GEMMs too
            gemm_flops += 3 * 2.0 * micro * seq * h * vocab / tp * n_micro
        compute = sum(agg.values())
        other_s = pred_s - agg["gemm"] / 1e3
        closing = gemm_flops / (pub_s - other_s) / 1e12
        weights = 12.0 * h * h / tp * (layers // pp)  # the layers' GEMM weights of this rank (first stage)
        if holds_loss and not model.get("tied_embeddings", False):
            weights += vocab * h / tp                  # the output layer's (a GEMM weight too)
        params = weights + vocab * h / tp              # + the input embedding
        memset_ms = 4 * params / H100_HBM_BYTES_PER_S * 1e3
        main_grad_ms = 6 * weights * n_micro / H100_HBM_BYTES_PER_S * 1e3
        print(f"| {name.upper()} ({n_micro} x {micro}) | {pub_s:.3f} / {pred_s:.3f}, {err:+.1f} % "
              f"| {agg['gemm']:.0f} ({gemm_flops / agg['gemm'] / 1e9:.0f}) | {agg.get('attention', 0):.0f} "
              f"| {agg.get('loss', 0):.0f} | {agg.get('memory', 0) + agg.get('optimizer', 0):.0f} "
              f"| {compute:.0f} ({100 * compute / pub_s / 1e3:.0f} %) | {closing:.0f} | {memset_ms:.1f} "
              f"| {main_grad_ms:.1f} | {100 * (memset_ms + main_grad_ms) / pub_s / 1e3:.1f} |")


if __name__ == "__main__":
    main()

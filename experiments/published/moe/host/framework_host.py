#!/usr/bin/env python3
"""The calibration's "framework_host" section (schema/calibration.h) from a `layer_host.py --host-blocks` run.

Per layer kind the whole Megatron-Core TransformerLayer at the floor shape (S 256: the GPU waits for the
host): forward = the median over the repeats of each repeat's median host time until forward() returns,
backward = the same until backward() returns ("layer_grouped_256" for MoE layers, experts as grouped GEMMs;
"layer_dense_256" for dense ones). Calls: the median host time per torch.distributed call of comm_calls().

Usage: python3 framework_host.py MEASURED_DIR [--write CAL.json ...]
  prints the section; --write puts it (replacing one already there) at the end of each calibration file,
  in the layout the calibration writer uses (one member per line, indented by one space per level).
"""
import json
import os
import statistics
import sys

CALLS = {"all_gather_into_tensor": "allgather", "reduce_scatter_tensor": "reducescatter",
         "all_reduce": "allreduce", "all_to_all_single": "alltoall"}


def parts(rows, kind):
    """The forward's host time by block (us), medians over the repeats of the module breakdown
    (layer_host.py forward_breakdown: host time inside each module's forward): attention = input norm +
    self-attention + pre-MLP norm; dense: mlp; MoE: router, dispatch, experts, and combine = the rest of
    the MoE block (its combine and what surrounds the four)."""
    def med(f):
        return statistics.median(f(c["fwd_breakdown"]) for c in rows) * 1e3
    out = {"attention": med(lambda b: b["input_layernorm"]["ms"] + b["self_attention"]["ms"] +
                            b["pre_mlp_layernorm"]["ms"])}
    if kind == "dense":
        out["mlp"] = med(lambda b: b["mlp"]["ms"])
    else:
        for k in ("router", "dispatch", "experts"):
            out[k] = med(lambda b, k=k: b[k]["ms"])
        out["combine"] = med(lambda b: b["moe"]["ms"] - b["router"]["ms"] - b["dispatch"]["ms"] - b["experts"]["ms"])
    return {k: round(v, 1) for k, v in out.items()}


def section(d):
    j = json.load(open(os.path.join(d, "layer_host.json")))
    if j.get("errors"):
        sys.exit(f"{d}: the run has errors: {[e['where'] for e in j['errors']]}")
    env = j["env"]
    layers = {}
    for kind, case in (("dense", "layer_dense_256_r"), ("moe", "layer_grouped_256_r")):
        rows = [c for c in j["cases"] if c["case"].startswith(case)]
        if not rows:
            sys.exit(f"{d}: no {case}* cases (run layer_host.py --host-blocks)")
        fwd = statistics.median(c["fwd_return_ms_median"] for c in rows) * 1e3
        bwd = statistics.median(c["bwd_return_ms_median"] for c in rows) * 1e3
        layers[kind] = {"fwd_us": round(fwd, 1), "bwd_us": round(bwd, 1), "parts": parts(rows, kind)}
    calls = {CALLS[r["call"]]: round(r["host_us_per_call"], 1) for r in j.get("comm_calls", []) if r["call"] in CALLS}
    cpu = [l.split(":", 1)[1].strip() for l in env.get("lscpu", "").splitlines() if l.startswith("Model name")]
    on = (f"{env.get('gpu', '?')} machine, host {cpu[0] if cpu else '?'} ({env.get('nproc', '?')} CPUs); "
          f"Megatron-LM {env.get('megatron_commit', '?')[:7]}, PyTorch {env.get('torch', '?')}, no Transformer Engine")
    return {"framework": "megatron-core", "measured_on": on[:159], "source": os.path.relpath(d, ROOT)[:159],
            "layers": layers, "calls": calls}


def dump(sec):
    """The section as the calibration writer lays it out (tsj_dump_data): an object of scalars on one line,
    any other one member per line, indented by one space per level."""
    def lay(k, v, ind, last):
        end = "" if last else ","
        key = f'"{k}": ' if k is not None else ""
        if not isinstance(v, dict) or not any(isinstance(x, dict) for x in v.values()):
            return [" " * ind + key + json.dumps(v, separators=(",", ":")) + end]
        out = [" " * ind + key + "{"]
        items = list(v.items())
        for i, (a, b) in enumerate(items):
            out += lay(a, b, ind + 1, i + 1 == len(items))
        return out + [" " * ind + "}" + end]
    return "\n".join(lay("framework_host", sec, 1, True))


def write(path, sec):
    text = open(path).read()
    j = json.loads(text)
    j.pop("framework_host", None)
    body = json.dumps(j)  # check only
    del body
    i = text.find(',\n "framework_host": {')
    if i >= 0:
        text = text[:i] + "\n}\n"
    t = text.rstrip()
    if not t.endswith("}"):
        sys.exit(f"{path}: does not end with an object")
    t = t[:-1].rstrip() + ",\n" + dump(sec) + "\n}\n"
    json.loads(t)
    open(path, "w").write(t)


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    sec = section(sys.argv[1])
    print(dump(sec))
    if len(sys.argv) > 2:
        if sys.argv[2] != "--write":
            sys.exit(__doc__)
        for p in sys.argv[3:]:
            write(p, sec)
            print("written:", p)

#!/usr/bin/env python3
"""Checks layer_host.py --schedule's arithmetic and schedule_summary.py without a GPU or torch (layer_host.py
imports torch and Megatron only inside its functions). Run: python3 test_schedule.py (exit 0: all pass)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def load():
    spec = importlib.util.spec_from_file_location("layer_host", os.path.join(HERE, "layer_host.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def synthetic(lh, fixed, rest, layer):
    """Schedule calls whose time is fixed + M x (rest + L x layer) exactly."""
    sch = {"kinds": ["moe"], "wraps": ["ddp"], "layers": [1, 2], "microbatches": [4, 8], "runs": [], "parts": [],
           "seq": 256, "reps": 3, "warmup": 1, "schedule_func": "forward_backward_no_pipelining",
           "vocab_per_rank": lh.SCHED_VOCAB_PER_RANK}
    for L in (1, 2):
        for M in (4, 8):
            t = fixed + M * (rest + L * layer)
            sch["runs"].append({"kind": "moe", "wrap": "ddp", "layers": L, "microbatches": M,
                                "host_ms_median": t, "host_ms_min": t - 0.5, "wall_ms_median": t + 0.25,
                                "cpu_ms_median": 2 * t,
                                "breakdown_per_call": {"embedding": {"ms": 0.3 * M, "calls": M}}})
    return sch


def main():
    lh = load()
    fails = []
    # Megatron-LM's padding of Qwen3's 151,936 to a multiple of 128 x TP 4 is 152,064: 38,016 a rank
    if lh.SCHED_VOCAB_PER_RANK != 38016:
        fails.append(f"vocab per rank {lh.SCHED_VOCAB_PER_RANK}, expected 38016")
    sch = synthetic(lh, fixed=7.0, rest=2.5, layer=11.0)
    lh.derive_schedule(sch)
    d = sch["derived"]["moe_ddp"]
    h = d["host_ms_median"]
    for name, got, want in (("per layer-micro-batch", h["per_layer_microbatch"], 11.0),
                            ("rest per micro-batch", h["rest_per_microbatch"], 2.5),
                            ("per micro-batch L 1", h["per_microbatch"]["1"], 13.5),
                            ("per micro-batch L 2", h["per_microbatch"]["2"], 24.5),
                            ("fixed per call L 2", h["fixed_per_call"]["2"], 7.0),
                            ("host min fixed", d["host_ms_min"]["fixed_per_call"]["1"], 6.5),
                            ("cpu rest", d["cpu_ms_median"]["rest_per_microbatch"], 5.0),
                            ("embedding per micro-batch", d["forward_parts_per_microbatch_ms_L1"]["embedding"], 0.3)):
        if abs(got - want) > 1e-9:
            fails.append(f"{name}: {got}, expected {want}")
    # a missing run leaves the figures that need it out instead of inventing them
    sch2 = synthetic(lh, 7.0, 2.5, 11.0)
    sch2["runs"] = [r for r in sch2["runs"] if not (r["layers"] == 2 and r["microbatches"] == 8)]
    lh.derive_schedule(sch2)
    h2 = sch2["derived"]["moe_ddp"]["host_ms_median"]
    if "per_layer_microbatch" in h2 or "2" in h2["per_microbatch"]:
        fails.append(f"incomplete runs gave {h2}")
    with tempfile.TemporaryDirectory() as tmp:
        good = os.path.join(tmp, "good.json")
        with open(good, "w") as f:
            json.dump({"env": {}, "schedule": sch, "errors": []}, f)
        r = subprocess.run([sys.executable, os.path.join(HERE, "schedule_summary.py"), good],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or "| moe_ddp | host median | 13.500 | 24.500 | 11.000 | 2.500 |" not in r.stdout:
            fails.append(f"summary of a good file: rc {r.returncode}\n{r.stdout}\n{r.stderr}")
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump({"env": {}, "cases": []}, f)
        r = subprocess.run([sys.executable, os.path.join(HERE, "schedule_summary.py"), bad],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 2 or f"{bad}: schedule: missing" not in r.stderr:
            fails.append(f"summary of a file without the section: rc {r.returncode}, {r.stderr!r}")
    for f in fails:
        print("FAIL", f)
    print("test_schedule:", "ok" if not fails else f"{len(fails)} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())

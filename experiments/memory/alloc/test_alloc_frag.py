#!/usr/bin/env python3
"""Checks alloc_frag.py's configuration list and summary arithmetic without a GPU or torch (alloc_frag.py imports
torch and Megatron only in its child process). Run: python3 test_alloc_frag.py (exit 0: all pass)."""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 1024.0 ** 3


def load():
    spec = importlib.util.spec_from_file_location("alloc_frag", os.path.join(HERE, "alloc_frag.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


def main():
    af = load()
    full, quick = af.runs(False), af.runs(True)
    check(len(af.cases(True)) == 1 and len(quick) == 2, "--quick: one configuration under both allocators")
    names = [c["name"] for c in af.cases(False)]
    check(len(names) == len(set(names)), "configuration names are unique")
    check(all([a for c, a in full if c["name"] == n] == list(af.ALLOCATORS) for n in names),
          "every configuration runs under every allocator, back to back")
    check(af.ALLOCATORS["expandable"] == "expandable_segments:True" and af.ALLOCATORS["default"] is None,
          "allocator settings: unset and expandable_segments:True")
    check(all(c["shape"] in af.SHAPES and c["recompute"] in ("none", "full", "sel-mlp") for c in af.cases(False)),
          "shapes and recompute modes known")
    # derive: static 30, peak allocated 40, peak reserved 43 GiB -> churn 10, reserve 3, 30 % of churn, 7.5 % of peak
    r = af.derive({"case": af.cases(True)[0], "allocator": "default", "status": "ok",
                   "mem": {"static": 30 * GIB, "peak_alloc": 40 * GIB, "peak_reserved": 43 * GIB},
                   "stats": {"inactive_split_bytes.all.peak": 2 * GIB, "num_alloc_retries": 0, "segment.all.peak": 77}})
    d = r["derived"]
    check(abs(d["churn_gib"] - 10) < 1e-12 and abs(d["reserve_gib"] - 3) < 1e-12, "churn and reserve in GiB")
    check(abs(d["reserve_over_churn"] - 0.3) < 1e-12 and abs(d["reserve_over_peak_alloc"] - 0.075) < 1e-12,
          "reserve over churn and over the allocated peak")
    z = af.derive({"case": af.cases(True)[0], "allocator": "expandable", "status": "ok",
                   "mem": {"static": 5 * GIB, "peak_alloc": 5 * GIB, "peak_reserved": 5 * GIB}})
    check(z["derived"]["reserve_over_churn"] is None, "no churn: no ratio (no division by zero)")
    res = {"runs": [r, z, {"case": af.cases(False)[1], "allocator": "default", "status": "skipped (time budget)"}]}
    t = af.summary_table(res)
    lines = t.splitlines()
    check(len(lines) == 1 + 3 + 1 and "30.0" in lines[1] and "7.5" in lines[1] and "skipped" in lines[3],
          "summary table: a row per run, ratios in %, skipped runs shown")
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "alloc_frag.json")
        with open(p, "w") as f:
            json.dump({"runs": [{k: v for k, v in r.items() if k != "derived"}]}, f)
        out = subprocess.run([sys.executable, os.path.join(HERE, "alloc_frag.py"), "--summary", p],
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == 0 and "30.0" in out.stdout, "--summary re-derives a saved run without torch")
        out = subprocess.run([sys.executable, os.path.join(HERE, "alloc_frag.py"), "--out", tmp, "--iters", "1"],
                             capture_output=True, text=True, timeout=60)
        check(out.returncode != 0 and "--iters" in out.stderr, "--iters 1 refused with a message")
    return 0


if __name__ == "__main__":
    sys.exit(main())

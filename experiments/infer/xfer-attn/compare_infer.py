#!/usr/bin/env python3
"""experiments/infer/xfer-attn/compare_infer.py [--ignore FIELD]... OLD_TACOSIM NEW_TACOSIM [DIR...]

Every shipped inference plan under DIR (default: experiments/ and tests/; a plan is a JSON file of "kind"
"inference" with a "model" and a "cluster", not a result) simulated by both binaries (`tacosim simulate
--json`, default calibration and options), the two results compared field by field (the calibration's path,
which names each build's source folder, cut to its file name). Prints one line per plan that differs (its
GPU and the TTFT, TPOT of both) and a count of identical / differing / failing plans per GPU. --ignore FIELD
leaves a top-level field of the result out of the comparison (e.g. "options", when the new build adds an option
that the result records, or "notes", when it adds a note)."""
import json, os, subprocess, sys, tempfile
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def plans(dirs):
    for d in dirs:
        for base, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith(".json"):
                    continue
                p = os.path.join(base, f)
                try:
                    j = json.load(open(p))
                except (ValueError, UnicodeDecodeError):
                    continue
                if isinstance(j, dict) and j.get("kind") == "inference" and "model" in j and "cluster" in j \
                        and "source" not in j:
                    yield p, j


def gpu_of(plan):
    c = plan["cluster"]
    if isinstance(c, dict):
        g = c.get("gpu")
        return g if isinstance(g, str) else (g or {}).get("name", "?")
    try:
        g = json.load(open(os.path.join(ROOT, "topologies", c + ".json")))["gpu"]
        return g if isinstance(g, str) else g.get("name", "?")
    except (OSError, ValueError, KeyError):
        return "?"


def run(binary, plan, out, ignore):
    r = subprocess.run([binary, "simulate", plan, "--json", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, cwd=ROOT)  # plans name models by paths from the root
    if r.returncode:
        return "failed(%d)" % r.returncode
    j = json.load(open(out))
    j["calibration"] = os.path.basename(str(j.get("calibration", "")))
    for k in ignore:
        j.pop(k, None)
    return j


def main():
    args, ignore = sys.argv[1:], []
    while len(args) >= 2 and args[0] == "--ignore":
        ignore.append(args[1])
        args = args[2:]
    if len(args) < 2:
        sys.exit(__doc__)
    old, new = (os.path.abspath(b) for b in args[:2])
    dirs = args[2:] or [os.path.join(ROOT, "experiments"), os.path.join(ROOT, "tests")]
    count = Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for p, j in plans(dirs):
            a, b = run(old, p, tmp + "/a.json", ignore), run(new, p, tmp + "/b.json", ignore)
            g = gpu_of(j)
            if a == b:
                count[(g, "identical" if isinstance(a, dict) else "both " + a)] += 1
                continue
            count[(g, "differ")] += 1
            f = lambda r, k: "%.6g" % r[k] if isinstance(r, dict) else r
            print("%-72s %-16s ttft %s -> %s  tpot %s -> %s" % (os.path.relpath(p, ROOT), g, f(a, "ttft_s"),
                  f(b, "ttft_s"), f(a, "tpot_s"), f(b, "tpot_s")))
    for (g, what), n in sorted(count.items()):
        print("%-20s %-16s %d" % (g, what, n))


if __name__ == "__main__":
    main()

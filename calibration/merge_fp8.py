#!/usr/bin/env python3
"""merge_fp8.py — put the "gemm_fp8" list of a `tacorun calibrate --only gemm_fp8` run (FP8 GEMMs: E4M3
A and B scaled per tensor, BF16 C; runtime/calibrate/calibrate_fp8.c, calibration/fp8/README.md) into
calibration files of the same GPU, replacing the list where a file has one and changing no other table.

The simulator prices an FP8 GEMM of a plan with layout.fp8 from this list where it holds the exact
(m, n, k) (schema_gemm_fp8_us, sim/sim_costs.c); without it, from the BF16 time moved to the FP8 peak.
Only FP8 predictions read it: every BF16 prediction stays as it is.

SRC (gzipped or not) must have a non-empty "gemm_fp8" list of {"m", "n", "k", "us"} points, each shape
once; a FILE of another GPU than SRC's is refused (the list is that GPU's). The list is written sorted as
tacorun writes it (by n, k, m) right after the other GEMM lists. FILE's notes get
"; gemm_fp8: N keys from SRC (measured_at, merge_fp8.py)" appended (append_note: older notes cut at a
clause). Merging twice is merging once.

--add: FILE keeps its list and gains SRC's keys it lacks (a key it has keeps its time), as for the
inference keys `tacorun calibrate-infer --fp8-gemms-only` times beside the training ones.

usage: merge_fp8.py [--add] --from SRC FILE...
"""
import argparse
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from merge_infer import append_note, write_calibration  # noqa: E402  (the merge scripts' writer and notes)

ANCHORS = ("gemm_wgrad", "gemm", "gemm_infer")  # gemm_fp8 goes after the first of these a file has (the writer's order)


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def fp8_points(src, path):
    """SRC's gemm_fp8 list, checked: exit naming the file, the point and the reason."""
    pts = src.get("gemm_fp8")
    if not isinstance(pts, list) or not pts:
        sys.exit(f"merge_fp8.py: {path}: gemm_fp8: missing or empty (is it a tacorun calibrate --only gemm_fp8 output?)")
    seen = set()
    out = []
    for i, p in enumerate(pts):
        where = f"{path}: gemm_fp8[{i}]"
        if not isinstance(p, dict) or set(p) != {"m", "n", "k", "us"}:
            sys.exit(f"merge_fp8.py: {where}: must be an object of m, n, k, us")
        if not all(isinstance(p[d], int) and not isinstance(p[d], bool) and p[d] > 0 for d in ("m", "n", "k")):
            sys.exit(f"merge_fp8.py: {where}: m, n, k must be positive integers")
        if not isinstance(p["us"], (int, float)) or isinstance(p["us"], bool) or not p["us"] > 0:
            sys.exit(f"merge_fp8.py: {where}: us must be a positive number")
        key = (p["m"], p["n"], p["k"])
        if key in seen:
            sys.exit(f"merge_fp8.py: {where}: shape {key} repeated")
        seen.add(key)
        out.append({"m": p["m"], "n": p["n"], "k": p["k"], "us": p["us"]})
    return sorted(out, key=lambda g: (g["n"], g["k"], g["m"]))


def with_fp8(cal, pts):
    """cal with "gemm_fp8" = pts, placed after its weight-gradient or BF16 GEMM list (else first after the
    metadata)."""
    anchor = next((k for k in ANCHORS if k in cal), None)
    out = {}
    for k, v in cal.items():
        if k == "gemm_fp8":
            continue
        if anchor is None and k not in ("schema", "gpu", "driver", "cuda", "nccl", "transport", "measured_at",
                                        "derived", "notes") and "gemm_fp8" not in out:
            out["gemm_fp8"] = pts
        out[k] = v
        if k == anchor:
            out["gemm_fp8"] = pts
    if "gemm_fp8" not in out:
        out["gemm_fp8"] = pts
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--add", action="store_true", help="add SRC's keys FILE lacks; keep FILE's list")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    src = load(a.src)
    pts = fp8_points(src, a.src)
    for path in a.files:
        cal = load(path)
        if cal.get("gpu") != src.get("gpu"):
            sys.exit(f"merge_fp8.py: {path} ({cal.get('gpu')}) and {a.src} ({src.get('gpu')}) are not of the same GPU")
        merged = pts
        if a.add:
            have = fp8_points(cal, path) if cal.get("gemm_fp8") else []
            keys = {(p["m"], p["n"], p["k"]) for p in have}
            new = [p for p in pts if (p["m"], p["n"], p["k"]) not in keys]
            merged = sorted(have + new, key=lambda g: (g["n"], g["k"], g["m"]))
        out = with_fp8(cal, merged)
        verb = f"{len(merged) - len(merged if not a.add else have)} keys added" if a.add else f"{len(pts)} keys"
        note = f"; gemm_fp8: {verb} from {a.src} ({src.get('measured_at', '?')}, merge_fp8.py)"
        if note not in out.get("notes", "") and not (a.add and len(merged) == len(have)):  # nothing added: no note
            append_note(out, note)
        write_calibration(path, out)
        print(f"{path}: gemm_fp8 of {len(merged)} keys ({verb}) from {a.src}")


if __name__ == "__main__":
    main()

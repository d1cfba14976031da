#!/usr/bin/env python3
"""merge_wgrad.py — give a calibration file the weight gradients' own timings
("gemm_wgrad") of the GEMM keys that are also forward or input-gradient
products, from a newer GEMM run that timed such keys both ways, while keeping
every point the file already has in the class it was measured in.

Before 2026-12-05 `tacorun calibrate` timed each (m, n, k) once, in the layout
of the first model that used it; a key that is a weight gradient of one layer
(FP32 C, EXEC_GEMM_TN_ACC, layout 2 in the GEMM tsv) and a forward or
input-gradient product of another (BF16 C, layout 0 or 1) got one timing for
both. For every key SRC holds in "gemm_wgrad" (timed both ways) that FILE's
"gemm" has, CLASSES (the --gemm-tsv of the run that measured FILE's "gemm"
list: its layout column) says which class FILE's point is:
  - a weight gradient: the point moves to FILE's "gemm_wgrad", and SRC's BF16
    timing of the key takes its place in "gemm";
  - a BF16 product: it stays, and SRC's weight-gradient timing is added to
    "gemm_wgrad".
Every other point of FILE is left as it is; SRC's other points are not taken;
a key FILE already has in "gemm_wgrad" is left as it is (merging twice is merging once).
A key FILE has that CLASSES does not list is an error (its class is unknown).
A note naming SRC is appended to FILE's notes (cut to 511 characters).

usage: merge_wgrad.py --from SRC --classes TSV[.gz] FILE [FILE ...]
"""
import argparse
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from merge_infer import append_note, write_calibration  # noqa: E402  (the merge scripts' writer and notes)


def load(path):
    return json.load(gzip.open(path, "rt") if path.endswith(".gz") else open(path))


def classes(path):
    """(m, n, k) -> True for a weight-gradient timing (layout 2), from a --gemm-tsv file."""
    out = {}
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        head = f.readline().rstrip("\n").split("\t")
        col = {name: i for i, name in enumerate(head)}
        for line in f:
            r = line.rstrip("\n").split("\t")
            out[(int(r[col["m"]]), int(r[col["n"]]), int(r[col["k"]]))] = int(r[col["layout"]]) == 2
    return out


def merge(path, src, cls, src_path):
    cal = json.load(open(path))
    if cal.get("gpu") != src.get("gpu"):
        sys.exit(f"merge_wgrad.py: {path} ({cal.get('gpu')}) and {src_path} ({src.get('gpu')}) are not of the same GPU")
    key = lambda g: (g["m"], g["n"], g["k"])
    gemm = {key(g): g for g in cal["gemm"]}
    wgrad = {key(g): g for g in cal.get("gemm_wgrad", [])}
    new_bf16 = {key(g): g["us"] for g in src["gemm"]}
    moved = added = 0
    for g in src.get("gemm_wgrad", []):
        k = key(g)
        if k not in gemm or k in wgrad:  # a key the file lacks, or one it already splits (merged before)
            continue
        if k not in cls:
            sys.exit(f"merge_wgrad.py: {path}: gemm point {k} is not in the class file; its class is unknown")
        if k not in new_bf16:
            sys.exit(f"merge_wgrad.py: {src_path}: gemm_wgrad {k} has no gemm twin")
        if cls[k]:  # the file's point is a weight gradient's timing
            wgrad[k] = {"m": k[0], "n": k[1], "k": k[2], "us": gemm[k]["us"]}
            gemm[k] = {"m": k[0], "n": k[1], "k": k[2], "us": new_bf16[k]}
            moved += 1
        else:
            wgrad[k] = {"m": k[0], "n": k[1], "k": k[2], "us": g["us"]}
            added += 1
    order = lambda g: (g["n"], g["k"], g["m"])
    cal["gemm"] = sorted(gemm.values(), key=order)
    cal["gemm_wgrad"] = sorted(wgrad.values(), key=order)
    # the writer's order: gemm_wgrad right after the GEMM lists
    out = {}
    for k, v in cal.items():
        if k == "gemm_wgrad":
            continue
        out[k] = v
        if k == ("gemm_infer" if "gemm_infer" in cal else "gemm"):
            out["gemm_wgrad"] = cal["gemm_wgrad"]
    note = (f"; gemm_wgrad: {moved + added} keys both a weight gradient and a BF16 product, the missing class from "
            f"{src_path} ({src.get('measured_at', '?')}; calibration/merge_wgrad.py)")
    append_note(out, note)
    write_calibration(path, out)
    print(f"{path}: {moved} points moved to gemm_wgrad (their BF16 timing from {src_path}), "
          f"{added} weight-gradient timings added from it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--classes", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    src, cls = load(a.src), classes(a.classes)
    for path in a.files:
        merge(path, src, cls, a.src)


if __name__ == "__main__":
    main()

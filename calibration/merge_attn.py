#!/usr/bin/env python3
"""merge_attn.py — put the "attention_shapes" section of a `tacorun calibrate
--only attention` file (runtime/calibrate_attn.c: the executor's attention
timed per shape between GEMMs) into a calibration file, replacing that
section if it has one and changing no other table. The simulator prices
training attention from it (schema_lookup_attn) where it has points; the
FLOP-keyed "attention" tables stay for what it does not cover (CP pieces,
MLA). FILE's notes get "; attention_shapes: SRC (measured_at, ...)" appended;
the older notes are cut at a clause (marked ", ...") to keep 511 characters.

usage: merge_attn.py --from SRC FILE...
"""
import argparse
import json
import sys

from merge_infer import merge_section


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    src = json.load(open(a.src))
    pts = src.get("attention_shapes")
    if not pts:
        sys.exit(f"merge_attn.py: {a.src} has no attention_shapes")
    note = f"; attention_shapes: {a.src} ({src.get('measured_at', '?')}, calibration/merge_attn.py)"
    # after gemm_infer, before kernels (the writer's order)
    for path in merge_section("merge_attn.py", a.src, src, a.files, "attention_shapes", pts, note):
        print(f"{path}: {len(pts)} attention shapes from {a.src}")

if __name__ == "__main__":
    main()

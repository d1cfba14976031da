#!/usr/bin/env python3
"""merge_tables.py — copy kernel tables from one calibration file into others.

For a table measured in a separate GPU run of the same machine (for example
`tacorun calibrate --only codec`): every kernel table of SRC whose name starts
with one of the prefixes replaces the table of that name in each FILE, and a
note naming SRC's run is appended to each FILE's notes (cut to the schema's
511 characters). Written in the layout of the schema's writer (a point per line, one-space
indent, tables sorted by name: merge_infer.data_json); check the result with calib_heldout, which
loads it with the strict loader.

usage: merge_tables.py --from SRC --prefixes taco_,caat_ FILE...
"""
import argparse
import json
import sys

from merge_infer import append_note, data_json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--prefixes", required=True, help="comma-separated table name prefixes")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    prefixes = tuple(p for p in a.prefixes.split(",") if p)
    with open(a.src) as f:
        src = json.load(f)
    if src.get("derived"):
        sys.exit(f"merge_tables.py: {a.src} is derived, not measured")
    tables = {k: v for k, v in src.get("kernels", {}).items() if k.startswith(prefixes)}
    if not tables:
        sys.exit(f"merge_tables.py: {a.src} has no kernel table starting with {', '.join(prefixes)}")
    note = f"; {', '.join(p + '*' for p in prefixes)} tables from a separate run at {src['measured_at']} (same GPUs)"
    for path in a.files:
        with open(path) as f:
            cal = json.load(f)
        if cal.get("gpu") != src.get("gpu") or cal.get("driver") != src.get("driver"):
            sys.exit(f"merge_tables.py: {path} and {a.src} are not of the same GPUs and driver")
        kernels = dict(cal.get("kernels", {}))
        kernels.update(tables)
        cal["kernels"] = {k: kernels[k] for k in sorted(kernels)}
        append_note(cal, note)
        with open(path, "w") as f:
            f.write(data_json(cal) + "\n")
        print(f"{path}: {len(tables)} tables from {a.src}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""merge_tables.py — copy kernel tables from one calibration file into others.

For a table measured in a separate GPU run of the same machine (for example
`tacorun calibrate --only codec`): every kernel table of SRC whose name starts
with one of the prefixes replaces the table of that name in each FILE, and a
note naming SRC's run is appended to each FILE's notes (cut to the schema's
511 characters). Written in the layout of the schema's writer (a point per line, one-space
indent, tables sorted by name: merge_infer.data_json); check the result with calib_heldout, which
loads it with the strict loader.

With --add-points, a table FILE already has keeps its points and gains only SRC's points at keys
(x and group) it lacks (a re-run that times more of a grid: the points the earlier run had stay as
shipped); a table FILE lacks is copied whole. The points both runs timed are compared (median and
largest |SRC / FILE - 1|, printed) but not changed.

usage: merge_tables.py --from SRC --prefixes taco_,caat_ [--add-points] FILE...
"""
import argparse
import json
import statistics
import sys

from merge_infer import append_note, data_json


def point_key(pt):
    """A point's place in its table: its size (flops or bytes) and group."""
    return (pt.get("flops", pt.get("bytes")), pt.get("group", 0))


def add_points(kernels, tables):
    """Adds to kernels (name -> points) each table's points at keys it lacks; copies a table it lacks.
    Returns (points added, |src/old - 1| of the points both hold)."""
    added, ratios = 0, []
    for name, pts in tables.items():
        if name not in kernels:
            kernels[name] = pts
            added += len(pts)
            continue
        have = {point_key(p): p for p in kernels[name]}
        new = [p for p in pts if point_key(p) not in have]
        ratios += [abs(p["us"] / have[point_key(p)]["us"] - 1) for p in pts if point_key(p) in have]
        kernels[name] = sorted(kernels[name] + new, key=point_key)
        added += len(new)
    return added, ratios


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--prefixes", required=True, help="comma-separated table name prefixes")
    ap.add_argument("--add-points", action="store_true",
                    help="add SRC's points a FILE table lacks; keep the points it has")
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
    if a.add_points:
        note = (f"; {', '.join(p + '*' for p in prefixes)} points added from a run at {src['measured_at']} "
                f"(same GPUs; merge_tables.py --add-points)")
    for path in a.files:
        with open(path) as f:
            cal = json.load(f)
        if cal.get("gpu") != src.get("gpu") or cal.get("driver") != src.get("driver"):
            sys.exit(f"merge_tables.py: {path} and {a.src} are not of the same GPUs and driver")
        kernels = dict(cal.get("kernels", {}))
        if a.add_points:
            added, ratios = add_points(kernels, tables)
            spread = (f"; the {len(ratios)} points both timed: |new/old - 1| median {100 * statistics.median(ratios):.1f} %, "
                      f"max {100 * max(ratios):.1f} %") if ratios else ""
            print(f"{path}: {added} points added{spread}")
        else:
            kernels.update(tables)
        cal["kernels"] = {k: kernels[k] for k in sorted(kernels)}
        append_note(cal, note)
        with open(path, "w") as f:
            f.write(data_json(cal) + "\n")
        if not a.add_points:
            print(f"{path}: {len(tables)} tables from {a.src}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""complete.py — fill a calibration file measured on one GPU with what one GPU
cannot measure, from another calibration file of the same GPU (in practice the
H200 file transferred onto it by `tacosim derive-calibration --gpu`).

Into FILE (in place), from SRC:
  - every top-level section FILE lacks (attention_backends, tp_comm_overlap_sm,
    framework_host, collectives, fits, gemm_infer where SRC has them);
  - in a section both have as an object ("kernels", "attention_backends"),
    every entry FILE lacks (tables of other runs: the decode step's small
    kernels queued eagerly and in a graph, the FlashAttention-2 backend, ...).
Nothing FILE has is changed. Prints what was taken. --notes TEXT replaces
FILE's notes (cut to 511 characters, the schema's limit).

usage: complete.py --from SRC [--notes TEXT] FILE
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from merge_infer import write_calibration  # noqa: E402  (the merge scripts' writer)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("--notes")
    ap.add_argument("file")
    a = ap.parse_args()
    src = json.load(open(a.src))
    cal = json.load(open(a.file))
    taken = []
    for key, value in src.items():
        if key not in cal:
            cal[key] = value
            taken.append(key)
    entries = []
    for key, value in src.items():
        if key in taken or not isinstance(value, dict) or not isinstance(cal.get(key), dict):
            continue
        for name in value:
            if name not in cal[key]:
                cal[key][name] = value[name]
                entries.append(f"{key}.{name}")
    if a.notes is not None:
        cal["notes"] = a.notes[:511]
    write_calibration(a.file, cal)
    print(f"complete.py: {a.file}: sections from {a.src}: {', '.join(taken) or 'none'}; "
          f"{len(entries)} entries: {', '.join(entries) or 'none'}", file=sys.stderr)


if __name__ == "__main__":
    main()

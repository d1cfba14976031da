#!/usr/bin/env python3
"""merge_power.py — put a "power" section (the GPU's board power and SM clock
for a GEMM back to back, a memory-bound kernel back to back and mixes of the
two with idle time, measured through NVML; schema/calibration.h, "power") into
calibration files of the same GPU, replacing the one they have and changing no
other table. The simulator fits its power-cap clock model to the section when
it loads the file (sim/README.md, "The power-cap clock"): this script checks
the section's shape so that a bad one fails here, naming the source and the
field, and the loader repeats every check and the fit. SRC is the section
itself ({"cap_w": .., "samples": [..]}) or a file holding it as "power".
FILE's notes get "; power: SRC (N samples, merge_power.py)" appended.

usage: merge_power.py --from SRC FILE...
"""
import argparse
import json
import sys

from merge_infer import merge_section

TOOL = "merge_power.py"
SECTION_KEYS = {"cap_w", "f_max_mhz", "idle_w", "gpu", "gemm", "mem", "samples"}
SAMPLE_KEYS = {"name", "gemm", "mem", "idle", "period_us", "power_w", "sm_mhz", "gemm_speed", "mem_speed"}
NUMBERS = ("gemm", "mem", "idle", "period_us", "power_w", "sm_mhz", "gemm_speed", "mem_speed")


def fail(src, field, reason):
    sys.exit(f"{TOOL}: {src}: {field}: {reason}")


def number(src, field, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        fail(src, field, "must be a number")
    return v


def check(src, sec):
    """The section's shape, as the loader checks it (the fit is the loader's)."""
    if not isinstance(sec, dict):
        fail(src, "power", "must be an object")
    for k in sorted(set(sec) - SECTION_KEYS):
        fail(src, f"power.{k}", "unknown field")
    for k in sorted(SECTION_KEYS - set(sec)):
        fail(src, f"power.{k}", "missing")
    for k in ("cap_w", "f_max_mhz"):
        if number(src, f"power.{k}", sec[k]) <= 0:
            fail(src, f"power.{k}", "must be > 0")
    if not 0 <= number(src, "power.idle_w", sec["idle_w"]) < sec["cap_w"]:
        fail(src, "power.idle_w", "must be in [0, cap_w)")
    for k in ("gpu", "gemm", "mem"):
        if not isinstance(sec[k], str) or not sec[k]:
            fail(src, f"power.{k}", "must be a non-empty string")
    samples = sec["samples"]
    if not isinstance(samples, list) or not samples:
        fail(src, "power.samples", "must be a non-empty array")
    names = set()
    for i, s in enumerate(samples):
        p = f"power.samples[{i}]"
        if not isinstance(s, dict):
            fail(src, p, "must be an object")
        for k in sorted(set(s) - SAMPLE_KEYS):
            fail(src, f"{p}.{k}", "unknown field")
        for k in sorted(SAMPLE_KEYS - {"gemm_speed", "mem_speed"} - set(s)):
            fail(src, f"{p}.{k}", "missing")
        for k in NUMBERS:  # a time fraction may be timing noise below 0 (the loader takes it as 0)
            if k in s and number(src, f"{p}.{k}", s[k]) < (-0.02 if k in ("gemm", "mem", "idle") else 0):
                fail(src, f"{p}.{k}", "must be >= 0" if k not in ("gemm", "mem", "idle") else "must be >= -0.02")
        total = s["gemm"] + s["mem"] + s["idle"]
        if abs(total - 1) > 0.02:
            fail(src, p, f"gemm + mem + idle is {total:g}: the time fractions must sum to 1 (within 0.02)")
        if s["sm_mhz"] <= 0 or s["sm_mhz"] > sec["f_max_mhz"]:
            fail(src, f"{p}.sm_mhz", f"must be in (0, f_max_mhz {sec['f_max_mhz']}]")
        if s["power_w"] <= 0 or s["period_us"] <= 0:
            fail(src, p, "power_w and period_us must be > 0")
        if s["name"] in names:
            fail(src, f"{p}.name", f"\"{s['name']}\" repeats: names must be unique")
        names.add(s["name"])
    for need in ("gemm", "mem"):
        if need not in names:
            fail(src, "power.samples", f"no sample named \"{need}\" (the back-to-back {need} kernel)")


def main():
    ap = argparse.ArgumentParser(description="put a power section into calibration files")
    ap.add_argument("--from", dest="src", required=True, help="the section (or a file holding it as \"power\")")
    ap.add_argument("files", nargs="+", help="calibration files of the section's GPU")
    a = ap.parse_args()
    doc = json.load(open(a.src))
    sec = doc["power"] if isinstance(doc, dict) and "power" in doc else doc
    check(a.src, sec)
    # the files' "gpu" against the section's: the power and clocks are those of that GPU
    src = {"gpu": sec["gpu"]}
    note = f"; power: {a.src} ({len(sec['samples'])} samples, {TOOL})"
    for path in merge_section(TOOL, a.src, src, a.files, "power", sec, note):
        print(f"{path}: power section ({len(sec['samples'])} samples, cap {sec['cap_w']} W, "
              f"f_max {sec['f_max_mhz']} MHz) from {a.src}")


if __name__ == "__main__":
    main()

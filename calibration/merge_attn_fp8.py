#!/usr/bin/env python3
"""merge_attn_fp8.py — put an "attention_fp8" section (one fused attention
kernel's forward speed with FP8 operands against its BF16 speed, by sequence
length: attn-fp8/README.md) into calibration files, replacing the one they
have and changing no other table. The simulator moves the "fused" table's
price of a serving engine's FP8 context attention (plan prefill_attention
"fused-fp8") by the ratio at the prompt's length (schema_attn_fp8_speedup).
The section is a kernel's property on the GPU its source names, so it is
merged into files of any GPU of that architecture by choice, not checked
against the file's "gpu". The notes stay as they are (the section names its
own source and GPU).

usage: merge_attn_fp8.py --from SRC FILE...
"""
import argparse
import json
import sys

from merge_infer import with_section, write_calibration


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    sec = json.load(open(a.src)).get("attention_fp8")
    if not sec or not sec.get("points"):
        sys.exit(f"merge_attn_fp8.py: {a.src} has no attention_fp8 points")
    seqs = [p["seq"] for p in sec["points"]]
    if seqs != sorted(set(seqs)):
        sys.exit(f"merge_attn_fp8.py: {a.src}: attention_fp8.points must be sorted by seq, growing")
    for path in a.files:
        out = with_section(json.load(open(path)), "attention_fp8", sec)  # before kernels: the writer's order
        write_calibration(path, out)
        print(f"{path}: attention_fp8 ({len(seqs)} points, {sec['measured_on']}) from {a.src}")


if __name__ == "__main__":
    main()

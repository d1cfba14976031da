#!/usr/bin/env python3
"""merge_graph_gap.py — host.graph_gap_us from a `tacorun bench-graph` output
(runtime/calibrate/bench_graph.c) into calibration files of the same GPU, changing
nothing else of their host section or any table. FILE's notes get
"; graph gap: SRC (merge_graph_gap.py)" appended.

graph_gap_us is what a launch of a table-timed decode kernel costs more in a
stream the host keeps ahead of (how the tables were timed) than inside a CUDA
graph: the median over the bench's GEMM rows (qkv, attn_out, fc1, fc2: one
launch each) and decode-attention rows (two launches: split and combine, each
counted with half the row's difference) of the column "queued - graph", over
every batch the bench ran. The simulator takes it off each such launch of a
decode step under `tacosim simulate --decode graph` (sim/INFERENCE.md).

usage: merge_graph_gap.py --from BENCH_GRAPH.txt [--gpu NAME] FILE...
"""
import argparse
import re
import statistics
import sys

from merge_infer import append_note, load_bench_target, write_calibration

GEMMS = ("qkv", "attn_out", "fc1", "fc2")


def graph_gap(path):
    """Per-launch queued - graph values of the table-timed kernels in a bench-graph output."""
    vals = []
    for line in open(path):
        m = re.match(r"\| (\w+) \| [\d.]+ \| [\d.]+ \| [\d.]+ \| [+-][\d.]+ \| ([+-][\d.]+) \|$", line.strip())
        if not m:
            continue
        op, d = m.group(1), float(m.group(2))
        if op in GEMMS:
            vals.append(d)
        elif op == "attention":
            vals += [d / 2, d / 2]
    if not vals:
        sys.exit(f"merge_graph_gap.py: {path}: no GEMM or attention rows of tacorun bench-graph")
    return statistics.median(vals), len(vals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from", dest="src", required=True, help="tacorun bench-graph output")
    ap.add_argument("--gpu", default="NVIDIA H200", help="the GPU the bench ran on (default NVIDIA H200)")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    gap, n = graph_gap(a.src)
    for path in a.files:
        cal = load_bench_target("merge_graph_gap.py", path, a.gpu, "host", "merge_host.py first")
        cal["host"]["graph_gap_us"] = round(gap, 4)
        append_note(cal, f"; graph gap: {a.src} (merge_graph_gap.py)")
        write_calibration(path, cal)
        print(f"{path}: host.graph_gap_us {gap:.4f} us (median of {n} launches)")


if __name__ == "__main__":
    main()

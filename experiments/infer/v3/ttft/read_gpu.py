#!/usr/bin/env python3
"""read_gpu.py — the tables of the GPU call `run_gpu.sh` (TTFT's clock questions and the graph gap), from
its extracted folder (ttft/ inside ttft.tgz): the graph gap three ways; bench-burst's profiles and decision
rule (1) of README "TTFT's largest errors"; the SM clock, power and temperature of nvidia-smi (every 20 ms)
per stage, and during each plan's timed prefills (the executor prints when they began, Unix time), beside
the prefills in order; calibrate-infer's prefill GEMM points against the shipped sustained table.

usage (repository root): python3 experiments/infer/v3/ttft/read_gpu.py DIR [CALIBRATION (calibration/h200-nvlink.json)]
"""
import datetime
import gzip
import json
import os
import re
import statistics
import sys

TABLE_MHZ = 1530  # the shipped GEMM table's median SM clock (run 9, calibration/README.md)


def smi_samples(d):
    """[(unix_s, mhz, watts, temp)] from smi.csv(.gz); local times made Unix by the stages' pairs."""
    stages = [l.split(" ", 2) for l in open(os.path.join(d, "stages.txt"))]
    day, rest = stages[0][0], stages[0][1]
    local_s, unix_s = rest.split("|")
    local0 = datetime.datetime.strptime(f"{day} {local_s}", "%Y/%m/%d %H:%M:%S.%f")
    offset = float(unix_s) - local0.replace(tzinfo=datetime.timezone.utc).timestamp()
    path = os.path.join(d, "smi.csv.gz")
    lines = gzip.open(path, "rt") if os.path.exists(path) else open(os.path.join(d, "smi.csv"))
    out = []
    for line in lines:
        f = [x.strip() for x in line.split(",")]
        try:
            t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").replace(tzinfo=datetime.timezone.utc)
            nums = [float(re.match(r"[\d.]+", x).group(0)) for x in f[1:]]
        except (ValueError, AttributeError, IndexError):
            continue
        out.append((t.timestamp() + offset, nums[0], nums[1], nums[-1]))
    return out


def stage_times(d):
    """[(name, unix_start, unix_end)] from stages.txt."""
    rows = []
    for line in open(os.path.join(d, "stages.txt")):
        day, rest, info = line.rstrip("\n").split(" ", 2)
        rows.append((info.split(": ", 1)[1], float(rest.split("|")[1])))
    return [(n, t, rows[i + 1][1] if i + 1 < len(rows) else t) for i, (n, t) in enumerate(rows)]


def window(smi, t0, t1):
    s = [x for x in smi if t0 <= x[0] <= t1]
    if not s:
        return "no samples"
    med = lambda i: statistics.median(x[i] for x in s)
    return f"{med(1):.0f} MHz ({min(x[1] for x in s):.0f}-{max(x[1] for x in s):.0f}), {med(2):.0f} W, {med(3):.0f} C, {len(s)} samples"


def graph_gap(d):
    print("## Graph gap (host.graph_gap_us)\n")
    try:
        host = json.load(open(os.path.join(d, "host.json")))["host"]
        print(f"- tacorun calibrate --only host: graph_gap_us = {host.get('graph_gap_us', 'missing')}")
    except (OSError, KeyError, ValueError) as x:
        print(f"- tacorun calibrate --only host: no result ({x})")
    for f in ("host.log", "bench-graph.txt"):
        for line in open(os.path.join(d, f), errors="replace"):
            if "graph gap" in line:
                print(f"- {f}: {line.strip()}")
    print("- shipped (bench-graph 2026-12-04 09:32, merge_graph_gap.py): 1.23 us\n")


def bursts(d):
    print("## bench-burst (speed against the burst's sustained end, by ms since it began; median of 3)\n")
    for f in sorted(x for x in os.listdir(d) if x.startswith("burst-")):
        rows = [l for l in open(os.path.join(d, f)) if re.match(r"\| [\d.]+-[\d.]+ \|", l)]
        late = [float(l.rstrip().rstrip("|").split("|")[-1]) for l in rows if float(l.split("|")[1].split("-")[0]) >= 100]
        print(f"### {f}\n")
        print("".join(open(os.path.join(d, f)).readlines()[:1]), end="")
        print("".join(rows), end="")
        verdict = max(late) if late else float("nan")
        print(f"\nrule (1): largest median speed from 100 ms on: {verdict:.3f} -> "
              f"{'above 1.02: the 26 one-GPU plans move with it' if verdict > 1.02 else 'the burst cannot touch the 26 one-GPU plans'}; merge it in any case (merge_burst.py --from) and re-predict\n")


PREFILL_LINE = re.compile(r"prefill times in order \(ms; the first issued at Unix time ([\d.]+) s\): (.*)")


def prefill_runs(d, files):
    """[(file, plan, t0, [ms...])]: the timed prefills tacorun execute printed, file by file in the order given."""
    out = []
    for f in files:
        name = None
        for line in open(os.path.join(d, f)):
            m = re.match(r"# (\S+): ", line)
            if m:
                name = m.group(1)
            m = PREFILL_LINE.match(line)
            if m and name:
                out.append((f, name, float(m.group(1)), [float(x) for x in m.group(2).split()]))
    return out


def plans(d, smi):
    print("## The executor's timed prefills: SM clock while they ran, and in order\n")
    print(f"(the GEMM table's median clock: {TABLE_MHZ} MHz)\n")
    files = sorted(x for x in os.listdir(d) if x.startswith("execute-"))
    for f, name, t0, times in prefill_runs(d, files):
        print(f"- {f} {name}: {window(smi, t0, t0 + sum(times) / 1e3)}; in order (ms): "
              + " ".join(f"{x:.3f}" for x in times))
    print()


def calibrate_infer(d, cal_path):
    print("## calibrate-infer's prefill GEMM points against the shipped sustained table\n")
    try:
        path = os.path.join(d, "ci", "out", "h200-nvlink.json")
        # the repository keeps it gzipped (gpu-2026-12-04/)
        r = json.load(gzip.open(path + ".gz", "rt") if os.path.exists(path + ".gz") else open(path))
    except (OSError, ValueError) as x:
        print(f"no output ({x})\n")
        return
    # calibrate-infer replaces the file's points at the prefill shapes it timed (Llama-3 8B, TP 1-8, merge()
    # in calibrate_infer.c); the points it left alone equal the input's, the shipped file's
    table = {(p["m"], p["n"], p["k"]): p["us"] for p in json.load(open(cal_path))["gemm"]}
    by = {}
    for p in r.get("gemm", []):
        key = (p["m"], p["n"], p["k"])
        if p["m"] >= 1024 and key in table and table[key] != p["us"]:
            by.setdefault(p["m"], []).append(table[key] / p["us"])
    for m in sorted(by):
        print(f"- m = {m}: sustained table / this call, median {statistics.median(by[m]):.3f} over {len(by[m])} shapes")
    print()


def main():
    d = sys.argv[1]
    cal = sys.argv[2] if len(sys.argv) > 2 else "calibration/h200-nvlink.json"
    print(open(os.path.join(d, "gpu.txt")).read())
    graph_gap(d)
    bursts(d)
    smi = smi_samples(d)
    print("## nvidia-smi per stage\n")
    for n, t0, t1 in stage_times(d):
        if t1 > t0:
            print(f"- {n}: {window(smi, t0, t1)}")
    print()
    plans(d, smi)
    calibrate_infer(d, cal)


if __name__ == "__main__":
    main()

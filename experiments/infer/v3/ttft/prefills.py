#!/usr/bin/env python3
"""prefills.py — the GPU call of 2026-12-04 13:01 UTC (gpu-2026-12-04/): each plan's timed prefills in
order (`tacorun execute --prefill-reps 9`, 30 and 12: the first issued at the Unix time it prints, the
next ones back to back), the SM clock nvidia-smi logged during each (median of its 20-ms samples), and
the TTFT the executor's default sequence (warm-up, 2 decode steps, 3 timed prefills: the first three of
these) gives, against `tacosim simulate` with the burst profile (ttft/predicted/) and at the tables'
sustained speed (--prefill-clock off: the "GEMMs / attention / other" split of split.md).

The last columns test "tables timed in different clock states" (a diagnostic, nothing fitted): the
split repriced with the measured clocks, the GEMMs at TABLE_MHZ / f and the attention (timed by
calibrate-infer) at f_ci / f, where f is the median SM clock during the plan's first three timed
prefills and f_ci the median clock of calibrate-infer's busy samples (> 300 W) in the same call.
Speed taken proportional to the SM clock (compute-bound GEMMs and attention); 'other' as priced.

usage (repository root): python3 experiments/infer/v3/ttft/prefills.py [DIR (gpu-2026-12-04)]
"""
import json
import os
import re
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import read_gpu  # noqa: E402

TABLE_MHZ = read_gpu.TABLE_MHZ


def split_rows():
    """{plan: (gemm_ms, attention_ms, other_ms)} at the tables' sustained speed (split.md)."""
    out = {}
    for line in open(os.path.join(here, "split.md")):
        m = re.match(r"\| (\S+) \| [\d.]+ \| ([\d.]+) / ([\d.]+) / ([\d.]+) \|", line)
        if m:
            out[m.group(1)] = tuple(float(x) for x in m.groups()[1:])
    return out


def runs(d):
    """[(file, plan, t0, [ms...])] in the order they ran."""
    return read_gpu.prefill_runs(d, ("execute-seq.txt", "execute-alone.txt", "execute-alone-qwen7b.txt"))


def clock(smi, t0, t1):
    s = [x[1] for x in smi if t0 <= x[0] <= t1]
    return statistics.median(s) if s else float("nan")


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "gpu-2026-12-04")
    smi = read_gpu.smi_samples(d)
    ci = [st for st in read_gpu.stage_times(d) if st[0] == "calibrate-infer"][0]
    f_ci = statistics.median(x[1] for x in smi if ci[1] <= x[0] <= ci[2] and x[2] > 300)
    split = split_rows()
    print(f"calibrate-infer's busy samples: median {f_ci:.0f} MHz; the GEMM table's: {TABLE_MHZ} MHz\n")
    print("| run | plan | prefills in order: ms @ MHz | 200 ms before: MHz, W |")
    print("| --- | --- | --- | --- |")
    rows = []
    for f, n, t0, ms in runs(d):
        t, cells, fs = t0, [], []
        for x in ms:
            fc = clock(smi, t, t + x / 1e3)
            cells.append(f"{x:.1f} @ {fc:.0f}")
            fs.append(fc)
            t += x / 1e3
        pre = [s for s in smi if t0 - 0.2 <= s[0] < t0]
        print(f"| {f[:-4]} | {n} | {', '.join(cells)} | {statistics.median(s[1] for s in pre):.0f}, "
              f"{statistics.median(s[2] for s in pre):.0f} |")
        rows.append((f, n, ms, fs))
    print()
    print("| run | plan | meas: median of first 3 (of all) ms | MHz, first 3 | sim, profile | err | sim, sustained | err "
          "| repriced at the measured clocks | err |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for f, n, ms, fs in rows:
        m3, mall = statistics.median(ms[:3]), statistics.median(ms)
        f3 = statistics.median(x for x in fs[:3] if x == x)
        sim = json.load(open(os.path.join(here, "predicted", n + ".json")))["ttft_s"] * 1e3
        g, a, o = split[n]
        off = g + a + o
        rep = g * TABLE_MHZ / f3 + a * f_ci / f3 + o
        e = lambda p: f"{100 * (p / m3 - 1):+.1f} %"
        print(f"| {f[:-4]} | {n} | {m3:.1f} ({mall:.1f}) | {f3:.0f} | {sim:.1f} | {e(sim)} | {off:.1f} | {e(off)} "
              f"| {rep:.1f} | {e(rep)} |")


if __name__ == "__main__":
    main()

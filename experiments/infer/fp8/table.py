#!/usr/bin/env python3
"""table.py — the FP8 KV cache validation table: predicted (predicted/*.json,
tacosim simulate on the default calibration, committed before the run)
against measured (run-b/execute-*.txt, `tacorun execute --decode-graph`:
TTFT median of 3 prefills, TPOT of the CUDA graph steps), and BF16 against
FP8 TPOT and KV memory. Prints markdown.
usage: experiments/infer/fp8/table.py [RUN_DIR (experiments/infer/fp8/run-b)]
"""
import json
import os
import re
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
run = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "run-b")


def measured():
    out = {}
    for kv in ("bf16", "fp8"):
        text = open(os.path.join(run, f"execute-{kv}.txt")).read()
        for blk in re.split(r"^(?=# llama)", text, flags=re.M):
            m = re.match(r"# (\S+):", blk)
            if not m:
                continue
            t = re.search(r"^ttft_s ([\d.]+).*?tpot_s ([\d.]+)", blk, re.M)
            g = re.search(r"^decode graph: tpot_s ([\d.]+).*?eager tpot_s ([\d.]+)", blk, re.M)
            k = re.search(r"^# KV cache \S+ ([\d.]+) GB allocated", blk, re.M)
            out[m.group(1)] = dict(ttft=float(t.group(1)), tpot=float(g.group(1)), eager=float(g.group(2)),
                                   kv_gb=float(k.group(1)))
    return out


def main():
    meas = measured()
    names = sorted({n[:-4] if n.endswith("-fp8") else n[:-5] for n in meas},
                   key=lambda n: [int(x) for x in re.findall(r"\d+", n.split("tp1-")[1])])
    print("| plan (Llama-3 8B TP1, 64 generated) | KV GB bf16 -> fp8 | TPOT bf16 ms | TPOT fp8 ms | fp8/bf16 |")
    print("| --- | --- | --- | --- | --- |")
    for n in names:
        b, f = meas[n + "-bf16"], meas[n + "-fp8"]
        print(f"| {n} | {b['kv_gb']:.2f} -> {f['kv_gb']:.2f} | {b['tpot']*1e3:.3f} | {f['tpot']*1e3:.3f} | "
              f"{f['tpot']/b['tpot']:.3f} |")
    print()
    for kv in ("fp8", "bf16"):
        print(f"| {kv} plan | TTFT pred ms | TTFT meas ms | err | TPOT pred ms | TPOT meas ms | err |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        e_ttft, e_tpot = [], []
        for n in names:
            p = json.load(open(os.path.join(here, "predicted", f"{n}-{kv}.json")))
            m = meas[f"{n}-{kv}"]
            et, ep = p["ttft_s"] / m["ttft"] - 1, p["tpot_s"] / m["tpot"] - 1
            e_ttft.append(abs(et)), e_tpot.append(abs(ep))
            print(f"| {n}-{kv} | {p['ttft_s']*1e3:.3f} | {m['ttft']*1e3:.3f} | {100*et:+.1f} % | "
                  f"{p['tpot_s']*1e3:.3f} | {m['tpot']*1e3:.3f} | {100*ep:+.1f} % |")
        print(f"| **median / max \\|error\\|** | | | {100*statistics.median(e_ttft):.1f} / {100*max(e_ttft):.1f} % | | | "
              f"{100*statistics.median(e_tpot):.1f} / {100*max(e_tpot):.1f} % |")
        print()


if __name__ == "__main__":
    main()

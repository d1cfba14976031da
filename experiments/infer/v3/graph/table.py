#!/usr/bin/env python3
"""table.py — experiments/infer/v3's 26 measured runs (../run/execute-*.txt: TPOT of the
CUDA-graph decode steps, and of the eager steps of the same runs) against the shipped
calibration's predictions before and after the decode step was priced as a CUDA graph:
eager (../recal/predicted/: `tacosim simulate`, every op at its stream-timed table) and
graph (predicted/: `tacosim simulate --decode graph`, each GEMM and decode-attention
launch host.graph_gap_us below its table). TTFT is the same in both (the prefill is not
a graph). Prints markdown: one row per plan, then median / max |error| per set.
usage: experiments/infer/v3/graph/table.py [GRAPH_DIR (predicted)]
"""
import json
import os
import re
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
v3 = os.path.dirname(here)
sys.path.insert(0, v3)
import table as v3table  # noqa: E402

graph_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "predicted")
eager_dir = os.path.join(v3, "recal", "predicted")


def eager_measured():
    out = {}
    for name in sorted(os.listdir(os.path.join(v3, "run"))):
        if not name.startswith("execute-"):
            continue
        for blk in re.split(r"^(?=# \S+: )", open(os.path.join(v3, "run", name)).read(), flags=re.M):
            m = re.match(r"# (\S+): ", blk)
            g = re.search(r"^decode graph: .* against eager tpot_s ([\d.]+)", blk, re.M)
            if m and g:
                out[m.group(1)] = float(g.group(1))
    return out


def pred(d, n):
    p = json.load(open(os.path.join(d, n + ".json")))
    return p["ttft_s"], p["tpot_s"]


def stat(errs):
    a = [abs(x) for x in errs]
    return f"{100 * statistics.median(a):.1f} / {100 * max(a):.1f} %"


def main():
    meas, eager = v3table.measured(), eager_measured()
    print("| plan | TPOT graph meas ms | eager model ms | err | graph model ms | err | TPOT eager meas ms | "
          "eager model err |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = {}
    for n in sorted(meas, key=v3table.key):
        m = meas[n]
        (te, pe), (tg, pg) = pred(eager_dir, n), pred(graph_dir, n)
        rows[n] = dict(tt=te / m["ttft"] - 1, eager=pe / m["tpot"] - 1, graph=pg / m["tpot"] - 1,
                       vs_eager=pe / eager[n] - 1, tg_same=abs(tg - te) < 1e-12)
        r = rows[n]
        print(f"| {n} | {m['tpot'] * 1e3:.3f} | {pe * 1e3:.3f} | {100 * r['eager']:+.1f} % | {pg * 1e3:.3f} | "
              f"{100 * r['graph']:+.1f} % | {eager[n] * 1e3:.3f} | {100 * r['vs_eager']:+.1f} % |")
    assert all(r["tg_same"] for r in rows.values()), "TTFT differs between the eager and graph predictions"
    print()
    print("| set | plans | TTFT | TPOT, eager model | TPOT, graph model | eager model against the eager steps |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    groups = {}
    for n in rows:
        mdl, kv = v3table.key(n)[:2]
        groups.setdefault(mdl, []).append(n)
        groups.setdefault(f"all {kv}", []).append(n)
    groups["**all**"] = list(rows)
    for g, ns in groups.items():
        rs = [rows[n] for n in ns]
        print(f"| {g} | {len(ns)} | {stat([r['tt'] for r in rs])} | {stat([r['eager'] for r in rs])} | "
              f"{stat([r['graph'] for r in rs])} | {stat([r['vs_eager'] for r in rs])} |")
    over = sum(r["graph"] > 0 for r in rows.values())
    print(f"\nGraph model: {over} of {len(rows)} TPOTs over-predicted, "
          f"signed median {100 * statistics.median([r['graph'] for r in rows.values()]):+.1f} %.")


if __name__ == "__main__":
    main()

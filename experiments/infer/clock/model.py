#!/usr/bin/env python3
"""model.py — a diagnostic, not the simulator: does "each table carries the clock it was timed at, a prefill runs
all its ops at one clock set by their power under the cap" predict the H100 prefills' clocks and TTFTs?

usage: model.py [--power TSV] [--clock TSV] [--sim TACOSIM] [--mem-exponent G]

Every figure is measured, none is fitted to the rows it predicts:
  - the op classes' power and clock back to back, from one power phase (--power, default
    calibration/power/h100-20261207-attn/power.tsv): GEMMs (qkv, attention output, fc1, fc2, logits) at the median
    power and clock of the seven prefill-sized --power-gemm shapes (the tables' state); the prefill attention of
    the plan's head layout at its --power-prefill-attn row nearest in batch x prompt and prompt; the other ops
    (RoPE, norms, SwiGLU, adds) at the add's ("mem"); idle from "idle";
  - how a class's power follows the clock: idle + (P - idle) (f / f0)^g, g from the reference GEMM (back to back,
    and at duty 0.25 and 0.5 at the maximum clock, whose GEMM share's power is (P - idle x idle share) / GEMM share:
    g = ln((P(f_max) - idle) / (P(f0) - idle)) / ln(f_max / f0)); the memory-bound class --mem-exponent (0: its
    power is the HBM's, not the SM clock's);
  - speed against the clock: (f / f0)^0.45 for the GEMMs and attention (the power phase's speed law), 1 for the rest;
  - each op's time at its table's clock: `tacosim ops` of the plan with the shipped H100 file (the prefill's ops);
  - the measured prefill clocks and TTFTs (--clock, default experiments/infer/clock/h100-20261207-ops/clock.tsv).
The window's clock f solves sum_i t_i(f) P_i(f) / sum_i t_i(f) = cap (bisection; f_max if under the cap).
Prints per plan the measured and modelled clock, the measured TTFT, the prefill ops summed at the tables' clocks and
at the modelled clock."""
import argparse
import math
import os
import statistics as st
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GEMM_OPS = ('prefill.qkv', 'prefill.attn_out', 'prefill.fc1', 'prefill.fc2', 'prefill.logits')
SPEED = 0.45
LAYOUT = {'llama3-8b': (32, 8), 'qwen2.5-14b': (40, 8), 'qwen2.5-7b': (28, 4)}


def read_power(path):
    rows = {}
    cap = None
    for line in open(path):
        if line.startswith('#'):
            if 'cap' in line and cap is None:
                cap = float(line.split('cap ')[1].split(' W')[0])
            continue
        f = line.rstrip('\n').split('\t')
        if f[0] == 'name':
            continue
        rows[f[0]] = {'gemm': float(f[10]), 'idle': float(f[12]), 'power': float(f[19]), 'mhz': float(f[22])}
    return rows, cap


def classes(rows):
    idle = rows['idle']['power']
    fmax = rows['idle']['mhz']
    shapes = [v for k, v in rows.items() if k.startswith('gemm-') and 'x' in k and not k.startswith('gemm-64x')]
    gemm = (st.median(v['power'] for v in shapes), st.median(v['mhz'] for v in shapes))
    ref = rows['gemm']
    at_max = [(rows[d]['power'] - idle * rows[d]['idle']) / rows[d]['gemm'] for d in ('gemm-d25', 'gemm-d50')]
    g = math.log((st.mean(at_max) - idle) / (ref['power'] - idle)) / math.log(fmax / ref['mhz'])
    attn = {tuple(map(int, k[5:].split('x'))): (v['power'], v['mhz']) for k, v in rows.items() if k.startswith('attn-')}
    return idle, fmax, gemm, (rows['mem']['power'], rows['mem']['mhz']), g, attn


def attn_row(attn, name):
    model = name.split('-tp1-')[0]
    b = int(name.split('-b')[1].split('-')[0])
    p = int(name.split('-p')[1].split('-')[0])
    hl, kvl = LAYOUT[model]
    same = [k for k in attn if k[0] == hl and k[1] == kvl]
    if not same:
        raise SystemExit(f"model.py: the power TSV has no --power-prefill-attn row of {hl} / {kvl} heads "
                         f"(needed by {name})")
    k = min(same, key=lambda k: abs(math.log(k[3] * k[4] / (b * p))) + abs(math.log(k[4] / p)))
    return attn[k]


def prefill_ops(sim, plan):
    out = subprocess.run([sim, 'ops', plan], capture_output=True, text=True, check=True).stdout
    return {l.split()[0]: float(l.split()[2]) for l in out.splitlines() if l.startswith('prefill.')}


def window_clock(items, idle, cap, fmax):
    def power(f):
        num = den = 0.0
        for t, p, f0, b, g in items:
            tf = t * (f0 / f) ** b
            num += tf * (idle + (p - idle) * (f / f0) ** g)
            den += tf
        return num / den
    if power(fmax) <= cap:
        return fmax
    lo, hi = 500.0, fmax
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if power(mid) > cap else (mid, hi)
    return lo


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--power', default=os.path.join(ROOT, 'calibration/power/h100-20261207-attn/power.tsv'))
    ap.add_argument('--clock', default=os.path.join(ROOT, 'experiments/infer/clock/h100-20261207-ops/clock.tsv'))
    ap.add_argument('--sim', default=os.path.join(ROOT, 'build/sim/tacosim'))
    ap.add_argument('--mem-exponent', type=float, default=0.0)
    a = ap.parse_args()
    rows, cap = read_power(a.power)
    idle, fmax, gemm, mem, g, attn = classes(rows)
    print(f"# cap {cap:.0f} W, idle {idle:.1f} W, max {fmax:.0f} MHz; GEMMs {gemm[0]:.1f} W at {gemm[1]:.0f} MHz, "
          f"the rest {mem[0]:.1f} W at {mem[1]:.0f} MHz; power exponent {g:.3f} (memory-bound {a.mem_exponent}), "
          f"speed exponent {SPEED}")
    print("plan\tmhz_measured\tmhz_model\tttft_ms\tops_at_tables_ms\terr\tops_at_model_ms\terr")
    errs = {'clock': [], 'tables': [], 'model': []}
    for line in open(a.clock).read().splitlines()[2:]:
        f = line.split('\t')
        name, ttft, mhz = f[0], float(f[2]), float(f[4])
        ops = prefill_ops(a.sim, os.path.join(ROOT, 'experiments/validation/h100/infer-plans', name + '.json'))
        pa, fa = attn_row(attn, name)
        items = []
        for op, t in ops.items():
            if op in GEMM_OPS:
                items.append((t, gemm[0], gemm[1], SPEED, g))
            elif op == 'prefill.attn':
                items.append((t, pa, fa, SPEED, g))
            else:
                items.append((t, mem[0], mem[1], 0.0, a.mem_exponent))
        fm = window_clock(items, idle, cap, fmax)
        at_tables = sum(t for t, *_ in items)
        at_model = sum(t * (f0 / fm) ** b for t, _, f0, b, _ in items)
        e = [100 * (fm / mhz - 1), 100 * (at_tables / ttft - 1), 100 * (at_model / ttft - 1)]
        for k, v in zip(errs, e):
            errs[k].append(v)
        print(f"{name}\t{mhz:.0f}\t{fm:.0f}\t{ttft:.1f}\t{at_tables:.1f}\t{e[1]:+.1f}%\t{at_model:.1f}\t{e[2]:+.1f}%")
    for k, v in errs.items():
        print(f"# {k}: |error| median {st.median(map(abs, v)):.1f} %, max {max(map(abs, v)):.1f} %")


if __name__ == '__main__':
    main()

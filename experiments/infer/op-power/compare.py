#!/usr/bin/env python3
"""compare.py — the TTFT of measured inference plans predicted with the prefill at one clock from its ops' power
(`tacosim simulate --prefill-power on`, the calibration's "op_power" section) and without it (`off`), against the
measured TTFT.

usage: compare.py [--calibration CAL] --plans DIR --measured FILE [--sim TACOSIM] [--decode graph|eager]

FILE: a measured TTFT a plan, either a table.md of the validation runs (| plan | TTFT pred | TTFT meas | ...) or a
clock.tsv of experiments/infer/clock (plan, rc, ttft_ms, ..., mhz_median); the plans are DIR/PLAN.json.
Prints one row a plan (measured, off, on, the errors, the modelled clock, the measured clock where the file has
one) and the median / max |error| of each."""
import argparse
import os
import re
import statistics as st
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def measured(path):
    out = {}
    for line in open(path):
        if path.endswith('.md'):
            f = [x.strip() for x in line.strip().strip('|').split('|')]
            if len(f) >= 3 and re.fullmatch(r'[a-z0-9.-]+', f[0]) and re.fullmatch(r'[0-9.]+', f[2]):
                out[f[0]] = (float(f[2]), None)
        else:
            f = line.rstrip('\n').split('\t')
            if len(f) > 4 and f[0] != 'plan' and not f[0].startswith('#'):
                out[f[0]] = (float(f[2]), float(f[4]))
    return out


def predict(sim, plan, cal, power, decode):
    env = dict(os.environ, TACOSIM_MODELS_DIR=os.path.join(ROOT, 'models'),
               TACOSIM_TOPOLOGIES_DIR=os.path.join(ROOT, 'topologies'))
    out = subprocess.run([sim, 'simulate', plan] + (['--calibration', cal] if cal else []) +
                         ['--decode', decode, '--prefill-power', power],
                         capture_output=True, text=True, env=env)
    if out.returncode:
        raise SystemExit(f"compare.py: {plan}: tacosim exit {out.returncode}: {out.stderr.strip()[-300:]}")
    ttft = float(re.search(r'time to first token\s+([0-9.]+) ms', out.stdout).group(1))
    m = re.search(r'prefill clock \(op power\).* at ([0-9]+) MHz', out.stdout + out.stderr)
    return ttft, (float(m.group(1)) if m else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--calibration', default='', help="default: each plan's (its GPU and transport)")
    ap.add_argument('--plans', required=True)
    ap.add_argument('--measured', required=True)
    ap.add_argument('--sim', default=os.path.join(ROOT, 'build/sim/tacosim'))
    ap.add_argument('--decode', default='graph')
    a = ap.parse_args()
    print(f"# {a.measured} against {a.calibration or 'the default calibration'} (tacosim simulate --decode {a.decode} --prefill-power off / on)")
    print("plan\tttft_ms\toff_ms\terr_off\ton_ms\terr_on\tmhz_model\tmhz_measured")
    errs = {'off': [], 'on': []}
    for name, (ttft, mhz) in sorted(measured(a.measured).items()):
        plan = os.path.join(a.plans, name + '.json')
        off, _ = predict(a.sim, plan, a.calibration, 'off', a.decode)
        on, fm = predict(a.sim, plan, a.calibration, 'on', a.decode)
        eo, en = 100 * (off / ttft - 1), 100 * (on / ttft - 1)
        errs['off'].append(eo), errs['on'].append(en)
        print(f"{name}\t{ttft:.1f}\t{off:.1f}\t{eo:+.1f}%\t{on:.1f}\t{en:+.1f}%\t{fm or 0:.0f}\t{mhz or 0:.0f}")
    for k, v in errs.items():
        print(f"# --prefill-power {k}: |error| median {st.median(map(abs, v)):.1f} %, max {max(map(abs, v)):.1f} % "
              f"({len(v)} plans)")


if __name__ == '__main__':
    main()

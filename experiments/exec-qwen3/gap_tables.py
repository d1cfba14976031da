#!/usr/bin/env python3
# gap_tables.py — the evidence of README.md's section "2026-12-07: the attention and output-layer misses", from
# files in the repository (run from its root, after building tacosim):
#   ops    per op kind, the simulator's price (`tacosim ops PLAN`) against a measured profile (the result's "ops",
#          rank 0's profiled iteration; .json or .json.gz), and their ratio
#   clock  per section of a `tacorun calibrate` run, the SM clock (median) and power (mean) that nvidia-smi sampled
#          while it ran (a logs.tgz of calibration/h100/run_gpu.sh: logs/calibrate.log, logs/clocks.csv)
# usage: gap_tables.py ops PLAN.json MEASURED.json[.gz] [--tacosim build/sim/tacosim] [--top 20]
#        gap_tables.py clock LOGS.tgz [--offset-s 1.5]
# --offset-s: seconds from the sampler's first sample to calibrate's clock zero (run_gpu.sh writes the machine
# block between the two; the GEMM and attention sections' medians move < 1 % over offsets 0-3 s).
import argparse, collections, gzip, io, json, re, statistics, subprocess, sys, tarfile
from datetime import datetime


def op_kind(name):
    return re.sub(r'^(layer\d+\.)?(mb\d+\.)?', '', name)


def ops(a):
    out = subprocess.run([a.tacosim, 'ops', a.plan], capture_output=True, text=True)
    if out.returncode:
        sys.exit('%s: tacosim ops failed: %s' % (a.plan, out.stderr.strip()[-400:]))
    pred = collections.Counter()
    for line in out.stdout.splitlines():
        if line.startswith('#'):
            continue
        f = line.split()
        k = re.sub(r'\.(dgrad|wgrad)$', '', f[0]).replace('loss', 'output_loss').replace('optimizer', 'optimizer.adamw')
        pred[k] += float(f[2])
    opener = gzip.open if a.measured.endswith('.gz') else open
    with opener(a.measured, 'rt') as fh:
        m = json.load(fh)
    if 'ops' not in m:
        sys.exit('%s: ops: missing (a result without its per-op profile)' % a.measured)
    meas, count = collections.Counter(), collections.Counter()
    for o in m['ops']:
        meas[op_kind(o['name'])] += o['dur_s'] * 1e3
        count[op_kind(o['name'])] += 1
    print('%-22s %6s %10s %10s %8s' % ('op', 'calls', 'pred ms', 'meas ms', 'meas/pred'))
    for k in sorted(pred, key=lambda k: -pred[k])[:a.top]:
        r = meas[k] / pred[k] if pred[k] else float('nan')
        print('%-22s %6d %10.2f %10.2f %8.3f' % (k, count[k], pred[k], meas[k], r))


def clock(a):
    with tarfile.open(a.logs) as t:
        log = t.extractfile('logs/calibrate.log').read().decode()
        csv = t.extractfile('logs/clocks.csv').read().decode()
    samples = []
    for line in csv.splitlines():
        f = [x.strip() for x in line.split(',')]
        if len(f) < 3:
            continue
        samples.append((datetime.strptime(f[0], '%Y/%m/%d %H:%M:%S.%f'), float(f[1]), float(f[2])))
    t0 = samples[0][0]
    rel = [((s - t0).total_seconds() - a.offset_s, c, p) for s, c, p in samples]
    start = {}
    for line in log.splitlines():
        m = re.match(r'\[\s*([\d.]+)s\] (.+?): (\d+ to measure|done)', line)
        if not m:
            continue
        if m.group(3) == 'done':
            if m.group(2) in start:
                b = start.pop(m.group(2))
                pts = [(c, p) for s, c, p in rel if b <= s < float(m.group(1))]
                if pts:
                    print('%-22s %6.1f-%6.1f s  %4d samples  SM clock median %5.0f MHz  power mean %4.0f W' % (
                        m.group(2), b, float(m.group(1)), len(pts), statistics.median(c for c, _ in pts),
                        statistics.mean(p for _, p in pts)))
        else:
            start[m.group(2)] = float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest='cmd', required=True)
    o = sub.add_parser('ops')
    o.add_argument('plan')
    o.add_argument('measured')
    o.add_argument('--tacosim', default='build/sim/tacosim', help='default: %(default)s')
    o.add_argument('--top', type=int, default=20, help='op kinds shown, largest predicted first (default: %(default)s)')
    c = sub.add_parser('clock')
    c.add_argument('logs')
    c.add_argument('--offset-s', type=float, default=1.5, help='default: %(default)s')
    a = ap.parse_args()
    (ops if a.cmd == 'ops' else clock)(a)


if __name__ == '__main__':
    main()

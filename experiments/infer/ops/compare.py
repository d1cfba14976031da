#!/usr/bin/env python3
"""compare.py MEASURED_DIR PREDICTED_DIR: per plan, each op's measured time (tacorun execute --ops-dir)
beside its predicted one (tacosim ops, predict.sh), the error, and each phase's totals; then, over all plans,
each op's summed time and error. Ops in only one list (the executor's last_rows) are shown with '-'."""
import os
import sys


def read(path):
    ops, totals = {}, {}
    for line in open(path):
        if line.startswith('# prefill total') or line.startswith('# decode total'):
            w = line.split()
            totals[w[1]] = float(w[3])
        if line.startswith('#') or not line.strip():
            continue
        name, count, ms = line.split()[:3]
        ops[name] = (int(count), float(ms))
    return ops, totals


def err(p, m):
    return '%+7.1f %%' % (100 * (p - m) / m) if m > 0 and p is not None else '      -'


def main():
    mdir, pdir = sys.argv[1], sys.argv[2]
    sums = {}
    for f in sorted(os.listdir(mdir)):
        if not f.endswith('.ops.txt') or not os.path.exists(os.path.join(pdir, f)):
            continue
        meas, mt = read(os.path.join(mdir, f))
        pred, pt = read(os.path.join(pdir, f))
        print('## %s' % f[:-8])
        print('%-28s %10s %10s %9s' % ('op', 'measured', 'predicted', 'error'))
        for name in sorted(set(meas) | set(pred), key=lambda n: -max(meas.get(n, (0, 0))[1], pred.get(n, (0, 0))[1])):
            m = meas.get(name, (0, None))[1]
            p = pred.get(name, (0, None))[1]
            s = sums.setdefault(name, [0.0, 0.0])
            s[0] += m or 0
            s[1] += p or 0
            print('%-28s %10s %10s %9s' % (name, '%.3f' % m if m is not None else '-', '%.3f' % p if p is not None else '-',
                                         err(p, m) if m is not None else '      -'))
        for ph in ('prefill', 'decode'):
            if ph in mt and ph in pt:
                print('%-28s %10.3f %10.3f %9s' % (ph + ' (sum of ops)', mt[ph], pt[ph], err(pt[ph], mt[ph])))
        print()
    print('## all plans, each op summed (ms)')
    for name in sorted(sums, key=lambda n: -sums[n][0]):
        m, p = sums[name]
        print('%-28s %10.3f %10.3f %9s' % (name, m, p, err(p, m) if m > 0 else '      -'))


if __name__ == '__main__':
    main()

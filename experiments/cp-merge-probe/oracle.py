#!/usr/bin/env python3
"""oracle.py FLOWLOG OUT: the CP ring steps of a phase log (probe.patch, TACOSIM_FLOWLOG) that no other
phase met on their nodes while they ran, as "t0 first_source t1" lines (TACOSIM_PROTO_ORACLE's input)."""
import bisect, collections, sys

import flowlog

rows = [(t0, t1, g, nodes, p[0], e[0][0], p[1]) for t0, t1, g, nodes, e, p in flowlog.read(sys.argv[1])]
oth = collections.defaultdict(list)
for r in rows:
    if r[2] != 7:
        for n in r[3]:
            oth[n].append((r[0], r[1]))
for n in oth:
    oth[n].sort()
maxlen = max(o[1] - o[0] for l in oth.values() for o in l)
k = 0
with open(sys.argv[2], 'w') as out:
    for r in rows:
        if r[2] != 7:
            continue
        t0, t1 = r[0], r[1]
        hit = False
        for n in r[3]:
            l = oth[n]
            lo, hi = bisect.bisect_left(l, (t0 - maxlen,)), bisect.bisect_left(l, (t1,))
            if any(o[0] < t1 and o[1] > t0 for o in l[lo:hi]):
                hit = True
                break
        if not hit:
            out.write('%s %s %s\n' % (r[4], r[5], r[6]))
            k += 1
print(k, 'lone CP ring steps')

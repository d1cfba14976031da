#!/usr/bin/env python3
"""lone_steps.py FLOWLOG: how many CP ring steps of a phase log (probe.patch, TACOSIM_FLOWLOG) another phase met
on their nodes (already running at the step's start, or starting inside it), and the durations of the lone ones."""
import sys, collections, bisect
import flowlog
rows=[(t0,t1,g,nodes,tuple(b for s,d,b in e)) for t0,t1,g,nodes,e,_ in flowlog.read(sys.argv[1])]
oth=collections.defaultdict(list); cpn=collections.defaultdict(list)
for i,r in enumerate(rows):
    for n in r[3]: (cpn if r[2]==7 else oth)[n].append((r[0],r[1],r[2]))
for n in oth: oth[n].sort()
maxlen=max(o[1]-o[0] for l in oth.values() for o in l)
cpov=0
for n,l in cpn.items():
    l.sort()
    for a,b in zip(l,l[1:]):
        if b[0]<a[1]: cpov+=1
print('CP phases overlapping another CP phase on a node:',cpov)
inside=before=both=tot=0; kinds=collections.Counter()
alone_d=collections.defaultdict(collections.Counter)
for r in rows:
    if r[2]!=7: continue
    t0,t1=r[0],r[1]; a=b=hit=False
    for n in r[3]:
        l=oth[n]; lo=bisect.bisect_left(l,(t0-maxlen,))
        hi=bisect.bisect_left(l,(t1,))
        for o in l[lo:hi]:
            if o[0]<t1 and o[1]>t0:
                hit=True; kinds[o[2]]+=1
                if o[0]>t0: a=True
                else: b=True
    if hit: tot+=1; inside+=a and not b; before+=b and not a; both+=a and b
    else: alone_d[r[4]][t1-t0]+=1
print('cp phases',sum(1 for r in rows if r[2]==7),'overlapping',tot,'other started inside only',inside,'already running only',before,'both',both, kinds)
for k,c in alone_d.items():
    print('bytes',k[0],'x',len(k),'phases',sum(c.values()),'distinct durations',len(c))
    for d,n in sorted(c.items())[:12]: print('   %.17g  %d'%(d,n))

#!/usr/bin/env python3
"""inside.py FLOWLOG: the phases that start on a node of a CP ring step while it runs, by kind."""
import sys, collections, bisect
import flowlog
rows=[(t0,t1,g,nodes,int(e[0][0]),int(e[0][1]),float(e[0][2])) for t0,t1,g,nodes,e,_ in flowlog.read(sys.argv[1])]
oth=collections.defaultdict(list)
for r in rows:
    if r[2]!=7:
        for n in r[3]: oth[n].append(r)
for n in oth: oth[n].sort()
maxlen=max(o[1]-o[0] for l in oth.values() for o in l)
c=collections.Counter(); lead=[]
for r in rows:
    if r[2]!=7: continue
    t0,t1=r[0],r[1]; rep=r[4]
    seen=set()
    for n in r[3]:
        l=oth[n]; lo=bisect.bisect_left(l,(t0-maxlen,)); hi=bisect.bisect_left(l,(t1,))
        for o in l[lo:hi]:
            if o[0]<t1 and o[1]>t0 and o[0]>t0 and id(o) not in seen:
                seen.add(id(o))
                kind='DP' if o[2]==1 else ('PP send by this rep' if o[4]==rep else ('PP send into this rep' if o[5]==rep else 'PP other'))
                c[kind]+=1; lead.append((o[0]-t0)/(t1-t0))
print(c); lead.sort(); print('start of the other flow into the CP step (fraction of its duration): min %.3f median %.3f max %.3f'%(lead[0],lead[len(lead)//2],lead[-1]))
tot=collections.Counter(r[2] for r in rows); print(tot)

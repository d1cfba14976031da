# cmpops.py NAME OPS.txt — per op kind, the simulator's price (OPS.txt, written by opcost) against the
# measured profile (measured/NAME.json, rank 0, profiled iteration). Run from the repository root.
import gzip,json,re,collections,sys
n=sys.argv[1]
def norm(k):
    k=re.sub(r'^(layer\d+\.)?(mb\d+\.)?','',k); k=re.sub(r'\.(dgrad|wgrad)$','',k)
    k=k.replace('output_loss','loss').replace('optimizer.adamw','optimizer')
    return k
P=collections.Counter()
for line in open(sys.argv[2] if len(sys.argv) > 2 else 'ops.txt'):
    name,us=line.rstrip().split('\t'); P[norm(name)]+=float(us)/1e3
m=json.load(open('experiments/validation/zoo/measured/%s.json'%n))
# the per-op profile: kept gzipped beside the result (tools/split_ops.py), or still inside it
ops=m['ops'] if 'ops' in m else json.load(gzip.open('experiments/validation/zoo/measured/%s.ops.json.gz'%n))
M=collections.Counter()
for o in ops: M[norm(o['name'])]+=o['dur_s']*1e3
# measured 'grads' = final norm?
tp=tm=0
for k in sorted(set(P)|set(M), key=lambda k:-M.get(k,0)):
    tp+=P.get(k,0); tm+=M.get(k,0)
    print('  %-20s pred %8.2f  meas %8.2f  diff %+7.2f'%(k,P.get(k,0),M.get(k,0),P.get(k,0)-M.get(k,0)))
print('total pred %.1f meas %.1f (iteration meas %.1f)'%(tp,tm,m['iteration_time_s']*1e3))

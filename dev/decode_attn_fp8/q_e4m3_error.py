# q_e4m3_error.py — what E4M3 operands would cost the FP8 mma route (dev/decode_attn_fp8/README.md):
# decode attention with q rounded to E4M3 (per-head scale amax / 448) before the scores, or the
# softmax weights P rounded to E4M3, against attention with both exact over the same E4M3 K and V.
# Plain Python (no packages): python3 dev/decode_attn_fp8/q_e4m3_error.py  (about a minute).
import random, math
random.seed(7)
def e4m3_round(x):
    if x==0: return 0.0
    s=-1 if x<0 else 1; a=abs(x)
    if a>=448: return s*448.0
    e=math.floor(math.log2(a)); e=max(e,-6)
    q=2.0**(e-3)
    return s*round(a/q)*q  # round half even close enough
def quant_vec(v):
    am=max(abs(x) for x in v); sc=am/448 if am>0 else 1
    return [e4m3_round(x/sc)*sc for x in v]
D=128
def attn(q,K,V,pround=False):
    s=[sum(a*b for a,b in zip(q,k))/math.sqrt(D) for k in K]
    m=max(s); w=[math.exp(x-m) for x in s]; S=sum(w); p=[x/S for x in w]
    if pround: p=quant_vec(p)
    return [sum(p[i]*V[i][d] for i in range(len(K))) for d in range(D)]
for L,qs in ((200,3.0),(1000,3.0),(1000,1.0)):
    num=den=num2=0
    for h in range(4):
        K=[quant_vec([random.uniform(-1,1) for _ in range(D)]) for _ in range(L)]
        V=[quant_vec([random.uniform(-1,1) for _ in range(D)]) for _ in range(L)]
        q=[random.uniform(-qs,qs) for _ in range(D)]
        o=attn(q,K,V); o8=attn(quant_vec(q),K,V); op=attn(q,K,V,True)
        num+=sum((a-b)**2 for a,b in zip(o,o8)); den+=sum(a*a for a in o); num2+=sum((a-b)**2 for a,b in zip(o,op))
    print(f"len {L} |q|<{qs}: q in E4M3 rel L2 {math.sqrt(num/den):.2e}; P in E4M3 rel L2 {math.sqrt(num2/den):.2e}")

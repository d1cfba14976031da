/* pqh_ref.h — plain-C float64 decode attention for dev_decode_attn_pqh: out = softmax(q . K^T
 * / sqrt(d)) . V over positions 0 .. len-1, query head h reading KV head h / (hl / kvl); K and
 * V given as floats [batch x kvl x max_seq x d] (BF16 values, or E4M3 codes x scale, both
 * exact in float), q [batch x hl x d] floats, out [batch x hl x d] doubles. */
#ifndef DEV_PQH_REF_H
#define DEV_PQH_REF_H

/* Returns 0, or -1 when out of memory. */
int dev_pqh_ref(const float *q, const float *k, const float *v, double *out, int batch, int hl, int kvl, int d,
                long long max_seq, long long len);

#endif

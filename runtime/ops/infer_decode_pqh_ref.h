/* infer_decode_pqh_ref.h — plain-C float64 decode attention, the reference of the kernel read
 * once per query head (infer_decode_pqh.h; dev/decode_attn_pqh checks it too): out =
 * softmax(q . K^T / sqrt(d)) . V over positions 0 .. len-1, query head h reading KV head h / (hl /
 * kvl); K and V given as floats [batch x kvl x max_seq x d] (BF16 values, or E4M3 codes x scale,
 * both exact in float), q [batch x hl x d] floats, out [batch x hl x d] doubles. */
#ifndef INFER_DECODE_PQH_REF_H
#define INFER_DECODE_PQH_REF_H

/* Returns 0, or -1 when out of memory. */
int infer_ref_decode_pqh(const float *q, const float *k, const float *v, double *out, int batch, int hl, int kvl,
                         int d, long long max_seq, long long len);

#endif

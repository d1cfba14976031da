/* attn_fp8_ref.h — plain-C float64 reference of decode attention over the FP8 KV cache
 * (infer_kv8.h layouts): out = softmax(q . K^T / sqrt(d)) . V over positions 0 .. len-1,
 * K and V the dequantized codes (E4M3 value x scale, exact in double), query head h reading
 * KV head h / (hl / kvl). q [batch x hl x d] floats, out [batch x hl x d] doubles. */
#ifndef DEV_ATTN_FP8_REF_H
#define DEV_ATTN_FP8_REF_H

/* Returns 0, or -1 when out of memory. */
int dev_attn_fp8_ref(const float *q, const unsigned char *kc, const unsigned char *vc, const float *ks, const float *vs,
                     double *out, int batch, int hl, int kvl, int d, long long max_seq, long long len);

#endif

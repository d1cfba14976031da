/* infer_ref.h — plain-C references of the inference kernels (infer_kernels.h),
 * in float, for the GPU checks (`tacorun execute --infer-check`) and the CPU
 * tests (tests/test_infer_ref.c). Same layouts as the kernels. */
#ifndef INFER_REF_H
#define INFER_REF_H

/* q [batch x hl x d], caches [batch x kvl x max_seq x d], out [batch x hl x d]:
 * out = softmax(q . K[0..len)^T / sqrt(d)) . V[0..len), query head h reading KV head h / (hl / kvl). */
void infer_ref_decode_attention(const float *q, const float *k_cache, const float *v_cache, float *out, int batch,
                                int hl, int kvl, int head_dim, long long max_seq, long long len);

/* Rotary embedding of one head vector x[d] at position pos, in place (pairs (i, i + d/2)). */
void infer_ref_rope(float *x, int head_dim, long long pos, double theta);

/* Causal attention of one head over seq positions (q, k, v [seq x d], out [seq x d]). */
void infer_ref_causal_attention(const float *q, const float *k, const float *v, float *out, int seq, int head_dim);

/* float <-> bf16 (round to nearest even), as the GPU converts. */
unsigned short infer_ref_to_bf16(float x);
float infer_ref_from_bf16(unsigned short h);

#endif

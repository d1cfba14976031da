/* infer_ref.h — plain-C references of the inference kernels (infer_kernels.h),
 * in float, for the GPU checks (`tacorun execute --infer-check`) and the CPU
 * tests (tests/test_infer_ref.c). Same layouts as the kernels. */
#ifndef INFER_REF_H
#define INFER_REF_H

/* q [batch x hl x d], caches [batch x kvl x max_seq x d], out [batch x hl x d]:
 * out = softmax(q . K[0..len)^T / sqrt(d)) . V[0..len), query head h reading KV head h / (hl / kvl),
 * accumulated in double, rounded to float once. The one reference of every decode attention kernel
 * (v1-v5, per query head; over the FP8 cache: the dequantized codes, infer_ref_kv8_dequantize).
 * Returns 0, or -1 when out of host memory. */
int infer_ref_decode_attention(const float *q, const float *k_cache, const float *v_cache, float *out, int batch,
                                int hl, int kvl, int head_dim, long long max_seq, long long len);

/* The FP8 KV cache's quantizer (infer_kv8.h) on one head vector x[d] (BF16
 * values): *scale = amax / 448, codes[i] = E4M3(x[i] * (448 / amax)), round to
 * nearest even, saturating (amax 0: scale 0, codes 0). The same float
 * operations as the kernel, so codes and scales are bit-equal. */
void infer_ref_kv8_quantize(const float *x, int d, unsigned char *codes, float *scale);
/* E4M3 (1-4-3, bias 7, no infinities, 0x7f/0xff NaN, largest 448): the
 * nearest code, ties to even, saturating as cvt.rn.satfinite; and back (exact). */
unsigned char infer_ref_e4m3_from_float(float x);
float infer_ref_e4m3_to_float(unsigned char c);
/* out[i] = E4M3 codes[i] as a float x scale. */
void infer_ref_kv8_dequantize(const unsigned char *codes, float scale, int d, float *out);

/* Rotary embedding of one head vector x[d] at position pos, in place (pairs (i, i + d/2)). */
void infer_ref_rope(float *x, int head_dim, long long pos, double theta);

/* Causal attention of one head over seq positions (q, k, v [seq x d], out [seq x d]). */
void infer_ref_causal_attention(const float *q, const float *k, const float *v, float *out, int seq, int head_dim);

/* Greedy sampling (infer_argmax): logits tp blocks of [batch x vocab_local]
 * BF16; token[b] = the global index (shard r, word j: r x vocab_local + j) of
 * the largest of the first vocab_valid words; ties: the smallest index; NaN
 * never chosen; 0 if every word is NaN. */
void infer_ref_argmax(const unsigned short *logits, int *token, int batch, int tp, long long vocab_local,
                      long long vocab_valid);

/* float <-> bf16 (round to nearest even), as the GPU converts. */
unsigned short infer_ref_to_bf16(float x);
float infer_ref_from_bf16(unsigned short h);

#endif

/* moe_route.h — the token routing of a mixture-of-experts layer on one GPU:
 * the router's top-k, the permutation of token rows into expert order and
 * its inverse (the weighted combine), forward and backward.
 *
 * Tokens t, hidden h, experts E, top k (k <= MOE_ROUTE_MAX_K, E <= MOE_ROUTE_MAX_E).
 * Rows are BF16 (uint16_t bit patterns), row-major, h a multiple of 8.
 *
 *   topk:       logits float [t x E] -> idx int32 [t x k], w float [t x k]:
 *               the k largest logits of each token in descending order (ties:
 *               the lower expert index first), w_j = e_j / (e_0 + ... + e_{k-1})
 *               with e_j = expf(l_j - l_max), summed in order j = 0..k-1. This
 *               is the softmax over all E renormalised over the chosen k (the
 *               E-wide denominator cancels), as Qwen3 and Mixtral route.
 *   map:        idx -> pos int32 [t x k] (the row of copy (token, j) in the
 *               permuted buffer), count int32 [E]: rows grouped by expert in
 *               expert order, inside an expert by token then j (stable).
 *   permute:    out[pos[i]] = x[i / k]                 for i < t k   (a copy)
 *   combine:    out[tok]    = bf16(sum_j w[tok k + j] * y[pos[tok k + j]])
 *               accumulated in FP32 from 0 in order j = 0..k-1 with fmaf;
 *               w == NULL: plain sums (acc = acc + y): the permutation's
 *               backward (dx = the sum of the k copies' gradients).
 *   combine_bwd: the combine's backward: dy[pos[i]] = bf16(w[i] * dout[i / k])
 *               and dw[i] = sum_c dout[i / k][c] * y[pos[i]][c] (FP32; the
 *               kernel's summation order is a tree, so dw matches the
 *               reference to a stated tolerance, not bit for bit).
 *   topk_bwd:   the top-k softmax's backward: dlogits bf16 [t x E], for
 *               token r and choice j: dlogits[r][idx_j] = bf16(w_j (dw_j - s))
 *               with s = sum_j w_j dw_j (FP32 from 0 with fmaf, j = 0..k-1),
 *               0 for the experts not chosen (the renormalised softmax has
 *               no gradient towards them). Bits equal to the reference.
 *
 * moe_*_ref (moe_route_ref.c, always built) is the plain-C reference; the
 * CUDA kernels (moe_route.cu) give the same bits except expf in topk (CUDA's
 * expf is within 2 ulp, glibc's within 1: w to 1e-6 relative) and dw. */
#ifndef MOE_ROUTE_H
#define MOE_ROUTE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MOE_ROUTE_MAX_K 16
#define MOE_ROUTE_MAX_E 1024

void moe_topk_ref(const float *logits, int t, int E, int k, int32_t *idx, float *w);
/* 0, or -1 when an index is outside [0, E). */
int moe_map_ref(const int32_t *idx, int t, int E, int k, int32_t *pos, int32_t *count);
void moe_permute_ref(const uint16_t *x, const int32_t *pos, int t, int k, int h, uint16_t *out);
void moe_combine_ref(const uint16_t *y, const int32_t *pos, const float *w, int t, int k, int h, uint16_t *out);
void moe_combine_bwd_ref(const uint16_t *dout, const uint16_t *y, const int32_t *pos, const float *w, int t, int k,
                         int h, uint16_t *dy, float *dw);
void moe_topk_bwd_ref(const int32_t *idx, const float *w, const float *dw, int t, int E, int k, uint16_t *dlogits);

/* The kernels on `stream` (a cudaStream_t; NULL: the default stream). All
 * pointers are device memory; map needs `scratch` of E + 1 int32. Return a
 * cudaError_t as int (0: launched). */
int moe_topk(const float *logits, int t, int E, int k, int32_t *idx, float *w, void *stream);
int moe_map(const int32_t *idx, int t, int E, int k, int32_t *pos, int32_t *count, int32_t *scratch, void *stream);
int moe_permute(const uint16_t *x, const int32_t *pos, int t, int k, int h, uint16_t *out, void *stream);
int moe_combine(const uint16_t *y, const int32_t *pos, const float *w, int t, int k, int h, uint16_t *out,
                void *stream);
int moe_combine_bwd(const uint16_t *dout, const uint16_t *y, const int32_t *pos, const float *w, int t, int k, int h,
                    uint16_t *dy, float *dw, void *stream);
int moe_topk_bwd(const int32_t *idx, const float *w, const float *dw, int t, int E, int k, uint16_t *dlogits,
                 void *stream);

#ifdef __cplusplus
}
#endif

#endif

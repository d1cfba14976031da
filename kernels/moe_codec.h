/* moe_codec.h — the mixture-of-experts token traffic fused with the TACO FP8
 * codec (taco_codec.h): permute + encode on the dispatch side, decode +
 * un-permute + weighted combine on the combine side.
 *
 * Shapes and routing as in moe_route.h: tokens t, hidden h, top k
 * (1 <= k <= MOE_ROUTE_MAX_K), x BF16 [t x h], pos int32 [t x k] from
 * moe_map (a permutation of 0 .. t k - 1: copy (token, j) goes to row
 * pos[token k + j] of the expert-ordered buffer).
 *
 * Encoded format: the permuted buffer [t k x h] (moe_permute's output) as ONE
 * TACO block of n = t k h elements (taco_codec.h), with h a multiple of the
 * group size G, so that every group lies inside one token row (token-wise
 * groups along the hidden dimension):
 *     codes of row r:   bytes [r h, (r + 1) h)
 *     scales of row r:  h / G pairs {s_a, s_q} (float) at byte t k h + r (h / G) 8
 * moe_codec_wire_bytes(t, k, h, G) = taco_wire_bytes(t k h, G) bytes in all.
 * The rows [a, b) of one expert (or of one destination rank) are two
 * contiguous pieces, codes and scales; put one after the other they are a
 * self-contained block of (b - a) h elements, so an all-to-all can ship them
 * as one message.
 *
 *   permute_encode: block = taco_encode(moe_permute(x, pos)), bit for bit
 *       (also the non-finite report: count is k times x's NaN/Inf elements,
 *       first_index the smallest index in the permuted buffer). Each token
 *       group is read and encoded once and its codes stored k times.
 *   decode_combine: out[token] = moe_combine(taco_decode(block) as BF16, pos, w),
 *       bit for bit: each of the k rows is decoded (one transform each),
 *       rounded to BF16 as taco_decode would store it, and accumulated in FP32
 *       with fmaf in order j = 0 .. k-1 (w == NULL: plain sums). out is BF16
 *       [t x h].
 *
 * moe_*_ref (moe_codec_ref.c, always built) are the plain-C references, made
 * of the codec's and the routing's reference functions. Bad arguments
 * (t < 1, k outside 1..MOE_ROUTE_MAX_K, h < G or not a multiple of G, bad
 * taco_params, NULL pointers, a pos entry outside [0, t k) for the
 * references) return -1 with a message in taco_last_error(). The CUDA kernels
 * (moe_codec.cu) take device pointers (16-byte aligned), launch on `stream`
 * (a cudaStream_t, NULL the default), give the references' bits, and trust
 * pos (not checked on the device). nf may be NULL.
 *
 * Not done here: the executor does not call these yet, and the expert-
 * parallel all-to-all across GPUs (which would carry these blocks) is not
 * written (kernels/RESULTS.md, "MoE codec"). */
#ifndef MOE_CODEC_H
#define MOE_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

size_t moe_codec_wire_bytes(int t, int k, int h, int group);

int moe_permute_encode_ref(const uint16_t *x, const int32_t *pos, int t, int k, int h, taco_params p, void *block,
                           taco_nonfinite *nf);
int moe_decode_combine_ref(const void *block, const int32_t *pos, const float *w, int t, int k, int h, taco_params p,
                           uint16_t *out);

int moe_permute_encode(const uint16_t *x, const int32_t *pos, int t, int k, int h, taco_params p, void *block,
                       taco_nonfinite *nf, void *stream);
int moe_decode_combine(const void *block, const int32_t *pos, const float *w, int t, int k, int h, taco_params p,
                       uint16_t *out, void *stream);

/* The argument checks both sides share: 0, or -1 with taco_last_error(). */
int moe_codec_check_args(const void *in, const int32_t *pos, int t, int k, int h, taco_params p, const void *out);

#ifdef __cplusplus
}
#endif

#endif

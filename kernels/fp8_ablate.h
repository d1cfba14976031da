/* fp8_ablate.h — the FP8 codecs of the TACO ablation (issue 25), used only by
 * `tacorun train --tp-emulate` (not by the shipping collectives):
 *
 *   FP8_ABLATE_GROUP     per group of G: absmax scale, no Hadamard
 *                        s = absmax(x) / fp8_max, q = fp8(x * (1/s)), x' = q s
 *   FP8_ABLATE_HADAMARD  per group of G: orthonormal Hadamard, then absmax
 *                        scale (TACO without its adaptive scale s_a)
 *                        y = H x * rsqrt(G), s = absmax(y) / fp8_max,
 *                        q = fp8(y * (1/s)), x' = H (q s) * rsqrt(G)
 *
 * s is clamped to [1e-12, 1e6] as TACO's s_q is; a group holding NaN or Inf
 * encodes with scale NaN (its decode is NaN, which the training run stops on).
 * Note: TACO's adaptive scale s_a multiplies y before the absmax scale is
 * taken, so in exact arithmetic it cancels; HADAMARD differs from TACO by
 * float rounding and by TACO's clamps of s_a only.
 *
 * Block of n elements: ngroups * G codes (the last group zero-padded), then
 * ngroups float scales; fp8_ablate_block_bytes(n, G) (a multiple of 16 when
 * ngroups is even).
 * decode_sum: y = sum over k blocks (block i at in + i * block_bytes), FP32
 * accumulation fmaf(q, s, acc) in block order (the Hadamard variant sums in
 * the transformed domain and transforms once, as TACO's decode-sum does).
 * decode_sum_encode: the same sum in FP32, encoded again.
 * The plain-C reference (fp8_ablate_ref.c) computes the same functions with
 * the same per-group code (fp8_ablate_group.h), bit for bit. */
#ifndef FP8_ABLATE_H
#define FP8_ABLATE_H

#include <stddef.h>
#include <stdint.h>

#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { FP8_ABLATE_GROUP = 0, FP8_ABLATE_HADAMARD = 1 } fp8_ablate_kind;

static inline size_t fp8_ablate_block_bytes(size_t n, int group) {
  size_t g = taco_groups(n, group);
  return g * (size_t)group + g * 4;
}

/* Plain C (x, y in dt: BF16 or FP32). */
void fp8_ablate_ref_encode(fp8_ablate_kind k, const void *x, taco_dtype dt, size_t n, taco_params p, void *block);
void fp8_ablate_ref_decode_sum(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p, void *y,
                               taco_dtype dt);
void fp8_ablate_ref_decode_sum_encode(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p,
                                      void *block);

/* CUDA (stream: a cudaStream_t); 0, or -1 with fp8_ablate_last_error(). */
int fp8_ablate_encode(fp8_ablate_kind k, const void *x, taco_dtype dt, size_t n, taco_params p, void *block,
                      void *stream);
int fp8_ablate_decode_sum(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p, void *y,
                          taco_dtype dt, void *stream);
int fp8_ablate_decode_sum_encode(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p,
                                 void *block, void *stream);
const char *fp8_ablate_last_error(void);

#ifdef __cplusplus
}
#endif
#endif

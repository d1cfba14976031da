/* fp8_ablate_group.h — one group of the ablation codecs (fp8_ablate.h), as
 * inline code compiled both by the plain-C reference and by the CUDA kernels
 * (explicitly rounded operations on the device, no contraction on the host),
 * so the two compute the same bits. Internal to fp8_ablate*. */
#ifndef FP8_ABLATE_GROUP_H
#define FP8_ABLATE_GROUP_H

#include <math.h>

#include "fp8_ablate.h"
#include "taco_fp8.h"

#ifdef __CUDA_ARCH__
#define FA_MUL(a, b) __fmul_rn((a), (b))
#define FA_ADD(a, b) __fadd_rn((a), (b))
#define FA_SUB(a, b) __fsub_rn((a), (b))
#define FA_DIV(a, b) __fdiv_rn((a), (b))
#else
#define FA_MUL(a, b) ((a) * (b))
#define FA_ADD(a, b) ((a) + (b))
#define FA_SUB(a, b) ((a) - (b))
#define FA_DIV(a, b) ((a) / (b))
#endif

#define FA_MAX_GROUP 512

static TACO_HD inline size_t fa_groups(size_t n, int g) { return (n + (size_t)g - 1) / (size_t)g; }
static TACO_HD inline size_t fa_block_bytes(size_t n, int g) { return fa_groups(n, g) * ((size_t)g + 4); }

static TACO_HD inline float fa_fp8_max(taco_fp8 f) { return f == TACO_FP8_E4M3 ? 448.0f : 57344.0f; }
static TACO_HD inline uint8_t fa_fp8_code(float x, taco_fp8 f) {
  return f == TACO_FP8_E4M3 ? taco_fp8_e4m3_from_float(x) : taco_fp8_e5m2_from_float(x);
}
static TACO_HD inline float fa_fp8_value(uint8_t c, taco_fp8 f) {
  return f == TACO_FP8_E4M3 ? taco_fp8_decode(c, TACO_E4M3_MBITS, TACO_E4M3_BIAS, 1)
                            : taco_fp8_decode(c, TACO_E5M2_MBITS, TACO_E5M2_BIAS, 0);
}
/* rsqrt(G) as an exact float constant of the power of two's root */
static TACO_HD inline float fa_rsqrt_group(int g) {
  switch (g) {
  case 32: return 0.17677669529663687f;
  case 64: return 0.125f;
  case 128: return 0.08838834764831845f;
  case 256: return 0.0625f;
  default: return 0.04419417382415922f; /* 512 */
  }
}
/* In-place unnormalized Walsh-Hadamard transform, stages h = 1, 2, .. g/2. */
static TACO_HD inline void fa_fwht(float *v, int g) {
  for (int h = 1; h < g; h *= 2)
    for (int i = 0; i < g; i += 2 * h)
      for (int j = i; j < i + h; j++) {
        float a = v[j], b = v[j + h];
        v[j] = FA_ADD(a, b), v[j + h] = FA_SUB(a, b);
      }
}
/* Encodes g values (zero-padded by the caller) in place of v: codes q, scale *s. */
static TACO_HD inline void fa_encode_group(fp8_ablate_kind k, float *v, int g, taco_fp8 f, uint8_t *q, float *s) {
  int bad = 0;
  if (k == FP8_ABLATE_HADAMARD) {
    fa_fwht(v, g);
    float r = fa_rsqrt_group(g);
    for (int i = 0; i < g; i++) v[i] = FA_MUL(v[i], r);
  }
  float amax = 0.0f;
  for (int i = 0; i < g; i++) {
    float a = fabsf(v[i]);
    bad |= !(a <= 3.40282347e38f); /* NaN or Inf */
    amax = a > amax ? a : amax;
  }
  float sc = FA_DIV(amax, fa_fp8_max(f));
  sc = sc < 1e-12f ? 1e-12f : sc > 1e6f ? 1e6f : sc;
  if (bad) sc = taco_bits_float(0x7FC00000u);
  float inv = FA_DIV(1.0f, sc);
  for (int i = 0; i < g; i++) q[i] = bad ? 0 : fa_fp8_code(FA_MUL(v[i], inv), f);
  *s = sc;
}
/* acc[i] = fmaf(q_i, s, acc[i]) (in the transformed domain for HADAMARD) */
static TACO_HD inline void fa_decode_acc(const uint8_t *q, float s, int g, taco_fp8 f, float *acc) {
  for (int i = 0; i < g; i++) acc[i] = fmaf(fa_fp8_value(q[i], f), s, acc[i]);
}
/* Finishes a decode-sum: back from the transformed domain for HADAMARD. */
static TACO_HD inline void fa_decode_finish(fp8_ablate_kind k, float *acc, int g) {
  if (k != FP8_ABLATE_HADAMARD) return;
  fa_fwht(acc, g);
  float r = fa_rsqrt_group(g);
  for (int i = 0; i < g; i++) acc[i] = FA_MUL(acc[i], r);
}
static TACO_HD inline float fa_load(const void *x, taco_dtype dt, size_t i) {
  return dt == TACO_DTYPE_BF16 ? taco_bf16_to_float(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}
static TACO_HD inline void fa_store(void *y, taco_dtype dt, size_t i, float v) {
  if (dt == TACO_DTYPE_BF16) ((uint16_t *)y)[i] = taco_bf16_from_float(v);
  else ((float *)y)[i] = v;
}

/* Group gi of a block of n elements (ngroups groups): codes and scale. */
static TACO_HD inline uint8_t *fa_codes(void *block, size_t gi, int g) { return (uint8_t *)block + gi * (size_t)g; }
static TACO_HD inline float *fa_scale(void *block, size_t n, int g, size_t gi) {
  return (float *)((uint8_t *)block + fa_groups(n, g) * (size_t)g) + gi;
}

/* The three block functions for one group gi (shared by reference and kernels). */
static TACO_HD inline void fa_encode_one(fp8_ablate_kind k, const void *x, taco_dtype dt, size_t n, taco_params p,
                                         void *block, size_t gi) {
  float v[FA_MAX_GROUP];
  const int g = p.group;
  for (int i = 0; i < g; i++) {
    size_t j = gi * (size_t)g + (size_t)i;
    v[i] = j < n ? fa_load(x, dt, j) : 0.0f;
  }
  float s;
  fa_encode_group(k, v, g, p.fp8, fa_codes(block, gi, g), &s);
  *fa_scale(block, n, g, gi) = s;
}
static TACO_HD inline void fa_sum_one(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p,
                                      size_t gi, float *acc) {
  const int g = p.group;
  const size_t bb = fa_block_bytes(n, g);
  for (int i = 0; i < g; i++) acc[i] = 0.0f;
  for (int b = 0; b < nblocks; b++) {
    void *blk = (uint8_t *)in + (size_t)b * bb;
    fa_decode_acc(fa_codes(blk, gi, g), *fa_scale(blk, n, g, gi), g, p.fp8, acc);
  }
  fa_decode_finish(k, acc, g);
}
static TACO_HD inline void fa_decode_sum_one(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p,
                                             void *y, taco_dtype dt, size_t gi) {
  float acc[FA_MAX_GROUP];
  fa_sum_one(k, in, nblocks, n, p, gi, acc);
  for (int i = 0; i < p.group; i++) {
    size_t j = gi * (size_t)p.group + (size_t)i;
    if (j < n) fa_store(y, dt, j, acc[i]);
  }
}
static TACO_HD inline void fa_decode_sum_encode_one(fp8_ablate_kind k, const void *in, int nblocks, size_t n,
                                                    taco_params p, void *block, size_t gi) {
  float acc[FA_MAX_GROUP];
  fa_sum_one(k, in, nblocks, n, p, gi, acc);
  for (int i = 0; i < p.group; i++)
    if (gi * (size_t)p.group + (size_t)i >= n) acc[i] = 0.0f; /* the padding stays zero */
  float s;
  fa_encode_group(k, acc, p.group, p.fp8, fa_codes(block, gi, p.group), &s);
  *fa_scale(block, n, p.group, gi) = s;
}

#endif

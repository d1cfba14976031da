/* taco_ref.h — plain-C reference of the TACO codec, the baselines it is
 * compared with, error metrics and test distributions.
 *
 * The reference computes the same function as the CUDA kernels, in the same
 * floating-point order, so the GPU output can be compared bit for bit:
 *   - a group of G elements is split over T = G/32 "lanes" of 32 elements;
 *     lane t holds chunks c = 0..3 of 8 consecutive elements starting at
 *     (c*T + t)*8;
 *   - sum of squares: each lane accumulates fmaf(x, x, acc) over its elements in
 *     increasing index, then lanes combine by xor-butterfly (m = 1, 2, .. T/2);
 *   - s_a = fp8_max * (1 / sqrtf(sum * (1/G) + 1e-6)), clamped to [1e-3, 1e3];
 *     m = s_a * rsqrt(G) (rsqrt(G) a float constant);
 *   - usual case (sum of squares <= TACO_PRESCALE_ABOVE): y = H x by the fast
 *     Walsh-Hadamard transform, stages h = 1, 2, .. G/2 in that order,
 *     (a, b) -> (a + b, a - b); s_q = (absmax(y) * m) / fp8_max clamped to
 *     [1e-12, 1e6]; q = fp8(y * (m * (1/s_q))). The transform is linear, so
 *     scaling after it is the same function, with one multiply per element;
 *   - groups above TACO_PRESCALE_ABOVE (|x| near FLT_MAX / G could overflow the
 *     transform) scale first: y = H (x * m); s_q = absmax(y) / fp8_max clamped;
 *     q = fp8(y * (1/s_q));
 *   - decode: d = s_q * (rsqrt(G) / s_a) (0 when s_a == 0), acc = fmaf(q, d, acc)
 *     over the k blocks in block order (acc starts at 0), then the same
 *     transform: decode-sum adds before the (linear) transform, so one
 *     transform serves all k blocks;
 *   - decode-sum-encode (default, "direct"): for a whole group, acc above is
 *     the sum in the Hadamard domain (x = H acc), so it is re-encoded with no
 *     transform: sum of squares = G * (sum of squares of acc, in the lane order
 *     above), y_i = acc_i * G (both exact scalings by a power of two), then the
 *     encode steps after the transform, with y (times m when prescaled). The
 *     zero-padded last group is decoded (one transform), its padding zeroed and
 *     encoded as above ("transform", the function of the first version, which
 *     taco_ref_decode_sum_encode_transform keeps for all groups). The two differ
 *     by float rounding only: direct is not bit-equal to encode(decode-sum).
 * Groups holding NaN or Inf encode as zero codes with scales {0, 0} and decode
 * to zeros; they are counted in taco_nonfinite. */
#ifndef TACO_REF_H
#define TACO_REF_H

#include <stddef.h>
#include <stdint.h>

#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

float taco_fp8_max(taco_fp8 f);
uint8_t taco_fp8_from_float(float x, taco_fp8 f);
float taco_fp8_to_float(uint8_t code, taco_fp8 f);
/* rsqrt(G) as the float constant both implementations use */
float taco_rsqrt_group(int group);
#define TACO_PRESCALE_ABOVE 1e30f

/* In-place orthogonal (unnormalized) Walsh-Hadamard transform of v[0..g). */
void taco_ref_fwht(float *v, int g);

/* Encode/decode one group (g values, already zero-padded). */
void taco_ref_encode_group(const float *x, int g, taco_fp8 f, uint8_t *q, float *s_a, float *s_q);
void taco_ref_decode_group_acc(const uint8_t *q, float s_a, float s_q, int g, taco_fp8 f, float *acc);

/* Whole blocks, same layout as taco_codec.h. Return 0, or -1 on bad params. */
int taco_ref_encode(const void *x, taco_dtype dt, size_t n, taco_params p, void *block, taco_nonfinite *nf);
int taco_ref_decode(const void *block, size_t n, taco_params p, void *y, taco_dtype dt);
int taco_ref_decode_sum(const void *in, int k, size_t n, taco_params p, void *y, taco_dtype dt);
int taco_ref_decode_sum_encode(const void *in, int k, size_t n, taco_params p, void *block);
/* the first version's decode-sum-encode: encode(decode-sum) exactly (TACO_DSE_TRANSFORM) */
int taco_ref_decode_sum_encode_transform(const void *in, int k, size_t n, taco_params p, void *block);
/* Encode of one whole group from its Hadamard-domain sum acc (decode-sum-encode, direct). */
void taco_ref_encode_group_transformed(const float *acc, int g, taco_fp8 f, uint8_t *q, float *s_a, float *s_q);

/* CAAT-Net references (caat_ref.c). */
void caat_ref_gather_shared(const void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, void *out);
void caat_ref_scatter_shared(const void *in, taco_dtype dt, size_t rows, size_t cols, size_t shared, void *x);
void caat_ref_scale_private(void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, float scale);

/* Codecs compared in the quality table: encode then decode x into y (FP32). */
typedef enum {
  TACO_CODEC_FP8_TENSOR,   /* one absmax scale for the whole tensor */
  TACO_CODEC_FP8_GROUP,    /* absmax scale per group of G */
  TACO_CODEC_FP8_HADAMARD, /* per group: Hadamard, then absmax scale */
  TACO_CODEC_TACO,         /* adaptive scale + Hadamard + dual scale (the codec above) */
  TACO_CODEC_COUNT
} taco_codec_kind;
const char *taco_codec_name(taco_codec_kind k);
int taco_ref_roundtrip(taco_codec_kind k, const float *x, size_t n, taco_params p, float *y);

typedef struct {
  double rel_l2;  /* ||y - x|| / ||x|| */
  double snr_db;  /* 20 log10(||x|| / ||y - x||) */
  double max_abs; /* max |y - x| */
} taco_error_stats;
void taco_error_measure(const float *x, const float *y, size_t n, taco_error_stats *out);

/* Test tensors [rows x cols] (cols = hidden), deterministic for a seed. */
typedef enum {
  TACO_DIST_GAUSSIAN,  /* N(0, 1) */
  TACO_DIST_NEAR_ZERO, /* N(0, 1e-3^2) */
  TACO_DIST_STUDENT3,  /* Student-t, nu = 3 */
  TACO_DIST_OUTLIERS,  /* N(0, 1) with 1% of the channels (columns) x100 */
  TACO_DIST_COUNT
} taco_dist;
const char *taco_dist_name(taco_dist d);
void taco_fill_dist(float *x, size_t rows, size_t cols, taco_dist d, uint64_t seed);
/* splitmix64-based generator the tests share */
typedef struct {
  uint64_t s;
} taco_rng;
uint64_t taco_rng_next(taco_rng *r);
double taco_rng_uniform(taco_rng *r); /* (0, 1) */
double taco_rng_normal(taco_rng *r);

#ifdef __cplusplus
}
#endif
#endif

/* taco_fp8.h — FP8 (E4M3, E5M2) and BF16 conversions in plain C.
 *
 * float -> FP8 rounds to nearest even and saturates to the largest finite
 * value, exactly as CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) does
 * (cvt.rn.satfinite on sm_89+): NaN -> 0x7F, +-Inf -> +-max, values below half
 * the smallest subnormal -> signed zero. FP8 -> float is exact.
 * float -> BF16 rounds to nearest even (NaN stays NaN).
 *
 * Everything here is static inline and also compiles as CUDA device code, so
 * the GPU test can compare the hardware conversion with this one over all
 * 2^32 floats. */
#ifndef TACO_FP8_H
#define TACO_FP8_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define TACO_HD __host__ __device__
#else
#define TACO_HD
#endif

static TACO_HD inline uint32_t taco_float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static TACO_HD inline float taco_bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Formats: mantissa bits, exponent bias, code of the largest finite magnitude. */
#define TACO_E4M3_MBITS 3
#define TACO_E4M3_BIAS 7
#define TACO_E4M3_MAXCODE 0x7E /* 448 */
#define TACO_E5M2_MBITS 2
#define TACO_E5M2_BIAS 15
#define TACO_E5M2_MAXCODE 0x7B /* 57344 */

static TACO_HD inline uint8_t taco_fp8_round(float x, int mbits, int bias, int maxcode) {
  uint32_t bits = taco_float_bits(x);
  uint8_t sign = (uint8_t)((bits >> 31) << 7);
  uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return 0x7F; /* NaN: canonical, unsigned */
  if (mag == 0x7F800000u) return (uint8_t)(sign | maxcode);
  int fexp = (int)(mag >> 23);
  if (fexp == 0) return sign; /* float subnormals are far below FP8's range */
  int e = fexp - 127;         /* unbiased binade of x */
  uint32_t m = (mag & 0x7FFFFFu) | 0x800000u; /* x = m * 2^(e-23) */
  /* FP8 spacing in this binade: 2^(e - mbits) for normals, fixed below. */
  int min_normal_exp = 1 - bias;
  int ulp_exp = (e >= min_normal_exp ? e : min_normal_exp) - mbits;
  int shift = 23 + ulp_exp - e; /* x / ulp = m >> shift, always >= 20 here */
  uint32_t n;
  if (shift >= 32) {
    n = 0;
  } else {
    n = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (n & 1u))) n++;
  }
  long code;
  if (e >= min_normal_exp) /* n in [2^mbits, 2^(mbits+1)]; a carry moves to the next binade */
    code = ((long)(e + bias) << mbits) + (long)n - (1L << mbits);
  else
    code = (long)n; /* subnormal; n == 2^mbits is the smallest normal */
  if (code > maxcode) code = maxcode;
  return (uint8_t)(sign | (uint8_t)code);
}

static TACO_HD inline uint8_t taco_fp8_e4m3_from_float(float x) {
  return taco_fp8_round(x, TACO_E4M3_MBITS, TACO_E4M3_BIAS, TACO_E4M3_MAXCODE);
}
static TACO_HD inline uint8_t taco_fp8_e5m2_from_float(float x) {
  return taco_fp8_round(x, TACO_E5M2_MBITS, TACO_E5M2_BIAS, TACO_E5M2_MAXCODE);
}

static TACO_HD inline float taco_fp8_decode(uint8_t code, int mbits, int bias, int is_e4m3) {
  int sign = code >> 7, ebits = is_e4m3 ? 4 : 5;
  int efield = (code >> mbits) & ((1 << ebits) - 1), mfield = code & ((1 << mbits) - 1);
  float v;
  if (is_e4m3 && efield == 15 && mfield == 7) {
    v = taco_bits_float(0x7FC00000u);
  } else if (!is_e4m3 && efield == 31) {
    v = mfield ? taco_bits_float(0x7FC00000u) : taco_bits_float(0x7F800000u);
  } else {
    /* value = (efield ? 2^mbits + mfield : mfield) * 2^(max(efield,1) - bias - mbits), exact */
    int significand = efield ? (1 << mbits) + mfield : mfield;
    int exp2 = (efield ? efield : 1) - bias - mbits;
    uint32_t scale_bits = (uint32_t)(exp2 + 127) << 23; /* exp2 in [-17, 12]: a normal float */
    v = (float)significand * taco_bits_float(scale_bits);
  }
  return sign ? -v : v;
}
static TACO_HD inline float taco_fp8_e4m3_to_float(uint8_t c) { return taco_fp8_decode(c, 3, 7, 1); }
static TACO_HD inline float taco_fp8_e5m2_to_float(uint8_t c) { return taco_fp8_decode(c, 2, 15, 0); }

static TACO_HD inline uint16_t taco_bf16_from_float(float x) {
  uint32_t u = taco_float_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static TACO_HD inline float taco_bf16_to_float(uint16_t h) { return taco_bits_float((uint32_t)h << 16); }

#endif

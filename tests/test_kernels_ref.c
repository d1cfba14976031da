/* test_kernels_ref.c — CPU tests of the TACO / CAAT-Net reference (CUnit). */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "taco_fp8.h"
#include "taco_ref.h"
#include "taco_reshape.h"

static const int groups[] = {32, 64, 128, 256, 512};
static const taco_fp8 fp8s[] = {TACO_FP8_E4M3, TACO_FP8_E5M2};

static int is_nan_code(uint8_t c, taco_fp8 f) {
  return f == TACO_FP8_E4M3 ? (c & 0x7F) == 0x7F : (c & 0x7F) > 0x7C;
}

/* Every one of the 256 codes: decode is exact, re-encoding gives the code back,
 * the finite codes are ordered, and each midpoint rounds to the even neighbour. */
static void test_fp8_all_codes(void) {
  for (int fi = 0; fi < 2; fi++) {
    taco_fp8 f = fp8s[fi];
    int maxcode = f == TACO_FP8_E4M3 ? 0x7E : 0x7B;
    CU_ASSERT_EQUAL(taco_fp8_to_float((uint8_t)maxcode, f), taco_fp8_max(f));
    for (int c = 0; c < 256; c++) {
      float v = taco_fp8_to_float((uint8_t)c, f);
      if (is_nan_code((uint8_t)c, f)) {
        CU_ASSERT(isnan(v));
        continue;
      }
      if (f == TACO_FP8_E5M2 && (c & 0x7F) == 0x7C) { /* E5M2 infinities saturate */
        CU_ASSERT(isinf(v));
        CU_ASSERT_EQUAL(taco_fp8_from_float(v, f), (uint8_t)((c & 0x80) | maxcode));
        continue;
      }
      CU_ASSERT_EQUAL(taco_fp8_from_float(v, f), (uint8_t)c);
    }
    for (int c = 0; c < maxcode; c++) { /* positive neighbours c, c+1 */
      float lo = taco_fp8_to_float((uint8_t)c, f), hi = taco_fp8_to_float((uint8_t)(c + 1), f);
      CU_ASSERT(lo < hi);
      float mid = (float)(((double)lo + (double)hi) / 2.0); /* exact: few significant bits */
      uint8_t even = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;
      CU_ASSERT_EQUAL(taco_fp8_from_float(mid, f), even);
      CU_ASSERT_EQUAL(taco_fp8_from_float(-mid, f), (uint8_t)(0x80 | even));
      CU_ASSERT_EQUAL(taco_fp8_from_float(nextafterf(mid, 0.0f), f), (uint8_t)c);
      CU_ASSERT_EQUAL(taco_fp8_from_float(nextafterf(mid, INFINITY), f), (uint8_t)(c + 1));
    }
    /* saturation, NaN, underflow */
    CU_ASSERT_EQUAL(taco_fp8_from_float(INFINITY, f), (uint8_t)maxcode);
    CU_ASSERT_EQUAL(taco_fp8_from_float(-INFINITY, f), (uint8_t)(0x80 | maxcode));
    CU_ASSERT_EQUAL(taco_fp8_from_float(FLT_MAX, f), (uint8_t)maxcode);
    CU_ASSERT_EQUAL(taco_fp8_from_float(taco_fp8_max(f) * 1.2f, f), (uint8_t)maxcode);
    CU_ASSERT_EQUAL(taco_fp8_from_float(NAN, f), 0x7F);
    float min_sub = taco_fp8_to_float(1, f);
    CU_ASSERT_EQUAL(taco_fp8_from_float(min_sub / 2.0f, f), 0x00); /* tie to even (zero) */
    CU_ASSERT_EQUAL(taco_fp8_from_float(-min_sub / 2.0f, f), 0x80);
    CU_ASSERT_EQUAL(taco_fp8_from_float(nextafterf(min_sub / 2.0f, 1.0f), f), 0x01);
    CU_ASSERT_EQUAL(taco_fp8_from_float(1e-40f, f), 0x00); /* float denormal */
  }
}

/* Random floats over all magnitudes: the result is the nearest code (brute force). */
static void test_fp8_nearest_bruteforce(void) {
  taco_rng r = {12345};
  for (int fi = 0; fi < 2; fi++) {
    taco_fp8 f = fp8s[fi];
    int maxcode = f == TACO_FP8_E4M3 ? 0x7E : 0x7B, failures = 0;
    for (int it = 0; it < 20000; it++) {
      float x = (float)(taco_rng_normal(&r) * pow(2.0, (double)(taco_rng_next(&r) % 40) - 20.0));
      double best = INFINITY;
      int best_code = 0;
      for (int c = 0; c <= maxcode; c++) {
        double d = fabs(fabs((double)x) - (double)taco_fp8_to_float((uint8_t)c, f));
        if (d < best || (d == best && !(c & 1))) best = d, best_code = c;
      }
      uint8_t want = (uint8_t)((x < 0 ? 0x80 : 0) | best_code);
      if (taco_fp8_from_float(x, f) != want) failures++;
    }
    CU_ASSERT_EQUAL(failures, 0);
  }
}

static void test_bf16_rounding(void) {
  CU_ASSERT_EQUAL(taco_bf16_from_float(1.0f), 0x3F80);
  /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0) */
  CU_ASSERT_EQUAL(taco_bf16_from_float(1.0f + 1.0f / 256.0f), 0x3F80);
  CU_ASSERT_EQUAL(taco_bf16_from_float(1.0f + 3.0f / 256.0f), 0x3F82);
  CU_ASSERT_EQUAL(taco_bf16_from_float(nextafterf(1.0f + 1.0f / 256.0f, 2.0f)), 0x3F81);
  CU_ASSERT(isnan(taco_bf16_to_float(taco_bf16_from_float(NAN))));
  CU_ASSERT_EQUAL(taco_bf16_from_float(-INFINITY), 0xFF80);
  for (int i = 0; i < 65536; i++) { /* every finite bf16 survives a round trip */
    float v = taco_bf16_to_float((uint16_t)i);
    if (!isnan(v)) CU_ASSERT_EQUAL(taco_bf16_from_float(v), (uint16_t)i);
  }
}

/* H H^T = G I: transforms of unit vectors are orthogonal with norm sqrt(G). */
static void test_hadamard_orthonormal(void) {
  for (int gi = 0; gi < 5; gi++) {
    int g = groups[gi];
    float *h = malloc(sizeof(float) * (size_t)g * (size_t)g);
    for (int i = 0; i < g; i++) {
      for (int j = 0; j < g; j++) h[i * g + j] = i == j ? 1.0f : 0.0f;
      taco_ref_fwht(h + i * g, g);
    }
    int bad = 0;
    for (int i = 0; i < g; i++)
      for (int j = 0; j < g; j++) {
        double dot = 0;
        for (int k = 0; k < g; k++) dot += (double)h[i * g + k] * h[j * g + k];
        if (dot != (i == j ? (double)g : 0.0)) bad++;
      }
    CU_ASSERT_EQUAL(bad, 0);
    /* and rsqrt(G) is 1/sqrt(G) to float precision */
    CU_ASSERT_DOUBLE_EQUAL(taco_rsqrt_group(g), 1.0 / sqrt(g), 1e-7);
    free(h);
  }
}

/* FP8 with 3 (E4M3) or 2 (E5M2) mantissa bits: relative rounding error up to
 * 2^-4 or 2^-3 per element, so the rms relative error of a group is below
 * about half of that; the bounds leave a margin of ~1.5x. */
static double rel_bound(taco_fp8 f) { return f == TACO_FP8_E4M3 ? 0.045 : 0.09; }

static void test_roundtrip_error_bounds(void) {
  const size_t rows = 64, cols = 1024, n = rows * cols;
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
  for (int d = 0; d < TACO_DIST_COUNT; d++) {
    taco_fill_dist(x, rows, cols, (taco_dist)d, 1000 + (uint64_t)d);
    for (int gi = 0; gi < 5; gi++)
      for (int fi = 0; fi < 2; fi++) {
        taco_params p = {groups[gi], fp8s[fi]};
        taco_error_stats st;
        CU_ASSERT_EQUAL_FATAL(taco_ref_roundtrip(TACO_CODEC_TACO, x, n, p, y), 0);
        taco_error_measure(x, y, n, &st);
        CU_ASSERT(st.rel_l2 < rel_bound(p.fp8));
        CU_ASSERT(st.rel_l2 > 0.0); /* it is a lossy codec: the measure is live */
        for (size_t i = 0; i < n; i++)
          if (!isfinite(y[i])) {
            CU_FAIL("non-finite output from finite input");
            break;
          }
      }
  }
  free(x);
  free(y);
}

/* Per-group scaling beats one scale per tensor when the scale varies over
 * more decades than FP8 spans; on outlier channels the Hadamard spreads an
 * outlier's rounding error over its group, so the largest error shrinks; TACO
 * quantizes on the same grid as group+Hadamard, so its error is the same. */
static void test_codec_ordering(void) {
  const size_t rows = 64, cols = 1024, n = rows * cols;
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
  taco_params p = {128, TACO_FP8_E4M3};
  taco_error_stats tensor, group, had, taco;
  taco_fill_dist(x, rows, cols, TACO_DIST_GAUSSIAN, 7);
  for (size_t i = 0; i < n; i++) x[i] *= powf(10.0f, (float)((i / 128) % 9) - 6.0f); /* 1e-6 .. 1e2 by group */
  taco_ref_roundtrip(TACO_CODEC_FP8_TENSOR, x, n, p, y);
  taco_error_measure(x, y, n, &tensor);
  taco_ref_roundtrip(TACO_CODEC_FP8_GROUP, x, n, p, y);
  taco_error_measure(x, y, n, &group);
  CU_ASSERT(group.rel_l2 < tensor.rel_l2);
  taco_fill_dist(x, rows, cols, TACO_DIST_OUTLIERS, 8);
  taco_ref_roundtrip(TACO_CODEC_FP8_GROUP, x, n, p, y);
  taco_error_measure(x, y, n, &group);
  taco_ref_roundtrip(TACO_CODEC_FP8_HADAMARD, x, n, p, y);
  taco_error_measure(x, y, n, &had);
  taco_ref_roundtrip(TACO_CODEC_TACO, x, n, p, y);
  taco_error_measure(x, y, n, &taco);
  CU_ASSERT(had.max_abs < group.max_abs);
  CU_ASSERT(taco.max_abs < group.max_abs);
  CU_ASSERT(fabs(taco.rel_l2 - had.rel_l2) <= 0.01 * had.rel_l2);
  free(x);
  free(y);
}

static void test_zero_groups_and_nonfinite(void) {
  for (int gi = 0; gi < 5; gi++) {
    int g = groups[gi];
    size_t n = (size_t)g * 6;
    taco_params p = {g, TACO_FP8_E4M3};
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *y0 = malloc(n * sizeof(float));
    uint8_t *blk = malloc(taco_wire_bytes(n, g)), *blk0 = malloc(taco_wire_bytes(n, g));
    taco_fill_dist(x, 6, (size_t)g, TACO_DIST_GAUSSIAN, 99 + (uint64_t)g);
    for (int i = 0; i < g; i++) x[(size_t)g + (size_t)i] = 0.0f; /* group 1: all zero */
    taco_nonfinite nf = {0, ~0ull};
    CU_ASSERT_EQUAL(taco_ref_encode(x, TACO_DTYPE_FP32, n, p, blk0, &nf), 0);
    CU_ASSERT_EQUAL(nf.count, 0);
    taco_ref_decode(blk0, n, p, y0, TACO_DTYPE_FP32);
    for (int i = 0; i < g; i++) CU_ASSERT_EQUAL(y0[(size_t)g + (size_t)i], 0.0f);
    /* group 3 gets a NaN and two infinities; group 4 one -inf */
    x[3 * (size_t)g + 5] = NAN;
    x[3 * (size_t)g + 1] = INFINITY;
    x[3 * (size_t)g + 7] = INFINITY;
    x[4 * (size_t)g + (size_t)g - 1] = -INFINITY;
    CU_ASSERT_EQUAL(taco_ref_encode(x, TACO_DTYPE_FP32, n, p, blk, &nf), 0);
    CU_ASSERT_EQUAL(nf.count, 4);
    CU_ASSERT_EQUAL(nf.first_index, 3 * (size_t)g + 1);
    const float *sc = (const float *)(blk + 6 * (size_t)g);
    CU_ASSERT_EQUAL(sc[6], 0.0f);
    CU_ASSERT_EQUAL(sc[7], 0.0f);
    taco_ref_decode(blk, n, p, y, TACO_DTYPE_FP32);
    for (size_t i = 0; i < n; i++) {
      size_t grp = i / (size_t)g;
      if (grp == 3 || grp == 4) {
        CU_ASSERT_EQUAL(y[i], 0.0f);
      } else {
        CU_ASSERT_EQUAL(y[i], y0[i]); /* other groups unaffected */
      }
    }
    free(x), free(y), free(y0), free(blk), free(blk0);
  }
}

static void test_denormals(void) {
  size_t n = 512;
  float x[512], y[512];
  for (size_t i = 0; i < n; i++) x[i] = ((i & 1) ? -1.0f : 1.0f) * 1e-40f * (float)(i % 7 + 1); /* float denormals */
  for (int fi = 0; fi < 2; fi++)
    for (int gi = 0; gi < 5; gi++) {
      taco_params p = {groups[gi], fp8s[fi]};
      uint8_t blk[512 + 8 * 16];
      taco_nonfinite nf = {0, ~0ull};
      CU_ASSERT_EQUAL(taco_ref_encode(x, TACO_DTYPE_FP32, n, p, blk, &nf), 0);
      CU_ASSERT_EQUAL(nf.count, 0);
      taco_ref_decode(blk, n, p, y, TACO_DTYPE_FP32);
      for (size_t i = 0; i < n; i++) {
        CU_ASSERT(isfinite(y[i]));
        CU_ASSERT(fabsf(y[i] - x[i]) <= 1e-38f);
      }
    }
  /* bf16 denormal inputs */
  uint16_t xb[256];
  for (int i = 0; i < 256; i++) xb[i] = (uint16_t)((i & 0x7F) | ((i & 1) << 15)); /* exponent 0 */
  uint8_t blk[256 + 8 * 8];
  float yb[256];
  taco_params p = {128, TACO_FP8_E4M3};
  CU_ASSERT_EQUAL(taco_ref_encode(xb, TACO_DTYPE_BF16, 256, p, blk, NULL), 0);
  taco_ref_decode(blk, 256, p, yb, TACO_DTYPE_FP32);
  for (int i = 0; i < 256; i++) CU_ASSERT(isfinite(yb[i]) && fabsf(yb[i]) < 1e-37f);
}

/* Groups with very large values are scaled before the transform, so it cannot
 * overflow. The scale clamps (s_a >= 1e-3, s_q <= 1e6) cap what the codec can
 * represent near 448e9 * sqrt(G): beyond that codes saturate, but the output
 * stays finite, and ordinary groups next to them are unaffected. */
static void test_huge_values(void) {
  size_t n = 4096;
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *y0 = malloc(n * sizeof(float));
  for (int gi = 0; gi < 5; gi++) {
    taco_params p = {groups[gi], TACO_FP8_E4M3};
    taco_fill_dist(x, 4, 1024, TACO_DIST_GAUSSIAN, 31);
    CU_ASSERT_EQUAL(taco_ref_roundtrip(TACO_CODEC_TACO, x, n, p, y0), 0);
    for (size_t i = 0; i < 512; i++) x[i] *= i < 256 ? 1e37f : 1e17f; /* above TACO_PRESCALE_ABOVE */
    CU_ASSERT_EQUAL(taco_ref_roundtrip(TACO_CODEC_TACO, x, n, p, y), 0);
    int finite = 1, same = 1;
    for (size_t i = 0; i < n; i++) {
      finite &= isfinite(y[i]) != 0;
      if (i >= 512) same &= y[i] == y0[i];
    }
    CU_ASSERT(finite);
    CU_ASSERT(same);
  }
  free(x);
  free(y);
  free(y0);
}

/* n not a multiple of G: the tail decodes like a zero-padded full group, and
 * the decoder writes exactly n elements. */
static void test_odd_sizes(void) {
  for (int gi = 0; gi < 5; gi++) {
    int g = groups[gi];
    size_t n = (size_t)g * 3 + 17, padded = (size_t)g * 4;
    taco_params p = {g, TACO_FP8_E5M2};
    float *x = calloc(padded, sizeof(float)), *y = malloc((n + 8) * sizeof(float)), *yp = malloc(padded * sizeof(float));
    uint8_t *b1 = malloc(taco_wire_bytes(n, g)), *b2 = malloc(taco_wire_bytes(padded, g));
    taco_fill_dist(x, 1, n, TACO_DIST_STUDENT3, 5);
    CU_ASSERT_EQUAL(taco_wire_bytes(n, g), taco_wire_bytes(padded, g));
    taco_ref_encode(x, TACO_DTYPE_FP32, n, p, b1, NULL);
    taco_ref_encode(x, TACO_DTYPE_FP32, padded, p, b2, NULL);
    CU_ASSERT_EQUAL(memcmp(b1, b2, taco_wire_bytes(n, g)), 0);
    for (int i = 0; i < 8; i++) y[n + (size_t)i] = 12345.0f;
    taco_ref_decode(b1, n, p, y, TACO_DTYPE_FP32);
    taco_ref_decode(b2, padded, p, yp, TACO_DTYPE_FP32);
    CU_ASSERT_EQUAL(memcmp(y, yp, n * sizeof(float)), 0);
    for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(y[n + (size_t)i], 12345.0f);
    free(x), free(y), free(yp), free(b1), free(b2);
  }
}

/* decode-sum is the sum of the decodes (up to float rounding of the order),
 * decode-sum-encode "transform" is encode(decode-sum) bit for bit, the default
 * "direct" one (no transform) differs from it by float rounding only and is
 * exactly it on the padded last group, and bf16 in/out paths agree. */
static void test_decode_sum(void) {
  int g = 128, k = 3;
  size_t n = 4096 + 77, wire = taco_wire_bytes(n, g);
  taco_params p = {g, TACO_FP8_E4M3};
  float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *sum = calloc(n, sizeof(float));
  uint8_t *blocks = malloc(wire * (size_t)k), *re1 = malloc(wire), *re2 = malloc(wire);
  uint16_t *yb = malloc(n * sizeof(uint16_t));
  for (int b = 0; b < k; b++) {
    taco_fill_dist(x, 1, n, TACO_DIST_GAUSSIAN, 40 + (uint64_t)b);
    taco_ref_encode(x, TACO_DTYPE_FP32, n, p, blocks + (size_t)b * wire, NULL);
    taco_ref_decode(blocks + (size_t)b * wire, n, p, y, TACO_DTYPE_FP32);
    for (size_t i = 0; i < n; i++) sum[i] += y[i];
  }
  CU_ASSERT_EQUAL(taco_ref_decode_sum(blocks, k, n, p, y, TACO_DTYPE_FP32), 0);
  double maxd = 0;
  for (size_t i = 0; i < n; i++) maxd = fmax(maxd, fabs((double)y[i] - sum[i]));
  CU_ASSERT(maxd < 1e-5);
  CU_ASSERT_EQUAL(taco_ref_decode_sum_encode_transform(blocks, k, n, p, re1), 0);
  taco_ref_encode(y, TACO_DTYPE_FP32, n, p, re2, NULL);
  CU_ASSERT_EQUAL(memcmp(re1, re2, wire), 0);
  {
    /* direct against transform: same function up to rounding */
    uint8_t *rd = malloc(wire);
    float *yd = malloc(n * sizeof(float)), *yt = malloc(n * sizeof(float));
    CU_ASSERT_EQUAL(taco_ref_decode_sum_encode(blocks, k, n, p, rd), 0);
    size_t ngroups = taco_groups(n, g), whole = n / (size_t)g, payload = ngroups * (size_t)g;
    const float *sd = (const float *)(rd + payload), *st = (const float *)(re1 + payload);
    size_t far_codes = 0, diff_codes = 0;
    for (size_t i = 0; i < whole * (size_t)g; i++) {
      /* position on the FP8 grid (codes are monotonic in magnitude within a sign) */
      int a = rd[i] & 0x80 ? -(rd[i] & 0x7F) : rd[i], b = re1[i] & 0x80 ? -(re1[i] & 0x7F) : re1[i];
      diff_codes += a != b;
      far_codes += abs(a - b) > 1; /* adjacent codes at most: one rounding step */
    }
    CU_ASSERT_EQUAL(far_codes, 0);
    CU_ASSERT(diff_codes <= whole * (size_t)g / 100); /* rounding flips codes rarely */
    for (size_t gi = 0; gi < whole; gi++) {
      CU_ASSERT(fabsf(sd[2 * gi] - st[2 * gi]) <= 1e-5f * st[2 * gi]);
      CU_ASSERT(fabsf(sd[2 * gi + 1] - st[2 * gi + 1]) <= 1e-5f * st[2 * gi + 1]);
    }
    /* the padded last group takes the transform path in both */
    CU_ASSERT_EQUAL(memcmp(rd + whole * (size_t)g, re1 + whole * (size_t)g, (size_t)g), 0);
    CU_ASSERT_EQUAL(memcmp(sd + 2 * whole, st + 2 * whole, 2 * sizeof(float)), 0);
    /* and both decode to the sum within the one-encode error of E4M3 */
    taco_ref_decode(rd, n, p, yd, TACO_DTYPE_FP32);
    taco_ref_decode(re1, n, p, yt, TACO_DTYPE_FP32);
    double e2d = 0, e2t = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) {
      e2d += ((double)yd[i] - y[i]) * ((double)yd[i] - y[i]);
      e2t += ((double)yt[i] - y[i]) * ((double)yt[i] - y[i]);
      s2 += (double)y[i] * y[i];
    }
    CU_ASSERT(sqrt(e2d / s2) < 0.04);
    CU_ASSERT(fabs(sqrt(e2d / s2) - sqrt(e2t / s2)) < 0.002);
    free(rd), free(yd), free(yt);
  }
  taco_ref_decode_sum(blocks, k, n, p, yb, TACO_DTYPE_BF16);
  int bad = 0;
  for (size_t i = 0; i < n; i++) bad += yb[i] != taco_bf16_from_float(y[i]);
  CU_ASSERT_EQUAL(bad, 0);
  CU_ASSERT_EQUAL(taco_ref_decode_sum(blocks, 0, n, p, y, TACO_DTYPE_FP32), -1);
  taco_params badp = {100, TACO_FP8_E4M3};
  CU_ASSERT_EQUAL(taco_ref_encode(x, TACO_DTYPE_FP32, n, badp, re1, NULL), -1);
  CU_ASSERT(strlen(taco_last_error()) > 0);
  free(x), free(y), free(sum), free(blocks), free(re1), free(re2), free(yb);
}

static void test_caat_ref(void) {
  size_t rows = 5, cols = 12, shared = 7;
  float x[60], orig[60], sh[35];
  for (int i = 0; i < 60; i++) x[i] = orig[i] = (float)i + 0.5f;
  caat_ref_gather_shared(x, TACO_DTYPE_FP32, rows, cols, shared, sh);
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < shared; c++) CU_ASSERT_EQUAL(sh[r * shared + c], orig[r * cols + c]);
  for (int i = 0; i < 35; i++) sh[i] *= -1.0f;
  caat_ref_scatter_shared(sh, TACO_DTYPE_FP32, rows, cols, shared, x);
  caat_ref_scale_private(x, TACO_DTYPE_FP32, rows, cols, shared, sqrtf(2.0f));
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < cols; c++) {
      float want = c < shared ? -orig[r * cols + c] : orig[r * cols + c] * sqrtf(2.0f);
      CU_ASSERT_EQUAL(x[r * cols + c], want);
    }
  uint16_t h[4] = {taco_bf16_from_float(1.0f), taco_bf16_from_float(2.0f), taco_bf16_from_float(3.0f),
                   taco_bf16_from_float(4.0f)};
  caat_ref_scale_private(h, TACO_DTYPE_BF16, 2, 2, 1, 2.0f);
  CU_ASSERT_EQUAL(taco_bf16_to_float(h[0]), 1.0f);
  CU_ASSERT_EQUAL(taco_bf16_to_float(h[1]), 4.0f);
  CU_ASSERT_EQUAL(taco_bf16_to_float(h[3]), 8.0f);
}

/* The reshaping search reports every candidate it measured and returns the
 * cheapest one within the error bound. Channels whose scales span 8 decades
 * (more than E4M3's range): groups along hidden mix them and the small ones
 * underflow, groups along tokens keep each channel to itself, so the
 * per-channel error favours the tokens axis. */
static void test_reshape(void) {
  size_t rows = 256, cols = 256;
  float *x = malloc(rows * cols * sizeof(float));
  taco_fill_dist(x, rows, cols, TACO_DIST_GAUSSIAN, 77);
  for (size_t i = 0; i < rows * cols; i++) x[i] *= powf(10.0f, (float)((i % cols) % 9) - 6.0f);
  const float *samples[1] = {x};
  taco_reshape_options o = {TACO_FP8_E4M3, TACO_METRIC_PER_CHANNEL, 0.04, 50.0, 3800.0, NULL, NULL};
  taco_reshape_choice best, all[TACO_RESHAPE_CANDIDATES];
  CU_ASSERT_EQUAL_FATAL(taco_reshape_choose(samples, 1, rows, cols, &o, &best, all), 0);
  double best_cost = INFINITY;
  for (int i = 0; i < TACO_RESHAPE_CANDIDATES; i++)
    if (all[i].rel_err <= o.max_rel_err && all[i].cost_us < best_cost) best_cost = all[i].cost_us;
  CU_ASSERT(isfinite(best_cost));
  CU_ASSERT_EQUAL(best.cost_us, best_cost);
  CU_ASSERT(best.rel_err <= o.max_rel_err);
  CU_ASSERT_EQUAL(best.axis, TACO_AXIS_TOKENS);
  for (int gi = 0; gi < 5; gi++) CU_ASSERT(all[5 + gi].rel_err < all[gi].rel_err);
  /* an unreachable bound falls back to the least error */
  o.max_rel_err = 1e-9;
  CU_ASSERT_EQUAL(taco_reshape_choose(samples, 1, rows, cols, &o, &best, all), 0);
  for (int i = 0; i < TACO_RESHAPE_CANDIDATES; i++) CU_ASSERT(best.rel_err <= all[i].rel_err);
  /* plain Gaussian data: every candidate is within bound, the cheapest wins (hidden axis, no transpose) */
  taco_fill_dist(x, rows, cols, TACO_DIST_GAUSSIAN, 78);
  o.max_rel_err = 0.04;
  o.metric = TACO_METRIC_POOLED;
  CU_ASSERT_EQUAL(taco_reshape_choose(samples, 1, rows, cols, &o, &best, all), 0);
  CU_ASSERT_EQUAL(best.axis, TACO_AXIS_HIDDEN);
  char buf[128];
  CU_ASSERT_EQUAL(taco_reshape_format(&best, TACO_FP8_E4M3, buf, sizeof buf), 0);
  CU_ASSERT(strstr(buf, "\"kind\": \"taco\"") != NULL);
  CU_ASSERT_EQUAL(taco_reshape_format(&best, TACO_FP8_E4M3, buf, 8), -1);
  CU_ASSERT_EQUAL(taco_reshape_choose(samples, 0, rows, cols, &o, &best, NULL), -1);
  free(x);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("kernels_ref", NULL, NULL);
  CU_add_test(s, "fp8: all 256 codes, midpoints, saturation", test_fp8_all_codes);
  CU_add_test(s, "fp8: nearest code by brute force", test_fp8_nearest_bruteforce);
  CU_add_test(s, "bf16 rounding", test_bf16_rounding);
  CU_add_test(s, "hadamard orthonormal", test_hadamard_orthonormal);
  CU_add_test(s, "roundtrip error bounds per distribution", test_roundtrip_error_bounds);
  CU_add_test(s, "codec ordering", test_codec_ordering);
  CU_add_test(s, "zero groups, NaN/Inf", test_zero_groups_and_nonfinite);
  CU_add_test(s, "denormals", test_denormals);
  CU_add_test(s, "odd sizes", test_odd_sizes);
  CU_add_test(s, "huge values", test_huge_values);
  CU_add_test(s, "decode-sum(-encode)", test_decode_sum);
  CU_add_test(s, "caat", test_caat_ref);
  CU_add_test(s, "reshape", test_reshape);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* taco_quality_ref.c — the baseline FP8 codecs the quality table compares
 * TACO with, error metrics, and the test distributions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "taco_internal.h"
#include "taco_ref.h"

const char *taco_codec_name(taco_codec_kind k) {
  switch (k) {
  case TACO_CODEC_FP8_TENSOR: return "fp8-tensor";
  case TACO_CODEC_FP8_GROUP: return "fp8-group";
  case TACO_CODEC_FP8_HADAMARD: return "fp8-group+hadamard";
  case TACO_CODEC_TACO: return "taco";
  default: return "?";
  }
}

static float quantize(float v, float inv_scale, float scale, taco_fp8 f) {
  return taco_fp8_to_float(taco_fp8_from_float(v * inv_scale, f), f) * scale;
}

/* absmax scaling of v[0..len) in place; a zero block stays zero */
static void absmax_roundtrip(float *v, size_t len, taco_fp8 f) {
  float absmax = 0.0f;
  for (size_t i = 0; i < len; i++) absmax = fmaxf(absmax, fabsf(v[i]));
  if (absmax == 0.0f) return;
  float scale = absmax / taco_fp8_max(f), inv = 1.0f / scale;
  for (size_t i = 0; i < len; i++) v[i] = quantize(v[i], inv, scale, f);
}

int taco_ref_roundtrip(taco_codec_kind k, const float *x, size_t n, taco_params p, float *y) {
  if (!taco_params_valid(p)) return TACO_FAIL("roundtrip: bad params (group %d)", p.group);
  int g = p.group;
  float r = taco_rsqrt_group(g), v[512];
  switch (k) {
  case TACO_CODEC_FP8_TENSOR:
    memcpy(y, x, n * sizeof(float));
    absmax_roundtrip(y, n, p.fp8);
    return 0;
  case TACO_CODEC_FP8_GROUP:
    memcpy(y, x, n * sizeof(float));
    for (size_t b = 0; b < n; b += (size_t)g) absmax_roundtrip(y + b, n - b < (size_t)g ? n - b : (size_t)g, p.fp8);
    return 0;
  case TACO_CODEC_FP8_HADAMARD:
    for (size_t b = 0; b < n; b += (size_t)g) {
      for (int i = 0; i < g; i++) v[i] = b + (size_t)i < n ? x[b + (size_t)i] : 0.0f;
      taco_ref_fwht(v, g);
      for (int i = 0; i < g; i++) v[i] *= r;
      absmax_roundtrip(v, (size_t)g, p.fp8);
      taco_ref_fwht(v, g);
      for (int i = 0; i < g && b + (size_t)i < n; i++) y[b + (size_t)i] = v[i] * r;
    }
    return 0;
  case TACO_CODEC_TACO: {
    uint8_t *block = malloc(taco_wire_bytes(n, g));
    if (!block) return TACO_FAIL("roundtrip: out of memory");
    int rc = taco_ref_encode(x, TACO_DTYPE_FP32, n, p, block, NULL);
    if (!rc) rc = taco_ref_decode(block, n, p, y, TACO_DTYPE_FP32);
    free(block);
    return rc;
  }
  default: return TACO_FAIL("roundtrip: unknown codec %d", (int)k);
  }
}

void taco_error_measure(const float *x, const float *y, size_t n, taco_error_stats *out) {
  double sx = 0.0, se = 0.0, maxabs = 0.0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)y[i] - (double)x[i];
    sx += (double)x[i] * (double)x[i];
    se += d * d;
    if (fabs(d) > maxabs || d != d) maxabs = fabs(d);
  }
  out->rel_l2 = sx > 0.0 ? sqrt(se / sx) : sqrt(se);
  out->snr_db = se > 0.0 ? 10.0 * log10(sx / se) : INFINITY;
  out->max_abs = maxabs;
}

/* ---- distributions ---- */

uint64_t taco_rng_next(taco_rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double taco_rng_uniform(taco_rng *r) { return ((double)(taco_rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

double taco_rng_normal(taco_rng *r) {
  double u1 = taco_rng_uniform(r), u2 = taco_rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

const char *taco_dist_name(taco_dist d) {
  switch (d) {
  case TACO_DIST_GAUSSIAN: return "gaussian";
  case TACO_DIST_NEAR_ZERO: return "near-zero(1e-3)";
  case TACO_DIST_STUDENT3: return "student-t(3)";
  case TACO_DIST_OUTLIERS: return "outlier-ch(1%x100)";
  default: return "?";
  }
}

void taco_fill_dist(float *x, size_t rows, size_t cols, taco_dist d, uint64_t seed) {
  taco_rng r = {seed};
  for (size_t i = 0; i < rows; i++)
    for (size_t j = 0; j < cols; j++) {
      double v = taco_rng_normal(&r);
      if (d == TACO_DIST_NEAR_ZERO) {
        v *= 1e-3;
      } else if (d == TACO_DIST_STUDENT3) {
        double a = taco_rng_normal(&r), b = taco_rng_normal(&r), c = taco_rng_normal(&r);
        v /= sqrt((a * a + b * b + c * c) / 3.0);
      } else if (d == TACO_DIST_OUTLIERS) {
        /* every 100th channel, at a seed-dependent offset, is an outlier channel */
        if ((j + (size_t)(seed % 100)) % 100 == 0) v *= 100.0;
      }
      x[i * cols + j] = (float)v;
    }
}

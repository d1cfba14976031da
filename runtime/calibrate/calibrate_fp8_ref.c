/* calibrate_fp8_ref.c — the FP8 GEMM's plain-C reference and error measure (see calibrate_fp8.h). */
#include "calibrate_fp8.h"

#include <math.h>

#include "taco_fp8.h"

static float uniform(uint64_t *s) { /* xorshift64*, in [-1, 1) */
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (float)((*s * 0x2545F4914F6CDD1DULL) >> 40) / 8388608.f - 1.f;
}

void calib_fp8_random_e4m3(uint8_t *q, size_t n, float amax, uint64_t *state) {
  for (size_t i = 0; i < n; i++) q[i] = taco_fp8_e4m3_from_float(amax * uniform(state));
}

void calib_fp8_gemm_ref(const uint8_t *A, float a_scale, const uint8_t *B, float b_scale, long long m, long long n,
                        long long k, double *C) {
  float lut[256]; /* every code's value (exact) */
  for (int c = 0; c < 256; c++) lut[c] = taco_fp8_e4m3_to_float((uint8_t)c);
  const double scale = (double)a_scale * (double)b_scale;
  for (long long i = 0; i < m; i++) {
    const uint8_t *a = A + i * k;
    for (long long j = 0; j < n; j++) {
      const uint8_t *b = B + j * k;
      double acc = 0;
      for (long long t = 0; t < k; t++) acc += (double)lut[a[t]] * (double)lut[b[t]];
      C[i * n + j] = scale * acc;
    }
  }
}

double calib_fp8_rel_l2(const uint16_t *gpu, const double *ref, long long n, long long *bad) {
  double diff = 0, norm = 0;
  *bad = -1;
  for (long long i = 0; i < n; i++) {
    const double g = (double)taco_bf16_to_float(gpu[i]);
    if (!isfinite(g)) {
      *bad = i;
      return INFINITY;
    }
    diff += (g - ref[i]) * (g - ref[i]);
    norm += ref[i] * ref[i];
  }
  return norm > 0 ? sqrt(diff / norm) : NAN;
}

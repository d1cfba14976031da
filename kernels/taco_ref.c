/* taco_ref.c — plain-C reference of the TACO codec (see taco_ref.h for the
 * exact order of operations the CUDA kernels share). */
#include "taco_ref.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "taco_fp8.h"
#include "taco_internal.h"

/* ---- errors and parameters (shared by the reference and the CUDA host code) ---- */

static _Thread_local char last_error[512];

const char *taco_last_error(void) { return last_error; }

int taco_fail_at(const char *file, int line, const char *fmt, ...) {
  const char *base = strrchr(file, '/');
  int used = snprintf(last_error, sizeof last_error, "%s:%d: ", base ? base + 1 : file, line);
  if (used < 0) used = 0;
  if ((size_t)used < sizeof last_error) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error + used, sizeof last_error - (size_t)used, fmt, ap);
    va_end(ap);
  }
  return -1;
}

int taco_params_valid(taco_params p) {
  int g = p.group;
  return (g == 32 || g == 64 || g == 128 || g == 256 || g == 512) && (p.fp8 == TACO_FP8_E4M3 || p.fp8 == TACO_FP8_E5M2);
}

static int check_params(taco_params p) {
  if (!taco_params_valid(p)) return TACO_FAIL("group %d / fp8 %d: want group 32..512 (power of two), E4M3 or E5M2", p.group, (int)p.fp8);
  return 0;
}

/* ---- scalars ---- */

float taco_fp8_max(taco_fp8 f) { return f == TACO_FP8_E4M3 ? 448.0f : 57344.0f; }

uint8_t taco_fp8_from_float(float x, taco_fp8 f) {
  return f == TACO_FP8_E4M3 ? taco_fp8_e4m3_from_float(x) : taco_fp8_e5m2_from_float(x);
}

float taco_fp8_to_float(uint8_t code, taco_fp8 f) {
  return f == TACO_FP8_E4M3 ? taco_fp8_e4m3_to_float(code) : taco_fp8_e5m2_to_float(code);
}

float taco_rsqrt_group(int group) {
  switch (group) {
  case 32: return 0.17677669529663688f;
  case 64: return 0.125f;
  case 128: return 0.08838834764831845f;
  case 256: return 0.0625f;
  case 512: return 0.04419417382415922f;
  default: return (float)(1.0 / sqrt((double)group));
  }
}

/* ---- one group ---- */

void taco_ref_fwht(float *v, int g) {
  for (int h = 1; h < g; h <<= 1)
    for (int i = 0; i < g; i++)
      if (!(i & h)) {
        float a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
}

/* Sum of squares in the kernels' order: per lane, then xor-butterfly. */
static float group_sum_squares(const float *x, int g) {
  int lanes = g / 32;
  float part[16], next[16];
  for (int t = 0; t < lanes; t++) {
    float acc = 0.0f;
    for (int c = 0; c < 4; c++)
      for (int j = 0; j < 8; j++) {
        float v = x[(c * lanes + t) * 8 + j];
        acc = fmaf(v, v, acc);
      }
    part[t] = acc;
  }
  for (int m = 1; m < lanes; m <<= 1) {
    for (int t = 0; t < lanes; t++) next[t] = part[t] + part[t ^ m];
    memcpy(part, next, sizeof(float) * (size_t)lanes);
  }
  return part[0];
}

static float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* s_a and m = s_a * rsqrt(G) from the group's sum of squares */
static float adaptive_scale(float sum_squares, int g, taco_fp8 f, float *m) {
  float mean = sum_squares * (1.0f / (float)g);
  float s_a = clampf(taco_fp8_max(f) * (1.0f / sqrtf(mean + 1e-6f)), 1e-3f, 1e3f);
  *m = s_a * taco_rsqrt_group(g);
  return s_a;
}

/* v: the transformed group (H x, or H (x m) when prescaled) -> s_q and codes */
static void encode_finish(const float *v, int g, taco_fp8 f, float m, int prescale, uint8_t *q, float *s_q_out) {
  float fmax8 = taco_fp8_max(f), absmax = 0.0f;
  for (int i = 0; i < g; i++) absmax = fmaxf(absmax, fabsf(v[i]));
  float ymax = prescale ? absmax : absmax * m;
  float s_q = clampf(ymax / fmax8, 1e-12f, 1e6f), inv = 1.0f / s_q;
  float k = prescale ? inv : m * inv;
  for (int i = 0; i < g; i++) q[i] = taco_fp8_from_float(v[i] * k, f);
  *s_q_out = s_q;
}

void taco_ref_encode_group(const float *x, int g, taco_fp8 f, uint8_t *q, float *s_a_out, float *s_q_out) {
  float v[512], m;
  float sum_squares = group_sum_squares(x, g);
  float s_a = adaptive_scale(sum_squares, g, f, &m);
  int prescale = !(sum_squares <= TACO_PRESCALE_ABOVE);
  for (int i = 0; i < g; i++) v[i] = prescale ? x[i] * m : x[i];
  taco_ref_fwht(v, g);
  encode_finish(v, g, f, m, prescale, q, s_q_out);
  *s_a_out = s_a;
}

void taco_ref_encode_group_transformed(const float *acc, int g, taco_fp8 f, uint8_t *q, float *s_a_out,
                                       float *s_q_out) {
  float v[512], m;
  float sum_squares = group_sum_squares(acc, g) * (float)g; /* Parseval: sum (H acc)^2 = G sum acc^2 */
  float s_a = adaptive_scale(sum_squares, g, f, &m);
  int prescale = !(sum_squares <= TACO_PRESCALE_ABOVE);
  for (int i = 0; i < g; i++) {
    v[i] = acc[i] * (float)g; /* H (H acc) = G acc, exact */
    if (prescale) v[i] = v[i] * m;
  }
  encode_finish(v, g, f, m, prescale, q, s_q_out);
  *s_a_out = s_a;
}

void taco_ref_decode_group_acc(const uint8_t *q, float s_a, float s_q, int g, taco_fp8 f, float *acc) {
  float d = s_q * (s_a > 0.0f ? taco_rsqrt_group(g) / s_a : 0.0f);
  for (int i = 0; i < g; i++) acc[i] = fmaf(taco_fp8_to_float(q[i], f), d, acc[i]);
}

/* ---- blocks ---- */

static float load_elem(const void *x, taco_dtype dt, size_t i) {
  if (dt == TACO_DTYPE_BF16) return taco_bf16_to_float(((const uint16_t *)x)[i]);
  return ((const float *)x)[i];
}

static void store_elem(void *y, taco_dtype dt, size_t i, float v) {
  if (dt == TACO_DTYPE_BF16)
    ((uint16_t *)y)[i] = taco_bf16_from_float(v);
  else
    ((float *)y)[i] = v;
}

int taco_ref_encode(const void *x, taco_dtype dt, size_t n, taco_params p, void *block, taco_nonfinite *nf) {
  if (check_params(p)) return -1;
  int g = p.group;
  size_t ngroups = taco_groups(n, g);
  uint8_t *payload = (uint8_t *)block;
  float *scales = (float *)(payload + ngroups * (size_t)g);
  float v[512];
  for (size_t gi = 0; gi < ngroups; gi++) {
    size_t base = gi * (size_t)g;
    int bad = 0;
    for (int i = 0; i < g; i++) {
      size_t e = base + (size_t)i;
      v[i] = e < n ? load_elem(x, dt, e) : 0.0f;
      if (!isfinite(v[i])) {
        if (nf) {
          if (nf->count == 0 || e < nf->first_index) nf->first_index = e;
          nf->count++;
        }
        bad = 1;
      }
    }
    if (bad) {
      memset(payload + base, 0, (size_t)g);
      scales[2 * gi] = scales[2 * gi + 1] = 0.0f;
    } else {
      taco_ref_encode_group(v, g, p.fp8, payload + base, &scales[2 * gi], &scales[2 * gi + 1]);
    }
  }
  return 0;
}

/* Sum of the k blocks' dequantized, pre-transform values (the Hadamard domain). */
static void sum_group_codes(const uint8_t *in, int k, size_t n, int g, taco_fp8 f, size_t gi, float *acc) {
  size_t ngroups = taco_groups(n, g), wire = taco_wire_bytes(n, g);
  for (int i = 0; i < g; i++) acc[i] = 0.0f;
  for (int b = 0; b < k; b++) {
    const uint8_t *payload = in + (size_t)b * wire;
    const float *scales = (const float *)(payload + ngroups * (size_t)g);
    taco_ref_decode_group_acc(payload + gi * (size_t)g, scales[2 * gi], scales[2 * gi + 1], g, f, acc);
  }
}

/* ... then the transform: the decoded sum. */
static void decode_sum_group(const uint8_t *in, int k, size_t n, int g, taco_fp8 f, size_t gi, float *acc) {
  sum_group_codes(in, k, n, g, f, gi, acc);
  taco_ref_fwht(acc, g);
}

int taco_ref_decode_sum(const void *in, int k, size_t n, taco_params p, void *y, taco_dtype dt) {
  if (check_params(p)) return -1;
  if (k < 1) return TACO_FAIL("decode_sum: k = %d, want >= 1", k);
  int g = p.group;
  float acc[512];
  for (size_t gi = 0; gi < taco_groups(n, g); gi++) {
    decode_sum_group((const uint8_t *)in, k, n, g, p.fp8, gi, acc);
    for (int i = 0; i < g && gi * (size_t)g + (size_t)i < n; i++) store_elem(y, dt, gi * (size_t)g + (size_t)i, acc[i]);
  }
  return 0;
}

int taco_ref_decode(const void *block, size_t n, taco_params p, void *y, taco_dtype dt) {
  return taco_ref_decode_sum(block, 1, n, p, y, dt);
}

/* TRANSFORM: decode-sum, zero the padding, encode (two transforms). DIRECT:
 * whole groups re-encode from the Hadamard-domain sum with no transform; the
 * padded last group as TRANSFORM. */
static int decode_sum_encode(const void *in, int k, size_t n, taco_params p, void *block, int direct) {
  if (check_params(p)) return -1;
  if (k < 1) return TACO_FAIL("decode_sum_encode: k = %d, want >= 1", k);
  int g = p.group;
  size_t ngroups = taco_groups(n, g);
  uint8_t *payload = (uint8_t *)block;
  float *scales = (float *)(payload + ngroups * (size_t)g);
  float acc[512];
  for (size_t gi = 0; gi < ngroups; gi++) {
    if (direct && (gi + 1) * (size_t)g <= n) {
      sum_group_codes((const uint8_t *)in, k, n, g, p.fp8, gi, acc);
      taco_ref_encode_group_transformed(acc, g, p.fp8, payload + gi * (size_t)g, &scales[2 * gi], &scales[2 * gi + 1]);
      continue;
    }
    decode_sum_group((const uint8_t *)in, k, n, g, p.fp8, gi, acc);
    /* the padded tail of the last group re-encodes as zeros, like a fresh encode */
    for (int i = 0; i < g; i++)
      if (gi * (size_t)g + (size_t)i >= n) acc[i] = 0.0f;
    taco_ref_encode_group(acc, g, p.fp8, payload + gi * (size_t)g, &scales[2 * gi], &scales[2 * gi + 1]);
  }
  return 0;
}

int taco_ref_decode_sum_encode(const void *in, int k, size_t n, taco_params p, void *block) {
  return decode_sum_encode(in, k, n, p, block, 1);
}

int taco_ref_decode_sum_encode_transform(const void *in, int k, size_t n, taco_params p, void *block) {
  return decode_sum_encode(in, k, n, p, block, 0);
}

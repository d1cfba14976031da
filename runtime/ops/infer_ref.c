/* infer_ref.c — plain-C references of the inference kernels (see infer_ref.h). */
#include "infer_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int infer_ref_decode_attention(const float *q, const float *k_cache, const float *v_cache, float *out, int batch,
                                int hl, int kvl, int head_dim, long long max_seq, long long len) {
  const int g = hl / kvl, d = head_dim;
  const double scale = 1.0 / sqrt((double)d);
  double *s = malloc((size_t)len * sizeof *s);
  if (!s) return -1;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < hl; h++) {
      const float *qv = q + ((long long)b * hl + h) * d;
      const float *K = k_cache + ((long long)b * kvl + h / g) * max_seq * d;
      const float *V = v_cache + ((long long)b * kvl + h / g) * max_seq * d;
      double mx = -INFINITY, sum = 0;
      for (long long p = 0; p < len; p++) {
        double acc = 0;
        for (int x = 0; x < d; x++) acc += (double)qv[x] * K[p * d + x];
        s[p] = acc * scale;
        if (s[p] > mx) mx = s[p];
      }
      for (long long p = 0; p < len; p++) sum += (s[p] = exp(s[p] - mx));
      float *o = out + ((long long)b * hl + h) * d;
      for (int x = 0; x < d; x++) {
        double acc = 0;
        for (long long p = 0; p < len; p++) acc += s[p] * V[p * d + x];
        o[x] = (float)(acc / sum);
      }
    }
  free(s);
  return 0;
}

float infer_ref_e4m3_to_float(unsigned char c) {
  const int e = (c >> 3) & 15, m = c & 7;
  if ((c & 0x7f) == 0x7f) return NAN;
  float v = e ? ldexpf((float)(8 + m), e - 10) : ldexpf((float)m, -9);
  return c & 0x80 ? -v : v;
}

/* Nearest of the 127 finite magnitudes (ties to the even code), saturating at
 * 448: a definition by enumeration, independent of kernels/taco_fp8.h's
 * bit arithmetic (tests/test_infer_ref.c compares the two). */
unsigned char infer_ref_e4m3_from_float(float x) {
  if (isnan(x)) return 0x7f;
  const unsigned char sign = signbit(x) ? 0x80 : 0;
  const float a = fabsf(x);
  if (a >= 448.0f) return sign | 0x7e;
  int lo = 0, hi = 0x7e; /* value(lo) <= a < value(hi) */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (infer_ref_e4m3_to_float((unsigned char)mid) <= a) lo = mid;
    else hi = mid;
  }
  const float dl = a - infer_ref_e4m3_to_float((unsigned char)lo), dh = infer_ref_e4m3_to_float((unsigned char)hi) - a;
  const int c = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
  return (unsigned char)(sign | c);
}

void infer_ref_kv8_quantize(const float *x, int d, unsigned char *codes, float *scale) {
  float amax = 0.f;
  for (int i = 0; i < d; i++) amax = fmaxf(amax, fabsf(x[i]));
  const float inv = amax > 0.f ? 448.0f / amax : 0.f;
  for (int i = 0; i < d; i++) {
    const float y = x[i] * inv; /* one rounding, as __fmul_rn */
    codes[i] = infer_ref_e4m3_from_float(y);
  }
  *scale = amax / 448.0f;
}

void infer_ref_kv8_dequantize(const unsigned char *codes, float scale, int d, float *out) {
  for (int i = 0; i < d; i++) out[i] = infer_ref_e4m3_to_float(codes[i]) * scale;
}

void infer_ref_rope(float *x, int head_dim, long long pos, double theta) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; i++) {
    double ang = (double)pos * pow(theta, -2.0 * i / head_dim);
    double c = cos(ang), sn = sin(ang), x1 = x[i], x2 = x[i + half];
    x[i] = (float)(x1 * c - x2 * sn);
    x[i + half] = (float)(x2 * c + x1 * sn);
  }
}

void infer_ref_causal_attention(const float *q, const float *k, const float *v, float *out, int seq, int head_dim) {
  const int d = head_dim;
  const double scale = 1.0 / sqrt((double)d);
  double *s = malloc((size_t)seq * sizeof *s);
  if (!s) abort();
  for (int i = 0; i < seq; i++) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= i; j++) {
      double acc = 0;
      for (int x = 0; x < d; x++) acc += (double)q[(long long)i * d + x] * k[(long long)j * d + x];
      s[j] = acc * scale;
      if (s[j] > mx) mx = s[j];
    }
    for (int j = 0; j <= i; j++) sum += (s[j] = exp(s[j] - mx));
    for (int x = 0; x < d; x++) {
      double acc = 0;
      for (int j = 0; j <= i; j++) acc += s[j] * v[(long long)j * d + x];
      out[(long long)i * d + x] = (float)(acc / sum);
    }
  }
  free(s);
}

void infer_ref_argmax(const unsigned short *logits, int *token, int batch, int tp, long long vocab_local,
                      long long vocab_valid) {
  for (int b = 0; b < batch; b++) {
    long long bi = -1;
    float best = 0;
    for (long long g = 0; g < vocab_valid && g < (long long)tp * vocab_local; g++) {
      const long long r = g / vocab_local, j = g % vocab_local;
      const float v = infer_ref_from_bf16(logits[(r * batch + b) * vocab_local + j]);
      if (v == v && (bi < 0 || v > best)) best = v, bi = g; /* the first of equal values stays */
    }
    token[b] = bi < 0 ? 0 : (int)bi;
  }
}

unsigned short infer_ref_to_bf16(float x) {
  unsigned int u;
  memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) return (unsigned short)((u >> 16) | ((u & 0xffff) ? 0x40 : 0));
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

float infer_ref_from_bf16(unsigned short h) {
  unsigned int u = (unsigned int)h << 16;
  float x;
  memcpy(&x, &u, 4);
  return x;
}

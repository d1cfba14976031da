/* moe_route_ref.c — plain-C reference of the MoE routing kernels (moe_route.h). */
#include "moe_route.h"

#include <math.h>
#include <string.h>

static float bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Round to nearest even; NaN stays a quiet NaN. */
static uint16_t float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

void moe_topk_ref(const float *logits, int t, int E, int k, int32_t *idx, float *w) {
  for (int r = 0; r < t; r++) {
    const float *l = logits + (size_t)r * E;
    int32_t *ix = idx + (size_t)r * k;
    float *wr = w + (size_t)r * k;
    for (int j = 0; j < k; j++) { /* j-th largest: not chosen yet, larger value, ties the lower index */
      int best = -1;
      for (int e = 0; e < E; e++) {
        int taken = 0;
        for (int q = 0; q < j; q++) taken |= ix[q] == e;
        if (!taken && (best < 0 || l[e] > l[best])) best = e;
      }
      ix[j] = best;
    }
    float mx = l[ix[0]], sum = 0.0f;
    for (int j = 0; j < k; j++) sum = sum + expf(l[ix[j]] - mx);
    for (int j = 0; j < k; j++) wr[j] = expf(l[ix[j]] - mx) / sum;
  }
}

int moe_map_ref(const int32_t *idx, int t, int E, int k, int32_t *pos, int32_t *count) {
  const long long n = (long long)t * k;
  for (int e = 0; e < E; e++) count[e] = 0;
  for (long long i = 0; i < n; i++) {
    if (idx[i] < 0 || idx[i] >= E) return -1;
    count[idx[i]]++;
  }
  int32_t at[MOE_ROUTE_MAX_E];
  int32_t s = 0;
  for (int e = 0; e < E; e++) at[e] = s, s += count[e];
  for (long long i = 0; i < n; i++) pos[i] = at[idx[i]]++;
  return 0;
}

void moe_permute_ref(const uint16_t *x, const int32_t *pos, int t, int k, int h, uint16_t *out) {
  for (long long i = 0; i < (long long)t * k; i++)
    memcpy(out + (size_t)pos[i] * h, x + (size_t)(i / k) * h, (size_t)h * sizeof *x);
}

void moe_combine_ref(const uint16_t *y, const int32_t *pos, const float *w, int t, int k, int h, uint16_t *out) {
  for (int r = 0; r < t; r++)
    for (int c = 0; c < h; c++) {
      float acc = 0.0f;
      for (int j = 0; j < k; j++) {
        float v = bf16_to_float(y[(size_t)pos[(size_t)r * k + j] * h + c]);
        acc = w ? fmaf(w[(size_t)r * k + j], v, acc) : acc + v;
      }
      out[(size_t)r * h + c] = float_to_bf16(acc);
    }
}

void moe_combine_bwd_ref(const uint16_t *dout, const uint16_t *y, const int32_t *pos, const float *w, int t, int k,
                         int h, uint16_t *dy, float *dw) {
  for (long long i = 0; i < (long long)t * k; i++) {
    const uint16_t *g = dout + (size_t)(i / k) * h, *yr = y + (size_t)pos[i] * h;
    uint16_t *d = dy + (size_t)pos[i] * h;
    double dot = 0;
    for (int c = 0; c < h; c++) {
      float gv = bf16_to_float(g[c]);
      d[c] = float_to_bf16(w[i] * gv);
      dot += (double)gv * bf16_to_float(yr[c]);
    }
    dw[i] = (float)dot;
  }
}

void moe_topk_bwd_ref(const int32_t *idx, const float *w, const float *dw, int t, int E, int k, uint16_t *dlogits) {
  memset(dlogits, 0, (size_t)t * E * sizeof *dlogits);
  for (int r = 0; r < t; r++) {
    const float *wr = w + (size_t)r * k, *dr = dw + (size_t)r * k;
    float s = 0.0f;
    for (int j = 0; j < k; j++) s = fmaf(wr[j], dr[j], s);
    for (int j = 0; j < k; j++) dlogits[(size_t)r * E + idx[(size_t)r * k + j]] = float_to_bf16(wr[j] * (dr[j] - s));
  }
}

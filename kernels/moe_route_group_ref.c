/* moe_route_group_ref.c — plain-C reference of DeepSeek-V3's routing kernels (moe_route_group.h). */
#include "moe_route_group.h"

#include <math.h>
#include <string.h>

static uint16_t float_to_bf16(float f) { /* round to nearest even; NaN stays a quiet NaN */
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

int moe_group_route_valid(int E, int k, const moe_group_route *g) {
  if (E < 1 || E > MOE_ROUTE_MAX_E || k < 1 || k > MOE_ROUTE_MAX_K || k > E || !(g->scale > 0)) return -1;
  if (g->groups == 0) return 0;
  if (g->groups < 1 || g->groups > MOE_GROUP_MAX || E % g->groups || g->group_topk < 1 || g->group_topk > g->groups)
    return -1;
  const int per = E / g->groups, n = k / g->group_topk;
  return n >= 1 && n <= per && g->group_topk * per >= k ? 0 : -1;
}

void moe_sigmoid_ref(const float *x, long long n, float *s) {
  for (long long i = 0; i < n; i++) s[i] = 1.0f / (1.0f + expf(-x[i]));
}

/* The largest of v[lo .. hi) not yet in taken[], ties to the lower index; -1 when none. */
static int argmax_free(const float *v, int lo, int hi, const unsigned char *taken) {
  int best = -1;
  for (int e = lo; e < hi; e++)
    if (!taken[e] && (best < 0 || v[e] > v[best])) best = e;
  return best;
}

/* One token: the kept groups (keep[g]), then the choice. */
static void route_token(const float *s, const float *bias, int E, int k, const moe_group_route *g, int32_t *idx,
                        float *w, float *sel) {
  float v[MOE_ROUTE_MAX_E];
  unsigned char taken[MOE_ROUTE_MAX_E], keep[MOE_GROUP_MAX] = {0};
  for (int e = 0; e < E; e++) v[e] = bias ? s[e] + bias[e] : s[e];
  const int G = g->groups > 0 ? g->groups : 1, per = E / G;
  if (g->groups > 0) {
    float gs[MOE_GROUP_MAX];
    const int n = k / g->group_topk;
    memset(taken, 0, (size_t)E);
    for (int q = 0; q < G; q++) { /* the group's n largest, summed largest first */
      gs[q] = 0.0f;
      for (int i = 0; i < n; i++) {
        int b = argmax_free(v, q * per, (q + 1) * per, taken);
        taken[b] = 1, gs[q] = gs[q] + v[b];
      }
    }
    unsigned char gtaken[MOE_GROUP_MAX] = {0};
    for (int i = 0; i < g->group_topk; i++) {
      int b = -1;
      for (int q = 0; q < G; q++)
        if (!gtaken[q] && (b < 0 || gs[q] > gs[b])) b = q;
      gtaken[b] = keep[b] = 1;
    }
  } else {
    keep[0] = 1;
  }
  for (int e = 0; e < E; e++) taken[e] = !keep[e / per]; /* experts outside the kept groups are never chosen */
  float S = 0.0f;
  for (int j = 0; j < k; j++) {
    int b = argmax_free(v, 0, E, taken);
    taken[b] = 1, idx[j] = b, sel[j] = s[b], S = S + s[b];
  }
  for (int j = 0; j < k; j++) w[j] = k > 1 ? (sel[j] / (S + 1e-20f)) * g->scale : sel[j] * g->scale;
}

void moe_topk_group_ref(const float *s, const float *bias, int t, int E, int k, const moe_group_route *g,
                        int32_t *idx, float *w, float *sel) {
  for (int r = 0; r < t; r++)
    route_token(s + (size_t)r * E, bias, E, k, g, idx + (size_t)r * k, w + (size_t)r * k, sel + (size_t)r * k);
}

void moe_topk_group_bwd_ref(const int32_t *idx, const float *sel, const float *dw, int t, int E, int k, float scale,
                            uint16_t *dlogits) {
  memset(dlogits, 0, (size_t)t * E * sizeof *dlogits);
  for (int r = 0; r < t; r++) {
    const float *sr = sel + (size_t)r * k, *dr = dw + (size_t)r * k;
    float S = 0.0f, d = 0.0f;
    for (int j = 0; j < k; j++) S = S + sr[j];
    const float Sp = S + 1e-20f;
    for (int j = 0; j < k; j++) d = fmaf(sr[j] / Sp, dr[j], d);
    for (int j = 0; j < k; j++) {
      const float gj = k > 1 ? scale * (dr[j] - d) / Sp : scale * dr[j];
      dlogits[(size_t)r * E + idx[(size_t)r * k + j]] = float_to_bf16(gj * (sr[j] * (1.0f - sr[j])));
    }
  }
}

void moe_bias_update_ref(const int32_t *load, float *bias, int rows, int E, float rate) {
  for (int r = 0; r < rows; r++) {
    const int32_t *l = load + (size_t)r * E;
    long long sum = 0;
    for (int e = 0; e < E; e++) sum += l[e];
    for (int e = 0; e < E; e++) {
      const long long off = sum - (long long)E * l[e]; /* sign(mean - load) */
      bias[(size_t)r * E + e] = bias[(size_t)r * E + e] + (off > 0 ? rate : off < 0 ? -rate : 0.0f);
    }
  }
}

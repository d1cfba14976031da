/* exec_ref_moe.c — the float64 reference's mixture-of-experts block (see
 * exec_ref.h): router, top-k with the softmax over the chosen logits (or
 * DeepSeek-V3's sigmoid, group-limited, biased, scaled routing), each
 * token copy through its expert's FFN, the weighted sum, the shared FFN; and
 * the backward of all of it. Token by token, the textbook formulas. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec_ref_internal.h"

static int up_width(const exec_ref_config *c, int f) { return c->act == EXEC_ACT_SWIGLU ? 2 * f : f; }

int exec_ref_moe_alloc(const exec_ref_config *c, int T, exec_ref_moe_saved *s, ts_err *e) {
  memset(s, 0, sizeof *s);
  const size_t tk = (size_t)T * c->top_k, fe = (size_t)c->expert_ffn, fs = (size_t)c->shared_ffn;
  s->idx = malloc(tk * sizeof *s->idx);
  s->w = malloc(tk * sizeof *s->w);
  s->sel = malloc(tk * sizeof *s->sel);
  s->u = malloc(tk * (size_t)up_width(c, (int)fe) * sizeof(double));
  s->a = malloc(tk * fe * sizeof(double));
  s->y = malloc(tk * (size_t)c->hidden * sizeof(double));
  if (fs > 0) {
    s->su = malloc((size_t)T * (size_t)up_width(c, (int)fs) * sizeof(double));
    s->sa = malloc((size_t)T * fs * sizeof(double));
  }
  /* the backward's scratch: one copy's dy, da, du and the token's dlogits, dw; or the shared FFN's da, du */
  size_t one = (size_t)c->hidden + fe + (size_t)up_width(c, (int)fe) + (size_t)c->experts + (size_t)c->top_k;
  size_t shared = (size_t)T * (fs + (size_t)up_width(c, (int)fs));
  s->scratch = malloc((one > shared ? one : shared) * sizeof(double));
  if (!s->idx || !s->w || !s->sel || !s->u || !s->a || !s->y || !s->scratch || (fs > 0 && (!s->su || !s->sa))) {
    exec_ref_moe_free(s);
    return ts_fail_sys(e, "exec_ref: out of memory (MoE block of %d tokens)", T);
  }
  return 0;
}

void exec_ref_moe_free(exec_ref_moe_saved *s) {
  free(s->idx), free(s->w), free(s->sel), free(s->u), free(s->a), free(s->y), free(s->su), free(s->sa), free(s->scratch);
  memset(s, 0, sizeof *s);
}

/* One token's top-k of E logits (descending, ties to the lower index) and the
 * softmax over the chosen ones. */
static void topk_softmax(const double *logit, int E, int k, int *idx, double *w) {
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int x = 0; x < E; x++) {
      int taken = 0;
      for (int i = 0; i < j; i++) taken |= idx[i] == x;
      if (!taken && (best < 0 || logit[x] > logit[best])) best = x;
    }
    idx[j] = best;
  }
  double sum = 0;
  for (int j = 0; j < k; j++) sum += w[j] = exp(logit[idx[j]] - logit[idx[0]]);
  for (int j = 0; j < k; j++) w[j] /= sum;
}

/* The largest v[e] of [lo, hi) not taken (taken[e] 0), ties to the lower index; -1 when none. */
static int argmax_free(const double *v, int lo, int hi, const unsigned char *taken) {
  int best = -1;
  for (int e = lo; e < hi; e++)
    if (!taken[e] && (best < 0 || v[e] > v[best])) best = e;
  return best;
}

/* DeepSeek-V3's routing of one token (exec_ref.h): s = sigmoid(logit), the
 * choice by v = s + bias, group-limited; sel the chosen s, w the normalised,
 * scaled weights. */
static void topk_sigmoid(const exec_ref_config *c, const double *logit, const double *bias, int *idx, double *w,
                         double *sel) {
  const int E = c->experts, k = c->top_k, G = c->router_groups > 0 ? c->router_groups : 1, per = E / G;
  double s[1024], v[1024];
  unsigned char taken[1024], keep[32] = {0};
  for (int x = 0; x < E; x++) s[x] = 1.0 / (1.0 + exp(-logit[x])), v[x] = s[x] + (bias ? bias[x] : 0.0);
  if (c->router_groups > 0) { /* a group's score: the sum of its top_k / group_topk largest v */
    double gs[32];
    memset(taken, 0, (size_t)E);
    for (int q = 0; q < G; q++) {
      gs[q] = 0;
      for (int i = 0; i < k / c->router_group_topk; i++) {
        int b = argmax_free(v, q * per, (q + 1) * per, taken);
        taken[b] = 1, gs[q] += v[b];
      }
    }
    unsigned char gtaken[32] = {0};
    for (int i = 0; i < c->router_group_topk; i++) {
      int b = -1;
      for (int q = 0; q < G; q++)
        if (!gtaken[q] && (b < 0 || gs[q] > gs[b])) b = q;
      gtaken[b] = keep[b] = 1;
    }
  } else {
    keep[0] = 1;
  }
  for (int x = 0; x < E; x++) taken[x] = !keep[x / per];
  double sum = 0;
  for (int j = 0; j < k; j++) {
    idx[j] = argmax_free(v, 0, E, taken);
    taken[idx[j]] = 1, sel[j] = s[idx[j]], sum += sel[j];
  }
  const double scale = c->router_scale > 0 ? c->router_scale : 1.0;
  for (int j = 0; j < k; j++) w[j] = (k > 1 ? sel[j] / (sum + 1e-20) : sel[j]) * scale;
}

void exec_ref_moe_route(const exec_ref_config *c, const double *logit, const double *bias, int *idx, double *w,
                        double *sel) {
  if (c->router_sigmoid) {
    topk_sigmoid(c, logit, bias, idx, w, sel);
    return;
  }
  topk_softmax(logit, c->experts, c->top_k, idx, w);
  for (int j = 0; j < c->top_k; j++) sel[j] = w[j];
}

void exec_ref_moe_route_bwd(const exec_ref_config *c, const int *idx, const double *w, const double *sel,
                            const double *dw, double *dl) {
  const int E = c->experts, k = c->top_k;
  memset(dl, 0, sizeof(double) * (size_t)E);
  double dot = 0;
  if (!c->router_sigmoid) { /* w = softmax over the chosen logits: dl_j = w_j (dw_j - sum_i w_i dw_i) */
    for (int j = 0; j < k; j++) dot += w[j] * dw[j];
    for (int j = 0; j < k; j++) dl[idx[j]] = w[j] * (dw[j] - dot);
    return;
  }
  /* w_j = scale s_j / S' (S' = sum s + 1e-20): ds_j = scale (dw_j - sum_i p_i dw_i) / S', p = s / S';
   * then ds / dlogit = s (1 - s) */
  const double scale = c->router_scale > 0 ? c->router_scale : 1.0;
  double S = 1e-20;
  for (int j = 0; j < k; j++) S += sel[j];
  for (int j = 0; j < k; j++) dot += sel[j] / S * dw[j];
  for (int j = 0; j < k; j++) {
    const double ds = k > 1 ? scale * (dw[j] - dot) / S : scale * dw[j];
    dl[idx[j]] = ds * sel[j] * (1.0 - sel[j]);
  }
}

/* The sigmoid router's weights of a given choice (exec_ref.h, router_choice): sel the chosen s, w the normalised,
 * scaled weights, as topk_sigmoid makes them of its own choice. */
static void route_given(const exec_ref_config *c, const double *logit, const int *given, int *idx, double *w,
                        double *sel) {
  const int k = c->top_k;
  double sum = 0;
  for (int j = 0; j < k; j++) {
    idx[j] = given[j];
    sel[j] = 1.0 / (1.0 + exp(-logit[idx[j]])), sum += sel[j];
  }
  const double scale = c->router_scale > 0 ? c->router_scale : 1.0;
  for (int j = 0; j < k; j++) w[j] = (k > 1 ? sel[j] / (sum + 1e-20) : sel[j]) * scale;
}

void exec_ref_moe_fwd(const exec_ref_config *c, int T, const double *n2, const double *const W[EXEC_REF_MOE_W],
                      const double *bias, exec_ref_moe_saved *s, double *x, const int *choice_in, int *choice_out) {
  const int h = c->hidden, E = c->experts, k = c->top_k, fe = c->expert_ffn, U = up_width(c, fe);
  double *logit = s->scratch;
  for (int r = 0; r < T; r++) {
    const double *xr = n2 + (size_t)r * h;
    exec_ref_mm_nn(1, E, h, xr, W[EXEC_REF_MOE_ROUTER], logit, 0);
    int *idx = s->idx + (size_t)r * k;
    exec_ref_moe_route(c, logit, bias, idx, s->w + (size_t)r * k, s->sel + (size_t)r * k);
    if (choice_out) memcpy(choice_out + (size_t)r * k, idx, (size_t)k * sizeof *idx);
    if (choice_in && c->router_sigmoid)
      route_given(c, logit, choice_in + (size_t)r * k, idx, s->w + (size_t)r * k, s->sel + (size_t)r * k);
    for (int j = 0; j < k; j++) {
      const size_t i = (size_t)r * k + j, ex = (size_t)s->idx[i];
      double *u = s->u + i * U, *a = s->a + i * fe, *y = s->y + i * h;
      exec_ref_mm_nn(1, U, h, xr, W[EXEC_REF_MOE_FC1] + ex * h * U, u, 0);
      exec_ref_act_fwd(c, 1, fe, u, a);
      exec_ref_mm_nn(1, h, fe, a, W[EXEC_REF_MOE_FC2] + ex * fe * h, y, 0);
      for (int q = 0; q < h; q++) x[(size_t)r * h + q] += s->w[i] * y[q];
    }
  }
  if (c->shared_ffn > 0) { /* x += act(n2 . Ws1) . Ws2 */
    const int fs = c->shared_ffn;
    exec_ref_mm_nn(T, up_width(c, fs), h, n2, W[EXEC_REF_MOE_SFC1], s->su, 0);
    exec_ref_act_fwd(c, T, fs, s->su, s->sa);
    exec_ref_mm_nn(T, h, fs, s->sa, W[EXEC_REF_MOE_SFC2], x, 1);
  }
}

/* Copy i = (token r, choice j) backward: dy = w dx_r and dw = dx_r . y; the
 * expert's FFN backward adds to dn2_r and to its weights' gradients. */
static double copy_bwd(const exec_ref_config *c, const double *xr, const double *const W[EXEC_REF_MOE_W],
                       const exec_ref_moe_saved *s, size_t i, const double *dxr, double *dn2r,
                       double *const G[EXEC_REF_MOE_W], double *scratch) {
  const int h = c->hidden, fe = c->expert_ffn, U = up_width(c, fe);
  const size_t ex = (size_t)s->idx[i];
  double *dy = scratch, *da = dy + h, *du = da + fe, dw = 0;
  for (int q = 0; q < h; q++) dy[q] = s->w[i] * dxr[q], dw += dxr[q] * s->y[i * h + q];
  exec_ref_mm_tn(fe, h, 1, s->a + i * fe, dy, G[EXEC_REF_MOE_FC2] + ex * fe * h, 1);
  exec_ref_mm_nt(1, fe, h, dy, W[EXEC_REF_MOE_FC2] + ex * fe * h, da, 0);
  exec_ref_act_bwd(c, 1, fe, s->u + i * U, da, du);
  exec_ref_mm_tn(h, U, 1, xr, du, G[EXEC_REF_MOE_FC1] + ex * h * U, 1);
  exec_ref_mm_nt(1, h, U, du, W[EXEC_REF_MOE_FC1] + ex * h * U, dn2r, 1);
  return dw;
}

void exec_ref_moe_bwd(const exec_ref_config *c, int T, const double *n2, const double *const W[EXEC_REF_MOE_W],
                      const exec_ref_moe_saved *s, const double *dx, double *dn2, double *const G[EXEC_REF_MOE_W]) {
  const int h = c->hidden, E = c->experts, k = c->top_k, fe = c->expert_ffn;
  memset(dn2, 0, sizeof(double) * (size_t)T * h);
  double *scratch = s->scratch;
  double *dl = scratch + h + fe + up_width(c, fe), *dw = dl + E;
  for (int r = 0; r < T; r++) {
    const double *xr = n2 + (size_t)r * h, *dxr = dx + (size_t)r * h;
    double *dn2r = dn2 + (size_t)r * h;
    for (int j = 0; j < k; j++) dw[j] = copy_bwd(c, xr, W, s, (size_t)r * k + j, dxr, dn2r, G, scratch);
    const size_t o = (size_t)r * k; /* dl: 0 for the experts not chosen */
    exec_ref_moe_route_bwd(c, s->idx + o, s->w + o, s->sel + o, dw, dl);
    exec_ref_mm_tn(h, E, 1, xr, dl, G[EXEC_REF_MOE_ROUTER], 1);
    exec_ref_mm_nt(1, h, E, dl, W[EXEC_REF_MOE_ROUTER], dn2r, 1);
  }
  if (c->shared_ffn > 0) {
    const int fs = c->shared_ffn, Us = up_width(c, fs);
    double *da = s->scratch, *du = da + (size_t)T * fs;
    exec_ref_mm_tn(fs, h, T, s->sa, dx, G[EXEC_REF_MOE_SFC2], 1);
    exec_ref_mm_nt(T, fs, h, dx, W[EXEC_REF_MOE_SFC2], da, 0);
    exec_ref_act_bwd(c, T, fs, s->su, da, du);
    exec_ref_mm_tn(h, Us, T, n2, du, G[EXEC_REF_MOE_SFC1], 1);
    exec_ref_mm_nt(T, h, Us, du, W[EXEC_REF_MOE_SFC1], dn2, 1);
  }
}

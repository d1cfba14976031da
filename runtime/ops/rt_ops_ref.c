/* rt_ops_ref.c — plain-C references of the rt_ops kernels (see rt_ops_ref.h). */
#include "rt_ops_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint16_t rt_ref_bf16_from_float(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

float rt_ref_bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static void norm_fwd(const float *x, const float *gamma, const float *beta, float *y, float *mean_out,
                     float *rstd_out, long long rows, int cols, float eps, int rms) {
  for (long long r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    double mean = 0, var = 0;
    if (!rms) {
      for (int c = 0; c < cols; c++) mean += xr[c];
      mean /= cols;
    }
    for (int c = 0; c < cols; c++) var += (xr[c] - mean) * (xr[c] - mean);
    double rstd = 1.0 / sqrt(var / cols + eps);
    for (int c = 0; c < cols; c++)
      y[r * cols + c] = (float)((xr[c] - mean) * rstd * gamma[c] + (rms ? 0.0 : beta[c]));
    if (mean_out) mean_out[r] = (float)mean;
    rstd_out[r] = (float)rstd;
  }
}

static void norm_bwd(const float *dy, const float *x, const float *gamma, const float *mean_in, const float *rstd_in,
                     float *dx, long long rows, int cols, int rms) {
  for (long long r = 0; r < rows; r++) {
    const float *xr = x + r * cols, *dr = dy + r * cols;
    double mean = rms ? 0.0 : mean_in[r], rstd = rstd_in[r], s1 = 0, s2 = 0;
    for (int c = 0; c < cols; c++) {
      double gd = (double)gamma[c] * dr[c];
      s1 += gd;
      s2 += gd * (xr[c] - mean) * rstd;
    }
    double mean_gd = rms ? 0.0 : s1 / cols, mean_gdx = s2 / cols;
    for (int c = 0; c < cols; c++)
      dx[r * cols + c] =
          (float)(rstd * ((double)gamma[c] * dr[c] - mean_gd - (xr[c] - mean) * rstd * mean_gdx));
  }
}

void rt_ref_layernorm_fwd(const float *x, const float *gamma, const float *beta, float *y, float *mean, float *rstd,
                          long long rows, int cols, float eps) {
  norm_fwd(x, gamma, beta, y, mean, rstd, rows, cols, eps, 0);
}
void rt_ref_rmsnorm_fwd(const float *x, const float *gamma, float *y, float *rstd, long long rows, int cols,
                        float eps) {
  norm_fwd(x, gamma, NULL, y, NULL, rstd, rows, cols, eps, 1);
}
void rt_ref_layernorm_bwd_dx(const float *dy, const float *x, const float *gamma, const float *mean,
                             const float *rstd, float *dx, long long rows, int cols) {
  norm_bwd(dy, x, gamma, mean, rstd, dx, rows, cols, 0);
}
void rt_ref_rmsnorm_bwd_dx(const float *dy, const float *x, const float *gamma, const float *rstd, float *dx,
                           long long rows, int cols) {
  norm_bwd(dy, x, gamma, NULL, rstd, dx, rows, cols, 1);
}

#define GELU_K 0.7978845608028654 /* sqrt(2 / pi) */
#define GELU_C 0.044715

void rt_ref_gelu_fwd(const float *x, float *y, long long n) {
  for (long long i = 0; i < n; i++) {
    double v = x[i];
    y[i] = (float)(0.5 * v * (1.0 + tanh(GELU_K * (v + GELU_C * v * v * v))));
  }
}

void rt_ref_gelu_bwd(const float *dy, const float *x, float *dx, long long n) {
  for (long long i = 0; i < n; i++) {
    double v = x[i], t = tanh(GELU_K * (v + GELU_C * v * v * v));
    dx[i] = (float)(dy[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * v * v)));
  }
}

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

void rt_ref_swiglu_fwd(const float *x, float *y, long long rows, int f) {
  for (long long r = 0; r < rows; r++)
    for (int c = 0; c < f; c++) {
      double g = x[r * 2 * f + c], u = x[r * 2 * f + f + c];
      y[r * f + c] = (float)(g * sigmoid(g) * u);
    }
}

void rt_ref_swiglu_bwd(const float *dy, const float *x, float *dx, long long rows, int f) {
  for (long long r = 0; r < rows; r++)
    for (int c = 0; c < f; c++) {
      double g = x[r * 2 * f + c], u = x[r * 2 * f + f + c], d = dy[r * f + c], s = sigmoid(g);
      dx[r * 2 * f + c] = (float)(d * u * s * (1 + g * (1 - s)));
      dx[r * 2 * f + f + c] = (float)(d * g * s);
    }
}

void rt_ref_add(const float *a, const float *b, float *y, long long n) {
  for (long long i = 0; i < n; i++) y[i] = a[i] + b[i];
}

void rt_ref_softmax_causal_fwd(const float *s, float *p, long long batch, int seq, float scale) {
  for (long long r = 0; r < batch * seq; r++) {
    const float *sr = s + r * seq;
    int last = (int)(r % seq);
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c <= last; c++) mx = fmax(mx, (double)sr[c] * scale);
    for (int c = 0; c <= last; c++) sum += exp(sr[c] * (double)scale - mx);
    for (int c = 0; c < seq; c++) p[r * seq + c] = c <= last ? (float)(exp(sr[c] * (double)scale - mx) / sum) : 0.f;
  }
}

void rt_ref_softmax_bwd(const float *p, const float *dp, float *ds, long long rows, int cols, float scale) {
  for (long long r = 0; r < rows; r++) {
    double dot = 0;
    for (int c = 0; c < cols; c++) dot += (double)p[r * cols + c] * dp[r * cols + c];
    for (int c = 0; c < cols; c++) ds[r * cols + c] = (float)(scale * p[r * cols + c] * (dp[r * cols + c] - dot));
  }
}

void rt_ref_embedding_fwd(const float *table, const int32_t *ids, float *y, long long rows, int cols,
                          long long first_id, long long table_rows) {
  for (long long r = 0; r < rows; r++) {
    long long id = (long long)ids[r] - first_id;
    for (int c = 0; c < cols; c++) y[r * cols + c] = id >= 0 && id < table_rows ? table[id * cols + c] : 0.f;
  }
}

void rt_ref_cross_entropy(const float *logits, const int32_t *labels, float *loss, float *dlogits, long long rows,
                          int vocab) {
  for (long long r = 0; r < rows; r++) {
    const float *lr = logits + r * vocab;
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c < vocab; c++) mx = fmax(mx, lr[c]);
    for (int c = 0; c < vocab; c++) sum += exp(lr[c] - mx);
    double label_logit = lr[labels[r]];
    loss[r] = (float)(log(sum) + mx - label_logit);
    for (int c = 0; c < vocab; c++)
      dlogits[r * vocab + c] = (float)((exp(lr[c] - mx) / sum - (c == labels[r] ? 1.0 : 0.0)) / (double)rows);
  }
}

void rt_ref_adamw_step(float *master, float *w16, const float *grad, float *m, float *v, long long n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int step) {
  double bc1 = 1.0 - pow(beta1, step), bc2 = 1.0 - pow(beta2, step);
  for (long long i = 0; i < n; i++) {
    double g = grad[i];
    double mi = beta1 * (double)m[i] + (1.0 - beta1) * g;
    double vi = beta2 * (double)v[i] + (1.0 - beta2) * g * g;
    m[i] = (float)mi;
    v[i] = (float)vi;
    double w = master[i];
    w -= lr * ((mi / bc1) / (sqrt(vi / bc2) + eps) + weight_decay * w);
    master[i] = (float)w;
    w16[i] = rt_ref_bf16_to_float(rt_ref_bf16_from_float((float)w));
  }
}

void rt_ref_rope(float *x, long long rows, int ld, int heads, int d, int seq, const float *inv_freq, int inverse) {
  const int half = d / 2;
  for (long long r = 0; r < rows; r++)
    for (int hd = 0; hd < heads; hd++)
      for (int i = 0; i < half; i++) {
        float *v = x + r * ld + (long long)hd * d;
        double a = (double)(r % seq) * inv_freq[i], cs = cos(a), sn = inverse ? -sin(a) : sin(a);
        double x1 = v[i], x2 = v[i + half];
        v[i] = (float)(x1 * cs - x2 * sn);
        v[i + half] = (float)(x2 * cs + x1 * sn);
      }
}

void rt_ref_bias_add(float *y, const float *b, long long rows, int cols, int ld) {
  for (long long r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) y[r * ld + c] += b[c];
}

void rt_ref_bias_grad(const float *dy, float *db, long long rows, int cols, int ld) {
  for (int c = 0; c < cols; c++) {
    double s = 0;
    for (long long r = 0; r < rows; r++) s += dy[r * ld + c];
    db[c] += (float)s;
  }
}

void rt_ref_qk_norm_fwd(float *x, int ld, float *saved, const float *gamma, float *rstd, long long rows, int heads,
                        int d, float eps) {
  for (long long r = 0; r < rows; r++)
    for (int j = 0; j < heads; j++) {
      float *v = x + r * ld + (long long)j * d, *sv = saved ? saved + (r * heads + j) * d : NULL;
      double ss = 0;
      for (int i = 0; i < d; i++) ss += (double)v[i] * v[i];
      const double rs = 1.0 / sqrt(ss / d + eps);
      if (rstd) rstd[r * heads + j] = (float)rs;
      for (int i = 0; i < d; i++) {
        if (sv) sv[i] = v[i];
        v[i] = (float)(v[i] * rs * gamma[i]);
      }
    }
}

void rt_ref_qk_norm_bwd(float *dx, int ld, const float *saved, const float *gamma, const float *rstd, float *dgamma,
                        long long rows, int heads, int d) {
  double *dg = calloc((size_t)d, sizeof *dg);
  if (!dg) return; /* the caller's comparison then fails on dgamma */
  for (long long r = 0; r < rows; r++)
    for (int j = 0; j < heads; j++) {
      float *dy = dx + r * ld + (long long)j * d;
      const float *sv = saved + (r * heads + j) * d;
      const double rs = rstd[r * heads + j];
      double dot = 0;
      for (int i = 0; i < d; i++) dot += (double)gamma[i] * dy[i] * sv[i] * rs;
      dot /= d;
      for (int i = 0; i < d; i++) {
        dg[i] += (double)dy[i] * sv[i] * rs;
        dy[i] = (float)(rs * (gamma[i] * (double)dy[i] - sv[i] * rs * dot));
      }
    }
  for (int i = 0; i < d; i++) dgamma[i] += (float)dg[i];
  free(dg);
}

/* ---- rt_mla.h ---- */

/* qkv's column of element c of kv_b head j: k_nope in the key head, v in the value head. */
static long long mla_kv_col(int heads, int nope, int rope, int dv, int j, int c) {
  const long long qc = (long long)heads * (nope + rope);
  return c < nope ? qc + (long long)j * (nope + rope) + c : 2 * qc + (long long)j * dv + (c - nope);
}

void rt_ref_mla_kv_scatter(const float *kvb, float *qkv, long long rows, int ld, int heads, int nope, int rope, int dv) {
  for (long long r = 0; r < rows; r++)
    for (int j = 0; j < heads; j++)
      for (int c = 0; c < nope + dv; c++)
        qkv[r * ld + mla_kv_col(heads, nope, rope, dv, j, c)] = kvb[(r * heads + j) * (nope + dv) + c];
}

void rt_ref_mla_kv_gather(const float *dqkv, float *dkvb, long long rows, int ld, int heads, int nope, int rope, int dv) {
  for (long long r = 0; r < rows; r++)
    for (int j = 0; j < heads; j++)
      for (int c = 0; c < nope + dv; c++)
        dkvb[(r * heads + j) * (nope + dv) + c] = dqkv[r * ld + mla_kv_col(heads, nope, rope, dv, j, c)];
}

/* The pair (x1, x2) rotated by angle a (sign -1: by -a). */
static void rot(double x1, double x2, double a, double sign, double *y1, double *y2) {
  const double cs = cos(a), sn = sign * sin(a);
  *y1 = x1 * cs - x2 * sn, *y2 = x2 * cs + x1 * sn;
}

void rt_ref_mla_rope_fwd(float *qkv, int ld, const float *kr, int kr_ld, long long rows, int heads, int nope, int rope,
                         int seq, const float *inv_freq) {
  const int half = rope / 2, dqk = nope + rope;
  for (long long r = 0; r < rows; r++)
    for (int i = 0; i < half; i++) {
      const double a = (double)(r % seq) * inv_freq[i];
      double y1, y2;
      for (int j = 0; j < heads; j++) {
        float *v = qkv + r * ld + (long long)j * dqk + nope;
        rot(v[i], v[i + half], a, 1.0, &y1, &y2);
        v[i] = (float)y1, v[i + half] = (float)y2;
      }
      rot(kr[r * kr_ld + i], kr[r * kr_ld + i + half], a, 1.0, &y1, &y2);
      for (int j = 0; j < heads; j++) {
        float *k = qkv + r * ld + (long long)(heads + j) * dqk + nope;
        k[i] = (float)y1, k[i + half] = (float)y2;
      }
    }
}

void rt_ref_mla_rope_bwd(float *dqkv, int ld, float *dkr, int kr_ld, long long rows, int heads, int nope, int rope,
                         int seq, const float *inv_freq) {
  const int half = rope / 2, dqk = nope + rope;
  for (long long r = 0; r < rows; r++)
    for (int i = 0; i < half; i++) {
      const double a = (double)(r % seq) * inv_freq[i];
      double y1, y2, s1 = 0, s2 = 0;
      for (int j = 0; j < heads; j++) {
        float *v = dqkv + r * ld + (long long)j * dqk + nope;
        rot(v[i], v[i + half], a, -1.0, &y1, &y2);
        v[i] = (float)y1, v[i + half] = (float)y2;
        const float *k = dqkv + r * ld + (long long)(heads + j) * dqk + nope;
        s1 += k[i], s2 += k[i + half];
      }
      rot(s1, s2, a, -1.0, &y1, &y2);
      dkr[r * kr_ld + i] = (float)y1, dkr[r * kr_ld + i + half] = (float)y2;
    }
}

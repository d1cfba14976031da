/* exec_ref.c — float64 reference GPT decoder stack (see exec_ref.h).
 * Written for clarity, not speed: every loop is the textbook formula, and each
 * backward step sits right under the comment naming the forward it undoes. */
#include "exec_ref.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int exec_ref_config_check(const exec_ref_config *c, ts_err *e) {
  if (c->vocab < 2) return ts_fail(e, NULL, "vocab", "must be >= 2 (got %d)", c->vocab);
  if (c->hidden < 1 || c->heads < 1 || c->hidden % c->heads)
    return ts_fail(e, NULL, "heads", "must divide hidden (%d, %d)", c->heads, c->hidden);
  if (c->kv_heads < 0 || (c->kv_heads > 0 && c->heads % c->kv_heads))
    return ts_fail(e, NULL, "kv_heads", "must divide heads (%d, %d)", c->kv_heads, c->heads);
  if (c->ffn < 1) return ts_fail(e, NULL, "ffn", "must be >= 1 (got %d)", c->ffn);
  if (c->layers < 1) return ts_fail(e, NULL, "layers", "must be >= 1 (got %d)", c->layers);
  if (c->seq < 1 || c->batch < 1) return ts_fail(e, NULL, "batch", "seq and batch must be >= 1");
  if (!(c->norm_eps > 0)) return ts_fail(e, NULL, "norm_eps", "must be > 0");
  return 0;
}

static int add_tensor(exec_tensor *t, int cap, int n, const char *name, exec_tensor_kind kind, int layer,
                      size_t *offset, size_t rows, size_t cols) {
  if (n < cap) {
    snprintf(t[n].name, sizeof t[n].name, "%s", name);
    t[n].kind = kind;
    t[n].layer = layer;
    t[n].offset = *offset;
    t[n].rows = rows;
    t[n].cols = cols;
  }
  *offset += rows * cols;
  return n + 1;
}

int exec_ref_tensors(const exec_ref_config *c, exec_tensor *t, int cap, size_t *total) {
  size_t off = 0, h = (size_t)c->hidden;
  size_t fc1_cols = (size_t)c->ffn * (c->act == EXEC_ACT_SWIGLU ? 2 : 1);
  int n = 0, ln = c->norm == EXEC_NORM_LAYERNORM;
  char name[32];
  n = add_tensor(t, cap, n, "wte", EXEC_T_WTE, -1, &off, (size_t)c->vocab, h);
  n = add_tensor(t, cap, n, "wpe", EXEC_T_WPE, -1, &off, (size_t)c->seq, h);
  for (int l = 0; l < c->layers; l++) {
#define LAYER_TENSOR(suffix, kind, r, cc)                                                                    \
  snprintf(name, sizeof name, "layer%d." suffix, l);                                                         \
  n = add_tensor(t, cap, n, name, kind, l, &off, r, cc)
    LAYER_TENSOR("ln1.g", EXEC_T_LN1_G, 1, h);
    if (ln) { LAYER_TENSOR("ln1.b", EXEC_T_LN1_B, 1, h); }
    LAYER_TENSOR("qkv", EXEC_T_QKV, h, (size_t)exec_ref_qkv_cols(c));
    LAYER_TENSOR("attn_out", EXEC_T_ATTN_OUT, h, h);
    LAYER_TENSOR("ln2.g", EXEC_T_LN2_G, 1, h);
    if (ln) { LAYER_TENSOR("ln2.b", EXEC_T_LN2_B, 1, h); }
    LAYER_TENSOR("fc1", EXEC_T_FC1, h, fc1_cols);
    LAYER_TENSOR("fc2", EXEC_T_FC2, (size_t)c->ffn, h);
#undef LAYER_TENSOR
  }
  n = add_tensor(t, cap, n, "lnf.g", EXEC_T_LNF_G, -1, &off, 1, h);
  if (ln) n = add_tensor(t, cap, n, "lnf.b", EXEC_T_LNF_B, -1, &off, 1, h);
  *total = off;
  return n;
}

/* splitmix64: small, fixed, and the same on every machine. */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double next_uniform(uint64_t *s) { return ((double)(next_u64(s) >> 11) + 0.5) / 9007199254740992.0; }
static double next_normal(uint64_t *s) {
  double u1 = next_uniform(s), u2 = next_uniform(s);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double exec_ref_round_bf16(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u) return x; /* inf, nan */
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  memcpy(&f, &u, sizeof f);
  return (double)f;
}

void exec_ref_init(const exec_ref_config *c, unsigned long long seed, int round_bf16, double *params) {
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  int n = exec_ref_tensors(c, t, EXEC_REF_MAX_TENSORS, &total);
  uint64_t s = seed;
  double out_std = 0.02 / sqrt(2.0 * c->layers);
  for (int i = 0; i < n && i < EXEC_REF_MAX_TENSORS; i++) {
    double *p = params + t[i].offset;
    size_t cnt = t[i].rows * t[i].cols;
    switch (t[i].kind) {
    case EXEC_T_LN1_G: case EXEC_T_LN2_G: case EXEC_T_LNF_G:
      for (size_t j = 0; j < cnt; j++) p[j] = 1.0;
      break;
    case EXEC_T_LN1_B: case EXEC_T_LN2_B: case EXEC_T_LNF_B:
      for (size_t j = 0; j < cnt; j++) p[j] = 0.0;
      break;
    default: {
      double sd = (t[i].kind == EXEC_T_ATTN_OUT || t[i].kind == EXEC_T_FC2) ? out_std : 0.02;
      for (size_t j = 0; j < cnt; j++) p[j] = sd * next_normal(&s);
    }
    }
    if (round_bf16)
      for (size_t j = 0; j < cnt; j++) p[j] = exec_ref_round_bf16(p[j]);
  }
}

void exec_ref_tokens(const exec_ref_config *c, unsigned long long seed, int *tokens, int *targets) {
  uint64_t s = seed ^ 0x5bd1e995ull;
  int n = c->batch * c->seq;
  for (int i = 0; i < n; i++) tokens[i] = (int)(next_u64(&s) % (uint64_t)c->vocab);
  for (int b = 0; b < c->batch; b++)
    for (int i = 0; i < c->seq; i++) {
      int at = b * c->seq + i;
      targets[at] = i + 1 < c->seq ? tokens[at + 1] : (int)(next_u64(&s) % (uint64_t)c->vocab);
    }
}

/* ---- dense helpers on row-major matrices ---- */

/* C[m x n] (+)= A[m x k] . B[k x n] */
static void mm_nn(int m, int n, int k, const double *A, const double *B, double *C, int accumulate) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = accumulate ? C[(size_t)i * n + j] : 0.0;
      for (int p = 0; p < k; p++) s += A[(size_t)i * k + p] * B[(size_t)p * n + j];
      C[(size_t)i * n + j] = s;
    }
}
/* C[m x n] (+)= A[m x k] . B[n x k]^T */
static void mm_nt(int m, int n, int k, const double *A, const double *B, double *C, int accumulate) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = accumulate ? C[(size_t)i * n + j] : 0.0;
      for (int p = 0; p < k; p++) s += A[(size_t)i * k + p] * B[(size_t)j * k + p];
      C[(size_t)i * n + j] = s;
    }
}
/* C[m x n] (+)= A[k x m]^T . B[k x n] */
static void mm_tn(int m, int n, int k, const double *A, const double *B, double *C, int accumulate) {
  if (!accumulate) memset(C, 0, sizeof(double) * (size_t)m * n);
  for (int p = 0; p < k; p++)
    for (int i = 0; i < m; i++) {
      double a = A[(size_t)p * m + i];
      for (int j = 0; j < n; j++) C[(size_t)i * n + j] += a * B[(size_t)p * n + j];
    }
}

/* ---- norms ---- */

/* y = norm(x) per row; keeps rstd (and mean for LayerNorm) for backward. */
static void norm_fwd(const exec_ref_config *c, int rows, const double *x, const double *g, const double *b,
                     double *y, double *mean, double *rstd) {
  int h = c->hidden;
  for (int r = 0; r < rows; r++) {
    const double *xr = x + (size_t)r * h;
    double mu = 0, var = 0;
    if (c->norm == EXEC_NORM_LAYERNORM) {
      for (int j = 0; j < h; j++) mu += xr[j];
      mu /= h;
    }
    for (int j = 0; j < h; j++) var += (xr[j] - mu) * (xr[j] - mu);
    var /= h;
    double rs = 1.0 / sqrt(var + c->norm_eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int j = 0; j < h; j++) y[(size_t)r * h + j] = (xr[j] - mu) * rs * g[j] + (b ? b[j] : 0.0);
  }
}

/* dx += d norm / dx . dy; dg, db accumulate. */
static void norm_bwd(const exec_ref_config *c, int rows, const double *x, const double *g, const double *mean,
                     const double *rstd, const double *dy, double *dx, double *dg, double *db) {
  int h = c->hidden, ln = c->norm == EXEC_NORM_LAYERNORM;
  for (int r = 0; r < rows; r++) {
    const double *xr = x + (size_t)r * h, *dyr = dy + (size_t)r * h;
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int j = 0; j < h; j++) {
      double xhat = (xr[j] - mean[r]) * rstd[r];
      double dxhat = dyr[j] * g[j];
      dg[j] += dyr[j] * xhat;
      if (db) db[j] += dyr[j];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
    }
    double mean_dxhat = ln ? sum_dxhat / h : 0.0, mean_dxhat_xhat = sum_dxhat_xhat / h;
    for (int j = 0; j < h; j++) {
      double xhat = (xr[j] - mean[r]) * rstd[r];
      dx[(size_t)r * h + j] += rstd[r] * (dyr[j] * g[j] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  }
}

/* ---- activations ---- */

static const double GELU_C = 0.7978845608028654; /* sqrt(2/pi) */
static double gelu(double u) { return 0.5 * u * (1.0 + tanh(GELU_C * (u + 0.044715 * u * u * u))); }
static double gelu_grad(double u) {
  double t = tanh(GELU_C * (u + 0.044715 * u * u * u));
  return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * GELU_C * (1.0 + 3.0 * 0.044715 * u * u);
}
static double sigmoid(double z) { return 1.0 / (1.0 + exp(-z)); }

/* a[T x F] = act(u); u is [T x F] (GELU) or [T x 2F] = [gate | up] (SwiGLU). */
static void act_fwd(const exec_ref_config *c, int rows, const double *u, double *a) {
  int f = c->ffn;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < f; j++) {
      if (c->act == EXEC_ACT_GELU) {
        a[(size_t)r * f + j] = gelu(u[(size_t)r * f + j]);
      } else {
        double gt = u[(size_t)r * 2 * f + j], up = u[(size_t)r * 2 * f + f + j];
        a[(size_t)r * f + j] = gt * sigmoid(gt) * up;
      }
    }
}
static void act_bwd(const exec_ref_config *c, int rows, const double *u, const double *da, double *du) {
  int f = c->ffn;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < f; j++) {
      double d = da[(size_t)r * f + j];
      if (c->act == EXEC_ACT_GELU) {
        du[(size_t)r * f + j] = d * gelu_grad(u[(size_t)r * f + j]);
      } else {
        double gt = u[(size_t)r * 2 * f + j], up = u[(size_t)r * 2 * f + f + j], sg = sigmoid(gt);
        du[(size_t)r * 2 * f + j] = d * up * sg * (1.0 + gt * (1.0 - sg));
        du[(size_t)r * 2 * f + f + j] = d * gt * sg;
      }
    }
}

/* ---- causal attention over qkv [T x W] (W = exec_ref_qkv_cols) into out [T x h]; P keeps softmax ----
 * Query head hd reads key/value head hd / G (G = heads / kv_heads). */
#define Q_AT(row) (qkv + (size_t)(row) * W + hd * d)
#define K_AT(base, row) (base + (size_t)(row) * W + h + (hd / G) * d)
#define V_AT(base, row) (base + (size_t)(row) * W + h + kvd + (hd / G) * d)

static void attn_fwd(const exec_ref_config *c, const double *qkv, double *P, double *out) {
  int S = c->seq, h = c->hidden, H = c->heads, d = h / H, W = exec_ref_qkv_cols(c);
  int G = H / exec_ref_kv_heads(c), kvd = exec_ref_kv_heads(c) * d;
  double scale = 1.0 / sqrt((double)d);
  for (int b = 0; b < c->batch; b++)
    for (int hd = 0; hd < H; hd++) {
      double *Pbh = P + ((size_t)b * H + hd) * S * S;
      for (int i = 0; i < S; i++) {
        const double *q = Q_AT((size_t)b * S + i);
        double mx = -INFINITY;
        for (int t = 0; t < S; t++) {
          double s = 0;
          if (t <= i) {
            const double *k = K_AT(qkv, (size_t)b * S + t);
            for (int p = 0; p < d; p++) s += q[p] * k[p];
            s *= scale;
            if (s > mx) mx = s;
          }
          Pbh[(size_t)i * S + t] = s;
        }
        double sum = 0;
        for (int t = 0; t < S; t++) {
          double e = t <= i ? exp(Pbh[(size_t)i * S + t] - mx) : 0.0;
          Pbh[(size_t)i * S + t] = e;
          sum += e;
        }
        double *o = out + ((size_t)b * S + i) * h + hd * d;
        for (int p = 0; p < d; p++) o[p] = 0;
        for (int t = 0; t <= i; t++) {
          double pr = Pbh[(size_t)i * S + t] /= sum;
          const double *v = V_AT(qkv, (size_t)b * S + t);
          for (int p = 0; p < d; p++) o[p] += pr * v[p];
        }
      }
    }
}

static void attn_bwd(const exec_ref_config *c, const double *qkv, const double *P, const double *dout,
                     double *dqkv, double *dP_row) {
  int S = c->seq, h = c->hidden, H = c->heads, d = h / H, W = exec_ref_qkv_cols(c);
  int G = H / exec_ref_kv_heads(c), kvd = exec_ref_kv_heads(c) * d;
  double scale = 1.0 / sqrt((double)d);
  for (int b = 0; b < c->batch; b++)
    for (int hd = 0; hd < H; hd++) {
      const double *Pbh = P + ((size_t)b * H + hd) * S * S;
      for (int i = 0; i < S; i++) {
        const double *dO = dout + ((size_t)b * S + i) * h + hd * d;
        /* o_i = sum_t P_it v_t: dP_it = dO_i . v_t, dv_t += P_it dO_i */
        double dot = 0;
        for (int t = 0; t <= i; t++) {
          const double *v = V_AT(qkv, (size_t)b * S + t);
          double *dv = V_AT(dqkv, (size_t)b * S + t);
          double s = 0;
          for (int p = 0; p < d; p++) {
            s += dO[p] * v[p];
            dv[p] += Pbh[(size_t)i * S + t] * dO[p];
          }
          dP_row[t] = s;
          dot += Pbh[(size_t)i * S + t] * s;
        }
        /* softmax: dS_it = P_it (dP_it - sum_t P_it dP_it); S_it = scale q_i . k_t */
        const double *q = Q_AT((size_t)b * S + i);
        double *dq = dqkv + ((size_t)b * S + i) * W + hd * d;
        for (int t = 0; t <= i; t++) {
          double ds = Pbh[(size_t)i * S + t] * (dP_row[t] - dot) * scale;
          const double *k = K_AT(qkv, (size_t)b * S + t);
          double *dk = K_AT(dqkv, (size_t)b * S + t);
          for (int p = 0; p < d; p++) {
            dq[p] += ds * k[p];
            dk[p] += ds * q[p];
          }
        }
      }
    }
}

#undef Q_AT
#undef K_AT
#undef V_AT

/* ---- the whole stack ---- */

typedef struct {  /* what one layer keeps for backward */
  double *x_in, *n1, *mean1, *rstd1, *qkv, *P, *attn, *x_mid, *n2, *mean2, *rstd2, *u, *a;
} layer_saved;

int exec_ref_loss_grad(const exec_ref_config *c, const double *params, const int *tokens, const int *targets,
                       double *loss, double *grads, ts_err *e) {
  if (exec_ref_config_check(c, e)) return -1;
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  int nt = exec_ref_tensors(c, t, EXEC_REF_MAX_TENSORS, &total);
  if (nt > EXEC_REF_MAX_TENSORS) return ts_fail(e, NULL, "layers", "too many tensors for the reference");
  const int T = c->batch * c->seq, h = c->hidden, V = c->vocab, S = c->seq, F = c->ffn, L = c->layers;
  const int QW = exec_ref_qkv_cols(c); /* qkv width: hidden + 2 kv_heads x head_dim */
  const int U = c->act == EXEC_ACT_SWIGLU ? 2 * F : F, ln = c->norm == EXEC_NORM_LAYERNORM;
  const int per_layer = ln ? 8 : 6;

  /* One arena for every activation: sizes in doubles. */
  size_t th = (size_t)T * h, layer_doubles = th * 5 + (size_t)T * 4 + (size_t)T * QW +
                                             (size_t)c->batch * c->heads * S * S + (size_t)T * U + (size_t)T * F;
  size_t arena_doubles = layer_doubles * L + th * 3 + (size_t)T * 2 + (size_t)T * V + th * 2 +
                         (size_t)T * QW + (size_t)T * U + (size_t)T * F + (size_t)S;
  double *arena = calloc(arena_doubles, sizeof(double));
  layer_saved *sv = calloc((size_t)L, sizeof *sv);
  if (!arena || !sv) {
    free(arena);
    free(sv);
    return ts_fail_sys(e, "exec_ref: out of memory (%zu doubles)", arena_doubles);
  }
  double *cur = arena;
#define TAKE(n) (cur += (n), cur - (n))
  for (int l = 0; l < L; l++) {
    sv[l].x_in = TAKE(th); sv[l].n1 = TAKE(th); sv[l].mean1 = TAKE(T); sv[l].rstd1 = TAKE(T);
    sv[l].qkv = TAKE((size_t)T * QW); sv[l].P = TAKE((size_t)c->batch * c->heads * S * S);
    sv[l].attn = TAKE(th); sv[l].x_mid = TAKE(th); sv[l].n2 = TAKE(th); sv[l].mean2 = TAKE(T);
    sv[l].rstd2 = TAKE(T); sv[l].u = TAKE((size_t)T * U); sv[l].a = TAKE((size_t)T * F);
  }
  double *x = TAKE(th), *xf = TAKE(th), *nf = TAKE(th), *meanf = TAKE(T), *rstdf = TAKE(T);
  double *logits = TAKE((size_t)T * V), *dx = TAKE(th), *dtmp = TAKE(th), *dqkv = TAKE((size_t)T * QW);
  double *du = TAKE((size_t)T * U), *da = TAKE((size_t)T * F), *dP_row = TAKE(S);
#undef TAKE

  const double *wte = params + t[0].offset, *wpe = params + t[1].offset;
#define P_OF(l, i) (params + t[2 + (l) * per_layer + (i)].offset)
#define G_OF(l, i) (grads + t[2 + (l) * per_layer + (i)].offset)
  /* index of each tensor inside a layer */
  const int I_LN1G = 0, I_LN1B = ln ? 1 : -1, I_QKV = ln ? 2 : 1, I_OUT = I_QKV + 1, I_LN2G = I_OUT + 1,
            I_LN2B = ln ? I_LN2G + 1 : -1, I_FC1 = ln ? I_LN2G + 2 : I_LN2G + 1, I_FC2 = I_FC1 + 1;
  const double *lnf_g = params + t[2 + L * per_layer].offset;
  const double *lnf_b = ln ? params + t[3 + L * per_layer].offset : NULL;

  /* embedding: x = wte[token] + wpe[position] */
  for (int r = 0; r < T; r++)
    for (int j = 0; j < h; j++) x[(size_t)r * h + j] = wte[(size_t)tokens[r] * h + j] + wpe[(size_t)(r % S) * h + j];

  for (int l = 0; l < L; l++) {
    layer_saved *s = &sv[l];
    memcpy(s->x_in, x, sizeof(double) * th);
    norm_fwd(c, T, x, P_OF(l, I_LN1G), ln ? P_OF(l, I_LN1B) : NULL, s->n1, s->mean1, s->rstd1);
    mm_nn(T, QW, h, s->n1, P_OF(l, I_QKV), s->qkv, 0);
    attn_fwd(c, s->qkv, s->P, s->attn);
    mm_nn(T, h, h, s->attn, P_OF(l, I_OUT), x, 1); /* x += attn . Wo */
    memcpy(s->x_mid, x, sizeof(double) * th);
    norm_fwd(c, T, x, P_OF(l, I_LN2G), ln ? P_OF(l, I_LN2B) : NULL, s->n2, s->mean2, s->rstd2);
    mm_nn(T, U, h, s->n2, P_OF(l, I_FC1), s->u, 0);
    act_fwd(c, T, s->u, s->a);
    mm_nn(T, h, F, s->a, P_OF(l, I_FC2), x, 1); /* x += a . W2 */
  }
  memcpy(xf, x, sizeof(double) * th);
  norm_fwd(c, T, xf, lnf_g, lnf_b, nf, meanf, rstdf);
  mm_nt(T, V, h, nf, wte, logits, 0);

  /* mean cross-entropy; logits become dloss/dlogits */
  double total_loss = 0;
  for (int r = 0; r < T; r++) {
    double *z = logits + (size_t)r * V, mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
    total_loss += mx + log(sum) - z[targets[r]];
    for (int v = 0; v < V; v++) z[v] = exp(z[v] - mx) / sum / T;
    z[targets[r]] -= 1.0 / T;
  }
  *loss = total_loss / T;

  if (grads) {
    memset(grads, 0, sizeof(double) * total);
    double *g_wte = grads + t[0].offset, *g_wpe = grads + t[1].offset;
    double *g_lnf_g = grads + t[2 + L * per_layer].offset;
    double *g_lnf_b = ln ? grads + t[3 + L * per_layer].offset : NULL;
    /* logits = nf . wte^T */
    mm_nn(T, h, V, logits, wte, dtmp, 0);
    mm_tn(V, h, T, logits, nf, g_wte, 1);
    memset(dx, 0, sizeof(double) * th);
    norm_bwd(c, T, xf, lnf_g, meanf, rstdf, dtmp, dx, g_lnf_g, g_lnf_b);
    for (int l = L - 1; l >= 0; l--) {
      layer_saved *s = &sv[l];
      /* x_out = x_mid + a . W2 */
      mm_tn(F, h, T, s->a, dx, G_OF(l, I_FC2), 1);
      mm_nt(T, F, h, dx, P_OF(l, I_FC2), da, 0);
      act_bwd(c, T, s->u, da, du);
      mm_tn(h, U, T, s->n2, du, G_OF(l, I_FC1), 1);
      mm_nt(T, h, U, du, P_OF(l, I_FC1), dtmp, 0);
      norm_bwd(c, T, s->x_mid, P_OF(l, I_LN2G), s->mean2, s->rstd2, dtmp, dx, G_OF(l, I_LN2G),
               ln ? G_OF(l, I_LN2B) : NULL);
      /* x_mid = x_in + attn . Wo */
      mm_tn(h, h, T, s->attn, dx, G_OF(l, I_OUT), 1);
      mm_nt(T, h, h, dx, P_OF(l, I_OUT), dtmp, 0);
      memset(dqkv, 0, sizeof(double) * T * QW);
      attn_bwd(c, s->qkv, s->P, dtmp, dqkv, dP_row);
      mm_tn(h, QW, T, s->n1, dqkv, G_OF(l, I_QKV), 1);
      mm_nt(T, h, QW, dqkv, P_OF(l, I_QKV), dtmp, 0);
      norm_bwd(c, T, s->x_in, P_OF(l, I_LN1G), s->mean1, s->rstd1, dtmp, dx, G_OF(l, I_LN1G),
               ln ? G_OF(l, I_LN1B) : NULL);
    }
    for (int r = 0; r < T; r++)
      for (int j = 0; j < h; j++) {
        g_wte[(size_t)tokens[r] * h + j] += dx[(size_t)r * h + j];
        g_wpe[(size_t)(r % S) * h + j] += dx[(size_t)r * h + j];
      }
  }
#undef P_OF
#undef G_OF
  free(arena);
  free(sv);
  return 0;
}

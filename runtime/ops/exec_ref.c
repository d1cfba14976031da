/* exec_ref.c — float64 reference GPT decoder stack (see exec_ref.h).
 * Written for clarity, not speed: every loop is the textbook formula, and each
 * backward step sits right under the comment naming the forward it undoes. */
#include "exec_ref.h"
#include "exec_ref_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int exec_ref_config_check(const exec_ref_config *c, ts_err *e) {
  if (c->vocab < 2) return ts_fail(e, NULL, "vocab", "must be >= 2 (got %d)", c->vocab);
  if (c->hidden < 1 || c->heads < 1 || (c->head_dim <= 0 && c->hidden % c->heads))
    return ts_fail(e, NULL, "heads", "must divide hidden (%d, %d) unless head_dim is set", c->heads, c->hidden);
  if (c->head_dim < 0) return ts_fail(e, NULL, "head_dim", "must be >= 0 (got %d)", c->head_dim);
  if (c->kv_heads < 0 || (c->kv_heads > 0 && c->heads % c->kv_heads))
    return ts_fail(e, NULL, "kv_heads", "must divide heads (%d, %d)", c->kv_heads, c->heads);
  if (c->ffn < 1) return ts_fail(e, NULL, "ffn", "must be >= 1 (got %d)", c->ffn);
  if (c->layers < 1) return ts_fail(e, NULL, "layers", "must be >= 1 (got %d)", c->layers);
  if (c->seq < 1 || c->batch < 1) return ts_fail(e, NULL, "batch", "seq and batch must be >= 1");
  if (!(c->norm_eps > 0)) return ts_fail(e, NULL, "norm_eps", "must be > 0");
  if (c->rope_theta < 0 || (c->rope_theta > 0 && exec_ref_rope_dim(c) % 2))
    return ts_fail(e, NULL, "rope_theta", "must be >= 0, and RoPE needs an even head dimension");
  if (c->rope_factor > 0 && !(c->rope_orig_max > 0 && c->rope_low_freq > 0 && c->rope_high_freq > c->rope_low_freq))
    return ts_fail(e, NULL, "rope_scaling", "needs original_max_position > 0 and 0 < low_freq_factor < high_freq_factor");
  if (exec_ref_is_mla(c)) {
    if (c->q_lora < 1 || c->qk_nope < 1 || c->qk_rope < 1 || c->v_head < 1 || c->qk_rope > 1024)
      return ts_fail(e, NULL, "q_lora_rank", "multi-head latent attention needs q_lora, qk_nope, v_head >= 1 and "
                     "qk_rope in [1, 1024]");
    if ((c->kv_heads > 0 && c->kv_heads != c->heads) || c->head_dim > 0 || c->qkv_bias || c->qk_norm)
      return ts_fail(e, NULL, "attention", "multi-head latent attention has one key/value head per query head, its "
                     "own head dimensions, no qkv bias and no QK norm");
  } else if (c->q_lora || c->qk_nope || c->qk_rope || c->v_head || c->kv_lora < 0) {
    return ts_fail(e, NULL, "kv_lora_rank", "the latent attention's fields need kv_lora > 0");
  }
  if (c->experts == 0) return 0;
  if (c->experts < 2 || c->experts > 1024)
    return ts_fail(e, NULL, "experts", "must be in [2, 1024] (got %d)", c->experts);
  if (c->top_k < 1 || c->top_k > c->experts || c->top_k > 16)
    return ts_fail(e, NULL, "top_k", "must be in [1, min(experts, 16)] (got %d)", c->top_k);
  if (c->expert_ffn < 1 || c->shared_ffn < 0)
    return ts_fail(e, NULL, "expert_ffn_hidden", "must be >= 1, and the shared FFN >= 0");
  if (c->dense_layers < 0 || c->dense_layers > c->layers)
    return ts_fail(e, NULL, "dense_layers", "must be in [0, layers] (got %d)", c->dense_layers);
  if (c->linear_bias) return ts_fail(e, NULL, "linear_bias", "no linear biases with experts");
  if (!c->router_sigmoid && (c->router_groups || c->router_scale > 0 || c->router_bias || c->router_bias_rate > 0))
    return ts_fail(e, NULL, "router", "groups, scaling and the expert bias go with the sigmoid router only");
  if (c->router_scale < 0 || c->router_bias_rate < 0)
    return ts_fail(e, NULL, "router_topk_scaling_factor", "the scaling and the bias update rate must be >= 0");
  if (c->router_groups) {
    const int per = c->router_groups > 0 ? c->experts / c->router_groups : 0;
    const int n = c->router_group_topk > 0 ? c->top_k / c->router_group_topk : 0;
    if (c->router_groups < 1 || c->router_groups > 32 || c->experts % c->router_groups || c->router_group_topk < 1 ||
        c->router_group_topk > c->router_groups || n < 1 || n > per || c->router_group_topk * per < c->top_k)
      return ts_fail(e, NULL, "router_num_groups", "%d groups, %d kept: must divide the experts (at most 32), and "
                     "the kept groups hold top_k, each at least top_k / kept", c->router_groups, c->router_group_topk);
  }
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

/* The tensor kinds of layer l, in flat order; returns their count (at most EXEC_REF_LAYER_KINDS). */
#define EXEC_REF_LAYER_KINDS 24
static int layer_kinds(const exec_ref_config *c, int l, exec_tensor_kind *k) {
  int n = 0, ln = c->norm == EXEC_NORM_LAYERNORM;
  k[n++] = EXEC_T_LN1_G;
  if (ln) k[n++] = EXEC_T_LN1_B;
  if (exec_ref_is_mla(c)) {
    k[n++] = EXEC_T_Q_A, k[n++] = EXEC_T_Q_A_NORM, k[n++] = EXEC_T_Q_B;
    k[n++] = EXEC_T_KV_A, k[n++] = EXEC_T_KV_A_NORM, k[n++] = EXEC_T_KV_B;
  } else {
    k[n++] = EXEC_T_QKV;
    if (c->qkv_bias) k[n++] = EXEC_T_QKV_B;
    if (c->qk_norm) k[n++] = EXEC_T_Q_NORM, k[n++] = EXEC_T_K_NORM;
  }
  k[n++] = EXEC_T_ATTN_OUT;
  if (c->linear_bias) k[n++] = EXEC_T_ATTN_OUT_B;
  k[n++] = EXEC_T_LN2_G;
  if (ln) k[n++] = EXEC_T_LN2_B;
  if (exec_ref_layer_is_moe(c, l)) {
    k[n++] = EXEC_T_ROUTER;
    k[n++] = EXEC_T_EXPERT_FC1;
    k[n++] = EXEC_T_EXPERT_FC2;
    if (c->shared_ffn > 0) k[n++] = EXEC_T_SHARED_FC1, k[n++] = EXEC_T_SHARED_FC2;
    return n;
  }
  k[n++] = EXEC_T_FC1;
  if (c->linear_bias) k[n++] = EXEC_T_FC1_B;
  k[n++] = EXEC_T_FC2;
  if (c->linear_bias) k[n++] = EXEC_T_FC2_B;
  return n;
}

static const char *layer_suffix(exec_tensor_kind k) {
  switch (k) {
  case EXEC_T_LN1_G: return "ln1.g";
  case EXEC_T_LN1_B: return "ln1.b";
  case EXEC_T_QKV: return "qkv";
  case EXEC_T_QKV_B: return "qkv.b";
  case EXEC_T_ATTN_OUT: return "attn_out";
  case EXEC_T_ATTN_OUT_B: return "attn_out.b";
  case EXEC_T_LN2_G: return "ln2.g";
  case EXEC_T_LN2_B: return "ln2.b";
  case EXEC_T_FC1: return "fc1";
  case EXEC_T_FC1_B: return "fc1.b";
  case EXEC_T_FC2: return "fc2";
  case EXEC_T_ROUTER: return "router";
  case EXEC_T_EXPERT_FC1: return "expert_fc1";
  case EXEC_T_EXPERT_FC2: return "expert_fc2";
  case EXEC_T_SHARED_FC1: return "shared_fc1";
  case EXEC_T_SHARED_FC2: return "shared_fc2";
  case EXEC_T_Q_NORM: return "q_norm";
  case EXEC_T_K_NORM: return "k_norm";
  case EXEC_T_Q_A: return "q_a";
  case EXEC_T_Q_A_NORM: return "q_a_norm";
  case EXEC_T_Q_B: return "q_b";
  case EXEC_T_KV_A: return "kv_a";
  case EXEC_T_KV_A_NORM: return "kv_a_norm";
  case EXEC_T_KV_B: return "kv_b";
  default: return "fc2.b";
  }
}

/* Index of layer l's first tensor (l = layers: of lnf.g). */
static int layer_base(const exec_ref_config *c, int l) {
  exec_tensor_kind k[EXEC_REF_LAYER_KINDS];
  int base = c->rope_theta > 0 ? 1 : 2;
  if (c->experts == 0) return base + l * layer_kinds(c, 0, k); /* every layer alike */
  for (int i = 0; i < l; i++) base += layer_kinds(c, i, k);
  return base;
}

int exec_ref_tensor_index(const exec_ref_config *c, int layer, exec_tensor_kind kind) {
  exec_tensor_kind k[EXEC_REF_LAYER_KINDS];
  int ln = c->norm == EXEC_NORM_LAYERNORM;
  int after = layer_base(c, c->layers); /* lnf.g */
  switch (kind) {
  case EXEC_T_WTE: return 0;
  case EXEC_T_WPE: return c->rope_theta > 0 ? -1 : 1;
  case EXEC_T_LNF_G: return after;
  case EXEC_T_LNF_B: return ln ? after + 1 : -1;
  case EXEC_T_LM_HEAD: return c->untied ? after + 1 + ln : -1;
  default: break;
  }
  if (layer < 0 || layer >= c->layers) return -1;
  int per = layer_kinds(c, layer, k), base = layer_base(c, layer);
  for (int i = 0; i < per; i++)
    if (k[i] == kind) return base + i;
  return -1;
}

int exec_ref_head_tensor(const exec_ref_config *c) { return c->untied ? exec_ref_tensor_index(c, -1, EXEC_T_LM_HEAD) : 0; }

int exec_ref_tensors(const exec_ref_config *c, exec_tensor *t, int cap, size_t *total) {
  size_t off = 0, h = (size_t)c->hidden;
  size_t fc1_cols = (size_t)c->ffn * (c->act == EXEC_ACT_SWIGLU ? 2 : 1);
  int n = 0, ln = c->norm == EXEC_NORM_LAYERNORM;
  char name[32];
  exec_tensor_kind k[EXEC_REF_LAYER_KINDS];
  const size_t E = (size_t)c->experts, fe = (size_t)c->expert_ffn, fs = (size_t)c->shared_ffn;
  const size_t gl = c->act == EXEC_ACT_SWIGLU ? 2 : 1; /* SwiGLU: [gate | up] */
  n = add_tensor(t, cap, n, "wte", EXEC_T_WTE, -1, &off, (size_t)c->vocab, h);
  if (!(c->rope_theta > 0)) n = add_tensor(t, cap, n, "wpe", EXEC_T_WPE, -1, &off, (size_t)c->seq, h);
  for (int l = 0; l < c->layers; l++)
    for (int i = 0, per = layer_kinds(c, l, k); i < per; i++) {
      size_t rows = 1, cols = h;
      switch (k[i]) {
      case EXEC_T_QKV: rows = h; cols = (size_t)exec_ref_qkv_cols(c); break;
      case EXEC_T_QKV_B: cols = (size_t)exec_ref_qkv_cols(c); break;
      case EXEC_T_ATTN_OUT: rows = (size_t)exec_ref_attn_cols(c); break;
      case EXEC_T_Q_A: rows = h; cols = (size_t)c->q_lora; break;
      case EXEC_T_Q_A_NORM: cols = (size_t)c->q_lora; break;
      case EXEC_T_Q_B: rows = (size_t)c->q_lora; cols = (size_t)exec_ref_q_cols(c); break;
      case EXEC_T_KV_A: rows = h; cols = (size_t)(c->kv_lora + c->qk_rope); break;
      case EXEC_T_KV_A_NORM: cols = (size_t)c->kv_lora; break;
      case EXEC_T_KV_B: rows = (size_t)c->kv_lora; cols = (size_t)c->heads * (c->qk_nope + c->v_head); break;
      case EXEC_T_Q_NORM: case EXEC_T_K_NORM: cols = (size_t)exec_ref_head_dim(c); break;
      case EXEC_T_FC1: rows = h; cols = fc1_cols; break;
      case EXEC_T_FC1_B: cols = fc1_cols; break;
      case EXEC_T_FC2: rows = (size_t)c->ffn; break;
      case EXEC_T_ROUTER: rows = h; cols = E; break;
      case EXEC_T_EXPERT_FC1: rows = E * h; cols = gl * fe; break;
      case EXEC_T_EXPERT_FC2: rows = E * fe; break;
      case EXEC_T_SHARED_FC1: rows = h; cols = gl * fs; break;
      case EXEC_T_SHARED_FC2: rows = fs; break;
      default: break; /* norm gains and biases, attn_out.b, fc2.b: 1 x h */
      }
      snprintf(name, sizeof name, "layer%d.%s", l, layer_suffix(k[i]));
      n = add_tensor(t, cap, n, name, k[i], l, &off, rows, cols);
    }
  n = add_tensor(t, cap, n, "lnf.g", EXEC_T_LNF_G, -1, &off, 1, h);
  if (ln) n = add_tensor(t, cap, n, "lnf.b", EXEC_T_LNF_B, -1, &off, 1, h);
  if (c->untied) n = add_tensor(t, cap, n, "lm_head", EXEC_T_LM_HEAD, -1, &off, (size_t)c->vocab, h);
  *total = off;
  return n;
}

void exec_ref_rope_inv_freq(const exec_ref_config *c, int d, double *inv_freq) {
  const double pi = 3.141592653589793;
  for (int i = 0; i < d / 2; i++) {
    double f = pow(c->rope_theta, -2.0 * i / d);
    if (c->rope_factor > 0) { /* Llama 3.1: long wavelengths slowed by factor, short ones kept, a ramp between */
      double wavelen = 2.0 * pi / f, orig = c->rope_orig_max;
      double low_wl = orig / c->rope_low_freq, high_wl = orig / c->rope_high_freq;
      if (wavelen > low_wl) f /= c->rope_factor;
      else if (wavelen >= high_wl) {
        double smooth = (orig / wavelen - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
        f = (1.0 - smooth) * f / c->rope_factor + smooth * f;
      }
    }
    inv_freq[i] = f;
  }
}

void exec_ref_rope_row(double *x, int heads, int d, const double *inv_freq, int pos, int inverse) {
  for (int hd = 0; hd < heads; hd++) {
    double *v = x + (size_t)hd * d;
    for (int i = 0; i < d / 2; i++) {
      double a = pos * inv_freq[i], cs = cos(a), sn = inverse ? -sin(a) : sin(a);
      double x1 = v[i], x2 = v[i + d / 2];
      v[i] = x1 * cs - x2 * sn;
      v[i + d / 2] = x2 * cs + x1 * sn;
    }
  }
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
    case EXEC_T_Q_NORM: case EXEC_T_K_NORM: /* 1 + normal(0, 0.1): a weight not applied, or applied to the
                                              wrong head's columns, shows */
    case EXEC_T_Q_A_NORM: case EXEC_T_KV_A_NORM: /* (the latent norms' gains likewise) */
      for (size_t j = 0; j < cnt; j++) p[j] = 1.0 + 0.1 * next_normal(&s);
      break;
    default: {
      exec_tensor_kind k = t[i].kind;
      double sd = (k == EXEC_T_ATTN_OUT || k == EXEC_T_FC2 || k == EXEC_T_EXPERT_FC2 || k == EXEC_T_SHARED_FC2)
                      ? out_std
                      : k == EXEC_T_ROUTER ? 2.0 / sqrt((double)c->hidden) : 0.02;
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
void exec_ref_mm_nn(int m, int n, int k, const double *A, const double *B, double *C, int accumulate) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = accumulate ? C[(size_t)i * n + j] : 0.0;
      for (int p = 0; p < k; p++) s += A[(size_t)i * k + p] * B[(size_t)p * n + j];
      C[(size_t)i * n + j] = s;
    }
}
/* C[m x n] (+)= A[m x k] . B[n x k]^T */
void exec_ref_mm_nt(int m, int n, int k, const double *A, const double *B, double *C, int accumulate) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = accumulate ? C[(size_t)i * n + j] : 0.0;
      for (int p = 0; p < k; p++) s += A[(size_t)i * k + p] * B[(size_t)j * k + p];
      C[(size_t)i * n + j] = s;
    }
}
/* C[m x n] (+)= A[k x m]^T . B[k x n] */
void exec_ref_mm_tn(int m, int n, int k, const double *A, const double *B, double *C, int accumulate) {
  if (!accumulate) memset(C, 0, sizeof(double) * (size_t)m * n);
  for (int p = 0; p < k; p++)
    for (int i = 0; i < m; i++) {
      double a = A[(size_t)p * m + i];
      for (int j = 0; j < n; j++) C[(size_t)i * n + j] += a * B[(size_t)p * n + j];
    }
}

/* y[rows x cols] += b per row (b NULL: no bias); db += the column sums of dy. */
static void add_bias(int rows, int cols, const double *b, double *y) {
  if (!b) return;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < cols; j++) y[(size_t)r * cols + j] += b[j];
}
static void bias_grad(int rows, int cols, const double *dy, double *db) {
  if (!db) return;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < cols; j++) db[j] += dy[(size_t)r * cols + j];
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
void exec_ref_act_fwd(const exec_ref_config *c, int rows, int f, const double *u, double *a) {
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
void exec_ref_act_bwd(const exec_ref_config *c, int rows, int f, const double *u, const double *da, double *du) {
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

/* ---- causal attention over qkv [T x W] (W = exec_ref_qkv_cols) into out [T x Ac] (Ac = heads x dv); P keeps softmax ----
 * Query head hd reads key/value head hd / G (G = heads / kv_heads); queries and keys have d columns a head,
 * values dv (d but with MLA). */
#define Q_AT(row) (qkv + (size_t)(row) * W + hd * d)
#define K_AT(base, row) (base + (size_t)(row) * W + Qc + (hd / G) * d)
#define V_AT(base, row) (base + (size_t)(row) * W + Qc + kvd + (hd / G) * dv)

static void attn_fwd(const exec_ref_config *c, const double *qkv, double *P, double *out) {
  int S = c->seq, H = c->heads, d = exec_ref_head_dim(c), Qc = exec_ref_q_cols(c), W = exec_ref_qkv_cols(c);
  int G = H / exec_ref_kv_heads(c), kvd = exec_ref_kv_heads(c) * d, dv = exec_ref_v_dim(c), Ac = exec_ref_attn_cols(c);
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
        double *o = out + ((size_t)b * S + i) * Ac + hd * dv;
        for (int p = 0; p < dv; p++) o[p] = 0;
        for (int t = 0; t <= i; t++) {
          double pr = Pbh[(size_t)i * S + t] /= sum;
          const double *v = V_AT(qkv, (size_t)b * S + t);
          for (int p = 0; p < dv; p++) o[p] += pr * v[p];
        }
      }
    }
}

static void attn_bwd(const exec_ref_config *c, const double *qkv, const double *P, const double *dout,
                     double *dqkv, double *dP_row) {
  int S = c->seq, H = c->heads, d = exec_ref_head_dim(c), Qc = exec_ref_q_cols(c), W = exec_ref_qkv_cols(c);
  int G = H / exec_ref_kv_heads(c), kvd = exec_ref_kv_heads(c) * d, dv = exec_ref_v_dim(c), Ac = exec_ref_attn_cols(c);
  double scale = 1.0 / sqrt((double)d);
  for (int b = 0; b < c->batch; b++)
    for (int hd = 0; hd < H; hd++) {
      const double *Pbh = P + ((size_t)b * H + hd) * S * S;
      for (int i = 0; i < S; i++) {
        const double *dO = dout + ((size_t)b * S + i) * Ac + hd * dv;
        /* o_i = sum_t P_it v_t: dP_it = dO_i . v_t, dv_t += P_it dO_i */
        double dot = 0;
        for (int t = 0; t <= i; t++) {
          const double *v = V_AT(qkv, (size_t)b * S + t);
          double *dvt = V_AT(dqkv, (size_t)b * S + t);
          double s = 0;
          for (int p = 0; p < dv; p++) {
            s += dO[p] * v[p];
            dvt[p] += Pbh[(size_t)i * S + t] * dO[p];
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

/* ---- the QK norm: RMSNorm of each of `heads` heads of d columns from column col0 of each row of qkv [T x W] ---- */

/* In place; saved [T x heads d] keeps the input, rstd [T x heads] each head's 1/rms. */
static void qk_norm_fwd(int T, int W, int col0, int heads, int d, double eps, const double *g, double *qkv,
                        double *saved, double *rstd) {
  for (int r = 0; r < T; r++)
    for (int j = 0; j < heads; j++) {
      double *x = qkv + (size_t)r * W + col0 + (size_t)j * d, *sx = saved + ((size_t)r * heads + j) * d;
      double ms = 0;
      for (int i = 0; i < d; i++) ms += x[i] * x[i];
      double rs = 1.0 / sqrt(ms / d + eps);
      rstd[(size_t)r * heads + j] = rs;
      for (int i = 0; i < d; i++) sx[i] = x[i], x[i] = x[i] * rs * g[i];
    }
}

/* dy (in place in dqkv) becomes dx: with xh = x rstd, dx = rstd (g dy - xh mean(g dy xh)); dg += dy xh. */
static void qk_norm_bwd(int T, int W, int col0, int heads, int d, const double *g, const double *saved,
                        const double *rstd, double *dqkv, double *dg) {
  for (int r = 0; r < T; r++)
    for (int j = 0; j < heads; j++) {
      double *dy = dqkv + (size_t)r * W + col0 + (size_t)j * d;
      const double *x = saved + ((size_t)r * heads + j) * d;
      const double rs = rstd[(size_t)r * heads + j];
      double dot = 0;
      for (int i = 0; i < d; i++) dot += g[i] * dy[i] * x[i] * rs;
      dot /= d;
      for (int i = 0; i < d; i++) {
        dg[i] += dy[i] * x[i] * rs;
        dy[i] = rs * (g[i] * dy[i] - x[i] * rs * dot);
      }
    }
}

/* ---- the whole stack ---- */

typedef struct {  /* what one layer keeps for backward */
  double *x_in, *n1, *mean1, *rstd1, *qkv, *P, *attn, *x_mid, *n2, *mean2, *rstd2, *u, *a;
  double *qk_in, *qk_rstd; /* the QK norm's input [T x (Qc + kvd)] and 1/rms [T x (heads + kv_heads)] */
  exec_ref_moe_saved moe; /* MoE layers */
  exec_ref_mla_saved mla; /* multi-head latent attention (exec_ref_mla.c) */
} layer_saved;

/* The MoE block's weights (or their gradients) of layer l in flat array p. */
static void moe_weights(const exec_ref_config *c, const exec_tensor *t, int l, double *p, double *W[EXEC_REF_MOE_W]) {
  const exec_tensor_kind k[EXEC_REF_MOE_W] = {EXEC_T_ROUTER, EXEC_T_EXPERT_FC1, EXEC_T_EXPERT_FC2, EXEC_T_SHARED_FC1,
                                              EXEC_T_SHARED_FC2};
  for (int i = 0; i < EXEC_REF_MOE_W; i++) {
    int x = exec_ref_tensor_index(c, l, k[i]);
    W[i] = x >= 0 ? p + t[x].offset : NULL;
  }
}

/* The latent attention's weights (or their gradients) of layer l in flat array p. */
static void mla_weights(const exec_ref_config *c, const exec_tensor *t, int l, double *p, double *W[EXEC_REF_MLA_W]) {
  const exec_tensor_kind k[EXEC_REF_MLA_W] = {EXEC_T_Q_A, EXEC_T_Q_A_NORM, EXEC_T_Q_B, EXEC_T_KV_A, EXEC_T_KV_A_NORM,
                                              EXEC_T_KV_B};
  for (int i = 0; i < EXEC_REF_MLA_W; i++) W[i] = p + t[exec_ref_tensor_index(c, l, k[i])].offset;
}

static void free_saved(const exec_ref_config *c, double *arena, layer_saved *sv) {
  for (int l = 0; l < c->layers; l++) exec_ref_moe_free(&sv[l].moe), exec_ref_mla_free(&sv[l].mla);
  free(arena);
  free(sv);
}

/* What the passes of the reference share: the model, its tensors, the sizes,
 * RoPE's frequencies, what each layer keeps and the scratch buffers. */
typedef struct {
  const exec_ref_config *c;
  const exec_tensor *t;
  const double *params;
  double *grads;
  int T, h, V, S, F, L, QW, U; /* QW: qkv width; U: FC1 width (2 F for SwiGLU) */
  int d, rope_heads;           /* head dimension; q and k heads, side by side */
  int Qc, KVH, Ac;             /* query width heads x d; key/value heads; attention output heads x dv */
  double inv_freq[512];
  layer_saved *sv;
  double *x, *xf, *nf, *meanf, *rstdf, *logits, *dx, *dtmp, *dqkv, *du, *da, *dP_row;
} ref_pass;

/* a layer tensor by kind (NULL when the model has none) */
#define IDX(l, k) exec_ref_tensor_index(c, (l), (k))
#define P_OF(l, k) (IDX(l, k) >= 0 ? params + t[IDX(l, k)].offset : NULL)
#define G_OF(l, k) (IDX(l, k) >= 0 ? grads + t[IDX(l, k)].offset : NULL)

/* Layer l forward on p->x (the residual stream), keeping what backward needs in p->sv[l]. */
static void ref_layer_fwd(ref_pass *p, int l) {
  const exec_ref_config *c = p->c;
  const exec_tensor *t = p->t;
  const double *params = p->params;
  const int T = p->T, h = p->h, S = p->S, F = p->F, QW = p->QW, U = p->U, d = p->d, rope_heads = p->rope_heads;
  const size_t th = (size_t)T * h;
  const double *inv_freq = p->inv_freq;
  double *x = p->x;
  layer_saved *s = &p->sv[l];
  memcpy(s->x_in, x, sizeof(double) * th);
  norm_fwd(c, T, x, P_OF(l, EXEC_T_LN1_G), P_OF(l, EXEC_T_LN1_B), s->n1, s->mean1, s->rstd1);
  const int Qc = p->Qc, H = c->heads, KVH = p->KVH, Ac = p->Ac;
  if (exec_ref_is_mla(c)) { /* qkv assembled from the latent projections, rope applied (exec_ref_mla.c) */
    double *W[EXEC_REF_MLA_W];
    mla_weights(c, t, l, (double *)params, W);
    exec_ref_mla_fwd(c, T, s->n1, (const double *const *)W, c->rope_theta > 0 ? inv_freq : NULL, &s->mla, s->qkv);
  } else {
    exec_ref_mm_nn(T, QW, h, s->n1, P_OF(l, EXEC_T_QKV), s->qkv, 0);
    add_bias(T, QW, P_OF(l, EXEC_T_QKV_B), s->qkv);
    if (c->qk_norm) { /* each query head, then each key head */
      qk_norm_fwd(T, QW, 0, H, d, c->norm_eps, P_OF(l, EXEC_T_Q_NORM), s->qkv, s->qk_in, s->qk_rstd);
      qk_norm_fwd(T, QW, Qc, KVH, d, c->norm_eps, P_OF(l, EXEC_T_K_NORM), s->qkv, s->qk_in + (size_t)T * Qc,
                  s->qk_rstd + (size_t)T * H);
    }
    if (c->rope_theta > 0)
      for (int r = 0; r < T; r++) exec_ref_rope_row(s->qkv + (size_t)r * QW, rope_heads, d, inv_freq, r % S, 0);
  }
  attn_fwd(c, s->qkv, s->P, s->attn);
  exec_ref_mm_nn(T, h, Ac, s->attn, P_OF(l, EXEC_T_ATTN_OUT), x, 1); /* x += attn . Wo + bo */
  add_bias(T, h, P_OF(l, EXEC_T_ATTN_OUT_B), x);
  memcpy(s->x_mid, x, sizeof(double) * th);
  norm_fwd(c, T, x, P_OF(l, EXEC_T_LN2_G), P_OF(l, EXEC_T_LN2_B), s->n2, s->mean2, s->rstd2);
  if (exec_ref_layer_is_moe(c, l)) { /* x += moe(n2) (exec_ref_moe.c) */
    double *W[EXEC_REF_MOE_W];
    moe_weights(c, t, l, (double *)params, W);
    const size_t ch = (size_t)l * T * c->top_k; /* the layer's rows of router_choice[_out] */
    exec_ref_moe_fwd(c, T, s->n2, (const double *const *)W,
                     c->router_bias ? c->router_bias + (size_t)l * c->experts : NULL, &s->moe, x,
                     c->router_choice ? c->router_choice + ch : NULL, c->router_choice_out ? c->router_choice_out + ch : NULL);
    return;
  }
  exec_ref_mm_nn(T, U, h, s->n2, P_OF(l, EXEC_T_FC1), s->u, 0);
  add_bias(T, U, P_OF(l, EXEC_T_FC1_B), s->u);
  exec_ref_act_fwd(c, T, F, s->u, s->a);
  exec_ref_mm_nn(T, h, F, s->a, P_OF(l, EXEC_T_FC2), x, 1); /* x += a . W2 + b2 */
  add_bias(T, h, P_OF(l, EXEC_T_FC2_B), x);
}

/* Mean cross-entropy of p->logits against targets; the logits become dloss/dlogits. */
static double ref_cross_entropy(ref_pass *p, const int *targets) {
  const int T = p->T, V = p->V;
  double *logits = p->logits;
  double total_loss = 0;
  for (int r = 0; r < T; r++) {
    double *z = logits + (size_t)r * V, mx = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) mx = z[v] > mx ? z[v] : mx;
    for (int v = 0; v < V; v++) sum += exp(z[v] - mx);
    total_loss += mx + log(sum) - z[targets[r]];
    for (int v = 0; v < V; v++) z[v] = exp(z[v] - mx) / sum / T;
    z[targets[r]] -= 1.0 / T;
  }
  return total_loss / T;
}

/* Layer l backward: p->dx (the gradient of its output) becomes that of its input; its weights' gradients added. */
static void ref_layer_bwd(ref_pass *p, int l) {
  const exec_ref_config *c = p->c;
  const exec_tensor *t = p->t;
  const double *params = p->params;
  double *grads = p->grads;
  const int T = p->T, h = p->h, S = p->S, F = p->F, QW = p->QW, U = p->U, d = p->d, rope_heads = p->rope_heads;
  const double *inv_freq = p->inv_freq;
  double *dx = p->dx, *dtmp = p->dtmp, *dqkv = p->dqkv, *du = p->du, *da = p->da, *dP_row = p->dP_row;
  layer_saved *s = &p->sv[l];
  if (exec_ref_layer_is_moe(c, l)) { /* x_out = x_mid + moe(n2) */
    double *W[EXEC_REF_MOE_W], *G[EXEC_REF_MOE_W];
    moe_weights(c, t, l, (double *)params, W);
    moe_weights(c, t, l, grads, G);
    exec_ref_moe_bwd(c, T, s->n2, (const double *const *)W, &s->moe, dx, dtmp, G);
  } else { /* x_out = x_mid + a . W2 + b2 */
    bias_grad(T, h, dx, G_OF(l, EXEC_T_FC2_B));
    exec_ref_mm_tn(F, h, T, s->a, dx, G_OF(l, EXEC_T_FC2), 1);
    exec_ref_mm_nt(T, F, h, dx, P_OF(l, EXEC_T_FC2), da, 0);
    exec_ref_act_bwd(c, T, F, s->u, da, du);
    bias_grad(T, U, du, G_OF(l, EXEC_T_FC1_B));
    exec_ref_mm_tn(h, U, T, s->n2, du, G_OF(l, EXEC_T_FC1), 1);
    exec_ref_mm_nt(T, h, U, du, P_OF(l, EXEC_T_FC1), dtmp, 0);
  }
  norm_bwd(c, T, s->x_mid, P_OF(l, EXEC_T_LN2_G), s->mean2, s->rstd2, dtmp, dx, G_OF(l, EXEC_T_LN2_G),
           G_OF(l, EXEC_T_LN2_B));
  /* x_mid = x_in + attn . Wo + bo */
  bias_grad(T, h, dx, G_OF(l, EXEC_T_ATTN_OUT_B));
  const int Qc = p->Qc, H = c->heads, KVH = p->KVH, Ac = p->Ac;
  exec_ref_mm_tn(Ac, h, T, s->attn, dx, G_OF(l, EXEC_T_ATTN_OUT), 1);
  exec_ref_mm_nt(T, Ac, h, dx, P_OF(l, EXEC_T_ATTN_OUT), dtmp, 0);
  memset(dqkv, 0, sizeof(double) * T * QW);
  attn_bwd(c, s->qkv, s->P, dtmp, dqkv, dP_row);
  if (exec_ref_is_mla(c)) { /* dtmp becomes the gradient of n1 (exec_ref_mla.c) */
    double *W[EXEC_REF_MLA_W], *G[EXEC_REF_MLA_W];
    mla_weights(c, t, l, (double *)params, W);
    mla_weights(c, t, l, grads, G);
    exec_ref_mla_bwd(c, T, s->n1, (const double *const *)W, c->rope_theta > 0 ? inv_freq : NULL, &s->mla, dqkv, dtmp, G);
    norm_bwd(c, T, s->x_in, P_OF(l, EXEC_T_LN1_G), s->mean1, s->rstd1, dtmp, dx, G_OF(l, EXEC_T_LN1_G),
             G_OF(l, EXEC_T_LN1_B));
    return;
  }
  /* qkv (rotated) = rope(qk_norm(n1 . Wqkv + bqkv)): the rotation's transpose first, then the QK norm's backward */
  if (c->rope_theta > 0)
    for (int r = 0; r < T; r++) exec_ref_rope_row(dqkv + (size_t)r * QW, rope_heads, d, inv_freq, r % S, 1);
  if (c->qk_norm) {
    qk_norm_bwd(T, QW, 0, H, d, P_OF(l, EXEC_T_Q_NORM), s->qk_in, s->qk_rstd, dqkv, G_OF(l, EXEC_T_Q_NORM));
    qk_norm_bwd(T, QW, Qc, KVH, d, P_OF(l, EXEC_T_K_NORM), s->qk_in + (size_t)T * Qc, s->qk_rstd + (size_t)T * H,
                dqkv, G_OF(l, EXEC_T_K_NORM));
  }
  bias_grad(T, QW, dqkv, G_OF(l, EXEC_T_QKV_B));
  exec_ref_mm_tn(h, QW, T, s->n1, dqkv, G_OF(l, EXEC_T_QKV), 1);
  exec_ref_mm_nt(T, h, QW, dqkv, P_OF(l, EXEC_T_QKV), dtmp, 0);
  norm_bwd(c, T, s->x_in, P_OF(l, EXEC_T_LN1_G), s->mean1, s->rstd1, dtmp, dx, G_OF(l, EXEC_T_LN1_G),
           G_OF(l, EXEC_T_LN1_B));
}

/* Every gradient, from dloss/dlogits in p->logits back to the embedding (tokens: the inputs). */
static void ref_backward(ref_pass *p, const int *tokens, size_t total) {
  const exec_ref_config *c = p->c;
  const exec_tensor *t = p->t;
  const double *params = p->params;
  double *grads = p->grads;
  const int T = p->T, h = p->h, V = p->V, S = p->S, L = p->L;
  const size_t th = (size_t)T * h;
  const int iwpe = exec_ref_tensor_index(c, -1, EXEC_T_WPE), ihead = exec_ref_head_tensor(c);
  const double *whead = params + t[ihead].offset, *lnf_g = P_OF(-1, EXEC_T_LNF_G);
  double *logits = p->logits, *dx = p->dx, *dtmp = p->dtmp;
  memset(grads, 0, sizeof(double) * total);
  double *g_wte = grads + t[0].offset, *g_wpe = iwpe >= 0 ? grads + t[iwpe].offset : NULL;
  double *g_head = grads + t[ihead].offset;
  double *g_lnf_g = G_OF(-1, EXEC_T_LNF_G), *g_lnf_b = G_OF(-1, EXEC_T_LNF_B);
  /* logits = nf . whead^T */
  exec_ref_mm_nn(T, h, V, logits, whead, dtmp, 0);
  exec_ref_mm_tn(V, h, T, logits, p->nf, g_head, 1);
  memset(dx, 0, sizeof(double) * th);
  norm_bwd(c, T, p->xf, lnf_g, p->meanf, p->rstdf, dtmp, dx, g_lnf_g, g_lnf_b);
  for (int l = L - 1; l >= 0; l--) ref_layer_bwd(p, l);
  for (int r = 0; r < T; r++)
    for (int j = 0; j < h; j++) {
      g_wte[(size_t)tokens[r] * h + j] += dx[(size_t)r * h + j];
      if (g_wpe) g_wpe[(size_t)(r % S) * h + j] += dx[(size_t)r * h + j];
    }
}

int exec_ref_loss_grad(const exec_ref_config *c, const double *params, const int *tokens, const int *targets,
                       double *loss, double *grads, ts_err *e) {
  if (exec_ref_config_check(c, e)) return -1;
  exec_tensor t[EXEC_REF_MAX_TENSORS];
  size_t total;
  int nt = exec_ref_tensors(c, t, EXEC_REF_MAX_TENSORS, &total);
  if (nt > EXEC_REF_MAX_TENSORS) return ts_fail(e, NULL, "layers", "too many tensors for the reference");
  const int T = c->batch * c->seq, h = c->hidden, V = c->vocab, S = c->seq, F = c->ffn, L = c->layers;
  const int QW = exec_ref_qkv_cols(c); /* qkv width: heads x head_dim + 2 kv_heads x head_dim */
  const int U = c->act == EXEC_ACT_SWIGLU ? 2 * F : F;
  const int d = exec_ref_head_dim(c), Qc = exec_ref_q_cols(c), KVH = exec_ref_kv_heads(c);
  const int Ac = exec_ref_attn_cols(c); /* the attention output: heads x v dim */
  const size_t tq = (size_t)T * Ac, twide = (size_t)T * (Ac > h ? Ac : h); /* attn; dtmp (also attn's gradient) */
  const size_t qk_in = c->qk_norm ? (size_t)T * (Qc + KVH * d) : 0, qk_rstd = c->qk_norm ? (size_t)T * (c->heads + KVH) : 0;

  /* One arena for every activation: sizes in doubles. */
  size_t th = (size_t)T * h, layer_doubles = th * 4 + tq + (size_t)T * 4 + (size_t)T * QW +
                                             (size_t)c->batch * c->heads * S * S + (size_t)T * U + (size_t)T * F +
                                             qk_in + qk_rstd;
  size_t arena_doubles = layer_doubles * L + th * 3 + (size_t)T * 2 + (size_t)T * V + th + twide +
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
    sv[l].attn = TAKE(tq); sv[l].x_mid = TAKE(th); sv[l].n2 = TAKE(th); sv[l].mean2 = TAKE(T);
    sv[l].rstd2 = TAKE(T); sv[l].u = TAKE((size_t)T * U); sv[l].a = TAKE((size_t)T * F);
    sv[l].qk_in = TAKE(qk_in); sv[l].qk_rstd = TAKE(qk_rstd);
  }
  for (int l = 0; l < L; l++)
    if ((exec_ref_layer_is_moe(c, l) && exec_ref_moe_alloc(c, T, &sv[l].moe, e)) ||
        (exec_ref_is_mla(c) && exec_ref_mla_alloc(c, T, &sv[l].mla, e))) {
      free_saved(c, arena, sv);
      return -1;
    }
  ref_pass pass = {.c = c, .t = t, .params = params, .grads = grads, .T = T, .h = h, .V = V, .S = S, .F = F, .L = L,
                   .QW = QW, .U = U, .sv = sv};
  ref_pass *p = &pass;
  p->x = TAKE(th), p->xf = TAKE(th), p->nf = TAKE(th), p->meanf = TAKE(T), p->rstdf = TAKE(T);
  p->logits = TAKE((size_t)T * V), p->dx = TAKE(th), p->dtmp = TAKE(twide), p->dqkv = TAKE((size_t)T * QW);
  p->du = TAKE((size_t)T * U), p->da = TAKE((size_t)T * F), p->dP_row = TAKE(S);
#undef TAKE

  const int iwpe = exec_ref_tensor_index(c, -1, EXEC_T_WPE);
  const double *wte = params + t[0].offset, *wpe = iwpe >= 0 ? params + t[iwpe].offset : NULL;
  const double *lnf_g = P_OF(-1, EXEC_T_LNF_G), *lnf_b = P_OF(-1, EXEC_T_LNF_B);
  p->d = d, p->rope_heads = c->heads + KVH, p->Qc = Qc, p->KVH = KVH, p->Ac = Ac;
  if (c->rope_theta > 0) {
    const int rd = exec_ref_rope_dim(c); /* the head dimension, or MLA's rope part */
    if (rd / 2 > 512) {
      free_saved(c, arena, sv);
      return ts_fail(e, NULL, "heads", "head dimension %d too large for the reference's RoPE", rd);
    }
    exec_ref_rope_inv_freq(c, rd, p->inv_freq);
  }

  /* embedding: x = wte[token] (+ wpe[position]) */
  double *x = p->x;
  for (int r = 0; r < T; r++)
    for (int j = 0; j < h; j++)
      x[(size_t)r * h + j] = wte[(size_t)tokens[r] * h + j] + (wpe ? wpe[(size_t)(r % S) * h + j] : 0.0);
  for (int l = 0; l < L; l++) ref_layer_fwd(p, l);
  memcpy(p->xf, x, sizeof(double) * th);
  norm_fwd(c, T, p->xf, lnf_g, lnf_b, p->nf, p->meanf, p->rstdf);
  exec_ref_mm_nt(T, V, h, p->nf, params + t[exec_ref_head_tensor(c)].offset, p->logits, 0);
  *loss = ref_cross_entropy(p, targets);
  if (grads) ref_backward(p, tokens, total);
  free_saved(c, arena, sv);
  return 0;
}
#undef IDX
#undef P_OF
#undef G_OF

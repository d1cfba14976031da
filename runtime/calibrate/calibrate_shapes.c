/* calibrate_shapes.c — the shapes `tacorun calibrate` measures (see calibrate_shapes.h). */
#include "calibrate_shapes.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "plan.h"

void calib_sweep_default(calib_sweep *s) {
  memset(s, 0, sizeof *s);
  const int tp[] = {1, 2, 4, 8};
  for (int i = 0; i < 4; i++) s->tp[s->n_tp++] = tp[i];
  /* steps of at most 1.5x, so a token count between two measured ones is
   * interpolated over a short span (and 2048, 4096, 8192 are exact) */
  const long long tokens[] = {1024, 1536, 2048, 3072, 4096, 6144, 8192};
  for (int i = 0; i < 7; i++) s->tokens[s->n_tokens++] = tokens[i];
  s->seq = 2048;
  const int attn_seq[] = {2048, 4096, 8192};
  for (int i = 0; i < 3; i++) s->attn_seq[s->n_attn_seq++] = attn_seq[i];
  s->attn_max_tokens = 8192;
}

const char *calib_mem_kind_name(calib_mem_kind k) {
  static const char *names[CALIB_MEM_KINDS] = {"layernorm", "rmsnorm", "gelu", "swiglu", "add", "loss", "embedding", "bias",
                                                     "rope"};
  return k >= 0 && k < CALIB_MEM_KINDS ? names[k] : "?";
}

static int grow(void **arr, int *cap, int need, size_t size, ts_err *e) {
  if (need <= *cap) return 0;
  int ncap = *cap ? *cap * 2 : 64;
  while (ncap < need) ncap *= 2;
  void *p = realloc(*arr, (size_t)ncap * size);
  if (!p) return ts_fail_sys(e, "calibrate: out of memory");
  *arr = p;
  *cap = ncap;
  return 0;
}

/* A key once per accumulation class: a weight gradient (EXEC_GEMM_TN_ACC: C
 * accumulated in FP32) and a forward or input-gradient product (BF16 C) of the
 * same (m, n, k) cost differently, so a shape both use is timed both ways. */
static int add_gemm(calib_shapes *sh, long long m, long long n, long long k, exec_gemm_layout layout, int swap_mn,
                    calib_gemm_role role, ts_err *e) {
  const bool acc = layout == EXEC_GEMM_TN_ACC;
  for (int i = 0; i < sh->n_gemm; i++)
    if (sh->gemm[i].m == m && sh->gemm[i].n == n && sh->gemm[i].k == k && (sh->gemm[i].layout == EXEC_GEMM_TN_ACC) == acc)
      return 0;
  if (grow((void **)&sh->gemm, &sh->cap_gemm, sh->n_gemm + 1, sizeof *sh->gemm, e)) return -1;
  sh->gemm[sh->n_gemm++] = (calib_gemm_shape){m, n, k, layout, swap_mn, role};
  return 0;
}

/* A linear layer Y[m x n] = X[m x k] W, W stored [k x n] (exec_layer.c). */
static int add_linear(calib_shapes *sh, long long m, long long n, long long k, ts_err *e) {
  if (add_gemm(sh, m, n, k, EXEC_GEMM_NN, 0, CALIB_GEMM_FWD, e)) return -1;   /* Y = X W */
  if (add_gemm(sh, m, k, n, EXEC_GEMM_NT, 0, CALIB_GEMM_DGRAD, e)) return -1; /* dX = dY W^T */
  return add_gemm(sh, k, n, m, EXEC_GEMM_TN_ACC, 0, CALIB_GEMM_WGRAD, e);     /* dW += X^T dY */
}

/* The logits: logits[m x n] = X[m x k] E^T with the embedding E stored [n x k]
 * (vocabulary rows). The simulator keys its weight gradient (k, n, m) like a
 * linear layer's; the executor computes dE[n x k] += dlogits^T X, the same
 * product transposed, so that one is timed with m and n swapped. */
static int add_logits(calib_shapes *sh, long long m, long long n, long long k, ts_err *e) {
  if (add_gemm(sh, m, n, k, EXEC_GEMM_NT, 0, CALIB_GEMM_FWD, e)) return -1;   /* logits = X E^T */
  if (add_gemm(sh, m, k, n, EXEC_GEMM_NN, 0, CALIB_GEMM_DGRAD, e)) return -1; /* dX = dlogits E */
  return add_gemm(sh, k, n, m, EXEC_GEMM_TN_ACC, 1, CALIB_GEMM_WGRAD, e);     /* dE += dlogits^T X */
}

/* An FP8 key once per (m, n, k): every FP8 GEMM runs in the one layout, so a key that two roles use
 * is one GEMM; its roles are kept (they choose the accumulation: calibrate_fp8.c). */
int calib_shapes_add_gemm_fp8(calib_shapes *sh, long long m, long long n, long long k, calib_gemm_role role,
                              ts_err *e) {
  for (int i = 0; i < sh->n_gemm_fp8; i++)
    if (sh->gemm_fp8[i].m == m && sh->gemm_fp8[i].n == n && sh->gemm_fp8[i].k == k) {
      sh->gemm_fp8[i].roles |= 1u << role;
      return 0;
    }
  if (grow((void **)&sh->gemm_fp8, &sh->cap_gemm_fp8, sh->n_gemm_fp8 + 1, sizeof *sh->gemm_fp8, e)) return -1;
  sh->gemm_fp8[sh->n_gemm_fp8++] = (calib_gemm_fp8_shape){m, n, k, 1u << role};
  return 0;
}

/* The three FP8 GEMMs of a linear layer Y[m x n] = X[m x k] W: the keys of add_linear. */
static int add_linear_fp8(calib_shapes *sh, long long m, long long n, long long k, ts_err *e) {
  if (calib_shapes_add_gemm_fp8(sh, m, n, k, CALIB_GEMM_FWD, e) || calib_shapes_add_gemm_fp8(sh, m, k, n, CALIB_GEMM_DGRAD, e))
    return -1;
  return calib_shapes_add_gemm_fp8(sh, k, n, m, CALIB_GEMM_WGRAD, e);
}

static int add_attn(calib_shapes *sh, int batch, int heads, int kv_heads, int seq, int head_dim, ts_err *e) {
  for (int i = 0; i < sh->n_attn; i++)
    if (sh->attn[i].batch == batch && sh->attn[i].heads == heads && sh->attn[i].seq == seq &&
        sh->attn[i].head_dim == head_dim && sh->attn[i].kv_heads == kv_heads)
      return 0;
  if (grow((void **)&sh->attn, &sh->cap_attn, sh->n_attn + 1, sizeof *sh->attn, e)) return -1;
  sh->attn[sh->n_attn++] = (calib_attn_shape){(long long)batch * heads, batch, heads, seq, head_dim, kv_heads};
  return 0;
}

static int add_mem_d(calib_shapes *sh, calib_mem_kind kind, long long rows, long long cols, int head_dim,
                     ts_err *e) {
  for (int i = 0; i < sh->n_mem; i++)
    if (sh->mem[i].kind == kind && sh->mem[i].rows == rows && sh->mem[i].cols == cols &&
        sh->mem[i].head_dim == head_dim)
      return 0;
  if (grow((void **)&sh->mem, &sh->cap_mem, sh->n_mem + 1, sizeof *sh->mem, e)) return -1;
  sh->mem[sh->n_mem++] = (calib_mem_shape){kind, rows, (int)cols, head_dim};
  return 0;
}

static int add_mem(calib_shapes *sh, calib_mem_kind kind, long long rows, long long cols, ts_err *e) {
  return add_mem_d(sh, kind, rows, cols, 0, e);
}

static long long gcd(long long a, long long b) {
  while (b) {
    long long t = a % b;
    a = b, b = t;
  }
  return a;
}

int calib_shapes_add_model(calib_shapes *sh, const char *model_name, const calib_sweep *sw, ts_err *e) {
  model_config m;
  if (model_load(model_name, NULL, &m, e)) return -1;
  int used = 0;
  for (int t = 0; t < sw->n_tp; t++) {
    for (int j = 0; j < sw->n_tokens; j++) {
      /* GEMM and memory-bound shapes depend on micro_batch * seq only; the
       * sequence is the largest divisor of the token count within sw->seq */
      long long seq = gcd(sw->tokens[j], sw->seq);
      model_shard s = {.tp = sw->tp[t], .sequence_parallel = false, .seq = (int)seq,
                       .micro_batch = (int)(sw->tokens[j] / seq)};
      ts_err skip;
      if (model_shard_check(&m, &s, &skip)) continue; /* this TP or length does not fit the model */
      model_op ops[MODEL_MAX_LAYER_OPS];
      int n = model_layer_ops(&m, &s, ops, MODEL_MAX_LAYER_OPS, e);
      if (n < 0) return -1;
      int n_out = model_output_ops(&m, &s, ops + n, MODEL_MAX_LAYER_OPS - n, e);
      if (n_out < 0) return -1;
      long long tokens = sw->tokens[j];
      for (int i = 0; i < n + n_out; i++) {
        const model_op *op = &ops[i];
        if (op->kind != MODEL_OP_GEMM) continue;
        if ((i < n ? add_linear : add_logits)(sh, op->m, op->n, op->k, e)) return -1;
        if (i < n && plan_fp8_linear(op) && add_linear_fp8(sh, op->m, op->n, op->k, e)) return -1;
        /* the executor's bias passes (exec_layer.c): over the qkv and fc1 outputs, and over the
         * rows of the residual ops (attn_out's and fc2's biases) */
        if (i < n && ((m.qkv_bias && !strcmp(op->name, "qkv")) || (m.linear_bias && !strcmp(op->name, "fc1"))) &&
            add_mem(sh, CALIB_MEM_BIAS, op->m, op->n, e))
          return -1;
      }
      if (m.linear_bias && add_mem(sh, CALIB_MEM_BIAS, tokens, m.hidden, e)) return -1;
      /* RoPE as the executor runs it (rt_rope): the query and key heads of this TP shard, in place */
      if (m.position == MODEL_POS_ROPE && m.attention != MODEL_ATTN_MLA &&
          add_mem_d(sh, CALIB_MEM_ROPE, tokens, (long long)(m.heads + m.kv_heads) / s.tp * model_head_dim(&m),
                    model_head_dim(&m), e))
        return -1;
      calib_mem_kind norm = m.norm == MODEL_NORM_LAYERNORM ? CALIB_MEM_LAYERNORM : CALIB_MEM_RMSNORM;
      calib_mem_kind act = m.activation == MODEL_ACT_SWIGLU ? CALIB_MEM_SWIGLU : CALIB_MEM_GELU;
      if (add_mem(sh, norm, tokens, m.hidden, e) || add_mem(sh, CALIB_MEM_ADD, tokens, m.hidden, e) ||
          add_mem(sh, act, tokens, m.ffn_hidden / s.tp, e) ||
          add_mem(sh, CALIB_MEM_LOSS, tokens, model_vocab_per_gpu(&m, s.tp), e) ||
          add_mem(sh, CALIB_MEM_EMBEDDING, tokens, m.hidden, e))
        return -1;
      used = 1;
    }
    for (int j = 0; j < sw->n_attn_seq; j++) {
      int seq = sw->attn_seq[j];
      if (seq > m.max_seq || m.heads % sw->tp[t] || m.kv_heads % sw->tp[t]) continue;
      for (long long micro = 1; micro * seq <= sw->attn_max_tokens; micro *= 2)
        if (add_attn(sh, (int)micro, m.heads / sw->tp[t], m.kv_heads / sw->tp[t], seq, model_head_dim(&m), e)) return -1;
    }
  }
  sh->models += used;
  return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int calib_shapes_build(calib_shapes *sh, const char *models, const char *zoo_dir, const calib_sweep *sw,
                       ts_err *e) {
  memset(sh, 0, sizeof *sh);
  char *names[256];
  int n = 0;
  if (!strcmp(models, "all")) {
    const char *dir = zoo_dir ? zoo_dir : model_zoo_dir();
    DIR *d = opendir(dir);
    if (!d) return ts_fail(e, dir, NULL, "cannot open the model zoo folder");
    struct dirent *ent;
    while ((ent = readdir(d)) && n < 256) {
      size_t len = strlen(ent->d_name);
      if (len > 5 && !strcmp(ent->d_name + len - 5, ".json")) {
        names[n] = strdup(ent->d_name);
        if (!names[n]) break;
        names[n][len - 5] = '\0';
        n++;
      }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str); /* same order every run */
  } else {
    char *copy = strdup(models), *save = NULL;
    if (!copy) return ts_fail_sys(e, "calibrate: out of memory");
    for (char *tok = strtok_r(copy, ",", &save); tok && n < 256; tok = strtok_r(NULL, ",", &save))
      if (*tok) names[n++] = strdup(tok);
    free(copy);
  }
  int rc = 0;
  if (n == 0) rc = ts_fail(e, NULL, "--models", "'%s' names no model", models);
  for (int i = 0; i < n && rc == 0; i++) {
    if (!names[i]) rc = ts_fail_sys(e, "calibrate: out of memory");
    else if (zoo_dir && strcmp(models, "all") == 0) {
      char path[1024];
      snprintf(path, sizeof path, "%s/%s.json", zoo_dir, names[i]);
      rc = calib_shapes_add_model(sh, path, sw, e);
    } else
      rc = calib_shapes_add_model(sh, names[i], sw, e);
  }
  for (int i = 0; i < n; i++) free(names[i]);
  if (rc) calib_shapes_free(sh);
  return rc;
}

void calib_shapes_free(calib_shapes *sh) {
  free(sh->gemm);
  free(sh->gemm_fp8);
  free(sh->attn);
  free(sh->mem);
  memset(sh, 0, sizeof *sh);
}

double calib_shapes_gemm_flops(const calib_shapes *sh) {
  double f = 0;
  for (int i = 0; i < sh->n_gemm; i++) f += 2.0 * sh->gemm[i].m * sh->gemm[i].n * sh->gemm[i].k;
  return f;
}

double calib_shapes_gemm_fp8_flops(const calib_shapes *sh) {
  double f = 0;
  for (int i = 0; i < sh->n_gemm_fp8; i++) f += 2.0 * sh->gemm_fp8[i].m * sh->gemm_fp8[i].n * sh->gemm_fp8[i].k;
  return f;
}

int calib_shapes_twin(const calib_shapes *sh, int i) {
  const calib_gemm_shape *s = &sh->gemm[i];
  for (int j = 0; j < sh->n_gemm; j++)
    if (j != i && sh->gemm[j].m == s->m && sh->gemm[j].n == s->n && sh->gemm[j].k == s->k) return j;
  return -1;
}

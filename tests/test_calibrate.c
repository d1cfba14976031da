/* test_calibrate.c — the CPU side of `tacorun calibrate`: the plain-C
 * references of the runtime kernels (checked against finite differences and
 * invariants, since the GPU self-check trusts them), the shapes taken from
 * the model zoo, the latency + bandwidth fits and the table helpers. */
#define _POSIX_C_SOURCE 200809L /* mkstemp */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibrate.h"
#include "calibrate_fit.h"
#include "calibrate_fp8.h"
#include "calibrate_shapes.h"
#include "model.h"
#include "plan.h"
#include "rt_ops_ref.h"

static unsigned long long rng = 88172645463325252ULL;
static float uniform(void) { /* xorshift64, [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((rng >> 40) / 8388608.0 - 1.0);
}
static void fill(float *x, int n, float scale, float offset) {
  for (int i = 0; i < n; i++) x[i] = offset + scale * uniform();
}

/* ---- references ---- */

static void test_bf16_rounding(void) {
  CU_ASSERT_EQUAL(rt_ref_bf16_from_float(1.0f), 0x3f80);
  /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0) */
  CU_ASSERT_EQUAL(rt_ref_bf16_from_float(1.0f + 1.0f / 256), 0x3f80);
  /* 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6 */
  CU_ASSERT_EQUAL(rt_ref_bf16_from_float(1.0f + 3.0f / 256), 0x3f82);
  CU_ASSERT_EQUAL(rt_ref_bf16_to_float(rt_ref_bf16_from_float(-2.5f)), -2.5f);
  CU_ASSERT(isnan(rt_ref_bf16_to_float(rt_ref_bf16_from_float(NAN))));
}

static void test_norms_normalize(void) {
  enum { R = 3, C = 100 };
  float x[R * C], y[R * C], g[C], b[C], mean[R], rstd[R];
  fill(x, R * C, 2.f, 0.7f);
  for (int c = 0; c < C; c++) g[c] = 1.f, b[c] = 0.f;
  rt_ref_layernorm_fwd(x, g, b, y, mean, rstd, R, C, 0.f);
  for (int r = 0; r < R; r++) {
    double s = 0, s2 = 0;
    for (int c = 0; c < C; c++) s += y[r * C + c], s2 += (double)y[r * C + c] * y[r * C + c];
    CU_ASSERT(fabs(s / C) < 1e-5);
    CU_ASSERT(fabs(s2 / C - 1) < 1e-4);
  }
  rt_ref_rmsnorm_fwd(x, g, y, rstd, R, C, 0.f);
  for (int r = 0; r < R; r++) {
    double s2 = 0;
    for (int c = 0; c < C; c++) s2 += (double)y[r * C + c] * y[r * C + c];
    CU_ASSERT(fabs(s2 / C - 1) < 1e-4);
  }
}

/* dx of a norm equals the gradient of L = sum(dy * y) by central differences. */
static void check_norm_grad(int rms) {
  enum { C = 24 };
  float x[C], g[C], b[C], dy[C], y[C], dx[C], mean[1], rstd[1];
  fill(x, C, 1.f, 0.3f), fill(g, C, 0.5f, 1.f), fill(b, C, 0.5f, 0.f), fill(dy, C, 1.f, 0.f);
  if (rms) {
    rt_ref_rmsnorm_fwd(x, g, y, rstd, 1, C, 1e-5f);
    rt_ref_rmsnorm_bwd_dx(dy, x, g, rstd, dx, 1, C);
  } else {
    rt_ref_layernorm_fwd(x, g, b, y, mean, rstd, 1, C, 1e-5f);
    rt_ref_layernorm_bwd_dx(dy, x, g, mean, rstd, dx, 1, C);
  }
  for (int i = 0; i < C; i++) {
    const float h = 1e-2f;
    double l[2];
    for (int s = 0; s < 2; s++) {
      float xp[C];
      memcpy(xp, x, sizeof xp);
      xp[i] += s ? h : -h;
      if (rms) rt_ref_rmsnorm_fwd(xp, g, y, rstd, 1, C, 1e-5f);
      else rt_ref_layernorm_fwd(xp, g, b, y, mean, rstd, 1, C, 1e-5f);
      l[s] = 0;
      for (int c = 0; c < C; c++) l[s] += (double)dy[c] * y[c];
    }
    double fd = (l[1] - l[0]) / (2 * h);
    CU_ASSERT(fabs(fd - dx[i]) < 2e-3 * (1 + fabs(fd)));
  }
}
static void test_layernorm_grad(void) { check_norm_grad(0); }
static void test_rmsnorm_grad(void) { check_norm_grad(1); }

static void test_activation_grads(void) {
  enum { N = 40, F = 7 };
  float x[N], dy[N], dx[N], y[2], xp[1];
  fill(x, N, 4.f, 0.f), fill(dy, N, 1.f, 0.f);
  rt_ref_gelu_bwd(dy, x, dx, N);
  for (int i = 0; i < N; i++) {
    const float h = 1e-3f;
    xp[0] = x[i] + h, rt_ref_gelu_fwd(xp, &y[1], 1);
    xp[0] = x[i] - h, rt_ref_gelu_fwd(xp, &y[0], 1);
    CU_ASSERT(fabs(dy[i] * (y[1] - y[0]) / (2 * h) - dx[i]) < 1e-2 * (1 + fabs(dx[i])));
  }
  float g0[1], big[1] = {10.f};
  rt_ref_gelu_fwd(big, g0, 1);
  CU_ASSERT(fabs(g0[0] - 10.f) < 1e-4); /* GELU(x) -> x for large x */
  /* SwiGLU: one row of [gate | up] */
  float s[2 * F], sdy[F], sdx[2 * F], out[F];
  fill(s, 2 * F, 3.f, 0.f), fill(sdy, F, 1.f, 0.f);
  rt_ref_swiglu_bwd(sdy, s, sdx, 1, F);
  for (int i = 0; i < 2 * F; i++) {
    const float h = 1e-3f;
    double l[2];
    for (int k = 0; k < 2; k++) {
      float sp[2 * F];
      memcpy(sp, s, sizeof sp);
      sp[i] += k ? h : -h;
      rt_ref_swiglu_fwd(sp, out, 1, F);
      l[k] = 0;
      for (int c = 0; c < F; c++) l[k] += (double)sdy[c] * out[c];
    }
    CU_ASSERT(fabs((l[1] - l[0]) / (2 * h) - sdx[i]) < 1e-2 * (1 + fabs(sdx[i])));
  }
}

static void test_softmax_and_loss(void) {
  enum { B = 2, S = 9, V = 33, R = 4 };
  float s[B * S * S], p[B * S * S];
  fill(s, B * S * S, 5.f, 0.f);
  rt_ref_softmax_causal_fwd(s, p, B, S, 0.5f);
  for (int r = 0; r < B * S; r++) {
    double sum = 0;
    for (int c = 0; c < S; c++) {
      sum += p[r * S + c];
      if (c > r % S) CU_ASSERT_EQUAL(p[r * S + c], 0.f); /* causal mask */
    }
    CU_ASSERT(fabs(sum - 1) < 1e-5);
  }
  /* softmax backward: gradient of L = sum(dp * softmax(scale * s)) */
  float dp[S], ds[S], row[S], prow[S];
  fill(row, S, 2.f, 0.f), fill(dp, S, 1.f, 0.f);
  /* a full (unmasked) row, softmax computed here */
  double mx = -1e30, z = 0;
  for (int c = 0; c < S; c++) mx = fmax(mx, row[c] * 0.5);
  for (int c = 0; c < S; c++) z += exp(row[c] * 0.5 - mx);
  for (int c = 0; c < S; c++) prow[c] = (float)(exp(row[c] * 0.5 - mx) / z);
  rt_ref_softmax_bwd(prow, dp, ds, 1, S, 0.5f);
  for (int i = 0; i < S; i++) {
    const double h = 1e-3;
    double l[2];
    for (int k = 0; k < 2; k++) {
      double zz = 0, acc = 0, shifted[S];
      for (int c = 0; c < S; c++) shifted[c] = 0.5 * (row[c] + (c == i ? (k ? h : -h) : 0));
      for (int c = 0; c < S; c++) zz += exp(shifted[c] - mx);
      for (int c = 0; c < S; c++) acc += dp[c] * exp(shifted[c] - mx) / zz;
      l[k] = acc;
    }
    CU_ASSERT(fabs((l[1] - l[0]) / (2 * h) - ds[i]) < 1e-3);
  }
  /* cross-entropy: loss >= 0, gradient rows sum to zero, loss = -log p(label) */
  float lg[R * V], dl[R * V], loss[R];
  int32_t lab[R] = {0, 5, 17, V - 1};
  fill(lg, R * V, 4.f, 0.f);
  rt_ref_cross_entropy(lg, lab, loss, dl, R, V);
  for (int r = 0; r < R; r++) {
    double sum = 0, z2 = 0;
    for (int c = 0; c < V; c++) sum += dl[r * V + c], z2 += exp(lg[r * V + c]);
    CU_ASSERT(loss[r] > 0);
    CU_ASSERT(fabs(sum) < 1e-6);
    CU_ASSERT(fabs(loss[r] - (log(z2) - lg[r * V + lab[r]])) < 1e-4);
  }
}

static void test_adamw_and_embedding(void) {
  float w[1] = {1.f}, w16[1], g[1] = {0.5f}, m[1] = {0.f}, v[1] = {0.f};
  rt_ref_adamw_step(w, w16, g, m, v, 1, 0.1f, 0.9f, 0.999f, 0.f, 0.f, 1);
  /* first step without decay: m_hat / sqrt(v_hat) = sign(g), so w moves by lr */
  CU_ASSERT(fabs(w[0] - 0.9f) < 1e-6);
  CU_ASSERT(fabs(m[0] - 0.05f) < 1e-7);
  CU_ASSERT(fabs(v[0] - 0.00025f) < 1e-4 * 0.00025f); /* (1 - 0.999f) is not exact in FP32 */
  CU_ASSERT_EQUAL(w16[0], rt_ref_bf16_to_float(rt_ref_bf16_from_float(w[0])));
  float table[3 * 2] = {1, 2, 3, 4, 5, 6}, y[3 * 2];
  int32_t ids[3] = {10, 12, 13}; /* this shard holds ids 10..12 */
  rt_ref_embedding_fwd(table, ids, y, 3, 2, 10, 3);
  CU_ASSERT(y[0] == 1 && y[1] == 2 && y[2] == 5 && y[3] == 6 && y[4] == 0 && y[5] == 0);
}

/* ---- shapes ---- */

static void test_shapes_cover_model_gemms(void) {
  calib_sweep sw;
  calib_sweep_default(&sw);
  calib_shapes sh;
  ts_err e;
  int rc = calib_shapes_build(&sh, "gpt3-125m,llama3-8b", NULL, &sw, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(sh.models, 2);
  /* every forward GEMM of every (tp, tokens) that fits is there, with its dgrad and wgrad */
  const char *names[2] = {"gpt3-125m", "llama3-8b"};
  int checked = 0;
  for (int mi = 0; mi < 2; mi++) {
    model_config m;
    CU_ASSERT_EQUAL_FATAL(model_load(names[mi], NULL, &m, &e), 0);
    for (int t = 0; t < sw.n_tp; t++)
      for (int j = 0; j < sw.n_tokens; j++) {
        model_shard s = {.tp = sw.tp[t], .seq = sw.seq, .micro_batch = (int)(sw.tokens[j] / sw.seq)};
        model_op ops[MODEL_MAX_LAYER_OPS];
        int n = model_layer_ops(&m, &s, ops, MODEL_MAX_LAYER_OPS, &e);
        if (n < 0) continue; /* e.g. TP 8 does not divide GPT-3 125M's 12 heads */
        for (int i = 0; i < n; i++) {
          if (ops[i].kind != MODEL_OP_GEMM) continue;
          long long want[3][3] = {{ops[i].m, ops[i].n, ops[i].k}, {ops[i].m, ops[i].k, ops[i].n},
                                  {ops[i].k, ops[i].n, ops[i].m}};
          for (int r = 0; r < 3; r++) {
            int found = 0;
            for (int g = 0; g < sh.n_gemm; g++)
              if (sh.gemm[g].m == want[r][0] && sh.gemm[g].n == want[r][1] && sh.gemm[g].k == want[r][2]) found = 1;
            CU_ASSERT(found);
            checked++;
          }
        }
      }
  }
  CU_ASSERT(checked > 50);
  /* no shape twice in one accumulation class: a key that is both a weight gradient (FP32 C) and a
   * forward or input-gradient product (BF16 C) is there twice, once each way, each the other's twin;
   * TP 8 skipped for 125M (12 heads): its QKV (n = 2304/8 = 288, k = 768) never appears */
  int twins = 0;
  for (int a = 0; a < sh.n_gemm; a++) {
    const bool acc_a = sh.gemm[a].layout == EXEC_GEMM_TN_ACC;
    int same = 0;
    for (int b = 0; b < sh.n_gemm; b++)
      if (b != a && sh.gemm[a].m == sh.gemm[b].m && sh.gemm[a].n == sh.gemm[b].n && sh.gemm[a].k == sh.gemm[b].k) {
        same++;
        CU_ASSERT(acc_a != (sh.gemm[b].layout == EXEC_GEMM_TN_ACC));
        CU_ASSERT_EQUAL(calib_shapes_twin(&sh, a), b);
      }
    CU_ASSERT(same <= 1);
    if (!same) CU_ASSERT_EQUAL(calib_shapes_twin(&sh, a), -1);
    twins += same;
  }
  CU_ASSERT(twins > 0); /* the two models' sweeps share some keys across the classes */
  int tp8_125m = 0;
  for (int g = 0; g < sh.n_gemm; g++)
    if (sh.gemm[g].n == 288 && sh.gemm[g].k == 768) tp8_125m = 1;
  CU_ASSERT_FALSE(tp8_125m);
  CU_ASSERT(sh.n_attn > 0 && sh.n_mem > 0);
  for (int i = 0; i < sh.n_attn; i++)
    CU_ASSERT(sh.attn[i].bh >= 1 && (sh.attn[i].head_dim == 64 || sh.attn[i].head_dim == 128));
  CU_ASSERT(calib_shapes_gemm_flops(&sh) > 0);
  calib_shapes_free(&sh);
}

/* Each key is timed with the layout the executor runs it with: linear layers
 * NN / NT / TN (FP32 accumulate), the logits NT / NN / TN with m and n swapped;
 * attention shapes carry the executor's (micro-batch, heads) split. */
static int find_gemm_class(const calib_shapes *sh, long long m, long long n, long long k, bool acc) {
  for (int g = 0; g < sh->n_gemm; g++)
    if (sh->gemm[g].m == m && sh->gemm[g].n == n && sh->gemm[g].k == k && (sh->gemm[g].layout == EXEC_GEMM_TN_ACC) == acc)
      return g;
  return -1;
}
static int find_gemm(const calib_shapes *sh, long long m, long long n, long long k) {
  return find_gemm_class(sh, m, n, k, false);
}

/* One layer's ops and the output layer's of a zoo model at shard s: ops[0, *n) the layer, then *n_out
 * output ops (both non-empty, or the test stops); the model's config in *m_out unless NULL. */
static void layer_and_output_ops(const char *model, model_shard s, model_op *ops, int *n, int *n_out,
                                 model_config *m_out) {
  ts_err e;
  model_config m;
  CU_ASSERT_EQUAL_FATAL(model_load(model, NULL, &m, &e), 0);
  if (m_out) *m_out = m;
  *n = model_layer_ops(&m, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_FATAL(*n > 0);
  *n_out = model_output_ops(&m, &s, ops + *n, MODEL_MAX_LAYER_OPS - *n, &e);
  CU_ASSERT_FATAL(*n_out > 0);
}

static void test_shapes_use_executor_layouts(void) {
  calib_sweep sw;
  calib_sweep_default(&sw);
  calib_shapes sh;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(calib_shapes_build(&sh, "gpt3-125m", NULL, &sw, &e), 0);
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n, n_out;
  model_config m;
  layer_and_output_ops("gpt3-125m", (model_shard){.tp = 2, .seq = 2048, .micro_batch = 1}, ops, &n, &n_out, &m);
  int linear = 0, logits = 0;
  for (int i = 0; i < n + n_out; i++) {
    const model_op *op = &ops[i];
    if (op->kind != MODEL_OP_GEMM) continue;
    int f = find_gemm(&sh, op->m, op->n, op->k), d = find_gemm(&sh, op->m, op->k, op->n),
        w = find_gemm_class(&sh, op->k, op->n, op->m, true);
    CU_ASSERT_FATAL(f >= 0 && d >= 0 && w >= 0);
    CU_ASSERT_EQUAL(sh.gemm[w].layout, EXEC_GEMM_TN_ACC);
    if (i < n) {
      /* FC1's forward and FC2's input gradient share one key (the same product):
       * the key keeps the first op's layout, NN or NT, never a weight-gradient one */
      CU_ASSERT(sh.gemm[f].layout == EXEC_GEMM_NN || sh.gemm[f].layout == EXEC_GEMM_NT);
      CU_ASSERT(sh.gemm[d].layout == EXEC_GEMM_NN || sh.gemm[d].layout == EXEC_GEMM_NT);
      if (linear == 0) { /* the layer's first GEMM (QKV): no key before it */
        CU_ASSERT_EQUAL(sh.gemm[f].layout, EXEC_GEMM_NN);
        CU_ASSERT_EQUAL(sh.gemm[d].layout, EXEC_GEMM_NT);
      }
      CU_ASSERT_EQUAL(sh.gemm[w].swap_mn, 0);
      linear++;
    } else {
      CU_ASSERT_EQUAL(sh.gemm[f].layout, EXEC_GEMM_NT);
      CU_ASSERT_EQUAL(sh.gemm[d].layout, EXEC_GEMM_NN);
      CU_ASSERT_EQUAL(sh.gemm[w].swap_mn, 1);
      logits++;
    }
  }
  CU_ASSERT(linear >= 4);
  CU_ASSERT_EQUAL(logits, 1);
  for (int i = 0; i < sh.n_attn; i++) {
    CU_ASSERT_EQUAL(sh.attn[i].bh, (long long)sh.attn[i].batch * sh.attn[i].heads);
    CU_ASSERT(m.heads % sh.attn[i].heads == 0);
  }
  calib_shapes_free(&sh);
}

static void test_shapes_bad_model(void) {
  calib_sweep sw;
  calib_sweep_default(&sw);
  calib_shapes sh;
  ts_err e;
  CU_ASSERT_EQUAL(calib_shapes_build(&sh, "no-such-model", NULL, &sw, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no-such-model"));
  CU_ASSERT_EQUAL(calib_shapes_build(&sh, ",", NULL, &sw, &e), -1);
}

/* ---- the FP8 GEMM's reference (the GPU check trusts it) and the FP8 keys ---- */

/* By hand: E4M3 codes 0x38 = 1, 0x40 = 2, 0xB8 = -1, 0x30 = 0.5, 0x01 = 2^-9 (the smallest subnormal);
 * C = a_scale b_scale A B^T with A [2 x 16], B [3 x 16]. */
static void test_fp8_gemm_reference(void) {
  uint8_t A[2 * 16] = {0}, B[3 * 16] = {0};
  for (int t = 0; t < 16; t++) A[t] = 0x38, B[t] = 0x38; /* A row 0 and B row 0: all ones */
  A[16] = 0x40;                                          /* A row 1: 2, then zeros */
  B[16] = 0xB8, B[17] = 0x30;                            /* B row 1: -1, 0.5, then zeros */
  B[32] = 0x01;                                          /* B row 2: 2^-9, then zeros */
  double C[6];
  calib_fp8_gemm_ref(A, 0.5f, B, 3.0f, 2, 3, 16, C);
  const double want[6] = {1.5 * 16, 1.5 * -0.5, 1.5 * 0x1p-9, 1.5 * 2, 1.5 * -2, 1.5 * 2 * 0x1p-9};
  for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(C[i], want[i], 1e-15);
}

static void test_fp8_random_and_error(void) {
  enum { N = 1 << 16 };
  static uint8_t q[N];
  uint64_t st = 42;
  calib_fp8_random_e4m3(q, N, 3.f, &st);
  int seen[256] = {0}, distinct = 0, subnormal = 0;
  for (int i = 0; i < N; i++) {
    CU_ASSERT((q[i] & 0x7F) != 0x7F); /* never NaN */
    CU_ASSERT((q[i] & 0x7F) <= 0x44); /* |x| <= 3 (0x44 = 3.0 in E4M3) */
    distinct += !seen[q[i]]++;
    subnormal += (q[i] & 0x78) == 0 && (q[i] & 0x07);
  }
  CU_ASSERT(distinct > 100); /* most codes of the range, both signs */
  CU_ASSERT(subnormal > 0);
  /* the error: BF16 1.0 (0x3F80) and 1.5 (0x3FC0) against 1 and 2: sqrt((0 + 0.25) / (1 + 4)) */
  const uint16_t gpu[2] = {0x3F80, 0x3FC0};
  const double ref[2] = {1.0, 2.0};
  long long bad;
  CU_ASSERT_DOUBLE_EQUAL(calib_fp8_rel_l2(gpu, ref, 2, &bad), sqrt(0.25 / 5.0), 1e-12);
  CU_ASSERT_EQUAL(bad, -1);
  const uint16_t poisoned[2] = {0x3F80, 0xFFFF}; /* an element left at the NaN poison */
  CU_ASSERT(isinf(calib_fp8_rel_l2(poisoned, ref, 2, &bad)));
  CU_ASSERT_EQUAL(bad, 1);
}

/* The FP8 keys: the forward, dgrad and wgrad keys of every linear layer FP8 training runs in FP8, each
 * (m, n, k) once with the roles that use it; the logits' keys only where a linear layer has them too. */
static int find_fp8(const calib_shapes *sh, long long m, long long n, long long k) {
  for (int g = 0; g < sh->n_gemm_fp8; g++)
    if (sh->gemm_fp8[g].m == m && sh->gemm_fp8[g].n == n && sh->gemm_fp8[g].k == k) return g;
  return -1;
}

static void test_shapes_fp8_keys(void) {
  calib_sweep sw;
  calib_sweep_default(&sw);
  calib_shapes sh;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(calib_shapes_build(&sh, "gpt3-125m,llama3-8b", NULL, &sw, &e), 0);
  CU_ASSERT_FATAL(sh.n_gemm_fp8 > 0);
  for (int a = 0; a < sh.n_gemm_fp8; a++) {
    CU_ASSERT(sh.gemm_fp8[a].roles != 0 && sh.gemm_fp8[a].roles < 8u);
    CU_ASSERT_EQUAL(find_fp8(&sh, sh.gemm_fp8[a].m, sh.gemm_fp8[a].n, sh.gemm_fp8[a].k), a); /* once */
    /* every FP8 key is also a BF16 key: the same products */
    int bf16 = 0;
    for (int g = 0; g < sh.n_gemm; g++)
      bf16 |= sh.gemm[g].m == sh.gemm_fp8[a].m && sh.gemm[g].n == sh.gemm_fp8[a].n && sh.gemm[g].k == sh.gemm_fp8[a].k;
    CU_ASSERT(bf16);
  }
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n, n_out;
  layer_and_output_ops("llama3-8b", (model_shard){.tp = 2, .seq = 2048, .micro_batch = 2}, ops, &n, &n_out, NULL);
  int linear = 0, logits = 0;
  for (int i = 0; i < n + n_out; i++) {
    const model_op *op = &ops[i];
    if (op->kind != MODEL_OP_GEMM) continue;
    int f = find_fp8(&sh, op->m, op->n, op->k), d = find_fp8(&sh, op->m, op->k, op->n),
        w = find_fp8(&sh, op->k, op->n, op->m);
    if (i < n && plan_fp8_linear(op)) {
      CU_ASSERT_FATAL(f >= 0 && d >= 0 && w >= 0);
      CU_ASSERT(sh.gemm_fp8[f].roles & 1u << CALIB_GEMM_FWD);
      CU_ASSERT(sh.gemm_fp8[d].roles & 1u << CALIB_GEMM_DGRAD);
      CU_ASSERT(sh.gemm_fp8[w].roles & 1u << CALIB_GEMM_WGRAD);
      linear++;
    } else if (i >= n) { /* the logits (vocabulary 128256 / 2 columns): BF16 only */
      CU_ASSERT_EQUAL(f, -1);
      CU_ASSERT_EQUAL(w, -1);
      logits++;
    }
  }
  CU_ASSERT_EQUAL(linear, 4); /* qkv, attn_out, fc1, fc2 */
  CU_ASSERT_EQUAL(logits, 1);
  CU_ASSERT(calib_shapes_gemm_fp8_flops(&sh) > 0 && calib_shapes_gemm_fp8_flops(&sh) < calib_shapes_gemm_flops(&sh));
  calib_shapes_free(&sh);
}

/* ---- fits and tables ---- */

static void test_fit_recovers_line(void) {
  double x[12], y[12], lat, gbps;
  for (int i = 0; i < 12; i++) x[i] = 1024.0 * (1 << (2 * i)), y[i] = 7.5 + x[i] / (120.0 * 1e3);
  CU_ASSERT_EQUAL_FATAL(calib_fit_linear(x, y, 12, &lat, &gbps), 0);
  CU_ASSERT(fabs(lat - 7.5) < 1e-6 * 7.5);
  CU_ASSERT(fabs(gbps - 120.0) < 1e-6 * 120.0);
  /* a curve with negative intercept gets latency 0 */
  for (int i = 0; i < 12; i++) y[i] = x[i] / 1e5 - 0.001 * (i == 0);
  CU_ASSERT_EQUAL(calib_fit_linear(x, y, 12, &lat, &gbps), 0);
  CU_ASSERT(lat >= 0 && gbps > 0);
  CU_ASSERT_EQUAL(calib_fit_linear(x, y, 1, &lat, &gbps), -1);
}

static void test_tables_and_fits(void) {
  schema_calibration c;
  memset(&c, 0, sizeof c);
  for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(schema_calibration_add_coll(&c, "allreduce", 2, 1024.0 * (1 << i), 10.0 + i), 0);
  CU_ASSERT_EQUAL(calib_add_kernel(&c, "norm", false, 1000, 0, 2.0), 0);
  CU_ASSERT_EQUAL(calib_add_kernel(&c, "norm", false, 1000, 0, 4.0), 0); /* same bytes: averaged */
  CU_ASSERT_EQUAL(calib_add_kernel(&c, "norm", false, 2000, 0, 5.0), 0);
  CU_ASSERT_EQUAL(c.n_kernels, 1);
  CU_ASSERT_EQUAL(c.kernels[0].n, 2);
  CU_ASSERT_DOUBLE_EQUAL(c.kernels[0].pts[0].us, 3.0, 1e-12);
  CU_ASSERT_EQUAL(calib_add_fits(&c), 0);
  CU_ASSERT_EQUAL_FATAL(c.n_fits, 1);
  CU_ASSERT_STRING_EQUAL(c.fits[0].name, "allreduce.2");
  CU_ASSERT(c.fits[0].gbps > 0 && c.fits[0].latency_us >= 0);
  schema_calibration_free(&c);
}

/* GEMM passes alternate direction and the table keeps their geometric mean:
 * a speed drift that grows over the run (here exp(0.001 per shape timed),
 * 38% over two passes of 160 shapes) changes every shape's value by the same
 * factor, so the ratios between shapes, which the interpolation reads, come
 * out exact; the median of three passes or two forward passes would not. */
static void test_gemm_passes_cancel_drift(void) {
  enum { N = 160, PASSES = 4 };
  CU_ASSERT_EQUAL(calib_gemm_pass_shape(0, 0, N), 0);
  CU_ASSERT_EQUAL(calib_gemm_pass_shape(1, 0, N), N - 1);
  CU_ASSERT_EQUAL(calib_gemm_pass_shape(2, 5, N), 5);
  CU_ASSERT_EQUAL(calib_gemm_pass_shape(3, 5, N), N - 6);
  double t[N][PASSES], truth[N];
  for (int i = 0; i < N; i++) truth[i] = 10.0 + 3.0 * (i % 7) * (i % 5);
  for (int p = 0; p < PASSES; p++)
    for (int j = 0; j < N; j++) {
      int i = calib_gemm_pass_shape(p, j, N);
      t[i][p] = truth[i] * exp(0.001 * (p * N + j)); /* slower the longer the run has gone */
    }
  double f0 = calib_gemm_combine_passes(t[0], PASSES) / truth[0];
  for (int i = 0; i < N; i++) CU_ASSERT_DOUBLE_EQUAL(calib_gemm_combine_passes(t[i], PASSES) / truth[i], f0, 1e-12 * f0);
  /* without the reverse passes the first shape and the last differ by the drift */
  double fwd_first[2] = {t[0][0], t[0][2]}, fwd_last[2] = {t[N - 1][0], t[N - 1][2]};
  double ratio = calib_gemm_combine_passes(fwd_last, 2) / truth[N - 1] / (calib_gemm_combine_passes(fwd_first, 2) / truth[0]);
  CU_ASSERT_DOUBLE_EQUAL(ratio, exp(0.001 * (N - 1)), 1e-9);
  /* a pass that did not measure the shape (0) is left out; none at all gives 0 */
  double some[3] = {4.0, 0.0, 9.0}, none[2] = {0.0, 0.0};
  CU_ASSERT_DOUBLE_EQUAL(calib_gemm_combine_passes(some, 3), 6.0, 1e-12);
  CU_ASSERT_EQUAL(calib_gemm_combine_passes(none, 2), 0.0);
}

/* --comm-passes: the median over passes of every table and size; a pass that
 * lacks a point (a failed size) is left out of that point's median. */
static void test_comm_passes_median(void) {
  schema_calibration pass[3], out;
  memset(pass, 0, sizeof pass);
  memset(&out, 0, sizeof out);
  const double us_ar[3][2] = {{10, 100}, {14, 90}, {11, 130}}; /* a slow second at 1 MiB in pass 3 */
  for (int p = 0; p < 3; p++) {
    CU_ASSERT_EQUAL(schema_calibration_add_coll(&pass[p], "allreduce", 2, 1024, us_ar[p][0]), 0);
    CU_ASSERT_EQUAL(schema_calibration_add_coll(&pass[p], "allreduce", 2, 1048576, us_ar[p][1]), 0);
    if (p != 1) CU_ASSERT_EQUAL(schema_calibration_add_coll(&pass[p], "allgather.taco128", 2, 4096, 20.0 + p), 0);
  }
  CU_ASSERT_EQUAL(schema_calibration_add_coll(&pass[1], "allreduce", 4, 1024, 99.0), 0); /* other group size */
  CU_ASSERT_EQUAL(calib_comm_combine_passes(pass, 3, &out), 0);
  CU_ASSERT_EQUAL(out.n_colls, 2);
  double us = 0;
  for (int t = 0; t < out.n_colls; t++) {
    const schema_coll_table *tab = &out.colls[t];
    if (!strcmp(tab->name, "allreduce")) {
      CU_ASSERT_EQUAL(tab->nranks, 2);
      CU_ASSERT_EQUAL(tab->n, 2);
      for (int i = 0; i < tab->n; i++)
        CU_ASSERT_DOUBLE_EQUAL(tab->pts[i].us, tab->pts[i].bytes == 1024 ? 11.0 : 100.0, 1e-12);
    } else {
      CU_ASSERT_STRING_EQUAL(tab->name, "allgather.taco128");
      CU_ASSERT_EQUAL(tab->n, 1);
      us = tab->pts[0].us; /* passes 1 and 3 only: 20 and 22 */
    }
  }
  CU_ASSERT_DOUBLE_EQUAL(us, 21.0, 1e-12);
  CU_ASSERT_EQUAL(calib_comm_combine_passes(pass, 0, &out), -1);
  for (int p = 0; p < 3; p++) schema_calibration_free(&pass[p]);
  schema_calibration_free(&out);
}

/* The collectives' batch spread: the rows, the TSV next to a calibration file
 * and the summary that goes into its notes. */
static void test_spread_table(void) {
  calib_spread sp;
  memset(&sp, 0, sizeof sp);
  char sum[160];
  calib_spread_summary(&sp, sum, sizeof sum);
  CU_ASSERT_PTR_NOT_NULL(strstr(sum, "no collective"));
  for (int i = 0; i < 300; i++) { /* past the first allocation */
    calib_spread_row r = {.nranks = 2, .reps = 7, .batch = 3, .bytes = 1024.0 * (i + 1), .median_us = 100.0,
                          .min_us = 99.0, .max_us = 99.0 + (i % 10)};
    snprintf(r.name, sizeof r.name, "allreduce");
    CU_ASSERT_EQUAL_FATAL(calib_spread_add(&sp, &r), 0);
  }
  CU_ASSERT_EQUAL(sp.n, 300);
  calib_spread_summary(&sp, sum, sizeof sum);
  /* spreads 0..9 %, thirty of each: median 4 %, p90 (the 270th of 300) 8 % */
  CU_ASSERT_PTR_NOT_NULL(strstr(sum, "4.0% median"));
  CU_ASSERT_PTR_NOT_NULL(strstr(sum, "8.0% p90 over 300 sizes"));
  char path[] = "/tmp/test_calibrate_spread_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  ts_err e = {{0}, 0};
  CU_ASSERT_EQUAL(calib_spread_write(&sp, path, &e), 0);
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[256];
  int lines = 0, third_ok = 0;
  while (fgets(line, sizeof line, f)) {
    lines++;
    if (lines == 5) third_ok = strcmp(line, "allreduce\t2\t3072\t100.000\t99.000\t101.000\t2.00\t7\t3\n") == 0;
  }
  fclose(f);
  unlink(path);
  CU_ASSERT_EQUAL(lines, 302); /* comment, header, rows */
  CU_ASSERT(third_ok);
  CU_ASSERT_EQUAL(calib_spread_write(&sp, "/nonexistent-dir/x.tsv", &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "/nonexistent-dir/x.tsv"));
  calib_spread_free(&sp);
  CU_ASSERT_EQUAL(sp.n, 0);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("calibrate", NULL, NULL);
  CU_add_test(s, "bf16 rounding", test_bf16_rounding);
  CU_add_test(s, "norms normalize", test_norms_normalize);
  CU_add_test(s, "layernorm dx by finite differences", test_layernorm_grad);
  CU_add_test(s, "rmsnorm dx by finite differences", test_rmsnorm_grad);
  CU_add_test(s, "GELU and SwiGLU gradients", test_activation_grads);
  CU_add_test(s, "softmax and cross-entropy", test_softmax_and_loss);
  CU_add_test(s, "AdamW step and embedding", test_adamw_and_embedding);
  CU_add_test(s, "shapes cover the model GEMMs", test_shapes_cover_model_gemms);
  CU_add_test(s, "shapes use the executor's GEMM layouts", test_shapes_use_executor_layouts);
  CU_add_test(s, "shapes: bad model names", test_shapes_bad_model);
  CU_add_test(s, "FP8 GEMM reference by hand", test_fp8_gemm_reference);
  CU_add_test(s, "FP8 random codes and the check's error", test_fp8_random_and_error);
  CU_add_test(s, "shapes: FP8 keys of the FP8 linear layers", test_shapes_fp8_keys);
  CU_add_test(s, "fit recovers latency and bandwidth", test_fit_recovers_line);
  CU_add_test(s, "kernel tables merge, fits are named", test_tables_and_fits);
  CU_add_test(s, "collectives' batch spread: rows, TSV, summary", test_spread_table);
  CU_add_test(s, "GEMM passes: alternating direction, geometric mean cancels a drift", test_gemm_passes_cancel_drift);
  CU_add_test(s, "collective passes: median per table and size", test_comm_passes_median);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

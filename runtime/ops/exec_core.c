/* exec_core.c — the executor's attention core and norm backward on plain
 * buffers (see exec_core.h). */
#include "exec_core.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec_flash.h"
#include "exec_kernels.h"
#include "ops_variants.h"
#include "rt_ops.h"

#define CORE_TRY(x)                                                                                          \
  do {                                                                                                       \
    if ((x) != 0) return -1;                                                                                 \
  } while (0)

static long long kv_heads_of(const exec_attention_args *a) { return a->kv_heads > 0 ? a->kv_heads : a->heads; }
static long long v_dim_of(const exec_attention_args *a) { return a->v_head_dim > 0 ? a->v_head_dim : a->head_dim; }
int exec_attention_fused(long long seq, long long head_dim, long long v_head_dim) {
  return (v_head_dim <= 0 || v_head_dim == head_dim) && exec_flash_selected(seq, head_dim);
}
static int fused(const exec_attention_args *a) { return exec_attention_fused(a->seq, a->head_dim, v_dim_of(a)); }

int exec_attention_gqa_ok(long long seq, long long heads, long long kv_heads, long long head_dim) {
  return exec_flash_selected(seq, head_dim) && exec_flash_gqa_supported(seq, heads, kv_heads, head_dim);
}

/* grouped heads on the unfused path: refused (exec_core.h) */
static int unfused_mha_only(const exec_attention_args *a, ts_err *e) {
  if (kv_heads_of(a) == a->heads) return 0;
  return ts_fail(e, NULL, "attention",
                 "grouped-query attention (%lld query heads over %lld key/value heads) runs on the fused kernels "
                 "only: seq %lld, head_dim %lld are not supported by them (or --variant attn=unfused is set)",
                 a->heads, kv_heads_of(a), a->seq, a->head_dim);
}

int exec_attention_fwd(const exec_attention_args *a, ts_err *e) {
  if (fused(a)) /* lse in P (exec_core.h) */
    return exec_flash_fwd_gqa(a->qkv, a->out, (float *)a->P, a->batch, a->seq, a->heads, kv_heads_of(a),
                              a->head_dim, a->stream, e);
  CORE_TRY(unfused_mha_only(a, e));
  /* Q and K heads d wide, V heads dv; the output heads dv */
  const long long S = a->seq, d = a->head_dim, H = a->heads, hl = H * d, dv = v_dim_of(a), ho = H * dv;
  const long long ld = 2 * hl + ho;
  const uint16_t *qkv = a->qkv;
  for (int b = 0; b < a->batch; b++) {
    const uint16_t *q = qkv + b * S * ld, *k = q + hl;
    uint16_t *scores = (uint16_t *)a->scores + b * H * S * S;
    exec_gemm_shape s1 = {.trans_b = 1, .m = S, .n = S, .k = d, .lda = ld, .ldb = ld, .ldc = S,
                          .batch = H, .stride_a = d, .stride_b = d, .stride_c = S * S};
    CORE_TRY(exec_gemm_run(a->gemm, &s1, 1.f, q, k, 0.f, scores, a->stream, e));
  }
  const long long rows = (long long)a->batch * H;
  if (a->lower_softmax)
    CORE_TRY(exec_softmax_causal_lower_fwd(a->scores, a->P, rows, (int)S, 1.0f / sqrtf((float)d), a->stream, e));
  else
    CORE_TRY(rt_softmax_causal_fwd(a->scores, a->P, rows, (int)S, 1.0f / sqrtf((float)d), a->stream, e));
  for (int b = 0; b < a->batch; b++) {
    const uint16_t *v = qkv + b * S * ld + 2 * hl;
    const uint16_t *P = (const uint16_t *)a->P + b * H * S * S;
    uint16_t *out = (uint16_t *)a->out + b * S * ho;
    exec_gemm_shape s2 = {.m = S, .n = dv, .k = S, .lda = S, .ldb = ld, .ldc = ho,
                          .batch = H, .stride_a = S * S, .stride_b = dv, .stride_c = dv};
    CORE_TRY(exec_gemm_run(a->gemm, &s2, 1.f, P, v, 0.f, out, a->stream, e));
  }
  return 0;
}

int exec_attention_bwd(const exec_attention_args *a, ts_err *e) {
  if (fused(a)) /* lse from P, scratch in dP (exec_core.h): its BF16 elements / 2 floats */
    return exec_flash_bwd_gqa(a->qkv, a->out, a->dout, (const float *)a->P, (float *)a->dP,
                              (long long)a->batch * a->heads * a->seq * a->seq / 2, a->dqkv, a->batch, a->seq,
                              a->heads, kv_heads_of(a), a->head_dim, a->stream, e);
  CORE_TRY(unfused_mha_only(a, e));
  const long long S = a->seq, d = a->head_dim, H = a->heads, hl = H * d, dvh = v_dim_of(a), ho = H * dvh;
  const long long ld = 2 * hl + ho;
  const float scale = 1.0f / sqrtf((float)d);
  for (int b = 0; b < a->batch; b++) {
    const uint16_t *v = (const uint16_t *)a->qkv + b * S * ld + 2 * hl;
    const uint16_t *dO = (const uint16_t *)a->dout + b * S * ho;
    const uint16_t *P = (const uint16_t *)a->P + b * H * S * S;
    uint16_t *dP = (uint16_t *)a->dP + b * H * S * S, *dv = (uint16_t *)a->dqkv + b * S * ld + 2 * hl;
    /* dP = dO . V^T */
    exec_gemm_shape s1 = {.trans_b = 1, .m = S, .n = S, .k = dvh, .lda = ho, .ldb = ld, .ldc = S,
                          .batch = H, .stride_a = dvh, .stride_b = dvh, .stride_c = S * S};
    CORE_TRY(exec_gemm_run(a->gemm, &s1, 1.f, dO, v, 0.f, dP, a->stream, e));
    /* dV = P^T . dO */
    exec_gemm_shape s2 = {.trans_a = 1, .m = S, .n = dvh, .k = S, .lda = S, .ldb = ho, .ldc = ld,
                          .batch = H, .stride_a = S * S, .stride_b = dvh, .stride_c = dvh};
    CORE_TRY(exec_gemm_run(a->gemm, &s2, 1.f, P, dO, 0.f, dv, a->stream, e));
  }
  const long long rows = (long long)a->batch * H;
  if (a->lower_softmax)
    CORE_TRY(exec_softmax_causal_lower_bwd(a->P, a->dP, a->dS, rows, (int)S, scale, a->stream, e));
  else
    CORE_TRY(rt_softmax_bwd(a->P, a->dP, a->dS, rows * S, (int)S, scale, a->stream, e));
  for (int b = 0; b < a->batch; b++) {
    const uint16_t *q = (const uint16_t *)a->qkv + b * S * ld, *k = q + hl;
    const uint16_t *dS = (const uint16_t *)a->dS + b * H * S * S;
    uint16_t *dq = (uint16_t *)a->dqkv + b * S * ld, *dk = dq + hl;
    /* dQ = dS . K ; dK = dS^T . Q */
    exec_gemm_shape s3 = {.m = S, .n = d, .k = S, .lda = S, .ldb = ld, .ldc = ld,
                          .batch = H, .stride_a = S * S, .stride_b = d, .stride_c = d};
    CORE_TRY(exec_gemm_run(a->gemm, &s3, 1.f, dS, k, 0.f, dq, a->stream, e));
    exec_gemm_shape s4 = {.trans_a = 1, .m = S, .n = d, .k = S, .lda = S, .ldb = ld, .ldc = ld,
                          .batch = H, .stride_a = S * S, .stride_b = d, .stride_c = d};
    CORE_TRY(exec_gemm_run(a->gemm, &s4, 1.f, dS, q, 0.f, dk, a->stream, e));
  }
  return 0;
}

int exec_norm_bwd(const void *dy, const void *x, const void *gamma, const float *mean, const float *rstd,
                  float *dgamma, float *dbeta, void *dx_tmp, void *dx, long long rows, int cols, void *stream,
                  ts_err *e) {
  /* the fused kernel adds its blocks' weight-gradient partials atomically */
  if (exec_norm_bwd_fused_supported(cols) && !ops_variant_is(OPS_V_NORM_BWD, "unfused") &&
      !ops_variant_is(OPS_V_REDUCE, "ordered"))
    return exec_norm_bwd_fused(dy, x, gamma, mean, rstd, dgamma, dbeta, dx, rows, cols, stream, e);
  CORE_TRY(exec_norm_wgrad(dy, x, mean, rstd, dgamma, dbeta, rows, cols, stream, e));
  if (mean)
    CORE_TRY(rt_layernorm_bwd_dx(dy, x, gamma, mean, rstd, dx_tmp, rows, cols, stream, e));
  else
    CORE_TRY(rt_rmsnorm_bwd_dx(dy, x, gamma, rstd, dx_tmp, rows, cols, stream, e));
  return rt_add(dx, dx_tmp, dx, rows * cols, stream, e);
}

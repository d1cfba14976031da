/* exec_mla.c — multi-head latent attention's layer ops (see exec_mla.h). */
#include "exec_mla.h"
#include "exec_model_internal.h"

#include <stdlib.h>
#include <string.h>

#include "exec_core.h"
#include "rt_mla.h"
#include "rt_ops.h"

int exec_mla_op(const exec_model *m, exec_layer_op op) {
  return m->mla && ((op >= EXEC_OP_Q_A && op <= EXEC_OP_KV_B) || op == EXEC_OP_ROPE);
}

static size_t lat_width(const exec_ref_config *c) { return (size_t)(c->q_lora > c->kv_lora ? c->q_lora : c->kv_lora); }

int exec_mla_create(exec_model *m, size_t *allocated, ts_err *e) {
  const exec_ref_config *c = &m->cfg;
  if (!exec_ref_is_mla(c)) return 0;
  if (!(c->rope_theta > 0))
    return ts_fail(e, NULL, "model.position", "multi-head latent attention with learned positions: the executor "
                   "runs MLA with RoPE only (NOT IMPLEMENTED here)");
  m->mla = calloc(1, sizeof *m->mla);
  if (!m->mla) return ts_fail_sys(e, "exec: out of memory");
  struct exec_mla_scratch *s = m->mla;
  const size_t T = (size_t)m->tokens, bf = 2, kw = (size_t)(c->kv_lora + c->qk_rope);
  const size_t sizes[] = {T * m->heads_local * (size_t)(c->qk_nope + c->v_head) * bf, T * c->kv_lora * bf, T * kw * bf,
                          T * lat_width(c) * bf, T * lat_width(c) * bf, T * lat_width(c) * bf};
  void **ptrs[] = {&s->kvb, &s->ckv, &s->dkva, &s->dlat, &s->dlat_in, &s->dx_tmp};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    cudaError_t ce = cudaMalloc(ptrs[i], sizes[i]);
    if (ce != cudaSuccess)
      return ts_fail_sys(e, "cudaMalloc(%zu bytes, %.2f GiB allocated before): %s", sizes[i],
                         (double)*allocated / (1 << 30), cudaGetErrorString(ce));
    *allocated += sizes[i];
  }
  return 0;
}

void exec_mla_destroy(exec_model *m) {
  if (!m->mla) return;
  struct exec_mla_scratch *s = m->mla;
  void *p[] = {s->kvb, s->ckv, s->dkva, s->dlat, s->dlat_in, s->dx_tmp};
  for (size_t i = 0; i < sizeof p / sizeof *p; i++) cudaFree(p[i]);
  free(s);
  m->mla = NULL;
}

/* ---- GEMMs (row-major; a weight is stored [in x out]) ---- */

/* C[M x N] (ldc) = A[M x K] . W[K x N] */
static int mm_fwd(exec_model *m, long long M, long long N, long long K, const void *A, const void *W, void *C,
                  long long ldc, ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NN, M, N, K);
  s.ldc = ldc;
  return exec_gemm_run(m->gemm, &s, 1.f, A, W, 0.f, C, m->stream, e);
}
/* dA[M x K] (beta: 0 writes, 1 adds) = dC[M x N] (ldc) . W^T */
static int mm_dgrad(exec_model *m, long long M, long long N, long long K, const void *dC, long long ldc, const void *W,
                    float beta, void *dA, ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NT, M, K, N);
  s.lda = ldc;
  return exec_gemm_run(m->gemm, &s, 1.f, dC, W, beta, dA, m->stream, e);
}
/* dW[K x N] += A^T . dC (dC's rows ldc apart; FP32 accumulators) */
static int mm_wgrad(exec_model *m, long long M, long long N, long long K, const void *A, const void *dC, long long ldc,
                    float *dW, ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_TN_ACC, K, N, M);
  s.ldb = ldc;
  return exec_gemm_run(m->gemm, &s, 1.f, A, dC, exec_gemm_packed_beta(EXEC_GEMM_TN_ACC), dW, m->stream, e);
}

/* A GEMM's backward halves: dgrad unless part is the wgrad, wgrad unless it is the dgrad. */
#define DGRAD (part != PLAN_PART_WGRAD)
#define WGRAD (part != PLAN_PART_DGRAD)

/* c_kv (kva's first kv_lora columns) packed into the scratch: the latent norm's input */
static int ckv_of(exec_model *m, const exec_layer_acts *a, ts_err *e) {
  const size_t kl = (size_t)m->cfg.kv_lora, kw = kl + (size_t)m->cfg.qk_rope;
  EX_CUDA(cudaMemcpy2DAsync(m->mla->ckv, kl * 2, a->kva, kw * 2, kl * 2, (size_t)m->tokens, cudaMemcpyDeviceToDevice,
                            m->stream));
  return 0;
}

/* A latent RMSNorm's backward: din (overwritten) from dout; its gain's gradient accumulated. */
static int latent_norm_bwd(exec_model *m, const void *x, int t, const float *rstd, const void *dout, void *din,
                           int cols, ts_err *e) {
  EX_CUDA(cudaMemsetAsync(din, 0, (size_t)m->tokens * (size_t)cols * 2, m->stream));
  return exec_norm_bwd(dout, x, exec_w16_of(m, t), NULL, rstd, exec_grad_of(m, t), NULL, m->mla->dx_tmp, din,
                       m->tokens, cols, m->stream, e);
}

int exec_mla_fwd(exec_model *m, exec_layer_op op, int l, ts_err *e) {
  const exec_ref_config *c = &m->cfg;
  exec_layer_acts *a = exec_acts(m, l);
  const long long T = m->tokens, h = c->hidden, H = m->heads_local, ql = c->q_lora, kl = c->kv_lora;
  const long long kw = kl + c->qk_rope, qc = H * m->head_dim, bw = c->qk_nope + c->v_head;
  const float eps = (float)c->norm_eps;
  switch (op) {
  case EXEC_OP_Q_A: return mm_fwd(m, T, ql, h, a->n1, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_Q_A)), a->cq, ql, e);
  case EXEC_OP_Q_A_NORM:
    return rt_rmsnorm_fwd(a->cq, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_Q_A_NORM)), a->cqn, a->rstd_q, T, (int)ql,
                          eps, m->stream, e);
  case EXEC_OP_Q_B: /* straight into qkv's query columns */
    return mm_fwd(m, T, qc, ql, a->cqn, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_Q_B)), a->qkv, m->qkv_cols, e);
  case EXEC_OP_KV_A: return mm_fwd(m, T, kw, h, a->n1, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_KV_A)), a->kva, kw, e);
  case EXEC_OP_KV_A_NORM:
    EX_TRY(ckv_of(m, a, e));
    return rt_rmsnorm_fwd(m->mla->ckv, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_KV_A_NORM)), a->ckvn, a->rstd_kv, T,
                          (int)kl, eps, m->stream, e);
  case EXEC_OP_KV_B: /* [k_nope | v] per head into the scratch; the kv_scatter op puts them in place */
    return mm_fwd(m, T, H * bw, kl, a->ckvn, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_KV_B)), m->mla->kvb, H * bw, e);
  case EXEC_OP_ROPE: /* the query heads' rope parts; the shared key (kva's last columns) into every key head */
    return rt_mla_rope_fwd(a->qkv, m->qkv_cols, (const char *)a->kva + kl * 2, (int)kw, T, (int)H, c->qk_nope, c->qk_rope,
                           c->seq, m->rope_inv_freq, m->stream, e);
  default: return ts_fail_sys(e, "exec: layer op %s is not an MLA op", exec_layer_op_names[op]);
  }
}

int exec_mla_bwd(exec_model *m, exec_layer_op op, int l, int part, ts_err *e) {
  const exec_ref_config *c = &m->cfg;
  exec_layer_acts *a = exec_acts(m, l);
  struct exec_mla_scratch *s = m->mla;
  const long long T = m->tokens, h = c->hidden, H = m->heads_local, ql = c->q_lora, kl = c->kv_lora;
  const long long kw = kl + c->qk_rope, qc = H * m->head_dim, bw = c->qk_nope + c->v_head, ld = m->qkv_cols;
  const int gemm = op == EXEC_OP_Q_A || op == EXEC_OP_Q_B || op == EXEC_OP_KV_A || op == EXEC_OP_KV_B;
  int t;
  if (part != PLAN_PART_WHOLE && !gemm)
    return ts_fail(e, NULL, "program", "layer op %s has no dgrad/wgrad halves", exec_layer_op_names[op]);
  switch (op) {
  case EXEC_OP_ROPE: /* the query parts rotated back in place; the shared key's gradient summed over the heads */
    return rt_mla_rope_bwd(m->dqkv, (int)ld, (char *)s->dkva + kl * 2, (int)kw, T, (int)H, c->qk_nope, c->qk_rope,
                           c->seq, m->rope_inv_freq, m->stream, e);
  case EXEC_OP_KV_B: /* both halves read [dk_nope | dv] per head, gathered by the kv_scatter op before */
    t = exec_layer_tensor(m, l, EXEC_T_KV_B);
    if (DGRAD) EX_TRY(mm_dgrad(m, T, H * bw, kl, s->kvb, H * bw, exec_w16_of(m, t), 0.f, s->dlat, e));
    return WGRAD ? mm_wgrad(m, T, H * bw, kl, a->ckvn, s->kvb, H * bw, exec_grad_of(m, t), e) : 0;
  case EXEC_OP_KV_A_NORM: /* dckv into kva's gradient beside the shared key's */
    EX_TRY(ckv_of(m, a, e));
    EX_TRY(latent_norm_bwd(m, s->ckv, exec_layer_tensor(m, l, EXEC_T_KV_A_NORM), a->rstd_kv, s->dlat, s->dlat_in, (int)kl,
                           e));
    EX_CUDA(cudaMemcpy2DAsync(s->dkva, (size_t)kw * 2, s->dlat_in, (size_t)kl * 2, (size_t)kl * 2, (size_t)T,
                              cudaMemcpyDeviceToDevice, m->stream));
    return 0;
  case EXEC_OP_KV_A: /* the gradient of n1 starts here (kv_a runs after q_a forward) */
    t = exec_layer_tensor(m, l, EXEC_T_KV_A);
    if (DGRAD) EX_TRY(mm_dgrad(m, T, kw, h, s->dkva, kw, exec_w16_of(m, t), 0.f, m->dtmp, e));
    return WGRAD ? mm_wgrad(m, T, kw, h, a->n1, s->dkva, kw, exec_grad_of(m, t), e) : 0;
  case EXEC_OP_Q_B: /* the queries' gradient read in place in dqkv */
    t = exec_layer_tensor(m, l, EXEC_T_Q_B);
    if (DGRAD) EX_TRY(mm_dgrad(m, T, qc, ql, m->dqkv, ld, exec_w16_of(m, t), 0.f, s->dlat, e));
    return WGRAD ? mm_wgrad(m, T, qc, ql, a->cqn, m->dqkv, ld, exec_grad_of(m, t), e) : 0;
  case EXEC_OP_Q_A_NORM:
    return latent_norm_bwd(m, a->cq, exec_layer_tensor(m, l, EXEC_T_Q_A_NORM), a->rstd_q, s->dlat, s->dlat_in, (int)ql, e);
  case EXEC_OP_Q_A: /* added to kv_a's part of n1's gradient */
    t = exec_layer_tensor(m, l, EXEC_T_Q_A);
    if (DGRAD) EX_TRY(mm_dgrad(m, T, ql, h, s->dlat_in, ql, exec_w16_of(m, t), 1.f, m->dtmp, e));
    return WGRAD ? mm_wgrad(m, T, ql, h, a->n1, s->dlat_in, ql, exec_grad_of(m, t), e) : 0;
  default: return ts_fail_sys(e, "exec: layer op %s is not an MLA op", exec_layer_op_names[op]);
  }
}

int exec_mla_kv_copy(exec_model *m, int l, int backward, ts_err *e) {
  const exec_ref_config *c = &m->cfg;
  if (!m->mla) return ts_fail_sys(e, "exec: kv_scatter op on a model without MLA");
  const int H = (int)m->heads_local;
  if (backward)
    return rt_mla_kv_gather(m->dqkv, m->mla->kvb, m->tokens, m->qkv_cols, H, c->qk_nope, c->qk_rope, c->v_head,
                            m->stream, e);
  return rt_mla_kv_scatter(m->mla->kvb, exec_acts(m, l)->qkv, m->tokens, m->qkv_cols, H, c->qk_nope, c->qk_rope,
                           c->v_head, m->stream, e);
}

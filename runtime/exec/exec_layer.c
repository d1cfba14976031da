/* exec_layer.c — the compute of each op of the program on one rank: GEMMs
 * (cuBLASLt through exec_gemm) and their biases, RoPE, norms, attention, activations,
 * the vocabulary-parallel output layer and loss, the embedding, AdamW. */
#include "exec_model_internal.h"
#include "exec_mla.h"
#include "exec_moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_core.h"
#include "exec_kernels.h"
#include "model.h"
#include "rt_ops.h"
#include "rt_ops_layer.h"

/* ---- GEMM shorthands (row-major) ---- */

/* Y[M x N] = X[M x K] . W[K x N] (bf16 out) */
static int linear_fwd(exec_model *m, long long M, long long N, long long K, const void *X, const void *W, void *Y,
                      ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NN, M, N, K);
  return exec_gemm_run(m->gemm, &s, 1.f, X, W, 0.f, Y, m->stream, e);
}
/* dX[M x K] = dY[M x N] . W^T */
static int linear_dgrad(exec_model *m, long long M, long long N, long long K, const void *dY, const void *W, void *dX,
                        ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NT, M, K, N);
  return exec_gemm_run(m->gemm, &s, 1.f, dY, W, 0.f, dX, m->stream, e);
}
/* dW[K x N] += X^T . dY, deferred when a TP all-reduce of this op's input gradient follows */
static int linear_wgrad(exec_model *m, long long M, long long N, long long K, const void *X, const void *dY, float *dW,
                        ts_err *e);
static int linear_wgrad_deferred(exec_model *m, long long M, long long N, long long K, const void *X, const void *dY,
                                 float *dW, ts_err *e) {
  if (!m->tp_comm || !m->overlap_wgrad) return linear_wgrad(m, M, N, K, X, dY, dW, e);
  m->pending_wgrad.active = 1;
  m->pending_wgrad.M = M, m->pending_wgrad.N = N, m->pending_wgrad.K = K;
  m->pending_wgrad.X = X, m->pending_wgrad.dY = dY, m->pending_wgrad.dW = dW;
  return 0;
}
int exec_flush_wgrad(exec_model *m, ts_err *e) {
  if (!m->pending_wgrad.active) return 0;
  m->pending_wgrad.active = 0;
  return linear_wgrad(m, m->pending_wgrad.M, m->pending_wgrad.N, m->pending_wgrad.K, m->pending_wgrad.X,
                      m->pending_wgrad.dY, m->pending_wgrad.dW, e);
}

/* dW[K x N] += X^T . dY (fp32 accumulate) */
static int linear_wgrad(exec_model *m, long long M, long long N, long long K, const void *X, const void *dY, float *dW,
                        ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_TN_ACC, K, N, M);
  return exec_gemm_run(m->gemm, &s, 1.f, X, dY, exec_gemm_packed_beta(EXEC_GEMM_TN_ACC), dW, m->stream, e);
}

int exec_tp_allreduce_plain(exec_model *m, void *buf, size_t count, ncclDataType_t type, ncclRedOp_t op, ts_err *e) {
  if (!m->tp_comm) return 0;
  EX_NCCL(ncclAllReduce(buf, buf, count, type, op, m->tp_comm, m->stream));
  return 0;
}

/* Row row0 of a row-major [T x cols] bf16 buffer. */
static void *rows_of(void *buf, long long row0, long long cols) { return (char *)buf + (size_t)(row0 * cols) * 2; }

/* ---- norms ---- */

/* This rank's rows of a [T x hidden] bf16 buffer (all of it without sequence
 * parallelism), and of a per-token FP32 statistic. */
static void *shard(const exec_model *m, const void *buf) {
  return (char *)buf + (size_t)(m->sp_row0 * m->cfg.hidden) * 2;
}
static float *shard_stat(const exec_model *m, float *stat) { return stat + m->sp_row0; }

/* Norm of this rank's rows (under SP the residual stream is sharded by rows). */
static int norm_fwd(exec_model *m, const void *x, int tg, int tb, void *y, float *mean, float *rstd, ts_err *e) {
  const float eps = (float)m->cfg.norm_eps;
  if (m->cfg.norm == EXEC_NORM_LAYERNORM)
    return rt_layernorm_fwd(shard(m, x), exec_w16_of(m, tg), exec_w16_of(m, tb), shard(m, y), shard_stat(m, mean),
                            shard_stat(m, rstd), m->sp_rows, m->cfg.hidden, eps, m->stream, e);
  return rt_rmsnorm_fwd(shard(m, x), exec_w16_of(m, tg), shard(m, y), shard_stat(m, rstd), m->sp_rows, m->cfg.hidden,
                        eps, m->stream, e);
}

/* dx += norm'(dy) on this rank's rows; weight gradients accumulate. dy is m->dtmp. */
static int norm_bwd(exec_model *m, const void *x, int tg, int tb, float *mean, float *rstd, ts_err *e) {
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM;
  return exec_norm_bwd(shard(m, m->dtmp), shard(m, x), exec_w16_of(m, tg), ln ? shard_stat(m, mean) : NULL,
                       shard_stat(m, rstd), exec_grad_of(m, tg), ln ? exec_grad_of(m, tb) : NULL, shard(m, m->dtmp2),
                       shard(m, m->dx), m->sp_rows, m->cfg.hidden, m->stream, e);
}

/* ---- attention (exec_core.c: unfused, batched GEMMs around a causal softmax, one call per sequence) ---- */

static exec_attention_args attention_args(exec_model *m, exec_layer_acts *a, const void *qkv) {
  exec_attention_args r = {.gemm = m->gemm, .stream = m->stream, .batch = m->cfg.batch,
                           .lower_softmax = m->lower_softmax, .seq = m->cfg.seq, .heads = m->heads_local,
                           .kv_heads = m->kv_local, .head_dim = m->head_dim, .v_head_dim = m->v_dim, .qkv = qkv,
                           .scores = m->scores,
                           .P = a->P, .out = a->attn, .dout = m->dattn, .dP = m->dP, .dS = m->dS, .dqkv = m->dqkv};
  return r;
}

/* exec_core.c chooses fused (exec_flash.cu) or unfused as
 * exec_flash_selected() says; the fused one keeps each row's log-sum-exp
 * where the unfused path keeps P (a->P) and uses m->dP as the backward's scratch.
 * Grouped-query attention (kv_local < heads_local) runs on the fused kernels,
 * which read each group's key/value head in place and write dqkv in qkv's
 * [T x qkv_cols] layout with the key/value gradients summed over the group. */
static int attention_fwd(exec_model *m, exec_layer_acts *a, ts_err *e) {
  exec_attention_args r = attention_args(m, a, a->qkv);
  return exec_attention_fwd(&r, e);
}

static int attention_bwd(exec_model *m, exec_layer_acts *a, ts_err *e) {
  exec_attention_args r = attention_args(m, a, a->qkv);
  return exec_attention_bwd(&r, e);
}

/* ---- biases and RoPE ---- */

/* A bias tensor's BF16 row and FP32 gradient, or 0 when the model has none. */
static int bias_of(exec_model *m, int l, exec_tensor_kind kind) { return exec_layer_tensor(m, l, kind); }
static int add_bias(exec_model *m, int t, void *y, long long rows, int cols, ts_err *e) {
  return t < 0 ? 0 : rt_bias_add(y, exec_w16_of(m, t), rows, cols, cols, m->stream, e);
}
static int bias_grad(exec_model *m, int t, const void *dy, long long rows, int cols, ts_err *e) {
  return t < 0 ? 0 : rt_bias_grad(dy, exec_grad_of(m, t), rows, cols, cols, m->stream, e);
}
/* RoPE on the query and key heads of a [T x qkv_cols] buffer (inverse: on their gradient). */
static int rope(exec_model *m, void *qkv, int inverse, ts_err *e) {
  if (!m->rope_inv_freq) return ts_fail_sys(e, "exec: rope op on a model without RoPE");
  return rt_rope(qkv, m->tokens, m->qkv_cols, m->heads_local + m->kv_local, m->head_dim, m->cfg.seq,
                 m->rope_inv_freq, inverse, m->stream, e);
}

/* The QK norm (qk_norm): each of this rank's query heads, then each key head, of a [T x qkv_cols]
 * buffer RMS-normed in place by q_norm / k_norm (forward: on qkv, keeping the input in qk_in and the
 * 1/rms in qk_rstd; backward: on dqkv, after RoPE's inverse, the weights' gradients accumulated). */
static int qk_norm(exec_model *m, exec_layer_acts *a, int l, int key, int backward, ts_err *e) {
  const long long T = m->tokens, hl = m->hidden_local;
  const int heads = key ? m->kv_local : m->heads_local, t = exec_layer_tensor(m, l, key ? EXEC_T_K_NORM : EXEC_T_Q_NORM);
  if (t < 0) return ts_fail_sys(e, "exec: qk norm op on a model without the QK norm");
  const long long col0 = key ? hl : 0;
  void *saved = (char *)a->qk_in + (size_t)(key ? T * hl : 0) * 2;
  float *rstd = a->qk_rstd + (key ? T * m->heads_local : 0);
  if (!backward)
    return rt_qk_norm_fwd((char *)a->qkv + col0 * 2, m->qkv_cols, saved, exec_w16_of(m, t), rstd, T, heads, m->head_dim,
                          (float)m->cfg.norm_eps, m->stream, e);
  return rt_qk_norm_bwd((char *)m->dqkv + col0 * 2, m->qkv_cols, saved, exec_w16_of(m, t), rstd, exec_grad_of(m, t), T,
                        heads, m->head_dim, m->stream, e);
}

/* ---- layer ops ---- */

static void *layer_output(exec_model *m, int l) {
  /* recomputation needs only the layer's inner activations: its output (the
   * next layer's kept input, or a stage's sent boundary) is not rewritten */
  if (m->recomputing) return m->dtmp2;
  return l + 1 < m->cfg.layers ? exec_acts(m, l + 1)->x_in : m->x_final; /* at a stage's end: what is sent */
}

int exec_layer_fwd(exec_model *m, exec_layer_op op, int l, ts_err *e) {
  if (exec_mla_op(m, op)) return exec_mla_fwd(m, op, l, e); /* latent attention's projections and rope (exec_mla.c) */
  exec_layer_acts *a = exec_acts(m, l);
  const long long T = m->tokens, h = m->cfg.hidden, hl = m->hidden_local;
  switch (op) {
  case EXEC_OP_LN1:
    return norm_fwd(m, a->x_in, exec_layer_tensor(m, l, EXEC_T_LN1_G), exec_layer_tensor(m, l, EXEC_T_LN1_B), a->n1, a->mean1,
                    a->rstd1, e);
  case EXEC_OP_QKV:
    EX_TRY(linear_fwd(m, T, m->qkv_cols, h, a->n1, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_QKV)), a->qkv, e));
    return add_bias(m, bias_of(m, l, EXEC_T_QKV_B), a->qkv, T, m->qkv_cols, e);
  case EXEC_OP_Q_NORM: return qk_norm(m, a, l, 0, 0, e);
  case EXEC_OP_K_NORM: return qk_norm(m, a, l, 1, 0, e);
  case EXEC_OP_ROPE: return rope(m, a->qkv, 0, e);
  case EXEC_OP_ATTN: return attention_fwd(m, a, e);
  case EXEC_OP_ATTN_OUT:
    return linear_fwd(m, T, h, hl, a->attn, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_ATTN_OUT)), m->proj, e);
  case EXEC_OP_ATTN_RESIDUAL: /* x_mid = x_in + attn_out (all-reduced) + its bias */
    EX_TRY(rt_add(shard(m, a->x_in), shard(m, m->proj), shard(m, a->x_mid), m->sp_rows * h, m->stream, e));
    return add_bias(m, bias_of(m, l, EXEC_T_ATTN_OUT_B), shard(m, a->x_mid), m->sp_rows, (int)h, e);
  case EXEC_OP_LN2:
    return norm_fwd(m, a->x_mid, exec_layer_tensor(m, l, EXEC_T_LN2_G), exec_layer_tensor(m, l, EXEC_T_LN2_B), a->n2, a->mean2,
                    a->rstd2, e);
  case EXEC_OP_FC1:
    EX_TRY(linear_fwd(m, T, m->fc1_local, h, a->n2, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_FC1)), a->u, e));
    return add_bias(m, bias_of(m, l, EXEC_T_FC1_B), a->u, T, m->fc1_local, e);
  case EXEC_OP_ACT:
    if (m->cfg.act == EXEC_ACT_SWIGLU) return rt_swiglu_fwd(a->u, a->a, T, m->ffn_local, m->stream, e);
    return rt_gelu_fwd(a->u, a->a, T * m->ffn_local, m->stream, e);
  case EXEC_OP_FC2: return linear_fwd(m, T, h, m->ffn_local, a->a, exec_w16_of(m, exec_layer_tensor(m, l, EXEC_T_FC2)), m->proj, e);
  case EXEC_OP_MLP_RESIDUAL:
    EX_TRY(rt_add(shard(m, a->x_mid), shard(m, m->proj), shard(m, layer_output(m, l)), m->sp_rows * h, m->stream, e));
    return add_bias(m, bias_of(m, l, EXEC_T_FC2_B), shard(m, layer_output(m, l)), m->sp_rows, (int)h, e);
  default:
    if (op >= EXEC_OP_ROUTER && op <= EXEC_OP_SHARED_FC2) return exec_moe_fwd(m, op, l, e); /* exec_moe.c */
    return ts_fail_sys(e, "exec: unknown layer op %d", (int)op);
  }
}

/* tp_overlap_chunks: rows [row0, row0 + rows) of a row-parallel GEMM's
 * output (attn_out, fc2), from the same rows of its input: a packed GEMM of
 * `rows` rows at those offsets, whose rows are all-reduced on their own. */
int exec_layer_fwd_rows(exec_model *m, exec_layer_op op, int l, long long row0, long long rows, int sm_count,
                        ts_err *e) {
  exec_layer_acts *a = exec_acts(m, l);
  const long long h = m->cfg.hidden, hl = m->hidden_local, fl = m->ffn_local;
  if (row0 < 0 || rows < 1 || row0 + rows > m->tokens)
    return ts_fail(e, NULL, "program", "rows [%lld, %lld) outside the %lld tokens", row0, row0 + rows, m->tokens);
  const long long K = op == EXEC_OP_ATTN_OUT ? hl : fl;
  const void *X = op == EXEC_OP_ATTN_OUT ? a->attn : a->a;
  switch (op) {
  case EXEC_OP_ATTN_OUT:
  case EXEC_OP_FC2: {
    exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NN, rows, h, K);
    s.sm_count = sm_count;
    int t = exec_layer_tensor(m, l, op == EXEC_OP_ATTN_OUT ? EXEC_T_ATTN_OUT : EXEC_T_FC2);
    return exec_gemm_run(m->gemm, &s, 1.f, rows_of((void *)X, row0, K), exec_w16_of(m, t), 0.f,
                         rows_of(m->proj, row0, h), m->stream, e);
  }
  default:
    return ts_fail(e, NULL, "layout.tp_overlap_chunks", "layer op %s is not a row-parallel GEMM (only attn_out and "
                   "fc2 run by rows)", exec_layer_op_names[op]);
  }
}

/* m->dx holds the gradient of the layer's output on entry to the last op's
 * backward and the gradient of its input after ln1's backward. */
int exec_layer_bwd(exec_model *m, exec_layer_op op, int l, int part, ts_err *e) {
  exec_layer_acts *a = exec_acts(m, l);
  const long long T = m->tokens, h = m->cfg.hidden, hl = m->hidden_local, fl = m->ffn_local, ul = m->fc1_local;
  const int dgrad = part != PLAN_PART_WGRAD, wgrad = part != PLAN_PART_DGRAD;
  int t;
  const void *dq;
  if (exec_mla_op(m, op)) return exec_mla_bwd(m, op, l, part, e); /* latent attention (exec_mla.c) */
  if (op >= EXEC_OP_ROUTER && op <= EXEC_OP_SHARED_FC2) return exec_moe_bwd(m, op, l, part, e); /* exec_moe.c */
  if (part != PLAN_PART_WHOLE && op != EXEC_OP_FC2 && op != EXEC_OP_FC1 && op != EXEC_OP_ATTN_OUT && op != EXEC_OP_QKV)
    return ts_fail(e, NULL, "program", "layer op %s has no dgrad/wgrad halves", exec_layer_op_names[op]);
  switch (op) {
  case EXEC_OP_MLP_RESIDUAL:
    /* the gradient passes through; at a chunk's last layer it comes from the next virtual stage */
    if (m->pp > 1 && l + 1 == m->chunk_hi[exec_model_chunk_of_layer(m, l)] && l + 1 < m->cfg.layers)
      EX_CUDA(cudaMemcpyAsync(shard(m, m->dx), shard(m, m->pp_grad_in[m->slot * m->vpp + exec_model_chunk_of_layer(m, l)]),
                              (size_t)(m->sp_rows * h) * 2,
                              cudaMemcpyDeviceToDevice, m->stream));
    return bias_grad(m, bias_of(m, l, EXEC_T_FC2_B), shard(m, m->dx), m->sp_rows, (int)h, e); /* SP: partial sums */
  case EXEC_OP_ATTN_RESIDUAL: /* the gradient passes through; the bias's is its column sums */
    return bias_grad(m, bias_of(m, l, EXEC_T_ATTN_OUT_B), shard(m, m->dx), m->sp_rows, (int)h, e);
  case EXEC_OP_FC2:
    t = exec_layer_tensor(m, l, EXEC_T_FC2);
    if (wgrad) EX_TRY(linear_wgrad(m, T, h, fl, a->a, m->dx, exec_grad_of(m, t), e));
    return dgrad ? linear_dgrad(m, T, h, fl, m->dx, exec_w16_of(m, t), m->da, e) : 0;
  case EXEC_OP_ACT:
    if (m->cfg.act == EXEC_ACT_SWIGLU) return rt_swiglu_bwd(m->da, a->u, m->du, T, (int)fl, m->stream, e);
    return rt_gelu_bwd(m->da, a->u, m->du, T * fl, m->stream, e);
  case EXEC_OP_FC1:
    t = exec_layer_tensor(m, l, EXEC_T_FC1);
    if (wgrad) EX_TRY(bias_grad(m, bias_of(m, l, EXEC_T_FC1_B), m->du, T, (int)ul, e));
    if (dgrad) EX_TRY(linear_dgrad(m, T, ul, h, m->du, exec_w16_of(m, t), m->dtmp, e));
    if (part == PLAN_PART_WGRAD) return linear_wgrad(m, T, ul, h, a->n2, m->du, exec_grad_of(m, t), e);
    return wgrad ? linear_wgrad_deferred(m, T, ul, h, a->n2, m->du, exec_grad_of(m, t), e) : 0;
  case EXEC_OP_LN2:
    return norm_bwd(m, a->x_mid, exec_layer_tensor(m, l, EXEC_T_LN2_G), exec_layer_tensor(m, l, EXEC_T_LN2_B), a->mean2,
                    a->rstd2, e);
  case EXEC_OP_ATTN_OUT:
    t = exec_layer_tensor(m, l, EXEC_T_ATTN_OUT);
    if (wgrad) EX_TRY(linear_wgrad(m, T, h, hl, a->attn, m->dx, exec_grad_of(m, t), e));
    return dgrad ? linear_dgrad(m, T, h, hl, m->dx, exec_w16_of(m, t), m->dattn, e) : 0;
  case EXEC_OP_ATTN: return attention_bwd(m, a, e);
  case EXEC_OP_ROPE: return rope(m, m->dqkv, 1, e);
  case EXEC_OP_K_NORM: return qk_norm(m, a, l, 1, 1, e);
  case EXEC_OP_Q_NORM: return qk_norm(m, a, l, 0, 1, e);
  case EXEC_OP_QKV:
    t = exec_layer_tensor(m, l, EXEC_T_QKV);
    dq = m->dqkv; /* [T x qkv_cols]; GQA: key/value gradients summed over each group */
    if (wgrad) EX_TRY(bias_grad(m, bias_of(m, l, EXEC_T_QKV_B), dq, T, m->qkv_cols, e));
    if (dgrad) EX_TRY(linear_dgrad(m, T, m->qkv_cols, h, dq, exec_w16_of(m, t), m->dtmp, e));
    if (part == PLAN_PART_WGRAD) return linear_wgrad(m, T, m->qkv_cols, h, a->n1, dq, exec_grad_of(m, t), e);
    return wgrad ? linear_wgrad_deferred(m, T, m->qkv_cols, h, a->n1, dq, exec_grad_of(m, t), e) : 0;
  case EXEC_OP_LN1:
    EX_TRY(norm_bwd(m, a->x_in, exec_layer_tensor(m, l, EXEC_T_LN1_G), exec_layer_tensor(m, l, EXEC_T_LN1_B), a->mean1,
                    a->rstd1, e));
    /* at a chunk's first layer the input gradient goes to the previous virtual stage (a buffer per slot and chunk) */
    if (m->pp > 1 && l == m->chunk_lo[exec_model_chunk_of_layer(m, l)] && l > 0)
      EX_CUDA(cudaMemcpyAsync(shard(m, m->pp_grad_out[m->slot * m->vpp + exec_model_chunk_of_layer(m, l)]),
                              shard(m, m->dx), (size_t)(m->sp_rows * h) * 2,
                              cudaMemcpyDeviceToDevice, m->stream));
    return 0;
  default: return ts_fail_sys(e, "exec: unknown layer op %d", (int)op);
  }
}

/* ---- embedding, output layer and loss ---- */

static int32_t *micro_tokens(exec_model *m, int micro) { return m->tokens_dev + (long long)micro * m->tokens; }
static int32_t *micro_labels(exec_model *m, int micro) { return m->labels_dev + (long long)micro * m->tokens; }

static int vocab_valid(const exec_model *m) {
  long long v = m->cfg.vocab - m->vocab_start;
  return (int)(v < 0 ? 0 : v > m->vocab_local ? m->vocab_local : v);
}

int exec_final_norm_fwd(exec_model *m, ts_err *e) {
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM;
  return norm_fwd(m, m->x_final, exec_final_norm_tensor(m, 0), ln ? exec_final_norm_tensor(m, 1) : 0, m->nf, m->meanf,
                  m->rstdf, e);
}

/* m->dtmp holds the (all-reduced) gradient of the final norm's output. */
int exec_final_norm_bwd(exec_model *m, ts_err *e) {
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM;
  EX_CUDA(cudaMemsetAsync(m->dx, 0, (size_t)(m->tokens * m->cfg.hidden) * 2, m->stream));
  return norm_bwd(m, m->x_final, exec_final_norm_tensor(m, 0), ln ? exec_final_norm_tensor(m, 1) : 0, m->meanf, m->rstdf, e);
}

/* Logits GEMM and the vocabulary-parallel cross-entropy (its two small TP
 * all-reduces run here, on the compute stream); leaves dlogits in m->logits. */
int exec_logits_loss_fwd(exec_model *m, int micro, ts_err *e) {
  const long long T = m->tokens, h = m->cfg.hidden, Vl = m->vocab_local;
  /* logits[T x Vl] = nf . wte_local^T */
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NT, T, Vl, h);
  EX_TRY(exec_gemm_run(m->gemm, &s, 1.f, m->nf, exec_w16_of(m, exec_ref_head_tensor(&m->cfg)), 0.f, m->logits, m->stream, e));
  const int fused = exec_ce_fused_selected((int)Vl); /* one read of the logits (exec_kernels.h) */
  if (fused) {
    EX_TRY(exec_ce_stats(m->logits, micro_labels(m, micro), m->vocab_start, m->ce_rowmax, m->ce_sums, T, (int)Vl,
                         vocab_valid(m), m->stream, e));
    EX_TRY(exec_tp_allreduce_plain(m, m->ce_rowmax, (size_t)T, ncclFloat, ncclMax, e));
    if (m->tp_comm) EX_TRY(exec_ce_rescale(m->ce_rowmax, m->ce_sums, T, m->stream, e));
  } else {
    EX_TRY(exec_ce_rowmax(m->logits, m->ce_rowmax, T, (int)Vl, vocab_valid(m), m->stream, e));
    EX_TRY(exec_tp_allreduce_plain(m, m->ce_rowmax, (size_t)T, ncclFloat, ncclMax, e));
    EX_TRY(exec_ce_sums(m->logits, micro_labels(m, micro), m->vocab_start, m->ce_rowmax, m->ce_sums, T, (int)Vl,
                        vocab_valid(m), m->stream, e));
  }
  EX_TRY(exec_tp_allreduce_plain(m, m->ce_sums, (size_t)(2 * T), ncclFloat, ncclSum, e));
  float loss_scale = 1.0f / (float)(T * m->micros);
  float grad_scale = loss_scale / (float)m->dp;
  return (fused ? exec_ce_finish8 : exec_ce_finish)(m->logits, micro_labels(m, micro), m->vocab_start, m->ce_rowmax,
                                                    m->ce_sums, m->loss_sum, loss_scale, grad_scale, T, (int)Vl,
                                                    vocab_valid(m), m->stream, e);
}

int exec_loss_fwd(exec_model *m, int micro, ts_err *e) {
  EX_TRY(exec_final_norm_fwd(m, e));
  return exec_logits_loss_fwd(m, micro, e);
}

/* dnf = dlogits . wte (partial over the vocabulary shards) into m->dtmp */
int exec_logits_dgrad(exec_model *m, ts_err *e) {
  exec_gemm_shape sd = exec_gemm_packed(EXEC_GEMM_NN, m->tokens, m->cfg.hidden, m->vocab_local);
  return exec_gemm_run(m->gemm, &sd, 1.f, m->logits, exec_w16_of(m, exec_ref_head_tensor(&m->cfg)), 0.f, m->dtmp,
                       m->stream, e);
}
/* dwte += dlogits^T . nf */
int exec_logits_wgrad(exec_model *m, ts_err *e) {
  exec_gemm_shape sw = exec_gemm_packed(EXEC_GEMM_TN_ACC, m->vocab_local, m->cfg.hidden, m->tokens);
  return exec_gemm_run(m->gemm, &sw, 1.f, m->logits, m->nf, 1.f, exec_grad_of(m, exec_ref_head_tensor(&m->cfg)),
                       m->stream, e);
}

int exec_loss_bwd(exec_model *m, ts_err *e) {
  const long long T = m->tokens, h = m->cfg.hidden, Vl = m->vocab_local;
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM;
  /* logits = nf . wte^T: dnf = dlogits . wte (partial over the vocabulary shards), dwte += dlogits^T . nf */
  exec_gemm_shape sd = exec_gemm_packed(EXEC_GEMM_NN, T, h, Vl);
  const int head = exec_ref_head_tensor(&m->cfg); /* wte, or lm_head when untied */
  EX_TRY(exec_gemm_run(m->gemm, &sd, 1.f, m->logits, exec_w16_of(m, head), 0.f, m->dtmp, m->stream, e));
  exec_gemm_shape sw = exec_gemm_packed(EXEC_GEMM_TN_ACC, Vl, h, T);
  if (m->tp_comm) { /* the input-gradient all-reduce overlaps the embedding's weight-gradient GEMM */
    EX_CUDA(cudaEventRecord(m->ev_ready, m->stream));
    EX_CUDA(cudaStreamWaitEvent(m->tp_stream, m->ev_ready, 0));
    EX_NCCL(ncclAllReduce(m->dtmp, m->dtmp, (size_t)(T * h), ncclBfloat16, ncclSum, m->tp_comm, m->tp_stream));
    EX_CUDA(cudaEventRecord(m->ev_done, m->tp_stream));
  }
  EX_TRY(exec_gemm_run(m->gemm, &sw, 1.f, m->logits, m->nf, 1.f, exec_grad_of(m, head), m->stream, e));
  if (m->tp_comm) EX_CUDA(cudaStreamWaitEvent(m->stream, m->ev_done, 0));
  EX_CUDA(cudaMemsetAsync(m->dx, 0, (size_t)(T * h) * 2, m->stream));
  return norm_bwd(m, m->x_final, exec_final_norm_tensor(m, 0), ln ? exec_final_norm_tensor(m, 1) : 0, m->meanf, m->rstdf, e);
}

/* RoPE models have no position embedding (wpe): the lookup adds none and its gradient is not accumulated. */
int exec_embedding_fwd(exec_model *m, int micro, ts_err *e) {
  const int wpe = exec_ref_tensor_index(&m->cfg, -1, EXEC_T_WPE);
  return exec_embed_fwd(micro_tokens(m, micro), exec_w16_of(m, 0), m->vocab_start, m->vocab_local,
                        exec_w16_of(m, wpe >= 0 ? wpe : 0), wpe >= 0 && m->tp_rank == 0, exec_acts(m, 0)->x_in,
                        m->tokens, m->cfg.seq, m->cfg.hidden, m->stream, e);
}
int exec_embedding_bwd(exec_model *m, int micro, ts_err *e) {
  const int wpe = exec_ref_tensor_index(&m->cfg, -1, EXEC_T_WPE);
  return exec_embed_bwd(micro_tokens(m, micro), m->dx, exec_grad_of(m, 0), m->vocab_start, m->vocab_local,
                        wpe >= 0 ? exec_grad_of(m, wpe) : NULL, m->tokens, m->cfg.seq, m->cfg.hidden, m->stream, e);
}

/* Sequence parallelism: each rank's norm-weight gradients cover its rows
 * of the tokens; their sum over TP is the gradient (Megatron-LM's
 * all-reduce of the sequence-parallel parameters' gradients). The QK norm's
 * weights (qk_norm) cover each rank's heads: summed over TP with or without
 * SP (Megatron-LM's _allreduce_layernorm_grads under qk_layernorm); without
 * SP (qk_only) they are the only ones. */
int exec_sp_sync_norms(exec_model *m, cudaStream_t stream, ts_err *e) {
  const int qk_only = !m->sp;
  EX_NCCL(ncclGroupStart());
  for (int t = 0; t < m->ntensors; t++) {
    exec_tensor_kind k = m->tensors[t].kind;
    if (k == EXEC_T_Q_NORM || k == EXEC_T_K_NORM) {
      EX_NCCL(ncclAllReduce(exec_grad_of(m, t), exec_grad_of(m, t), m->tensors[t].rows * m->tensors[t].cols,
                            ncclFloat, ncclSum, m->tp_comm, stream));
      continue;
    }
    if (qk_only) continue;
    if (k != EXEC_T_LN1_G && k != EXEC_T_LN1_B && k != EXEC_T_LN2_G && k != EXEC_T_LN2_B && k != EXEC_T_LNF_G &&
        k != EXEC_T_LNF_B && k != EXEC_T_ATTN_OUT_B && k != EXEC_T_FC2_B) /* + the row-parallel GEMMs' biases */
      continue;
    EX_NCCL(ncclAllReduce(exec_grad_of(m, t), exec_grad_of(m, t), m->tensors[t].rows * m->tensors[t].cols, ncclFloat,
                          ncclSum, m->tp_comm, stream));
  }
  EX_NCCL(ncclGroupEnd());
  return 0;
}

/* CAAT-Net: the replicated tensors (norm gains and biases, position
 * embeddings) saw different activations on each TP rank; average their
 * gradients so the copies stay equal. */
int exec_caat_sync_replicated(exec_model *m, cudaStream_t stream, ts_err *e) {
  EX_NCCL(ncclGroupStart());
  for (int t = 0; t < m->ntensors; t++) {
    exec_tensor_kind k = m->tensors[t].kind;
    if (k == EXEC_T_WTE || k == EXEC_T_QKV || k == EXEC_T_ATTN_OUT || k == EXEC_T_FC1 || k == EXEC_T_FC2 ||
        k == EXEC_T_QKV_B || k == EXEC_T_FC1_B || k == EXEC_T_LM_HEAD) /* sharded over TP */
      continue;
    if (k == EXEC_T_Q_NORM || k == EXEC_T_K_NORM) continue; /* partial over the heads: summed (exec_sp_sync_norms) */
    EX_NCCL(ncclAllReduce(exec_grad_of(m, t), exec_grad_of(m, t), m->tensors[t].rows * m->tensors[t].cols, ncclFloat, ncclAvg,
                          m->tp_comm, stream));
  }
  EX_NCCL(ncclGroupEnd());
  return 0;
}

int exec_optimizer_step(exec_model *m, ts_err *e) {
  /* DeepSeek-V3's balancing bias, from the step's loads (as Megatron-Core, in finalize_model_grads before the
   * optimizer; nothing without the bias) */
  EX_TRY(exec_moe_bias_update(m, e));
  /* (a walked plan program reduces them in its own NORM_GRADS op) */
  if (m->tp_comm && exec_uses_caat(m) && !m->walker_mode) EX_TRY(exec_caat_sync_replicated(m, m->stream, e));
  rt_adamw_params p = {.lr = m->lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.01f,
                       .step = ++m->adam_step};
  if (m->zero1) {
    /* ZeRO-1: this rank's shard of each group it holds (the plan's
     * all-gathers then rebuild the BF16 weights of the whole group) */
    for (int g = 0; g < m->cfg.layers + 2; g++) {
      int held = 0;
      for (int t = 0; t < m->ntensors && !held; t++)
        held = exec_model_group_of_tensor(m, t) == g && exec_model_holds_tensor(m, t);
      if (!held) continue;
      size_t lo, hi, z = m->zero1_off[g]; /* master weights and moments: this rank's shards only */
      exec_model_zero1_shard(m, g, &lo, &hi);
      EX_TRY(rt_adamw_step(m->master + z, (uint16_t *)m->w16 + lo, m->grad + lo, m->adam_m + z, m->adam_v + z,
                           (long long)(hi - lo), p, m->stream, e));
    }
    return 0;
  }
  if (m->pp == 1)
    return rt_adamw_step(m->master, m->w16, m->grad, m->adam_m, m->adam_v, (long long)m->nparams, p, m->stream, e);
  /* a pipeline stage updates the runs of consecutive tensors it holds */
  for (int t = 0; t < m->ntensors;) {
    if (!exec_model_holds_tensor(m, t)) {
      t++;
      continue;
    }
    int u = t;
    while (u + 1 < m->ntensors && exec_model_holds_tensor(m, u + 1)) u++;
    size_t lo = m->tensors[t].offset, hi = m->tensors[u].offset + m->tensors[u].rows * m->tensors[u].cols;
    EX_TRY(rt_adamw_step(m->master + lo, (uint16_t *)m->w16 + lo, m->grad + lo, m->adam_m + lo, m->adam_v + lo,
                         (long long)(hi - lo), p, m->stream, e));
    t = u + 1;
  }
  return 0;
}

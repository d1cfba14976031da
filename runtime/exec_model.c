/* exec_model.c — one rank's shard of the decoder stack and the op-by-op walk
 * of its program (see exec_model.h). Everything runs on one CUDA stream: the
 * TP all-reduces sit on the critical path of the layer anyway, and NCCL
 * kernels on the same stream keep the order without events. */
#include "exec_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_kernels.h"
#include "model.h"
#include "rt_ops.h"


#define EX_CUDA(call)                                                                                        \
  do {                                                                                                       \
    cudaError_t ex_ce_ = (call);                                                                             \
    if (ex_ce_ != cudaSuccess)                                                                               \
      return ts_fail_sys(e, "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString(ex_ce_));        \
  } while (0)
#define EX_NCCL(call)                                                                                        \
  do {                                                                                                       \
    ncclResult_t ex_nr_ = (call);                                                                            \
    if (ex_nr_ != ncclSuccess)                                                                               \
      return ts_fail_sys(e, "%s:%d: %s: %s", __FILE__, __LINE__, #call, ncclGetErrorString(ex_nr_));        \
  } while (0)
#define EX_TRY(call)                                                                                         \
  do {                                                                                                       \
    if ((call) != 0) return -1;                                                                              \
  } while (0)

/* ---- layout of the local parameters ---- */

static int per_layer_tensors(const exec_model *m) { return m->cfg.norm == EXEC_NORM_LAYERNORM ? 8 : 6; }

/* Index in tensors[] of a layer tensor (kind among the layer kinds). */
static int layer_tensor(const exec_model *m, int layer, exec_tensor_kind kind) {
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM, i;
  switch (kind) {
  case EXEC_T_LN1_G: i = 0; break;
  case EXEC_T_LN1_B: i = 1; break;
  case EXEC_T_QKV: i = ln ? 2 : 1; break;
  case EXEC_T_ATTN_OUT: i = ln ? 3 : 2; break;
  case EXEC_T_LN2_G: i = ln ? 4 : 3; break;
  case EXEC_T_LN2_B: i = 5; break;
  case EXEC_T_FC1: i = ln ? 6 : 4; break;
  default: i = ln ? 7 : 5; break; /* FC2 */
  }
  return 2 + layer * per_layer_tensors(m) + i;
}
static int final_norm_tensor(const exec_model *m, int bias) {
  return 2 + m->cfg.layers * per_layer_tensors(m) + bias;
}

static void *w16_of(const exec_model *m, int t) { return (uint16_t *)m->w16 + m->tensors[t].offset; }
static float *grad_of(const exec_model *m, int t) { return m->grad + m->tensors[t].offset; }

/* Index into the full (unsharded) tensor of local element (r, c) of tensor t, or -1 for vocabulary padding. */
static long long full_index(const exec_model *m, const exec_tensor *full, int t, long long r, long long c) {
  const exec_tensor *lt = &m->tensors[t];
  long long fr = r, fc = c;
  const long long hl = m->hidden_local, fl = m->ffn_local, h = m->cfg.hidden, f = m->cfg.ffn;
  switch (lt->kind) {
  case EXEC_T_WTE:
    fr = m->vocab_start + r;
    if (fr >= m->cfg.vocab) return -1;
    break;
  case EXEC_T_QKV: fc = (c / hl) * h + m->tp_rank * hl + c % hl; break;
  case EXEC_T_ATTN_OUT: fr = m->tp_rank * hl + r; break;
  case EXEC_T_FC1: fc = (c / fl) * f + m->tp_rank * fl + c % fl; break; /* GELU: c / fl == 0 */
  case EXEC_T_FC2: fr = m->tp_rank * fl + r; break;
  default: break;
  }
  return (long long)full[t].offset + fr * (long long)full[t].cols + fc;
}

void exec_model_shard_of(const exec_model *m, const double *full_params, double *local) {
  exec_tensor full[EXEC_REF_MAX_TENSORS];
  size_t total;
  exec_ref_tensors(&m->cfg, full, EXEC_REF_MAX_TENSORS, &total);
  for (int t = 0; t < m->ntensors; t++) {
    const exec_tensor *lt = &m->tensors[t];
    for (size_t r = 0; r < lt->rows; r++)
      for (size_t c = 0; c < lt->cols; c++) {
        long long fi = full_index(m, full, t, (long long)r, (long long)c);
        local[lt->offset + r * lt->cols + c] = fi < 0 ? 0.0 : full_params[fi];
      }
  }
}

/* ---- creation ---- */

static int dev_alloc(void **p, size_t bytes, size_t *total, ts_err *e) {
  *p = NULL;
  if (!bytes) return 0;
  cudaError_t ce = cudaMalloc(p, bytes);
  if (ce != cudaSuccess)
    return ts_fail_sys(e, "cudaMalloc(%zu bytes, %.2f GiB allocated before): %s", bytes,
                       (double)*total / (1 << 30), cudaGetErrorString(ce));
  *total += bytes;
  return 0;
}
#define ALLOC(ptr, bytes) EX_TRY(dev_alloc((void **)&(ptr), (size_t)(bytes), &allocated, e))

int exec_model_create(exec_model *m, const exec_ref_config *cfg, int micros, int tp, int tp_rank,
                      ncclComm_t tp_comm, int dp, int dp_rank, ncclComm_t dp_comm, cudaStream_t stream, ts_err *e) {
  memset(m, 0, sizeof *m);
  EX_TRY(exec_ref_config_check(cfg, e));
  if (cfg->heads % tp || cfg->ffn % tp)
    return ts_fail(e, NULL, "layout.tp", "%d must divide heads %d and ffn %d", tp, cfg->heads, cfg->ffn);
  m->cfg = *cfg;
  m->micros = micros;
  m->tp = tp, m->tp_rank = tp_rank, m->tp_comm = tp > 1 ? tp_comm : NULL;
  m->dp = dp, m->dp_rank = dp_rank, m->dp_comm = dp > 1 ? dp_comm : NULL;
  m->stream = stream;
  m->lr = 1e-4f;
  m->overlap_wgrad = getenv("EXEC_NO_OVERLAP") == NULL;
  m->lower_softmax = getenv("EXEC_FULL_SOFTMAX") == NULL;
  for (int i = 0; i < EXEC_OP_COUNT; i++) m->layer_op_index[i] = i;
  const long long T = (long long)cfg->batch * cfg->seq, h = cfg->hidden;
  m->tokens = T;
  m->head_dim = cfg->hidden / cfg->heads;
  m->heads_local = cfg->heads / tp;
  m->hidden_local = m->heads_local * m->head_dim;
  m->ffn_local = cfg->ffn / tp;
  m->fc1_local = m->ffn_local * (cfg->act == EXEC_ACT_SWIGLU ? 2 : 1);
  /* Megatron-LM pads the vocabulary to a multiple of 128 * tp (models/ does the same count). */
  long long mult = 128LL * tp;
  m->vocab_padded = (cfg->vocab + mult - 1) / mult * mult;
  m->vocab_local = m->vocab_padded / tp;
  m->vocab_start = m->vocab_local * tp_rank;

  /* local tensors: the reference's list with each shape cut to this rank */
  size_t total;
  m->ntensors = exec_ref_tensors(cfg, m->tensors, EXEC_REF_MAX_TENSORS, &total);
  if (m->ntensors > EXEC_REF_MAX_TENSORS) return ts_fail(e, NULL, "layers", "too many layers for the executor");
  size_t off = 0;
  for (int t = 0; t < m->ntensors; t++) {
    exec_tensor *lt = &m->tensors[t];
    switch (lt->kind) {
    case EXEC_T_WTE: lt->rows = (size_t)m->vocab_local; break;
    case EXEC_T_QKV: lt->cols = (size_t)(3 * m->hidden_local); break;
    case EXEC_T_ATTN_OUT: lt->rows = (size_t)m->hidden_local; break;
    case EXEC_T_FC1: lt->cols = (size_t)m->fc1_local; break;
    case EXEC_T_FC2: lt->rows = (size_t)m->ffn_local; break;
    default: break;
    }
    /* 256-byte alignment of every tensor, so cuBLASLt may use its fastest kernels */
    off = (off + 127) / 128 * 128;
    lt->offset = off;
    off += lt->rows * lt->cols;
  }
  m->nparams = off;

  size_t allocated = 0;
  const size_t P = m->nparams, bf = 2;
  ALLOC(m->w16, P * bf);
  ALLOC(m->master, P * 4);
  ALLOC(m->grad, P * 4);
  ALLOC(m->adam_m, P * 4);
  ALLOC(m->adam_v, P * 4);
  /* Everything goes through the model's stream: it is a non-blocking stream,
   * so work on the legacy default stream would not be ordered before it. */
  EX_CUDA(cudaMemsetAsync(m->w16, 0, P * bf, stream));
  EX_CUDA(cudaMemsetAsync(m->master, 0, P * 4, stream));
  EX_CUDA(cudaMemsetAsync(m->adam_m, 0, P * 4, stream));
  EX_CUDA(cudaMemsetAsync(m->adam_v, 0, P * 4, stream));
  EX_CUDA(cudaMemsetAsync(m->grad, 0, P * 4, stream));

  const long long S = cfg->seq, hl = m->hidden_local, fl = m->ffn_local, ul = m->fc1_local;
  const long long scores = (long long)cfg->batch * m->heads_local * S * S;
  m->acts = calloc((size_t)cfg->layers, sizeof *m->acts);
  if (!m->acts) return ts_fail_sys(e, "exec_model_create: out of memory");
  for (int l = 0; l < cfg->layers; l++) {
    exec_layer_acts *a = &m->acts[l];
    ALLOC(a->x_in, T * h * bf);
    ALLOC(a->n1, T * h * bf);
    ALLOC(a->qkv, T * 3 * hl * bf);
    ALLOC(a->P, scores * bf);
    ALLOC(a->attn, T * hl * bf);
    ALLOC(a->x_mid, T * h * bf);
    ALLOC(a->n2, T * h * bf);
    ALLOC(a->u, T * ul * bf);
    ALLOC(a->a, T * fl * bf);
    ALLOC(a->mean1, T * 4);
    ALLOC(a->rstd1, T * 4);
    ALLOC(a->mean2, T * 4);
    ALLOC(a->rstd2, T * 4);
  }
  ALLOC(m->x_final, T * h * bf);
  ALLOC(m->nf, T * h * bf);
  ALLOC(m->proj, T * h * bf);
  ALLOC(m->logits, T * m->vocab_local * bf);
  ALLOC(m->meanf, T * 4);
  ALLOC(m->rstdf, T * 4);
  ALLOC(m->ce_rowmax, T * 4);
  ALLOC(m->ce_sums, 2 * T * 4);
  ALLOC(m->dx, T * h * bf);
  ALLOC(m->dtmp, T * h * bf);
  ALLOC(m->dtmp2, T * h * bf);
  ALLOC(m->dqkv, T * 3 * hl * bf);
  ALLOC(m->dattn, T * hl * bf);
  ALLOC(m->du, T * ul * bf);
  ALLOC(m->da, T * fl * bf);
  ALLOC(m->dP, scores * bf);
  ALLOC(m->scores, scores * bf);
  ALLOC(m->dS, scores * bf);
  EX_CUDA(cudaMemsetAsync(m->dS, 0, (size_t)scores * bf, stream));
  for (int l = 0; l < cfg->layers; l++) EX_CUDA(cudaMemsetAsync(m->acts[l].P, 0, (size_t)scores * bf, stream));
  ALLOC(m->tokens_dev, (size_t)micros * T * 4);
  ALLOC(m->labels_dev, (size_t)micros * T * 4);
  ALLOC(m->loss_sum, 4);
  ALLOC(m->nonfinite, (size_t)(m->ntensors + 1) * sizeof(unsigned long long));
  EX_TRY(exec_gemm_create(&m->gemm, e));
  EX_CUDA(cudaEventCreateWithFlags(&m->ev_ready, cudaEventDisableTiming));
  EX_CUDA(cudaEventCreateWithFlags(&m->ev_done, cudaEventDisableTiming));
  if (m->tp_comm) {
    int prio_lo, prio_hi;
    EX_CUDA(cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi));
    /* higher priority: the transfer's kernels get SMs ahead of the GEMM they overlap */
    EX_CUDA(cudaStreamCreateWithPriority(&m->tp_stream, cudaStreamNonBlocking, prio_hi));
  }
  EX_CUDA(cudaStreamSynchronize(stream));
  return 0;
}

static int uses_caat(const exec_model *m) {
  for (int i = 0; i < 2; i++)
    if (m->tp_codec[i].kind == PLAN_CODEC_CAAT || m->tp_codec[i].kind == PLAN_CODEC_TACO_CAAT) return 1;
  return 0;
}

static coll_opts opts_of(const plan_codec *c) {
  coll_opts o = coll_opts_default();
  int taco = c->kind == PLAN_CODEC_TACO || c->kind == PLAN_CODEC_TACO_CAAT;
  o.codec = taco ? COLL_CODEC_TACO : COLL_CODEC_NONE;
  if (taco) {
    o.taco.group = c->group;
    o.taco.fp8 = c->fp8 == PLAN_FP8_E5M2 ? TACO_FP8_E5M2 : TACO_FP8_E4M3;
  }
  o.dtype = TACO_DTYPE_BF16;
  o.min_bytes = 0; /* the plan's TP messages are compressed whatever their size */
  return o;
}

int exec_model_set_codecs(exec_model *m, plan_codec fwd, plan_codec bwd, ts_err *e) {
  m->tp_codec[0] = fwd, m->tp_codec[1] = bwd;
  if (fwd.kind == PLAN_CODEC_NONE && bwd.kind == PLAN_CODEC_NONE) return 0;
  if (!m->tp_comm) return 0; /* TP = 1: nothing travels */
  if (!m->team_ready) {
    int dev;
    EX_CUDA(cudaGetDevice(&dev));
    if (coll_team_init(&m->team, 1, &m->tp_comm, &dev, &m->tp_stream))
      return ts_fail_sys(e, "exec: coll_team_init: %s", coll_last_error());
    m->team_ready = 1;
  }
  for (int i = 0; i < 2; i++) {
    coll_opts o = opts_of(&m->tp_codec[i]);
    if (o.codec == COLL_CODEC_TACO &&
        coll_team_reserve(&m->team, COLL_OP_ALLREDUCE, (size_t)(m->tokens * m->cfg.hidden), &o))
      return ts_fail_sys(e, "exec: coll_team_reserve: %s", coll_last_error());
  }
  int caat_bwd = bwd.kind == PLAN_CODEC_CAAT || bwd.kind == PLAN_CODEC_TACO_CAAT;
  if (caat_bwd && !m->caat_f32 && !getenv("EXEC_CAAT_BWD_BF16"))
    EX_CUDA(cudaMalloc((void **)&m->caat_f32, (size_t)(m->tokens * m->cfg.hidden) * sizeof(float)));
  return 0;
}

void exec_model_destroy(exec_model *m) {
  if (m->team_ready) coll_team_destroy(&m->team);
  if (m->tp_stream) cudaStreamDestroy(m->tp_stream);
  if (m->ev_ready) cudaEventDestroy(m->ev_ready);
  if (m->ev_done) cudaEventDestroy(m->ev_done);
  if (m->caat_f32) cudaFree(m->caat_f32);
  if (m->dp_stream) cudaStreamDestroy(m->dp_stream);
  free(m->group_done), free(m->group_reduced);
  if (m->acts)
    for (int l = 0; l < m->cfg.layers; l++) {
      exec_layer_acts *a = &m->acts[l];
      void *ptrs[] = {a->x_in, a->n1, a->qkv, a->P, a->attn, a->x_mid, a->n2, a->u, a->a,
                      a->mean1, a->rstd1, a->mean2, a->rstd2};
      for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) cudaFree(ptrs[i]);
    }
  free(m->acts);
  void *ptrs[] = {m->w16, m->master, m->grad, m->adam_m, m->adam_v, m->x_final, m->nf, m->proj, m->logits,
                  m->meanf, m->rstdf, m->ce_rowmax, m->ce_sums, m->dx, m->dtmp, m->dtmp2, m->dqkv, m->dattn,
                  m->du, m->da, m->dP, m->scores, m->dS, m->tokens_dev, m->labels_dev, m->loss_sum, m->nonfinite};
  for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) cudaFree(ptrs[i]);
  exec_gemm_destroy(m->gemm);
  memset(m, 0, sizeof *m);
}

/* ---- parameters and data ---- */

int exec_model_load_ref(exec_model *m, const double *params, ts_err *e) {
  double *local = malloc(m->nparams * sizeof *local);
  float *f = malloc(m->nparams * sizeof *f);
  if (!local || !f) {
    free(local), free(f);
    return ts_fail_sys(e, "exec_model_load_ref: out of memory");
  }
  memset(local, 0, m->nparams * sizeof *local);
  exec_model_shard_of(m, params, local);
  for (size_t i = 0; i < m->nparams; i++) f[i] = (float)local[i];
  free(local);
  /* On the model's stream and waited for: a plain cudaMemcpy from pageable
   * memory may return before its DMA lands, unordered with this stream. */
  cudaError_t ce = cudaMemcpyAsync(m->master, f, m->nparams * 4, cudaMemcpyHostToDevice, m->stream);
  if (ce == cudaSuccess) ce = cudaStreamSynchronize(m->stream);
  free(f);
  if (ce != cudaSuccess) return ts_fail_sys(e, "%s:%d: cudaMemcpy(master): %s", __FILE__, __LINE__, cudaGetErrorString(ce));
  EX_TRY(exec_f32_to_bf16(m->master, m->w16, (long long)m->nparams, m->stream, e));
  EX_CUDA(cudaStreamSynchronize(m->stream));
  return 0;
}

int exec_model_init_random(exec_model *m, unsigned long long seed, ts_err *e) {
  const float out_std = 0.02f / sqrtf(2.0f * m->cfg.layers);
  for (int t = 0; t < m->ntensors; t++) {
    exec_tensor *lt = &m->tensors[t];
    float *p = m->master + lt->offset;
    long long n = (long long)(lt->rows * lt->cols);
    switch (lt->kind) {
    case EXEC_T_LN1_G: case EXEC_T_LN2_G: case EXEC_T_LNF_G:
      EX_TRY(exec_fill_f32(p, n, 1.0f, m->stream, e));
      break;
    case EXEC_T_LN1_B: case EXEC_T_LN2_B: case EXEC_T_LNF_B:
      EX_TRY(exec_fill_f32(p, n, 0.0f, m->stream, e));
      break;
    default: {
      /* uniform with the standard deviation of the reference's normal init */
      float sd = (lt->kind == EXEC_T_ATTN_OUT || lt->kind == EXEC_T_FC2) ? out_std : 0.02f;
      EX_TRY(rt_fill_random_f32(p, n, seed * 1000003ULL + (unsigned long long)t * 7919ULL + (unsigned long long)m->tp_rank,
                                sd * sqrtf(3.0f), m->stream, e));
    }
    }
  }
  EX_TRY(exec_f32_to_bf16(m->master, m->w16, (long long)m->nparams, m->stream, e));
  EX_CUDA(cudaStreamSynchronize(m->stream));
  return 0;
}

int exec_model_set_data(exec_model *m, const int32_t *tokens, const int32_t *labels, ts_err *e) {
  size_t bytes = (size_t)m->micros * (size_t)m->tokens * sizeof(int32_t);
  EX_CUDA(cudaMemcpyAsync(m->tokens_dev, tokens, bytes, cudaMemcpyHostToDevice, m->stream));
  EX_CUDA(cudaMemcpyAsync(m->labels_dev, labels, bytes, cudaMemcpyHostToDevice, m->stream));
  EX_CUDA(cudaStreamSynchronize(m->stream));
  return 0;
}

int exec_model_zero_grad(exec_model *m, ts_err *e) {
  EX_CUDA(cudaMemsetAsync(m->grad, 0, m->nparams * 4, m->stream));
  EX_CUDA(cudaMemsetAsync(m->loss_sum, 0, 4, m->stream));
  return 0;
}

/* ---- GEMM shorthands (row-major) ---- */

/* Y[M x N] = X[M x K] . W[K x N] (bf16 out) */
static int linear_fwd(exec_model *m, long long M, long long N, long long K, const void *X, const void *W, void *Y,
                      ts_err *e) {
  exec_gemm_shape s = {.m = M, .n = N, .k = K, .lda = K, .ldb = N, .ldc = N, .batch = 1};
  return exec_gemm_run(m->gemm, &s, 1.f, X, W, 0.f, Y, m->stream, e);
}
/* dX[M x K] = dY[M x N] . W^T */
static int linear_dgrad(exec_model *m, long long M, long long N, long long K, const void *dY, const void *W, void *dX,
                        ts_err *e) {
  exec_gemm_shape s = {.trans_b = 1, .m = M, .n = K, .k = N, .lda = N, .ldb = N, .ldc = K, .batch = 1};
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
static int flush_wgrad(exec_model *m, ts_err *e) {
  if (!m->pending_wgrad.active) return 0;
  m->pending_wgrad.active = 0;
  return linear_wgrad(m, m->pending_wgrad.M, m->pending_wgrad.N, m->pending_wgrad.K, m->pending_wgrad.X,
                      m->pending_wgrad.dY, m->pending_wgrad.dW, e);
}

/* dW[K x N] += X^T . dY (fp32 accumulate) */
static int linear_wgrad(exec_model *m, long long M, long long N, long long K, const void *X, const void *dY, float *dW,
                        ts_err *e) {
  exec_gemm_shape s = {.trans_a = 1, .m = K, .n = N, .k = M, .lda = K, .ldb = N, .ldc = N, .batch = 1, .c_fp32 = 1};
  return exec_gemm_run(m->gemm, &s, 1.f, X, dY, 1.f, dW, m->stream, e);
}

static int tp_allreduce(exec_model *m, void *buf, size_t count, ncclDataType_t type, ncclRedOp_t op, ts_err *e) {
  if (!m->tp_comm) return 0;
  EX_NCCL(ncclAllReduce(buf, buf, count, type, op, m->tp_comm, m->stream));
  return 0;
}

/* ---- norms ---- */

static int norm_fwd(exec_model *m, const void *x, int tg, int tb, void *y, float *mean, float *rstd, ts_err *e) {
  const float eps = (float)m->cfg.norm_eps;
  if (m->cfg.norm == EXEC_NORM_LAYERNORM)
    return rt_layernorm_fwd(x, w16_of(m, tg), w16_of(m, tb), y, mean, rstd, m->tokens, m->cfg.hidden, eps, m->stream, e);
  return rt_rmsnorm_fwd(x, w16_of(m, tg), y, rstd, m->tokens, m->cfg.hidden, eps, m->stream, e);
}

/* dx += norm'(dy); weight gradients accumulate. dy is m->dtmp. */
static int norm_bwd(exec_model *m, const void *x, int tg, int tb, const float *mean, const float *rstd, ts_err *e) {
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM;
  EX_TRY(exec_norm_wgrad(m->dtmp, x, ln ? mean : NULL, rstd, grad_of(m, tg), ln ? grad_of(m, tb) : NULL, m->tokens,
                         m->cfg.hidden, m->stream, e));
  if (ln)
    EX_TRY(rt_layernorm_bwd_dx(m->dtmp, x, w16_of(m, tg), mean, rstd, m->dtmp2, m->tokens, m->cfg.hidden, m->stream, e));
  else
    EX_TRY(rt_rmsnorm_bwd_dx(m->dtmp, x, w16_of(m, tg), rstd, m->dtmp2, m->tokens, m->cfg.hidden, m->stream, e));
  return rt_add(m->dx, m->dtmp2, m->dx, m->tokens * m->cfg.hidden, m->stream, e);
}

/* ---- attention (unfused: batched GEMMs around a causal softmax, one call per sequence) ---- */

static long long qkv_ld(const exec_model *m) { return 3LL * m->hidden_local; }

static int attention_fwd(exec_model *m, exec_layer_acts *a, ts_err *e) {
  const long long S = m->cfg.seq, d = m->head_dim, hl = m->hidden_local, H = m->heads_local, ld = qkv_ld(m);
  const uint16_t *qkv = a->qkv;
  for (int b = 0; b < m->cfg.batch; b++) {
    const uint16_t *q = qkv + b * S * ld, *k = q + hl;
    uint16_t *scores = (uint16_t *)m->scores + b * H * S * S;
    exec_gemm_shape s1 = {.trans_b = 1, .m = S, .n = S, .k = d, .lda = ld, .ldb = ld, .ldc = S,
                          .batch = H, .stride_a = d, .stride_b = d, .stride_c = S * S};
    EX_TRY(exec_gemm_run(m->gemm, &s1, 1.f, q, k, 0.f, scores, m->stream, e));
  }
  if (m->lower_softmax)
    EX_TRY(exec_softmax_causal_lower_fwd(m->scores, a->P, (long long)m->cfg.batch * H, (int)S,
                                         1.0f / sqrtf((float)d), m->stream, e));
  else
    EX_TRY(rt_softmax_causal_fwd(m->scores, a->P, (long long)m->cfg.batch * H, (int)S, 1.0f / sqrtf((float)d),
                                 m->stream, e));
  for (int b = 0; b < m->cfg.batch; b++) {
    const uint16_t *v = qkv + b * S * ld + 2 * hl;
    const uint16_t *P = (const uint16_t *)a->P + b * H * S * S;
    uint16_t *out = (uint16_t *)a->attn + b * S * hl;
    exec_gemm_shape s2 = {.m = S, .n = d, .k = S, .lda = S, .ldb = ld, .ldc = hl,
                          .batch = H, .stride_a = S * S, .stride_b = d, .stride_c = d};
    EX_TRY(exec_gemm_run(m->gemm, &s2, 1.f, P, v, 0.f, out, m->stream, e));
  }
  return 0;
}

static int attention_bwd(exec_model *m, exec_layer_acts *a, ts_err *e) {
  const long long S = m->cfg.seq, d = m->head_dim, hl = m->hidden_local, H = m->heads_local, ld = qkv_ld(m);
  const float scale = 1.0f / sqrtf((float)d);
  for (int b = 0; b < m->cfg.batch; b++) {
    const uint16_t *v = (const uint16_t *)a->qkv + b * S * ld + 2 * hl;
    const uint16_t *dO = (const uint16_t *)m->dattn + b * S * hl;
    const uint16_t *P = (const uint16_t *)a->P + b * H * S * S;
    uint16_t *dP = (uint16_t *)m->dP + b * H * S * S, *dv = (uint16_t *)m->dqkv + b * S * ld + 2 * hl;
    /* dP = dO . V^T */
    exec_gemm_shape s1 = {.trans_b = 1, .m = S, .n = S, .k = d, .lda = hl, .ldb = ld, .ldc = S,
                          .batch = H, .stride_a = d, .stride_b = d, .stride_c = S * S};
    EX_TRY(exec_gemm_run(m->gemm, &s1, 1.f, dO, v, 0.f, dP, m->stream, e));
    /* dV = P^T . dO */
    exec_gemm_shape s2 = {.trans_a = 1, .m = S, .n = d, .k = S, .lda = S, .ldb = hl, .ldc = ld,
                          .batch = H, .stride_a = S * S, .stride_b = d, .stride_c = d};
    EX_TRY(exec_gemm_run(m->gemm, &s2, 1.f, P, dO, 0.f, dv, m->stream, e));
  }
  if (m->lower_softmax)
    EX_TRY(exec_softmax_causal_lower_bwd(a->P, m->dP, m->dS, (long long)m->cfg.batch * H, (int)S, scale, m->stream, e));
  else
    EX_TRY(rt_softmax_bwd(a->P, m->dP, m->dS, (long long)m->cfg.batch * H * S, (int)S, scale, m->stream, e));
  for (int b = 0; b < m->cfg.batch; b++) {
    const uint16_t *q = (const uint16_t *)a->qkv + b * S * ld, *k = q + hl;
    const uint16_t *dS = (const uint16_t *)m->dS + b * H * S * S;
    uint16_t *dq = (uint16_t *)m->dqkv + b * S * ld, *dk = dq + hl;
    /* dQ = dS . K ; dK = dS^T . Q */
    exec_gemm_shape s3 = {.m = S, .n = d, .k = S, .lda = S, .ldb = ld, .ldc = ld,
                          .batch = H, .stride_a = S * S, .stride_b = d, .stride_c = d};
    EX_TRY(exec_gemm_run(m->gemm, &s3, 1.f, dS, k, 0.f, dq, m->stream, e));
    exec_gemm_shape s4 = {.trans_a = 1, .m = S, .n = d, .k = S, .lda = S, .ldb = ld, .ldc = ld,
                          .batch = H, .stride_a = S * S, .stride_b = d, .stride_c = d};
    EX_TRY(exec_gemm_run(m->gemm, &s4, 1.f, dS, q, 0.f, dk, m->stream, e));
  }
  return 0;
}

/* ---- layer ops ---- */

static void *layer_output(exec_model *m, int l) {
  return l + 1 < m->cfg.layers ? m->acts[l + 1].x_in : m->x_final;
}

static int layer_fwd(exec_model *m, exec_layer_op op, int l, ts_err *e) {
  exec_layer_acts *a = &m->acts[l];
  const long long T = m->tokens, h = m->cfg.hidden, hl = m->hidden_local;
  switch (op) {
  case EXEC_OP_LN1:
    return norm_fwd(m, a->x_in, layer_tensor(m, l, EXEC_T_LN1_G), layer_tensor(m, l, EXEC_T_LN1_B), a->n1, a->mean1,
                    a->rstd1, e);
  case EXEC_OP_QKV: return linear_fwd(m, T, 3 * hl, h, a->n1, w16_of(m, layer_tensor(m, l, EXEC_T_QKV)), a->qkv, e);
  case EXEC_OP_ATTN: return attention_fwd(m, a, e);
  case EXEC_OP_ATTN_OUT:
    return linear_fwd(m, T, h, hl, a->attn, w16_of(m, layer_tensor(m, l, EXEC_T_ATTN_OUT)), m->proj, e);
  case EXEC_OP_ATTN_RESIDUAL: return rt_add(a->x_in, m->proj, a->x_mid, T * h, m->stream, e);
  case EXEC_OP_LN2:
    return norm_fwd(m, a->x_mid, layer_tensor(m, l, EXEC_T_LN2_G), layer_tensor(m, l, EXEC_T_LN2_B), a->n2, a->mean2,
                    a->rstd2, e);
  case EXEC_OP_FC1: return linear_fwd(m, T, m->fc1_local, h, a->n2, w16_of(m, layer_tensor(m, l, EXEC_T_FC1)), a->u, e);
  case EXEC_OP_ACT:
    if (m->cfg.act == EXEC_ACT_SWIGLU) return rt_swiglu_fwd(a->u, a->a, T, m->ffn_local, m->stream, e);
    return rt_gelu_fwd(a->u, a->a, T * m->ffn_local, m->stream, e);
  case EXEC_OP_FC2: return linear_fwd(m, T, h, m->ffn_local, a->a, w16_of(m, layer_tensor(m, l, EXEC_T_FC2)), m->proj, e);
  case EXEC_OP_MLP_RESIDUAL: return rt_add(a->x_mid, m->proj, layer_output(m, l), T * h, m->stream, e);
  default: return ts_fail_sys(e, "exec: unknown layer op %d", (int)op);
  }
}

/* m->dx holds the gradient of the layer's output on entry to the last op's
 * backward and the gradient of its input after ln1's backward. */
static int layer_bwd(exec_model *m, exec_layer_op op, int l, int part, ts_err *e) {
  exec_layer_acts *a = &m->acts[l];
  const long long T = m->tokens, h = m->cfg.hidden, hl = m->hidden_local, fl = m->ffn_local, ul = m->fc1_local;
  const int dgrad = part != PLAN_PART_WGRAD, wgrad = part != PLAN_PART_DGRAD;
  int t;
  if (part != PLAN_PART_WHOLE && op != EXEC_OP_FC2 && op != EXEC_OP_FC1 && op != EXEC_OP_ATTN_OUT && op != EXEC_OP_QKV)
    return ts_fail(e, NULL, "program", "layer op %s has no dgrad/wgrad halves", exec_layer_op_names[op]);
  switch (op) {
  case EXEC_OP_MLP_RESIDUAL: case EXEC_OP_ATTN_RESIDUAL: return 0; /* the gradient passes through */
  case EXEC_OP_FC2:
    t = layer_tensor(m, l, EXEC_T_FC2);
    if (wgrad) EX_TRY(linear_wgrad(m, T, h, fl, a->a, m->dx, grad_of(m, t), e));
    return dgrad ? linear_dgrad(m, T, h, fl, m->dx, w16_of(m, t), m->da, e) : 0;
  case EXEC_OP_ACT:
    if (m->cfg.act == EXEC_ACT_SWIGLU) return rt_swiglu_bwd(m->da, a->u, m->du, T, (int)fl, m->stream, e);
    return rt_gelu_bwd(m->da, a->u, m->du, T * fl, m->stream, e);
  case EXEC_OP_FC1:
    t = layer_tensor(m, l, EXEC_T_FC1);
    if (dgrad) EX_TRY(linear_dgrad(m, T, ul, h, m->du, w16_of(m, t), m->dtmp, e));
    if (part == PLAN_PART_WGRAD) return linear_wgrad(m, T, ul, h, a->n2, m->du, grad_of(m, t), e);
    return wgrad ? linear_wgrad_deferred(m, T, ul, h, a->n2, m->du, grad_of(m, t), e) : 0;
  case EXEC_OP_LN2:
    return norm_bwd(m, a->x_mid, layer_tensor(m, l, EXEC_T_LN2_G), layer_tensor(m, l, EXEC_T_LN2_B), a->mean2,
                    a->rstd2, e);
  case EXEC_OP_ATTN_OUT:
    t = layer_tensor(m, l, EXEC_T_ATTN_OUT);
    if (wgrad) EX_TRY(linear_wgrad(m, T, h, hl, a->attn, m->dx, grad_of(m, t), e));
    return dgrad ? linear_dgrad(m, T, h, hl, m->dx, w16_of(m, t), m->dattn, e) : 0;
  case EXEC_OP_ATTN: return attention_bwd(m, a, e);
  case EXEC_OP_QKV:
    t = layer_tensor(m, l, EXEC_T_QKV);
    if (dgrad) EX_TRY(linear_dgrad(m, T, 3 * hl, h, m->dqkv, w16_of(m, t), m->dtmp, e));
    if (part == PLAN_PART_WGRAD) return linear_wgrad(m, T, 3 * hl, h, a->n1, m->dqkv, grad_of(m, t), e);
    return wgrad ? linear_wgrad_deferred(m, T, 3 * hl, h, a->n1, m->dqkv, grad_of(m, t), e) : 0;
  case EXEC_OP_LN1:
    return norm_bwd(m, a->x_in, layer_tensor(m, l, EXEC_T_LN1_G), layer_tensor(m, l, EXEC_T_LN1_B), a->mean1,
                    a->rstd1, e);
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

static int final_norm_fwd(exec_model *m, ts_err *e) {
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM;
  return norm_fwd(m, m->x_final, final_norm_tensor(m, 0), ln ? final_norm_tensor(m, 1) : 0, m->nf, m->meanf,
                  m->rstdf, e);
}

/* m->dtmp holds the (all-reduced) gradient of the final norm's output. */
static int final_norm_bwd(exec_model *m, ts_err *e) {
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM;
  EX_CUDA(cudaMemsetAsync(m->dx, 0, (size_t)(m->tokens * m->cfg.hidden) * 2, m->stream));
  return norm_bwd(m, m->x_final, final_norm_tensor(m, 0), ln ? final_norm_tensor(m, 1) : 0, m->meanf, m->rstdf, e);
}

/* Logits GEMM and the vocabulary-parallel cross-entropy (its two small TP
 * all-reduces run here, on the compute stream); leaves dlogits in m->logits. */
static int logits_loss_fwd(exec_model *m, int micro, ts_err *e) {
  const long long T = m->tokens, h = m->cfg.hidden, Vl = m->vocab_local;
  /* logits[T x Vl] = nf . wte_local^T */
  exec_gemm_shape s = {.trans_b = 1, .m = T, .n = Vl, .k = h, .lda = h, .ldb = h, .ldc = Vl, .batch = 1};
  EX_TRY(exec_gemm_run(m->gemm, &s, 1.f, m->nf, w16_of(m, 0), 0.f, m->logits, m->stream, e));
  EX_TRY(exec_ce_rowmax(m->logits, m->ce_rowmax, T, (int)Vl, vocab_valid(m), m->stream, e));
  EX_TRY(tp_allreduce(m, m->ce_rowmax, (size_t)T, ncclFloat, ncclMax, e));
  EX_TRY(exec_ce_sums(m->logits, micro_labels(m, micro), m->vocab_start, m->ce_rowmax, m->ce_sums, T, (int)Vl,
                      vocab_valid(m), m->stream, e));
  EX_TRY(tp_allreduce(m, m->ce_sums, (size_t)(2 * T), ncclFloat, ncclSum, e));
  float loss_scale = 1.0f / (float)(T * m->micros);
  float grad_scale = loss_scale / (float)m->dp;
  return exec_ce_finish(m->logits, micro_labels(m, micro), m->vocab_start, m->ce_rowmax, m->ce_sums, m->loss_sum,
                        loss_scale, grad_scale, T, (int)Vl, vocab_valid(m), m->stream, e);
}

static int loss_fwd(exec_model *m, int micro, ts_err *e) {
  EX_TRY(final_norm_fwd(m, e));
  return logits_loss_fwd(m, micro, e);
}

/* dnf = dlogits . wte (partial over the vocabulary shards) into m->dtmp */
static int logits_dgrad(exec_model *m, ts_err *e) {
  exec_gemm_shape sd = {.m = m->tokens, .n = m->cfg.hidden, .k = m->vocab_local, .lda = m->vocab_local,
                        .ldb = m->cfg.hidden, .ldc = m->cfg.hidden, .batch = 1};
  return exec_gemm_run(m->gemm, &sd, 1.f, m->logits, w16_of(m, 0), 0.f, m->dtmp, m->stream, e);
}
/* dwte += dlogits^T . nf */
static int logits_wgrad(exec_model *m, ts_err *e) {
  exec_gemm_shape sw = {.trans_a = 1, .m = m->vocab_local, .n = m->cfg.hidden, .k = m->tokens, .lda = m->vocab_local,
                        .ldb = m->cfg.hidden, .ldc = m->cfg.hidden, .batch = 1, .c_fp32 = 1};
  return exec_gemm_run(m->gemm, &sw, 1.f, m->logits, m->nf, 1.f, grad_of(m, 0), m->stream, e);
}

static int loss_bwd(exec_model *m, ts_err *e) {
  const long long T = m->tokens, h = m->cfg.hidden, Vl = m->vocab_local;
  int ln = m->cfg.norm == EXEC_NORM_LAYERNORM;
  /* logits = nf . wte^T: dnf = dlogits . wte (partial over the vocabulary shards), dwte += dlogits^T . nf */
  exec_gemm_shape sd = {.m = T, .n = h, .k = Vl, .lda = Vl, .ldb = h, .ldc = h, .batch = 1};
  EX_TRY(exec_gemm_run(m->gemm, &sd, 1.f, m->logits, w16_of(m, 0), 0.f, m->dtmp, m->stream, e));
  exec_gemm_shape sw = {.trans_a = 1, .m = Vl, .n = h, .k = T, .lda = Vl, .ldb = h, .ldc = h, .batch = 1, .c_fp32 = 1};
  if (m->tp_comm) { /* the input-gradient all-reduce overlaps the embedding's weight-gradient GEMM */
    EX_CUDA(cudaEventRecord(m->ev_ready, m->stream));
    EX_CUDA(cudaStreamWaitEvent(m->tp_stream, m->ev_ready, 0));
    EX_NCCL(ncclAllReduce(m->dtmp, m->dtmp, (size_t)(T * h), ncclBfloat16, ncclSum, m->tp_comm, m->tp_stream));
    EX_CUDA(cudaEventRecord(m->ev_done, m->tp_stream));
  }
  EX_TRY(exec_gemm_run(m->gemm, &sw, 1.f, m->logits, m->nf, 1.f, grad_of(m, 0), m->stream, e));
  if (m->tp_comm) EX_CUDA(cudaStreamWaitEvent(m->stream, m->ev_done, 0));
  EX_CUDA(cudaMemsetAsync(m->dx, 0, (size_t)(T * h) * 2, m->stream));
  return norm_bwd(m, m->x_final, final_norm_tensor(m, 0), ln ? final_norm_tensor(m, 1) : 0, m->meanf, m->rstdf, e);
}

static int embedding_fwd(exec_model *m, int micro, ts_err *e) {
  return exec_embed_fwd(micro_tokens(m, micro), w16_of(m, 0), m->vocab_start, m->vocab_local, w16_of(m, 1),
                        m->tp_rank == 0, m->acts[0].x_in, m->tokens, m->cfg.seq, m->cfg.hidden, m->stream, e);
}
static int embedding_bwd(exec_model *m, int micro, ts_err *e) {
  return exec_embed_bwd(micro_tokens(m, micro), m->dx, grad_of(m, 0), m->vocab_start, m->vocab_local, grad_of(m, 1),
                        m->tokens, m->cfg.seq, m->cfg.hidden, m->stream, e);
}

/* CAAT-Net: the replicated tensors (norm gains and biases, position
 * embeddings) saw different activations on each TP rank; average their
 * gradients so the copies stay equal. */
static int caat_sync_replicated(exec_model *m, cudaStream_t stream, ts_err *e) {
  EX_NCCL(ncclGroupStart());
  for (int t = 0; t < m->ntensors; t++) {
    exec_tensor_kind k = m->tensors[t].kind;
    if (k == EXEC_T_WTE || k == EXEC_T_QKV || k == EXEC_T_ATTN_OUT || k == EXEC_T_FC1 || k == EXEC_T_FC2) continue;
    EX_NCCL(ncclAllReduce(grad_of(m, t), grad_of(m, t), m->tensors[t].rows * m->tensors[t].cols, ncclFloat, ncclAvg,
                          m->tp_comm, stream));
  }
  EX_NCCL(ncclGroupEnd());
  return 0;
}

static int optimizer_step(exec_model *m, ts_err *e) {
  /* (a walked plan program reduces them in its own NORM_GRADS op) */
  if (m->tp_comm && uses_caat(m) && !m->walker_mode) EX_TRY(caat_sync_replicated(m, m->stream, e));
  rt_adamw_params p = {.lr = m->lr, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.01f,
                       .step = ++m->adam_step};
  return rt_adamw_step(m->master, m->w16, m->grad, m->adam_m, m->adam_v, (long long)m->nparams, p, m->stream, e);
}

/* ---- the walk ---- */

static int layer_op_of(const exec_model *m, int model_op) {
  for (int i = 0; i < EXEC_OP_COUNT; i++)
    if (m->layer_op_index[i] == model_op) return i;
  return -1;
}

/* A TP all-reduce of a [tokens x hidden] bf16 activation (or its gradient), in place, with the op's codec. */
static int tp_allreduce_coded(exec_model *m, void *buf, const plan_codec *c, int backward, ts_err *e) {
  if (!m->tp_comm) return 0;
  const size_t rows = (size_t)m->tokens, cols = (size_t)m->cfg.hidden;
  if (c->kind == PLAN_CODEC_NONE) {
    EX_NCCL(ncclAllReduce(buf, buf, rows * cols, ncclBfloat16, ncclSum, m->tp_comm, m->tp_stream));
    return 0;
  }
  if (!m->team_ready) return ts_fail_sys(e, "exec: a compressed collective before exec_model_set_codecs");
  coll_opts o = opts_of(c);
  const void *in = buf;
  void *out = buf;
  if (c->kind != PLAN_CODEC_TACO && backward && m->caat_f32) {
    /* CAAT-Net backward: the shared channels of the input gradient travel in FP32 */
    const long long n = (long long)(rows * cols);
    EX_TRY(exec_bf16_to_f32(buf, m->caat_f32, n, m->tp_stream, e));
    o.dtype = TACO_DTYPE_FP32;
    in = m->caat_f32, out = m->caat_f32;
    if (coll_caat_allreduce(&m->team, &in, &out, rows, cols, c->p, &o))
      return ts_fail_sys(e, "exec: CAAT-Net FP32 all-reduce: %s", coll_last_error());
    return exec_f32_to_bf16(m->caat_f32, buf, n, m->tp_stream, e);
  }
  int rc = (c->kind == PLAN_CODEC_TACO) ? coll_allreduce(&m->team, &in, &out, rows * cols, &o)
                                        : coll_caat_allreduce(&m->team, &in, &out, rows, cols, c->p, &o);
  if (rc) return ts_fail_sys(e, "exec: compressed all-reduce: %s", coll_last_error());
  return 0;
}

/* ---- walking plan programs ---- */

enum { GROUP_HEAD_OFFSET = 0, GROUP_EMBED_OFFSET = 1 }; /* after the layers */

static int group_of_tensor(const exec_model *m, int t) {
  const exec_tensor *lt = &m->tensors[t];
  if (lt->layer >= 0) return lt->layer;
  if (lt->kind == EXEC_T_LNF_G || lt->kind == EXEC_T_LNF_B) return m->cfg.layers + GROUP_HEAD_OFFSET;
  return m->cfg.layers + GROUP_EMBED_OFFSET; /* wte (tied: final after the embedding's backward), wpe */
}

int exec_model_enter_walker_mode(exec_model *m, ts_err *e) {
  m->walker_mode = 1;
  m->overlap_wgrad = 0; /* the program orders dgrad, all-reduce and wgrad itself */
  m->group_done = calloc((size_t)m->cfg.layers + 2, 1);
  m->group_reduced = calloc((size_t)m->cfg.layers + 2, 1);
  if (!m->group_done || !m->group_reduced) return ts_fail_sys(e, "exec: out of memory");
  if (m->dp_comm && !m->dp_stream) EX_CUDA(cudaStreamCreateWithFlags(&m->dp_stream, cudaStreamNonBlocking));
  return 0;
}

cudaStream_t exec_model_op_stream(const exec_model *m, const plan_op *op) {
  if (op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_TP && m->tp_stream) return m->tp_stream;
  if (op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_DP && m->dp_stream) return m->dp_stream;
  return m->stream;
}

/* Marks the gradient groups a last-micro-batch backward op completes. */
static void note_group_done(exec_model *m, const plan_op *op, int lop) {
  if (!m->walker_mode || op->phase != PLAN_PHASE_BWD || op->micro != m->micros - 1) return;
  if (op->model_op == PLAN_MOP_FINAL_NORM) m->group_done[m->cfg.layers + GROUP_HEAD_OFFSET] = 1;
  else if (op->model_op == PLAN_MOP_EMBEDDING) m->group_done[m->cfg.layers + GROUP_EMBED_OFFSET] = 1;
  else if (lop == EXEC_OP_LN1 && op->layer >= 0) m->group_done[op->layer] = 1;
}

/* A DP bucket: all-reduce (sum) the gradients of every completed, not yet
 * reduced group, on the DP stream after everything enqueued on the compute
 * stream so far. With `all`, every group that is not reduced yet (the
 * optimizer's safety net). */
static int dp_reduce_groups(exec_model *m, int all, ts_err *e) {
  if (!m->dp_comm) return 0;
  int any = 0;
  for (int g = 0; g < m->cfg.layers + 2; g++) any |= (all || m->group_done[g]) && !m->group_reduced[g];
  if (!any) return 0;
  EX_CUDA(cudaEventRecord(m->ev_ready, m->stream));
  EX_CUDA(cudaStreamWaitEvent(m->dp_stream, m->ev_ready, 0));
  EX_NCCL(ncclGroupStart());
  for (int t = 0; t < m->ntensors; t++) {
    int g = group_of_tensor(m, t);
    if ((all || m->group_done[g]) && !m->group_reduced[g])
      EX_NCCL(ncclAllReduce(grad_of(m, t), grad_of(m, t), m->tensors[t].rows * m->tensors[t].cols, ncclFloat,
                            ncclSum, m->dp_comm, m->dp_stream));
  }
  EX_NCCL(ncclGroupEnd());
  for (int g = 0; g < m->cfg.layers + 2; g++)
    if (all || m->group_done[g]) m->group_reduced[g] = 1;
  return 0;
}

int exec_model_walker_finish(exec_model *m, ts_err *e) {
  /* the optimizer waits for every stream (and reduces any group no bucket took) */
  EX_TRY(dp_reduce_groups(m, 1, e));
  cudaStream_t side[2] = {m->tp_stream, m->dp_stream};
  for (int i = 0; i < 2; i++)
    if (side[i]) {
      EX_CUDA(cudaEventRecord(m->ev_done, side[i]));
      EX_CUDA(cudaStreamWaitEvent(m->stream, m->ev_done, 0));
    }
  memset(m->group_done, 0, (size_t)m->cfg.layers + 2);
  memset(m->group_reduced, 0, (size_t)m->cfg.layers + 2);
  return 0;
}

static int run_collective_walked(exec_model *m, const plan_op *op, ts_err *e) {
  if (op->kind != PLAN_OP_COLLECTIVE) return ts_fail(e, NULL, "program", "not a collective");
  if (op->group == PLAN_GROUP_DP) {
    if (op->model_op != PLAN_MOP_GRAD_BUCKET || op->coll != PLAN_COLL_ALLREDUCE)
      return ts_fail(e, NULL, "layout.zero1", "only all-reduced DP gradient buckets are supported (no ZeRO-1)");
    return dp_reduce_groups(m, 0, e);
  }
  if (op->group != PLAN_GROUP_TP || op->coll != PLAN_COLL_ALLREDUCE)
    return ts_fail(e, NULL, "program", "collective (group %d, kind %d) is not supported by the executor",
                   (int)op->group, (int)op->coll);
  if (!m->tp_comm) return 0;
  const size_t th = (size_t)(m->tokens * m->cfg.hidden);
  int lop = layer_op_of(m, op->model_op);
  switch (op->model_op) {
  case PLAN_MOP_EMBEDDING:
    EX_NCCL(ncclAllReduce(m->acts[0].x_in, m->acts[0].x_in, th, ncclBfloat16, ncclSum, m->tp_comm, m->tp_stream));
    return 0;
  case PLAN_MOP_LOSS:
    if (op->phase == PLAN_PHASE_FWD) return 0; /* the cross-entropy statistics were exchanged inside the loss op */
    EX_NCCL(ncclAllReduce(m->dtmp, m->dtmp, th, ncclBfloat16, ncclSum, m->tp_comm, m->tp_stream));
    return 0;
  case PLAN_MOP_NORM_GRADS: return caat_sync_replicated(m, m->tp_stream, e);
  default: break;
  }
  if (op->phase == PLAN_PHASE_FWD && (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2))
    return tp_allreduce_coded(m, m->proj, &op->codec, 0, e);
  if (op->phase == PLAN_PHASE_BWD && (lop == EXEC_OP_QKV || lop == EXEC_OP_FC1))
    return tp_allreduce_coded(m, m->dtmp, &op->codec, 1, e);
  return ts_fail(e, NULL, "program", "no TP all-reduce belongs after model op %d in phase %d", (int)op->model_op,
                 (int)op->phase);
}

static int run_collective(exec_model *m, const plan_op *op, ts_err *e) {
  if (m->walker_mode) return run_collective_walked(m, op, e);
  if (op->group == PLAN_GROUP_DP) {
    if (!m->dp_comm) return 0;
    EX_NCCL(ncclAllReduce(m->grad, m->grad, m->nparams, ncclFloat, ncclSum, m->dp_comm, m->stream));
    return 0;
  }
  if (op->group != PLAN_GROUP_TP || op->coll != PLAN_COLL_ALLREDUCE)
    return ts_fail(e, NULL, "program", "collective (group %d, kind %d) is not supported by the executor",
                   (int)op->group, (int)op->coll);
  if (!m->tp_comm) return 0;
  int lop = layer_op_of(m, op->model_op);
  void *buf;
  plan_codec none = {.kind = PLAN_CODEC_NONE};
  const plan_codec *codec = &op->codec;
  if (op->model_op == PLAN_MOP_EMBEDDING) buf = m->acts[0].x_in, codec = &none;
  else if (op->phase == PLAN_PHASE_FWD && (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2)) buf = m->proj;
  else if (op->phase == PLAN_PHASE_BWD && (lop == EXEC_OP_QKV || lop == EXEC_OP_FC1)) buf = m->dtmp;
  else
    return ts_fail(e, NULL, "program", "no TP all-reduce belongs after model op %d in phase %d", (int)op->model_op,
                   (int)op->phase);
  /* compute stream -> TP stream -> (deferred weight gradient on the compute stream) -> compute stream */
  EX_CUDA(cudaEventRecord(m->ev_ready, m->stream));
  EX_CUDA(cudaStreamWaitEvent(m->tp_stream, m->ev_ready, 0));
  if (m->prof_tp_start) EX_CUDA(cudaEventRecord(m->prof_tp_start[m->cur_op], m->tp_stream));
  EX_TRY(tp_allreduce_coded(m, buf, codec, op->phase == PLAN_PHASE_BWD, e));
  if (m->prof_tp_end) EX_CUDA(cudaEventRecord(m->prof_tp_end[m->cur_op], m->tp_stream));
  EX_CUDA(cudaEventRecord(m->ev_done, m->tp_stream));
  EX_TRY(flush_wgrad(m, e));
  if (m->prof_wgrad_done) EX_CUDA(cudaEventRecord(m->prof_wgrad_done[m->cur_op], m->stream));
  EX_CUDA(cudaStreamWaitEvent(m->stream, m->ev_done, 0));
  return 0;
}

int exec_model_run_op(exec_model *m, const plan_op *op, ts_err *e) {
  /* A deferred weight-gradient GEMM waits only for the TP all-reduce that follows its op. */
  if (!(op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_TP)) EX_TRY(flush_wgrad(m, e));
  if (op->kind == PLAN_OP_COLLECTIVE) return run_collective(m, op, e);
  if (op->kind != PLAN_OP_COMPUTE)
    return ts_fail(e, NULL, "layout.pp", "pipeline send/recv is not implemented in the executor (PP must be 1)");
  int micro = op->micro < 0 ? 0 : op->micro;
  if (micro >= m->micros) return ts_fail(e, NULL, "program", "micro-batch %d out of range", micro);
  switch (op->model_op) {
  case PLAN_MOP_EMBEDDING:
    if (op->phase == PLAN_PHASE_FWD) return embedding_fwd(m, micro, e);
    EX_TRY(embedding_bwd(m, micro, e));
    note_group_done(m, op, -1);
    return 0;
  case PLAN_MOP_FINAL_NORM:
    if (op->phase == PLAN_PHASE_FWD) return final_norm_fwd(m, e);
    EX_TRY(final_norm_bwd(m, e));
    note_group_done(m, op, -1);
    return 0;
  case PLAN_MOP_LOSS:
    if (op->phase == PLAN_PHASE_FWD) return m->walker_mode ? logits_loss_fwd(m, micro, e) : loss_fwd(m, micro, e);
    if (op->part == PLAN_PART_DGRAD) return logits_dgrad(m, e);
    if (op->part == PLAN_PART_WGRAD) return logits_wgrad(m, e);
    return loss_bwd(m, e);
  case PLAN_MOP_OPTIMIZER:
    if (m->walker_mode) EX_TRY(exec_model_walker_finish(m, e));
    return optimizer_step(m, e);
  default: break;
  }

  int lop = layer_op_of(m, op->model_op);
  if (lop < 0 || op->layer < 0 || op->layer >= m->cfg.layers)
    return ts_fail(e, NULL, "program", "compute op (model op %d, layer %d) is not one the executor knows",
                   (int)op->model_op, (int)op->layer);
  if (op->phase == PLAN_PHASE_FWD) return layer_fwd(m, (exec_layer_op)lop, op->layer, e);
  if (op->phase == PLAN_PHASE_BWD) {
    EX_TRY(layer_bwd(m, (exec_layer_op)lop, op->layer, op->part, e));
    note_group_done(m, op, lop); /* ln1 is a layer's last backward op */
    return 0;
  }
  return ts_fail(e, NULL, "layout.recompute", "recomputation is not implemented in the executor");
}

/* ---- checks ---- */

int exec_model_check_finite(exec_model *m, int step, float *loss_out, ts_err *e) {
  EX_CUDA(cudaMemsetAsync(m->nonfinite, 0, (size_t)(m->ntensors + 1) * sizeof(unsigned long long), m->stream));
  for (int t = 0; t < m->ntensors; t++)
    EX_TRY(exec_count_nonfinite(grad_of(m, t), (long long)(m->tensors[t].rows * m->tensors[t].cols),
                                m->nonfinite + t, m->stream, e));
  unsigned long long counts[EXEC_REF_MAX_TENSORS];
  float loss;
  EX_CUDA(cudaMemcpyAsync(counts, m->nonfinite, (size_t)m->ntensors * sizeof *counts, cudaMemcpyDeviceToHost, m->stream));
  EX_CUDA(cudaMemcpyAsync(&loss, m->loss_sum, sizeof loss, cudaMemcpyDeviceToHost, m->stream));
  EX_CUDA(cudaStreamSynchronize(m->stream));
  if (loss_out) *loss_out = loss;
  if (!isfinite(loss)) return ts_fail_sys(e, "step %d: loss is %s", step, isnan(loss) ? "NaN" : "Inf");
  for (int t = 0; t < m->ntensors; t++)
    if (counts[t])
      return ts_fail_sys(e, "step %d: gradient of %s has %llu NaN/Inf values (of %zu)", step, m->tensors[t].name,
                         counts[t], m->tensors[t].rows * m->tensors[t].cols);
  return 0;
}

int exec_model_grads_to_host(exec_model *m, float *out, ts_err *e) {
  EX_CUDA(cudaStreamSynchronize(m->stream));
  EX_CUDA(cudaMemcpyAsync(out, m->grad, m->nparams * 4, cudaMemcpyDeviceToHost, m->stream));
  EX_CUDA(cudaStreamSynchronize(m->stream));
  return 0;
}

/* ---- the single-stage program ---- */

typedef struct {
  plan_op *ops;
  int n, cap;
} op_list;

static plan_op *push(op_list *l, plan_op_kind kind, plan_phase phase, int model_op, int layer, int micro) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 256;
    plan_op *np = realloc(l->ops, (size_t)cap * sizeof *np);
    if (!np) return NULL;
    l->ops = np, l->cap = cap;
  }
  plan_op *op = &l->ops[l->n++];
  memset(op, 0, sizeof *op);
  op->kind = (uint8_t)kind;
  op->stream = PLAN_STREAM_COMPUTE;
  op->phase = (uint8_t)phase;
  op->model_op = (int16_t)model_op;
  op->layer = layer;
  op->micro = micro;
  op->peer = -1;
  for (int i = 0; i < PLAN_MAX_DEPS; i++) op->dep[i] = -1;
  if (l->n > 1) op->dep[0] = l->n - 2; /* one stream: each op follows the previous */
  return op;
}

static plan_op *push_coll(op_list *l, plan_phase phase, int model_op, int layer, int micro, plan_group_kind g,
                          double bytes) {
  plan_op *op = push(l, PLAN_OP_COLLECTIVE, phase, model_op, layer, micro);
  if (!op) return NULL;
  op->stream = g == PLAN_GROUP_DP ? PLAN_STREAM_DP : PLAN_STREAM_TP;
  op->coll = PLAN_COLL_ALLREDUCE;
  op->group = (uint8_t)g;
  op->traffic = g == PLAN_GROUP_DP ? PLAN_TRAFFIC_DP : phase == PLAN_PHASE_FWD ? PLAN_TRAFFIC_TP_FWD : PLAN_TRAFFIC_TP_BWD;
  op->bytes = op->wire_bytes = bytes;
  return op;
}

static plan_op *push_coll_coded(op_list *l, plan_phase phase, int model_op, int layer, int micro, double bytes,
                                 const plan_codec *c) {
  plan_op *op = push_coll(l, phase, model_op, layer, micro, PLAN_GROUP_TP, bytes);
  if (!op) return NULL;
  op->codec = *c;
  double shared = c->kind == PLAN_CODEC_CAAT || c->kind == PLAN_CODEC_TACO_CAAT ? c->p : 1.0;
  int taco = c->kind == PLAN_CODEC_TACO || c->kind == PLAN_CODEC_TACO_CAAT;
  op->wire_bytes = taco ? (bytes * shared / 2.0) * (1.0 + 8.0 / c->group) : bytes * shared;
  return op;
}

int exec_program_build_single_stage(const exec_model *m, plan_op **ops, int *nops, ts_err *e) {
  op_list l = {0};
  const int L = m->cfg.layers, tp = m->tp > 1;
  const double act_bytes = 2.0 * (double)m->tokens * m->cfg.hidden;
  const int *ix = m->layer_op_index;
  int ok = 1;
#define CHECKED(x) ok = ok && (x) != NULL
  for (int mb = 0; mb < m->micros; mb++) {
    CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_FWD, PLAN_MOP_EMBEDDING, -1, mb));
    if (tp) CHECKED(push_coll(&l, PLAN_PHASE_FWD, PLAN_MOP_EMBEDDING, -1, mb, PLAN_GROUP_TP, act_bytes));
    for (int layer = 0; layer < L; layer++)
      for (int o = 0; o < EXEC_OP_COUNT; o++) {
        CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_FWD, ix[o], layer, mb));
        if (tp && (o == EXEC_OP_ATTN_OUT || o == EXEC_OP_FC2))
          CHECKED(push_coll_coded(&l, PLAN_PHASE_FWD, ix[o], layer, mb, act_bytes, &m->tp_codec[0]));
      }
    CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_FWD, PLAN_MOP_LOSS, -1, mb));
    CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_BWD, PLAN_MOP_LOSS, -1, mb));
    for (int layer = L - 1; layer >= 0; layer--)
      for (int o = EXEC_OP_COUNT - 1; o >= 0; o--) {
        CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_BWD, ix[o], layer, mb));
        if (tp && (o == EXEC_OP_QKV || o == EXEC_OP_FC1))
          CHECKED(push_coll_coded(&l, PLAN_PHASE_BWD, ix[o], layer, mb, act_bytes, &m->tp_codec[1]));
      }
    CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_BWD, PLAN_MOP_EMBEDDING, -1, mb));
  }
  if (m->dp > 1) CHECKED(push_coll(&l, PLAN_PHASE_BWD, -1, -1, -1, PLAN_GROUP_DP, 4.0 * (double)m->nparams));
  CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_OPTIMIZER, PLAN_MOP_OPTIMIZER, -1, -1));
#undef CHECKED
  if (!ok) {
    free(l.ops);
    return ts_fail_sys(e, "exec_program_build_single_stage: out of memory");
  }
  *ops = l.ops;
  *nops = l.n;
  return 0;
}

/* exec_model.c — one rank's shard of the decoder stack: its memory, its
 * parameters (layout, sharding, initialisation, codecs) and the checks of its
 * gradients (see exec_model.h). The compute is in exec_layer.c, the running of
 * program ops in exec_step.c. */
#include "exec_model_internal.h"
#include "exec_mla.h"
#include "exec_moe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exec_core.h"
#include "exec_kernels.h"
#include "ops_variants.h"
#include "model.h"
#include "rt_ops.h"

/* ---- layout of the local parameters ---- */

/* Index in tensors[] of a layer tensor (-1 when the model has none: a bias,
 * LayerNorm's beta under RMSNorm); the local list has the reference's order. */
int exec_layer_tensor(const exec_model *m, int layer, exec_tensor_kind kind) {
  return exec_ref_tensor_index(&m->cfg, layer, kind);
}
int exec_final_norm_tensor(const exec_model *m, int bias) {
  return exec_ref_tensor_index(&m->cfg, -1, bias ? EXEC_T_LNF_B : EXEC_T_LNF_G);
}

void *exec_w16_of(const exec_model *m, int t) { return (uint16_t *)m->w16 + m->tensors[t].offset; }
float *exec_grad_of(const exec_model *m, int t) { return m->grad + m->tensors[t].offset; }

/* Index into the full (unsharded) tensor of local element (r, c) of tensor t, or -1 for vocabulary padding. */
static long long full_index(const exec_model *m, const exec_tensor *full, int t, long long r, long long c) {
  const exec_tensor *lt = &m->tensors[t];
  long long fr = r, fc = c;
  const long long hl = m->hidden_local, fl = m->ffn_local, qf = exec_ref_q_cols(&m->cfg), f = m->cfg.ffn;
  switch (lt->kind) {
  case EXEC_T_WTE:
  case EXEC_T_LM_HEAD:
    fr = m->vocab_start + r;
    if (fr >= m->cfg.vocab) return -1;
    break;
  case EXEC_T_QKV:
  case EXEC_T_QKV_B: {
    /* [q | k | v]: q heads x head_dim wide (qf), k and v kv_heads x head_dim wide, each cut over TP */
    const long long kvl = (long long)m->kv_local * m->head_dim, kvf = kvl * m->tp;
    if (c < hl) fc = m->tp_rank * hl + c;
    else if (c < hl + kvl) fc = qf + m->tp_rank * kvl + (c - hl);
    else fc = qf + kvf + m->tp_rank * kvl + (c - hl - kvl);
    break;
  }
  case EXEC_T_ATTN_OUT: fr = m->tp_rank * hl + r; break;
  case EXEC_T_FC1:
  case EXEC_T_FC1_B: fc = (c / fl) * f + m->tp_rank * fl + c % fl; break; /* GELU: c / fl == 0 */
  case EXEC_T_FC2: fr = m->tp_rank * fl + r; break;
  case EXEC_T_EXPERT_FC1:
  case EXEC_T_EXPERT_FC2: fr = (long long)m->epl.ep_rank * (long long)lt->rows + r; break; /* this EP rank's experts */
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
/* In the creation's steps: allocated, the bytes allocated so far (named in a failure). */
#define ALLOC(ptr, bytes) EX_TRY(dev_alloc((void **)&(ptr), (size_t)(bytes), allocated, e))

int exec_model_group_of_tensor(const exec_model *m, int t) {
  const exec_tensor *lt = &m->tensors[t];
  if (lt->layer >= 0) return lt->layer;
  if (lt->kind == EXEC_T_LNF_G || lt->kind == EXEC_T_LNF_B || lt->kind == EXEC_T_LM_HEAD) return m->cfg.layers;
  return m->cfg.layers + 1; /* wte, wpe */
}

void exec_model_zero1_shard(const exec_model *m, int g, size_t *lo, size_t *hi) {
  *lo = *hi = 0;
  if (!m->zero1) return;
  size_t c = (m->group_hi[g] - m->group_lo[g]) / (size_t)m->dp;
  *lo = m->group_lo[g] + (size_t)m->dp_rank * c;
  *hi = *lo + c;
}

int exec_model_set_layout(exec_model *m, int sequence_parallel, int zero1, ts_err *e) {
  m->sp = 0, m->sp_rows = m->tokens, m->sp_row0 = 0;
  if (sequence_parallel && m->tp > 1) {
    if (m->tokens % m->tp)
      return ts_fail(e, NULL, "layout.sequence_parallel", "TP %d does not divide the %lld tokens of a micro-batch",
                     m->tp, m->tokens);
    m->sp = 1;
    m->sp_rows = m->tokens / m->tp;
    m->sp_row0 = m->sp_rows * m->tp_rank;
  }
  m->zero1 = zero1 && m->dp > 1;
  if (!m->zero1 || m->zero1_off) return 0;
  /* Shard the optimizer states: keep this rank's shard of each group's master
   * weights (moments are zero before the first step) and free the rest. */
  if (m->adam_step) return ts_fail_sys(e, "exec: ZeRO-1 set after %d optimizer steps", m->adam_step);
  const int G = m->cfg.layers + 2;
  m->zero1_off = calloc((size_t)G, sizeof *m->zero1_off);
  if (!m->zero1_off) return ts_fail_sys(e, "exec: out of memory");
  size_t Z = 0;
  for (int g = 0; g < G; g++) {
    m->zero1_off[g] = Z;
    Z += (m->group_hi[g] - m->group_lo[g]) / (size_t)m->dp;
  }
  float *master = NULL, *am = NULL, *av = NULL;
  cudaError_t ce = cudaMalloc((void **)&master, Z * 4);
  if (ce == cudaSuccess) ce = cudaMalloc((void **)&am, Z * 4);
  if (ce == cudaSuccess) ce = cudaMalloc((void **)&av, Z * 4);
  if (ce == cudaSuccess) ce = cudaMemsetAsync(am, 0, Z * 4, m->stream);
  if (ce == cudaSuccess) ce = cudaMemsetAsync(av, 0, Z * 4, m->stream);
  for (int g = 0; g < G && ce == cudaSuccess; g++) {
    size_t lo, hi;
    exec_model_zero1_shard(m, g, &lo, &hi);
    ce = cudaMemcpyAsync(master + m->zero1_off[g], m->master + lo, (hi - lo) * 4, cudaMemcpyDeviceToDevice, m->stream);
  }
  if (ce == cudaSuccess) ce = cudaStreamSynchronize(m->stream);
  if (ce != cudaSuccess) {
    cudaFree(master), cudaFree(am), cudaFree(av);
    return ts_fail_sys(e, "%s:%d: ZeRO-1 optimizer shards: %s", __FILE__, __LINE__, cudaGetErrorString(ce));
  }
  cudaFree(m->master), cudaFree(m->adam_m), cudaFree(m->adam_v);
  m->master = master, m->adam_m = am, m->adam_v = av;
  m->zero1_params = Z;
  return 0;
}

exec_layer_acts *exec_acts(const exec_model *m, int l) { return &m->acts[(size_t)m->slot * (m->cfg.layers + 1) + l]; }

int exec_model_chunk_of_layer(const exec_model *m, int l) {
  for (int c = 0; c < m->vpp; c++)
    if (l >= m->chunk_lo[c] && l < m->chunk_hi[c]) return c;
  return -1;
}
int exec_model_holds_layer(const exec_model *m, int l) { return exec_model_chunk_of_layer(m, l) >= 0; }

int exec_model_holds_tensor(const exec_model *m, int t) {
  const exec_tensor *lt = &m->tensors[t];
  if (lt->layer >= 0) return exec_model_holds_layer(m, lt->layer);
  int first = m->pp_rank == 0, last = m->pp_rank == m->pp - 1;
  if (lt->kind == EXEC_T_LNF_G || lt->kind == EXEC_T_LNF_B || lt->kind == EXEC_T_LM_HEAD) return last;
  if (lt->kind == EXEC_T_WTE) return first || last;
  return first; /* position embedding */
}

int exec_model_create(exec_model *m, const exec_ref_config *cfg, int micros, int tp, int tp_rank,
                      ncclComm_t tp_comm, int dp, int dp_rank, ncclComm_t dp_comm, cudaStream_t stream, ts_err *e) {
  return exec_model_create_pp(m, cfg, micros, tp, tp_rank, tp_comm, dp, dp_rank, dp_comm, NULL, stream, e);
}

/* The derived sizes: the layer ops' order, this rank's heads, widths and vocabulary slice. */
static int model_dims(exec_model *m, const exec_ref_config *cfg, int tp, int tp_rank, ts_err *e) {
  /* the model_layer_ops() order: rope (RoPE models only) between qkv and attn */
  for (int k = 0, next = 0; k < EXEC_OP_COUNT; k++) {
    exec_layer_op o = exec_layer_fwd_order[k];
    m->layer_op_index[o] = exec_layer_op_present(o, cfg->rope_theta > 0, cfg->qk_norm, cfg->experts > 0, cfg->dense_layers,
                                                 cfg->shared_ffn > 0, exec_ref_is_mla(cfg)) ? next++ : -1;
  }
  m->tokens = (long long)cfg->batch * cfg->seq;
  m->head_dim = exec_ref_head_dim(cfg);
  if (cfg->qk_norm && (m->head_dim % 32 || m->head_dim > 256))
    return ts_fail(e, NULL, "head_dim", "%d: the QK norm's kernels (rt_qk_norm_fwd / _bwd) take head_dim a multiple "
                   "of 32 up to 256", m->head_dim);
  if (exec_ref_is_mla(cfg) && tp > 1)
    return ts_fail(e, NULL, "layout.tp", "%d with multi-head latent attention: the executor runs MLA at tp 1 "
                   "(its projections cut over TP are NOT IMPLEMENTED here)", tp);
  m->heads_local = cfg->heads / tp;
  m->v_dim = exec_ref_v_dim(cfg);
  m->rope_dim = exec_ref_rope_dim(cfg);
  m->hidden_local = m->heads_local * m->v_dim; /* the attention output (MLA: heads x v_head) */
  m->ffn_local = cfg->ffn / tp;
  m->kv_local = exec_ref_kv_heads(cfg) / tp;
  /* [q | k | v]: queries and keys head_dim a head, values v_dim (MLA's latent projections assemble it) */
  m->qkv_cols = m->heads_local * m->head_dim + m->kv_local * (m->head_dim + m->v_dim);
  if (m->kv_local < m->heads_local &&
      !exec_attention_gqa_ok(cfg->seq, m->heads_local, m->kv_local, m->head_dim))
    return ts_fail(e, NULL, "kv_heads",
                   "grouped-query attention (%d query heads over %d key/value heads per rank) runs on the fused "
                   "attention kernels only, which need seq a multiple of 64 and >= 2 head_dim + 4 and head_dim 32, "
                   "64 or 128 (seq %d, head_dim %d), and not --variant attn=unfused",
                   m->heads_local, m->kv_local, cfg->seq, m->head_dim);
  m->fc1_local = m->ffn_local * (cfg->act == EXEC_ACT_SWIGLU ? 2 : 1);
  /* Megatron-LM pads the vocabulary to a multiple of 128 * tp (models/ does the same count). */
  long long mult = 128LL * tp;
  m->vocab_padded = (cfg->vocab + mult - 1) / mult * mult;
  m->vocab_local = m->vocab_padded / tp;
  m->vocab_start = m->vocab_local * tp_rank;
  return 0;
}

/* The local tensors: the reference's list with each shape cut to this rank,
 * in gradient groups (layers, embedding, head) aligned for ZeRO-1. */
static int model_tensors(exec_model *m, const exec_ref_config *cfg, int dp, ts_err *e) {
  size_t total;
  m->ntensors = exec_ref_tensors(cfg, m->tensors, EXEC_REF_MAX_TENSORS, &total);
  if (m->ntensors > EXEC_REF_MAX_TENSORS) return ts_fail(e, NULL, "layers", "too many layers for the executor");
  size_t off = 0;
  /* a gradient group starts at a multiple of 128 x DP elements (ZeRO-1 shards, see group_lo) */
  const size_t group_align = 128 * (size_t)(dp > 1 ? dp : 1);
  m->group_lo = calloc((size_t)cfg->layers + 2, sizeof *m->group_lo);
  m->group_hi = calloc((size_t)cfg->layers + 2, sizeof *m->group_hi);
  m->group_bucket = calloc((size_t)cfg->layers + 2, sizeof *m->group_bucket);
  if (!m->group_lo || !m->group_hi || !m->group_bucket) return ts_fail_sys(e, "exec_model_create: out of memory");
  for (int t = 0; t < m->ntensors; t++) {
    exec_tensor *lt = &m->tensors[t];
    int g = exec_model_group_of_tensor(m, t);
    if (t == 0 || g != exec_model_group_of_tensor(m, t - 1)) {
      off = (off + group_align - 1) / group_align * group_align;
      m->group_lo[g] = off;
    }
    switch (lt->kind) {
    case EXEC_T_WTE: case EXEC_T_LM_HEAD: lt->rows = (size_t)m->vocab_local; break;
    case EXEC_T_QKV: case EXEC_T_QKV_B: lt->cols = (size_t)m->qkv_cols; break;
    case EXEC_T_ATTN_OUT: lt->rows = (size_t)m->hidden_local; break;
    case EXEC_T_FC1: case EXEC_T_FC1_B: lt->cols = (size_t)m->fc1_local; break;
    case EXEC_T_FC2: lt->rows = (size_t)m->ffn_local; break;
    case EXEC_T_EXPERT_FC1: case EXEC_T_EXPERT_FC2: lt->rows /= (size_t)m->epl.ep; break; /* E / ep experts */
    default: break;
    }
    /* 256-byte alignment of every tensor, so cuBLASLt may use its fastest kernels */
    off = (off + 127) / 128 * 128;
    lt->offset = off;
    off += lt->rows * lt->cols;
  }
  m->nparams = (off + group_align - 1) / group_align * group_align;
  /* groups in memory order: embedding, layers 0 .. L-1, final norm (the head) */
  for (int l = 0; l <= cfg->layers; l++) m->group_hi[l == 0 ? cfg->layers + 1 : l - 1] = m->group_lo[l];
  m->group_hi[cfg->layers] = m->nparams;
  return 0;
}

/* Weights (BF16 and FP32 master), gradients and the AdamW moments, zeroed. */
static int model_alloc_params(exec_model *m, size_t *allocated, ts_err *e) {
  const size_t P = m->nparams, bf = 2;
  cudaStream_t stream = m->stream;
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
  return 0;
}

/* Each held layer's activations for every slot (recomputed ones shared). */
static int model_alloc_layers(exec_model *m, size_t *allocated, ts_err *e) {
  const exec_ref_config *cfg = &m->cfg;
  const long long T = m->tokens, h = cfg->hidden;
  const size_t bf = 2;
  cudaStream_t stream = m->stream;
  const long long S = cfg->seq, hl = m->hidden_local, fl = m->ffn_local, ul = m->fc1_local;
  const long long scores = (long long)cfg->batch * m->heads_local * S * S;
  const int L = cfg->layers;
  const size_t before = *allocated;
  m->acts = calloc((size_t)m->nslots * (L + 1), sizeof *m->acts);
  if (!m->acts) return ts_fail_sys(e, "exec_model_create: out of memory");
  for (int slot = 0; slot < m->nslots; slot++)
  for (int l = 0; l < L; l++) {
    exec_layer_acts *a = &m->acts[(size_t)slot * (L + 1) + l];
    const int held = exec_model_holds_layer(m, l), sent = !held && l > 0 && exec_model_holds_layer(m, l - 1);
    if (!held && !sent) continue;
    const int c = held ? exec_model_chunk_of_layer(m, l) : -1;
    if (m->bnd_x && c >= 0 && l == m->chunk_lo[c] && l > 0) { /* received: in a boundary buffer (run_op points at it) */
    } else ALLOC(a->x_in, T * h * bf);
    if (sent) continue; /* the next stage's input: only sent from here */
    /* recomputed activations: one set for every layer and slot (allocated once) */
    const int first = !m->shared.P;
    exec_layer_acts *k = cfg->recompute >= 2 ? &m->shared : a; /* full: all but the input */
    if (k == a || first) {
      ALLOC(k->n1, T * h * bf);
      ALLOC(k->qkv, T * m->qkv_cols * bf);
      ALLOC(k->attn, T * hl * bf);
      ALLOC(k->x_mid, T * h * bf);
      ALLOC(k->n2, T * h * bf);
      ALLOC(k->u, T * ul * bf);
      ALLOC(k->a, T * fl * bf);
      ALLOC(k->mean1, T * 4);
      ALLOC(k->rstd1, T * 4);
      ALLOC(k->mean2, T * 4);
      ALLOC(k->rstd2, T * 4);
      if (cfg->qk_norm) {
        ALLOC(k->qk_in, T * (hl + (long long)m->kv_local * m->head_dim) * bf);
        ALLOC(k->qk_rstd, T * (m->heads_local + m->kv_local) * 4);
      }
      if (exec_ref_is_mla(cfg)) { /* the latent projections' outputs, their norms' 1/rms (exec_model.h) */
        ALLOC(k->cq, T * cfg->q_lora * bf);
        ALLOC(k->cqn, T * cfg->q_lora * bf);
        ALLOC(k->kva, T * (cfg->kv_lora + cfg->qk_rope) * bf);
        ALLOC(k->ckvn, T * cfg->kv_lora * bf);
        ALLOC(k->rstd_q, T * 4);
        ALLOC(k->rstd_kv, T * 4);
      }
    }
    exec_layer_acts *kp = cfg->recompute >= 1 ? &m->shared : a; /* selective: the probabilities */
    if (kp == a || first) {
      ALLOC(kp->P, scores * bf);
      EX_CUDA(cudaMemsetAsync(kp->P, 0, (size_t)scores * bf, stream));
    }
    if (k != a) {
      void *x_in = a->x_in;
      *a = *k;
      a->x_in = x_in;
    }
    a->P = kp->P;
  }
  m->act_bytes += *allocated - before;
  return 0;
}

/* Pipeline stages: the gradients sent and received per slot and chunk, and the PP stream. */
static int model_alloc_pipeline(exec_model *m, size_t *allocated, ts_err *e) {
  const long long T = m->tokens, h = m->cfg.hidden;
  const size_t bf = 2;
  const int L = m->cfg.layers;
  const size_t before = *allocated;
  if (m->pp > 1) {
    const size_t cells = (size_t)m->nslots * m->vpp;
    m->pp_grad_in = calloc(cells, sizeof *m->pp_grad_in);
    m->pp_grad_out = calloc(cells, sizeof *m->pp_grad_out);
    if (!m->pp_grad_in || !m->pp_grad_out) return ts_fail_sys(e, "exec_model_create: out of memory");
    for (int slot = 0; slot < m->nslots; slot++)
      for (int c = 0; c < m->vpp; c++) { /* gradients from the next virtual stage, to the previous one */
        if (m->chunk_hi[c] < L) ALLOC(m->pp_grad_in[slot * m->vpp + c], T * h * bf);
        if (m->chunk_lo[c] > 0) ALLOC(m->pp_grad_out[slot * m->vpp + c], T * h * bf);
      }
    if (m->bnd_x) /* received activations */
      for (int b = 0; b < m->nbslots; b++)
        for (int c = 0; c < m->vpp; c++)
          if (m->chunk_lo[c] > 0) ALLOC(m->bnd_x[b * m->vpp + c], T * h * bf);
    EX_CUDA(cudaStreamCreateWithFlags(&m->pp_stream, cudaStreamNonBlocking));
  }
  m->act_bytes += *allocated - before;
  return 0;
}

/* The head's activations (one set per slot on the last stage) and RoPE's frequencies. */
static int model_alloc_head(exec_model *m, const exec_ref_config *cfg, size_t *allocated, ts_err *e) {
  const long long T = m->tokens, h = cfg->hidden;
  const size_t bf = 2;
  ALLOC(m->x_final, T * h * bf);
  ALLOC(m->nf, T * h * bf);
  ALLOC(m->proj, T * h * bf);
  ALLOC(m->logits, T * m->vocab_local * bf);
  ALLOC(m->meanf, T * 4);
  ALLOC(m->rstdf, T * 4);
  if (cfg->rope_theta > 0) { /* the rotation's frequencies, computed once in double on the host (exec_ref.c) */
    double f64[512];
    float f32[512];
    const int half = m->rope_dim / 2; /* the head dimension, or MLA's rope part */
    if (half > 512) return ts_fail(e, NULL, "model", "head dimension %d: RoPE supports at most 1024", m->rope_dim);
    exec_ref_rope_inv_freq(cfg, m->rope_dim, f64);
    for (int i = 0; i < half; i++) f32[i] = (float)f64[i];
    ALLOC(m->rope_inv_freq, (size_t)half * 4);
    EX_CUDA(cudaMemcpyAsync(m->rope_inv_freq, f32, (size_t)half * 4, cudaMemcpyHostToDevice, m->stream));
    EX_CUDA(cudaStreamSynchronize(m->stream));
  }
  if (m->pp_rank == m->pp - 1 && m->nslots > 1) { /* the last virtual stage is on the last stage */
    m->heads = calloc((size_t)m->nslots, sizeof *m->heads);
    if (!m->heads) return ts_fail_sys(e, "exec_model_create: out of memory");
    m->heads[0] = (struct exec_head_acts){m->x_final, m->nf, m->logits, m->meanf, m->rstdf};
    const size_t before = *allocated;
    for (int slot = 1; slot < m->nslots; slot++) {
      struct exec_head_acts *hd = &m->heads[slot];
      ALLOC(hd->x_final, T * h * bf);
      ALLOC(hd->nf, T * h * bf);
      ALLOC(hd->logits, T * m->vocab_local * bf);
      ALLOC(hd->meanf, T * 4);
      ALLOC(hd->rstdf, T * 4);
    }
    m->act_bytes += *allocated - before;
  }
  return 0;
}

/* The backward's buffers, the tokens, the loss and NaN/Inf counters, the GEMM
 * plans, events, the TP stream and the MoE layers' buffers. */
static int model_alloc_backward(exec_model *m, int micros, size_t *allocated, ts_err *e) {
  const long long T = m->tokens, h = m->cfg.hidden;
  const long long hl = m->hidden_local, fl = m->ffn_local, ul = m->fc1_local;
  const long long scores = (long long)m->cfg.batch * m->heads_local * m->cfg.seq * m->cfg.seq;
  const size_t bf = 2;
  cudaStream_t stream = m->stream;
  ALLOC(m->ce_rowmax, T * 4);
  ALLOC(m->ce_sums, 3 * T * 4); /* sums, label logits, this rank's maxima (exec_ce_stats) */
  ALLOC(m->dx, T * h * bf);
  ALLOC(m->dtmp, T * h * bf);
  ALLOC(m->dtmp2, T * h * bf);
  ALLOC(m->dqkv, T * m->qkv_cols * bf); /* qkv's layout (GQA: key/value heads summed over each group) */
  ALLOC(m->dattn, T * hl * bf);
  ALLOC(m->du, T * ul * bf);
  ALLOC(m->da, T * fl * bf);
  ALLOC(m->dP, scores * bf);
  ALLOC(m->scores, scores * bf);
  ALLOC(m->dS, scores * bf);
  EX_CUDA(cudaMemsetAsync(m->dS, 0, (size_t)scores * bf, stream));
  ALLOC(m->tokens_dev, (size_t)micros * T * 4);
  ALLOC(m->labels_dev, (size_t)micros * T * 4);
  ALLOC(m->loss_sum, 4);
  ALLOC(m->nonfinite, (size_t)(m->ntensors + 1) * sizeof(unsigned long long));
  ALLOC(m->nf_calls, EXEC_NF_CALLS * sizeof(taco_nonfinite));
  m->nf_used = EXEC_NF_CALLS;
  EX_TRY(exec_nf_reset(m, e));
  EX_TRY(exec_gemm_create(&m->gemm, e));
  EX_CUDA(cudaEventCreateWithFlags(&m->ev_ready, cudaEventDisableTiming));
  EX_CUDA(cudaEventCreateWithFlags(&m->ev_done, cudaEventDisableTiming));
  if (m->tp_comm) {
    int prio_lo, prio_hi;
    EX_CUDA(cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi));
    /* higher priority: the transfer's kernels get SMs ahead of the GEMM they overlap */
    EX_CUDA(cudaStreamCreateWithPriority(&m->tp_stream, cudaStreamNonBlocking, prio_hi));
  }
  EX_TRY(exec_moe_create(m, e)); /* the MoE layers' buffers (exec_moe.c) */
  EX_TRY(exec_mla_create(m, allocated, e)); /* the latent attention's scratch (exec_mla.c) */
  EX_CUDA(cudaStreamSynchronize(stream));
  return 0;
}

int exec_model_create_pp(exec_model *m, const exec_ref_config *cfg, int micros, int tp, int tp_rank,
                         ncclComm_t tp_comm, int dp, int dp_rank, ncclComm_t dp_comm, const exec_pipeline *pipe,
                         cudaStream_t stream, ts_err *e) {
  memset(m, 0, sizeof *m);
  m->pp = pipe ? pipe->pp : 1;
  m->pp_rank = pipe ? pipe->pp_rank : 0;
  m->vpp = m->pp > 1 && cfg->vpp > 1 ? cfg->vpp : 1;
  const int uneven = pipe && pipe->layer_hi > 0;
  if (uneven && (m->vpp > 1 || pipe->layer_lo < 0 || pipe->layer_lo >= pipe->layer_hi || pipe->layer_hi > cfg->layers ||
                 (m->pp_rank == 0) != (pipe->layer_lo == 0) || (m->pp_rank == m->pp - 1) != (pipe->layer_hi == cfg->layers)))
    return ts_fail(e, NULL, "layout.decoder_first_pipeline_num_layers", "stage %d of %d: layers [%d, %d) of %d (vpp %d): "
                   "the executor runs uneven stages as one non-empty chunk per stage", m->pp_rank, m->pp,
                   pipe->layer_lo, pipe->layer_hi, cfg->layers, m->vpp);
  if (m->pp < 1 || m->vpp > EXEC_MAX_CHUNKS || (!uneven && cfg->layers % (m->pp * m->vpp)) || m->pp_rank < 0 ||
      m->pp_rank >= m->pp)
    return ts_fail(e, NULL, "layout.pp", "%d stages x %d chunks must divide the %d layers", m->pp, m->vpp, cfg->layers);
  m->lpc = cfg->layers / (m->pp * m->vpp);
  if (m->pp > 1 && (!pipe->pp_comm || !pipe->emb_comm))
    return ts_fail_sys(e, "exec_model_create_pp: PP %d without its communicators", m->pp);
  m->pp_comm = m->pp > 1 ? pipe->pp_comm : NULL;
  m->emb_comm = m->pp > 1 ? pipe->emb_comm : NULL;
  for (int c = 0; c < m->vpp; c++) { /* chunk c is virtual stage c pp + pp_rank */
    m->chunk_lo[c] = uneven ? pipe->layer_lo : (c * m->pp + m->pp_rank) * m->lpc;
    m->chunk_hi[c] = uneven ? pipe->layer_hi : m->chunk_lo[c] + m->lpc;
  }
  m->layer_lo = m->chunk_lo[0];
  m->layer_hi = m->chunk_hi[m->vpp - 1];
  /* Activation slots: the most micro-batches the rank's program holds at once (pipe->slots, from the
   * program: exec_walk_program_shape); else every micro-batch keeps its own (GPipe at PP = 1 too). */
  m->nslots = pipe && pipe->slots > 0 ? (pipe->slots < micros ? pipe->slots : micros)
              : m->pp > 1 || (pipe && pipe->all_micros) ? micros : 1;
  if (m->pp > 1 && pipe->slots > 0 && pipe->bslots > 0) { /* boundary buffers for received activations */
    m->nbslots = pipe->bslots < micros ? pipe->bslots : micros;
    m->bnd_x = calloc((size_t)m->nbslots * m->vpp, sizeof *m->bnd_x);
    if (!m->bnd_x) return ts_fail_sys(e, "exec_model_create: out of memory");
  }
  EX_TRY(exec_ref_config_check(cfg, e));
  if (cfg->heads % tp || cfg->ffn % tp || exec_ref_kv_heads(cfg) % tp)
    return ts_fail(e, NULL, "layout.tp", "%d must divide heads %d, kv_heads %d and ffn %d", tp, cfg->heads,
                   exec_ref_kv_heads(cfg), cfg->ffn);
  m->cfg = *cfg;
  m->micros = micros;
  m->tp = tp, m->tp_rank = tp_rank, m->tp_comm = tp > 1 ? tp_comm : NULL;
  m->dp = dp, m->dp_rank = dp_rank, m->dp_comm = dp > 1 ? dp_comm : NULL;
  m->stream = stream;
  m->lr = 1e-4f;
  m->sp_rows = (long long)cfg->batch * cfg->seq;
  m->overlap_wgrad = !ops_variant_is(OPS_V_WGRAD_OVERLAP, "off");
  m->lower_softmax = !ops_variant_is(OPS_V_SOFTMAX, "full");
  EX_TRY(model_dims(m, cfg, tp, tp_rank, e));
  /* expert parallelism: this rank's place, its experts (exec_ep.h) */
  const int ep = cfg->experts > 0 && pipe && pipe->ep > 1 ? pipe->ep : 1;
  EX_TRY(exec_ep_place_of(NULL, dp, ep, dp_rank, cfg->experts > 0 ? cfg->experts : 1, &m->epl, e));
  m->ep = ep;
  if (ep > 1 && (!pipe->ep_comm || (ep < dp && !pipe->edp_comm)))
    return ts_fail_sys(e, "exec_model_create_pp: EP %d (dp %d) without its communicators", ep, dp);
  m->ep_comm = ep > 1 ? pipe->ep_comm : NULL;
  m->edp_comm = ep > 1 && ep < dp ? pipe->edp_comm : NULL;
  EX_TRY(model_tensors(m, cfg, dp, e));
  size_t allocated = 0;
  EX_TRY(model_alloc_params(m, &allocated, e));
  EX_TRY(model_alloc_layers(m, &allocated, e));
  EX_TRY(model_alloc_pipeline(m, &allocated, e));
  EX_TRY(model_alloc_head(m, cfg, &allocated, e));
  EX_TRY(model_alloc_backward(m, micros, &allocated, e));
  return 0;
}

int exec_uses_caat(const exec_model *m) {
  for (int i = 0; i < 2; i++)
    if (m->tp_codec[i].kind == PLAN_CODEC_CAAT || m->tp_codec[i].kind == PLAN_CODEC_TACO_CAAT) return 1;
  return 0;
}

coll_opts exec_codec_opts(const plan_codec *c) {
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

/* A team of one local rank over comm, enqueuing on stream. */
static int team_ready(coll_team *t, int *ready, ncclComm_t comm, cudaStream_t *stream, ts_err *e) {
  if (*ready) return 0;
  int dev;
  EX_CUDA(cudaGetDevice(&dev));
  if (coll_team_init(t, 1, &comm, &dev, stream)) return ts_fail_sys(e, "exec: coll_team_init: %s", coll_last_error());
  *ready = 1;
  return 0;
}

int exec_model_set_codecs(exec_model *m, plan_codec fwd, plan_codec bwd, ts_err *e) {
  m->tp_codec[0] = fwd, m->tp_codec[1] = bwd;
  if (fwd.kind == PLAN_CODEC_NONE && bwd.kind == PLAN_CODEC_NONE) return 0;
  if (!m->tp_comm) return 0; /* TP = 1: nothing travels */
  EX_TRY(team_ready(&m->team, &m->team_ready, m->tp_comm, &m->tp_stream, e));
  for (int i = 0; i < 2; i++) {
    coll_opts o = exec_codec_opts(&m->tp_codec[i]);
    if (o.codec == COLL_CODEC_TACO &&
        coll_team_reserve(&m->team, COLL_OP_ALLREDUCE, (size_t)(m->tokens * m->cfg.hidden), &o))
      return ts_fail_sys(e, "exec: coll_team_reserve: %s", coll_last_error());
  }
  int caat_bwd = bwd.kind == PLAN_CODEC_CAAT || bwd.kind == PLAN_CODEC_TACO_CAAT;
  if (caat_bwd && !m->caat_f32 && !ops_variant_is(OPS_V_CAAT_BWD, "bf16"))
    EX_CUDA(cudaMalloc((void **)&m->caat_f32, (size_t)(m->tokens * m->cfg.hidden) * sizeof(float)));
  return 0;
}

int exec_model_prepare_codecs(exec_model *m, const plan_op *ops, int nops, ts_err *e) {
  for (int i = 0; i < nops; i++) {
    const plan_op *op = &ops[i];
    if (op->codec.kind == PLAN_CODEC_NONE) continue;
    const int sp_coll = op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_TP &&
                        (op->coll == PLAN_COLL_ALLGATHER || op->coll == PLAN_COLL_REDUCESCATTER);
    const int p2p = op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV;
    const int dp_bucket = op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_DP &&
                          op->model_op == PLAN_MOP_GRAD_BUCKET;
    if (!sp_coll && !p2p && !dp_bucket) continue; /* TP all-reduces: exec_model_set_codecs */
    if (op->codec.kind != PLAN_CODEC_TACO)
      return ts_fail(e, NULL, p2p ? "codec.pp" : dp_bucket ? "codec.dp" : "codec.tp_fwd", "only TACO compresses %s",
                     p2p ? "pipeline messages" : dp_bucket ? "data-parallel gradients"
                                                           : "sequence-parallel all-gathers/reduce-scatters");
    if (dp_bucket) {
      if (!m->dp_comm) continue;
      EX_TRY(team_ready(&m->dp_team, &m->dp_team_ready, m->dp_comm, &m->dp_stream, e));
      coll_opts o = exec_codec_opts(&op->codec);
      o.dtype = TACO_DTYPE_FP32;
      /* the largest call: a tensor (all-reduce) or a group's shard (ZeRO-1 reduce-scatter) */
      size_t most = 0;
      for (int t = 0; t < m->ntensors && !m->zero1; t++)
        if (m->tensors[t].rows * m->tensors[t].cols > most) most = m->tensors[t].rows * m->tensors[t].cols;
      for (int g = 0; g < m->cfg.layers + 2 && m->zero1; g++)
        if ((m->group_hi[g] - m->group_lo[g]) / (size_t)m->dp > most) most = (m->group_hi[g] - m->group_lo[g]) / (size_t)m->dp;
      if (most && coll_team_reserve(&m->dp_team, m->zero1 ? COLL_OP_REDUCESCATTER : COLL_OP_ALLREDUCE, most, &o))
        return ts_fail_sys(e, "exec: coll_team_reserve: %s", coll_last_error());
      continue;
    }
    coll_opts o = exec_codec_opts(&op->codec);
    const size_t count = (size_t)(m->sp_rows * m->cfg.hidden); /* one rank's rows, both kinds */
    if (sp_coll && m->tp_comm) {
      EX_TRY(team_ready(&m->team, &m->team_ready, m->tp_comm, &m->tp_stream, e));
      coll_op c = op->coll == PLAN_COLL_ALLGATHER ? COLL_OP_ALLGATHER : COLL_OP_REDUCESCATTER;
      if (coll_team_reserve(&m->team, c, count, &o))
        return ts_fail_sys(e, "exec: coll_team_reserve: %s", coll_last_error());
    }
    if (p2p && m->pp_comm) {
      EX_TRY(team_ready(&m->pp_team, &m->pp_team_ready, m->pp_comm, &m->pp_stream, e));
      if (coll_team_reserve(&m->pp_team, COLL_OP_SENDRECV, count, &o))
        return ts_fail_sys(e, "exec: coll_team_reserve: %s", coll_last_error());
    }
  }
  return 0;
}

int exec_stream_wait(exec_model *m, cudaStream_t s, ts_err *e) {
  const double timeout_s = m->wait_timeout_s > 0 ? m->wait_timeout_s : 300.0;
  ncclComm_t comms[] = {m->tp_comm_foreign ? NULL : m->tp_comm, m->dp_comm, m->pp_comm, m->emb_comm,
                        m->ep_comm != m->dp_comm ? m->ep_comm : NULL, m->edp_comm};
  static const char *const names[] = {"TP", "DP", "pipeline", "embedding", "EP", "expert-DP"};
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long nap = 5;
  for (;;) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return 0;
    if (q != cudaErrorNotReady)
      return ts_fail_sys(e, "%s:%d: cudaStreamQuery: %s", __FILE__, __LINE__, cudaGetErrorString(q));
    for (int k = 0; k < 6; k++) {
      ncclResult_t async = ncclSuccess;
      if (comms[k] && ncclCommGetAsyncError(comms[k], &async) == ncclSuccess && async != ncclSuccess &&
          async != ncclInProgress)
        return ts_fail_sys(e, "exec: NCCL error on the %s communicator while waiting for the GPU: %s (%s)", names[k],
                           ncclGetErrorString(async), ncclGetLastError(NULL));
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > timeout_s)
      return ts_fail_sys(e, "exec: the GPU's work not finished after %.1f s (a peer dead or stuck?)", timeout_s);
    struct timespec ts = {0, nap * 1000};
    nanosleep(&ts, NULL);
    if (nap < 200) nap *= 2;
  }
}

/* A team that could not be freed (its streams never came idle) is reported, its buffers left. */
static void destroy_team(coll_team *t, const char *name) {
  if (coll_team_destroy(t)) fprintf(stderr, "tacorun: the %s team: %s\n", name, coll_last_error());
}

void exec_model_destroy(exec_model *m) {
  if (m->rope_inv_freq) cudaFree(m->rope_inv_freq);
  if (m->dp_team_ready) destroy_team(&m->dp_team, "DP");
  if (m->pp_team_ready) destroy_team(&m->pp_team, "pipeline");
  if (m->team_ready) destroy_team(&m->team, "TP");
  if (m->tp_stream) cudaStreamDestroy(m->tp_stream);
  if (m->ev_ready) cudaEventDestroy(m->ev_ready);
  if (m->ev_done) cudaEventDestroy(m->ev_done);
  if (m->caat_f32) cudaFree(m->caat_f32);
  if (m->dp_stream) cudaStreamDestroy(m->dp_stream);
  free(m->group_done), free(m->group_reduced);
  free(m->group_lo), free(m->group_hi), free(m->group_bucket), free(m->zero1_off);
  if (m->pp_stream) cudaStreamDestroy(m->pp_stream);
  for (int i = 0; i < m->nslots * m->vpp; i++) {
    if (m->pp_grad_in) cudaFree(m->pp_grad_in[i]);
    if (m->pp_grad_out) cudaFree(m->pp_grad_out[i]);
  }
  free(m->pp_grad_in), free(m->pp_grad_out);
  if (m->bnd_x) { /* the received activations: the layers' x_in point at them, not at buffers of their own */
    for (int slot = 0; m->acts && slot < m->nslots; slot++)
      for (int c = 0; c < m->vpp; c++)
        if (m->chunk_lo[c] > 0) m->acts[(size_t)slot * (m->cfg.layers + 1) + m->chunk_lo[c]].x_in = NULL;
    for (int i = 0; i < m->nbslots * m->vpp; i++) cudaFree(m->bnd_x[i]);
    free(m->bnd_x);
  }
  exec_moe_destroy(m);
  exec_mla_destroy(m);
  const exec_layer_acts *sh = &m->shared;
  const void *shared_ptrs[] = {sh->x_in, sh->n1, sh->qkv, sh->P, sh->attn, sh->x_mid, sh->n2, sh->u, sh->a,
                               sh->mean1, sh->rstd1, sh->mean2, sh->rstd2, sh->qk_in, sh->qk_rstd,
                               sh->cq, sh->cqn, sh->kva, sh->ckvn, sh->rstd_q, sh->rstd_kv};
  const size_t nptrs = sizeof shared_ptrs / sizeof *shared_ptrs;
  if (m->acts)
    for (int l = 0; l < m->nslots * (m->cfg.layers + 1); l++) {
      exec_layer_acts *a = &m->acts[l];
      void *ptrs[] = {a->x_in, a->n1, a->qkv, a->P, a->attn, a->x_mid, a->n2, a->u, a->a,
                      a->mean1, a->rstd1, a->mean2, a->rstd2, a->qk_in, a->qk_rstd,
                      a->cq, a->cqn, a->kva, a->ckvn, a->rstd_q, a->rstd_kv};
      for (size_t i = 0; i < nptrs; i++)
        if (ptrs[i] != shared_ptrs[i]) cudaFree(ptrs[i]); /* the shared set is freed once, below */
    }
  free(m->acts);
  for (size_t i = 0; i < nptrs; i++) cudaFree((void *)shared_ptrs[i]);
  if (m->heads) {
    /* slot 0's buffers are the model's own (freed below), the others the slots' */
    for (int slot = 1; slot < m->nslots; slot++) {
      struct exec_head_acts *hd = &m->heads[slot];
      void *hp[] = {hd->x_final, hd->nf, hd->logits, hd->meanf, hd->rstdf};
      for (size_t i = 0; i < sizeof hp / sizeof *hp; i++) cudaFree(hp[i]);
    }
    m->x_final = m->heads[0].x_final, m->nf = m->heads[0].nf, m->logits = m->heads[0].logits;
    m->meanf = m->heads[0].meanf, m->rstdf = m->heads[0].rstdf;
    free(m->heads);
  }
  void *ptrs[] = {m->w16, m->master, m->grad, m->adam_m, m->adam_v, m->x_final, m->nf, m->proj, m->logits,
                  m->meanf, m->rstdf, m->ce_rowmax, m->ce_sums, m->dx, m->dtmp, m->dtmp2, m->dqkv, m->dattn,
                  m->du, m->da, m->dP, m->scores, m->dS, m->tokens_dev, m->labels_dev, m->loss_sum, m->nonfinite, m->nf_calls};
  for (size_t i = 0; i < sizeof ptrs / sizeof *ptrs; i++) cudaFree(ptrs[i]);
  exec_gemm_destroy(m->gemm);
  memset(m, 0, sizeof *m);
}

/* ---- parameters and data ---- */

int exec_model_load_ref(exec_model *m, const double *params, ts_err *e) {
  if (m->zero1_off) return ts_fail_sys(e, "exec: weights loaded after ZeRO-1 sharded the master weights");
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
  int waited = ce == cudaSuccess ? exec_stream_wait(m, m->stream, e) : 0;
  free(f);
  if (ce != cudaSuccess) return ts_fail_sys(e, "%s:%d: cudaMemcpy(master): %s", __FILE__, __LINE__, cudaGetErrorString(ce));
  if (waited) return -1;
  EX_TRY(exec_f32_to_bf16(m->master, m->w16, (long long)m->nparams, m->stream, e));
  EX_TRY(exec_stream_wait(m, m->stream, e));
  return 0;
}

int exec_model_init_random(exec_model *m, unsigned long long seed, ts_err *e) {
  if (m->zero1_off) return ts_fail_sys(e, "exec: weights initialised after ZeRO-1 sharded the master weights");
  const float out_std = 0.02f / sqrtf(2.0f * m->cfg.layers);
  for (int t = 0; t < m->ntensors; t++) {
    exec_tensor *lt = &m->tensors[t];
    float *p = m->master + lt->offset;
    long long n = (long long)(lt->rows * lt->cols);
    switch (lt->kind) {
    case EXEC_T_LN1_G: case EXEC_T_LN2_G: case EXEC_T_LNF_G: case EXEC_T_Q_A_NORM: case EXEC_T_KV_A_NORM:
      EX_TRY(exec_fill_f32(p, n, 1.0f, m->stream, e));
      break;
    case EXEC_T_LN1_B: case EXEC_T_LN2_B: case EXEC_T_LNF_B:
      EX_TRY(exec_fill_f32(p, n, 0.0f, m->stream, e));
      break;
    default: {
      /* uniform with the standard deviation of the reference's normal init */
      /* (the router too: 0.02 as Megatron-LM's init_method; the float64 check's init differs, exec_ref.h) */
      exec_tensor_kind k = lt->kind;
      float sd = (k == EXEC_T_ATTN_OUT || k == EXEC_T_FC2 || k == EXEC_T_EXPERT_FC2 || k == EXEC_T_SHARED_FC2)
                     ? out_std
                     : 0.02f;
      /* an EP rank's experts are its own (another seed per EP rank; expert-DP replicas equal) */
      const unsigned long long ep_seed =
          k == EXEC_T_EXPERT_FC1 || k == EXEC_T_EXPERT_FC2 ? 104729ULL * (unsigned long long)m->epl.ep_rank : 0;
      EX_TRY(rt_fill_random_f32(p, n, seed * 1000003ULL + (unsigned long long)t * 7919ULL + (unsigned long long)m->tp_rank + ep_seed,
                                sd * sqrtf(3.0f), m->stream, e));
    }
    }
  }
  EX_TRY(exec_f32_to_bf16(m->master, m->w16, (long long)m->nparams, m->stream, e));
  EX_TRY(exec_stream_wait(m, m->stream, e));
  return 0;
}

int exec_model_set_data(exec_model *m, const int32_t *tokens, const int32_t *labels, ts_err *e) {
  size_t bytes = (size_t)m->micros * (size_t)m->tokens * sizeof(int32_t);
  EX_CUDA(cudaMemcpyAsync(m->tokens_dev, tokens, bytes, cudaMemcpyHostToDevice, m->stream));
  EX_CUDA(cudaMemcpyAsync(m->labels_dev, labels, bytes, cudaMemcpyHostToDevice, m->stream));
  EX_TRY(exec_stream_wait(m, m->stream, e));
  return 0;
}

int exec_model_zero_grad(exec_model *m, ts_err *e) {
  EX_CUDA(cudaMemsetAsync(m->grad, 0, m->nparams * 4, m->stream));
  EX_CUDA(cudaMemsetAsync(m->loss_sum, 0, 4, m->stream));
  return 0;
}

/* ---- checks ---- */

int exec_nf_reset(exec_model *m, ts_err *e) {
  if (m->nf_used > 0) { /* count = 0, first_index = ULLONG_MAX in each used counter */
    const size_t pitch = sizeof(taco_nonfinite), w = sizeof(unsigned long long);
    EX_CUDA(cudaMemset2DAsync(m->nf_calls, pitch, 0, w, (size_t)m->nf_used, m->stream));
    EX_CUDA(cudaMemset2DAsync((char *)m->nf_calls + w, pitch, 0xff, w, (size_t)m->nf_used, m->stream));
  }
  m->nf_used = 0;
  return 0;
}

/* The first compressed call of the iteration whose TACO encode met NaN/Inf
 * (then the teams' own counters, for calls past EXEC_NF_CALLS): a failure
 * naming the step, the op and the count, as the uncompressed path reports a
 * gradient or the loss. Resets the counters. */
static int check_codec_finite(exec_model *m, int step, ts_err *e) {
  static taco_nonfinite host[EXEC_NF_CALLS];
  const int n = m->nf_used;
  if (n > 0) {
    EX_CUDA(cudaMemcpyAsync(host, m->nf_calls, (size_t)n * sizeof *host, cudaMemcpyDeviceToHost, m->stream));
    EX_TRY(exec_stream_wait(m, m->stream, e));
    EX_TRY(exec_nf_reset(m, e));
  }
  for (int i = 0; i < n; i++) {
    const plan_op *op = m->nf_ops[i];
    if (!host[i].count) continue;
    char what[160] = "a compressed collective";
    if (op)
      snprintf(what, sizeof what, "layer %d micro-batch %d %s %s %s (%s)", op->layer, op->micro,
               plan_phase_name((plan_phase)op->phase), plan_group_name((plan_group_kind)op->group),
               plan_coll_name((plan_coll)op->coll), plan_op_kind_name((plan_op_kind)op->kind));
    return ts_fail_sys(e, "step %d: %s: the TACO encode met %llu NaN/Inf values (first at element %llu of the "
                          "message; the codec sent them as zeros)",
                       step, what, host[i].count, host[i].first_index);
  }
  coll_team *teams[] = {m->team_ready ? &m->team : NULL, m->dp_team_ready ? &m->dp_team : NULL,
                        m->pp_team_ready ? &m->pp_team : NULL};
  static const char *const team_names[] = {"TP", "DP", "pipeline"};
  for (int k = 0; k < 3; k++) {
    unsigned long long count = 0, first = 0;
    if (!teams[k]) continue;
    if (coll_team_nonfinite(teams[k], &count, &first))
      return ts_fail_sys(e, "step %d: reading the %s team's NaN/Inf count: %s", step, team_names[k], coll_last_error());
    if (count)
      return ts_fail_sys(e, "step %d: a compressed %s collective: the TACO encode met %llu NaN/Inf values (first at "
                            "element %llu of the message; the codec sent them as zeros)",
                         step, team_names[k], count, first);
  }
  return 0;
}

int exec_model_check_finite(exec_model *m, int step, float *loss_out, ts_err *e) {
  EX_TRY(check_codec_finite(m, step, e));
  EX_CUDA(cudaMemsetAsync(m->nonfinite, 0, (size_t)(m->ntensors + 1) * sizeof(unsigned long long), m->stream));
  for (int t = 0; t < m->ntensors; t++)
    EX_TRY(exec_count_nonfinite(exec_grad_of(m, t), (long long)(m->tensors[t].rows * m->tensors[t].cols),
                                m->nonfinite + t, m->stream, e));
  unsigned long long counts[EXEC_REF_MAX_TENSORS];
  float loss;
  EX_CUDA(cudaMemcpyAsync(counts, m->nonfinite, (size_t)m->ntensors * sizeof *counts, cudaMemcpyDeviceToHost, m->stream));
  EX_CUDA(cudaMemcpyAsync(&loss, m->loss_sum, sizeof loss, cudaMemcpyDeviceToHost, m->stream));
  EX_TRY(exec_stream_wait(m, m->stream, e));
  if (loss_out) *loss_out = loss;
  if (!isfinite(loss)) return ts_fail_sys(e, "step %d: loss is %s", step, isnan(loss) ? "NaN" : "Inf");
  for (int t = 0; t < m->ntensors; t++)
    if (counts[t])
      return ts_fail_sys(e, "step %d: gradient of %s has %llu NaN/Inf values (of %zu)", step, m->tensors[t].name,
                         counts[t], m->tensors[t].rows * m->tensors[t].cols);
  return 0;
}

int exec_model_grads_to_host(exec_model *m, float *out, ts_err *e) {
  EX_TRY(exec_stream_wait(m, m->stream, e));
  EX_CUDA(cudaMemcpyAsync(out, m->grad, m->nparams * 4, cudaMemcpyDeviceToHost, m->stream));
  EX_TRY(exec_stream_wait(m, m->stream, e));
  return 0;
}

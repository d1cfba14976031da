/* model_layer.c — the ops of one decoder layer (and of the embedding and
 * output head) on one GPU of a tensor-parallel group.
 *
 * Conventions, in one place:
 * - GEMMs run on all m = micro_batch * seq tokens: under sequence parallelism
 *   the all-gather before a column-parallel GEMM restores the full sequence.
 *   Forward 2mnk FLOPs; backward 4mnk (dgrad + wgrad).
 * - Norms, dropout and residual adds run on m/tp tokens under sequence
 *   parallelism, on m tokens otherwise.
 * - Attention core: 4 b s^2 h / tp forward (QK^T and AV, the full square as
 *   Megatron-LM counts it); backward 2.5x (a fused kernel recomputes QK^T).
 *   Its shape is reported as m = tokens, n = keys per query (seq), k = head dim.
 * - Bytes are device-memory traffic in bf16 (2 bytes per element), 1 byte per
 *   element for dropout masks. FLOPs of memory-bound ops are rough counts of
 *   arithmetic per element; they never enter model FLOPs. */
#include <string.h>

#include "model.h"
#include "model_internal.h"

#define BF16 2.0

int model_head_dim(const model_config *m) {
  if (m->attention == MODEL_ATTN_MLA) return m->qk_nope_head_dim + m->qk_rope_head_dim;
  if (m->head_dim_override > 0) return m->head_dim_override;
  return m->heads > 0 ? m->hidden / m->heads : 0;
}

double model_prefill_attention_bytes(long long d, long long s, double q_heads, double group) {
  const double sd = (double)s * (double)d, ss = (double)s * (double)s;
  const double per_query_head = sd + ss + 2.0 * ss + ss + sd + 2.0 * sd; /* Q; QK^T; softmax; PV; O; copy */
  const double per_kv_head = 2.0 * sd;                                   /* K, V */
  return BF16 * (q_heads * per_query_head + q_heads / group * per_kv_head);
}

double model_prefill_attention_bytes_at(long long d, long long s, double flops, double group) {
  return model_prefill_attention_bytes(d, s, flops / model_attention_fwd_flops(s, s, d), group);
}

/* Degrees of an MoE shard, 0 meaning the default (ep 1, etp = tp). */
static int shard_ep(const model_shard *s) { return s->ep > 0 ? s->ep : 1; }
static int shard_etp(const model_shard *s) { return s->etp > 0 ? s->etp : s->tp; }

long long model_vocab_per_gpu(const model_config *m, int tp) {
  if (tp < 1) return 0;
  long long multiple = 128LL * tp;
  long long padded = (m->vocab + multiple - 1) / multiple * multiple;
  return padded / tp;
}

int model_shard_check(const model_config *m, const model_shard *s, ts_err *e) {
  if (s->tp < 1) return ts_fail(e, NULL, "tp", "%d must be at least 1", s->tp);
  if (m->heads % s->tp)
    return ts_fail(e, NULL, "tp", "%d does not divide the %d attention heads of %s", s->tp, m->heads, m->name);
  if (m->kv_heads % s->tp)
    return ts_fail(e, NULL, "tp", "%d does not divide the %d KV heads of %s", s->tp, m->kv_heads, m->name);
  if (m->ffn_hidden % s->tp)
    return ts_fail(e, NULL, "tp", "%d does not divide ffn_hidden %d of %s", s->tp, m->ffn_hidden, m->name);
  if (s->micro_batch < 1) return ts_fail(e, NULL, "micro_batch", "%d must be at least 1", s->micro_batch);
  if (s->seq < 1) return ts_fail(e, NULL, "seq", "%d must be at least 1", s->seq);
  if (s->seq > m->max_seq)
    return ts_fail(e, NULL, "seq", "%d exceeds the maximum sequence %d of %s", s->seq, m->max_seq, m->name);
  if (s->sequence_parallel && s->seq % s->tp)
    return ts_fail(e, NULL, "seq", "%d is not divisible by tp %d, as sequence parallelism needs", s->seq, s->tp);
  if (model_is_moe(m)) {
    int ep = shard_ep(s), etp = shard_etp(s);
    if (m->experts % ep)
      return ts_fail(e, NULL, "ep", "%d does not divide the %d experts of %s", ep, m->experts, m->name);
    if (etp < 1 || m->expert_ffn_hidden % etp)
      return ts_fail(e, NULL, "etp", "%d does not divide expert_ffn_hidden %d of %s", etp, m->expert_ffn_hidden,
                     m->name);
    if (((long long)m->shared_experts * m->expert_ffn_hidden) % s->tp)
      return ts_fail(e, NULL, "tp", "%d does not divide the shared experts' FFN %lld of %s", s->tp,
                     (long long)m->shared_experts * m->expert_ffn_hidden, m->name);
    if (s->tp > 1 && !s->sequence_parallel && !s->moe_tokens_replicated)
      return ts_fail(e, NULL, "sequence_parallel", "an MoE model with tp %d needs sequence parallelism (as "
                     "Megatron-Core requires: tokens enter the router sequence-split)", s->tp);
  }
  return 0;
}

static model_op *next_op(model_op *ops, int cap, int *n, const char *name, model_op_kind kind,
                         model_parallel par) {
  if (*n >= cap) return NULL;
  model_op *op = &ops[(*n)++];
  memset(op, 0, sizeof *op);
  strncpy(op->name, name, sizeof op->name - 1);
  op->kind = kind;
  op->parallel = par;
  return op;
}

static void gemm(model_op *op, long long m, long long n, long long k, double bias) {
  double mnk = (double)m * (double)n * (double)k;
  double elems = (double)m * (double)k + (double)k * (double)n + (double)m * (double)n;
  op->m = m;
  op->n = n;
  op->k = k;
  op->flops_fwd = 2.0 * mnk;
  op->flops_bwd = 4.0 * mnk;
  op->bytes_fwd = BF16 * elems;
  op->bytes_bwd = 2.0 * BF16 * elems; /* dgrad and wgrad each touch all three tensors */
  op->params = (double)k * (double)n + bias;
}

/* A norm over rows of `width` elements, tokens x width of them. */
static void norm_of_width(const model_config *m, model_op *op, double tokens, double width) {
  double elems = tokens * width;
  int layernorm = m->norm == MODEL_NORM_LAYERNORM;
  op->flops_fwd = (layernorm ? 7.0 : 4.0) * elems;
  op->flops_bwd = (layernorm ? 12.0 : 8.0) * elems;
  op->bytes_fwd = 2.0 * BF16 * elems; /* read x, write y */
  op->bytes_bwd = 3.0 * BF16 * elems; /* read x and dy, write dx */
  op->params = (layernorm ? 2.0 : 1.0) * width;
}

static void norm(const model_config *m, model_op *op, double tokens) { norm_of_width(m, op, tokens, m->hidden); }

/* Qwen3's QK norm (model qk_norm): an RMSNorm over each head of this rank's
 * Q and K (widths q_width, kv_width: heads / tp and kv_heads / tp heads of
 * head_dim), on all the tokens (it runs inside the TP region, after the
 * column-parallel QKV), as two kernels (Megatron-LM's q_layernorm and
 * k_layernorm). Each weight has head_dim elements, whole on every TP rank. */
static int qk_norm_ops(const model_config *m, model_op *ops, int cap, int n, long long tokens, long long q_width,
                       long long kv_width) {
  const double head_dim = model_head_dim(m);
  model_op *op;
  if (!(op = next_op(ops, cap, &n, "q_norm", MODEL_OP_NORM, MODEL_PAR_NONE))) return -1;
  norm_of_width(m, op, (double)tokens, (double)q_width);
  op->params = head_dim;
  if (!(op = next_op(ops, cap, &n, "k_norm", MODEL_OP_NORM, MODEL_PAR_NONE))) return -1;
  norm_of_width(m, op, (double)tokens, (double)kv_width);
  op->params = head_dim;
  return n;
}

/* Bias add (when the model has biases), dropout and residual add after a
 * row-parallel GEMM, fused the way Megatron-LM fuses them. The dropout's byte
 * mask (written forward, read backward) only with hidden dropout on; its
 * cost does not depend on the rate. */
static void residual(const model_config *m, const model_shard *s, model_op *op, double tokens) {
  double elems = tokens * m->hidden;
  double mask = s->no_hidden_dropout ? 0.0 : 1.0; /* bytes per element */
  op->flops_fwd = (m->linear_bias ? 3.0 : 2.0) * elems;
  op->flops_bwd = 1.0 * elems;
  op->bytes_fwd = (3.0 * BF16 + mask) * elems; /* read out and residual, write sum (and the mask) */
  op->bytes_bwd = (2.0 * BF16 + mask) * elems; /* read dy (and the mask), write dx */
}

static void activation(const model_config *m, model_op *op, double tokens, double width) {
  double elems = tokens * width;
  if (m->activation == MODEL_ACT_SWIGLU) { /* silu(gate) * up: two inputs per output */
    op->flops_fwd = 6.0 * elems;
    op->flops_bwd = 10.0 * elems;
    op->bytes_fwd = 3.0 * BF16 * elems;
    op->bytes_bwd = 5.0 * BF16 * elems;
  } else { /* tanh-approximated GELU */
    op->flops_fwd = 8.0 * elems;
    op->flops_bwd = 14.0 * elems;
    op->bytes_fwd = 2.0 * BF16 * elems;
    op->bytes_bwd = 3.0 * BF16 * elems;
  }
}

/* Multi-head latent attention (DeepSeek-V2/V3), priced by its own GEMMs:
 * queries through a low-rank pair q_a (h -> q_lora, normed) and q_b (->
 * heads x (nope + rope)); keys and values through kv_a (h -> kv_lora +
 * rope, the rope part shared by the heads) and kv_b (-> heads x (nope + v));
 * attention over qk = nope + rope dimensions, values of v; the output
 * projection from heads x v. The down-projections are replicated across TP
 * (each rank computes them whole, as Megatron-Core's MLA does); they are
 * tagged column-parallel so that under SP their input is all-gathered once
 * and its gradient reduced once, as for qkv. */
static int mla_attention(const model_config *m, const model_shard *s, model_op *ops, int cap, int n, long long tokens) {
  const long long h = m->hidden, H = m->heads / s->tp;
  const long long qk = m->qk_nope_head_dim + m->qk_rope_head_dim, dv = m->v_head_dim;
  const long long ql = m->q_lora_rank, kl = m->kv_lora_rank, rope = m->qk_rope_head_dim;
  model_op *op;
  if (!(op = next_op(ops, cap, &n, "q_a", MODEL_OP_GEMM, MODEL_PAR_COLUMN))) return -1;
  gemm(op, tokens, ql, h, 0.0);
  if (!(op = next_op(ops, cap, &n, "q_a_norm", MODEL_OP_NORM, MODEL_PAR_NONE))) return -1;
  norm(m, op, (double)tokens * (double)ql / (double)m->hidden);
  op->params = (double)ql;
  if (!(op = next_op(ops, cap, &n, "q_b", MODEL_OP_GEMM, MODEL_PAR_COLUMN))) return -1;
  gemm(op, tokens, H * qk, ql, 0.0);
  if (!(op = next_op(ops, cap, &n, "kv_a", MODEL_OP_GEMM, MODEL_PAR_COLUMN))) return -1;
  gemm(op, tokens, kl + rope, h, 0.0);
  if (!(op = next_op(ops, cap, &n, "kv_a_norm", MODEL_OP_NORM, MODEL_PAR_NONE))) return -1;
  norm(m, op, (double)tokens * (double)kl / (double)m->hidden);
  op->params = (double)kl;
  if (!(op = next_op(ops, cap, &n, "kv_b", MODEL_OP_GEMM, MODEL_PAR_COLUMN))) return -1;
  gemm(op, tokens, H * (m->qk_nope_head_dim + dv), kl, 0.0);
  if (m->position == MODEL_POS_ROPE) { /* rotates the rope part of Q (per head) and the shared key part */
    if (!(op = next_op(ops, cap, &n, "rope", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
    double elems = (double)tokens * (double)(H * rope + rope);
    op->flops_fwd = op->flops_bwd = 3.0 * elems;
    op->bytes_fwd = op->bytes_bwd = 2.0 * BF16 * elems;
  }
  if (!(op = next_op(ops, cap, &n, "attn", MODEL_OP_ATTENTION, MODEL_PAR_NONE))) return -1;
  op->m = tokens;
  op->n = s->seq;
  op->k = qk;
  op->flops_fwd = 2.0 * (double)tokens * (double)s->seq * (double)(H * qk + H * dv); /* Q K^T, then P V */
  op->flops_bwd = 2.5 * op->flops_fwd;
  op->bytes_fwd = BF16 * (double)tokens * (double)(2 * H * qk + 2 * H * dv);
  op->bytes_bwd = BF16 * (double)tokens * (double)(4 * H * qk + 4 * H * dv);
  if (!(op = next_op(ops, cap, &n, "attn_out", MODEL_OP_GEMM, MODEL_PAR_ROW))) return -1;
  gemm(op, tokens, h, H * dv, 0.0);
  return n;
}

/* The MoE block after ln2 (MoE layers only), on one GPU: the router GEMM
 * and its top-k on this rank's t = tokens/tp (SP) tokens; the permutation
 * (each token copied once per chosen expert, grouped by expert); the routed
 * experts as grouped GEMMs over the rows that reach this rank, on average
 * t x top_k x etp (the dispatch all-to-all over EP and the gather over expert
 * TP are the plan's, between permute and expert_fc1); the un-permutation
 * (weighted sum of each token's top_k outputs); the shared experts as a
 * dense MLP (column / row parallel over TP, their input all-gathered under
 * SP as fc1's is). */
static int moe_block(const model_config *m, const model_shard *s, model_op *ops, int cap, int n, long long tokens,
                     double norm_tokens) {
  const int ep = shard_ep(s), etp = shard_etp(s);
  const long long h = m->hidden, E = m->experts, k = m->top_k;
  const long long t = (long long)norm_tokens;       /* tokens entering the router on this rank */
  const long long rows = t * k * (s->moe_tokens_replicated ? 1 : etp); /* expert rows on this rank (balanced) */
  const long long local = E / ep, fe = m->expert_ffn_hidden / etp;
  const int swiglu = m->activation == MODEL_ACT_SWIGLU;
  const int first = n;
  model_op *op;
  if (!(op = next_op(ops, cap, &n, "router", MODEL_OP_GEMM, MODEL_PAR_NONE))) return -1;
  gemm(op, t, E, h, 0.0);
  if (!(op = next_op(ops, cap, &n, "router_topk", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
  op->flops_fwd = 4.0 * (double)t * (double)E; /* score, select, normalise the top_k */
  op->flops_bwd = 2.0 * (double)t * (double)E;
  op->bytes_fwd = op->bytes_bwd = 2.0 * BF16 * (double)t * (double)E;
  if (!(op = next_op(ops, cap, &n, "permute", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
  op->bytes_fwd = op->bytes_bwd = BF16 * (double)t * (double)h * (double)(1 + k); /* read t rows, write t.k */
  if (!(op = next_op(ops, cap, &n, "expert_fc1", MODEL_OP_GEMM, MODEL_PAR_EXPERT))) return -1;
  gemm(op, rows, (swiglu ? 2 : 1) * fe, h, 0.0);
  op->params *= (double)local;
  op->bytes_fwd += BF16 * (double)(local - 1) * (double)h * (double)((swiglu ? 2 : 1) * fe);
  op->bytes_bwd = 2.0 * op->bytes_fwd;
  op->groups = (int)local;
  op->expert = 1;
  if (!(op = next_op(ops, cap, &n, "expert_act", MODEL_OP_ELEMENTWISE, MODEL_PAR_EXPERT))) return -1;
  activation(m, op, (double)rows, (double)fe);
  if (!(op = next_op(ops, cap, &n, "expert_fc2", MODEL_OP_GEMM, MODEL_PAR_EXPERT))) return -1;
  gemm(op, rows, h, fe, 0.0);
  op->params *= (double)local;
  op->bytes_fwd += BF16 * (double)(local - 1) * (double)h * (double)fe;
  op->bytes_bwd = 2.0 * op->bytes_fwd;
  op->groups = (int)local;
  op->expert = 1;
  if (!(op = next_op(ops, cap, &n, "unpermute", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
  op->flops_fwd = 2.0 * (double)t * (double)h * (double)k; /* weighted sum of the top_k outputs */
  op->flops_bwd = 2.0 * op->flops_fwd;
  op->bytes_fwd = BF16 * (double)t * (double)h * (double)(1 + k);
  op->bytes_bwd = 2.0 * op->bytes_fwd;
  if (m->shared_experts > 0) {
    const long long sf = (long long)m->shared_experts * m->expert_ffn_hidden / s->tp;
    if (!(op = next_op(ops, cap, &n, "shared_fc1", MODEL_OP_GEMM, MODEL_PAR_COLUMN))) return -1;
    gemm(op, tokens, (swiglu ? 2 : 1) * sf, h, 0.0);
    if (!(op = next_op(ops, cap, &n, "shared_act", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
    activation(m, op, (double)tokens, (double)sf);
    if (!(op = next_op(ops, cap, &n, "shared_fc2", MODEL_OP_GEMM, MODEL_PAR_ROW))) return -1;
    gemm(op, tokens, h, sf, 0.0);
  }
  for (int i = first; i < n; i++) ops[i].layers_kind = MODEL_LAYERS_MOE;
  return n;
}

/* Builds the layer; the caller has checked the shard (or knows it is sound). */
static int build_layer(const model_config *m, const model_shard *s, model_op *ops, int cap) {
  const long long tokens = (long long)s->micro_batch * s->seq;
  const double norm_tokens = s->sequence_parallel ? (double)tokens / s->tp : (double)tokens;
  const long long head_dim = model_head_dim(m);
  const long long q_width = (long long)m->heads * head_dim / s->tp;
  const long long kv_width = (long long)m->kv_heads * head_dim / s->tp;
  const long long ffn = m->ffn_hidden / s->tp;
  const long long h = m->hidden;
  int n = 0;
  model_op *op;

  if (!(op = next_op(ops, cap, &n, "ln1", MODEL_OP_NORM, MODEL_PAR_NONE))) return -1;
  norm(m, op, norm_tokens);

  if (m->attention == MODEL_ATTN_MLA) {
    if ((n = mla_attention(m, s, ops, cap, n, tokens)) < 0) return -1;
  } else {
    if (!(op = next_op(ops, cap, &n, "qkv", MODEL_OP_GEMM, MODEL_PAR_COLUMN))) return -1;
    gemm(op, tokens, q_width + 2 * kv_width, h, m->qkv_bias ? (double)(q_width + 2 * kv_width) : 0.0);

    if (m->qk_norm && (n = qk_norm_ops(m, ops, cap, n, tokens, q_width, kv_width)) < 0) return -1;

    if (m->position == MODEL_POS_ROPE) { /* rotates Q and K in place */
      if (!(op = next_op(ops, cap, &n, "rope", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
      double elems = (double)tokens * (double)(q_width + kv_width);
      op->flops_fwd = op->flops_bwd = 3.0 * elems;
      op->bytes_fwd = op->bytes_bwd = 2.0 * BF16 * elems;
    }

    if (!(op = next_op(ops, cap, &n, "attn", MODEL_OP_ATTENTION, MODEL_PAR_NONE))) return -1;
    op->m = tokens;
    op->n = s->seq;
    op->k = head_dim;
    op->flops_fwd = model_attention_fwd_flops(tokens, s->seq, q_width);
    op->flops_bwd = 2.5 * op->flops_fwd;
    op->bytes_fwd = BF16 * (double)tokens * (double)(2 * q_width + 2 * kv_width); /* read Q K V, write O */
    op->bytes_bwd = BF16 * (double)tokens * (double)(4 * q_width + 4 * kv_width); /* + O, dO; write dQ dK dV */

    if (!(op = next_op(ops, cap, &n, "attn_out", MODEL_OP_GEMM, MODEL_PAR_ROW))) return -1;
    gemm(op, tokens, h, q_width, m->linear_bias ? (double)h : 0.0); /* bias added after the reduction */
  }

  if (!(op = next_op(ops, cap, &n, "attn_residual", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
  residual(m, s, op, norm_tokens);

  if (!(op = next_op(ops, cap, &n, "ln2", MODEL_OP_NORM, MODEL_PAR_NONE))) return -1;
  norm(m, op, norm_tokens);

  const int dense_kind = model_is_moe(m) ? MODEL_LAYERS_DENSE : MODEL_LAYERS_ALL;
  const int first_ffn = n;
  if (!model_is_moe(m) || m->dense_layers > 0) {
    /* SwiGLU's first GEMM computes gate and up projections side by side. */
    long long fc1_width = (m->activation == MODEL_ACT_SWIGLU ? 2 : 1) * ffn;
    if (!(op = next_op(ops, cap, &n, "fc1", MODEL_OP_GEMM, MODEL_PAR_COLUMN))) return -1;
    gemm(op, tokens, fc1_width, h, m->linear_bias ? (double)fc1_width : 0.0);

    if (!(op = next_op(ops, cap, &n, "act", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
    activation(m, op, (double)tokens, (double)ffn);

    if (!(op = next_op(ops, cap, &n, "fc2", MODEL_OP_GEMM, MODEL_PAR_ROW))) return -1;
    gemm(op, tokens, h, ffn, m->linear_bias ? (double)h : 0.0);
    for (int i = first_ffn; i < n; i++) ops[i].layers_kind = (unsigned char)dense_kind;
  }
  if (model_is_moe(m) && (n = moe_block(m, s, ops, cap, n, tokens, norm_tokens)) < 0) return -1;

  if (!(op = next_op(ops, cap, &n, "mlp_residual", MODEL_OP_ELEMENTWISE, MODEL_PAR_NONE))) return -1;
  residual(m, s, op, norm_tokens);
  return n;
}

int model_layer_ops(const model_config *m, const model_shard *s, model_op *ops, int cap, ts_err *e) {
  if (model_shard_check(m, s, e)) return -1;
  int n = build_layer(m, s, ops, cap);
  if (n < 0) return ts_fail_sys(e, "model_layer_ops: %d op slots are too few for a layer of %s", cap, m->name);
  return n;
}

/* Exposed to model_totals.c, which counts FLOPs for any sequence length
 * without a tensor-parallel shard to check. */
int model_build_layer_unchecked(const model_config *m, const model_shard *s, model_op *ops, int cap) {
  return build_layer(m, s, ops, cap);
}

int model_embedding_ops(const model_config *m, const model_shard *s, model_op *ops, int cap, ts_err *e) {
  if (model_shard_check(m, s, e)) return -1;
  const double tokens = (double)s->micro_batch * s->seq;
  const double elems = tokens * m->hidden;
  int n = 0;
  model_op *op;
  /* Vocabulary-parallel lookup: each GPU holds a slice of the rows, the
   * partial outputs are summed across TP (all-reduce, or reduce-scatter
   * under SP), as after a row-parallel GEMM. */
  if (!(op = next_op(ops, cap, &n, "embedding", MODEL_OP_EMBEDDING, MODEL_PAR_ROW))) goto few;
  op->m = (long long)tokens;
  op->n = m->hidden;
  op->k = model_vocab_per_gpu(m, s->tp);
  op->bytes_fwd = 2.0 * BF16 * elems;  /* gather rows, write the output */
  op->bytes_bwd = 3.0 * BF16 * elems;  /* read dy, read-modify-write the rows' gradients */
  op->params = (double)model_vocab_per_gpu(m, s->tp) * m->hidden;
  if (m->position == MODEL_POS_LEARNED) {
    if (!(op = next_op(ops, cap, &n, "pos_embedding", MODEL_OP_EMBEDDING, MODEL_PAR_NONE))) goto few;
    op->m = (long long)tokens;
    op->n = m->hidden;
    op->k = m->max_seq;
    op->flops_fwd = elems;
    op->bytes_fwd = 3.0 * BF16 * elems;
    op->bytes_bwd = 3.0 * BF16 * elems;
    op->params = (double)m->max_seq * m->hidden;
  }
  return n;
few:
  return ts_fail_sys(e, "model_embedding_ops: %d op slots are too few", cap);
}

int model_output_ops(const model_config *m, const model_shard *s, model_op *ops, int cap, ts_err *e) {
  if (model_shard_check(m, s, e)) return -1;
  const long long tokens = (long long)s->micro_batch * s->seq;
  const double norm_tokens = s->sequence_parallel ? (double)tokens / s->tp : (double)tokens;
  const long long vocab = model_vocab_per_gpu(m, s->tp);
  int n = 0;
  model_op *op;
  if (!(op = next_op(ops, cap, &n, "final_norm", MODEL_OP_NORM, MODEL_PAR_NONE))) goto few;
  norm(m, op, norm_tokens);
  /* Tied embeddings reuse the input embedding's weight: no new parameters. */
  if (!(op = next_op(ops, cap, &n, "logits", MODEL_OP_GEMM, MODEL_PAR_COLUMN))) goto few;
  gemm(op, tokens, vocab, m->hidden, 0.0);
  if (m->tied_embeddings) op->params = 0.0;
  /* Vocabulary-parallel softmax cross-entropy over this GPU's logits. */
  if (!(op = next_op(ops, cap, &n, "loss", MODEL_OP_LOGITS_LOSS, MODEL_PAR_COLUMN))) goto few;
  double elems = (double)tokens * (double)vocab;
  op->m = tokens;
  op->n = vocab;
  op->flops_fwd = 5.0 * elems;
  op->flops_bwd = 2.0 * elems;
  op->bytes_fwd = 2.0 * BF16 * elems;
  op->bytes_bwd = 2.0 * BF16 * elems;
  return n;
few:
  return ts_fail_sys(e, "model_output_ops: %d op slots are too few", cap);
}

double model_activation_tensor_bytes(const model_config *m, const model_shard *s) {
  double tokens = (double)s->micro_batch * s->seq;
  if (s->sequence_parallel && s->tp > 0) tokens /= s->tp;
  return BF16 * tokens * m->hidden;
}

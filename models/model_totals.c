/* model_totals.c — whole-model figures: parameters, model FLOPs of an
 * iteration, and the activation memory a layer keeps for backward. Counts
 * are sums over the layer ops of model_layer.c, so a formula exists once. */
#include "model.h"
#include "model_internal.h"

/* which: 0 parameters, 1 forward model FLOPs, 2 active parameters (a
 * routed expert's share: top_k of the experts). `layer` picks the layer kind
 * (dense or MoE) in an MoE model. */
static double sum_layer(const model_config *m, int seq, int which, int layer) {
  model_shard whole = {.tp = 1, .sequence_parallel = false, .micro_batch = 1, .seq = seq};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_build_layer_unchecked(m, &whole, ops, MODEL_MAX_LAYER_OPS);
  double total = 0.0;
  for (int i = 0; i < n; i++) {
    if (!model_op_in_layer(m, &ops[i], layer)) continue;
    if (which == 0) total += ops[i].params;
    else if (which == 2) total += ops[i].expert ? ops[i].params * m->top_k / m->experts : ops[i].params;
    /* Model FLOPs count the matrix products only, as Megatron-LM does. */
    else if (ops[i].kind == MODEL_OP_GEMM || ops[i].kind == MODEL_OP_ATTENTION) total += ops[i].flops_fwd;
  }
  return total;
}

/* Sum over the model's layers: dense_layers of the dense kind, the rest MoE
 * (every layer alike in a dense model). */
static double sum_layers(const model_config *m, int seq, int which) {
  if (!model_is_moe(m)) return m->layers * sum_layer(m, seq, which, 0);
  int dense = m->dense_layers < m->layers ? m->dense_layers : m->layers;
  return dense * sum_layer(m, seq, which, 0) + (m->layers - dense) * sum_layer(m, seq, which, m->layers - 1);
}

double model_params_per_layer(const model_config *m) { return sum_layer(m, 1, 0, m->layers - 1); }

double model_params_embedding(const model_config *m) {
  double word = (double)m->vocab * m->hidden;
  double position = m->position == MODEL_POS_LEARNED ? (double)m->max_seq * m->hidden : 0.0;
  return word * (m->tied_embeddings ? 1.0 : 2.0) + position;
}

static double final_norm_params(const model_config *m) {
  return (m->norm == MODEL_NORM_LAYERNORM ? 2.0 : 1.0) * m->hidden;
}

double model_params_total(const model_config *m) {
  if (!model_is_moe(m) && m->attention == MODEL_ATTN_GQA) /* dense: the original expression, to the last bit */
    return m->layers * model_params_per_layer(m) + model_params_embedding(m) + final_norm_params(m);
  return sum_layers(m, 1, 0) + model_params_embedding(m) + final_norm_params(m);
}

double model_params_active(const model_config *m) {
  if (!model_is_moe(m)) return model_params_total(m);
  return sum_layers(m, 1, 2) + model_params_embedding(m) + final_norm_params(m);
}

double model_flops_per_token_fwd(const model_config *m, int seq) {
  if (seq < 1) return 0.0;
  return (sum_layers(m, seq, 1) + 2.0 * seq * (double)m->hidden * m->vocab) / seq;
}

double model_flops_per_iteration(const model_config *m, long long global_batch, int seq, bool recompute) {
  if (global_batch < 1 || seq < 1) return 0.0;
  double layers_fwd = model_is_moe(m) ? sum_layers(m, seq, 1) : m->layers * sum_layer(m, seq, 1, 0);
  double logits_fwd = 2.0 * seq * (double)m->hidden * m->vocab;
  /* Backward is twice the forward; full recompute reruns the layers' forward. */
  double per_sequence = layers_fwd * (recompute ? 4.0 : 3.0) + 3.0 * logits_fwd;
  return (double)global_batch * per_sequence;
}

double model_flops_megatron_closed_form(const model_config *m, long long global_batch, int seq, bool recompute) {
  double B = (double)global_batch, s = seq, l = m->layers, h = m->hidden, V = m->vocab;
  if (recompute) return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
  return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

/* Megatron-LM's count for MoE and MLA models (its num_floating_point_operations
 * with MoE layers): per token and layer, 2 FLOPs per weight of the attention
 * GEMMs (MLA: its own projections), causal attention (half the square), and
 * the MLP a token goes through (top_k experts + the shared experts in an MoE
 * layer, the dense FFN in a dense one); the router is not counted; the
 * logits over the padded vocabulary; x 3 for forward, dgrad and wgrad. */
static double megatron_lm_moe(const model_config *m, long long global_batch, int seq, int tp) {
  const double h = m->hidden, H = m->heads, s = seq;
  double attn_weights, core;
  if (m->attention == MODEL_ATTN_MLA) {
    double qk = m->qk_nope_head_dim + m->qk_rope_head_dim, dv = m->v_head_dim;
    attn_weights = h * m->q_lora_rank + (double)m->q_lora_rank * H * qk + h * (m->kv_lora_rank + m->qk_rope_head_dim) +
                   (double)m->kv_lora_rank * H * (m->qk_nope_head_dim + dv) + H * dv * h;
    core = s * H * (qk + dv); /* 2 s H (qk + dv) / 2: causal */
  } else {
    double d = model_head_dim(m), kv = (double)m->kv_heads * d;
    attn_weights = h * (H * d + 2.0 * kv) + H * d * h;
    core = 2.0 * s * H * d;
  }
  const double gated = m->activation == MODEL_ACT_SWIGLU ? 3.0 : 2.0;
  const double moe_ffn = ((double)m->top_k + m->shared_experts) * m->expert_ffn_hidden;
  const int dense = model_is_moe(m) ? (m->dense_layers < m->layers ? m->dense_layers : m->layers) : m->layers;
  double layers = 0.0;
  layers += dense * (2.0 * attn_weights + core + 2.0 * gated * h * m->ffn_hidden);
  layers += (m->layers - dense) * (2.0 * attn_weights + core + 2.0 * gated * h * moe_ffn);
  const double logits = 2.0 * h * (double)model_vocab_per_gpu(m, tp) * tp;
  return 3.0 * (double)global_batch * s * (layers + logits);
}

double model_flops_megatron_lm(const model_config *m, long long global_batch, int seq, int tp) {
  if (global_batch < 1 || seq < 1 || tp < 1) return 0.0;
  if (model_is_moe(m) || m->attention == MODEL_ATTN_MLA) return megatron_lm_moe(m, global_batch, seq, tp);
  double B = (double)global_batch, s = seq, l = m->layers, h = m->hidden;
  double q_ratio = (double)m->heads * model_head_dim(m) / h;
  double gated = m->activation == MODEL_ACT_SWIGLU ? 1.5 : 1.0;
  double vocab = (double)model_vocab_per_gpu(m, tp) * tp;
  double attention = (1.0 + (double)m->kv_heads / m->heads + s / h / 2.0) * q_ratio;
  double mlp = (double)m->ffn_hidden / h * gated;
  double logits = vocab / (2.0 * l * h);
  /* 3 passes (forward, dgrad, wgrad) x 2 GEMMs per block x 2 FLOPs per MAC. */
  return 12.0 * B * s * l * h * h * (attention + mlp + logits);
}

/* An MoE layer (the kind most layers of an MoE model are): the dense MLP's
 * tensors (2f per activation input + 2f, per token over tp) give way to
 * the routed experts' on this GPU's rows (t x top_k x etp on average): the
 * permuted input (2h), the activation's input(s) and FC2's input (2 x
 * expert_ffn / etp each) and the router's probabilities (4 bytes per
 * expert); and the shared experts' tensors as a dense MLP over tp. */
static double moe_layer_bytes(const model_config *m, const model_shard *s, double sb, double per_token_rest,
                              double inside, double act_inputs) {
  const double t = s->tp, h = m->hidden, f = m->ffn_hidden;
  const double attn_inside = inside - (2.0 * f * act_inputs + 2.0 * f);
  const int ep = s->ep > 0 ? s->ep : 1, etp = s->etp > 0 ? s->etp : s->tp;
  (void)ep;
  const double local_tokens = s->sequence_parallel ? sb / t : sb;
  const double rows = local_tokens * m->top_k * etp, fe = (double)m->expert_ffn_hidden / etp;
  const double experts = rows * (2.0 * h + 2.0 * fe * act_inputs + 2.0 * fe) + local_tokens * 4.0 * m->experts;
  const double sf = (double)m->shared_experts * m->expert_ffn_hidden;
  const double shared = sb * (2.0 * sf * act_inputs + 2.0 * sf) / t;
  return sb * (per_token_rest + attn_inside / t) + experts + shared;
}

double model_activation_bytes_per_layer(const model_config *m, const model_shard *s, model_recompute r) {
  ts_err ignored;
  if (model_shard_check(m, s, &ignored)) return -1.0;
  const double t = s->tp, sb = (double)s->seq * s->micro_batch;
  const double h = m->hidden, a = m->heads, f = m->ffn_hidden;
  const double kv = (double)m->kv_heads * model_head_dim(m);
  /* Outside the TP region each rank holds the whole tensor unless SP splits it. */
  const double whole_split = s->sequence_parallel ? t : 1.0;
  if (r == MODEL_RECOMPUTE_FULL) return 2.0 * sb * h / whole_split;
  /* Per token, in bytes: the inputs of ln1, QKV, ln2 and FC1 (2h each) and,
   * with hidden dropout, its two masks (h each) sit outside the TP region:
   * 10h for GPT (8h without hidden dropout). */
  const double outside = (s->no_hidden_dropout ? 8.0 : 10.0) * h;
  /* Inside it: Q and K for QK^T, V for AV, the input of the output
   * projection, the activation's input(s) and FC2's input: 24h for GPT.
   * Q and the output projection's input are heads x head_dim wide (h unless
   * the model sets head_dim: Qwen3's 128 x heads is twice its hidden). */
  const double act_inputs = m->activation == MODEL_ACT_SWIGLU ? 2.0 : 1.0;
  const double q = m->attention == MODEL_ATTN_GQA && m->head_dim_override > 0 ? (double)m->heads * model_head_dim(m) : h;
  double inside = (2.0 * q + 2.0 * kv) + 2.0 * kv + 2.0 * q + 2.0 * f * act_inputs + 2.0 * f;
  /* Multi-head latent attention (DeepSeek-V2/V3), as Megatron-Core's MLASelfAttention saves it for its
   * backward (and tacorun execute allocates it, exec_mla.c): Q and K of heads x (nope + rope) each, V and the
   * output projection's input of heads x v_head each, inside the TP region; and, whole on every TP rank (the
   * down-projections are replicated over TP, on the whole sequence), the query latent before and after its
   * norm (2 q_lora each), kv_a's output (c_kv with the shared rope key, the norm's input: 2 (kv_lora + rope)),
   * the normed c_kv (kv_b's input, 2 kv_lora) and the two norms' fp32 1/rms (8). */
  double latent = 0.0;
  if (m->attention == MODEL_ATTN_MLA) {
    const double qk = (double)m->heads * model_head_dim(m), vo = (double)m->heads * m->v_head_dim;
    inside = 2.0 * qk + 2.0 * qk + 2.0 * vo + 2.0 * vo + 2.0 * f * act_inputs + 2.0 * f;
    latent = 2.0 * (2.0 * m->q_lora_rank + (m->kv_lora_rank + m->qk_rope_head_dim) + m->kv_lora_rank) + 8.0;
  }
  /* The QK norm (qk_norm) keeps what an RMSNorm saves for its backward, as
   * Megatron-LM's q_layernorm and k_layernorm (Transformer Engine's RMSNorm)
   * do: its input, Q and K before the norm (2q + 2kv bytes), and its fp32
   * 1/rms per row, one row per head and token (4 bytes x (heads + kv_heads)).
   * The attention keeps Q and K after the norm and RoPE (counted above). */
  if (m->qk_norm) inside += 2.0 * q + 2.0 * kv + 4.0 * ((double)m->heads + m->kv_heads);
  /* Softmax output (2), its dropout mask (1) and dropout output (2) per score. */
  const double scores = r == MODEL_RECOMPUTE_SELECTIVE ? 0.0 : 5.0 * a * s->seq;
  if (model_is_moe(m)) return moe_layer_bytes(m, s, sb, outside / whole_split + scores / t + latent, inside, act_inputs);
  return sb * (outside / whole_split + inside / t + scores / t + latent);
}

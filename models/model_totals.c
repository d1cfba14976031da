/* model_totals.c — whole-model figures: parameters, model FLOPs of an
 * iteration, and the activation memory a layer keeps for backward. Counts
 * are sums over the layer ops of model_layer.c, so a formula exists once. */
#include "model.h"
#include "model_internal.h"

static double sum_layer(const model_config *m, int seq, int which) {
  model_shard whole = {.tp = 1, .sequence_parallel = false, .micro_batch = 1, .seq = seq};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_build_layer_unchecked(m, &whole, ops, MODEL_MAX_LAYER_OPS);
  double total = 0.0;
  for (int i = 0; i < n; i++) {
    if (which == 0) total += ops[i].params;
    /* Model FLOPs count the matrix products only, as Megatron-LM does. */
    else if (ops[i].kind == MODEL_OP_GEMM || ops[i].kind == MODEL_OP_ATTENTION) total += ops[i].flops_fwd;
  }
  return total;
}

double model_params_per_layer(const model_config *m) { return sum_layer(m, 1, 0); }

double model_params_embedding(const model_config *m) {
  double word = (double)m->vocab * m->hidden;
  double position = m->position == MODEL_POS_LEARNED ? (double)m->max_seq * m->hidden : 0.0;
  return word * (m->tied_embeddings ? 1.0 : 2.0) + position;
}

double model_params_total(const model_config *m) {
  double final_norm = (m->norm == MODEL_NORM_LAYERNORM ? 2.0 : 1.0) * m->hidden;
  return m->layers * model_params_per_layer(m) + model_params_embedding(m) + final_norm;
}

double model_flops_per_iteration(const model_config *m, long long global_batch, int seq, bool recompute) {
  if (global_batch < 1 || seq < 1) return 0.0;
  double layer_fwd = sum_layer(m, seq, 1);
  double logits_fwd = 2.0 * seq * (double)m->hidden * m->vocab;
  /* Backward is twice the forward; full recompute reruns the layers' forward. */
  double per_sequence = m->layers * layer_fwd * (recompute ? 4.0 : 3.0) + 3.0 * logits_fwd;
  return (double)global_batch * per_sequence;
}

double model_flops_megatron_closed_form(const model_config *m, long long global_batch, int seq, bool recompute) {
  double B = (double)global_batch, s = seq, l = m->layers, h = m->hidden, V = m->vocab;
  if (recompute) return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
  return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

double model_flops_megatron_lm(const model_config *m, long long global_batch, int seq, int tp) {
  if (global_batch < 1 || seq < 1 || tp < 1) return 0.0;
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

double model_activation_bytes_per_layer(const model_config *m, const model_shard *s, model_recompute r) {
  ts_err ignored;
  if (model_shard_check(m, s, &ignored)) return -1.0;
  const double t = s->tp, sb = (double)s->seq * s->micro_batch;
  const double h = m->hidden, a = m->heads, f = m->ffn_hidden;
  const double kv = (double)m->kv_heads * model_head_dim(m);
  /* Outside the TP region each rank holds the whole tensor unless SP splits it. */
  const double whole_split = s->sequence_parallel ? t : 1.0;
  if (r == MODEL_RECOMPUTE_FULL) return 2.0 * sb * h / whole_split;
  /* Per token, in bytes: the inputs of ln1, QKV, ln2 and FC1 (2h each) and
   * the two dropout masks (h each) sit outside the TP region: 10h for GPT. */
  const double outside = 10.0 * h;
  /* Inside it: Q and K for QK^T, V for AV, the input of the output
   * projection, the activation's input(s) and FC2's input: 24h for GPT. */
  const double act_inputs = m->activation == MODEL_ACT_SWIGLU ? 2.0 : 1.0;
  const double inside = (2.0 * h + 2.0 * kv) + 2.0 * kv + 2.0 * h + 2.0 * f * act_inputs + 2.0 * f;
  /* Softmax output (2), its dropout mask (1) and dropout output (2) per score. */
  const double scores = r == MODEL_RECOMPUTE_SELECTIVE ? 0.0 : 5.0 * a * s->seq;
  return sb * (outside / whole_split + inside / t + scores / t);
}

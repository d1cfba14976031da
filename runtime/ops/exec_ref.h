/* exec_ref.h — a plain-C float64 reference of a small GPT-style decoder stack:
 * forward, loss and backward. The GPU executor's gradients are checked against
 * it, and it is itself checked by finite differences (tests/test_exec_ref.c).
 *
 * Model: token embeddings, plus learned position embeddings (wpe) unless the
 * model uses rotary position embeddings (rope_theta > 0); per layer
 *   x += attn_out(causal_attention(rope(qkv(norm1(x)))))
 *   x += fc2(act(fc1(norm2(x))))
 * then a final norm, logits = x . wte^T (tied embeddings; untied: x . lm_head^T)
 * and the mean softmax cross-entropy over all tokens. Optional biases: on the
 * qkv GEMM (qkv_bias: Qwen2.5, GPT) and on attn_out, fc1, fc2 (linear_bias:
 * GPT). RoPE as HF/Llama: in each query and key head, pairs (i, i + d/2)
 * rotated by pos * inv_freq[i], inv_freq[i] = theta^(-2i/d) (with Llama 3.1's
 * frequency scaling when rope_factor > 0), pos the token's place in its
 * sequence. No dropout.
 * act is GELU (tanh form, as Megatron-LM) or SwiGLU (fc1 is [gate | up]);
 * norm is LayerNorm (gain and bias) or RMSNorm (gain only).
 *
 * Matrices are row-major, weights stored [in x out] so y = x . W. The qkv
 * output is [q | k | v]: q heads*d wide (d = head_dim, hidden / heads unless
 * set: Qwen3's heads x head_dim is not hidden), head j at columns j*d ..
 * j*d+d-1, and attn_out maps those heads*d columns back to hidden; k and
 * v kv_heads*d wide each (grouped-query attention: query head j uses key/value
 * head j / (heads / kv_heads); kv_heads = heads is multi-head attention).
 * QK norm (qk_norm: Qwen3, Megatron-LM's qk_layernorm): after the qkv GEMM
 * (and its bias), before RoPE, each query head and each key head of d
 * columns is RMS-normed over its d values with eps norm_eps and scaled by
 * q_norm [d] (query heads) or k_norm [d] (key heads).
 * Multi-head latent attention (kv_lora > 0: DeepSeek-V2/V3, exec_ref_mla.c) replaces
 * the qkv GEMM (and its bias, the QK norm) by low-rank projections: queries
 * q = rms(n1 . q_a) . q_b (q_a [h x q_lora], an RMSNorm of gain q_a_norm
 * [q_lora], q_b [q_lora x heads (qk_nope + qk_rope)], each head [nope | rope]);
 * keys and values from kv_a [h x (kv_lora + qk_rope)]: its first kv_lora
 * columns c_kv, RMS-normed (gain kv_a_norm [kv_lora]), go through kv_b
 * [kv_lora x heads (qk_nope + v_head)] (each head [k_nope | v]); its last
 * qk_rope columns are one rope key shared by every head. RoPE (d = qk_rope,
 * pairs (i, i + qk_rope / 2) as above) rotates each query head's rope part and
 * the shared key; key head j is [k_nope_j | rotated shared key]. Attention as
 * above with head dimension qk_nope + qk_rope (scale 1 / sqrt(qk_nope +
 * qk_rope); DeepSeek's YaRN mscale is not modelled) and values of v_head, so
 * the attention output and attn_out's input are heads x v_head wide. The qkv
 * activation is assembled as [q (heads x dqk) | k (heads x dqk) | v (heads x
 * v_head)], dqk = qk_nope + qk_rope. The latent norms are RMSNorms whatever
 * the layer norm is (DeepSeek's q_a_layernorm / kv_a_layernorm).
 * All parameters live in one flat array; exec_ref_tensors() names the pieces,
 * so gradients from any implementation can be compared tensor by tensor. */
#ifndef EXEC_REF_H
#define EXEC_REF_H

#include <stddef.h>

#include "ts_error.h"

typedef enum { EXEC_ACT_GELU, EXEC_ACT_SWIGLU } exec_act;
typedef enum { EXEC_NORM_LAYERNORM, EXEC_NORM_RMSNORM } exec_norm;

typedef struct {
  int vocab, hidden, heads, ffn, layers;
  int seq, batch; /* tokens per sequence, sequences per micro-batch */
  exec_act act;
  exec_norm norm;
  double norm_eps;
  int kv_heads; /* key/value heads (grouped-query attention); 0 means heads */
  /* Not the model's: how the GPU executor cuts it into pipeline chunks (model
   * chunks per stage, interleaved 1F1B; 0 or 1: one). The reference ignores it. */
  int vpp;
  /* Also the executor's: the recomputation its program runs, which lets it
   * share activations between layers (0 none; 1 selective: one softmax
   * probability buffer for all layers; 2 full: everything but each layer's
   * input shared, recomputed before the backward). The reference ignores it. */
  int recompute;
  /* Added for the zoo's models (all zero: the GPT-style model above). */
  double rope_theta;   /* > 0: rotary position embeddings with this base, and no wpe */
  double rope_factor;  /* > 0: Llama 3.1 scaling of the RoPE frequencies (HF rope_type "llama3") */
  double rope_low_freq, rope_high_freq; /* its low_freq_factor, high_freq_factor */
  int rope_orig_max;   /* its original_max_position_embeddings */
  int qkv_bias;        /* a bias on the qkv GEMM */
  int linear_bias;     /* biases on attn_out, fc1 and fc2 */
  int untied;          /* an output weight lm_head [vocab x hidden] of its own */
  /* Mixture of experts (all zero: dense). Layers l >= dense_layers replace
   * the FFN by the MoE block (exec_ref_moe.c): router logits = n2 . router
   * [h x experts]; each token's top_k experts (largest logits, ties to the
   * lower index) weighted by the softmax over the chosen logits (Mixtral,
   * Qwen3: the softmax over all experts renormalised over the top_k); the
   * token's output is the weighted sum of its experts' FFNs (act as above,
   * width expert_ffn), plus a shared FFN of width shared_ffn on every token
   * (0: none). Expert e's weights are rows [e h, (e+1) h) of expert_fc1
   * [experts h x (1 or 2) expert_ffn] and [e expert_ffn, (e+1) expert_ffn)
   * of expert_fc2 [experts expert_ffn x h]. No linear biases with experts. */
  int experts, top_k, expert_ffn, shared_ffn, dense_layers;
  /* DeepSeek-V3's router (router_sigmoid 0: the softmax above). Scores
   * s = sigmoid(logits); the choice by s + b (b: router_bias [layers x
   * experts], NULL: zeros; no gradient), group-limited when router_groups >
   * 0 (experts in router_groups equal groups, a group's score the sum of its
   * top_k / router_group_topk largest s + b, the router_group_topk best
   * groups kept, ties to the lower group; the top_k among their experts);
   * the weights s_j / (sum of the chosen s + 1e-20) (top_k > 1; s_1 when
   * top_k = 1) times router_scale (0: 1). router_bias_rate: the executor's
   * bias update per step (Megatron-LM's moe_router_bias_update_rate; 0: the
   * bias stays); the reference takes the bias as given. */
  int router_sigmoid, router_groups, router_group_topk;
  double router_scale, router_bias_rate;
  const double *router_bias;
  /* The sigmoid router's choices given from outside, [layers x tokens x top_k] (a dense layer's rows unread;
   * NULL: the reference chooses): each token goes to these experts, its weights from their scores as above. A
   * check routes the float64 reference as the BF16 executor routed, so that a near-tie the two round to
   * different sides moves no whole rows; router_choice_out (NULL: none) receives the reference's own choices in
   * the same layout, to count the tokens routed otherwise. */
  const int *router_choice;
  int *router_choice_out;
  /* Qwen3's attention (both zero: hidden / heads, no QK norm): head_dim > 0
   * sets d (Q heads x d wide, attn_out [heads d x hidden]); qk_norm adds the
   * QK norm above and its two weights per layer. */
  int head_dim, qk_norm;
  /* Multi-head latent attention (all zero: none; kv_lora > 0 turns it on, see above): the query and
   * key/value latent ranks, the query/key head's non-rotated and rotated dimensions, the value head's. */
  int q_lora, kv_lora, qk_nope, qk_rope, v_head;
} exec_ref_config;

/* Whether c has multi-head latent attention. */
static inline int exec_ref_is_mla(const exec_ref_config *c) { return c->kv_lora > 0; }

/* Whether layer l of c is a mixture-of-experts layer. */
static inline int exec_ref_layer_is_moe(const exec_ref_config *c, int l) {
  return c->experts > 0 && l >= c->dense_layers;
}

/* RoPE inverse frequencies of head dimension d (d / 2 values), scaling included. */
void exec_ref_rope_inv_freq(const exec_ref_config *c, int d, double *inv_freq);
/* Rotates each of `heads` heads of d columns at x (a row) by position pos;
 * inverse: by -pos (the backward, the rotation's transpose). */
void exec_ref_rope_row(double *x, int heads, int d, const double *inv_freq, int pos, int inverse);

/* Key/value heads of c (heads unless grouped-query attention), the head
 * dimension, the query width (heads x head_dim) and the qkv width: the query
 * columns, then kv_heads x head_dim key and value columns. */
static inline int exec_ref_kv_heads(const exec_ref_config *c) { return c->kv_heads > 0 ? c->kv_heads : c->heads; }
static inline int exec_ref_head_dim(const exec_ref_config *c) {
  if (exec_ref_is_mla(c)) return c->qk_nope + c->qk_rope; /* the query/key head */
  return c->head_dim > 0 ? c->head_dim : c->hidden / c->heads;
}
/* The value head's dimension (the head dimension but with MLA) and the attention output's width. */
static inline int exec_ref_v_dim(const exec_ref_config *c) {
  return exec_ref_is_mla(c) ? c->v_head : exec_ref_head_dim(c);
}
static inline int exec_ref_attn_cols(const exec_ref_config *c) { return c->heads * exec_ref_v_dim(c); }
static inline int exec_ref_q_cols(const exec_ref_config *c) { return c->heads * exec_ref_head_dim(c); }
static inline int exec_ref_qkv_cols(const exec_ref_config *c) {
  return exec_ref_q_cols(c) + exec_ref_kv_heads(c) * (exec_ref_head_dim(c) + exec_ref_v_dim(c));
}
/* RoPE's dimension: the head dimension, or MLA's rope part. */
static inline int exec_ref_rope_dim(const exec_ref_config *c) {
  return exec_ref_is_mla(c) ? c->qk_rope : exec_ref_head_dim(c);
}

/* One named tensor inside the flat parameter array. */
typedef enum {
  EXEC_T_WTE, EXEC_T_WPE, EXEC_T_LN1_G, EXEC_T_LN1_B, EXEC_T_QKV, EXEC_T_ATTN_OUT,
  EXEC_T_LN2_G, EXEC_T_LN2_B, EXEC_T_FC1, EXEC_T_FC2, EXEC_T_LNF_G, EXEC_T_LNF_B,
  EXEC_T_QKV_B, EXEC_T_ATTN_OUT_B, EXEC_T_FC1_B, EXEC_T_FC2_B, EXEC_T_LM_HEAD,
  /* MoE layers (in place of fc1, fc2): router, the experts' stacked FFN weights, the shared FFN */
  EXEC_T_ROUTER, EXEC_T_EXPERT_FC1, EXEC_T_EXPERT_FC2, EXEC_T_SHARED_FC1, EXEC_T_SHARED_FC2,
  /* the QK norm's weights (qk_norm), [1 x head_dim] each, after qkv [qkv.b] */
  EXEC_T_Q_NORM, EXEC_T_K_NORM,
  /* multi-head latent attention (kv_lora > 0), in place of qkv: q_a [h x q_lora], q_a_norm [1 x q_lora],
   * q_b [q_lora x heads (nope + rope)], kv_a [h x (kv_lora + rope)], kv_a_norm [1 x kv_lora],
   * kv_b [kv_lora x heads (nope + v)] */
  EXEC_T_Q_A, EXEC_T_Q_A_NORM, EXEC_T_Q_B, EXEC_T_KV_A, EXEC_T_KV_A_NORM, EXEC_T_KV_B,
} exec_tensor_kind;

typedef struct {
  char name[32];          /* "layer1.fc2", "wte", ... */
  exec_tensor_kind kind;
  int layer;              /* -1 for tensors outside the layers */
  size_t offset, rows, cols; /* in elements; vectors have rows = 1 */
} exec_tensor;

#define EXEC_REF_MAX_TENSORS 512

/* Checks the configuration ("field: reason" in e). */
int exec_ref_config_check(const exec_ref_config *c, ts_err *e);

/* Fills t[] (cap entries) with the tensors in flat order; returns their count,
 * and the total parameter count in *total. Norm biases are absent for RMSNorm,
 * wpe for RoPE models, linear biases and lm_head unless the model has them.
 * Order: wte [wpe] then per layer ln1.g [ln1.b] qkv [qkv.b] [q_norm k_norm] (MLA: q_a
 * q_a_norm q_b kv_a kv_a_norm kv_b in place of qkv .. k_norm) attn_out
 * [attn_out.b] ln2.g [ln2.b] fc1 [fc1.b] fc2 [fc2.b] (an MoE layer: router
 * expert_fc1 expert_fc2 [shared_fc1 shared_fc2] after ln2), then lnf.g
 * [lnf.b] [lm_head]. */
int exec_ref_tensors(const exec_ref_config *c, exec_tensor *t, int cap, size_t *total);

/* Index in that list of a tensor (layer: its layer, -1 outside the layers),
 * or -1 when the model has no such tensor. */
int exec_ref_tensor_index(const exec_ref_config *c, int layer, exec_tensor_kind kind);
/* The output layer's weight: lm_head when untied, else wte (index 0). */
int exec_ref_head_tensor(const exec_ref_config *c);

/* Fills params with a fixed-seed initialisation (normal(0, 0.02) weights,
 * output projections scaled by 1/sqrt(2 layers), the router normal(0,
 * 2/sqrt(hidden)) so that the logits of a normed row spread with std ~2 and
 * near-ties in the top-k (where BF16 rounding could flip a routing choice
 * between two implementations) are rare, norm gains 1, norm biases 0,
 * linear biases normal(0, 0.02) so that a missing bias add shows). When
 * round_bf16 is set every value is rounded to the nearest bfloat16, so a BF16
 * implementation starts from exactly the same weights. */
void exec_ref_init(const exec_ref_config *c, unsigned long long seed, int round_bf16, double *params);

/* Synthetic tokens and next-token targets in [0, vocab), batch*seq each. */
void exec_ref_tokens(const exec_ref_config *c, unsigned long long seed, int *tokens, int *targets);

/* One token's routing as the MoE block has it: the top_k experts of its E
 * logits (idx, descending), their weights w, and sel the chosen sigmoid
 * scores (softmax router: sel = w). Its backward: dlogit [experts] (zeroed
 * here) from dw [top_k], the gradient of w. */
void exec_ref_moe_route(const exec_ref_config *c, const double *logit, const double *bias, int *idx, double *w,
                        double *sel);
void exec_ref_moe_route_bwd(const exec_ref_config *c, const int *idx, const double *w, const double *sel,
                            const double *dw, double *dlogit);

/* Mean cross-entropy loss; when grads is not NULL, also its gradient with
 * respect to every parameter (grads has the size of params, overwritten).
 * Returns 0, or -1 with e on allocation failure. */
int exec_ref_loss_grad(const exec_ref_config *c, const double *params, const int *tokens, const int *targets,
                       double *loss, double *grads, ts_err *e);

/* Nearest bfloat16 value (round to nearest even), as a double. */
double exec_ref_round_bf16(double x);

#endif

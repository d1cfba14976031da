/* model.h — a transformer model and the ops of one of its decoder layers.
 *
 * Plain C, no CUDA, no SimGrid: the simulator and the GPU runtime both derive
 * shapes, FLOPs, bytes, parameters and activation memory from here, so every
 * formula exists once. Sizes are per GPU for a given tensor-parallel shard. */
#ifndef MODEL_H
#define MODEL_H

#include <stdbool.h>

#include "ts_error.h"

typedef enum { MODEL_ACT_GELU, MODEL_ACT_SWIGLU } model_activation;
typedef enum { MODEL_NORM_LAYERNORM, MODEL_NORM_RMSNORM } model_norm;
typedef enum { MODEL_POS_LEARNED, MODEL_POS_ROPE } model_position;
/* Mixture of experts (added): how the router scores experts (Mixtral, Qwen3:
 * softmax over the experts; DeepSeek-V3: sigmoid with a bias that balances
 * the load, no auxiliary loss). No count depends on it. */
typedef enum { MODEL_ROUTER_SOFTMAX, MODEL_ROUTER_SIGMOID } model_router;
/* Attention kind (added): grouped-query (every dense model) or DeepSeek's
 * multi-head latent attention (low-rank Q and KV projections). */
typedef enum { MODEL_ATTN_GQA, MODEL_ATTN_MLA } model_attention;

typedef struct {
  char name[64];
  char family[32];
  int layers, hidden, heads, kv_heads, ffn_hidden, vocab, max_seq;
  model_activation activation;
  model_norm norm;
  model_position position;
  bool tied_embeddings;
  bool qkv_bias;    /* Qwen2.5 has a bias on Q, K, V */
  bool linear_bias; /* GPT-3 has biases on every linear layer */
  /* Added after the first contract (optional in the file; they do not change
   * any count, they make a model file a faithful copy of its configuration). */
  double rope_theta; /* RoPE base (0 for learned positions) */
  double norm_eps;   /* epsilon of the norms */
  /* Added with mixture-of-experts support (all optional; zero = dense, GQA). */
  int head_dim_override; /* "head_dim": Qwen3 uses 128 where hidden/heads = 64; 0 = hidden/heads */
  int experts;           /* "experts": routed experts per MoE layer; 0 = a dense model */
  int top_k;             /* "top_k": experts each token is routed to */
  int expert_ffn_hidden; /* "expert_ffn_hidden": FFN width of one expert */
  int shared_experts;    /* "shared_experts": experts every token goes through (width shared x expert_ffn) */
  int dense_layers;      /* "dense_layers": the first layers keep a dense FFN of ffn_hidden (DeepSeek-V3: 3) */
  model_router router;   /* "router": softmax or sigmoid */
  /* Added (DeepSeek-V3's router, Megatron-LM's --moe-router-* names; all optional, the defaults route as
   * before): group-limited top-k (experts in router_num_groups equal groups; a group's score the sum of
   * its top top_k / router_group_topk; the router_group_topk best groups kept; 0: no groups), the combine
   * weights times router_topk_scaling_factor (1: none), and the aux-loss-free balancing bias (sigmoid only:
   * a per-expert bias added to the scores for the choice alone, moved by router_bias_update_rate x
   * sign(mean load - load) after each step). The simulator's router op costs do not depend on them. */
  int router_num_groups, router_group_topk;
  double router_topk_scaling_factor; /* 0 in a zeroed struct means 1 */
  bool router_expert_bias;
  double router_bias_update_rate;
  model_attention attention; /* "attention": gqa or mla */
  int q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim; /* MLA only */
  /* Optional "rope_scaling" of Llama 3.1 (rope_type "llama3"); rope_factor 0: none.
   * Changes the rotation's frequencies only, no count. */
  double rope_factor, rope_low_freq, rope_high_freq;
  int rope_orig_max; /* original_max_position_embeddings */
  /* Optional "qk_norm" (Qwen3; Megatron-LM's qk_layernorm): an RMSNorm with a learned weight of
   * head_dim on every head of Q and of K, after the QKV projection and before RoPE, eps = norm_eps.
   * Layer ops q_norm and k_norm; 2 x head_dim parameters per layer. GQA models only. */
  bool qk_norm;
} model_config;

/* Whether the model has routed experts, and whether a layer is an MoE layer. */
static inline bool model_is_moe(const model_config *m) { return m->experts > 0; }
static inline bool model_layer_is_moe(const model_config *m, int layer) {
  return m->experts > 0 && layer >= m->dense_layers;
}

/* Folder of the model zoo: $TACOSIM_MODELS_DIR when set, else the one compiled in. */
const char *model_zoo_dir(void);
/* hidden / heads. */
int model_head_dim(const model_config *m);
/* Vocabulary rows one GPU holds: padded as Megatron-LM does, to a multiple of
 * 128 * tp, then split across tp. */
long long model_vocab_per_gpu(const model_config *m, int tp);

/* Loads a model file. `name_or_path` is a path to a .json file, or a bare
 * name looked up as `<models_dir>/<name>.json` (models_dir NULL: the
 * directory compiled in as TACOSIM_MODELS_DIR). Checks every field. */
int model_load(const char *name_or_path, const char *models_dir, model_config *m, ts_err *e);
int model_from_json_text(const char *text, unsigned long len, const char *what, model_config *m, ts_err *e);

/* How one layer is cut across GPUs. */
typedef struct {
  int tp;                 /* tensor-parallel degree */
  bool sequence_parallel; /* Megatron SP: norms/dropout on seq/tp tokens, AG/RS instead of AR */
  int micro_batch;        /* sequences per micro-batch */
  int seq;                /* tokens per sequence */
  /* Added (MoE): expert-parallel degree and expert tensor-parallel degree
   * (0: 1 and tp). Tokens enter an MoE layer sequence-split (tp > 1 needs
   * SP), are dispatched over ep ranks and gathered over etp ranks, so an
   * expert GEMM sees micro x seq / tp x top_k x etp rows on average. */
  int ep, etp;
  /* Added (MoE inference): the MoE layer's tokens are every TP rank's (no SP; how vLLM, SGLang and
   * TensorRT-LLM serve an MoE model under TP): each rank runs all of them through its 1/etp slice of
   * each expert's FFN, so an expert GEMM sees tokens x top_k rows (not x etp: nothing is gathered),
   * and the layer's all-reduce after fc2 sums the slices. tp > 1 without SP is allowed only so. */
  bool moe_tokens_replicated;
  /* Added: no hidden dropout (stored inverted so that a zeroed shard keeps
   * Megatron-LM's default 0.1): true drops the byte mask of the two residual
   * ops (bytes forward and backward) and of the activations held; a plan's
   * "hidden_dropout" 0, the executor's plans, inference. */
  bool no_hidden_dropout;
} model_shard;

typedef enum {
  MODEL_OP_GEMM,      /* a linear layer: out[m x n] = in[m x k] . W[k x n] */
  MODEL_OP_ATTENTION, /* fused attention core (QK^T, softmax, .V) */
  MODEL_OP_NORM,      /* LayerNorm or RMSNorm */
  MODEL_OP_ELEMENTWISE, /* activation, bias, dropout, residual add */
  MODEL_OP_EMBEDDING,
  MODEL_OP_LOGITS_LOSS, /* output GEMM is a MODEL_OP_GEMM; this is the softmax cross-entropy */
} model_op_kind;

typedef enum {
  MODEL_PAR_NONE,   /* replicated (or sequence-split under SP) */
  MODEL_PAR_COLUMN, /* output features split across TP: QKV, FC1 (its input needs the full activation) */
  MODEL_PAR_ROW,    /* input features split across TP: attention output projection, FC2 (output needs a reduction) */
  MODEL_PAR_EXPERT, /* (added) routed-expert op: experts split over EP, each expert's FFN over expert TP */
} model_parallel;

/* Which layers of an MoE model an op belongs to (added; dense models: all). */
enum { MODEL_LAYERS_ALL = 0, MODEL_LAYERS_MOE = 1, MODEL_LAYERS_DENSE = 2 };

typedef struct {
  char name[24]; /* "ln1", "qkv", "attn", "attn_out", "ln2", "fc1", "act", "fc2", ... */
  model_op_kind kind;
  model_parallel parallel;
  long long m, n, k;          /* GEMM forward shape on one GPU (m = tokens) */
  double flops_fwd;           /* on one GPU */
  double flops_bwd;           /* dgrad + wgrad (GEMMs: 2x forward); attention: 2.5x, the FLOPs a
                                 fused kernel executes as it recomputes QK^T (model FLOPs count 2x) */
  double bytes_fwd, bytes_bwd;/* device-memory traffic, for memory-bound ops */
  double params;              /* parameters held on one GPU */
  /* Added (MoE): */
  unsigned char layers_kind;  /* MODEL_LAYERS_*: an op of every layer, of MoE layers only, of dense layers only */
  unsigned char expert;       /* 1: routed-expert weights (sharded over EP, gradients reduced over expert DP) */
  int groups;                 /* a grouped GEMM: this many experts' GEMMs of m / groups rows each; 0 = plain */
} model_op;

/* Whether op runs in layer `layer` of m (dense layers of an MoE model skip
 * the MoE ops and the reverse). */
static inline bool model_op_in_layer(const model_config *m, const model_op *op, int layer) {
  if (op->layers_kind == MODEL_LAYERS_ALL) return true;
  return (op->layers_kind == MODEL_LAYERS_MOE) == model_layer_is_moe(m, layer);
}

#define MODEL_MAX_LAYER_OPS 32

/* Checks that a shard fits the model: tp >= 1 divides heads, kv_heads and
 * ffn_hidden; micro_batch >= 1; 1 <= seq <= max_seq; under sequence
 * parallelism tp divides seq. Messages name the shard field ("tp", "seq"...). */
int model_shard_check(const model_config *m, const model_shard *s, ts_err *e);

/* Fills ops[] with one decoder layer's ops in forward order on one GPU;
 * returns their count or -1 (with e) if the shard does not divide the model.
 * Order: ln1 qkv [q_norm k_norm] [rope] attn attn_out attn_residual ln2 fc1
 * act fc2 mlp_residual ("rope" only for RoPE models, q_norm and k_norm only
 * with qk_norm, so look ops up by name). */
int model_layer_ops(const model_config *m, const model_shard *s, model_op *ops, int cap, ts_err *e);

/* The forward FLOPs model_layer_ops counts for the attention of `tokens` query rows over sequences of `seq`
 * keys with q_width query columns (query heads x head dim) on one GPU: Q K^T and P V over the whole
 * seq x seq square (the model-FLOP convention; a causal kernel does half). The "attn" op of a non-MLA
 * layer, and the x of the calibration's prefill attention tables (`tacorun calibrate-infer` keys each
 * point by that op's FLOPs). */
static inline double model_attention_fwd_flops(long long tokens, long long seq, long long q_width) {
  return 4.0 * (double)tokens * (double)seq * (double)q_width;
}

/* The device-memory bytes the inference executor's prefill attention moves (infer_prefill_attention in
 * runtime/infer/infer_model.c, the program `tacorun calibrate-infer` times into the "attention_prefill"
 * tables): q_heads query heads of one sequence each, s tokens, head dimension d, `group` query heads per
 * KV head, every tensor BF16. Per query head: Q (s x d) read by Q K^T; the s x s scores written by Q K^T
 * (the whole square), read and written by the causal softmax (rt_softmax_causal_fwd: whole rows, the
 * masked part written as zeros; its three passes over a row count once, the row stays on chip) and read
 * by P V; the output (s x d) written by P V, then read and written by the copy from head-major to
 * token-major rows: 4 s^2 + 4 s d elements, 8 s^2 + 8 s d bytes. Per KV head (q_heads / group): K and V
 * (s x d each) read once (a pair's query heads are the rows of one GEMM), 4 s d bytes. */
double model_prefill_attention_bytes(long long d, long long s, double q_heads, double group);
/* The same for the op of `flops` (model_attention_fwd_flops; q_heads = flops / model_attention_fwd_flops(s,
 * s, d), the batch x heads a FLOP-keyed table varies along). */
double model_prefill_attention_bytes_at(long long d, long long s, double flops, double group);

/* Ops outside the decoder layers, on one GPU: the embedding lookup (first
 * pipeline stage) and then the final norm, the logits GEMM (column-parallel
 * over the padded vocabulary) and the softmax cross-entropy (last stage). */
int model_embedding_ops(const model_config *m, const model_shard *s, model_op *ops, int cap, ts_err *e);
int model_output_ops(const model_config *m, const model_shard *s, model_op *ops, int cap, ts_err *e);

/* Bytes of the activation tensor [micro_batch * seq (/tp under SP) x hidden] in bf16:
 * the size of each TP collective in a layer and of each pipeline send. */
double model_activation_tensor_bytes(const model_config *m, const model_shard *s);

/* Whole-model parameter counts (not sharded). model_params_per_layer: of
 * the layer kind most layers are (MoE layers in an MoE model). */
double model_params_total(const model_config *m);
double model_params_per_layer(const model_config *m);
/* Parameters one token goes through (added): every non-expert parameter,
 * top_k routed experts and the shared experts of each MoE layer, and both
 * embeddings (as Mixtral's 12.9B and Qwen3-235B's 22B count them). Equals
 * model_params_total for dense models. */
double model_params_active(const model_config *m);
/* Model FLOPs per token of a forward pass at sequence length seq (added):
 * the GEMMs a token goes through (router, top_k experts, shared experts)
 * and its attention (full square, as model_flops_per_iteration counts it). */
double model_flops_per_token_fwd(const model_config *m, int seq);
double model_params_embedding(const model_config *m); /* input (+ output if untied) embeddings */

/* Model FLOPs of one training iteration: the GEMMs a token goes through and
 * its attention as a full square, forward + backward = 3 x forward (Megatron-LM's
 * rule for dense GEMMs; its own count, causal attention and MoE as the
 * ModelZoo prints it, is model_flops_megatron_lm); recompute adds one more
 * forward of the layers. What tacosim's TFLOP/s and MFU divide. */
double model_flops_per_iteration(const model_config *m, long long global_batch, int seq, bool recompute);
/* Narayanan et al. SC'21 closed form (GPT: 96 B s l h^2 (1 + s/6h + V/16lh)), for tests. */
double model_flops_megatron_closed_form(const model_config *m, long long global_batch, int seq, bool recompute);

/* The count Megatron-LM's training loop prints as TFLOP/s (its
 * num_floating_point_operations): GQA- and SwiGLU-aware, causal attention
 * counted as half the square, vocabulary padded to a multiple of 128 * tp,
 * recomputation not counted. For GPT it is 72 B s l h^2 (1 + s/12h + V/12lh),
 * which is how DESIGN.md's "294 TFLOP/s by Megatron's count" was computed.
 * MoE and MLA models (added): the same rules on the GEMMs a token goes
 * through (top_k + shared experts; MLA's own projections), router not
 * counted; it reproduces the 167 TFLOP/s per GPU that the Megatron-MoE-ModelZoo
 * table prints for Qwen3-235B-A22B at 29.0 s per step (tests/test_moe.c). */
double model_flops_megatron_lm(const model_config *m, long long global_batch, int seq, int tp);

typedef enum { MODEL_RECOMPUTE_NONE, MODEL_RECOMPUTE_SELECTIVE, MODEL_RECOMPUTE_FULL } model_recompute;

/* Activation memory one layer keeps for backward, per micro-batch, on one GPU
 * (Korthikanti et al. 2022, bf16): s.b.h.(34 + 5as/h) for GPT without TP;
 * with TP, 10 sbh stays whole and the rest divides by t unless sequence
 * parallelism divides all of it; selective recompute drops the 5as/h term;
 * full recompute keeps only the layer input (2sbh, /t under SP). Generalized
 * to GQA and SwiGLU by counting the same tensors at their real widths.
 * Negative when the shard does not fit the model (see model_shard_check). */
double model_activation_bytes_per_layer(const model_config *m, const model_shard *s, model_recompute r);

#endif

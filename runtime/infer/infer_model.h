/* infer_model.h — a Llama-style decoder (RMSNorm, RoPE, grouped-query
 * attention, SwiGLU, untied output head) served with tensor parallelism on
 * one GPU of a TP group: prefill of the prompts into a BF16 or FP8 (E4M3 with
 * per-position scales, infer_kv8.h) KV cache, then
 * decode steps of one token per sequence, greedy sampling. Qwen-style
 * variants: a QKV bias (qkv_bias), the QK norm (qk_norm, Qwen3: an RMSNorm of
 * head_dim with its own weight over each query and each key head, after the
 * QKV projection and its bias, before RoPE) and head_dim other than hidden /
 * heads (Q heads x head_dim wide, the output projection's input as wide).
 *
 * Megatron-style split: QKV and FC1 column-parallel, attention output and FC2
 * row-parallel with a TP all-reduce after each (under the plan's codec and the
 * per-size rule of plan_infer_policy.h), vocabulary-parallel embedding (plain
 * all-reduce) and output head (all-gather of the logits). Weights are synthetic
 * (a fixed seed); each GPU's shard is cut from the full tensor, so TP = n and
 * TP = 1 hold the same model. */
#ifndef INFER_MODEL_H
#define INFER_MODEL_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "coll_taco.h"
#include "exec_gemm.h"
#include "model.h"
#include "plan.h"
#include "ts_error.h"

/* How one TP all-reduce size travels (the outcome of the per-size rule). */
typedef enum { INFER_AR_PLAIN, INFER_AR_TACO, INFER_AR_CAAT, INFER_AR_TACO_CAAT } infer_ar_mode;
const char *infer_ar_mode_name(infer_ar_mode m);

typedef struct {
  void *ln1, *wqkv, *wo, *ln2, *w1, *w2;
  void *bqkv; /* the QKV bias of this GPU's columns (Q | K | V), or NULL (model without qkv_bias) */
  void *qn, *kn; /* the QK norm's weights [head_dim] (qk_norm: Qwen3), or NULL */
} infer_layer_w;

/* Compressed layer all-reduces between two NaN/Inf checks that get a counter of their own. */
#define INFER_NF_CALLS 16384

typedef struct {
  model_config mc;
  int layers, tp, rank;
  int hl, kvl, d, fl; /* heads, KV heads, head_dim, FFN width on this GPU */
  long long vl;       /* vocabulary rows on this GPU (padded as Megatron-LM does) */
  int batch, max_prompt;
  long long max_seq;  /* cache positions per sequence */
  infer_layer_w *w;
  void *emb, *lnf, *head;
  void **kc, **vc;    /* per layer [batch x kvl x max_seq x d]: BF16, or E4M3 codes (kv_fp8) */
  float **ks, **vs;   /* kv_fp8: per layer [batch x kvl x max_seq] scales of K and V */
  void *kst, *vst;    /* kv_fp8 with prefill: the BF16 K and V of one layer's prompts [batch x kvl x max_prompt x d],
                         what the prefill attention reads */
  int kv_fp8;
  double kv_bytes;    /* bytes of the KV cache allocated (all layers, codes and scales) */
  /* activations, sized for a prefill of batch x max_prompt tokens */
  void *x, *xn, *qkv, *qh, *oh, *attn, *proj, *f, *act;
  float *rstd;
  void *scores;
  size_t scores_bytes;
  void *partial;
  size_t partial_bytes;
  int decode_attn;    /* infer_model_opts */
  void *last, *lastn, *logits, *logits_all; /* logits_all: the gathered logits (= logits at TP 1) */
  void *amax;                               /* greedy sampling's partials (infer_argmax) */
  int32_t *tok;       /* [batch] the sampled tokens */
  exec_gemm *gemm;
  cudaStream_t stream;
  coll_team *team;    /* NULL when tp == 1 */
  plan_codec codec;
  infer_ar_mode ar_mode[2]; /* [0] prefill layer all-reduce, [1] decode layer all-reduce */
  /* NaN/Inf that the TACO encodes of the layer all-reduces met (they send them
   * as zeros): one counter per call since the last infer_model_check_finite,
   * with where it was (position, layer, which); calls past INFER_NF_CALLS
   * count in the team's counter. */
  taco_nonfinite *nf_calls;
  struct infer_nf_site {
    long long pos;
    int layer, fc2;
  } nf_site[INFER_NF_CALLS];
  int nf_used;
  struct infer_nf_site at; /* the all-reduce infer_forward is at */
  struct infer_prof *prof;  /* NULL, or the per-op profile infer_forward marks (infer_prof.h); set by the caller */
} infer_model;

typedef struct {
  int batch, max_prompt;
  long long max_seq;
  unsigned long long seed;
  size_t scores_budget; /* bytes of prefill attention scores at once (0: PLAN_INFER_SCORES_BUDGET, 1 GiB) */
  int decode_attn;      /* 5, 4, 3, 2: infer_decode_attention5, 4, 3, 2 (infer_decode.h); else
                           infer_decode_attention */
  int kv_fp8;           /* 1: FP8 KV cache (needs decode_attn 2 to 5: their FP8 variants); 0: BF16 */
} infer_model_opts;

/* team: the TP group's coll team (nlocal 1) or NULL for tp 1; stream is the
 * team's stream. Checks the model is one this executor runs (RMSNorm, SwiGLU,
 * RoPE, a QKV bias or none, the QK norm or none, head_dim 64 or 128 whatever hidden / heads is), naming
 * the field otherwise. */
int infer_model_init(infer_model *m, const model_config *mc, int layers, int tp, int rank, const infer_model_opts *o,
                     coll_team *team, cudaStream_t stream, ts_err *e);
void infer_model_free(infer_model *m);

/* Whether mc can run here; fails naming the unsupported field. */
int infer_model_supported(const model_config *mc, const char *file, ts_err *e);
/* 1 when decode attention VERSION (1, 2, 3; 0 means 1) is built for G query heads per KV head at HEAD_DIM. */
int infer_decode_groups_built(int version, int head_dim, int g);

/* One forward pass of `seq` tokens per sequence at positions pos0.. (seq > 1:
 * prefill, needs pos0 == 0; seq == 1: a decode step attending over pos0 + 1
 * cached positions), from tokens [batch x seq] (device, int32). Leaves the
 * gathered logits of each sequence's last token in m->logits_all and the
 * greedy next tokens in m->tok. Asynchronous on m->stream. */
int infer_forward(infer_model *m, const int32_t *tokens, int seq, long long pos0, ts_err *e);

/* Causal attention of a prompt of `seq` tokens (positions 0..seq-1 of the
 * caches): for each (sequence, KV head) pair the scores of its g query heads
 * as one GEMM of g x seq rows against the pair's keys, the causal softmax in
 * place, the product with the values; as many pairs at once as scores_bytes
 * holds (or fewer heads of one pair), so batch x heads x seq^2 is never
 * materialised at once. q, o_heads head-major [batch x hl x seq x d]; out
 * token-major [batch * seq x hl d]. `tacorun calibrate-infer` times this function. */
typedef struct {
  exec_gemm *gemm;
  void *stream;
  const void *q, *k_cache, *v_cache;
  void *o_heads, *out, *scores;
  size_t scores_bytes;
  int batch, hl, kvl, head_dim;
  long long seq, max_seq;
} infer_prefill_args;
int infer_prefill_attention(const infer_prefill_args *a, ts_err *e);

/* After the stream's work is done: fails naming the phase ("prefill", "decode
 * step"), the position, the layer and the all-reduce (attn_out or fc2) of the
 * first call whose TACO encode met NaN/Inf, and the count, as a NaN loss
 * stops training; resets the counters. */
int infer_model_check_finite(infer_model *m, ts_err *e);

/* One layer all-reduce of rows x hidden in place, the way `mode` says. */
int infer_allreduce(infer_model *m, void *buf, long long rows, infer_ar_mode mode, ts_err *e);

#endif

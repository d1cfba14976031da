/* infer_model.c — the inference model on one GPU of a TP group (see infer_model.h). */
#include "infer_model.h"
#include "infer_prof.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec_kernels.h"
#include "infer_decode.h"
#include "infer_kernels.h"
#include "plan_infer.h"
#include "rt_nccl.h"
#include "rt_ops.h"
#include "rt_ops_layer.h"

#define IM_TRY(x)                                                                                            \
  do {                                                                                                       \
    if ((x) != 0) return -1;                                                                                 \
  } while (0)
#define BF 2 /* bytes per bf16 */

const char *infer_ar_mode_name(infer_ar_mode m) {
  switch (m) {
  case INFER_AR_PLAIN: return "plain";
  case INFER_AR_TACO: return "taco";
  case INFER_AR_CAAT: return "caat";
  case INFER_AR_TACO_CAAT: return "taco+caat";
  }
  return "?";
}

int infer_model_supported(const model_config *mc, const char *file, ts_err *e) {
  if (model_is_moe(mc)) /* its layers would run as dense FFNs of ffn_hidden: not the model the simulator prices */
    return ts_fail(e, file, "model", "%s is a mixture-of-experts model; the inference executor runs dense models "
                   "(tacosim predicts MoE inference: sim/INFERENCE.md, \"MoE layers\")", mc->name);
  if (mc->norm != MODEL_NORM_RMSNORM)
    return ts_fail(e, file, "model", "%s uses LayerNorm; the inference executor runs RMSNorm models (Llama-style)",
                   mc->name);
  if (mc->activation != MODEL_ACT_SWIGLU)
    return ts_fail(e, file, "model", "%s uses GELU; the inference executor runs SwiGLU models (Llama-style)",
                   mc->name);
  if (mc->position != MODEL_POS_ROPE)
    return ts_fail(e, file, "model", "%s has learned positions; the inference executor runs RoPE models", mc->name);
  if (mc->rope_factor > 0)
    return ts_fail(e, file, "model", "%s has rope_scaling (Llama 3.1), which the inference executor does not run "
                   "(the training executor does)", mc->name);
  if (mc->linear_bias)
    return ts_fail(e, file, "model", "%s has biases on every linear layer (linear_bias), which the inference executor "
                   "omits (it runs the QKV bias only)", mc->name);
  if (mc->tied_embeddings)
    return ts_fail(e, file, "model", "%s ties its embeddings; the inference executor runs an untied output head",
                   mc->name);
  int d = model_head_dim(mc);
  if (d != 64 && d != 128)
    return ts_fail(e, file, "model", "%s has head_dim %d; decode attention is built for 64 and 128", mc->name, d);
  int g = mc->heads / mc->kv_heads;
  if (!infer_decode_groups_built(3, d, g))
    return ts_fail(e, file, "model", "%s has %d query heads per KV head at head_dim %d; decode attention v3 is built "
                   "for 1 to 8, 12 or 16 (head_dim 128) and 1, 2, 4, 6, 7, 8 or 16 (head_dim 64)", mc->name, g, d);
  return 0;
}

int infer_decode_groups_built(int version, int head_dim, int g) {
  if (version < 3) return g == 1 || g == 2 || g == 4 || g == 8 || g == 16;
  if (head_dim == 128) return (g >= 1 && g <= 8) || g == 12 || g == 16;
  return g == 1 || g == 2 || g == 4 || g == 6 || g == 7 || g == 8 || g == 16;
}

static int dmalloc(void **p, size_t bytes, const char *what, ts_err *e) {
  *p = NULL;
  if (bytes == 0) bytes = 16;
  cudaError_t ce = cudaMalloc(p, bytes);
  if (ce != cudaSuccess)
    return ts_fail_sys(e, "infer: cannot allocate %.3f GiB for %s: %s", bytes / 1073741824.0, what,
                       cudaGetErrorString(ce));
  return 0;
}

/* Copies a shard of a full row-major [rows x cols] tensor: columns
 * [c0, c0 + w) into dst at column dc0 of a [rows x dcols] tensor. */
static int copy_cols(void *dst, long long dcols, long long dc0, const void *src, long long cols, long long c0,
                     long long w, long long rows, cudaStream_t st, ts_err *e) {
  RT_CUDA(e, cudaMemcpy2DAsync((char *)dst + dc0 * BF, (size_t)dcols * BF, (const char *)src + c0 * BF,
                               (size_t)cols * BF, (size_t)w * BF, (size_t)rows, cudaMemcpyDeviceToDevice, st));
  return 0;
}

/* A full tensor of the TP = 1 model from (seed, id): uniform in [-scale, scale]. */
static int full_tensor(void *tmp, long long n, unsigned long long seed, int id, float scale, cudaStream_t st,
                       ts_err *e) {
  return rt_fill_random_bf16(tmp, n, seed * 1000003ULL + (unsigned long long)id, scale, st, e);
}

static int init_weights(infer_model *m, unsigned long long seed, ts_err *e) {
  const model_config *mc = &m->mc;
  const long long h = mc->hidden, d = m->d, H = mc->heads, KV = mc->kv_heads, F = mc->ffn_hidden;
  const long long hl = m->hl, kvl = m->kvl, fl = m->fl, r = m->rank, vfull = m->vl * m->tp;
  long long biggest = vfull * h;
  if ((H + 2 * KV) * d * h > biggest) biggest = (H + 2 * KV) * d * h;
  if (2 * F * h > biggest) biggest = 2 * F * h;
  void *tmp;
  IM_TRY(dmalloc(&tmp, (size_t)biggest * BF, "weight initialisation scratch", e));
  cudaStream_t st = m->stream;
  int rc = -1;
  /* vocabulary-parallel embedding and head: rows [r vl, (r+1) vl) of the full tables */
  if (full_tensor(tmp, vfull * h, seed, 1, 1.0f, st, e)) goto out;
  RT_CUDA(e, cudaMemcpyAsync(m->emb, (char *)tmp + r * m->vl * h * BF, (size_t)(m->vl * h) * BF,
                             cudaMemcpyDeviceToDevice, st));
  if (full_tensor(tmp, vfull * h, seed, 2, sqrtf(3.0f / h), st, e)) goto out;
  RT_CUDA(e, cudaMemcpyAsync(m->head, (char *)tmp + r * m->vl * h * BF, (size_t)(m->vl * h) * BF,
                             cudaMemcpyDeviceToDevice, st));
  if (infer_fill_bf16(m->lnf, h, 1.0f, st, e)) goto out;
  for (int l = 0; l < m->layers; l++) {
    infer_layer_w *w = &m->w[l];
    int id = 16 + 8 * l;
    if (infer_fill_bf16(w->ln1, h, 1.0f, st, e) || infer_fill_bf16(w->ln2, h, 1.0f, st, e)) goto out;
    /* the QK norm's weights (one head_dim row each, the same on every GPU): 1 + uniform in [-0.5, 0.5] */
    if (w->qn && (full_tensor(tmp, d, seed, id + 5, 0.5f, st, e) || infer_fill_bf16(w->qn, d, 1.0f, st, e) ||
                  rt_add(w->qn, tmp, w->qn, d, st, e) || full_tensor(tmp, d, seed, id + 6, 0.5f, st, e) ||
                  infer_fill_bf16(w->kn, d, 1.0f, st, e) || rt_add(w->kn, tmp, w->kn, d, st, e)))
      goto out;
    /* QKV [h x (H + 2 KV) d], columns Q | K | V; this GPU's heads of each */
    const long long qc = (H + 2 * KV) * d, qcl = (hl + 2 * kvl) * d;
    if (w->bqkv && (full_tensor(tmp, qc, seed, id + 4, 0.5f, st, e) ||
                    copy_cols(w->bqkv, qcl, 0, tmp, qc, r * hl * d, hl * d, 1, st, e) ||
                    copy_cols(w->bqkv, qcl, hl * d, tmp, qc, H * d + r * kvl * d, kvl * d, 1, st, e) ||
                    copy_cols(w->bqkv, qcl, (hl + kvl) * d, tmp, qc, (H + KV) * d + r * kvl * d, kvl * d, 1, st, e)))
      goto out;
    if (full_tensor(tmp, h * qc, seed, id, sqrtf(3.0f / h), st, e) ||
        copy_cols(w->wqkv, qcl, 0, tmp, qc, r * hl * d, hl * d, h, st, e) ||
        copy_cols(w->wqkv, qcl, hl * d, tmp, qc, H * d + r * kvl * d, kvl * d, h, st, e) ||
        copy_cols(w->wqkv, qcl, (hl + kvl) * d, tmp, qc, (H + KV) * d + r * kvl * d, kvl * d, h, st, e))
      goto out;
    /* attention output [H d x h]: this GPU's rows */
    if (full_tensor(tmp, H * d * h, seed, id + 1, sqrtf(3.0f / (H * d)), st, e)) goto out;
    RT_CUDA(e, cudaMemcpyAsync(w->wo, (char *)tmp + r * hl * d * h * BF, (size_t)(hl * d * h) * BF,
                               cudaMemcpyDeviceToDevice, st));
    /* FC1 [h x 2F], columns gate | up */
    if (full_tensor(tmp, h * 2 * F, seed, id + 2, sqrtf(3.0f / h), st, e) ||
        copy_cols(w->w1, 2 * fl, 0, tmp, 2 * F, r * fl, fl, h, st, e) ||
        copy_cols(w->w1, 2 * fl, fl, tmp, 2 * F, F + r * fl, fl, h, st, e))
      goto out;
    /* FC2 [F x h]: this GPU's rows */
    if (full_tensor(tmp, F * h, seed, id + 3, sqrtf(3.0f / F), st, e)) goto out;
    RT_CUDA(e, cudaMemcpyAsync(w->w2, (char *)tmp + r * fl * h * BF, (size_t)(fl * h) * BF, cudaMemcpyDeviceToDevice,
                               st));
  }
  RT_CUDA(e, cudaStreamSynchronize(st));
  rc = 0;
out:
  cudaFree(tmp);
  return rc;
}

/* count = 0, first_index = ULLONG_MAX in the counters used since the last reset. */
static int nf_reset(infer_model *m, ts_err *e) {
  const size_t pitch = sizeof(taco_nonfinite), w = sizeof(unsigned long long);
  int n = m->nf_used < INFER_NF_CALLS ? m->nf_used : INFER_NF_CALLS;
  m->nf_used = 0;
  if (n == 0) return 0;
  RT_CUDA(e, cudaMemset2DAsync(m->nf_calls, pitch, 0, w, (size_t)n, m->stream));
  RT_CUDA(e, cudaMemset2DAsync((char *)m->nf_calls + w, pitch, 0xff, w, (size_t)n, m->stream));
  return 0;
}

int infer_model_check_finite(infer_model *m, ts_err *e) {
  static taco_nonfinite host[INFER_NF_CALLS];
  const int n = m->nf_used < INFER_NF_CALLS ? m->nf_used : INFER_NF_CALLS;
  if (n > 0) {
    RT_CUDA(e, cudaMemcpyAsync(host, m->nf_calls, (size_t)n * sizeof *host, cudaMemcpyDeviceToHost, m->stream));
    RT_CUDA(e, cudaStreamSynchronize(m->stream)); /* the caller waited for the stream (rt_nccl_wait) */
  }
  IM_TRY(nf_reset(m, e));
  for (int i = 0; i < n; i++) {
    const struct infer_nf_site *s = &m->nf_site[i];
    if (host[i].count)
      return ts_fail_sys(e, "%s at position %lld: layer %d %s TP all-reduce: the TACO encode met %llu NaN/Inf values "
                            "(first at element %llu of the message; the codec sent them as zeros)",
                         s->pos == 0 ? "prefill" : "decode step", s->pos, s->layer, s->fc2 ? "fc2" : "attn_out",
                         host[i].count, host[i].first_index);
  }
  unsigned long long count = 0, first = 0;
  if (m->team && coll_team_nonfinite(m->team, &count, &first))
    return ts_fail_sys(e, "infer: reading the NaN/Inf count: %s", coll_last_error());
  if (count)
    return ts_fail_sys(e, "a TP all-reduce's TACO encode met %llu NaN/Inf values (first at element %llu of its "
                          "message; the codec sent them as zeros)", count, first);
  return 0;
}

int infer_model_init(infer_model *m, const model_config *mc, int layers, int tp, int rank, const infer_model_opts *o,
                     coll_team *team, cudaStream_t stream, ts_err *e) {
  memset(m, 0, sizeof *m);
  IM_TRY(infer_model_supported(mc, mc->name, e));
  if (mc->heads % tp || mc->kv_heads % tp || mc->ffn_hidden % tp)
    return ts_fail_sys(e, "infer: tp %d does not divide heads %d, kv_heads %d and ffn_hidden %d", tp, mc->heads,
                       mc->kv_heads, mc->ffn_hidden);
  m->mc = *mc;
  m->layers = layers, m->tp = tp, m->rank = rank;
  m->d = model_head_dim(mc);
  m->hl = mc->heads / tp, m->kvl = mc->kv_heads / tp, m->fl = mc->ffn_hidden / tp;
  m->vl = model_vocab_per_gpu(mc, tp);
  m->batch = o->batch, m->max_prompt = o->max_prompt, m->max_seq = o->max_seq;
  m->team = tp > 1 ? team : NULL;
  m->stream = stream;
  m->codec.kind = PLAN_CODEC_NONE;
  const long long h = mc->hidden, d = m->d, T = (long long)o->batch * o->max_prompt;
  const long long qcl = (m->hl + 2LL * m->kvl) * d;
  if (exec_gemm_create(&m->gemm, e)) return -1;
  m->w = calloc((size_t)layers, sizeof *m->w);
  m->kc = calloc((size_t)layers, sizeof *m->kc);
  m->vc = calloc((size_t)layers, sizeof *m->vc);
  m->ks = calloc((size_t)layers, sizeof *m->ks);
  m->vs = calloc((size_t)layers, sizeof *m->vs);
  if (!m->w || !m->kc || !m->vc || !m->ks || !m->vs) return ts_fail_sys(e, "infer: out of host memory");
  if (o->kv_fp8 && o->decode_attn < 2)
    return ts_fail_sys(e, "infer: the FP8 KV cache is read by decode attention v2 to v5 only (--decode-attention)");
  if (!infer_decode_groups_built(o->decode_attn, (int)m->d, m->hl / m->kvl))
    return ts_fail_sys(e, "infer: decode attention v%d is not built for %d query heads per KV head (v1, v2: powers of "
                       "2 up to 16)", o->decode_attn < 1 ? 1 : o->decode_attn, m->hl / m->kvl);
  m->kv_fp8 = o->kv_fp8;
  for (int l = 0; l < layers; l++) {
    infer_layer_w *w = &m->w[l];
    IM_TRY(dmalloc(&w->ln1, (size_t)h * BF, "weights", e));
    IM_TRY(dmalloc(&w->ln2, (size_t)h * BF, "weights", e));
    IM_TRY(dmalloc(&w->wqkv, (size_t)(h * qcl) * BF, "weights", e));
    if (mc->qkv_bias) IM_TRY(dmalloc(&w->bqkv, (size_t)qcl * BF, "weights", e));
    if (mc->qk_norm) {
      IM_TRY(dmalloc(&w->qn, (size_t)d * BF, "weights", e));
      IM_TRY(dmalloc(&w->kn, (size_t)d * BF, "weights", e));
    }
    IM_TRY(dmalloc(&w->wo, (size_t)(m->hl * d * h) * BF, "weights", e));
    IM_TRY(dmalloc(&w->w1, (size_t)(h * 2 * m->fl) * BF, "weights", e));
    IM_TRY(dmalloc(&w->w2, (size_t)(m->fl * h) * BF, "weights", e));
    size_t pos = (size_t)o->batch * m->kvl * o->max_seq, cache = pos * d * (o->kv_fp8 ? 1 : BF);
    IM_TRY(dmalloc(&m->kc[l], cache, "the KV cache", e));
    IM_TRY(dmalloc(&m->vc[l], cache, "the KV cache", e));
    m->kv_bytes += 2.0 * cache;
    if (o->kv_fp8) {
      IM_TRY(dmalloc((void **)&m->ks[l], pos * sizeof(float), "the KV cache scales", e));
      IM_TRY(dmalloc((void **)&m->vs[l], pos * sizeof(float), "the KV cache scales", e));
      m->kv_bytes += 2.0 * pos * sizeof(float);
    }
  }
  if (o->kv_fp8 && o->max_prompt > 1) {
    size_t stage = (size_t)o->batch * m->kvl * o->max_prompt * d * BF;
    IM_TRY(dmalloc(&m->kst, stage, "the prefill K/V stage", e));
    IM_TRY(dmalloc(&m->vst, stage, "the prefill K/V stage", e));
  }
  IM_TRY(dmalloc(&m->emb, (size_t)(m->vl * h) * BF, "weights", e));
  IM_TRY(dmalloc(&m->head, (size_t)(m->vl * h) * BF, "weights", e));
  IM_TRY(dmalloc(&m->lnf, (size_t)h * BF, "weights", e));
  IM_TRY(dmalloc(&m->x, (size_t)(T * h) * BF, "activations", e));
  IM_TRY(dmalloc(&m->xn, (size_t)(T * h) * BF, "activations", e));
  IM_TRY(dmalloc(&m->proj, (size_t)(T * h) * BF, "activations", e));
  IM_TRY(dmalloc(&m->qkv, (size_t)(T * qcl) * BF, "activations", e));
  IM_TRY(dmalloc(&m->qh, (size_t)(T * m->hl * d) * BF, "activations", e));
  IM_TRY(dmalloc(&m->oh, (size_t)(T * m->hl * d) * BF, "activations", e));
  IM_TRY(dmalloc(&m->attn, (size_t)(T * m->hl * d) * BF, "activations", e));
  IM_TRY(dmalloc(&m->f, (size_t)(T * 2 * m->fl) * BF, "activations", e));
  IM_TRY(dmalloc(&m->act, (size_t)(T * m->fl) * BF, "activations", e));
  IM_TRY(dmalloc((void **)&m->rstd, (size_t)T * sizeof(float), "activations", e));
  /* prefill attention scores: whole (sequence, KV head) pairs at once when they fit the budget */
  size_t budget = o->scores_budget ? o->scores_budget : PLAN_INFER_SCORES_BUDGET;
  size_t per_head = (size_t)o->max_prompt * o->max_prompt * BF;
  size_t need = per_head * (size_t)(m->hl / m->kvl);
  size_t gs = (size_t)(m->hl / m->kvl);
  while (gs > 1 && per_head * gs > budget) gs /= 2;
  m->scores_bytes = need <= budget ? budget - budget % need : per_head * gs;
  if (m->scores_bytes > per_head * (size_t)m->hl * o->batch) m->scores_bytes = per_head * (size_t)m->hl * o->batch;
  if (o->max_prompt > 1) IM_TRY(dmalloc(&m->scores, m->scores_bytes, "prefill attention scores", e));
  infer_attn_dims ad = {.batch = o->batch, .hl = m->hl, .kvl = m->kvl, .head_dim = m->d, .max_seq = o->max_seq};
  m->partial_bytes = 0;
  for (long long len = 1; len <= o->max_seq; len++) { /* the split count is not monotone in len */
    size_t b = o->decode_attn >= 3   ? infer_decode3_partial_bytes(&ad, len)
               : o->decode_attn == 2 ? infer_decode2_partial_bytes(&ad, len)
                                     : infer_decode_partial_bytes(&ad, len);
    if (b > m->partial_bytes) m->partial_bytes = b;
  }
  IM_TRY(dmalloc(&m->partial, m->partial_bytes, "decode attention partials", e));
  m->decode_attn = o->decode_attn;
  IM_TRY(dmalloc(&m->last, (size_t)(o->batch * h) * BF, "activations", e));
  IM_TRY(dmalloc(&m->lastn, (size_t)(o->batch * h) * BF, "activations", e));
  IM_TRY(dmalloc(&m->logits, (size_t)(o->batch * m->vl) * BF, "logits", e));
  if (tp > 1) IM_TRY(dmalloc(&m->logits_all, (size_t)(o->batch * m->vl * tp) * BF, "logits", e));
  else m->logits_all = m->logits; /* nothing to gather: sampling reads the GEMM's output */
  IM_TRY(dmalloc(&m->amax, infer_argmax_scratch_bytes(o->batch, tp, m->vl), "sampling partials", e));
  IM_TRY(dmalloc((void **)&m->tok, (size_t)o->batch * sizeof(int32_t), "tokens", e));
  IM_TRY(dmalloc((void **)&m->nf_calls, INFER_NF_CALLS * sizeof(taco_nonfinite), "NaN/Inf counters", e));
  m->nf_used = INFER_NF_CALLS;
  IM_TRY(nf_reset(m, e));
  return init_weights(m, o->seed, e);
}

void infer_model_free(infer_model *m) {
  if (m->w)
    for (int l = 0; l < m->layers; l++) {
      infer_layer_w *w = &m->w[l];
      cudaFree(w->ln1), cudaFree(w->ln2), cudaFree(w->wqkv), cudaFree(w->wo), cudaFree(w->w1), cudaFree(w->w2);
      cudaFree(w->bqkv), cudaFree(w->qn), cudaFree(w->kn);
      if (m->kc) cudaFree(m->kc[l]);
      if (m->vc) cudaFree(m->vc[l]);
      if (m->ks) cudaFree(m->ks[l]);
      if (m->vs) cudaFree(m->vs[l]);
    }
  free(m->w), free(m->kc), free(m->vc), free(m->ks), free(m->vs);
  cudaFree(m->kst), cudaFree(m->vst);
  void *bufs[] = {m->emb, m->head, m->lnf, m->x, m->xn, m->proj, m->qkv, m->qh, m->oh, m->attn, m->f, m->act,
                  m->rstd, m->scores, m->partial, m->last, m->lastn, m->logits,
                  m->logits_all != m->logits ? m->logits_all : NULL, m->amax, m->tok, m->nf_calls};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) cudaFree(bufs[i]);
  if (m->gemm) exec_gemm_destroy(m->gemm);
  memset(m, 0, sizeof *m);
}

static coll_opts opts_of(infer_ar_mode mode, const plan_codec *c) {
  coll_opts o = coll_opts_default();
  o.dtype = TACO_DTYPE_BF16;
  o.min_bytes = 0; /* the rule has already decided per size */
  o.codec = COLL_CODEC_NONE;
  if (mode == INFER_AR_TACO || mode == INFER_AR_TACO_CAAT) {
    o.codec = COLL_CODEC_TACO;
    o.taco.group = c->group;
    o.taco.fp8 = c->fp8 == PLAN_FP8_E5M2 ? TACO_FP8_E5M2 : TACO_FP8_E4M3;
  }
  return o;
}

int infer_allreduce(infer_model *m, void *buf, long long rows, infer_ar_mode mode, ts_err *e) {
  if (!m->team) return 0;
  const void *in = buf;
  void *out = buf;
  coll_opts o = opts_of(mode, &m->codec);
  if (o.codec == COLL_CODEC_TACO && m->nf_calls && m->nf_used < INFER_NF_CALLS) { /* a counter of its own */
    m->nf_site[m->nf_used] = m->at;
    o.nonfinite = m->nf_calls + m->nf_used++;
  }
  int rc;
  if (mode == INFER_AR_PLAIN || mode == INFER_AR_TACO)
    rc = coll_allreduce(m->team, &in, &out, (size_t)(rows * m->mc.hidden), &o);
  else
    rc = coll_caat_allreduce(m->team, &in, &out, (size_t)rows, (size_t)m->mc.hidden, m->codec.p, &o);
  if (rc) return ts_fail_sys(e, "infer: %s all-reduce of %lld rows: %s", infer_ar_mode_name(mode), rows,
                             coll_last_error());
  return 0;
}

static int gemm_nn(infer_model *m, long long M, long long N, long long K, const void *A, const void *B, void *C,
                   ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NN, M, N, K);
  return exec_gemm_run(m->gemm, &s, 1.f, A, B, 0.f, C, m->stream, e);
}

int infer_prefill_attention(const infer_prefill_args *a, ts_err *e) {
  const long long d = a->head_dim, g = a->hl / a->kvl, pairs = (long long)a->batch * a->kvl, S = a->seq;
  const size_t head_bytes = (size_t)S * S * BF;
  long long gs = g;
  while (gs > 1 && head_bytes * (size_t)gs > a->scores_bytes) gs /= 2;
  if (head_bytes > a->scores_bytes)
    return ts_fail_sys(e, "infer_prefill_attention: %zu bytes of scores do not hold one head of %lld x %lld",
                       a->scores_bytes, S, S);
  long long cp = gs < g ? 1 : (long long)(a->scores_bytes / (head_bytes * (size_t)g));
  if (cp < 1) cp = 1;
  if (cp > pairs) cp = pairs;
  const float scale = 1.0f / sqrtf((float)d);
  for (long long p0 = 0; p0 < pairs; p0 += cp) {
    long long nb = pairs - p0 < cp ? pairs - p0 : cp;
    for (long long sub = 0; sub < g; sub += gs) {
      const long long gn = g - sub < gs ? g - sub : gs; /* heads in this sub-group (g need not divide by gs) */
      const char *q = (const char *)a->q + (size_t)((p0 * g + sub) * S * d) * BF;
      const char *k = (const char *)a->k_cache + (size_t)(p0 * a->max_seq * d) * BF;
      const char *v = (const char *)a->v_cache + (size_t)(p0 * a->max_seq * d) * BF;
      char *o = (char *)a->o_heads + (size_t)((p0 * g + sub) * S * d) * BF;
      exec_gemm_shape s1 = {.trans_b = 1, .m = gn * S, .n = S, .k = d, .lda = d, .ldb = d, .ldc = S,
                            .batch = nb, .stride_a = g * S * d, .stride_b = a->max_seq * d, .stride_c = gs * S * S};
      IM_TRY(exec_gemm_run(a->gemm, &s1, 1.f, q, k, 0.f, a->scores, a->stream, e));
      IM_TRY(rt_softmax_causal_fwd(a->scores, a->scores, nb * gn, (int)S, scale, a->stream, e));
      exec_gemm_shape s2 = {.m = gn * S, .n = d, .k = S, .lda = S, .ldb = d, .ldc = d, .batch = nb,
                            .stride_a = gs * S * S, .stride_b = a->max_seq * d, .stride_c = g * S * d};
      IM_TRY(exec_gemm_run(a->gemm, &s2, 1.f, a->scores, v, 0.f, o, a->stream, e));
    }
  }
  return infer_heads_to_tokens(a->o_heads, a->out, a->batch, a->hl, (int)S, (int)d, a->stream, e);
}

/* The end of op `name` in the per-op profile, when one is on (infer_prof.h). */
#define IM_MARK(name) IM_TRY(infer_prof_mark(m->prof, name, m->stream, e))

int infer_forward(infer_model *m, const int32_t *tokens, int seq, long long pos0, ts_err *e) {
  const long long h = m->mc.hidden, d = m->d, T = (long long)m->batch * seq;
  const long long qcl = (m->hl + 2LL * m->kvl) * d;
  const float eps = m->mc.norm_eps > 0 ? (float)m->mc.norm_eps : 1e-5f;
  if (seq < 1 || seq > m->max_prompt || (seq > 1 && pos0 != 0) || pos0 + seq > m->max_seq)
    return ts_fail_sys(e, "infer_forward: %d tokens at position %lld do not fit (prompt <= %d, cache %lld)", seq,
                       pos0, m->max_prompt, m->max_seq);
  const infer_ar_mode mode = m->ar_mode[seq > 1 ? 0 : 1];
  infer_attn_dims ad = {.batch = m->batch, .hl = m->hl, .kvl = m->kvl, .head_dim = (int)d, .max_seq = m->max_seq,
                        .rope_theta = m->mc.rope_theta > 0 ? m->mc.rope_theta : 10000.0};
  cudaStream_t st = m->stream;
  IM_TRY(rt_embedding_fwd(m->emb, tokens, m->x, T, (int)h, m->rank * m->vl, m->vl, st, e));
  IM_MARK("embedding");
  IM_TRY(infer_allreduce(m, m->x, T, INFER_AR_PLAIN, e));
  if (m->team) IM_MARK("embedding.allreduce");
  for (int l = 0; l < m->layers; l++) {
    const infer_layer_w *w = &m->w[l];
    IM_TRY(rt_rmsnorm_fwd(m->x, w->ln1, m->xn, m->rstd, T, (int)h, eps, st, e));
    IM_MARK("ln1");
    IM_TRY(gemm_nn(m, T, qcl, h, m->xn, w->wqkv, m->qkv, e));
    if (w->bqkv) IM_TRY(rt_bias_add(m->qkv, w->bqkv, T, (int)qcl, (int)qcl, st, e));
    IM_MARK("qkv"); /* the GEMM and its bias (the simulator's qkv op) */
    if (w->qn) { /* the QK norm in place: each query head, then each key head (no copy kept: no backward) */
      IM_TRY(rt_qk_norm_fwd(m->qkv, (int)qcl, NULL, w->qn, NULL, T, m->hl, (int)d, eps, st, e));
      IM_MARK("q_norm");
      IM_TRY(rt_qk_norm_fwd((char *)m->qkv + (size_t)(m->hl * d) * BF, (int)qcl, NULL, w->kn, NULL, T, m->kvl, (int)d,
                            eps, st, e));
      IM_MARK("k_norm");
    }
    const infer_kv8 c8 = {m->kc[l], m->vc[l], m->ks[l], m->vs[l]};
    if (m->kv_fp8)
      IM_TRY(infer_rope_scatter_fp8(m->qkv, m->qh, &c8, seq > 1 ? m->kst : NULL, seq > 1 ? m->vst : NULL, &ad, seq,
                                    pos0, st, e));
    else
      IM_TRY(infer_rope_scatter(m->qkv, m->qh, m->kc[l], m->vc[l], &ad, seq, pos0, st, e));
    IM_MARK("rope");
    if (seq > 1) {
      /* prefill attention in BF16: from the cache, or (FP8 cache) from the stage of this layer's prompts */
      infer_prefill_args pa = {.gemm = m->gemm, .stream = st, .q = m->qh, .k_cache = m->kv_fp8 ? m->kst : m->kc[l],
                               .v_cache = m->kv_fp8 ? m->vst : m->vc[l], .o_heads = m->oh, .out = m->attn,
                               .scores = m->scores, .scores_bytes = m->scores_bytes, .batch = m->batch, .hl = m->hl,
                               .kvl = m->kvl, .head_dim = (int)d, .seq = seq,
                               .max_seq = m->kv_fp8 ? seq : m->max_seq};
      IM_TRY(infer_prefill_attention(&pa, e));
    } else if (m->kv_fp8)
      IM_TRY((m->decode_attn == 5   ? infer_decode_attention5_fp8
              : m->decode_attn == 4 ? infer_decode_attention4_fp8
              : m->decode_attn == 3 ? infer_decode_attention3_fp8
                                    : infer_decode_attention2_fp8)(
          m->qh, &c8, m->attn, m->partial, &ad, pos0 + 1, st, e));
    else
      IM_TRY((m->decode_attn == 5   ? infer_decode_attention5
              : m->decode_attn == 4 ? infer_decode_attention4
              : m->decode_attn == 3 ? infer_decode_attention3
              : m->decode_attn == 2 ? infer_decode_attention2
                                    : infer_decode_attention)(m->qh, m->kc[l], m->vc[l], m->attn, m->partial, &ad,
                                                              pos0 + 1, st, e));
    IM_MARK("attn");
    IM_TRY(gemm_nn(m, T, h, m->hl * d, m->attn, w->wo, m->proj, e));
    IM_MARK("attn_out");
    m->at = (struct infer_nf_site){pos0, l, 0};
    IM_TRY(infer_allreduce(m, m->proj, T, mode, e));
    if (m->team) IM_MARK("allreduce");
    IM_TRY(rt_add(m->x, m->proj, m->x, T * h, st, e));
    IM_MARK("attn_residual");
    IM_TRY(rt_rmsnorm_fwd(m->x, w->ln2, m->xn, m->rstd, T, (int)h, eps, st, e));
    IM_MARK("ln2");
    IM_TRY(gemm_nn(m, T, 2LL * m->fl, h, m->xn, w->w1, m->f, e));
    IM_MARK("fc1");
    IM_TRY(rt_swiglu_fwd(m->f, m->act, T, m->fl, st, e));
    IM_MARK("act");
    IM_TRY(gemm_nn(m, T, h, m->fl, m->act, w->w2, m->proj, e));
    IM_MARK("fc2");
    m->at = (struct infer_nf_site){pos0, l, 1};
    IM_TRY(infer_allreduce(m, m->proj, T, mode, e));
    if (m->team) IM_MARK("allreduce");
    IM_TRY(rt_add(m->x, m->proj, m->x, T * h, st, e));
    IM_MARK("mlp_residual");
  }
  /* the last token of each sequence: final norm, logits of this GPU's vocabulary rows, all-gather, arg max */
  const void *last = m->x; /* a decode step's rows are the last ones */
  if (seq > 1) {
    IM_TRY(infer_last_rows(m->x, m->last, m->batch, seq, (int)h, st, e));
    IM_MARK("last_rows"); /* not an op of the simulator's */
    last = m->last;
  }
  IM_TRY(rt_rmsnorm_fwd(last, m->lnf, m->lastn, m->rstd, m->batch, (int)h, eps, st, e));
  IM_MARK("final_norm");
  exec_gemm_shape sl = exec_gemm_packed(EXEC_GEMM_NT, m->batch, m->vl, h);
  IM_TRY(exec_gemm_run(m->gemm, &sl, 1.f, m->lastn, m->head, 0.f, m->logits, st, e));
  IM_MARK("logits");
  if (m->team) {
    coll_opts o = opts_of(INFER_AR_PLAIN, &m->codec);
    const void *in = m->logits;
    void *out = m->logits_all;
    if (coll_allgather(m->team, &in, &out, (size_t)(m->batch * m->vl), &o))
      return ts_fail_sys(e, "infer: logits all-gather: %s", coll_last_error());
    IM_MARK("logits.allgather");
  }
  IM_TRY(infer_argmax(m->logits_all, m->tok, m->batch, m->tp, m->vl, m->mc.vocab, m->amax, st, e));
  IM_MARK("argmax");
  return 0;
}

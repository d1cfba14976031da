/* plan_inflight.c — the "inflight" object of an inference plan: requests served by an engine with in-flight
 * (continuous) batching (sim/INFERENCE.md, "In-flight batching"). Reads the fields and resolves the batch: the
 * engine's own settings heuristic where the plan does not give them, and the sequences whose KV cache fits. */
#include <math.h>
#include <string.h>

#include "plan_infer.h"
#include "plan_internal.h"
#include "ts_json.h"

#define INFLIGHT_DEFAULT_KV_FRACTION 0.90
#define INFLIGHT_DEFAULT_TOKENS_PER_BLOCK 32
#define INFLIGHT_DEFAULT_CUDA_GRAPH_MAX_BATCH 128

int plan_inflight_load(json_t *root, const char *file, plan_infer *p, ts_err *e) {
  static const char *const keys[] = {"max_batch",          "max_num_tokens", "kv_cache_fraction", "tokens_per_block",
                                     "requests",           "cuda_graph_max_batch", "moe_max_num_tokens", NULL};
  plan_infer_inflight *f = &p->inflight;
  memset(f, 0, sizeof *f);
  bool failed;
  json_t *o = tsj_object_opt(root, "inflight", file, NULL, e, &failed);
  if (failed) return -1;
  if (!o) return 0;
  if (tsj_only_keys(o, keys, file, "inflight", e)) return -1;
  long long v;
  if (tsj_int_opt(o, "max_batch", 1, 1 << 20, 0, &v, file, "inflight", e)) return -1;
  f->max_batch_given = (int)v;
  if (tsj_int_opt(o, "max_num_tokens", 1, 1 << 24, 0, &v, file, "inflight", e)) return -1;
  f->max_num_tokens_given = (int)v;
  if (tsj_real_opt(o, "kv_cache_fraction", 1e-6, 1.0, INFLIGHT_DEFAULT_KV_FRACTION, &f->kv_fraction, file,
                   "inflight", e))
    return -1;
  if (tsj_int_opt(o, "tokens_per_block", 1, 1 << 16, INFLIGHT_DEFAULT_TOKENS_PER_BLOCK, &v, file, "inflight", e))
    return -1;
  f->tokens_per_block = (int)v;
  if (tsj_int_opt(o, "requests", 1, 1 << 24, 0, &v, file, "inflight", e)) return -1;
  f->requests = (int)v;
  if (tsj_int_opt(o, "cuda_graph_max_batch", 0, 1 << 20, INFLIGHT_DEFAULT_CUDA_GRAPH_MAX_BATCH, &v, file, "inflight", e))
    return -1;
  f->cuda_graph_max_batch = (int)v;
  if (tsj_int_opt(o, "moe_max_num_tokens", 1, 1 << 26, 0, &v, file, "inflight", e)) return -1;
  f->moe_max_num_tokens = (int)v;
  f->on = true;
  return 0;
}

/* trtllm-bench's settings when the run names none (TensorRT-LLM, tensorrt_llm/bench/build/tuning.py,
 * calc_engine_setting and finetune_setting; tensorrt_llm/bench/benchmark/utils/general.py, get_settings): the
 * requests whose KV cache (prompt + generate tokens, every layer, max(tp, KV heads) heads, 1 byte a cached element
 * under FP8, else 2) fits kv_fraction of the group's HBM less the weights (every parameter at 1 byte under FP8, 0.5
 * under NVFP4: BYTES_PER_ELEM, QuantAlgo.NVFP4 .5, scales not counted; else 2), capped at 4,096 and divided by pp; rounded up (at least 64, to 32 below 256, 128 below 1,024, else 256);
 * max_num_tokens from that batch x (1 + prompt / generate), capped at 32,768, rounded up (at least 2,048, to 256
 * below 4,096, 512 below 8,192, else 1,024), and without chunked prefill at least prompt + max_batch. */
static void engine_heuristic(const plan_infer *p, int *max_bs, int *max_tokens) {
  const model_config *m = &p->model;
  const double gib = 1073741824.0, isl = p->prompt, osl = p->generate;
  const double kv_elem = p->kv == PLAN_KV_FP8 ? 1.0 : 2.0;
  const double w_elem = p->quant == PLAN_QUANT_FP8 ? 1.0 : p->quant == PLAN_QUANT_NVFP4 ? 0.5 : 2.0;
  const double kv_heads = m->kv_heads > p->tp ? m->kv_heads : p->tp;
  const double per_token = 2.0 * m->layers * kv_heads * model_head_dim(m) * kv_elem / gib;
  const double n_gpus = (double)p->tp * p->pp;
  const double available = p->cluster.gpu.hbm_gib * n_gpus - model_params_total(m) * w_elem / gib;
  const double requests = available * p->inflight.kv_fraction / (per_token * (isl + osl));
  const double raw_bs = (requests < 4096 ? requests : 4096) / p->pp;
  double raw_tokens = raw_bs * (1.0 + isl / osl);
  if (raw_tokens > 32768) raw_tokens = 32768;
  double bs;
  if (raw_bs < 256) {
    bs = 32 * ceil(raw_bs / 32);
    if (bs < 64) bs = 64;
  } else if (raw_bs < 1024) {
    bs = 128 * ceil(raw_bs / 128);
  } else {
    bs = 256 * ceil(raw_bs / 256);
  }
  double tok;
  if (raw_tokens < 4096) {
    tok = 256 * ceil(raw_tokens / 256);
    if (tok < 2048) tok = 2048;
  } else if (raw_tokens < 8192) {
    tok = 512 * ceil(raw_tokens / 512);
  } else {
    tok = 1024 * ceil(raw_tokens / 1024);
  }
  if (tok < isl + bs) tok = isl + bs; /* no chunked prefill: a whole prompt and the batch's decode tokens */
  *max_bs = bs > 0 ? (int)bs : 0;
  *max_tokens = (int)tok;
}

/* One engine forward's peak on one GPU (plan_infer.h; sim/INFERENCE.md, "The engine's memory before the KV cache").
 * Every buffer is BF16 (2 bytes an element) but a quantized GEMM's input (1 byte under FP8, the NVFP4 bytes under
 * nvfp4). Held throughout: the hidden states and the residual (2 x tokens x hidden). On top, the largest of the
 * layer ops' input + output: QKV (normed input -> Q, K, V of the GPU's heads), attention (Q, K, V -> output), the
 * output projection, the MLP's gate/up (-> 2 x ffn of the GPU's share), its activation (-> ffn, quantized) and down
 * projection; an MoE layer's routed experts hold the gathered tokens (moe_rows x hidden, quantized), the fused MoE's
 * workspace sized for moe_rows x top_k expanded rows whichever experts they reach (the permuted input, the first
 * GEMM's 2 x expert_ffn / moe_tp output, the activation's, the second GEMM's hidden output) and the output of
 * moe_rows x hidden before its reduce-scatter; its shared experts are an MLP of shared x expert_ffn. The end of the
 * forward holds the hidden states and the logits of `logit_rows` rows (the GPU's vocabulary share and, under TP, the
 * gathered vocabulary). */
double plan_inflight_forward_peak_bytes(const plan_infer *p, double T, double logit_rows, double moe_rows) {
  const model_config *m = &p->model;
  const double BF = 2.0, q = p->quant == PLAN_QUANT_FP8 ? 1.0 : p->quant == PLAN_QUANT_NVFP4 ? PLAN_NVFP4_BYTES_PER_PARAM : BF;
  const double a = plan_infer_attn_tp(p), h = m->hidden, d = model_head_dim(m);
  const double qkv = (m->heads + 2.0 * m->kv_heads) / a * d, o = m->heads / a * d;
  double op = q * T * h + BF * T * qkv;                  /* QKV */
  double x = BF * T * qkv + BF * T * o;                   /* attention */
  if (x > op) op = x;
  x = q * T * o + BF * T * h;                             /* output projection */
  if (x > op) op = x;
  const bool moe = model_is_moe(m);
  if (!moe || m->dense_layers > 0) { /* a dense MLP: gate/up, activation, down */
    const double f = m->ffn_hidden / a;
    x = q * T * h + BF * T * 2.0 * f;
    if (x > op) op = x;
    x = BF * T * 2.0 * f + q * T * f;
    if (x > op) op = x;
    x = q * T * f + BF * T * h;
    if (x > op) op = x;
  }
  if (moe) {
    const double R = moe_rows * m->top_k, fe = (double)m->expert_ffn_hidden / plan_infer_moe_tp(p);
    x = q * moe_rows * h + (q * R * h + BF * R * 2.0 * fe + q * R * fe + BF * R * h) + BF * moe_rows * h;
    if (x > op) op = x;
    if (m->shared_experts > 0) {
      const double f = (double)m->shared_experts * m->expert_ffn_hidden / a;
      x = q * T * h + BF * T * 2.0 * f + q * T * f;
      if (x > op) op = x;
    }
  }
  const double layer = 2.0 * BF * T * h + op;
  const double vl = (double)model_vocab_per_gpu(m, (int)a);
  const double ends = BF * T * h + BF * logit_rows * (vl + (a > 1 ? (double)m->vocab : 0.0));
  return layer > ends ? layer : ends;
}

int plan_inflight_resolve(plan_infer *p, ts_err *e) {
  plan_infer_inflight *f = &p->inflight;
  const char *file = p->path;
  if (!f->on) return 0;
  if (p->pp != 1)
    return ts_fail(e, file, "layout.pp", "%d: an in-flight plan models one pipeline stage (pp 1); an engine's "
                   "pipelined micro-batches are not modelled", p->pp);
  if (p->prefill_attention == PLAN_PREFILL_ATTN_EXECUTOR)
    return ts_fail(e, file, "prefill_attention", "executor: an in-flight plan models a serving engine, whose "
                   "prefill attention is its own fused kernel: give \"fused\" or \"flash\"");
  if (p->codec.kind != PLAN_CODEC_NONE)
    return ts_fail(e, file, "codec.kind", "%s: an in-flight plan prices plain all-reduces only",
                   plan_codec_kind_name(p->codec.kind));
  /* the memory of the weights and the runtime: the plan's model at one sequence (a GPU), less its KV cache; under
   * attention_dp each GPU holds its own sequences' cache, so the fit and the batch below are a GPU's (TensorRT-LLM's
   * max_batch_size is each attention-DP rank's: its executor admits up to tp x max_batch_size requests, PyExecutor
   * _fetch_new_requests), and p->batch the group's, tp x that */
  const int ranks = p->attention_dp ? p->tp : 1;
  p->batch = ranks;
  /* the layout's own rules first (tp dividing the heads, the weights fitting at one sequence a GPU), so that a
   * refusal names its field rather than the memory model's failure */
  if (plan_infer_validate(p, e)) return -1;
  plan_infer_memory mem;
  if (plan_infer_memory_per_gpu(p, &mem)) return ts_fail(e, file, "layout", "memory per GPU cannot be computed");
  if (f->moe_max_num_tokens && !model_is_moe(&p->model))
    return ts_fail(e, file, "inflight.moe_max_num_tokens", "%d: the model %s has no MoE layers", f->moe_max_num_tokens,
                   p->model.name);
  engine_heuristic(p, &f->engine_max_batch, &f->engine_max_num_tokens);
  const int cap = f->max_batch_given ? f->max_batch_given : f->engine_max_batch;
  f->max_num_tokens = f->max_num_tokens_given ? f->max_num_tokens_given : f->engine_max_num_tokens;
  if (f->max_num_tokens < p->prompt)
    return ts_fail(e, file, "inflight.max_num_tokens", "%d is below the prompt of %d tokens: without chunked prefill "
                   "a step must hold a whole prompt", f->max_num_tokens, p->prompt);
  /* the engine's memory before its KV cache (TensorRT-LLM 1.0, PyTorch backend: KvCacheCreator.estimate_max_tokens
   * runs requests of max_num_tokens tokens in all, each rank's under attention_dp, after the CUDA graphs' capture,
   * and sizes the cache at kv_fraction of the HBM less that run's peak; sim/INFERENCE.md) */
  const double dp = p->attention_dp ? p->tp : 1;
  const double moe_default = dp * f->max_num_tokens;
  const double moe_cap = f->moe_max_num_tokens ? f->moe_max_num_tokens : moe_default;
  f->moe_tokens = (int)(moe_cap < moe_default ? moe_cap : moe_default);
  const double seq = (double)p->prompt + p->generate - 1; /* the profiling requests: at most max_seq_len - 1 tokens */
  f->profile_peak_bytes = plan_inflight_forward_peak_bytes(p, f->max_num_tokens, ceil(f->max_num_tokens / seq),
                                                           f->moe_tokens);
  int g = f->cuda_graph_max_batch < cap ? f->cuda_graph_max_batch : cap;
  if (g > f->max_num_tokens) g = f->max_num_tokens;
  f->cuda_graph_batch = g;
  const double g_moe = dp * g < moe_cap ? dp * g : moe_cap;
  f->cuda_graph_bytes = g > 0 ? plan_inflight_forward_peak_bytes(p, g, g, g_moe) : 0.0;
  const double hbm = p->cluster.gpu.hbm_gib * 1073741824.0;
  const double free_bytes = hbm - mem.weights - mem.overhead - f->profile_peak_bytes - f->cuda_graph_bytes;
  f->kv_free_bytes = free_bytes;
  const long long blocks = ((long long)p->prompt + p->generate + f->tokens_per_block - 1) / f->tokens_per_block;
  const double per_seq = plan_infer_kv_bytes(p, blocks * f->tokens_per_block);
  const double fit = free_bytes > 0 ? floor(f->kv_fraction * free_bytes / per_seq) : 0;
  f->kv_fit_batch = fit > (1 << 20) ? 1 << 20 : (int)fit;
  if (f->kv_fit_batch < 1)
    return ts_fail(e, file, "inflight.kv_cache_fraction",
                   "%g of the %.1f GiB left after the weights (%.1f GiB), the runtime, the profiling forward of %d "
                   "tokens (%.1f GiB) and the CUDA graphs (%.1f GiB) holds no sequence of %d + %d tokens (%.2f GiB of "
                   "KV cache each); try more tp or \"kv_cache\": \"fp8\"", f->kv_fraction, free_bytes / 1073741824.0,
                   mem.weights / 1073741824.0, f->max_num_tokens, f->profile_peak_bytes / 1073741824.0,
                   f->cuda_graph_bytes / 1073741824.0, p->prompt, p->generate, per_seq / 1073741824.0);
  f->max_batch = cap < f->kv_fit_batch ? cap : f->kv_fit_batch;
  p->batch = ranks * f->max_batch;
  return 0;
}

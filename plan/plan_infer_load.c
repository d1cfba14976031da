/* plan_infer_load.c — reads an inference plan file and checks that it can run:
 * the TP split divides the model, the stages divide the layers, the codec is
 * valid, and the weights plus the KV cache fit in HBM. */
#include <math.h>
#include <string.h>

#include "plan_infer.h"
#include "plan_internal.h"
#include "ts_json.h"

static const char *const kv_names[] = {"bf16", "fp8", NULL};

const char *plan_kv_precision_name(plan_kv_precision k) { return k == PLAN_KV_FP8 ? "fp8" : "bf16"; }

static const char *const moe_kernel_names[] = {"per-expert", "fused", NULL};

const char *plan_moe_kernel_name(plan_moe_kernel k) { return moe_kernel_names[k == PLAN_MOE_KERNEL_FUSED]; }

static const char *const quant_names[] = {"none", "fp8", "nvfp4", NULL};

const char *plan_infer_quant_name(plan_infer_quant q) {
  return quant_names[q == PLAN_QUANT_FP8 ? 1 : q == PLAN_QUANT_NVFP4 ? 2 : 0];
}

static const char *const prefill_attention_names[] = {"executor", "fused", "flash", "fused-fp8", NULL};

const char *plan_prefill_attention_name(plan_prefill_attention a) {
  return (unsigned)a <= PLAN_PREFILL_ATTN_FUSED_FP8 ? prefill_attention_names[a] : "?";
}

static const char *const decode_attention_names[] = {"per-kv-head", "per-query-head", NULL};

const char *plan_decode_attention_name(plan_decode_attention a) {
  return (unsigned)a <= PLAN_DECODE_ATTN_PER_QUERY_HEAD ? decode_attention_names[a] : "?";
}

int plan_file_is_inference(const char *path, bool *is_inference, ts_err *e) {
  *is_inference = false;
  json_t *root = tsj_load_file(path, e);
  if (!root) return -1;
  *is_inference = plan_json_is_inference(root);
  json_decref(root);
  return 0;
}

static int load_codec(json_t *root, const char *file, plan_codec *c, ts_err *e) {
  bool failed;
  json_t *o = tsj_object_opt(root, "codec", file, NULL, e, &failed);
  if (failed) return -1;
  return plan_json_codec(o, file, "codec", c, e);
}

/* layout.attention_dp and layout.ep (plan_infer.h): what the layout needs of the model and the plan. */
static int validate_attention_dp(const plan_infer *p, ts_err *e) {
  const char *f = p->path;
  const model_config *m = &p->model;
  if (p->ep > 1 && !p->attention_dp)
    return ts_fail(e, f, "layout.ep", "%d: expert parallelism is modelled with attention data parallelism only (each "
                   "rank its own requests, the tokens exchanged around the experts): give \"attention_dp\": true",
                   p->ep);
  if (!p->attention_dp) return 0;
  if (!model_is_moe(m))
    return ts_fail(e, f, "layout.attention_dp", "%s has no experts (a dense model): attention data parallelism over "
                   "the TP group would leave nothing split; serve replicas of tp 1 instead", m->name);
  if (p->tp < 2)
    return ts_fail(e, f, "layout.attention_dp", "needs tp >= 2 (the ranks that share the experts); tp is %d", p->tp);
  if (p->tp % p->ep)
    return ts_fail(e, f, "layout.ep", "%d does not divide tp %d: the experts are split over the tp GPUs, ep ways by "
                   "expert and tp / ep ways within one", p->ep, p->tp);
  if (m->experts % p->ep)
    return ts_fail(e, f, "layout.ep", "%d does not divide the %d experts of %s", p->ep, m->experts, m->name);
  if (m->expert_ffn_hidden % plan_infer_moe_tp(p))
    return ts_fail(e, f, "layout.ep", "tp / ep = %d does not divide expert_ffn_hidden %d of %s", plan_infer_moe_tp(p),
                   m->expert_ffn_hidden, m->name);
  if (p->pp != 1)
    return ts_fail(e, f, "layout.pp", "%d: attention data parallelism is modelled with one pipeline stage (pp 1)",
                   p->pp);
  if (p->codec.kind != PLAN_CODEC_NONE)
    return ts_fail(e, f, "codec.kind", "%s: under attention_dp there are no TP all-reduces to compress (the exchange "
                   "around the experts is an all-gather and a reduce-scatter, sent plain)",
                   plan_codec_kind_name(p->codec.kind));
  if (p->prefill_attention == PLAN_PREFILL_ATTN_EXECUTOR)
    return ts_fail(e, f, "prefill_attention", "executor: attention_dp is a serving engine's layout; give \"fused\" or "
                   "\"flash\" (the engine's prefill attention)");
  if (!p->inflight.on && p->batch % p->tp)
    return ts_fail(e, f, "batch.size", "%d is not a multiple of tp %d: under attention_dp each rank serves an equal "
                   "share of the sequences", p->batch, p->tp);
  return 0;
}

static int load_root(json_t *root, const char *file, const char *models_dir, const char *topologies_dir,
                     plan_infer *p, ts_err *e) {
  static const char *const top_keys[] = {"schema", "kind", "name", "description", "model", "cluster", "layout",
                                         "batch", "kv_cache", "codec", "codec_min_bytes", "codec_auto",
                                         "layers_override", "moe_kernel", "quantization", "prefill_attention", "inflight",
                                         "decode_attention", NULL};
  static const char *const layout_keys[] = {"tp", "pp", "ep", "attention_dp", NULL};
  static const char *const batch_keys[] = {"size", "prompt", "generate", NULL};
  static const char *const kind_names[] = {"inference", NULL};
  if (tsj_schema(root, 1, file, e)) return -1;
  if (tsj_only_keys(root, top_keys, file, NULL, e)) return -1;
  int kind;
  if (tsj_enum(root, "kind", kind_names, &kind, file, NULL, e)) return -1;
  char model_name[PLAN_JSON_NAME_LEN], cluster_name[PLAN_JSON_NAME_LEN];
  if (plan_json_names(root, file, p->name, sizeof p->name, p->description, sizeof p->description, model_name,
                      cluster_name, e))
    return -1;

  long long v;
  json_t *layout = tsj_object(root, "layout", file, NULL, e);
  if (!layout || tsj_only_keys(layout, layout_keys, file, "layout", e)) return -1;
  if (tsj_int(layout, "tp", 1, 1 << 16, &v, file, "layout", e)) return -1;
  p->tp = (int)v;
  if (tsj_int_opt(layout, "pp", 1, 1 << 16, 1, &v, file, "layout", e)) return -1;
  p->pp = (int)v;
  if (tsj_int_opt(layout, "ep", 1, 1 << 16, 1, &v, file, "layout", e)) return -1;
  p->ep = (int)v;
  if (tsj_bool_opt(layout, "attention_dp", false, &p->attention_dp, file, "layout", e)) return -1;

  json_t *batch = tsj_object(root, "batch", file, NULL, e);
  if (!batch || tsj_only_keys(batch, batch_keys, file, "batch", e)) return -1;
  if (plan_inflight_load(root, file, p, e)) return -1; /* in flight: the batch is the engine's (plan_inflight.c) */
  if (p->inflight.on && json_object_get(batch, "size"))
    return ts_fail(e, file, "batch.size", "an in-flight plan's batch is the engine's: give inflight.max_batch");
  if (!p->inflight.on && tsj_int(batch, "size", 1, 1 << 20, &v, file, "batch", e)) return -1;
  p->batch = p->inflight.on ? 1 : (int)v;
  if (tsj_int(batch, "prompt", 1, 1 << 24, &v, file, "batch", e)) return -1;
  p->prompt = (int)v;
  if (tsj_int(batch, "generate", 1, 1 << 24, &v, file, "batch", e)) return -1;
  p->generate = (int)v;

  int kv;
  if (tsj_enum_opt(root, "kv_cache", kv_names, PLAN_KV_BF16, &kv, file, NULL, e)) return -1;
  p->kv = (plan_kv_precision)kv;
  if (load_codec(root, file, &p->codec, e)) return -1;
  if (tsj_real_opt(root, "codec_min_bytes", 0.0, 1e15, 0.0, &p->codec_min_bytes, file, NULL, e)) return -1;
  if (tsj_bool_opt(root, "codec_auto", true, &p->codec_auto, file, NULL, e)) return -1;
  long long layers_override;
  if (tsj_int_opt(root, "layers_override", 1, 1 << 16, 0, &layers_override, file, NULL, e)) return -1;
  int moe_kernel;
  if (tsj_enum_opt(root, "moe_kernel", moe_kernel_names, PLAN_MOE_KERNEL_FUSED, &moe_kernel, file, NULL, e))
    return -1;
  p->moe_kernel = (plan_moe_kernel)moe_kernel;
  const bool moe_kernel_given = json_object_get(root, "moe_kernel") != NULL;
  int quant;
  if (tsj_enum_opt(root, "quantization", quant_names, PLAN_QUANT_NONE, &quant, file, NULL, e)) return -1;
  p->quant = (plan_infer_quant)quant;
  int pa;
  if (tsj_enum_opt(root, "prefill_attention", prefill_attention_names, PLAN_PREFILL_ATTN_EXECUTOR, &pa, file, NULL, e))
    return -1;
  p->prefill_attention = (plan_prefill_attention)pa;
  int da;
  if (tsj_enum_opt(root, "decode_attention", decode_attention_names, PLAN_DECODE_ATTN_PER_KV_HEAD, &da, file, NULL, e))
    return -1;
  p->decode_attention = (plan_decode_attention)da;

  ts_err sub;
  if (model_load(model_name, models_dir, &p->model, &sub))
    return ts_fail(e, file, "model", "cannot load \"%s\": %s", model_name, sub.msg);
  if (topo_load(cluster_name, topologies_dir, &p->cluster, &sub))
    return ts_fail(e, file, "cluster", "cannot load \"%s\": %s", cluster_name, sub.msg);
  if (layers_override) p->model.layers = (int)layers_override;
  if (moe_kernel_given && !model_is_moe(&p->model))
    return ts_fail(e, file, "moe_kernel", "%s has no experts (a dense model): there is no MoE kernel to choose",
                   p->model.name);
  if (validate_attention_dp(p, e)) return -1; /* before the in-flight batch, whose fit it shapes */
  if (plan_inflight_resolve(p, e)) return -1;
  return plan_infer_validate(p, e);
}

int plan_infer_from_json_text(const char *text, size_t len, const char *what, const char *models_dir,
                              const char *topologies_dir, plan_infer *p, ts_err *e) {
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", what ? what : "plan");
  json_t *root = tsj_load_string(text, len, p->path, e);
  if (!root) return -1;
  int rc = load_root(root, p->path, models_dir, topologies_dir, p, e);
  json_decref(root);
  return rc;
}

int plan_infer_load(const char *path, const char *models_dir, const char *topologies_dir, plan_infer *p,
                    ts_err *e) {
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", path);
  json_t *root = tsj_load_file(path, e);
  if (!root) return -1;
  int rc = load_root(root, path, models_dir, topologies_dir, p, e);
  json_decref(root);
  return rc;
}

/* ---- validation ---- */

static int validate_codec(const plan_infer *p, ts_err *e) {
  const char *f = p->path;
  const plan_codec *c = &p->codec;
  if (plan_codec_check(c, p->model.hidden, f, "codec", e)) return -1;
  if (c->kind != PLAN_CODEC_NONE && p->tp < 2)
    return ts_fail(e, f, "codec.kind", "a codec of the TP all-reduces needs tensor parallelism (tp >= 2)");
  return 0;
}

int plan_infer_validate(const plan_infer *p, ts_err *e) {
  const char *f = p->path;
  const model_config *m = &p->model;
  if (p->tp < 1 || p->pp < 1) return ts_fail(e, f, "layout", "tp and pp must be at least 1");
  if (p->batch < 1 || p->prompt < 1 || p->generate < 1)
    return ts_fail(e, f, "batch", "size, prompt and generate must be at least 1");
  const int atp = plan_infer_attn_tp(p); /* attention_dp: attention, dense and shared FFNs whole on every rank */
  if (m->heads % atp)
    return ts_fail(e, f, "layout.tp", "%d does not divide the %d attention heads of %s", p->tp, m->heads, m->name);
  if (m->kv_heads % atp)
    return ts_fail(e, f, "layout.tp", "%d does not divide the %d KV heads of %s", p->tp, m->kv_heads, m->name);
  if (m->ffn_hidden % atp)
    return ts_fail(e, f, "layout.tp", "%d does not divide ffn_hidden %d of %s", p->tp, m->ffn_hidden, m->name);
  if (model_is_moe(m) && !p->attention_dp && m->expert_ffn_hidden % p->tp) /* each rank a 1/tp slice of each expert (moe_tokens_replicated) */
    return ts_fail(e, f, "layout.tp", "%d does not divide expert_ffn_hidden %d of %s", p->tp, m->expert_ffn_hidden,
                   m->name);
  if (p->tp > p->cluster.gpus_per_node || p->cluster.gpus_per_node % p->tp)
    return ts_fail(e, f, "layout.tp", "%d must divide the %d GPUs per node of %s, so a TP group stays in a node",
                   p->tp, p->cluster.gpus_per_node, p->cluster.name);
  if (m->layers < 1 || p->pp > m->layers || m->layers % p->pp)
    return ts_fail(e, f, "layout.pp", "%d layers do not split evenly into %d pipeline stages", m->layers, p->pp);
  if ((long long)p->tp * p->pp > topo_total_gpus(&p->cluster))
    return ts_fail(e, f, "layout", "tp x pp = %lld GPUs, but %s has %d", (long long)p->tp * p->pp,
                   p->cluster.name, topo_total_gpus(&p->cluster));
  if ((long long)p->prompt + p->generate > m->max_seq)
    return ts_fail(e, f, "batch.generate", "prompt %d + generate %d exceed the maximum sequence %d of %s", p->prompt,
                   p->generate, m->max_seq, m->name);
  if (validate_codec(p, e)) return -1;
  if (p->quant == PLAN_QUANT_FP8 && !(p->cluster.gpu.fp8_tflops > 0))
    return ts_fail(e, f, "quantization", "fp8: the %s of %s has no FP8 tensor cores (GPU catalogue: fp8_tflops)",
                   p->cluster.gpu.name, p->cluster.name);
  if (p->quant == PLAN_QUANT_NVFP4 && !(p->cluster.gpu.fp4_tflops > 0))
    return ts_fail(e, f, "quantization", "nvfp4: the %s of %s has no FP4 tensor cores (GPU catalogue: fp4_tflops %g; "
                   "NVFP4 GEMMs need Blackwell, compute capability 10.0)", p->cluster.gpu.name, p->cluster.name,
                   p->cluster.gpu.fp4_tflops);
  if (p->prefill_attention == PLAN_PREFILL_ATTN_FUSED_FP8) {
    if (p->kv != PLAN_KV_FP8)
      return ts_fail(e, f, "prefill_attention", "fused-fp8: an FP8 context attention runs over an FP8 KV cache "
                     "(\"kv_cache\": \"fp8\"); with a BF16 cache the engine's kernel is BF16 (\"fused\")");
    if (!(p->cluster.gpu.fp8_tflops > 0))
      return ts_fail(e, f, "prefill_attention", "fused-fp8: the %s of %s has no FP8 tensor cores (GPU catalogue: "
                     "fp8_tflops)", p->cluster.gpu.name, p->cluster.name);
    if (m->attention == MODEL_ATTN_MLA)
      return ts_fail(e, f, "prefill_attention", "fused-fp8: %s uses MLA, which the \"fused\" attention tables "
                     "have no points of", m->name);
  }
  if (p->decode_attention == PLAN_DECODE_ATTN_PER_QUERY_HEAD && m->attention == MODEL_ATTN_MLA)
    return ts_fail(e, f, "decode_attention", "per-query-head: %s uses MLA, whose decode attention reads one latent "
                   "head shared by all query heads (give \"per-kv-head\", the default)", m->name);
  plan_infer_memory mem;
  if (plan_infer_memory_per_gpu(p, &mem)) return ts_fail(e, f, "layout", "memory per GPU cannot be computed");
  double hbm = p->cluster.gpu.hbm_gib * 1073741824.0;
  if (mem.total > hbm)
    return ts_fail(e, f, "batch.size",
                   "needs %.1f GiB per GPU (weights %.1f, KV cache %.1f) but the %s has %.0f GiB; try more tp/pp, "
                   "a smaller batch or \"kv_cache\": \"fp8\"",
                   mem.total / 1073741824.0, mem.weights / 1073741824.0, mem.kv_cache / 1073741824.0,
                   p->cluster.gpu.name, p->cluster.gpu.hbm_gib);
  return 0;
}

/* ---- sizes ---- */

double plan_infer_mla_kv_bytes(const plan_infer *p, long long tokens) {
  const model_config *m = &p->model;
  /* vLLM, SGLang and TensorRT-LLM cache the latent c_KV (kv_lora_rank) and the shared RoPE key (qk_rope_head_dim)
   * of each token, one vector for all heads; under TP each rank keeps all of it (the heads are split, the latent
   * is not); the FP8 cache (--kv-cache-dtype fp8) holds E4M3 codes with a per-tensor scale */
  const double width = (double)m->kv_lora_rank + m->qk_rope_head_dim, elem = p->kv == PLAN_KV_FP8 ? 1.0 : 2.0;
  return (double)m->layers / p->pp * plan_infer_rank_batch(p) * (double)tokens * width * elem;
}

double plan_infer_kv_bytes(const plan_infer *p, long long tokens) {
  const model_config *m = &p->model;
  if (m->attention == MODEL_ATTN_MLA) return plan_infer_mla_kv_bytes(p, tokens);
  /* fp8: an E4M3 code an element and an FP32 scale per (sequence, KV head, position) for K and for V
   * (runtime/ops/infer_kv8.h): 1 + 4 / head_dim bytes an element */
  double elem = p->kv == PLAN_KV_FP8 ? 1.0 + 4.0 / model_head_dim(m) : 2.0;
  double layers = (double)m->layers / p->pp;
  return 2.0 * layers * plan_infer_rank_batch(p) * (double)tokens * (double)(m->kv_heads / plan_infer_attn_tp(p)) *
         model_head_dim(m) * elem;
}

void plan_infer_forward_plan(const plan_infer *p, int seq, plan *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->path, sizeof out->path, "%s", p->path);
  snprintf(out->name, sizeof out->name, "%s", p->name);
  out->model = p->model;
  out->cluster = p->cluster;
  const int atp = plan_infer_attn_tp(p), rb = plan_infer_rank_batch(p) > 0 ? plan_infer_rank_batch(p) : 1;
  out->dp = 1, out->tp = atp, out->pp = p->pp, out->vpp = 1;
  out->micro_batch = rb, out->global_batch = rb, out->seq = seq;
  out->layers = p->model.layers;
  out->schedule = PLAN_SCHED_1F1B;
  for (int t = 0; t < PLAN_TRAFFIC_COUNT; t++) out->codec[t] = (plan_codec){.kind = PLAN_CODEC_NONE, .group = 128};
  out->codec_min_bytes = p->codec_min_bytes;
  out->dp_bucket_bytes = 1.6e8;
  out->vocab_padded = model_vocab_per_gpu(&p->model, atp) * atp;
  /* the inference executor adds the QKV bias in a kernel of its own after the qkv GEMM
   * (runtime/infer/infer_model.c: rt_bias_add), so the bias pass is priced (sim_costs.c, bias_us) */
  out->bias_unfused = true;
  /* an MoE layer's tokens are every TP rank's, each rank holding 1/tp of each expert's FFN (vLLM's and
   * SGLang's TP MoE): no SP in a decode step of one token a sequence */
  out->moe_tokens_replicated = true;
  /* attention_dp: one GPU of the group runs everything but the routed experts at TP 1 on its own tokens; its tokens
   * enter the router, are gathered over the group and reach its E / ep experts (of expert_ffn / moe_tp each): of a
   * group of tp x t tokens, t x top_k x moe_tp rows on one GPU on average, Megatron's dispatch-and-gather count
   * (model_shard ep, etp), so the shard is not the replicated one */
  if (p->attention_dp) out->ep = p->ep, out->etp = plan_infer_moe_tp(p), out->moe_tokens_replicated = false;
  out->moe_fused = p->moe_kernel == PLAN_MOE_KERNEL_FUSED;
  /* quantization fp8: the linear layers' GEMMs (plan_fp8_linear) priced as per-tensor-scaled FP8 GEMMs
   * (sim_costs.c); the inference prediction takes no training cast ops (sim_infer.c prices the layer's
   * model ops only), so the activations' quantization is free, as where the producing kernel does it */
  /* on an MoE model the experts' and shared experts' GEMMs too (plan_fp8_serving_linear), the router BF16 */
  if (p->quant != PLAN_QUANT_NONE) out->fp8_recipe = PLAN_FP8_TENSORWISE, out->fp8_serving = true;
  /* quantization nvfp4: the same GEMMs, priced as NVFP4 ones (sim_costs.c: the FP8 price moved to the FP4 peak,
   * plus the quantize of their input) */
  out->fp4_serving = p->quant == PLAN_QUANT_NVFP4;
  /* prefill_attention fused, flash or fused-fp8: the training attention's backend tables price the prefill's
   * (sim_infer.c, prefill_attention_s); executor keeps the forward plan's default, which only a decode
   * attention without its table falls back to */
  /* fused-fp8: the fused table's price, moved by the calibration's FP8 ratio in sim_infer.c */
  if (p->prefill_attention == PLAN_PREFILL_ATTN_FUSED || p->prefill_attention == PLAN_PREFILL_ATTN_FUSED_FP8)
    out->attention_backend = PLAN_ATTENTION_FUSED;
  if (p->prefill_attention == PLAN_PREFILL_ATTN_FLASH) out->attention_backend = PLAN_ATTENTION_FLASH;
}

/* The inference executor's working buffers on one GPU (infer_model_create, runtime/infer/infer_model.c, which
 * allocates each once for the whole run, every layer reusing them), 2 bytes an element unless said:
 * - the prefill of T = batch x prompt tokens: x, xn, proj (T x hidden each), qkv (T x (heads + 2 kv_heads) / tp
 *   x head_dim), qh, oh, attn (T x heads / tp x head_dim each), f (T x 2 ffn / tp), act (T x ffn / tp), rstd
 *   (T x 4 B);
 * - the causal scores of the prefill attention (prompt > 1): prompt^2 a head, as many (sequence, KV head)
 *   groups of heads at once as PLAN_INFER_SCORES_BUDGET holds (the executor's default; at least one head);
 * - the FP8 cache's prefill K/V stage (kv_cache fp8, prompt > 1): K and V of the prompt in BF16;
 * - decode attention v3's partials: batch x heads / tp x (head_dim + 2) x 4 B per split, at most about 8 blocks an
 *   SM of splits (infer_decode3_partial_bytes), the largest over the lengths;
 * - the last tokens' rows and normed rows (batch x hidden each), the logits (batch x vocab / tp) and, under TP,
 *   the gathered logits (batch x vocab). */
static double executor_buffers(const plan_infer *p) {
  const model_config *mc = &p->model;
  const double BF = 2.0, T = (double)p->batch * p->prompt, h = mc->hidden, d = model_head_dim(mc);
  const double hl = mc->heads / p->tp, kvl = mc->kv_heads / p->tp, fl = (double)mc->ffn_hidden / p->tp;
  const double vl = (double)model_vocab_per_gpu(mc, p->tp);
  double b = BF * T * (3.0 * h + (hl + 2.0 * kvl) * d + 3.0 * hl * d + 3.0 * fl) + 4.0 * T;
  if (p->prompt > 1) {
    const double budget = (double)PLAN_INFER_SCORES_BUDGET, per_head = BF * (double)p->prompt * p->prompt, g = hl / kvl;
    const double need = per_head * g;
    double gs = g;
    while (gs > 1 && per_head * gs > budget) gs = floor(gs / 2);
    double scores = need <= budget ? budget - fmod(budget, need) : per_head * gs;
    if (scores > per_head * hl * p->batch) scores = per_head * hl * p->batch;
    b += scores;
    if (p->kv == PLAN_KV_FP8) b += 2.0 * BF * p->batch * kvl * p->prompt * d;
  }
  const double units = (double)p->batch * kvl, sms = p->cluster.gpu.sms > 0 ? p->cluster.gpu.sms : 132;
  double splits = ceil(8.0 * sms / units), by_len = ceil(((double)p->prompt + p->generate) / 64.0);
  b += (double)p->batch * hl * (splits < by_len ? splits : by_len) * (d + 2.0) * 4.0;
  b += BF * (2.0 * p->batch * h + (double)p->batch * vl + (p->tp > 1 ? (double)p->batch * vl * p->tp : 0.0));
  return b;
}

/* The FP8 GEMMs' parameters of stage s on one GPU (plan_fp8_gemm under quantization fp8 or nvfp4; 0 without): 1
 * byte each under fp8, PLAN_NVFP4_BYTES_PER_PARAM under nvfp4, not 2. A dense model's layers are alike; an MoE model's are counted layer by layer (its dense first
 * layers hold fc1 / fc2, its MoE layers the experts', plan_moe_layer_params_of_stage), the router left BF16. */
static double fp8_params_of_stage(const plan_infer *p, const plan *fwd, int s) {
  if (p->quant == PLAN_QUANT_NONE) return 0.0;
  model_shard sh = plan_shard(fwd);
  model_op ops[MODEL_MAX_LAYER_OPS], fp8[MODEL_MAX_LAYER_OPS];
  ts_err sub;
  int n = model_layer_ops(&fwd->model, &sh, ops, MODEL_MAX_LAYER_OPS, &sub), k = 0;
  if (n < 0) return -1.0;
  if (!model_is_moe(&fwd->model)) return plan_fp8_gemm_params(fwd, ops, n) * plan_stage_layers(fwd, s);
  for (int i = 0; i < n; i++)
    if (plan_fp8_gemm(fwd, &ops[i])) fp8[k++] = ops[i];
  return plan_moe_layer_params_of_stage(fwd, s, fp8, k, false);
}

int plan_infer_memory_per_gpu(const plan_infer *p, plan_infer_memory *m) {
  *m = (plan_infer_memory){0};
  static _Thread_local plan fwd; /* large (cluster tables): not on the stack */
  plan_infer_forward_plan(p, 1, &fwd);
  double kv = plan_infer_kv_bytes(p, (long long)p->prompt + p->generate);
  const double act = p->prefill_attention == PLAN_PREFILL_ATTN_EXECUTOR ? executor_buffers(p) : 0.0;
  const double overhead = PLAN_RUNTIME_BYTES + PLAN_NCCL_COMM_BYTES * ((p->tp > 1) + (p->pp > 1));
  for (int s = 0; s < p->pp; s++) {
    double params = plan_params_of_stage(&fwd, s);
    double fp8 = fp8_params_of_stage(p, &fwd, s);
    if (params < 0 || fp8 < 0) return -1;
    /* the quantized GEMMs' parameters at 1 byte (fp8) or PLAN_NVFP4_BYTES_PER_PARAM (nvfp4), the rest BF16 */
    const double q_bytes = p->quant == PLAN_QUANT_NVFP4 ? PLAN_NVFP4_BYTES_PER_PARAM : 1.0;
    double w = 2.0 * params - (2.0 - q_bytes) * fp8;
    if (w + kv + act + overhead > m->total) *m = (plan_infer_memory){w, kv, act, overhead, w + kv + act + overhead};
  }
  return 0;
}

double plan_infer_wire_bytes(const plan_codec *c, double bytes, int hidden, double min_bytes) {
  if (!c || c->kind == PLAN_CODEC_NONE || hidden < 1) return bytes;
  double shared = bytes;
  if (plan_codec_has_caat(c->kind)) shared = bytes * floor(c->p * hidden) / hidden;
  if (plan_codec_has_taco(c->kind) && shared >= min_bytes) return plan_codec_wire_bytes(c, shared, 2);
  return shared;
}

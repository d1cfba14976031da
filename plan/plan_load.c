/* plan_load.c — reads a plan file and checks every rule that makes it
 * runnable. Each failure names the file, the field and the reason. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"
#include "ts_json.h"

static const char *const schedule_names[] = {"gpipe", "1f1b", "interleaved-1f1b", NULL};
static const char *const order_names[] = {"tp-dp-pp", "tp-pp-dp", NULL};
static const char *const recompute_names[] = {"none", "selective", "full", NULL};
static const char *const traffic_keys[PLAN_TRAFFIC_COUNT] = {"tp_fwd", "tp_bwd", "pp", "dp", "ep", "cp"};

double plan_default_dp_bucket_bytes(int dp) {
  double params = 1e6 * dp > 4e7 ? 1e6 * dp : 4e7;
  return 4.0 * params;
}

void plan_set_loader_defaults(plan *p) {
  p->codec_min_bytes = PLAN_DEFAULT_CODEC_MIN_BYTES;
  p->dp_bucket_bytes = plan_default_dp_bucket_bytes(plan_dp_shards(p)) / 4.0 * plan_grad_bytes(p);
  if (model_is_moe(&p->model) && p->moe_imbalance == 0) p->moe_imbalance = PLAN_DEFAULT_MOE_IMBALANCE;
}

static int load_codec(json_t *codecs, int t, const char *file, plan_codec *c, ts_err *e) {
  char path[64];
  snprintf(path, sizeof path, "codec.%s", traffic_keys[t]);
  bool failed;
  json_t *o = tsj_object_opt(codecs, traffic_keys[t], file, "codec", e, &failed);
  if (failed) return -1;
  return plan_json_codec(o, file, path, c, e);
}

/* The MoE layout fields (plan_moe.c checks them against the model). */
static int load_moe_layout(json_t *layout, const char *file, plan *p, ts_err *e) {
  long long v;
  if (tsj_int_opt(layout, "ep", 1, 1 << 20, 1, &v, file, "layout", e)) return -1;
  p->ep = (int)v;
  if (tsj_int_opt(layout, "expert_tp", 1, 1 << 20, 0, &v, file, "layout", e)) return -1;
  p->etp = (int)v;
  if (tsj_real_opt(layout, "capacity_factor", 0.0, 1e6, 0.0, &p->capacity_factor, file, "layout", e)) return -1;
  static const char *const dispatchers[] = {"alltoall", "flex", "allgather", NULL};
  int d;
  if (tsj_enum_opt(layout, "moe_token_dispatcher_type", dispatchers, 0, &d, file, "layout", e)) return -1;
  if (d == 2)
    return ts_fail(e, file, "layout.moe_token_dispatcher_type",
                   "\"allgather\" is not modelled; \"alltoall\" (the default) and \"flex\" (DeepEP) are");
  p->moe_flex = d == 1;
  static const char *const backends[] = {"deepep", "hybridep", NULL};
  int be;
  if (tsj_enum_opt(layout, "moe_flex_dispatcher_backend", backends, 0, &be, file, "layout", e)) return -1;
  if (json_object_get(layout, "moe_flex_dispatcher_backend") && !p->moe_flex)
    return ts_fail(e, file, "layout.moe_flex_dispatcher_backend",
                   "applies to moe_token_dispatcher_type \"flex\" only (Megatron-Core's flex dispatcher backends)");
  p->moe_hybridep = be == 1;
  if (tsj_int_opt(layout, "moe_hybridep_num_sms", 1, 1 << 16, PLAN_DEFAULT_HYBRIDEP_NUM_SMS, &v, file, "layout", e))
    return -1;
  if (json_object_get(layout, "moe_hybridep_num_sms") && !p->moe_hybridep)
    return ts_fail(e, file, "layout.moe_hybridep_num_sms",
                   "applies to moe_flex_dispatcher_backend \"hybridep\" only (Megatron-Core's --moe-hybridep-num-sms)");
  if (v != 16 && v != 32)
    return ts_fail(e, file, "layout.moe_hybridep_num_sms",
                   "%lld: HybridEP's kernel rates are published at 16 and 32 SMs only (DeepEP hybrid-ep branch, "
                   "GB200 table; plan/README.md)", v);
  p->moe_hybridep_num_sms = (int)v;
  if (tsj_bool_opt(layout, "moe_pad_expert_input_to_capacity", false, &p->moe_pad_to_capacity, file, "layout", e))
    return -1;
  if (p->moe_pad_to_capacity && !(p->capacity_factor > 0))
    return ts_fail(e, file, "layout.moe_pad_expert_input_to_capacity",
                   "true needs layout.capacity_factor (the capacity each expert's input is padded to)");
  if (p->moe_pad_to_capacity && p->moe_flex)
    return ts_fail(e, file, "layout.moe_pad_expert_input_to_capacity",
                   "true with moe_token_dispatcher_type \"flex\": Megatron-Core's flex dispatcher does not support it");
  return tsj_real_opt(layout, "moe_imbalance", 1.0, 1e6, 0.0, &p->moe_imbalance, file, "layout", e);
}

const char *const plan_host_framework_names[] = {"executor", "megatron-core", NULL};

/* layout.decoder_first/last_pipeline_num_layers and the two account_for_* switches: uneven stages. */
static int load_stage_split(json_t *layout, const char *file, plan *p, ts_err *e) {
  long long v;
  if (tsj_int_opt(layout, "decoder_first_pipeline_num_layers", 1, 1 << 16, 0, &v, file, "layout", e)) return -1;
  p->first_stage_layers = (int)v;
  if (tsj_int_opt(layout, "decoder_last_pipeline_num_layers", 1, 1 << 16, 0, &v, file, "layout", e)) return -1;
  p->last_stage_layers = (int)v;
  if (tsj_bool_opt(layout, "account_for_embedding_in_pipeline_split", false, &p->account_embedding, file, "layout",
                   e) ||
      tsj_bool_opt(layout, "account_for_loss_in_pipeline_split", false, &p->account_loss, file, "layout", e))
    return -1;
  return 0;
}

/* The "layout" object: parallel sizes, order, recomputation, then each family of fields. */
static int load_layout(json_t *root, const char *file, plan *p, ts_err *e) {
  static const char *const layout_keys[] = {"dp", "tp", "pp", "vpp", "sequence_parallel", "order", "zero1",
                                            "recompute", "recompute_modules", "recompute_num_layers", "tp_overlap_chunks",
                                            "pp_scatter_gather", "grad_reduce_in_fp32",
                                            "decoder_first_pipeline_num_layers",
                                            "decoder_last_pipeline_num_layers",
                                            "account_for_embedding_in_pipeline_split",
                                            "account_for_loss_in_pipeline_split",
                                            "data_parallel_sharding_strategy", "overlap_grad_reduce",
                                            "overlap_param_gather", "zero3_prefetch_layers",
                                            "tp_comm_overlap", "tp_comm_overlap_cfg", "context_parallel_size", "cp_comm_type",
                                            "ep", "expert_tp", "capacity_factor", "moe_imbalance",
                                            "moe_token_dispatcher_type", "moe_flex_dispatcher_backend",
                                            "moe_hybridep_num_sms", "moe_pad_expert_input_to_capacity", "fp8",
                                            "fp8_param_gather", NULL};
  json_t *layout = tsj_object(root, "layout", file, NULL, e);
  if (!layout || tsj_only_keys(layout, layout_keys, file, "layout", e)) return -1;
  long long v;
  if (tsj_int(layout, "dp", 1, 1 << 20, &v, file, "layout", e)) return -1;
  p->dp = (int)v;
  if (tsj_int(layout, "tp", 1, 1 << 20, &v, file, "layout", e)) return -1;
  p->tp = (int)v;
  if (tsj_int(layout, "pp", 1, 1 << 20, &v, file, "layout", e)) return -1;
  p->pp = (int)v;
  if (tsj_int_opt(layout, "vpp", 1, 1024, 1, &v, file, "layout", e)) return -1;
  p->vpp = (int)v;
  if (tsj_bool_opt(layout, "sequence_parallel", false, &p->sequence_parallel, file, "layout", e)) return -1;
  int order, recompute;
  if (tsj_enum_opt(layout, "order", order_names, PLAN_ORDER_TP_DP_PP, &order, file, "layout", e)) return -1;
  p->order = (plan_order)order;
  if (tsj_bool_opt(layout, "zero1", false, &p->zero1, file, "layout", e)) return -1;
  if (tsj_enum_opt(layout, "recompute", recompute_names, MODEL_RECOMPUTE_NONE, &recompute, file, "layout", e))
    return -1;
  p->recompute = (model_recompute)recompute;
  if (plan_load_recompute_modules(layout, file, p, e)) return -1;
  if (tsj_int_opt(layout, "tp_overlap_chunks", 1, 16, 1, &v, file, "layout", e)) return -1;
  p->tp_overlap_chunks = (int)v;
  if (tsj_bool_opt(layout, "pp_scatter_gather", false, &p->pp_scatter_gather, file, "layout", e)) return -1;
  bool grad_fp32;
  if (tsj_bool_opt(layout, "grad_reduce_in_fp32", true, &grad_fp32, file, "layout", e)) return -1;
  p->grad_reduce_bf16 = !grad_fp32;
  if (load_stage_split(layout, file, p, e) || plan_load_zero_fields(layout, file, p, e)) return -1;
  if (tsj_bool_opt(layout, "tp_comm_overlap", false, &p->tp_comm_overlap, file, "layout", e)) return -1;
  if (plan_load_tpo_cfg(layout, file, p, e) || plan_load_cp_fields(layout, file, p, e) ||
      load_moe_layout(layout, file, p, e) || plan_load_fp8_fields(layout, file, p, e))
    return -1;
  return 0;
}

/* The "batch" object. */
static int load_batch(json_t *root, const char *file, plan *p, ts_err *e) {
  static const char *const batch_keys[] = {"micro", "global", "seq", NULL};
  json_t *batch = tsj_object(root, "batch", file, NULL, e);
  if (!batch || tsj_only_keys(batch, batch_keys, file, "batch", e)) return -1;
  long long v;
  if (tsj_int(batch, "micro", 1, 1 << 20, &v, file, "batch", e)) return -1;
  p->micro_batch = (int)v;
  if (tsj_int(batch, "global", 1, 1LL << 40, &p->global_batch, file, "batch", e)) return -1;
  if (tsj_int(batch, "seq", 1, 1 << 24, &v, file, "batch", e)) return -1;
  p->seq = (int)v;
  return 0;
}

/* The "codec" object (one codec per traffic class), codec_min_bytes and dp_bucket_bytes, whose
 * default needs the layout loaded. */
static int load_codecs(json_t *root, const char *file, plan *p, ts_err *e) {
  static const char *const codec_keys[] = {"tp_fwd", "tp_bwd", "pp", "dp", "ep", "cp", NULL};
  bool failed;
  json_t *codecs = tsj_object_opt(root, "codec", file, NULL, e, &failed);
  if (failed) return -1;
  if (codecs && tsj_only_keys(codecs, codec_keys, file, "codec", e)) return -1;
  for (int t = 0; t < PLAN_TRAFFIC_COUNT; t++)
    if (load_codec(codecs, t, file, &p->codec[t], e)) return -1;
  if (tsj_real_opt(root, "codec_min_bytes", 0.0, 1e15, PLAN_DEFAULT_CODEC_MIN_BYTES, &p->codec_min_bytes, file,
                   NULL, e))
    return -1;
  /* Bytes of gradient as reduced: the default holds Megatron-LM's parameter
   * count per bucket in either gradient precision. */
  double bucket_dflt = plan_default_dp_bucket_bytes(plan_dp_shards(p)) / 4.0 * plan_grad_bytes(p);
  if (tsj_real_opt(root, "dp_bucket_bytes", 1.0, 1e15, bucket_dflt, &p->dp_bucket_bytes, file, NULL, e))
    return -1;
  return 0;
}

/* The host's launch and sync costs and which framework's host loop is priced. */
static int load_host(json_t *root, const char *file, plan *p, ts_err *e) {
  if (tsj_real_opt(root, "host_launch_us", 0.0, 1e4, 0.0, &p->host_launch_us, file, NULL, e) ||
      tsj_real_opt(root, "host_sync_us", 0.0, 1e4, 0.0, &p->host_sync_us, file, NULL, e))
    return -1;
  if (json_object_get(root, "host_launch_us") && !(p->host_launch_us > 0))
    return ts_fail(e, file, "host_launch_us", "must be > 0 (microseconds per launch; leave it out for the calibration's)");
  if (json_object_get(root, "host_sync_us") && !(p->host_sync_us > 0))
    return ts_fail(e, file, "host_sync_us", "must be > 0 (microseconds; leave it out for the calibration's)");
  int fw;
  if (tsj_enum_opt(root, "host_framework", plan_host_framework_names, PLAN_HOST_EXECUTOR, &fw, file, NULL, e))
    return -1;
  p->host_framework = (plan_host_framework)fw;
  return 0;
}

/* How a step runs: attention backend, dropouts, the host's costs, fusions, experimental features. */
static int load_run_options(json_t *root, const char *file, plan *p, ts_err *e) {
  static const char *const attention_names[] = {"fused", "unfused", "flash", "executor", NULL};
  int attention;
  if (tsj_enum_opt(root, "attention_backend", attention_names, PLAN_ATTENTION_FUSED, &attention, file, NULL, e))
    return -1;
  p->attention_backend = (plan_attention_backend)attention;
  if (tsj_real_opt(root, "attention_dropout", 0.0, 0.99, 0.0, &p->attention_dropout, file, NULL, e)) return -1;
  if (tsj_real_opt(root, "hidden_dropout", -1e300, 1e300, 0.1, &p->hidden_dropout, file, NULL, e)) return -1;
  if (p->hidden_dropout < 0.0 || p->hidden_dropout >= 1.0)
    return ts_fail(e, file, "hidden_dropout", "%g is out of range [0, 1) (a dropout probability)", p->hidden_dropout);
  if (load_host(root, file, p, e)) return -1;
  bool bias_fusion;
  if (tsj_bool_opt(root, "bias_fusion", true, &bias_fusion, file, NULL, e)) return -1;
  p->bias_unfused = !bias_fusion;
  bool ce_fusion; /* default true: tacosim's one-pass loss kernel (Megatron's own default is false) */
  if (tsj_bool_opt(root, "cross_entropy_loss_fusion", true, &ce_fusion, file, NULL, e)) return -1;
  p->ce_unfused = !ce_fusion;
  /* the caching allocator's reserve, a fraction of the activations (plan_memory.c); [0, 1) */
  p->alloc_reserve_given = json_object_get(root, "alloc_reserve") != NULL;
  if (tsj_real_opt(root, "alloc_reserve", 0.0, 0.999999, PLAN_DEFAULT_ALLOC_RESERVE, &p->alloc_reserve, file, NULL, e))
    return -1;
  return tsj_bool_opt(root, "enable_experimental", false, &p->enable_experimental, file, NULL, e);
}

int plan_parse_alloc_reserve(const char *cmd, const char *s, double *out, ts_err *e) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v >= 0.0 && v < 1.0))
    return ts_fail(e, cmd, "--alloc-reserve", "\"%s\" is not a fraction in [0, 1) (of the activations)", s);
  *out = v;
  return 0;
}

/* The model and the cluster (their own loaders check their files), then the plan as a whole. */
static int load_model_cluster(const char *model_name, const char *cluster_name, long long layers_override,
                              const char *models_dir, const char *topologies_dir, const char *file, plan *p,
                              ts_err *e) {
  ts_err sub;
  if (model_load(model_name, models_dir, &p->model, &sub))
    return ts_fail(e, file, "model", "cannot load \"%s\": %s", model_name, sub.msg);
  if (topo_load(cluster_name, topologies_dir, &p->cluster, &sub))
    return ts_fail(e, file, "cluster", "cannot load \"%s\": %s", cluster_name, sub.msg);
  p->layers = layers_override ? (int)layers_override : p->model.layers;
  p->model.layers = p->layers;
  p->vocab_padded = model_vocab_per_gpu(&p->model, p->tp) * p->tp;
  if (model_is_moe(&p->model) && p->moe_imbalance == 0) p->moe_imbalance = PLAN_DEFAULT_MOE_IMBALANCE;
  return plan_validate(p, e);
}

static int load_root(json_t *root, const char *file, const char *models_dir, const char *topologies_dir,
                     const plan_load_options *o, plan *p, ts_err *e) {
  static const char *const top_keys[] = {"schema", "name", "description", "model", "cluster", "layout", "batch",
                                         "schedule", "layers_override", "codec", "codec_min_bytes",
                                         "dp_bucket_bytes", "attention_backend",
                                         "attention_dropout", "hidden_dropout", "bias_fusion", "cross_entropy_loss_fusion",
                                         "host_launch_us", "host_sync_us", "host_framework", "enable_experimental",
                                         "alloc_reserve", NULL};
  if (tsj_schema(root, 1, file, e)) return -1;
  /* An inference plan reaches a training command: say what it is, not "unknown field". */
  if (plan_json_is_inference(root))
    return ts_fail(e, file, "kind",
                   "an inference plan: `tacosim plan` and `tacosim simulate` read it; this command reads "
                   "training plans only");
  if (tsj_only_keys(root, top_keys, file, NULL, e)) return -1;
  char model_name[PLAN_JSON_NAME_LEN], cluster_name[PLAN_JSON_NAME_LEN];
  if (plan_json_names(root, file, p->name, sizeof p->name, p->description, sizeof p->description, model_name,
                      cluster_name, e))
    return -1;
  if (load_layout(root, file, p, e) || load_batch(root, file, p, e)) return -1;

  int sched;
  if (tsj_enum(root, "schedule", schedule_names, &sched, file, NULL, e)) return -1;
  p->schedule = (plan_schedule)sched;
  long long layers_override;
  if (tsj_int_opt(root, "layers_override", 1, 1 << 16, 0, &layers_override, file, NULL, e)) return -1;

  if (load_codecs(root, file, p, e) || load_run_options(root, file, p, e)) return -1;
  if (o && o->alloc_reserve_set) p->alloc_reserve = o->alloc_reserve, p->alloc_reserve_given = true;
  return load_model_cluster(model_name, cluster_name, layers_override, models_dir, topologies_dir, file, p, e);
}

int plan_from_json_text(const char *text, size_t len, const char *what, const char *models_dir,
                        const char *topologies_dir, plan *p, ts_err *e) {
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", what ? what : "plan");
  json_t *root = tsj_load_string(text, len, p->path, e);
  if (!root) return -1;
  int rc = load_root(root, p->path, models_dir, topologies_dir, NULL, p, e);
  json_decref(root);
  return rc;
}

int plan_load_opts(const char *path, const char *models_dir, const char *topologies_dir, const plan_load_options *o,
                   plan *p, ts_err *e) {
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", path);
  json_t *root = tsj_load_file(path, e);
  if (!root) return -1;
  int rc = load_root(root, path, models_dir, topologies_dir, o, p, e);
  json_decref(root);
  return rc;
}

int plan_load(const char *path, const char *models_dir, const char *topologies_dir, plan *p, ts_err *e) {
  return plan_load_opts(path, models_dir, topologies_dir, NULL, p, e);
}

/* ---- validation ---- */

static int validate_codecs(const plan *p, ts_err *e) {
  const char *f = p->path;
  char field[96];
  for (int t = 0; t < PLAN_TRAFFIC_COUNT; t++) {
    const plan_codec *c = &p->codec[t];
    char path[64];
    snprintf(path, sizeof path, "codec.%s", traffic_keys[t]);
    if (plan_codec_check(c, p->model.hidden, f, path, e)) return -1;
    if (!plan_codec_has_caat(c->kind)) continue;
    snprintf(field, sizeof field, "%s.kind", path);
    if (t == PLAN_TRAFFIC_EP) continue; /* plan_moe_validate names the reason */
    if (t == PLAN_TRAFFIC_PP || t == PLAN_TRAFFIC_DP || t == PLAN_TRAFFIC_CP)
      return ts_fail(e, f, field,
                     "CAAT-Net only changes tensor-parallel all-reduces; use it on tp_fwd and tp_bwd");
    if (p->sequence_parallel)
      return ts_fail(e, f, field, "CAAT-Net cannot be combined with sequence_parallel (it uses no SP)");
    if (p->tp < 2) return ts_fail(e, f, field, "CAAT-Net needs tensor parallelism (tp >= 2)");
  }
  /* CAAT-Net is a property of the model's forward pass; its backward rule
   * follows from it, so both directions must agree. */
  const plan_codec *fw = &p->codec[PLAN_TRAFFIC_TP_FWD], *bw = &p->codec[PLAN_TRAFFIC_TP_BWD];
  if (plan_codec_has_caat(fw->kind) != plan_codec_has_caat(bw->kind) ||
      (plan_codec_has_caat(fw->kind) && fw->p != bw->p))
    return ts_fail(e, f, "codec.tp_bwd",
                   "CAAT-Net must be set on both tp_fwd and tp_bwd with the same p (the backward rule follows "
                   "from the forward one)");
  return 0;
}

/* tp_overlap_chunks splits the forward row-parallel GEMMs by token rows, each
 * chunk all-reduced on its own: only where that is a plain all-reduce of
 * whole rows (no reduce-scatter under SP, no CAAT-Net channel subset, no
 * TACO groups that would straddle chunk boundaries). */
static int validate_tp_overlap(const plan *p, ts_err *e) {
  const char *f = p->path, *field = "layout.tp_overlap_chunks";
  const int k = p->tp_overlap_chunks;
  if (k <= 1) return 0;
  if (p->tp < 2) return ts_fail(e, f, field, "%d chunks need tensor parallelism (tp >= 2)", k);
  if (p->sequence_parallel)
    return ts_fail(e, f, field, "%d chunks with sequence_parallel are not supported (the forward collective is a "
                   "reduce-scatter there); use 1", k);
  if (p->codec[PLAN_TRAFFIC_TP_FWD].kind != PLAN_CODEC_NONE)
    return ts_fail(e, f, field, "%d chunks with codec.tp_fwd \"%s\" are not supported (only an uncompressed "
                   "forward all-reduce is split); use 1", k, plan_codec_kind_name(p->codec[PLAN_TRAFFIC_TP_FWD].kind));
  long long tokens = (long long)p->micro_batch * plan_local_seq(p);
  if (tokens % k)
    return ts_fail(e, f, field, "%d does not divide the %lld tokens (micro x seq) of a micro-batch", k, tokens);
  return 0;
}

/* pp_scatter_gather slices a message that every TP rank holds whole: it
 * needs pipeline messages, TP ranks to split them between, and no sequence
 * parallelism (whose messages are already one 1/tp slice per rank). */
static int validate_pp_scatter_gather(const plan *p, ts_err *e) {
  const char *f = p->path, *field = "layout.pp_scatter_gather";
  if (!p->pp_scatter_gather) return 0;
  if (p->pp < 2) return ts_fail(e, f, field, "true needs pipeline parallelism (pp >= 2): there are no messages");
  if (p->tp < 2) return ts_fail(e, f, field, "true needs tensor parallelism (tp >= 2) to split the messages");
  if (p->sequence_parallel)
    return ts_fail(e, f, field, "true with sequence_parallel: the messages are already 1/tp per rank there; "
                   "use false");
  return 0;
}

int plan_validate(const plan *p, ts_err *e) {
  const char *f = p->path;
  const model_config *m = &p->model;
  if (p->dp < 1 || p->tp < 1 || p->pp < 1 || p->vpp < 1)
    return ts_fail(e, f, "layout", "dp, tp, pp and vpp must be at least 1");
  if (p->micro_batch < 1 || p->global_batch < 1 || p->seq < 1)
    return ts_fail(e, f, "batch", "micro, global and seq must be at least 1");
  if (p->layers < 1) return ts_fail(e, f, "layers_override", "%d must be at least 1", p->layers);

  /* Tensor parallelism splits heads, KV heads and the FFN; the vocabulary is
   * padded to a multiple of 128 * tp, as Megatron-LM does, so it never blocks. */
  if (m->heads % p->tp)
    return ts_fail(e, f, "layout.tp", "%d does not divide the %d attention heads of %s", p->tp, m->heads, m->name);
  if (m->kv_heads % p->tp)
    return ts_fail(e, f, "layout.tp", "%d does not divide the %d KV heads of %s", p->tp, m->kv_heads, m->name);
  if (m->ffn_hidden % p->tp)
    return ts_fail(e, f, "layout.tp", "%d does not divide ffn_hidden %d of %s", p->tp, m->ffn_hidden, m->name);
  /* A TP group must sit inside one node (rejected, not warned: TP traffic is
   * sized for NVLink, and ranks are placed TP-innermost). */
  if (p->tp > p->cluster.gpus_per_node || p->cluster.gpus_per_node % p->tp)
    return ts_fail(e, f, "layout.tp", "%d must divide the %d GPUs per node of %s, so a TP group stays in a node",
                   p->tp, p->cluster.gpus_per_node, p->cluster.name);
  if (p->seq > m->max_seq)
    return ts_fail(e, f, "batch.seq", "%d exceeds the maximum sequence %d of %s", p->seq, m->max_seq, m->name);
  if (p->sequence_parallel && p->seq % p->tp)
    return ts_fail(e, f, "layout.sequence_parallel", "batch.seq %d is not divisible by tp %d", p->seq, p->tp);

  if (p->pp > p->layers)
    return ts_fail(e, f, "layout.pp", "%d pipeline stages for %d layers", p->pp, p->layers);
  if (p->vpp > 1 && p->schedule != PLAN_SCHED_INTERLEAVED_1F1B)
    return ts_fail(e, f, "layout.vpp", "%d virtual stages need \"schedule\": \"interleaved-1f1b\"", p->vpp);
  if (p->schedule == PLAN_SCHED_INTERLEAVED_1F1B) {
    if (p->vpp < 2) return ts_fail(e, f, "layout.vpp", "interleaved-1f1b needs vpp >= 2 (vpp 1 is plain 1f1b)");
    if (p->pp < 2) return ts_fail(e, f, "layout.pp", "interleaved-1f1b needs pp >= 2");
  }
  if (plan_validate_stages(p, e)) return -1;

  long long per_step = (long long)p->micro_batch * p->dp;
  if (p->global_batch % per_step)
    return ts_fail(e, f, "batch.global", "%lld is not divisible by micro %d x dp %d", p->global_batch,
                   p->micro_batch, p->dp);
  long long micro_batches = p->global_batch / per_step;
  /* Bounds that keep programs finite and tags inside int32. */
  if (micro_batches > (1 << 20) || micro_batches * p->pp * p->vpp * 2 >= INT_MAX)
    return ts_fail(e, f, "batch.global", "%lld micro-batches per iteration are more than tacosim handles",
                   micro_batches);
  if (p->schedule == PLAN_SCHED_INTERLEAVED_1F1B && micro_batches % p->pp)
    return ts_fail(e, f, "batch.global",
                   "interleaved-1f1b needs the micro-batches per iteration (%lld) to be a multiple of pp %d",
                   micro_batches, p->pp);

  long long world = (long long)p->dp * p->tp * p->pp * plan_cp(p);
  if (world > topo_total_gpus(&p->cluster))
    return ts_fail(e, f, "layout", "dp x tp x pp x cp = %lld GPUs, but %s has %d", world, p->cluster.name,
                   topo_total_gpus(&p->cluster));

  if (plan_validate_cp(p, e)) return -1;
  if (plan_check_program_size(p, f, e)) return -1;
  if (plan_moe_validate(p, e)) return -1;
  if (plan_validate_recompute(p, e)) return -1;
  if (validate_codecs(p, e)) return -1;
  if (validate_tp_overlap(p, e)) return -1;
  if (validate_pp_scatter_gather(p, e)) return -1;
  if (plan_validate_zero(p, e)) return -1;
  if (plan_validate_tpo(p, e)) return -1;
  if (plan_validate_fp8(p, e)) return -1;

  plan_memory mem;
  if (plan_memory_per_gpu(p, &mem)) return ts_fail(e, f, "layout", "memory per GPU cannot be computed");
  double hbm = p->cluster.gpu.hbm_gib * 1024.0 * 1024.0 * 1024.0;
  char alloc[96] = "";
  if (mem.allocator > 0)
    snprintf(alloc, sizeof alloc, " with the allocator reserve %.1f (alloc_reserve %g)", mem.allocator / 1073741824.0,
             plan_alloc_reserve(p));
  if (mem.total > hbm)
    return ts_fail(e, f, "layout",
                   "needs %.1f GiB per GPU (weights %.1f, gradients %.1f, optimizer %.1f, activations %.1f, overhead %.1f%s) but "
                   "the %s has %.0f GiB; try more tp/pp, zero1 or recompute",
                   mem.total / 1073741824.0, mem.weights / 1073741824.0, mem.gradients / 1073741824.0,
                   mem.optimizer / 1073741824.0, mem.activations / 1073741824.0, mem.overhead / 1073741824.0,
                   alloc, p->cluster.gpu.name,
                   p->cluster.gpu.hbm_gib);
  return 0;
}

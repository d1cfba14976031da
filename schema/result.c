/* result.c — writer and strict reader of result files (JSON + CSV). */
#include "result.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ts_json.h"

static const char *const source_names[] = {"simulated", "measured", NULL};

void schema_result_init(schema_result *r, schema_source source) {
  memset(r, 0, sizeof *r);
  r->source = source;
  r->hidden_dropout = -1.0;
  r->alloc_reserve = -1.0;
}

void schema_result_free(schema_result *r) {
  free(r->ranks);
  free(r->ops);
  free(r->notes);
  r->ranks = NULL;
  r->ops = NULL;
  r->notes = NULL;
  r->n_ranks = r->n_ops = r->n_notes = 0;
}

/* Appends one element, growing the array at powers of two. */
static int append(void **arr, int *n, size_t elem, const void *item) {
  if ((*n & (*n - 1)) == 0) {
    void *p = realloc(*arr, (size_t)(*n ? *n * 2 : 4) * elem);
    if (!p) return -1;
    *arr = p;
  }
  memcpy((char *)*arr + (size_t)*n * elem, item, elem);
  (*n)++;
  return 0;
}

int schema_result_add_rank(schema_result *r, const schema_rank_stat *s) {
  return append((void **)&r->ranks, &r->n_ranks, sizeof *s, s);
}
int schema_result_add_op(schema_result *r, const schema_op_record *op) {
  return append((void **)&r->ops, &r->n_ops, sizeof *op, op);
}
int schema_result_add_note(schema_result *r, const char *note) {
  char buf[256];
  snprintf(buf, sizeof buf, "%s", note);
  return append((void **)&r->notes, &r->n_notes, sizeof buf, buf);
}

/* ---- writers ---- */

/* an op record; what the op was (kind, collective, codec, sizes, merged) only where set */
static json_t *op_json(const schema_op_record *op) {
  json_t *o = json_pack("{s:s,s:i,s:s,s:f,s:f}", "name", op->name, "rank", op->rank, "stream", op->stream, "start_s",
                        op->start_s, "dur_s", op->dur_s);
  if (op->kind[0]) json_object_set_new(o, "kind", json_string(op->kind));
  if (op->coll[0]) json_object_set_new(o, "coll", json_string(op->coll));
  if (op->codec[0]) json_object_set_new(o, "codec", json_string(op->codec));
  if (op->flops > 0) json_object_set_new(o, "flops", json_real(op->flops));
  if (op->bytes > 0) json_object_set_new(o, "bytes", json_real(op->bytes));
  if (op->wire_bytes > 0) json_object_set_new(o, "wire_bytes", json_real(op->wire_bytes));
  if (op->merged > 0) json_object_set_new(o, "merged", json_integer(op->merged));
  if (op->merged_names[0]) json_object_set_new(o, "merged_names", json_string(op->merged_names));
  if (op->flow > 0) json_object_set_new(o, "flow", json_integer(op->flow));
  return o;
}

static json_t *to_json(const schema_result *r) {
  json_t *root = json_object();
  json_object_set_new(root, "schema", json_integer(SCHEMA_RESULT_VERSION));
  json_object_set_new(root, "source", json_string(source_names[r->source]));
  json_object_set_new(root, "plan", json_string(r->plan));
  if (r->calibration[0]) json_object_set_new(root, "calibration", json_string(r->calibration));
  if (r->mode[0]) json_object_set_new(root, "mode", json_string(r->mode));
  if (r->options[0]) json_object_set_new(root, "options", json_string(r->options));
  if (r->attention_backend[0]) json_object_set_new(root, "attention_backend", json_string(r->attention_backend));
  if (r->cross_entropy_loss_fusion)
    json_object_set_new(root, "cross_entropy_loss_fusion", json_boolean(r->cross_entropy_loss_fusion > 0));
  if (r->host_framework[0]) json_object_set_new(root, "host_framework", json_string(r->host_framework));
  if (r->fp8[0]) json_object_set_new(root, "fp8", json_string(r->fp8));
  if (r->hidden_dropout >= 0) json_object_set_new(root, "hidden_dropout", json_real(r->hidden_dropout));
  if (r->alloc_reserve >= 0) json_object_set_new(root, "alloc_reserve", json_real(r->alloc_reserve));
  if (r->kind[0]) {
    json_object_set_new(root, "kind", json_string(r->kind));
    json_object_set_new(root, "ttft_s", json_real(r->ttft_s));
    json_object_set_new(root, "tpot_s", json_real(r->tpot_s));
  }
  json_object_set_new(root, "iteration_time_s", json_real(r->iteration_time_s));
  json_object_set_new(root, "tokens_per_s", json_real(r->tokens_per_s));
  json_object_set_new(root, "tflops_per_gpu", json_real(r->tflops_per_gpu));
  json_object_set_new(root, "mfu", json_real(r->mfu));
  json_object_set_new(root, "memory_per_gpu_bytes", json_integer((json_int_t)r->memory_per_gpu_bytes));
  const schema_breakdown *b = &r->breakdown;
  json_object_set_new(root, "breakdown",
                      json_pack("{s:f,s:f,s:f,s:f,s:f,s:f}", "compute_s", b->compute_s, "tp_exposed_s",
                                b->tp_exposed_s, "pp_exposed_s", b->pp_exposed_s, "dp_exposed_s", b->dp_exposed_s,
                                "codec_s", b->codec_s, "bubble_s", b->bubble_s));
  if (b->ep_exposed_s > 0 || b->imbalance_s > 0) { /* MoE plans only: dense results keep their keys */
    json_t *bo = json_object_get(root, "breakdown");
    json_object_set_new(bo, "ep_exposed_s", json_real(b->ep_exposed_s));
    json_object_set_new(bo, "imbalance_s", json_real(b->imbalance_s));
  }
  if (b->host_wait_s > 0) /* host-bound phases only */
    json_object_set_new(json_object_get(root, "breakdown"), "host_wait_s", json_real(b->host_wait_s));
  if (b->cp_exposed_s > 0) /* context-parallel plans only */
    json_object_set_new(json_object_get(root, "breakdown"), "cp_exposed_s", json_real(b->cp_exposed_s));
  json_t *ranks = json_array();
  for (int i = 0; i < r->n_ranks; i++) {
    const schema_rank_stat *s = &r->ranks[i];
    json_t *o = json_pack("{s:i,s:f,s:f,s:f}", "rank", s->rank, "busy_s", s->busy_s, "compute_s", s->compute_s,
                          "comm_s", s->comm_s);
    if (s->clock_gemm_speed > 0) {
      json_object_set_new(o, "clock_duty", json_real(s->clock_duty));
      json_object_set_new(o, "clock_gemm_speed", json_real(s->clock_gemm_speed));
      json_object_set_new(o, "clock_mem_speed", json_real(s->clock_mem_speed));
      json_object_set_new(o, "clock_cycle_us", json_real(s->clock_cycle_us));
    }
    if (s->clock_mhz > 0) {
      json_object_set_new(o, "clock_mhz", json_real(s->clock_mhz));
      json_object_set_new(o, "clock_next_gemm_speed", json_real(s->clock_next_gemm_speed));
      json_object_set_new(o, "clock_next_mem_speed", json_real(s->clock_next_mem_speed));
    }
    json_array_append_new(ranks, o);
  }
  json_object_set_new(root, "ranks", ranks);
  if (r->clock_passes) json_object_set_new(root, "clock_passes", json_integer(r->clock_passes));
  if (r->n_ops) {
    json_t *ops = json_array();
    for (int i = 0; i < r->n_ops; i++)
      json_array_append_new(ops, op_json(&r->ops[i]));
    json_object_set_new(root, "ops", ops);
  }
  if (r->n_notes) {
    json_t *notes = json_array();
    for (int i = 0; i < r->n_notes; i++) json_array_append_new(notes, json_string(r->notes[i]));
    json_object_set_new(root, "notes", notes);
  }
  if (r->source == SCHEMA_SOURCE_MEASURED) {
    json_object_set_new(root, "iterations", json_integer(r->iterations));
    json_object_set_new(root, "warmup", json_integer(r->warmup));
    json_object_set_new(root, "min_s", json_real(r->min_s));
    json_object_set_new(root, "median_s", json_real(r->median_s));
    json_object_set_new(root, "max_s", json_real(r->max_s));
    const schema_machine *m = &r->machine;
    const char *keys[] = {"gpu", "driver", "cuda", "nccl", "transport"};
    const char *vals[] = {m->gpu, m->driver, m->cuda, m->nccl, m->transport};
    json_t *mo = json_object();
    for (int i = 0; i < 5; i++)
      if (vals[i][0]) json_object_set_new(mo, keys[i], json_string(vals[i]));
    json_object_set_new(root, "machine", mo);
  }
  return root;
}

int schema_result_write_json(const schema_result *r, FILE *out, ts_err *e) {
  json_t *root = to_json(r);
  int rc = tsj_dump_data(root, out, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
  json_decref(root);
  if (rc) return ts_fail_sys(e, "cannot write result JSON");
  return 0;
}

int schema_result_write_csv(const schema_result *r, FILE *out, ts_err *e) {
  const schema_breakdown *b = &r->breakdown;
  fprintf(out, "# tacosim result (%s) plan=%s calibration=%s\n", source_names[r->source], r->plan,
          r->calibration[0] ? r->calibration : "-");
  if (r->options[0]) fprintf(out, "# options %s\n", r->options);
  fprintf(out,
          "# iteration_time_s tokens_per_s tflops_per_gpu mfu memory_per_gpu_bytes compute_s tp_exposed_s "
          "pp_exposed_s dp_exposed_s codec_s bubble_s\n");
  fprintf(out, "%.9g %.9g %.9g %.9g %.0f %.9g %.9g %.9g %.9g %.9g %.9g\n", r->iteration_time_s, r->tokens_per_s,
          r->tflops_per_gpu, r->mfu, r->memory_per_gpu_bytes, b->compute_s, b->tp_exposed_s, b->pp_exposed_s,
          b->dp_exposed_s, b->codec_s, b->bubble_s);
  fprintf(out, "\n\n# rank busy_s compute_s comm_s\n");
  for (int i = 0; i < r->n_ranks; i++)
    fprintf(out, "%d %.9g %.9g %.9g\n", r->ranks[i].rank, r->ranks[i].busy_s, r->ranks[i].compute_s,
            r->ranks[i].comm_s);
  if (ferror(out)) return ts_fail_sys(e, "cannot write result CSV");
  return 0;
}

static int save(const schema_result *r, const char *path, int csv, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail(e, path, NULL, "cannot open for writing (%s)", strerror(errno));
  int rc = csv ? schema_result_write_csv(r, f, e) : schema_result_write_json(r, f, e);
  if (fclose(f) && !rc) rc = ts_fail_sys(e, "%s: cannot write (%s)", path, strerror(errno));
  return rc;
}
int schema_result_save_json(const schema_result *r, const char *path, ts_err *e) { return save(r, path, 0, e); }
int schema_result_save_csv(const schema_result *r, const char *path, ts_err *e) { return save(r, path, 1, e); }

/* ---- reader ---- */

#define BIG 1e18

/* ---- which keys a result may hold (the loader refuses all others, as every loader does) ---- */

static int in_list(const char *key, const char *const *list) {
  for (int i = 0; list && list[i]; i++)
    if (strcmp(key, list[i]) == 0) return 1;
  return 0;
}

/* Refuses a member of obj that is in none of the NULL-terminated lists
 * allowed[0..n); path names obj in the message ("" for the top level). */
static int known_keys(json_t *obj, const char *const *const *allowed, int n, const char *file, const char *path,
                      ts_err *e) {
  const char *key;
  json_t *v;
  json_object_foreach(obj, key, v) {
    int ok = 0;
    for (int i = 0; i < n && !ok; i++) ok = in_list(key, allowed[i]);
    if (!ok) {
      char f[256];
      snprintf(f, sizeof f, "%s%s%.200s", path && *path ? path : "", path && *path ? "." : "", key);
      return ts_fail(e, file, f, "unknown field");
    }
  }
  return 0;
}

static int only_keys(json_t *obj, const char *const *allowed, const char *file, const char *path, ts_err *e) {
  return known_keys(obj, &allowed, 1, file, path, e);
}

/* "cross_entropy_loss_fusion" (optional): 1 true, -1 false, 0 absent. */
static int read_ce_fusion(json_t *root, const char *file, schema_result *r, ts_err *e) {
  if (!json_object_get(root, "cross_entropy_loss_fusion")) return 0;
  bool v;
  if (tsj_bool(root, "cross_entropy_loss_fusion", &v, file, "", e)) return -1;
  r->cross_entropy_loss_fusion = v ? 1 : -1;
  return 0;
}

/* Every result's top level (to_json). */
static const char *const top_keys[] = {"schema", "source", "plan", "calibration", "mode", "options", "attention_backend",
                                       "cross_entropy_loss_fusion", "host_framework", "fp8", "hidden_dropout", "alloc_reserve", "iteration_time_s",
                                       "tokens_per_s", "tflops_per_gpu", "mfu", "memory_per_gpu_bytes",
                                       "breakdown", "ranks", "clock_passes", "ops", "notes", NULL};
/* A measured result's spread and machine ("source": "measured"). */
static const char *const measured_keys[] = {"iterations", "warmup", "min_s", "median_s", "max_s", "machine", NULL};
/* An inference result ("kind": "inference"). */
static const char *const inference_keys[] = {"kind", "ttft_s", "tpot_s", NULL};
/* What tacosim simulate writes besides for an inference plan (sim/sim_infer_report.c): its
 * phases, memory and codec choices; checked here, not kept (tacosim compare does not show them). */
static const char *const inference_detail_keys[] = {"codec", "quantization", "prefill_attention", "decode_attention", "total_s", "memory", "prefill", "decode",
                                                    "plain_nccl", "speedup", "codec_choices", "mla",
                                                    "tokens_per_s_per_gpu", "requests_per_s", "inflight", "layout",
                                                    NULL};

/* A key that belongs to another kind of result is named as such. */
static int misplaced(json_t *root, const char *const *keys, const char *file, const char *what, ts_err *e) {
  for (int i = 0; keys[i]; i++)
    if (json_object_get(root, keys[i])) return ts_fail(e, file, keys[i], "only in %s", what);
  return 0;
}

/* Each member of obj (at path) listed in keys is a number in [0, BIG]; the first `required` of them
 * must be there (the rest were added later: results written before them lack them). */
static int numbers(json_t *obj, const char *const *keys, int required, const char *file, const char *path,
                   ts_err *e) {
  double x;
  if (only_keys(obj, keys, file, path, e)) return -1;
  for (int i = 0; keys[i]; i++)
    if (i < required ? tsj_real(obj, keys[i], 0, BIG, &x, file, path, e)
                     : tsj_real_opt(obj, keys[i], 0, BIG, 0, &x, file, path, e))
      return -1;
  return 0;
}

/* An optional object of an inference result: numbers, its first `required` keys there, the rest added later
 * (a phase's experts_gemm_s, the memory's activations_bytes and overhead_bytes: 2026-12-06) optional; -1
 * required: every key. */
static int detail_object(json_t *root, const char *key, const char *const *keys, int required, const char *file,
                         ts_err *e) {
  bool failed;
  json_t *o = tsj_object_opt(root, key, file, "", e, &failed);
  if (failed) return -1;
  int n = 0;
  while (keys[n]) n++;
  return o ? numbers(o, keys, required < 0 ? n : required, file, key, e) : 0;
}

/* An MLA model's decode and prefill attention and its latent cache ("mla", sim/INFERENCE.md "MLA"; 2026-12-06). */
static int check_mla(json_t *root, const char *file, ts_err *e) {
  static const char *const keys[] = {"kv_cache", "kv_bytes_per_token_layer", "decode_attention_s",
                                     "prefill_attention_s", NULL};
  static const char *const caches[] = {"latent", NULL};
  bool failed;
  int cache;
  double x;
  json_t *o = tsj_object_opt(root, "mla", file, "", e, &failed);
  if (failed) return -1;
  if (!o) return 0;
  if (only_keys(o, keys, file, "mla", e) || tsj_enum(o, "kv_cache", caches, &cache, file, "mla", e)) return -1;
  for (int i = 1; keys[i]; i++)
    if (tsj_real(o, keys[i], 0, BIG, &x, file, "mla", e)) return -1;
  return 0;
}

/* An in-flight prediction's "layout": tp and pp, and on an attention-DP plan (sim/INFERENCE.md "Attention data
 * parallelism"; 2026-12-06) ep, a number, and attention_dp, a flag. */
static int check_layout(json_t *root, const char *file, ts_err *e) {
  static const char *const keys[] = {"tp", "pp", "ep", "attention_dp", NULL};
  bool failed, flag;
  double x;
  json_t *o = tsj_object_opt(root, "layout", file, "", e, &failed);
  if (failed) return -1;
  if (!o) return 0;
  if (only_keys(o, keys, file, "layout", e) || tsj_real(o, "tp", 0, BIG, &x, file, "layout", e) ||
      tsj_real(o, "pp", 0, BIG, &x, file, "layout", e) || tsj_real_opt(o, "ep", 0, BIG, 0, &x, file, "layout", e))
    return -1;
  if (json_object_get(o, "attention_dp") && tsj_bool(o, "attention_dp", &flag, file, "layout", e)) return -1;
  return 0;
}

/* An in-flight prediction's engine settings and steady state ("inflight", sim/sim_inflight.c; 2026-12-06): numbers
 * and two flags at its top, its three objects of numbers (four on an attention-DP plan), the two step prices; and its
 * "layout". */
static int check_inflight(json_t *root, const char *file, ts_err *e) {
  static const char *const top[] = {"prompt", "generate", "max_batch", "max_batch_given", "engine_max_batch",
                                    "kv_fit_batch", "max_num_tokens", "max_num_tokens_given", "engine_max_num_tokens",
                                    "kv_cache_fraction", "tokens_per_block", "in_flight", "admitted_per_step",
                                    "decode_seqs", "step_tokens", "kv_len", "step_s", NULL};
  static const char *const flags[] = {"chunked_prefill", "token_bound", NULL};
  static const char *const prompts[] = {"k", "share_k_plus_1", NULL};
  static const char *const step[] = {"total_s", "layers_s", "gemm_s", "decode_attention_s", "prefill_attention_s",
                                     "tp_exposed_s", "ends_s", NULL};
  static const char *const run[] = {"requests", "steps", "total_s", "tokens_per_s", "ttft_mean_s", "tpot_mean_s",
                                    "in_flight_mean", NULL};
  static const char *const adp[] = {"gpus", "max_batch_per_gpu", "moe_tp", "experts_s", "exchange_s", NULL};
  /* the engine's memory before the KV cache (plan_inflight_resolve; added 2026-12-06) */
  static const char *const emem[] = {"profile_tokens", "profile_peak_bytes", "moe_tokens", "cuda_graph_max_batch",
                                     "cuda_graph_bytes", "cuda_graph_batch", "moe_max_num_tokens_given",
                                     "kv_free_bytes", NULL};
  static const char *const nested[] = {"prompts_per_step", "step", "run", "step_s_by_prompts", "attention_dp",
                                       "engine_memory", NULL};
  bool failed, flag;
  double x;
  if (check_layout(root, file, e)) return -1;
  json_t *o = tsj_object_opt(root, "inflight", file, "", e, &failed);
  if (failed) return -1;
  if (!o) return 0;
  const char *const *allowed[] = {top, flags, nested};
  if (known_keys(o, allowed, 3, file, "inflight", e)) return -1;
  for (int i = 0; top[i]; i++)
    if (tsj_real_opt(o, top[i], 0, BIG, 0, &x, file, "inflight", e)) return -1;
  for (int i = 0; flags[i]; i++)
    if (json_object_get(o, flags[i]) && tsj_bool(o, flags[i], &flag, file, "inflight", e)) return -1;
  if (detail_object(o, "prompts_per_step", prompts, -1, file, e) || detail_object(o, "step", step, -1, file, e) ||
      detail_object(o, "run", run, -1, file, e) || detail_object(o, "attention_dp", adp, -1, file, e) ||
      detail_object(o, "engine_memory", emem, -1, file, e))
    return -1;
  json_t *a = json_object_get(o, "step_s_by_prompts");
  if (!a) return 0;
  if (!json_is_array(a) || json_array_size(a) != 2)
    return ts_fail(e, file, "inflight.step_s_by_prompts", "must be an array of two numbers");
  for (size_t i = 0; i < 2; i++) {
    json_t *v = json_array_get(a, i);
    if (!json_is_number(v) || !(json_number_value(v) >= 0) || json_number_value(v) > BIG)
      return ts_fail(e, file, "inflight.step_s_by_prompts", "must be an array of two numbers in [0, %g]", BIG);
  }
  return 0;
}

/* The inference prediction's details: every one optional, each checked as written. */
static int check_inference_details(json_t *root, const char *file, ts_err *e) {
  static const char *const memory[] = {"weights_bytes", "kv_cache_bytes", "activations_bytes", "overhead_bytes", NULL};
  static const char *const phase[] = {"total_s", "compute_s", "tp_exposed_s", "codec_s", "pp_exposed_s",
                                      "experts_gemm_s", NULL};
  static const char *const plain[] = {"ttft_s", "tpot_s", "tokens_per_s", NULL};
  static const char *const speedup[] = {"ttft", "tpot", "tokens_per_s", NULL};
  static const char *const choice_numbers[] = {"bytes", "wire_bytes", "plain_s", "fallback_s", "codec_s", NULL};
  static const char *const choice_keys[] = {"what", "bytes", "wire_bytes", "plain_s", "fallback_s", "codec_s",
                                            "fallback", "compressed", NULL};
  static const char *const fallbacks[] = {"none", "caat", NULL};
  static const char *const quants[] = {"none", "fp8", "nvfp4", NULL}; /* the plan's "quantization" (added 2026-12-06) */
  static const char *const prefill_attns[] = {"executor", "fused", "flash", "fused-fp8", NULL}; /* "prefill_attention" (likewise) */
  static const char *const decode_attns[] = {"per-kv-head", "per-query-head", NULL}; /* "decode_attention" (likewise) */
  char codec[64];
  double x;
  int quant;
  if (tsj_string_opt(root, "codec", "", codec, sizeof codec, file, "", e) ||
      tsj_enum_opt(root, "quantization", quants, 0, &quant, file, "", e) ||
      tsj_enum_opt(root, "prefill_attention", prefill_attns, 0, &quant, file, "", e) ||
      tsj_enum_opt(root, "decode_attention", decode_attns, 0, &quant, file, "", e) ||
      tsj_real_opt(root, "total_s", 0, BIG, 0, &x, file, "", e) || detail_object(root, "memory", memory, 2, file, e) ||
      detail_object(root, "prefill", phase, 5, file, e) || detail_object(root, "decode", phase, 5, file, e) ||
      detail_object(root, "plain_nccl", plain, -1, file, e) || detail_object(root, "speedup", speedup, -1, file, e) ||
      tsj_real_opt(root, "tokens_per_s_per_gpu", 0, BIG, 0, &x, file, "", e) ||
      tsj_real_opt(root, "requests_per_s", 0, BIG, 0, &x, file, "", e) || check_mla(root, file, e) ||
      check_inflight(root, file, e))
    return -1;
  json_t *arr = json_object_get(root, "codec_choices");
  if (!arr || json_is_null(arr)) return 0;
  if (!json_is_array(arr)) return ts_fail(e, file, "codec_choices", "must be an array");
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    char path[48], what[96];
    int fb;
    bool compressed;
    snprintf(path, sizeof path, "codec_choices[%zu]", i);
    if (!json_is_object(v)) return ts_fail(e, file, path, "must be an object");
    if (only_keys(v, choice_keys, file, path, e) || tsj_string(v, "what", what, sizeof what, file, path, e) ||
        tsj_enum(v, "fallback", fallbacks, &fb, file, path, e) ||
        tsj_bool(v, "compressed", &compressed, file, path, e))
      return -1;
    for (int k = 0; choice_numbers[k]; k++)
      if (tsj_real(v, choice_numbers[k], 0, BIG, &x, file, path, e)) return -1;
  }
  return 0;
}

/* The top level's keys, by the result's source and kind. */
static int check_top_keys(json_t *root, const char *file, const schema_result *r, ts_err *e) {
  const char *const *allowed[4] = {top_keys};
  int n = 1;
  int measured = r->source == SCHEMA_SOURCE_MEASURED, inference = r->kind[0] != '\0';
  if (measured) allowed[n++] = measured_keys;
  else if (misplaced(root, measured_keys, file, "a measured result (\"source\": \"measured\")", e)) return -1;
  if (inference) allowed[n++] = inference_keys, allowed[n++] = inference_detail_keys;
  else if (misplaced(root, inference_keys + 1, file, "an inference result (\"kind\": \"inference\")", e) ||
           misplaced(root, inference_detail_keys, file, "an inference result (\"kind\": \"inference\")", e))
    return -1;
  return known_keys(root, allowed, n, file, "", e);
}

static int load_ranks(json_t *root, const char *file, schema_result *r, ts_err *e) {
  json_t *arr = json_object_get(root, "ranks");
  if (!arr) return ts_fail(e, file, "ranks", "missing (an array is required)");
  if (!json_is_array(arr)) return ts_fail(e, file, "ranks", "must be an array");
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    char path[48];
    snprintf(path, sizeof path, "ranks[%zu]", i);
    if (!json_is_object(v)) return ts_fail(e, file, path, "must be an object");
    static const char *const keys[] = {"rank", "busy_s", "compute_s", "comm_s", "clock_duty", "clock_gemm_speed",
                                       "clock_mem_speed", "clock_cycle_us", "clock_mhz", "clock_next_gemm_speed",
                                       "clock_next_mem_speed", NULL};
    long long rank;
    schema_rank_stat s = {0};
    if (only_keys(v, keys, file, path, e) || tsj_int(v, "rank", 0, 1 << 24, &rank, file, path, e) ||
        tsj_real(v, "busy_s", 0, BIG, &s.busy_s, file, path, e) ||
        tsj_real(v, "compute_s", 0, BIG, &s.compute_s, file, path, e) ||
        tsj_real(v, "comm_s", 0, BIG, &s.comm_s, file, path, e) ||
        tsj_real_opt(v, "clock_duty", 0, 1, 0, &s.clock_duty, file, path, e) ||
        tsj_real_opt(v, "clock_gemm_speed", 0, 1e3, 0, &s.clock_gemm_speed, file, path, e) ||
        tsj_real_opt(v, "clock_mem_speed", 0, 1e3, 0, &s.clock_mem_speed, file, path, e) ||
        tsj_real_opt(v, "clock_cycle_us", 0, BIG, 0, &s.clock_cycle_us, file, path, e) ||
        tsj_real_opt(v, "clock_mhz", 0, 1e5, 0, &s.clock_mhz, file, path, e) ||
        tsj_real_opt(v, "clock_next_gemm_speed", 0, 1e3, 0, &s.clock_next_gemm_speed, file, path, e) ||
        tsj_real_opt(v, "clock_next_mem_speed", 0, 1e3, 0, &s.clock_next_mem_speed, file, path, e))
      return -1;
    s.rank = (int)rank;
    if (schema_result_add_rank(r, &s)) return ts_fail_sys(e, "out of memory");
  }
  return 0;
}

static int load_ops(json_t *root, const char *file, schema_result *r, ts_err *e) {
  json_t *arr = json_object_get(root, "ops");
  if (!arr || json_is_null(arr)) return 0;
  if (!json_is_array(arr)) return ts_fail(e, file, "ops", "must be an array");
  static const char *const streams[] = {"compute", "tp", "pp", "dp", "cp", "ep", NULL}; /* plan_stream's names */
  size_t i;
  json_t *v;
  json_array_foreach(arr, i, v) {
    char path[48];
    snprintf(path, sizeof path, "ops[%zu]", i);
    if (!json_is_object(v)) return ts_fail(e, file, path, "must be an object");
    static const char *const keys[] = {"name",  "rank",  "stream",     "start_s", "dur_s", "kind",
                                       "coll",  "codec", "flops",      "bytes",   "wire_bytes", "merged", "merged_names", "flow", NULL};
    schema_op_record op = {0};
    long long rank, merged, flow;
    int stream;
    if (only_keys(v, keys, file, path, e) || tsj_string(v, "name", op.name, sizeof op.name, file, path, e) ||
        tsj_int(v, "rank", 0, 1 << 24, &rank, file, path, e) ||
        tsj_enum(v, "stream", streams, &stream, file, path, e) ||
        tsj_real(v, "start_s", 0, BIG, &op.start_s, file, path, e) ||
        tsj_real(v, "dur_s", 0, BIG, &op.dur_s, file, path, e) ||
        tsj_string_opt(v, "kind", "", op.kind, sizeof op.kind, file, path, e) ||
        tsj_string_opt(v, "coll", "", op.coll, sizeof op.coll, file, path, e) ||
        tsj_string_opt(v, "codec", "", op.codec, sizeof op.codec, file, path, e) ||
        tsj_real_opt(v, "flops", 0, BIG, 0, &op.flops, file, path, e) ||
        tsj_real_opt(v, "bytes", 0, BIG, 0, &op.bytes, file, path, e) ||
        tsj_real_opt(v, "wire_bytes", 0, BIG, 0, &op.wire_bytes, file, path, e) ||
        tsj_int_opt(v, "merged", 0, 1 << 30, 0, &merged, file, path, e) ||
        tsj_string_opt(v, "merged_names", "", op.merged_names, sizeof op.merged_names, file, path, e) ||
        tsj_int_opt(v, "flow", 0, 1LL << 48, 0, &flow, file, path, e))
      return -1;
    op.merged = (int)merged;
    op.flow = flow;
    op.rank = (int)rank;
    snprintf(op.stream, sizeof op.stream, "%s", streams[stream]);
    if (schema_result_add_op(r, &op)) return ts_fail_sys(e, "out of memory");
  }
  return 0;
}

static int load_root(json_t *root, const char *file, schema_result *r, ts_err *e) {
  int source;
  double mem;
  if (tsj_schema(root, SCHEMA_RESULT_VERSION, file, e) || tsj_enum(root, "source", source_names, &source, file, "", e))
    return -1;
  r->source = (schema_source)source;
  if (tsj_string(root, "plan", r->plan, sizeof r->plan, file, "", e) ||
      tsj_string_opt(root, "calibration", "", r->calibration, sizeof r->calibration, file, "", e) ||
      tsj_string_opt(root, "mode", "", r->mode, sizeof r->mode, file, "", e) ||
      tsj_string_opt(root, "options", "", r->options, sizeof r->options, file, "", e) ||
      tsj_string_opt(root, "attention_backend", "", r->attention_backend, sizeof r->attention_backend, file, "", e) ||
      tsj_string_opt(root, "host_framework", "", r->host_framework, sizeof r->host_framework, file, "", e) ||
      tsj_string_opt(root, "fp8", "", r->fp8, sizeof r->fp8, file, "", e) ||
      tsj_string_opt(root, "kind", "", r->kind, sizeof r->kind, file, "", e) ||
      read_ce_fusion(root, file, r, e) ||
      tsj_real_opt(root, "hidden_dropout", 0, 0.9999999999, -1.0, &r->hidden_dropout, file, "", e) ||
      tsj_real_opt(root, "alloc_reserve", 0, 0.9999999999, -1.0, &r->alloc_reserve, file, "", e) ||
      tsj_real(root, "iteration_time_s", 1e-12, BIG, &r->iteration_time_s, file, "", e) ||
      tsj_real(root, "tokens_per_s", 0, BIG, &r->tokens_per_s, file, "", e) ||
      tsj_real(root, "tflops_per_gpu", 0, BIG, &r->tflops_per_gpu, file, "", e) ||
      tsj_real(root, "mfu", 0, 10, &r->mfu, file, "", e) ||
      tsj_real(root, "memory_per_gpu_bytes", 0, BIG, &mem, file, "", e))
    return -1;
  r->memory_per_gpu_bytes = mem;
  if (r->kind[0] && strcmp(r->kind, "inference"))
    return ts_fail(e, file, "kind", "'%s' is not \"inference\" (a training result has no kind)", r->kind);
  if (check_top_keys(root, file, r, e) || (r->kind[0] && check_inference_details(root, file, e))) return -1;
  if (r->kind[0] && (tsj_real(root, "ttft_s", 0, BIG, &r->ttft_s, file, "", e) ||
                     tsj_real(root, "tpot_s", 0, BIG, &r->tpot_s, file, "", e)))
    return -1;
  static const char *const breakdown_keys[] = {"compute_s", "tp_exposed_s", "pp_exposed_s", "dp_exposed_s",
                                               "codec_s", "bubble_s", "ep_exposed_s", "imbalance_s",
                                               "cp_exposed_s", "host_wait_s", NULL};
  json_t *b = tsj_object(root, "breakdown", file, "", e);
  schema_breakdown *bd = &r->breakdown;
  if (!b || only_keys(b, breakdown_keys, file, "breakdown", e) || tsj_real(b, "compute_s", 0, BIG, &bd->compute_s, file, "breakdown", e) ||
      tsj_real(b, "tp_exposed_s", 0, BIG, &bd->tp_exposed_s, file, "breakdown", e) ||
      tsj_real(b, "pp_exposed_s", 0, BIG, &bd->pp_exposed_s, file, "breakdown", e) ||
      tsj_real(b, "dp_exposed_s", 0, BIG, &bd->dp_exposed_s, file, "breakdown", e) ||
      tsj_real(b, "codec_s", 0, BIG, &bd->codec_s, file, "breakdown", e) ||
      tsj_real(b, "bubble_s", 0, BIG, &bd->bubble_s, file, "breakdown", e) ||
      tsj_real_opt(b, "ep_exposed_s", 0, BIG, 0, &bd->ep_exposed_s, file, "breakdown", e) ||
      tsj_real_opt(b, "imbalance_s", 0, BIG, 0, &bd->imbalance_s, file, "breakdown", e) ||
      tsj_real_opt(b, "cp_exposed_s", 0, BIG, 0, &bd->cp_exposed_s, file, "breakdown", e) ||
      tsj_real_opt(b, "host_wait_s", 0, BIG, 0, &bd->host_wait_s, file, "breakdown", e))
    return -1;
  long long passes;
  if (tsj_int_opt(root, "clock_passes", 0, 100, 0, &passes, file, "", e)) return -1;
  r->clock_passes = (int)passes;
  if (load_ranks(root, file, r, e) || load_ops(root, file, r, e)) return -1;
  json_t *notes = json_object_get(root, "notes");
  if (notes && !json_is_null(notes)) {
    if (!json_is_array(notes)) return ts_fail(e, file, "notes", "must be an array of strings");
    size_t i;
    json_t *v;
    json_array_foreach(notes, i, v) {
      if (!json_is_string(v)) return ts_fail(e, file, "notes", "must be an array of strings");
      if (schema_result_add_note(r, json_string_value(v))) return ts_fail_sys(e, "out of memory");
    }
  }
  if (r->source == SCHEMA_SOURCE_MEASURED) {
    long long it, wu;
    if (tsj_int(root, "iterations", 1, 1 << 30, &it, file, "", e) ||
        tsj_int(root, "warmup", 0, 1 << 30, &wu, file, "", e) ||
        tsj_real(root, "min_s", 0, BIG, &r->min_s, file, "", e) ||
        tsj_real(root, "median_s", 0, BIG, &r->median_s, file, "", e) ||
        tsj_real(root, "max_s", 0, BIG, &r->max_s, file, "", e))
      return -1;
    r->iterations = (int)it;
    r->warmup = (int)wu;
    if (!(r->min_s <= r->median_s && r->median_s <= r->max_s))
      return ts_fail(e, file, "median_s", "must satisfy min_s <= median_s <= max_s");
    static const char *const machine_keys[] = {"gpu", "driver", "cuda", "nccl", "transport", NULL};
    json_t *m = tsj_object(root, "machine", file, "", e);
    schema_machine *mc = &r->machine;
    if (!m || only_keys(m, machine_keys, file, "machine", e) || tsj_string(m, "gpu", mc->gpu, sizeof mc->gpu, file, "machine", e) ||
        tsj_string_opt(m, "driver", "", mc->driver, sizeof mc->driver, file, "machine", e) ||
        tsj_string_opt(m, "cuda", "", mc->cuda, sizeof mc->cuda, file, "machine", e) ||
        tsj_string_opt(m, "nccl", "", mc->nccl, sizeof mc->nccl, file, "machine", e) ||
        tsj_string(m, "transport", mc->transport, sizeof mc->transport, file, "machine", e))
      return -1;
  }
  return 0;
}

static int load_json(json_t *root, const char *file, schema_result *r, ts_err *e) {
  schema_result_init(r, SCHEMA_SOURCE_SIMULATED);
  int rc = load_root(root, file, r, e);
  json_decref(root);
  if (rc) schema_result_free(r);
  return rc;
}

int schema_result_load(const char *path, schema_result *r, ts_err *e) {
  schema_result_init(r, SCHEMA_SOURCE_SIMULATED);
  json_t *root = tsj_load_file(path, e);
  return root ? load_json(root, path, r, e) : -1;
}

int schema_result_from_json_text(const char *text, size_t len, const char *what, schema_result *r, ts_err *e) {
  schema_result_init(r, SCHEMA_SOURCE_SIMULATED);
  json_t *root = tsj_load_string(text, len, what, e);
  return root ? load_json(root, what, r, e) : -1;
}

/* search_emit.c — `tacosim search --emit-plans DIR`: each listed layout as a
 * complete plan file (every field the plan loader reads, the loader's own
 * defaults written out), which `tacosim simulate` and `tacorun execute` read
 * unchanged and which predicts what the search printed. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "search.h"

/* A zoo name stays a name; a path (a '/' or a .json ending, as the loaders
 * decide) becomes absolute, so the plan reads the same file from anywhere. */
static json_t *name_or_abs_path(const char *s) {
  size_t n = strlen(s);
  bool is_path = strchr(s, '/') || (n > 5 && strcmp(s + n - 5, ".json") == 0);
  char abs[PATH_MAX];
  if (is_path && realpath(s, abs)) return json_string(abs);
  return json_string(s);
}

static json_t *codec_json(const plan_codec *c) {
  json_t *o = json_pack("{s:s}", "kind", plan_codec_kind_name(c->kind));
  if (plan_codec_has_taco(c->kind)) {
    json_object_set_new(o, "group", json_integer(c->group));
    json_object_set_new(o, "fp8", json_string(c->fp8 == PLAN_FP8_E5M2 ? "e5m2" : "e4m3"));
  }
  if (plan_codec_has_caat(c->kind)) json_object_set_new(o, "p", json_real(c->p));
  return o;
}

json_t *sim_search_plan_json(const plan *p, const char *model, const char *cluster, const char *description) {
  static const char *const schedules[] = {"gpipe", "1f1b", "interleaved-1f1b"};
  json_t *layout = json_pack(
      "{s:i,s:i,s:i,s:i,s:b,s:s,s:b,s:s,s:i,s:b,s:b}", "dp", p->dp, "tp", p->tp, "pp", p->pp, "vpp", p->vpp,
      "sequence_parallel", p->sequence_parallel, "order", p->order == PLAN_ORDER_TP_PP_DP ? "tp-pp-dp" : "tp-dp-pp",
      "zero1", p->zero1, "recompute", plan_recompute_name(p->recompute), "tp_overlap_chunks", p->tp_overlap_chunks,
      "pp_scatter_gather", p->pp_scatter_gather, "grad_reduce_in_fp32", !p->grad_reduce_bf16);
  /* the fields of issue 22, only when set (a plan of today's layout keeps today's file) */
  if (plan_cp(p) > 1) json_object_set_new(layout, "context_parallel_size", json_integer(plan_cp(p)));
  if (p->zero_stage >= 2) {
    static const char *const strategies[] = {"no_shard", "optim", "optim_grads", "optim_grads_params"};
    json_object_set_new(layout, "data_parallel_sharding_strategy", json_string(strategies[p->zero_stage & 3]));
  }
  if (p->overlap_param_gather) json_object_set_new(layout, "overlap_param_gather", json_true());
  if (p->tp_comm_overlap) json_object_set_new(layout, "tp_comm_overlap", json_true());
  if (p->fp8_recipe != PLAN_FP8_OFF)
    json_object_set_new(layout, "fp8", json_string(plan_fp8_recipe_names[p->fp8_recipe]));
  if (p->fp8_param_gather) json_object_set_new(layout, "fp8_param_gather", json_true());
  if (p->account_embedding) json_object_set_new(layout, "account_for_embedding_in_pipeline_split", json_true());
  if (p->account_loss) json_object_set_new(layout, "account_for_loss_in_pipeline_split", json_true());
  if (model_is_moe(&p->model)) { /* the MoE layout (plan_moe.c's fields; absent on dense models) */
    json_object_set_new(layout, "ep", json_integer(p->ep > 0 ? p->ep : 1));
    if (p->etp > 0) json_object_set_new(layout, "expert_tp", json_integer(p->etp));
    json_object_set_new(layout, "capacity_factor", json_real(p->capacity_factor));
    if (p->moe_imbalance >= 1.0) json_object_set_new(layout, "moe_imbalance", json_real(p->moe_imbalance));
    if (p->moe_flex) json_object_set_new(layout, "moe_token_dispatcher_type", json_string("flex"));
  }
  json_t *codec = json_object();
  for (int t = 0; t < PLAN_TRAFFIC_COUNT; t++)
    if (t != PLAN_TRAFFIC_CP || plan_cp(p) > 1) /* codec.cp only with context parallelism */
      json_object_set_new(codec, plan_traffic_name((plan_traffic)t), codec_json(&p->codec[t]));
  json_t *root = json_pack("{s:i,s:s,s:s}", "schema", 1, "name", p->name, "description", description);
  json_object_set_new(root, "model", name_or_abs_path(model));
  json_object_set_new(root, "cluster", name_or_abs_path(cluster));
  json_object_set_new(root, "layout", layout);
  json_object_set_new(root, "batch", json_pack("{s:i,s:I,s:i}", "micro", p->micro_batch, "global",
                                                (json_int_t)p->global_batch, "seq", p->seq));
  json_object_set_new(root, "schedule", json_string(schedules[p->schedule]));
  if (p->layers != p->model.layers || p->layers <= 0) json_object_set_new(root, "layers_override", json_integer(p->layers));
  json_object_set_new(root, "codec", codec);
  json_object_set_new(root, "codec_min_bytes", json_real(p->codec_min_bytes));
  json_object_set_new(root, "dp_bucket_bytes", json_real(p->dp_bucket_bytes));
  json_object_set_new(root, "attention_backend",
                      json_string(plan_attention_backend_name(p->attention_backend)));
  json_object_set_new(root, "attention_dropout", json_real(p->attention_dropout));
  json_object_set_new(root, "hidden_dropout", json_real(p->hidden_dropout));
  if (p->alloc_reserve_given) json_object_set_new(root, "alloc_reserve", json_real(p->alloc_reserve));
  json_object_set_new(root, "bias_fusion", json_boolean(!p->bias_unfused));
  json_object_set_new(root, "cross_entropy_loss_fusion", json_boolean(!p->ce_unfused));
  if (p->host_framework != PLAN_HOST_EXECUTOR)
    json_object_set_new(root, "host_framework", json_string(plan_host_framework_names[p->host_framework]));
  return root;
}

/* The rows the search lists: the simulated top picks (samples excluded), or
 * with nothing simulated the head of the estimate ranking; at most `top`. */
static int listed(const sim_search_result *r, const sim_search_options *o, const sim_search_candidate **rows) {
  int top = o->top > 0 ? o->top : 10, n = 0;
  bool simulated = r->n > 0;
  const sim_search_candidate *src = simulated ? r->cands : r->best_est;
  int avail = simulated ? r->n : r->n_best_est;
  for (int i = 0; i < avail && n < top; i++) {
    if (src[i].sample || (simulated && !src[i].simulated)) continue;
    rows[n++] = &src[i];
  }
  return n;
}

int sim_search_emit_plans(const sim_search_result *r, const sim_search_options *o, const char *dir, FILE *out,
                          ts_err *e) {
  if (mkdir(dir, 0777) && errno != EEXIST) return ts_fail_sys(e, "%s: cannot create the directory: %s", dir, strerror(errno));
  struct stat st;
  if (stat(dir, &st) || !S_ISDIR(st.st_mode)) return ts_fail(e, "search", "--emit-plans", "%s is not a directory", dir);
  int top = o->top > 0 ? o->top : 10;
  const sim_search_candidate **rows = calloc((size_t)top, sizeof *rows);
  if (!rows) return ts_fail_sys(e, "search: out of memory");
  int n = listed(r, o, rows);
  static plan base, p;
  int rc = -1;
  if (sim_search_base_plan(o->model, o->cluster, &base, e)) goto out;
  if (sim_search_apply_options(o, &base, e)) goto out;
  for (int i = 0; i < n; i++) {
    const sim_search_candidate *k = rows[i];
    if (sim_search_make_plan(&base, &k->layout, r->seq, r->global_batch, &p, e)) goto out;
    sim_search_apply_codec(&p, k->codec);
    char name[sizeof p.name];
    snprintf(name, sizeof name, "%.*s-%s", (int)sizeof p.name - 12, p.name,
             k->codec == SIM_SEARCH_CODEC_TACO_CAAT ? "taco-caat" : sim_search_codec_name(k->codec));
    snprintf(p.name, sizeof p.name, "%s", name);
    char desc[256];
    if (k->simulated)
      snprintf(desc, sizeof desc,
               "tacosim search #%d: %.0f tokens/s, %.4f s per iteration (simulated, reduced mode, calibration %.80s)",
               i + 1, k->sim_tokens_per_s, k->sim_iteration_s, r->calibration);
    else
      snprintf(desc, sizeof desc, "tacosim search #%d: %.0f tokens/s estimated (not simulated)", i + 1,
               k->est.tokens_per_s);
    json_t *root = sim_search_plan_json(&p, o->model, o->cluster, desc);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%02d-%s.json", dir, i + 1, name);
    int w = json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (w) {
      ts_fail_sys(e, "%s: cannot write the plan", path);
      goto out;
    }
    if (out) fprintf(out, "plan          %s\n", path);
  }
  rc = 0;
out:
  free(rows);
  return rc;
}

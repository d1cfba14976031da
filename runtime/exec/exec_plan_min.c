/* exec_plan_min.c — reads the fields of a plan file the executor needs (see
 * exec_run.h). plan_load() validates a plan fully; this reader exists so the
 * executor runs before the plan library is linked into tacorun, and it checks
 * what the executor itself cannot do (CAAT-Net on pipeline or DP messages)
 * with "file: field: reason". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_run.h"
#include "ts_coll.h"
#include "ts_json.h"

static const char *const fp8_names[] = {"e4m3", "e5m2", NULL};

int exec_plan_read(const char *path, exec_plan_min *p, ts_err *e) {
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", path);
  json_t *root = tsj_load_file(path, e);
  if (!root) return -1;
  int rc = -1;
  long long v;
  json_t *layout, *batch, *codec;
  char model_name[256];
  if (tsj_schema(root, 1, path, e)) goto done;
  if (tsj_string_opt(root, "name", "plan", p->name, sizeof p->name, path, NULL, e)) goto done;
  if (tsj_string(root, "model", model_name, sizeof model_name, path, NULL, e)) goto done;
  if (!(layout = tsj_object(root, "layout", path, NULL, e))) goto done;
  if (tsj_int(layout, "dp", 1, 4096, &v, path, "layout", e)) goto done;
  p->dp = (int)v;
  if (tsj_int(layout, "tp", 1, 64, &v, path, "layout", e)) goto done;
  p->tp = (int)v;
  if (tsj_int(layout, "pp", 1, 4096, &v, path, "layout", e)) goto done;
  p->pp = (int)v;
  if (tsj_int_opt(layout, "vpp", 1, 4096, 1, &v, path, "layout", e)) goto done;
  p->vpp = (int)v; /* interleaved 1F1B: model chunks per stage (the walker checks the schedule) */
  if (tsj_bool_opt(layout, "sequence_parallel", false, &p->sequence_parallel, path, "layout", e)) goto done;
  /* Context parallelism needs ranks beyond dp x tp x pp: refused before any communicator is made. */
  if (tsj_int_opt(layout, "context_parallel_size", 1, 1 << 16, 1, &v, path, "layout", e)) goto done;
  if (v > 1) {
    ts_fail(e, path, "layout.context_parallel_size",
            "%lld: context parallelism (the KV ring beside the attention) is priced by tacosim simulate; the "
            "executor runs cp 1 only (NOT IMPLEMENTED here)", v);
    goto done;
  }
  /* ZeRO-1 and recomputation run from the plan's program (exec_walk.c) */
  if (tsj_bool_opt(layout, "zero1", false, &p->zero1, path, "layout", e)) goto done;
  if (tsj_string_opt(layout, "recompute", "none", p->recompute, sizeof p->recompute, path, "layout", e)) goto done;
  if (strcmp(p->recompute, "none") && strcmp(p->recompute, "selective") && strcmp(p->recompute, "full")) {
    ts_fail(e, path, "layout.recompute", "\"%s\" is not none, selective or full", p->recompute);
    goto done;
  }
  char schedule[32];
  if (tsj_string_opt(root, "schedule", "1f1b", schedule, sizeof schedule, path, NULL, e)) goto done;
  p->gpipe = !strcmp(schedule, "gpipe"); /* the plan loader (the walker's) checks the name */
  if (!(batch = tsj_object(root, "batch", path, NULL, e))) goto done;
  if (tsj_int(batch, "micro", 1, 1 << 16, &v, path, "batch", e)) goto done;
  p->micro = (int)v;
  if (tsj_int(batch, "global", 1, 1LL << 30, &p->global, path, "batch", e)) goto done;
  if (tsj_int(batch, "seq", 1, 1 << 20, &v, path, "batch", e)) goto done;
  p->seq = (int)v;
  if (tsj_int_opt(root, "layers_override", 1, 1 << 16, 0, &v, path, NULL, e)) goto done;
  p->layers_override = (int)v;
  bool failed = false;
  codec = tsj_object_opt(root, "codec", path, NULL, e, &failed);
  if (failed) goto done;
  if (codec) {
    static const char *const keys[] = {"tp_fwd", "tp_bwd", "pp", "dp"};
    for (int i = 0; i < 4; i++) {
      char field[32];
      snprintf(field, sizeof field, "codec.%s", keys[i]);
      json_t *c = tsj_object_opt(codec, keys[i], path, "codec", e, &failed);
      if (failed) goto done;
      int kind = 0, fp8 = 0;
      plan_codec pc = {.kind = PLAN_CODEC_NONE, .group = 128, .fp8 = PLAN_FP8_E4M3, .p = 1.0};
      if (c && tsj_enum(c, "kind", ts_codec_names, &kind, path, field, e)) goto done;
      pc.kind = (plan_codec_kind)kind;
      if (kind == PLAN_CODEC_TACO || kind == PLAN_CODEC_TACO_CAAT) {
        if (tsj_int_opt(c, "group", 32, 512, 128, &v, path, field, e)) goto done;
        if (v != 32 && v != 64 && v != 128 && v != 256 && v != 512) {
          ts_fail(e, path, field, "group %lld is not one of 32, 64, 128, 256, 512", v);
          goto done;
        }
        pc.group = (int)v;
        if (tsj_enum_opt(c, "fp8", fp8_names, 0, &fp8, path, field, e)) goto done;
        pc.fp8 = (plan_fp8)fp8;
      }
      if ((kind == PLAN_CODEC_CAAT || kind == PLAN_CODEC_TACO_CAAT) &&
          tsj_real(c, "p", 1e-6, 1.0, &pc.p, path, field, e))
        goto done;
      if (i == 0) p->codec_tp_fwd = pc;
      if (i == 1) p->codec_tp_bwd = pc;
      if (i == 2) p->codec_pp = pc;
      if (i == 2 && kind != PLAN_CODEC_NONE && kind != PLAN_CODEC_TACO) {
        ts_fail(e, path, field, "only TACO compresses pipeline messages (CAAT-Net applies to TP all-reduces)");
        goto done;
      }
      if (i == 3 && kind != PLAN_CODEC_NONE && kind != PLAN_CODEC_TACO) {
        ts_fail(e, path, field, "only TACO compresses data-parallel gradients (CAAT-Net applies to TP all-reduces)");
        goto done;
      }
    }
  }
  /* The zoo folder compiled in, else TACOSIM_MODELS_DIR, else ./models (a copy of the tree elsewhere). */
  const char *env_dir = getenv("TACOSIM_MODELS_DIR");
  if (model_load(model_name, env_dir, &p->model, e) && model_load(model_name, "models", &p->model, e)) {
    ts_err sub = *e;
    ts_fail(e, path, "model", "%s", sub.msg);
    goto done;
  }
  /* Mixture-of-experts layers (routing, token all-to-alls, grouped expert GEMMs) are simulated
   * (tacosim simulate) but not executed yet: refuse before touching a GPU. */
  if (model_is_moe(&p->model)) {
    ts_fail(e, path, "model", "%s is a mixture of experts (\"experts\": %d): tacorun execute does not run MoE "
            "layers yet; tacosim plan / simulate predict it", p->model.name, p->model.experts);
    goto done;
  }
  /* PP > 1: the walker checks the schedule (1F1B, one chunk per stage) against the program.
   * TACO on sequence-parallel collectives and pipeline messages runs from the
   * plan's program (exec_model_prepare_codecs); CAAT-Net with SP is refused by plan_load. */
  if (p->model.kv_heads < 1 || p->model.kv_heads % p->tp) {
    ts_fail(e, path, "layout.tp", "%d does not divide the %d key/value heads of %s", p->tp, p->model.kv_heads,
            p->model.name);
    goto done;
  }
  if (p->global % ((long long)p->micro * p->dp)) {
    ts_fail(e, path, "batch.global", "%lld is not divisible by micro x dp = %d", p->global, p->micro * p->dp);
    goto done;
  }
  if (p->model.heads % p->tp || p->model.ffn_hidden % p->tp) {
    ts_fail(e, path, "layout.tp", "%d does not divide heads %d and ffn_hidden %d", p->tp, p->model.heads,
            p->model.ffn_hidden);
    goto done;
  }
  rc = 0;
done:
  json_decref(root);
  return rc;
}

void exec_plan_config(const exec_plan_min *p, exec_ref_config *c) {
  memset(c, 0, sizeof *c);
  c->vocab = p->model.vocab;
  c->hidden = p->model.hidden;
  c->heads = p->model.heads;
  c->ffn = p->model.ffn_hidden;
  c->layers = p->layers_override > 0 ? p->layers_override : p->model.layers;
  c->seq = p->seq;
  c->batch = p->micro;
  c->act = p->model.activation == MODEL_ACT_SWIGLU ? EXEC_ACT_SWIGLU : EXEC_ACT_GELU;
  c->norm = p->model.norm == MODEL_NORM_RMSNORM ? EXEC_NORM_RMSNORM : EXEC_NORM_LAYERNORM;
  c->norm_eps = p->model.norm_eps > 0 ? p->model.norm_eps : 1e-5;
  c->kv_heads = p->model.kv_heads; /* grouped-query attention when fewer than heads */
  c->vpp = p->vpp;                 /* the executor's pipeline chunks (interleaved 1F1B) */
  c->recompute = !strcmp(p->recompute, "full") ? 2 : !strcmp(p->recompute, "selective") ? 1 : 0;
  /* the layers as the model file publishes them */
  c->rope_theta = p->model.position == MODEL_POS_ROPE ? (p->model.rope_theta > 0 ? p->model.rope_theta : 10000.0) : 0;
  c->rope_factor = p->model.rope_factor; /* Llama 3.1's scaling (0: none) */
  c->rope_low_freq = p->model.rope_low_freq, c->rope_high_freq = p->model.rope_high_freq;
  c->rope_orig_max = p->model.rope_orig_max;
  c->qkv_bias = p->model.qkv_bias;
  c->linear_bias = p->model.linear_bias;
  c->untied = !p->model.tied_embeddings;
}

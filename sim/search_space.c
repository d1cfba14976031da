/* search_space.c — the layouts a search tries, the plans they become, and
 * the memory filter. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "search.h"

static const char *const codec_names[SIM_SEARCH_CODEC_COUNT] = {"none", "taco", "caat", "taco+caat"};

const char *sim_search_codec_name(sim_search_codec c) {
  return c >= 0 && c < SIM_SEARCH_CODEC_COUNT ? codec_names[c] : "?";
}

int sim_search_parse_codecs(const char *list, unsigned *mask, ts_err *e) {
  *mask = 0;
  const char *s = list;
  for (;;) {
    const char *end = strchr(s, ',');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len == 0) return ts_fail(e, "search", "--codecs", "\"%s\" has an empty entry", list);
    int found = -1;
    for (int c = 0; c < SIM_SEARCH_CODEC_COUNT; c++)
      if (strlen(codec_names[c]) == len && strncmp(codec_names[c], s, len) == 0) found = c;
    if (found < 0)
      return ts_fail(e, "search", "--codecs", "\"%.*s\" is not one of none, taco, caat, taco+caat", (int)len, s);
    *mask |= 1u << found;
    if (!end) break;
    s = end + 1;
  }
  return 0;
}

/* TACO at its default operating point (G = 128, E4M3) and CAAT-Net at the
 * p = 0.5 the paper validates, on tensor-parallel traffic only, as in the
 * shipped example plans. */
void sim_search_apply_codec(plan *p, sim_search_codec c) {
  plan_codec k = {.kind = PLAN_CODEC_NONE, .group = 128, .fp8 = PLAN_FP8_E4M3, .p = 0.0};
  if (c == SIM_SEARCH_CODEC_TACO) k.kind = PLAN_CODEC_TACO;
  if (c == SIM_SEARCH_CODEC_CAAT) k.kind = PLAN_CODEC_CAAT, k.p = 0.5;
  if (c == SIM_SEARCH_CODEC_TACO_CAAT) k.kind = PLAN_CODEC_TACO_CAAT, k.p = 0.5;
  p->codec[PLAN_TRAFFIC_TP_FWD] = k;
  p->codec[PLAN_TRAFFIC_TP_BWD] = k;
  plan_codec none = {.kind = PLAN_CODEC_NONE, .group = 128, .fp8 = PLAN_FP8_E4M3};
  p->codec[PLAN_TRAFFIC_PP] = none;
  p->codec[PLAN_TRAFFIC_DP] = none;
  /* MoE: a TACO policy compresses the expert all-to-alls too (CAAT-Net does not apply to them) */
  p->codec[PLAN_TRAFFIC_EP] = none;
  if (model_is_moe(&p->model) && plan_codec_has_taco(k.kind) && p->ep > 1)
    p->codec[PLAN_TRAFFIC_EP] = (plan_codec){.kind = PLAN_CODEC_TACO, .group = 128, .fp8 = PLAN_FP8_E4M3};
}

/* ---- enumeration ---- */

long sim_search_enumerate(const sim_search_space *s, void (*fn)(const sim_search_layout *, void *), void *arg) {
  const model_config *m = s->model;
  const int gpn = s->cluster->gpus_per_node;
  long count = 0;
  for (int tp = 1; tp <= gpn; tp++) {
    if (gpn % tp || m->heads % tp || m->kv_heads % tp || m->ffn_hidden % tp || s->gpus % tp) continue;
    for (int pp = 1; pp <= m->layers; pp++) {
      if (m->layers % pp || (s->gpus / tp) % pp) continue;
      int dp = s->gpus / (tp * pp);
      if (s->global_batch % dp) continue;
      long long per_replica = s->global_batch / dp;
      for (int vpp = 1; vpp <= m->layers / pp; vpp++) {
        if ((m->layers / pp) % vpp) continue;
        if (vpp > 1 && pp < 2) continue;
        for (int micro = 1; micro <= s->max_micro && micro <= per_replica; micro++) {
          if (per_replica % micro) continue;
          long long micro_batches = per_replica / micro;
          if (vpp > 1 && micro_batches % pp) continue;
          for (int sp = 0; sp <= 1; sp++) {
            if (sp && (tp < 2 || s->seq % tp)) continue;
            for (int z = 0; z <= 1; z++) {
              if (z && dp < 2) continue;
              for (int rc = MODEL_RECOMPUTE_NONE; rc <= MODEL_RECOMPUTE_FULL; rc++)
                /* MoE: every EP degree that divides the experts and DP (dense models: 1) */
                for (int ep = 1; ep <= (model_is_moe(m) ? dp : 1); ep++) {
                  if (model_is_moe(m) && (m->experts % ep || dp % ep)) continue;
                  sim_search_layout l = {.tp = tp, .pp = pp, .vpp = vpp, .dp = dp, .micro = micro,
                                         .sequence_parallel = sp, .zero1 = z, .recompute = (model_recompute)rc,
                                         .ep = ep};
                  count++;
                  if (fn) fn(&l, arg);
                }
            }
          }
        }
      }
    }
  }
  return count;
}

/* ---- plans ---- */

static const char *const recompute_names[] = {"none", "selective", "full"};

/* The loader's own defaults (codec threshold, DP bucket size for this dp)
 * come from loading a one-layer plan of the same model, cluster and dp, which
 * always fits in memory; the real layer count is then put back. */
static bool base_moe; /* the searched model has experts */
static int template_plan(const char *model, const char *cluster, int dp, int tp, plan *t, ts_err *e) {
  char text[1024];
  /* an MoE model with tp > 1 needs sequence parallelism, and tp | seq */
  bool sp = base_moe && tp > 1;
  int n = snprintf(text, sizeof text,
                   "{\"schema\":1,\"model\":\"%s\",\"cluster\":\"%s\",\"layout\":{\"dp\":%d,\"tp\":%d,\"pp\":1%s},"
                   "\"batch\":{\"micro\":1,\"global\":%d,\"seq\":%d},\"schedule\":\"1f1b\",\"layers_override\":1}",
                   model, cluster, dp, tp, sp ? ",\"sequence_parallel\":true" : "", dp, sp ? tp : 1);
  if (n < 0 || (size_t)n >= sizeof text) return ts_fail(e, "search", "--model", "name too long");
  return plan_from_json_text(text, (size_t)n, "search", NULL, NULL, t, e);
}

/* Template cache: the plans of the distinct dp values seen (few per search). */
typedef struct {
  int dp;
  double codec_min_bytes, dp_bucket_bytes;
} bucket_default;
static bucket_default defaults_cache[64];
static int defaults_n;

/* The names the base plan was made from, for the per-dp templates. */
static char base_model_arg[512], base_cluster_arg[512];
static int base_tp = 1, base_gpus = 1;

int sim_search_base_plan(const char *model, const char *cluster, plan *base, ts_err *e) {
  model_config m;
  ts_err sub;
  memset(base, 0, sizeof *base);
  if (strchr(model, '"') || strchr(model, '\\') || strchr(cluster, '"') || strchr(cluster, '\\'))
    return ts_fail(e, "search", strchr(model, '"') || strchr(model, '\\') ? "--model" : "--cluster",
                   "quotes and backslashes are not allowed in names");
  if (model_load(model, NULL, &m, &sub)) return ts_fail(e, "search", "--model", "%s", sub.msg);
  if (topo_load(cluster, NULL, &base->cluster, &sub)) return ts_fail(e, "search", "--cluster", "%s", sub.msg);
  base_moe = model_is_moe(&m);
  /* the widest TP that divides the model and the node: the template must fit */
  for (int tp = base->cluster.gpus_per_node; tp >= 1; tp--)
    if (base->cluster.gpus_per_node % tp == 0 && m.heads % tp == 0 && m.kv_heads % tp == 0 && m.ffn_hidden % tp == 0) {
      base_tp = tp;
      break;
    }
  if (template_plan(model, cluster, 1, base_tp, base, e)) return -1;
  snprintf(base_model_arg, sizeof base_model_arg, "%s", model);
  base_gpus = topo_total_gpus(&base->cluster);
  snprintf(base_cluster_arg, sizeof base_cluster_arg, "%s", cluster);
  defaults_n = 0;
  base->model = m;
  base->layers = m.layers;
  snprintf(base->name, sizeof base->name, "%s", model);
  return 0;
}


static int loader_defaults(int dp, double *codec_min, double *bucket, ts_err *e) {
  for (int i = 0; i < defaults_n; i++)
    if (defaults_cache[i].dp == dp) {
      *codec_min = defaults_cache[i].codec_min_bytes;
      *bucket = defaults_cache[i].dp_bucket_bytes;
      return 0;
    }
  static plan t;
  if (!base_model_arg[0]) return ts_fail(e, "search", "plan", "sim_search_base_plan was not called");
  int tp = base_tp; /* a divisor of base_tp divides the model and the node too */
  while (tp > 1 && ((long long)dp * tp > base_gpus || base_tp % tp)) tp--;
  if (template_plan(base_model_arg, base_cluster_arg, dp, tp, &t, e)) return -1;
  *codec_min = t.codec_min_bytes;
  *bucket = t.dp_bucket_bytes;
  if (defaults_n < (int)(sizeof defaults_cache / sizeof defaults_cache[0]))
    defaults_cache[defaults_n++] = (bucket_default){dp, *codec_min, *bucket};
  return 0;
}

static void fill_plan(const plan *base, const sim_search_layout *l, int seq, long long global_batch, plan *p) {
  *p = *base;
  p->dp = l->dp;
  p->tp = l->tp;
  p->pp = l->pp;
  p->vpp = l->vpp;
  p->sequence_parallel = l->sequence_parallel;
  p->order = PLAN_ORDER_TP_DP_PP;
  p->zero1 = l->zero1;
  p->recompute = l->recompute;
  p->micro_batch = l->micro;
  p->global_batch = global_batch;
  p->seq = seq;
  p->layers = base->model.layers;
  p->model.layers = p->layers;
  p->schedule = l->vpp > 1 ? PLAN_SCHED_INTERLEAVED_1F1B : PLAN_SCHED_1F1B;
  p->vocab_padded = model_vocab_per_gpu(&p->model, p->tp) * p->tp;
  p->ep = l->ep > 1 ? l->ep : 1; /* MoE; expert_tp, capacity and imbalance keep the loader's defaults */
  sim_search_apply_codec(p, SIM_SEARCH_CODEC_NONE);
  snprintf(p->name, sizeof p->name, "%s-tp%d-pp%d-vpp%d-dp%d-mb%d%s%s-rc%s", base->model.name, l->tp, l->pp, l->vpp,
           l->dp, l->micro, l->sequence_parallel ? "-sp" : "", l->zero1 ? "-zero1" : "",
           recompute_names[l->recompute]);
  if (l->ep > 1) {
    size_t used = strlen(p->name);
    snprintf(p->name + used, sizeof p->name - used, "-ep%d", l->ep);
  }
  snprintf(p->path, sizeof p->path, "search:%s", p->name);
  p->description[0] = '\0';
}

int sim_search_make_plan(const plan *base, const sim_search_layout *l, int seq, long long global_batch, plan *p,
                         ts_err *e) {
  double codec_min = 0, bucket = 0;
  if (loader_defaults(l->dp, &codec_min, &bucket, e)) return -1;
  fill_plan(base, l, seq, global_batch, p);
  p->codec_min_bytes = codec_min;
  p->dp_bucket_bytes = bucket;
  return 0;
}

bool sim_search_fits_memory(const plan *p, double *bytes) {
  plan_memory m;
  if (plan_memory_per_gpu(p, &m)) {
    *bytes = INFINITY;
    return false;
  }
  *bytes = m.total;
  return m.total <= p->cluster.gpu.hbm_gib * 1024.0 * 1024.0 * 1024.0;
}

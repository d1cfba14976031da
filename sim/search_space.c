/* search_space.c — the layouts a search tries, the plans they become, and
 * the memory filter. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "search.h"

/* the search codecs are ts_coll.h's codecs, in its order */
static const char *const *const codec_names = ts_codec_names;

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
 * p = 0.5 the paper validates, on tensor-parallel traffic, as in the
 * shipped example plans; a TACO policy also compresses a MoE layout's
 * expert all-to-alls (ep > 1). */
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
  p->codec[PLAN_TRAFFIC_CP] = none; /* the KV ring uncompressed (codec.cp is a plan's choice, not searched) */
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
      /* the layers split evenly over pp, or (pp >= 2) with the embedding and the loss each in a
       * layer's place where only that split is even */
      const bool account = m->layers % pp != 0;
      const int slots = m->layers + (account ? 2 : 0);
      if (slots % pp || (account && pp < 2) || (s->gpus / tp) % pp) continue;
      /* context parallelism: every cp dividing the GPUs left and with seq divisible by 2 cp (dense models) */
      for (int cp = 1; cp <= (model_is_moe(m) ? 1 : SIM_SEARCH_CP_MAX); cp++) {
      if ((s->gpus / (tp * pp)) % cp || (cp > 1 && s->seq % (2 * cp))) continue;
      int dp = s->gpus / (tp * pp * cp);
      if (s->global_batch % dp) continue;
      long long per_replica = s->global_batch / dp;
      for (int vpp = 1; vpp <= slots / pp; vpp++) {
        if ((slots / pp) % vpp) continue;
        if (vpp > 1 && pp < 2) continue;
        for (int micro = 1; micro <= s->max_micro && micro <= per_replica; micro++) {
          if (per_replica % micro) continue;
          long long micro_batches = per_replica / micro;
          if (vpp > 1 && micro_batches % pp) continue;
          for (int sp = 0; sp <= 1; sp++) {
            if (sp && (tp < 2 || (s->seq / cp) % tp)) continue;
            /* tp_comm_overlap under SP when the rows split into 4 pieces per TP rank (plan_program_tpo.c) */
            for (int tpo = 0; tpo <= sp; tpo++) {
            if (tpo && ((long long)micro * (s->seq / cp)) % (4LL * tp)) continue;
            for (int rc = MODEL_RECOMPUTE_NONE; rc <= MODEL_RECOMPUTE_FULL; rc++)
              /* MoE: every EP degree that divides the experts and DP (dense models: 1) */
              for (int ep = 1; ep <= (model_is_moe(m) ? dp : 1); ep++) {
                if (model_is_moe(m) && (m->experts % ep || dp % ep)) continue;
                /* data-parallel sharding, innermost (the search tries ZeRO-2 and ZeRO-3 only where the stage
                 * below does not fit, search.c): none; ZeRO-1 without and with overlap_param_gather; ZeRO-2
                 * and ZeRO-3 with it (Megatron sets it for ZeRO-3). ZeRO-1..3 need dp x cp >= 2, ZeRO-2/3 a
                 * dense model (plan_program_zero.c). */
                static const int stages[][2] = {{0, 0}, {1, 0}, {1, 1}, {2, 1}, {3, 1}};
                for (int v = 0; v < 5; v++) {
                  int z = stages[v][0];
                  if ((z && dp * cp < 2) || (z >= 2 && model_is_moe(m))) continue;
                  sim_search_layout l = {.tp = tp, .pp = pp, .vpp = vpp, .dp = dp, .micro = micro,
                                         .sequence_parallel = sp, .zero1 = z >= 1, .recompute = (model_recompute)rc,
                                         .ep = ep, .cp = cp, .zero_stage = z, .overlap_param_gather = stages[v][1],
                                         .tp_comm_overlap = tpo, .account = account};
                  count++;
                  if (fn) fn(&l, arg);
                }
              }
            }
          }
        }
      }
      }
    }
  }
  return count;
}

/* "-cp4-zero2-opg-tpo": the fields of issue 22 a layout sets (nothing for today's layouts). */
void sim_search_layout_suffix(const sim_search_layout *l, char *buf, size_t cap) {
  if (!cap) return;
  int n = snprintf(buf, cap, "%s", "");
  if (l->cp > 1 && n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, "-cp%d", l->cp);
  if (l->zero_stage >= 2 && n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, "-zero%d", l->zero_stage);
  if (l->overlap_param_gather && l->zero_stage < 3 && n >= 0 && (size_t)n < cap)
    n += snprintf(buf + n, cap - (size_t)n, "-opg");
  if (l->tp_comm_overlap && n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, "-tpo");
  if (l->account && n >= 0 && (size_t)n < cap) n += snprintf(buf + n, cap - (size_t)n, "-emb-loss");
  if (l->fp8 != PLAN_FP8_OFF && n >= 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, "-fp8-%s", plan_fp8_recipe_names[l->fp8]);
}

/* ---- plans ---- */

/* The base plan: every field the loader sets by default, from loading a plan
 * of the zoo's smallest model (gpt-tiny, one GPU) on the cluster, which fits
 * any GPU; the real model replaces it afterwards. Loading a one-layer plan of
 * the real model instead failed whenever its embedding and output layers alone
 * overflowed the HBM at that template's TP (issue 20: Llama-3 70B on L40S was
 * answered "no layout fits" while TP8 PP16 DP2 fits), and no template's memory
 * should decide what a search may try. */
static int template_plan(const char *cluster, plan *t, ts_err *e) {
  char text[1024];
  int n = snprintf(text, sizeof text,
                   "{\"schema\":1,\"model\":\"gpt-tiny\",\"cluster\":\"%s\",\"layout\":{\"dp\":1,\"tp\":1,"
                   "\"pp\":1},\"batch\":{\"micro\":1,\"global\":1,\"seq\":1},\"schedule\":\"1f1b\"}",
                   cluster);
  if (n < 0 || (size_t)n >= sizeof text) return ts_fail(e, "search", "--cluster", "name too long");
  return plan_from_json_text(text, (size_t)n, "search", NULL, NULL, t, e);
}

int sim_search_base_plan(const char *model, const char *cluster, plan *base, ts_err *e) {
  model_config m;
  ts_err sub;
  memset(base, 0, sizeof *base);
  if (strchr(model, '"') || strchr(model, '\\') || strchr(cluster, '"') || strchr(cluster, '\\'))
    return ts_fail(e, "search", strchr(model, '"') || strchr(model, '\\') ? "--model" : "--cluster",
                   "quotes and backslashes are not allowed in names");
  if (model_load(model, NULL, &m, &sub)) return ts_fail(e, "search", "--model", "%s", sub.msg);
  if (topo_load(cluster, NULL, &base->cluster, &sub)) return ts_fail(e, "search", "--cluster", "%s", sub.msg);
  if (template_plan(cluster, base, &sub)) return ts_fail(e, "search", "--cluster", "%s", sub.msg);
  base->model = m;
  base->layers = m.layers;
  snprintf(base->name, sizeof base->name, "%s", model);
  return 0;
}

int sim_search_parse_fp8(const char *list, unsigned *mask, bool *search, ts_err *e) {
  *mask = 0;
  *search = false;
  if (strcmp(list, "search") == 0) {
    *search = true;
    for (int k = PLAN_FP8_OFF; plan_fp8_recipe_names[k]; k++) *mask |= 1u << k;
    return 0;
  }
  for (const char *s = list;;) {
    size_t n = strcspn(s, ",");
    int k = PLAN_FP8_OFF + 1; /* plan_fp8_recipe_names[0] is "bf16": "none" names it here, as layout.fp8 null */
    while (plan_fp8_recipe_names[k] && (strlen(plan_fp8_recipe_names[k]) != n || strncmp(plan_fp8_recipe_names[k], s, n)))
      k++;
    if (n == 4 && strncmp(s, "none", 4) == 0)
      k = PLAN_FP8_OFF;
    else if (!plan_fp8_recipe_names[k])
      return ts_fail(e, "search", "--fp8", "\"%.*s\" is not none, tensorwise, delayed, mxfp8 or search", (int)n, s);
    if (*mask & (1u << k)) return ts_fail(e, "search", "--fp8", "\"%.*s\" is listed twice", (int)n, s);
    *mask |= 1u << k;
    if (!s[n]) return 0;
    s += n + 1;
  }
}

int sim_search_fp8_recipes(const sim_search_options *o, const topo_gpu *g, unsigned *run, unsigned *skipped,
                           ts_err *e) {
  unsigned asked = o->fp8_recipes ? o->fp8_recipes : 1u << PLAN_FP8_OFF;
  ts_err sub;
  *run = *skipped = 0;
  for (int k = PLAN_FP8_OFF; plan_fp8_recipe_names[k]; k++) {
    if (!(asked & (1u << k))) continue;
    if (!plan_fp8_check_gpu((plan_fp8_recipe)k, g, "search", "--fp8", o->fp8_search ? &sub : e)) {
      *run |= 1u << k;
      continue;
    }
    if (!o->fp8_search) return -1; /* an explicit list: the loader's message, naming --fp8 and the GPU */
    *skipped |= 1u << k;
  }
  return 0;
}

int sim_search_apply_options(const sim_search_options *o, plan *base, ts_err *e) {
  base->host_framework = o->host_framework;
  if (o->hidden_dropout_set) base->hidden_dropout = o->hidden_dropout;
  if (o->alloc_reserve_set) base->alloc_reserve = o->alloc_reserve, base->alloc_reserve_given = true;
  unsigned run, skipped;
  if (sim_search_fp8_recipes(o, &base->cluster.gpu, &run, &skipped, e)) return -1;
  if (o->fp8_param_gather && !(run & ~(1u << PLAN_FP8_OFF)))
    return ts_fail(e, "search", "--fp8-param-gather", "needs --fp8 with a recipe the %s runs (FP8 parameters of FP8 "
                   "GEMMs)", base->cluster.gpu.name);
  base->fp8_recipe = PLAN_FP8_OFF; /* each candidate's own: its layout's fp8 (fill_plan) */
  base->fp8_param_gather = o->fp8_param_gather;
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
  p->cp = l->cp > 1 ? l->cp : 1;
  p->zero_stage = l->zero_stage > 0 ? l->zero_stage : l->zero1 ? 1 : 0;
  p->zero1 = p->zero_stage >= 1;
  p->overlap_param_gather = l->overlap_param_gather || p->zero_stage == 3;
  p->tp_comm_overlap = l->tp_comm_overlap;
  /* the search keeps Transformer Engine's defaults per GEMM (layout.tp_comm_overlap_cfg not searched) */
  memset(p->tpo_cfg, 0, sizeof p->tpo_cfg);
  p->tp_comm_overlap_cfg_given = false;
  p->account_embedding = p->account_loss = l->account;
  /* the candidate's recipe; --fp8-param-gather where FP8 GEMMs' parameters are gathered by the distributed
   * optimizer (plan_validate_fp8's rule) */
  p->fp8_recipe = l->fp8;
  p->fp8_param_gather = base->fp8_param_gather && p->zero1 && l->fp8 != PLAN_FP8_OFF;
  sim_search_apply_codec(p, SIM_SEARCH_CODEC_NONE);
  snprintf(p->name, sizeof p->name, "%s-tp%d-pp%d-vpp%d-dp%d-mb%d%s%s-rc%s", base->model.name, l->tp, l->pp, l->vpp,
           l->dp, l->micro, l->sequence_parallel ? "-sp" : "", l->zero1 ? "-zero1" : "",
           plan_recompute_name(l->recompute));
  if (l->ep > 1) {
    size_t used = strlen(p->name);
    snprintf(p->name + used, sizeof p->name - used, "-ep%d", l->ep);
  }
  sim_search_layout_suffix(l, p->name + strlen(p->name), sizeof p->name - strlen(p->name));
  snprintf(p->path, sizeof p->path, "search:%s", p->name);
  p->description[0] = '\0';
}

int sim_search_make_plan(const plan *base, const sim_search_layout *l, int seq, long long global_batch, plan *p,
                         ts_err *e) {
  (void)e;
  fill_plan(base, l, seq, global_batch, p);
  plan_set_loader_defaults(p);
  return 0;
}

bool sim_search_fits_memory(const plan *p, double *bytes) { return sim_search_fits_memory_reserve(p, 0.0, bytes); }

int sim_search_parse_headroom(const char *s, double *gib, double *fraction, ts_err *e) {
  char *end;
  *gib = *fraction = 0;
  double v = strtod(s, &end);
  if (end == s || *end || !isfinite(v) || v < 0 || v > 1e6)
    return ts_fail(e, "search", "--headroom", "\"%s\" is not a number of GiB (>= 1) or a fraction of the HBM (0 to 1)", s);
  if (v < 1.0)
    *fraction = v;
  else
    *gib = v;
  return 0;
}

bool sim_search_fits_memory_reserve(const plan *p, double reserve, double *bytes) {
  plan_memory m;
  if (plan_memory_per_gpu(p, &m)) {
    *bytes = INFINITY;
    return false;
  }
  *bytes = m.total;
  return m.total + reserve <= p->cluster.gpu.hbm_gib * 1024.0 * 1024.0 * 1024.0;
}

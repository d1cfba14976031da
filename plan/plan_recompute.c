/* layout.recompute_modules: Megatron-LM's --recompute-modules under selective
 * granularity (megatron/training/arguments.py: core_attn, moe_act, layernorm,
 * mla_up_proj, mlp, moe, shared_experts). Modelled: core_attn (the attention
 * core, tacosim's selective recomputation), layernorm, moe_act and moe; the
 * loader refuses the others by name. What each saves (activation bytes per
 * layer, below) and what it reruns before the backward (plan_program.c,
 * plan_program_moe.c) follow Megatron-Core's checkpointing of that module:
 * the module's input is kept, its outputs and insides are not. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

static const struct {
  const char *name;
  unsigned bit;
} modules[] = {
    {"core_attn", PLAN_RECOMPUTE_CORE_ATTN},
    {"layernorm", PLAN_RECOMPUTE_LAYERNORM},
    {"moe_act", PLAN_RECOMPUTE_MOE_ACT},
    {"moe", PLAN_RECOMPUTE_MOE},
};
#define N_MODULES (sizeof modules / sizeof modules[0])

/* layout.recompute_num_layers: Megatron-LM's --recompute-method block
 * --recompute-num-layers N (megatron/core/transformer/transformer_block.py,
 * _checkpointed_forward: under "block" the first N layers of the chunk are
 * checkpointed, the rest run plainly). */
static int load_num_layers(json_t *layout, const char *file, plan *p, ts_err *e) {
  json_t *v = json_object_get(layout, "recompute_num_layers");
  p->recompute_num_layers = 0;
  if (!v) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100000)
    return ts_fail(e, file, "layout.recompute_num_layers", "must be an integer >= 1 (layers of each chunk recomputed)");
  if (p->recompute != MODEL_RECOMPUTE_FULL)
    return ts_fail(e, file, "layout.recompute_num_layers",
                   "needs \"recompute\": \"full\" (Megatron-LM's --recompute-num-layers under full granularity, "
                   "block method)");
  p->recompute_num_layers = (int)json_integer_value(v);
  return 0;
}

int plan_load_recompute_modules(json_t *layout, const char *file, plan *p, ts_err *e) {
  if (load_num_layers(layout, file, p, e)) return -1;
  json_t *a = json_object_get(layout, "recompute_modules");
  if (!a) {
    p->recompute_modules = p->recompute == MODEL_RECOMPUTE_SELECTIVE ? PLAN_RECOMPUTE_CORE_ATTN : 0;
    return 0;
  }
  if (p->recompute != MODEL_RECOMPUTE_SELECTIVE)
    return ts_fail(e, file, "layout.recompute_modules",
                   "needs \"recompute\": \"selective\" (Megatron-LM's --recompute-modules apply to selective "
                   "granularity only)");
  if (!json_is_array(a) || json_array_size(a) == 0)
    return ts_fail(e, file, "layout.recompute_modules", "must be a non-empty array of module names");
  p->recompute_modules = 0;
  for (size_t i = 0; i < json_array_size(a); i++) {
    const char *name = json_string_value(json_array_get(a, i));
    if (!name) return ts_fail(e, file, "layout.recompute_modules", "entry %zu is not a string", i);
    unsigned bit = 0;
    for (size_t k = 0; k < N_MODULES; k++)
      if (strcmp(name, modules[k].name) == 0) bit = modules[k].bit;
    if (!bit)
      return ts_fail(e, file, "layout.recompute_modules",
                     "\"%s\": not modelled (modelled: core_attn, layernorm, moe_act, moe; Megatron-LM's mlp, "
                     "mla_up_proj and shared_experts are not)",
                     name);
    if (p->recompute_modules & bit)
      return ts_fail(e, file, "layout.recompute_modules", "\"%s\" is named twice", name);
    p->recompute_modules |= bit;
  }
  return 0;
}

int plan_validate_recompute(const plan *p, ts_err *e) {
  const unsigned moe_bits = PLAN_RECOMPUTE_MOE_ACT | PLAN_RECOMPUTE_MOE;
  if ((p->recompute_modules & moe_bits) && !model_is_moe(&p->model))
    return ts_fail(e, p->path, "layout.recompute_modules", "%s: %s has no experts (a dense model)",
                   p->recompute_modules & PLAN_RECOMPUTE_MOE ? "moe" : "moe_act", p->model.name);
  return 0;
}

/* The routed experts' tensors one MoE layer keeps (bytes): per row (t x
 * top_k x etp rows) the permuted input (2h), the activation's input(s) and
 * FC2's input (2 x expert_ffn / etp each), and the router's fp32
 * probabilities per local token: the "experts" term of the model's count
 * (models/model_totals.c, moe_layer_bytes). */
static double expert_bytes(const plan *p, const model_shard *s, double *fc2_input) {
  const model_config *m = &p->model;
  const double sb = (double)s->seq * s->micro_batch, t = s->tp, h = m->hidden;
  const int etp = s->etp > 0 ? s->etp : s->tp;
  const double local_tokens = s->sequence_parallel ? sb / t : sb;
  const double rows = local_tokens * m->top_k * etp, fe = (double)m->expert_ffn_hidden / etp;
  const double act_inputs = m->activation == MODEL_ACT_SWIGLU ? 2.0 : 1.0;
  *fc2_input = rows * 2.0 * fe;
  return rows * (2.0 * h + 2.0 * fe * act_inputs + 2.0 * fe) + local_tokens * 4.0 * m->experts;
}

double plan_recompute_saved_bytes(const plan *p, const model_shard *s) {
  const unsigned set = plan_recompute_set(p);
  double saved = 0.0;
  if (set & PLAN_RECOMPUTE_LAYERNORM) {
    /* the norms' outputs (the inputs of QKV and of FC1 / the router), 2h
     * bytes per token each, split over tp under sequence parallelism */
    const double sb = (double)s->seq * s->micro_batch;
    saved += 2.0 * 2.0 * p->model.hidden * sb / (s->sequence_parallel ? s->tp : 1);
  }
  if (model_is_moe(&p->model) && (set & (PLAN_RECOMPUTE_MOE | PLAN_RECOMPUTE_MOE_ACT))) {
    double fc2_input, experts = expert_bytes(p, s, &fc2_input);
    saved += set & PLAN_RECOMPUTE_MOE ? experts : fc2_input;
  }
  return saved;
}

double plan_recompute_transient_bytes(const plan *p, const model_shard *s) {
  if (!plan_recomputes(p, PLAN_RECOMPUTE_MOE) || !model_is_moe(&p->model)) return 0.0;
  double fc2_input;
  return expert_bytes(p, s, &fc2_input); /* the one MoE block being recomputed holds its tensors */
}

void plan_recompute_modules_name(const plan *p, char *buf, size_t cap) {
  buf[0] = '\0';
  size_t used = 0;
  const unsigned set = plan_recompute_set(p);
  for (size_t k = 0; k < N_MODULES && used < cap; k++)
    if (set & modules[k].bit)
      used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? "+" : "", modules[k].name);
}

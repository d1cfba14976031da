/* plan_moe.c — the mixture-of-experts side of a plan: its expert groups,
 * the layout rules, and what its experts weigh per GPU.
 *
 * Expert layers fold the tp x dp ranks of a pipeline stage into
 * etp x ep x edp, as Megatron-Core's "MoE parallel folding" does (without
 * context parallelism): with q = tp_index + tp x dp_index, a rank's expert-TP
 * index is q mod etp, its EP index (q / etp) mod ep, its expert-DP index
 * q / (etp ep). With the default etp = tp this is EP carved from DP: the EP
 * group is ep consecutive DP replicas of one TP rank. */
#include <stdio.h>

#include "plan.h"
#include "plan_internal.h"

int plan_edp(const plan *p) {
  int etp = p->etp > 0 ? p->etp : p->tp, ep = p->ep > 0 ? p->ep : 1;
  return p->tp * p->dp / (etp * ep);
}

static int etp_of(const plan *p) { return p->etp > 0 ? p->etp : p->tp; }
static int ep_of(const plan *p) { return p->ep > 0 ? p->ep : 1; }

static int rank_of_q(const plan *p, int q, int pp) {
  return plan_rank_of(p, (plan_coord){.dp = q / p->tp, .tp = q % p->tp, .pp = pp});
}

int plan_moe_group_members(const plan *p, int rank, plan_group_kind g, int *members, int cap) {
  if (rank < 0 || rank >= plan_world_size(p)) return -1;
  plan_coord c = plan_coord_of(p, rank);
  const int etp = etp_of(p), ep = ep_of(p), q = c.tp + p->tp * c.dp;
  const int i_etp = q % etp, i_ep = (q / etp) % ep, i_edp = q / (etp * ep);
  int n = 0, size = g == PLAN_GROUP_EP ? ep : g == PLAN_GROUP_ETP ? etp : plan_edp(p);
  for (int k = 0; k < size; k++, n++) {
    int a = i_etp, b = i_ep, d = i_edp;
    if (g == PLAN_GROUP_EP) b = k;
    else if (g == PLAN_GROUP_ETP) a = k;
    else d = k;
    if (n < cap) members[n] = rank_of_q(p, a + etp * (b + ep * d), c.pp);
  }
  return n;
}

int plan_moe_group_index(const plan *p, int rank, plan_group_kind g) {
  if (rank < 0 || rank >= plan_world_size(p)) return -1;
  plan_coord c = plan_coord_of(p, rank);
  const int etp = etp_of(p), ep = ep_of(p), q = c.tp + p->tp * c.dp;
  if (g == PLAN_GROUP_EP) return (q / etp) % ep;
  if (g == PLAN_GROUP_ETP) return q % etp;
  return q / (etp * ep);
}

double plan_moe_max_load(const plan *p) {
  if (ep_of(p) < 2) return 1.0; /* one rank holds every expert: nobody waits for another */
  double f = p->moe_imbalance >= 1.0 ? p->moe_imbalance : 1.0;
  if (p->capacity_factor > 0 && p->capacity_factor < f) f = p->capacity_factor < 1.0 ? 1.0 : p->capacity_factor;
  return f;
}

double plan_moe_dispatch_copies(const plan *p) {
  const model_config *m = &p->model;
  const int ep = ep_of(p), k = m->top_k;
  if (!p->moe_flex || ep < 2) return k;
  const double E = m->experts, local = (double)m->experts / ep;
  double none = 1.0; /* P(none of a token's k distinct experts is on a given rank) */
  for (int i = 0; i < k; i++) none *= E - local - i > 0 ? (E - local - i) / (E - i) : 0.0;
  return ep * (1.0 - none);
}

double plan_moe_layer_params_of_stage(const plan *p, int stage, const model_op *ops, int n, bool experts_only) {
  double total = 0.0;
  for (int c = 0; c < p->vpp; c++) {
    int first = plan_chunk_first_layer(p, stage, c), lpc = plan_vchunk_layers(p, stage, c);
    for (int l = first; l < first + lpc; l++)
      for (int i = 0; i < n; i++)
        if (model_op_in_layer(&p->model, &ops[i], l) && (!experts_only || ops[i].expert)) total += ops[i].params;
  }
  return total;
}

double plan_expert_params_of_stage(const plan *p, int stage) {
  if (!model_is_moe(&p->model)) return 0.0;
  model_shard s = plan_shard(p);
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e;
  int n = model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  if (n < 0) return -1.0;
  return plan_moe_layer_params_of_stage(p, stage, ops, n, true);
}

double plan_optimizer_params_of_stage(const plan *p, int stage) {
  double all = plan_params_of_stage(p, stage);
  if (!p->zero1 || all < 0) return all;
  double experts = plan_expert_params_of_stage(p, stage);
  if (experts < 0) return -1.0;
  return (all - experts) / p->dp + experts / plan_edp(p);
}

/* ---- layout rules ---- */

int plan_moe_validate(const plan *p, ts_err *e) {
  const char *f = p->path;
  const model_config *m = &p->model;
  const int etp = etp_of(p), ep = ep_of(p);
  if (!model_is_moe(m)) {
    if (p->ep > 1 || p->etp > 0 || p->capacity_factor > 0 || p->moe_imbalance > 0 || p->moe_flex)
      return ts_fail(e, f, p->ep > 1 ? "layout.ep" : p->etp > 0 ? "layout.expert_tp"
                           : p->capacity_factor > 0 ? "layout.capacity_factor"
                           : p->moe_flex ? "layout.moe_token_dispatcher_type" : "layout.moe_imbalance",
                     "%s has no experts (a dense model)", m->name);
    if (p->codec[PLAN_TRAFFIC_EP].kind != PLAN_CODEC_NONE)
      return ts_fail(e, f, "codec.ep", "%s has no experts: there is no expert all-to-all to compress", m->name);
    return 0;
  }
  /* The ZeRO-2/3 programs and the parameter-gather overlap (plan_program_zero.c)
   * shard and gather the dense buckets only; expert parameters live on the
   * expert-DP group. Until both are modelled together, refuse the mix. */
  if (p->zero_stage >= 2)
    return ts_fail(e, f, "layout.data_parallel_sharding_strategy",
                   "optim_grads / optim_grads_params are not modelled for models with experts (%s) yet; use optim "
                   "(ZeRO-1) or no_shard", m->name);
  if (p->overlap_param_gather)
    return ts_fail(e, f, "layout.overlap_param_gather",
                   "not modelled for models with experts (%s) yet (expert parameters are gathered over expert-DP)",
                   m->name);
  if (m->experts % ep)
    return ts_fail(e, f, "layout.ep", "%d does not divide the %d experts of %s", ep, m->experts, m->name);
  if (etp < 1 || p->tp % etp)
    return ts_fail(e, f, "layout.expert_tp", "%d must divide tp %d (an expert's FFN is split inside a TP group)",
                   etp, p->tp);
  if (m->expert_ffn_hidden % etp)
    return ts_fail(e, f, "layout.expert_tp", "%d does not divide expert_ffn_hidden %d of %s", etp,
                   m->expert_ffn_hidden, m->name);
  if (((long long)p->tp * p->dp) % ((long long)etp * ep))
    return ts_fail(e, f, "layout.ep",
                   "expert_tp %d x ep %d must divide tp %d x dp %d (the expert layers fold a stage's tp x dp ranks "
                   "into expert_tp x ep x expert-dp, as Megatron-Core does)", etp, ep, p->tp, p->dp);
  if (p->tp > 1 && !p->sequence_parallel)
    return ts_fail(e, f, "layout.sequence_parallel",
                   "false with tp %d: an MoE model with tensor parallelism needs sequence parallelism (tokens enter "
                   "the router sequence-split, as Megatron-Core requires)", p->tp);
  if (p->capacity_factor < 0 || (p->capacity_factor > 0 && p->capacity_factor < 1.0))
    return ts_fail(e, f, "layout.capacity_factor", "%g: 0 (dropless) or at least 1", p->capacity_factor);
  if (p->moe_imbalance < 1.0)
    return ts_fail(e, f, "layout.moe_imbalance", "%g: the busiest rank's load over the mean is at least 1",
                   p->moe_imbalance);
  if (ep > 1 && p->moe_imbalance > ep)
    return ts_fail(e, f, "layout.moe_imbalance", "%g exceeds ep %d (one rank cannot take more than every token)",
                   p->moe_imbalance, ep);
  if (plan_codec_has_caat(p->codec[PLAN_TRAFFIC_EP].kind))
    return ts_fail(e, f, "codec.ep.kind",
                   "CAAT-Net does not apply to expert all-to-alls: they move whole token rows to other ranks, not "
                   "partial sums of hidden channels that a subset could stand for; use taco or none");
  return 0;
}

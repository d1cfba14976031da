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
#include <stdlib.h>

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

/* EP member k (0..ep-1) of rank's EP group. */
static int ep_member(const plan *p, plan_coord c, int k) {
  const int etp = etp_of(p), ep = ep_of(p), q = c.tp + p->tp * c.dp;
  return rank_of_q(p, q % etp + etp * (k + ep * (q / (etp * ep))), c.pp);
}

static int node_of(const plan *p, int rank) {
  return p->cluster.gpus_per_node > 0 ? rank / p->cluster.gpus_per_node : 0;
}

/* The flex dispatcher's legs across nodes (plan.h PLAN_GROUP_EP_RAIL, _EP_NODE), in EP order: the EP ranks on
 * rank's node; one EP rank per node of the EP group, the one with rank's place among its node's EP ranks
 * (DeepEP sends to the GPU with the sender's NVLink index on each node). */
static int ep_leg_members(const plan *p, int rank, plan_group_kind g, int *members, int cap) {
  plan_coord c = plan_coord_of(p, rank);
  const int ep = ep_of(p), home = node_of(p, rank);
  int place = 0, n = 0;
  for (int k = 0; k < ep; k++) {
    int m = ep_member(p, c, k);
    if (m == rank) break;
    place += node_of(p, m) == home;
  }
  for (int k = 0; k < ep; k++) {
    int m = ep_member(p, c, k), node = node_of(p, m);
    if (g == PLAN_GROUP_EP_NODE) {
      if (node != home) continue;
    } else {
      bool first = true; /* m's node not seen before among the EP ranks */
      for (int j = 0; j < k && first; j++) first = node_of(p, ep_member(p, c, j)) != node;
      if (!first) continue;
      int seen = 0, pick = -1; /* the node's EP rank at `place` */
      for (int j = k; j < ep && pick < 0; j++) {
        int mj = ep_member(p, c, j);
        if (node_of(p, mj) == node && seen++ == place) pick = mj;
      }
      if (pick < 0) continue; /* fewer EP ranks on that node (refused by plan_moe_validate) */
      m = pick;
    }
    if (n < cap) members[n] = m;
    n++;
  }
  return n;
}

int plan_moe_group_members(const plan *p, int rank, plan_group_kind g, int *members, int cap) {
  if (rank < 0 || rank >= plan_world_size(p)) return -1;
  if (g == PLAN_GROUP_EP_RAIL || g == PLAN_GROUP_EP_NODE) {
    if (plan_moe_node_copies(p) <= 0) { /* no once-a-node leg: a group of one */
      if (cap > 0) members[0] = rank;
      return 1;
    }
    return ep_leg_members(p, rank, g, members, cap);
  }
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
  if (g == PLAN_GROUP_EP_RAIL || g == PLAN_GROUP_EP_NODE) {
    int m[PLAN_MAX_EP_LEG];
    int n = plan_moe_group_members(p, rank, g, m, PLAN_MAX_EP_LEG);
    for (int i = 0; i < n && i < PLAN_MAX_EP_LEG; i++)
      if (m[i] == rank) return i;
    return -1;
  }
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

/* P(none of a token's k distinct experts, drawn uniformly from E, is among `held` of them) */
static double none_of(double E, double held, int k) {
  double none = 1.0;
  for (int i = 0; i < k; i++) none *= E - held - i > 0 ? (E - held - i) / (E - i) : 0.0;
  return none;
}

double plan_moe_dispatch_copies(const plan *p) {
  const model_config *m = &p->model;
  const int ep = ep_of(p), k = m->top_k;
  if (!p->moe_flex || ep < 2) return k;
  return ep * (1.0 - none_of(m->experts, (double)m->experts / ep, k));
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* Nodes of the EP group of rank r and its ranks on each (*per_node); -1 when its nodes hold unequal numbers. */
static int ep_nodes_of(const plan *p, int r, int *per_node) {
  plan_coord c = plan_coord_of(p, r);
  const int ep = ep_of(p);
  int *node = malloc(sizeof *node * (size_t)ep), nodes = 0, g = -1;
  if (!node) return -1;
  for (int k = 0; k < ep; k++) node[k] = node_of(p, ep_member(p, c, k));
  qsort(node, (size_t)ep, sizeof *node, cmp_int);
  for (int k = 0, run = 1; k < ep; k++, run++)
    if (k == ep - 1 || node[k + 1] != node[k]) {
      if (g >= 0 && run != g) g = -2;
      if (g != -2) g = run;
      nodes++;
      run = 0;
    }
  free(node);
  *per_node = g;
  return g < 0 ? -1 : nodes;
}

int plan_moe_ep_nodes(const plan *p, int *per_node) {
  const int ep = ep_of(p);
  *per_node = ep;
  if (ep < 2 || plan_world_size(p) < 1) return 1;
  return ep_nodes_of(p, 0, per_node);
}

double plan_moe_node_copies(const plan *p) {
  const model_config *m = &p->model;
  if (!p->moe_flex || ep_of(p) < 2) return 0.0;
  int g, N = plan_moe_ep_nodes(p, &g);
  if (N < 2) return 0.0;
  return (N - 1) * (1.0 - none_of(m->experts, (double)m->experts / N, m->top_k));
}

double plan_moe_nvlink_copies(const plan *p) {
  const model_config *m = &p->model;
  const int ep = ep_of(p);
  if (!p->moe_flex || ep < 2) return 0.0;
  int g, N = plan_moe_ep_nodes(p, &g);
  if (N < 2) return 0.0;
  return (ep - N) * (1.0 - none_of(m->experts, (double)m->experts / ep, m->top_k));
}

/* ---- the flex dispatcher's kernels, as published ----
 *
 * Each row: a kernel benchmark's published "algorithm" (DeepEP: "bottleneck", "logical") bandwidth of dispatch
 * and combine, the share of the counted bytes that never cross the link (the benchmark's byte count includes
 * the sender's own GPU, or own node over RDMA), and the link's per-direction rate on the machine measured. The
 * share of the link a kernel achieves: logical x (1 - local) / link. Under the benchmarks' uniform routing a
 * rank receives equally from each of the R ranks (N nodes), so local = 1 / R (1 / N).
 *
 *  - DeepEP V1 "normal" kernels, H800 (NVLink 200 GB/s a direction, CX7 400 Gb/s = 50 GB/s): deepseek-ai/DeepEP
 *    README.md at f0d34aa (2025-08) = docs/legacy.md at dd758ca (2026-07-14), "Normal kernels with NVLink and
 *    RDMA forwarding", DeepSeek-V3 setting (4,096 tokens, hidden 7,168, top-8, FP8 dispatch, BF16 combine):
 *    intranode EP 8 dispatch 153, combine 158 GB/s (NVLink); internode EP 32 dispatch 58, combine 57 GB/s
 *    (RDMA). Bytes: tests/test_intranode.py `recv_x.numel() * 2` (every received row, the rank's own ones
 *    too); tests/legacy/test_internode.py:60-63,224 `num_rdma_token_sent` (distinct nodes a token reaches,
 *    its own node included). H800's NVLink: "a nominal bandwidth of 200GB/s ... actual achievable bandwidth
 *    peaks at approximately 160GB/s" (a DeepEP maintainer, deepseek-ai/DeepEP issue 16, 2025-02-26).
 *    Its tests ran 24 SMs (test_internode.py `num_sms = 24`); Megatron-Core runs DeepEP at 20
 *    (moe_deepep_num_sms, transformer_config.py at fca1679e24:796; Buffer.num_sms = 20 before that).
 *  - HybridEP, GB200 NVL72 (NVLink5 900 GB/s a direction), 8 ranks, 4,096 tokens, hidden 7,168, top-8 of 64,
 *    BF16, "Kernel Only" (the dispatch or combine kernel's time; the "Torch API" column adds the routing map's
 *    all-gather, the metadata kernel, a host sync and a copy): deepseek-ai/DeepEP branch hybrid-ep,
 *    Hybrid-EP_Intra-node_Implementation.md at 6ad6896 (2025-09-25), the same table in docs/README_Hybrid-EP.md at
 *    94a9f8f (2026-07-10): 16 SMs dispatch 750.15, combine 684.27; 32 SMs 764.03, 737.13 GB/s. Bytes:
 *    tests/test_mnnvlink_hybridep.py:184-185 at 6ad6896, `dispatched_hidden.numel() * 2` (the rank's own rows
 *    too).
 *  - HybridEP across nodes, H100 (CX7 50 GB/s), 32 ranks = 4 nodes of 8, 16 SMs, BF16, "Kernel Only": the same
 *    README at 94a9f8f (table first published at 1dddd19, 2025-11-18): dispatch 57.69, combine 57.46 GB/s "IB
 *    bandwidth"; bytes: tests/utils.py count_rdma_send_from_routing_map ("we do not set the local node map to
 *    zeros", to align with DeepEP: the own node counted).
 *
 * Applied to every plan of the backend, on any GPU: the share measured on one machine is taken to hold on
 * another link of the same kind (not measured: DeepEP on the H100's 450 GB/s NVLink; the H20, same NVLink rate,
 * gave 337 GB/s in issue 16, 0.66 of the link by the same count, as the H800 row's 0.67). */
typedef struct {
  double dispatch_gbps, combine_gbps; /* published logical rates */
  double ranks;                       /* ranks (NVLink) or nodes (RDMA) of the benchmark: local = 1 / ranks */
  double link_gbps;                   /* the measured machine's link, one direction */
} flex_kernel_rate;

static const flex_kernel_rate deepep_nvlink = {153.0, 158.0, 8, 200.0};
static const flex_kernel_rate deepep_rdma = {58.0, 57.0, 4, 50.0};
static const flex_kernel_rate hybridep_nvlink_16sm = {750.15, 684.27, 8, 900.0};
static const flex_kernel_rate hybridep_nvlink_32sm = {764.03, 737.13, 8, 900.0};
static const flex_kernel_rate hybridep_rdma = {57.69, 57.46, 4, 50.0};

double plan_moe_flex_link_share(const plan *p, plan_group_kind g, bool combine) {
  if (!p->moe_flex || ep_of(p) < 2) return 0.0;
  const flex_kernel_rate *k;
  bool rdma = g == PLAN_GROUP_EP_RAIL;
  if (g != PLAN_GROUP_EP && g != PLAN_GROUP_EP_NODE && !rdma) return 0.0;
  if (p->moe_hybridep)
    k = rdma ? &hybridep_rdma : p->moe_hybridep_num_sms == 32 ? &hybridep_nvlink_32sm : &hybridep_nvlink_16sm;
  else
    k = rdma ? &deepep_rdma : &deepep_nvlink;
  double logical = combine ? k->combine_gbps : k->dispatch_gbps;
  return logical * (1.0 - 1.0 / k->ranks) / k->link_gbps;
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
  if (p->moe_flex && ep > 1) {
    /* DeepEP's internode kernels: a token once to each node over RDMA, then over NVLink inside it; the model
     * needs every EP group to put the same number of its ranks on each of its nodes (DeepEP: 8 a node) */
    int g0, n0 = plan_moe_ep_nodes(p, &g0);
    for (int r = 0, world = plan_world_size(p); r < world && n0 > 0; r++) {
      if (plan_moe_group_index(p, r, PLAN_GROUP_EP) != 0) continue; /* one rank of each EP group */
      int g, n = ep_nodes_of(p, r, &g);
      if (n != n0 || g != g0) n0 = -1;
    }
    if (n0 < 0)
      return ts_fail(e, f, "layout.moe_token_dispatcher_type",
                     "\"flex\" with EP groups (ep %d) that hold unequal numbers of their ranks on their nodes (%d GPUs a "
                     "node): the once-a-node transfer is modelled for EP groups with the same number of ranks on each "
                     "of their nodes", ep, p->cluster.gpus_per_node);
    if (n0 > PLAN_MAX_EP_LEG || g0 > PLAN_MAX_EP_LEG)
      return ts_fail(e, f, "layout.ep", "%d with \"flex\": %d nodes of %d EP ranks each; at most %d of either", ep, n0,
                     g0, PLAN_MAX_EP_LEG);
  }
  if (plan_codec_has_caat(p->codec[PLAN_TRAFFIC_EP].kind))
    return ts_fail(e, f, "codec.ep.kind",
                   "CAAT-Net does not apply to expert all-to-alls: they move whole token rows to other ranks, not "
                   "partial sums of hidden channels that a subset could stand for; use taco or none");
  return 0;
}

/* plan_program_moe.c — the MoE layer in a rank's program, as Megatron-Core's
 * all-to-all token dispatcher runs it.
 *
 * Forward, per MoE layer: router + top-k, permute (model ops, compute
 * stream), then the dispatch: an all-to-all over the EP group of this rank's
 * t x top_k token copies (t = micro x seq / tp under SP), and with expert TP
 * an all-gather over the expert-TP group; the grouped expert GEMMs on the
 * rows that arrive (t x top_k x etp on average); the imbalance wait; the
 * combine: reduce-scatter over expert TP, all-to-all back over EP; then
 * un-permute. Backward mirrors it. The token collectives run on the TP
 * stream (high priority, as the TP collectives) and the next compute op
 * waits for them, so they are exposed unless other work hides them.
 *
 * Imbalance: routing is never exactly even; the busiest EP rank receives
 * plan_moe_max_load(p) times the mean rows, and every rank's combine waits
 * for it. The program holds the mean rows in the expert GEMMs and, after
 * them, a PLAN_MOP_MOE_IMBALANCE op: the extra (f - 1) x the expert ops'
 * time that the busiest rank spends and the others wait out. The simulator
 * prices it from the expert ops' own costs and reports it on its own line.
 *
 * Flex dispatcher (layout.moe_token_dispatcher_type "flex", DeepEP): a token
 * goes once to each EP rank that holds one of its experts, which expands it to
 * its local experts (plan_moe_dispatch_copies). When the EP group spans N
 * nodes of g >= 2 of its ranks each (DeepEP's internode kernels), the dispatch is
 * two all-to-alls: over the EP ranks with this rank's place on every node
 * (PLAN_GROUP_EP_RAIL, RDMA), a token once to each remote node that holds one
 * of its experts (plan_moe_node_copies), then over this node's EP ranks
 * (PLAN_GROUP_EP_NODE, NVLink), every token that landed here, or starts here,
 * on to the other ranks of the node holding its experts
 * (plan_moe_nvlink_copies). The combine runs the reverse: the node's partial
 * outputs reduced over NVLink to the rank that received the token, then one
 * RDMA transfer a node back. DeepEP runs the two legs in one kernel, chunk by
 * chunk (RDMA senders, NVLink forwarders and receivers are warps of the same
 * kernel, working on a token while the next arrives), so the legs overlap:
 * the RDMA leg runs on the EP stream beside the NVLink leg on the TP stream,
 * both from the same point, and what follows waits for both (the pipeline's
 * fill and drain, a chunk of tokens, is not modelled beyond what the kernels' published rates hold).
 * Under flex every token all-to-all carries in its tag the kernel that moves it (PLAN_MOE_TAG_DISPATCH,
 * _COMBINE): the simulator prices it at that kernel's published share of the link
 * (plan_moe_flex_link_share, DeepEP's or HybridEP's), not by NCCL's all-to-all model. HybridEP takes the
 * same legs as DeepEP (its "node" an NVLink domain).
 *
 * TACO (codec.ep, taco): the dispatch and combine all-to-alls carry FP8
 * tokens with their group scales when at least codec_min_bytes. */
#include "plan_internal.h"
#include "plan_program_moe.h"

#define CHECK(x)                                                                                             \
  do {                                                                                                       \
    if ((x) < 0) return -1;                                                                                  \
  } while (0)

static bool is_expert(const model_op *ops, int n, int i) { return i >= 0 && i < n && ops[i].parallel == MODEL_PAR_EXPERT; }

static int etp_of(const plan *p) { return p->etp > 0 ? p->etp : p->tp; }

/* Bytes of this rank's token copies, bf16 (the all-to-all's send buffer):
 * top_k a token, or the flex dispatcher's once a destination rank. */
static double token_bytes(const plan *p) {
  double t = (double)p->micro_batch * p->seq / (p->sequence_parallel ? p->tp : 1);
  return 2.0 * t * plan_moe_dispatch_copies(p) * p->model.hidden;
}

static int32_t token_coll_on(plan_builder *b, plan_stream stream, plan_group_kind g, plan_coll coll, plan_phase phase,
                             int layer, int micro, int chunk, double bytes, int32_t dep) {
  const plan *p = plan_b_plan(b);
  plan_codec codec = {.kind = PLAN_CODEC_NONE};
  double wire = bytes;
  const plan_codec *pc = &p->codec[PLAN_TRAFFIC_EP];
  if (coll == PLAN_COLL_ALLTOALL && plan_codec_has_taco(pc->kind) && bytes >= p->codec_min_bytes) {
    codec = (plan_codec){.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
    wire = plan_codec_wire_bytes(&codec, bytes, 2);
  }
  return plan_b_collective(b, stream, g, coll, PLAN_TRAFFIC_EP, phase, PLAN_MOP_MOE_TOKENS, layer, micro, chunk,
                           bytes, wire, codec, dep);
}

static int32_t token_coll(plan_builder *b, plan_group_kind g, plan_coll coll, plan_phase phase, int layer, int micro,
                          int chunk, double bytes, int32_t dep) {
  return token_coll_on(b, PLAN_STREAM_TP, g, coll, phase, layer, micro, chunk, bytes, dep);
}

/* The flex dispatcher across nodes: each leg's all-to-all send buffer (n x what goes to each other member),
 * bf16. RDMA: a token to each remote node holding one of its experts, N / (N - 1) x the copies; NVLink: each
 * rank forwards to each other rank of its node the tokens of all N nodes that rank holds an expert of,
 * g / (g - 1) x the copies (N x g x that share is token_bytes: the same buffer over g ranks instead of ep). */
static double leg_bytes(const plan *p, plan_group_kind g) {
  int per_node, nodes = plan_moe_ep_nodes(p, &per_node);
  double t = (double)p->micro_batch * p->seq / (p->sequence_parallel ? p->tp : 1), copies, n;
  if (g == PLAN_GROUP_EP_RAIL) copies = plan_moe_node_copies(p), n = nodes;
  else copies = plan_moe_nvlink_copies(p), n = per_node;
  return n > 1 ? 2.0 * t * copies * n / (n - 1) * p->model.hidden : 0.0;
}

/* The EP token exchange of a dispatch or a combine, from dep: one all-to-all over EP on the TP stream (*tp; *ep
 * -1), or across nodes under flex the NVLink leg on the TP stream (*tp) beside the RDMA leg on the EP stream
 * (*ep), both from dep. */
static int ep_exchange(plan_builder *b, plan_phase phase, int layer, int micro, int chunk, int32_t dep, bool comb,
                       int32_t *tp, int32_t *ep) {
  const plan *p = plan_b_plan(b);
  int per_node;
  /* under flex, which kernel moves it (plan_moe_flex_link_share prices dispatch and combine apart) */
  const int32_t tag = !p->moe_flex ? -1 : comb ? PLAN_MOE_TAG_COMBINE : PLAN_MOE_TAG_DISPATCH;
  *ep = -1;
  /* one EP rank a node: once a node is once a rank, the all-to-all of the copies as inside a node */
  if (plan_moe_node_copies(p) <= 0 || (plan_moe_ep_nodes(p, &per_node), per_node < 2)) {
    CHECK(*tp = token_coll(b, PLAN_GROUP_EP, PLAN_COLL_ALLTOALL, phase, layer, micro, chunk, token_bytes(p), dep));
    plan_b_op(b, *tp)->tag = tag;
    return 0;
  }
  CHECK(*ep = token_coll_on(b, PLAN_STREAM_EP, PLAN_GROUP_EP_RAIL, PLAN_COLL_ALLTOALL, phase, layer, micro, chunk,
                            leg_bytes(p, PLAN_GROUP_EP_RAIL), dep));
  plan_b_op(b, *ep)->tag = tag;
  *tp = -1;
  double nvl = leg_bytes(p, PLAN_GROUP_EP_NODE);
  if (nvl > 0) {
    CHECK(*tp = token_coll(b, PLAN_GROUP_EP_NODE, PLAN_COLL_ALLTOALL, phase, layer, micro, chunk, nvl, dep));
    plan_b_op(b, *tp)->tag = tag;
  }
  return 0;
}

/* All-to-all over EP, then all-gather over expert TP; compute waits for both. */
static int dispatch(plan_builder *b, plan_phase phase, int layer, int micro, int chunk) {
  const plan *p = plan_b_plan(b);
  int32_t dep = plan_b_last_op(b), last = -1, rdma = -1;
  if (p->ep > 1) CHECK(ep_exchange(b, phase, layer, micro, chunk, dep, false, &last, &rdma));
  if (etp_of(p) > 1) {
    int32_t ag;
    CHECK(ag = token_coll(b, PLAN_GROUP_ETP, PLAN_COLL_ALLGATHER, phase, layer, micro, chunk,
                          token_bytes(p) * etp_of(p), rdma >= 0 ? rdma : last >= 0 ? last : dep));
    if (rdma >= 0 && last >= 0) plan_b_op(b, ag)->dep[1] = last; /* (after both legs) */
    last = ag, rdma = -1;
  }
  if (last >= 0) plan_b_wait_for(b, last);
  if (rdma >= 0) plan_b_wait_for(b, rdma);
  return 0;
}

/* Reduce-scatter over expert TP, then all-to-all back over EP; *out, *out_ep: the last of them on the TP and
 * the EP stream (-1: none). */
static int combine(plan_builder *b, plan_phase phase, int layer, int micro, int chunk, int32_t dep, int32_t *out,
                   int32_t *out_ep) {
  const plan *p = plan_b_plan(b);
  int32_t last = -1;
  *out = *out_ep = -1;
  if (etp_of(p) > 1)
    CHECK(last = token_coll(b, PLAN_GROUP_ETP, PLAN_COLL_REDUCESCATTER, phase, layer, micro, chunk,
                            token_bytes(p) * etp_of(p), dep));
  if (p->ep > 1) CHECK(ep_exchange(b, phase, layer, micro, chunk, last >= 0 ? last : dep, true, &last, out_ep));
  *out = last;
  return 0;
}

/* The wait for the busiest EP rank: (f - 1) x the expert ops' FLOPs and bytes
 * of this phase (the simulator prices it from their costs). */
static int imbalance(plan_builder *b, plan_phase phase, int layer, int micro, int chunk) {
  const plan *p = plan_b_plan(b);
  double f = plan_moe_max_load(p);
  if (f <= 1.0 || p->ep < 2) return 0;
  int n;
  const model_op *ops = plan_b_ops(b, &n);
  double flops = 0, bytes = 0;
  int bwd = phase == PLAN_PHASE_BWD;
  for (int i = 0; i < n; i++)
    if (ops[i].parallel == MODEL_PAR_EXPERT) {
      flops += bwd ? ops[i].flops_bwd : ops[i].flops_fwd;
      bytes += bwd ? ops[i].bytes_bwd : ops[i].bytes_fwd;
    }
  int32_t w = plan_b_compute(b, phase, PLAN_MOP_MOE_IMBALANCE, PLAN_PART_WHOLE, layer, micro, chunk, (f - 1) * flops,
                             (f - 1) * bytes);
  CHECK(w);
  plan_b_op(b, w)->tag = bwd;
  return 0;
}

/* Host synchronisations after a forward dispatch (the dispatch's own, and the router's before it, are the
 * permute's host_sync, plan_launches.c): Megatron-Core's DeepEP path (core_r0.13 and main of 2025-05,
 * NVIDIA/Megatron-LM 1e057005 megatron/core/transformer/moe/token_dispatcher.py:885-891 and 839-868)
 * turns the received top-k indices into a routing map with PyTorch ops, unless --enable-experimental and
 * --moe-permute-fusion select the fused Triton converter: `indices[mask]` (:862) and `probs[mask]` (:867),
 * boolean-mask indexing, and `repeat_interleave` with no output size (:863) each copy a size to the host
 * and wait for it, i.e. for the dispatch that produced the indices. The all-to-all dispatcher has its
 * split sizes on the host before the all-to-all; HybridEP (Megatron-LM fca1679e24 token_dispatcher.py:1030-1080)
 * waits once, after its metadata kernel and before the dispatch kernel (the permute's host_sync stands for
 * it), and returns the tokens permuted with their counts: none after the dispatch for either. */
static bool syncs_after_dispatch(const plan *p) { return p->moe_flex && !p->moe_hybridep && !p->enable_experimental; }

int plan_moe_forward_op(plan_builder *b, int i, int layer, int micro, int chunk, plan_phase phase) {
  int n;
  const model_op *ops = plan_b_ops(b, &n);
  const bool first = !is_expert(ops, n, i - 1);
  if (first) CHECK(dispatch(b, phase, layer, micro, chunk));
  int32_t c;
  CHECK(c = plan_b_compute(b, phase, i, PLAN_PART_WHOLE, layer, micro, chunk, ops[i].flops_fwd, ops[i].bytes_fwd));
  if (first && plan_b_op(b, c)->launches + plan_b_op(b, c)->gemm_launches > 0 && syncs_after_dispatch(plan_b_plan(b))) {
    plan_b_op(b, c)->host_syncs_before = PLAN_MOE_DEEPEP_INDEX_SYNCS;
    plan_b_op(b, c)->host_calls_before = PLAN_MOE_DEEPEP_INDEX_CALLS;
  }
  if (!is_expert(ops, n, i + 1)) {
    CHECK(imbalance(b, phase, layer, micro, chunk));
    int32_t c, c_ep;
    CHECK(combine(b, phase, layer, micro, chunk, plan_b_last_op(b), &c, &c_ep));
    if (c >= 0) plan_b_wait_for(b, c);
    if (c_ep >= 0) plan_b_wait_for(b, c_ep);
  }
  return 0;
}

int plan_moe_backward_op(plan_builder *b, int i, int layer, int micro, int chunk) {
  int n;
  const model_op *ops = plan_b_ops(b, &n);
  const model_op *o = &ops[i];
  if (!is_expert(ops, n, i + 1)) CHECK(dispatch(b, PLAN_PHASE_BWD, layer, micro, chunk));
  bool first = !is_expert(ops, n, i - 1);
  if (o->kind != MODEL_OP_GEMM) {
    /* moe_act: the activation again from its kept input (the whole block's
     * recomputation, "moe", has rerun it already) */
    const plan *p = plan_b_plan(b);
    if (plan_recomputes(p, PLAN_RECOMPUTE_MOE_ACT) && !plan_recomputes(p, PLAN_RECOMPUTE_MOE))
      CHECK(plan_b_compute(b, PLAN_PHASE_RECOMPUTE, i, PLAN_PART_WHOLE, layer, micro, chunk, o->flops_fwd,
                           o->bytes_fwd));
    CHECK(plan_b_compute(b, PLAN_PHASE_BWD, i, PLAN_PART_WHOLE, layer, micro, chunk, o->flops_bwd, o->bytes_bwd));
  } else {
    CHECK(plan_b_compute(b, PLAN_PHASE_BWD, i, PLAN_PART_DGRAD, layer, micro, chunk, o->flops_bwd / 2,
                         o->bytes_bwd / 2));
    int32_t c = -1, c_ep = -1;
    if (first) { /* the input gradient goes back while the weight gradient runs */
      CHECK(imbalance(b, PLAN_PHASE_BWD, layer, micro, chunk));
      CHECK(combine(b, PLAN_PHASE_BWD, layer, micro, chunk, plan_b_last_op(b), &c, &c_ep));
    }
    CHECK(plan_b_compute(b, PLAN_PHASE_BWD, i, PLAN_PART_WGRAD, layer, micro, chunk, o->flops_bwd / 2,
                         o->bytes_bwd / 2));
    if (c >= 0) plan_b_wait_for(b, c);
    if (c_ep >= 0) plan_b_wait_for(b, c_ep);
    return 0;
  }
  if (first) {
    CHECK(imbalance(b, PLAN_PHASE_BWD, layer, micro, chunk));
    int32_t c, c_ep;
    CHECK(combine(b, PLAN_PHASE_BWD, layer, micro, chunk, plan_b_last_op(b), &c, &c_ep));
    if (c >= 0) plan_b_wait_for(b, c);
    if (c_ep >= 0) plan_b_wait_for(b, c_ep);
  }
  return 0;
}

static double layer_params(plan_builder *b, int layer, bool experts) {
  int n;
  const model_op *ops = plan_b_ops(b, &n);
  const plan *p = plan_b_plan(b);
  double s = 0;
  for (int i = 0; i < n; i++)
    if (model_op_in_layer(&p->model, &ops[i], layer) && (bool)ops[i].expert == experts) s += ops[i].params;
  return s;
}

/* Expert gradients are not bucketed with the rest: Megatron-Core reduces
 * them over the expert-DP group, a different set of ranks. */
int plan_moe_layer_grads(plan_builder *b, int layer, int chunk) {
  const plan *p = plan_b_plan(b);
  CHECK(plan_b_bucket_add(b, layer_params(b, layer, false), layer, chunk));
  double experts = layer_params(b, layer, true);
  if (experts <= 0 || plan_edp(p) < 2) return 0;
  const int gb = plan_grad_bytes(p);
  double bytes = gb * experts, wire = bytes;
  plan_codec codec = {.kind = PLAN_CODEC_NONE};
  const plan_codec *pc = &p->codec[PLAN_TRAFFIC_DP];
  if (plan_codec_has_taco(pc->kind) && bytes >= p->codec_min_bytes) {
    codec = (plan_codec){.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
    wire = plan_codec_wire_bytes(&codec, bytes, gb);
  }
  int32_t last = plan_b_last_op(b);
  int32_t i = plan_b_collective(b, PLAN_STREAM_DP, PLAN_GROUP_EDP,
                                p->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, PLAN_TRAFFIC_DP,
                                PLAN_PHASE_BWD, PLAN_MOP_EXPERT_GRADS, layer, -1, chunk, bytes, wire, codec, last);
  CHECK(i);
  plan_b_op(b, i)->tag = layer;
  plan_b_op(b, i)->elem_bytes = (uint8_t)(gb == 4 ? 0 : gb);
  plan_b_set_last_op(b, last); /* a reduction does not end the step */
  return 0;
}

int plan_moe_after_optimizer(plan_builder *b, int32_t opt) {
  const plan *p = plan_b_plan(b);
  if (!p->zero1 || plan_edp(p) < 2) return 0;
  const int stage = plan_b_stage(b);
  for (int c = 0; c < p->vpp; c++) {
    int first = plan_chunk_first_layer(p, stage, c), lpc = plan_vchunk_layers(p, stage, c);
    for (int l = first; l < first + lpc; l++) {
      double experts = layer_params(b, l, true);
      if (experts <= 0) continue;
      plan_codec none = {.kind = PLAN_CODEC_NONE};
      int32_t g = plan_b_collective(b, PLAN_STREAM_DP, PLAN_GROUP_EDP, PLAN_COLL_ALLGATHER, PLAN_TRAFFIC_DP,
                                    PLAN_PHASE_OPTIMIZER, PLAN_MOP_EXPERT_GATHER, l, -1, c, 2.0 * experts,
                                    2.0 * experts, none, opt);
      CHECK(g);
      plan_b_op(b, g)->tag = l;
    }
  }
  return 0;
}

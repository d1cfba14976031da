/* search_estimate.c — a closed-form iteration time, cheap enough to rank
 * thousands of layouts before the best few are simulated.
 *
 * One pipeline stage runs, per micro-batch, the forward and backward of its
 * layers (and recomputation), waiting on the tensor-parallel collectives the
 * way the plan's programs do: forward collectives are exposed, and so are the
 * backward input-gradient collectives (launched beside the weight-gradient
 * GEMM, they wait for its SMs).
 * The slowest stage (the last, which also computes the logits) sets the
 * pace; 1F1B adds (pp - 1) / vpp of those per-micro-batch times of fill and
 * drain; every pipeline activation and its gradient is one exposed
 * transfer, slowed where DP collectives share its NIC
 * (sim_search_pp_dp_shared_s); ZeRO-3 waits at each step's start and
 * leaves its last reduce-scatters after the compute
 * (sim_search_zero3_step_wait_s, sim_search_zero3_tail_s); the data-parallel buckets queue on the one DP stream as the
 * schedule releases them (the last micro-batch's backward of each chunk, or
 * every backward under ZeRO-2: sim_search_last_backward_tail_s,
 * sim_search_zero2_tail_s), overlap_param_gather's gathers chain bucket by
 * bucket (sim_search_param_gather_wait_s), and ZeRO-1's parameter all-gather
 * otherwise follows the optimizer. Op times come from the calibration exactly as the simulator
 * finds them (schema lookups), inter-node traffic from the cluster's alpha and
 * beta, so the estimate and the simulation differ only in contention and in
 * the finer overlap the simulator resolves. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "search.h"
#include "sim.h"
#include "sim_costs.h"

/* DP buckets of a stage the estimate lists one by one (more: ZeRO-1/2's gathers priced as one) */
#define SEARCH_MAX_BUCKETS 1024

typedef struct {
  const plan *p;
  schema_lookup lk;
  bool intra_calibrated; /* the calibration measured this cluster's intra-node transport */
  ts_err *e;
  int failed;
} estimator;

/* Lookup memo: thousands of candidates share a few hundred shapes, and a
 * lookup in a measured table interpolates over every point. Keyed by the
 * calibration, the table (name) and the arguments; results are exact copies. */
typedef struct {
  const schema_calibration *cal;
  const char *name; /* a string literal: compared by address */
  double a, b, c, us;
} memo_entry;
static memo_entry memo[65536]; /* (issue 22: CP and the sharding stages multiply the shapes; 8192 thrashed) */
static char memo_identity[600]; /* which calibration the memo holds: cleared when it changes */

static void memo_use(const schema_calibration *cal) {
  char id[600];
  snprintf(id, sizeof id, "%p|%.500s|%d|%d|%d", (const void *)cal, cal->path, cal->n_gemm, cal->n_kernels,
           cal->n_colls);
  if (strcmp(id, memo_identity) != 0) {
    memset(memo, 0, sizeof memo);
    snprintf(memo_identity, sizeof memo_identity, "%s", id);
  }
}

static memo_entry *memo_slot(const schema_calibration *cal, const char *name, double a, double b, double c,
                             bool *hit) {
  uint64_t bits[3], h = (uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ull;
  memcpy(&bits[0], &a, 8); /* the doubles' bits: no conversion can overflow */
  memcpy(&bits[1], &b, 8);
  memcpy(&bits[2], &c, 8);
  h ^= bits[0] * 0xC2B2AE3D27D4EB4Full + (h >> 29);
  h ^= bits[1] * 0x165667B19E3779F9ull + (h >> 31);
  h ^= bits[2] * 0x27D4EB2F165667C5ull + (h >> 27);
  /* final mix: the doubles of whole shapes have zero low bits, which the products keep, so without it the
   * low bits that pick the slot hardly varied and shapes evicted each other (issue 22: 1.4 M lookups) */
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  memo_entry *m = &memo[h % (sizeof memo / sizeof memo[0])];
  *hit = m->cal == cal && m->name == name && m->a == a && m->b == b && m->c == c;
  return m;
}

static double kernel_s(estimator *x, const char *name, double amount, int group, bool by_flops) {
  if (amount <= 0) return 0;
  bool hit;
  memo_entry *me = memo_slot(x->lk.cal, name, amount, group, by_flops, &hit);
  if (hit) return me->us * 1e-6;
  double us;
  if (schema_has_kernel(x->lk.cal, name)) {
    if (schema_lookup_kernel(&x->lk, name, amount, group, &us, x->e)) x->failed = 1;
  } else {
    us = x->lk.roof.launch_us + amount / (by_flops ? x->lk.roof.peak_flops : x->lk.roof.hbm_bytes_per_s) * 1e6;
  }
  if (!x->failed) *me = (memo_entry){x->lk.cal, name, amount, group, by_flops, us};
  return us * 1e-6;
}

static double gemm_s(estimator *x, long long m, long long n, long long k) {
  bool hit;
  memo_entry *me = memo_slot(x->lk.cal, "gemm", (double)m, (double)n, (double)k, &hit);
  if (hit) return me->us * 1e-6;
  double us;
  if (x->lk.cal->n_gemm) {
    if (schema_lookup_gemm(&x->lk, m, n, k, &us, x->e)) x->failed = 1;
  } else {
    us = x->lk.roof.launch_us + 2.0 * (double)m * (double)n * (double)k / x->lk.roof.peak_flops * 1e6;
  }
  if (!x->failed) *me = (memo_entry){x->lk.cal, "gemm", (double)m, (double)n, (double)k, us};
  return us * 1e-6;
}

/* A weight gradient as the simulator prices it (sim_costs.c): its own
 * timing of the shape ("gemm_wgrad") when the calibration has one. */
static double gemm_wgrad_s(estimator *x, long long m, long long n, long long k) {
  double us;
  if (schema_gemm_wgrad_us(x->lk.cal, m, n, k, &us)) return us * 1e-6;
  return gemm_s(x, m, n, k);
}

/* A linear layer's GEMM o of (m, n, k) (a weight gradient: wgrad) as the simulator prices it (sim_costs.c's
 * gemm_phase_us): under layout.fp8 an FP8 GEMM (plan_fp8_gemm) takes the calibration's "gemm_fp8" point of
 * the shape, else sim_gemm_fp8_unmeasured_us (interpolated between two points in m, else its BF16 time moved
 * to FP8), then the recipe's factor (sim_gemm_fp8_recipe_us: MXFP8's measured ratio); else the BF16 GEMM. */
static double linear_gemm_s(estimator *x, const model_op *o, long long m, long long n, long long k, bool wgrad) {
  double bf16 = wgrad ? gemm_wgrad_s(x, m, n, k) : gemm_s(x, m, n, k), us;
  if (!plan_fp8_gemm(x->p, o)) return bf16;
  long long at;
  sim_fp8_rule rule;
  if (!schema_gemm_fp8_us(x->lk.cal, m, n, k, &us))
    us = sim_gemm_fp8_unmeasured_us(x->lk.cal, &x->p->cluster.gpu, m, n, k, wgrad, bf16 * 1e6, &rule, &at);
  return sim_gemm_fp8_recipe_us(x->p, us) * 1e-6;
}

/* Transformer Engine's cast of `elems` BF16 elements to FP8 before an FP8 GEMM (the program's
 * PLAN_MOP_FP8_CAST op, priced by the "elementwise" table over plan_fp8_cast_bytes, as sim_costs.c does);
 * 0 for a GEMM in BF16. The weights' casts, once per iteration and model chunk, are left out. */
static double fp8_cast_s(estimator *x, const model_op *o, double elems) {
  if (!plan_fp8_gemm(x->p, o)) return 0;
  return kernel_s(x, "elementwise", plan_fp8_cast_bytes(x->p, elems), 0, false);
}

/* The same for a tensor all-gathered in FP8 under SP (plan_program.c, fp8_sp_quantize / fp8_sp_transpose):
 * the quantize of the local 1/tp of its `elems` and, where one is made, the transpose of the gathered rows
 * (the program runs the input's in the backward; the estimate counts it with the forward's quantize). */
static double fp8_gathered_cast_s(estimator *x, const model_op *o, double elems) {
  if (!plan_fp8_gemm(x->p, o)) return 0;
  const double transpose = plan_fp8_sp_transpose_bytes(x->p, elems);
  return kernel_s(x, "elementwise", plan_fp8_sp_quantize_bytes(x->p, elems / x->p->tp), 0, false) +
         (transpose > 0 ? kernel_s(x, "elementwise", transpose, 0, false) : 0.0);
}

/* Attention as the simulator prices it (sim_costs.c): the table of the
 * model's head dimension and the plan's sequence when the calibration has it,
 * else the FLOP-keyed one (backward: "attention_bwd" when present). The memo
 * keys on the calibration's own copy of the table name (a stable address). */
static double attention_table_s(estimator *x, double flops, bool bwd) {
  const schema_calibration *cal = x->lk.cal;
  char want[48];
  snprintf(want, sizeof want, "attention%s.d%d.s%d", bwd ? "_bwd" : "", model_head_dim(&x->p->model),
           plan_local_seq(x->p)); /* context parallelism: a piece of seq / cp */
  const schema_kernel_table *t = schema_kernel_table_of(cal, want);
  if (t) return kernel_s(x, t->name, flops, 0, true); /* the table's own name: the memo keeps the pointer */
  if (bwd && schema_has_kernel(cal, "attention_bwd")) return kernel_s(x, "attention_bwd", flops, 0, true);
  return kernel_s(x, "attention", flops, 0, true);
}

/* The plan's attention from the calibration's per-shape points, as the
 * simulator's attention_us prices it (sim_attention_shape_of picks the
 * backend and shape, schema_lookup_attn_backend the time): 0 and *s when
 * priced, 1 when the FLOP-keyed tables are to be used. Memo key: the shape
 * (whole numbers, exact in a double) and backend, direction. */
static int attention_shape_s(estimator *x, bool bwd, double *s) {
  static const char key[] = "attention_shape"; /* compared by address */
  schema_attn_backend be;
  schema_attn_shape q;
  int fell_back;
  if (sim_attention_shape_of(x->lk.cal, x->p, &be, &q, &fell_back)) return 1;
  double a = (double)q.seq * 65536.0 + q.head_dim, b = (double)q.batch * 16777216.0 + q.heads * 4096.0 + q.kv_heads,
         c = (double)be * 2 + bwd;
  bool hit;
  memo_entry *me = memo_slot(x->lk.cal, key, a, b, c, &hit);
  if (!hit) {
    double us;
    if (schema_lookup_attn_backend(&x->lk, be, &q, bwd, &us)) return 1;
    *me = (memo_entry){x->lk.cal, key, a, b, c, us};
  }
  *s = me->us * 1e-6;
  return 0;
}

/* Else the FLOP-keyed tables and at least the op's own roofline on the
 * cluster's GPU, as sim_costs.c's attention_us (those tables know no bytes). */
static double attention_s(estimator *x, double flops, double bytes, bool bwd) {
  double t;
  if (flops > 0 && x->p->attention_backend != PLAN_ATTENTION_UNFUSED && attention_shape_s(x, bwd, &t) == 0) return t;
  t = attention_table_s(x, flops, bwd);
  double roof = sim_attention_roof_us(&x->lk.roof, x->p->attention_backend, bwd, flops, bytes) * 1e-6;
  return t > roof ? t : roof;
}

/* A non-GEMM op's time in one direction. */
static double other_op_s(estimator *x, const model_op *o, bool bwd) {
  double flops = bwd ? o->flops_bwd : o->flops_fwd, bytes = bwd ? o->bytes_bwd : o->bytes_fwd;
  switch (o->kind) {
  case MODEL_OP_ATTENTION: return attention_s(x, flops, bytes, bwd);
  case MODEL_OP_NORM: return kernel_s(x, "norm", bytes, 0, false);
  case MODEL_OP_EMBEDDING: return kernel_s(x, "embedding", bytes, 0, false);
  case MODEL_OP_LOGITS_LOSS: {
    const plan_ce_kernel *k; /* unfused (cross_entropy_loss_fusion false): Megatron's kernels, as sim_costs.c */
    int nk = plan_ce_kernels(x->p, bwd ? PLAN_PHASE_BWD : PLAN_PHASE_FWD, &k);
    if (nk == 0) return kernel_s(x, "loss", bytes, 0, false);
    double t = 0;
    for (int i = 0; i < nk; i++)
      t += kernel_s(x, bwd && schema_has_kernel(x->lk.cal, "elementwise_bwd") ? "elementwise_bwd" : "elementwise",
                    plan_ce_kernel_bytes(x->p, &k[i]), 0, false);
    return t;
  }
  default: return kernel_s(x, "elementwise", bytes, 0, false);
  }
}

/* ---- collectives ---- */

static const char *coll_name(plan_coll c) { return ts_coll_name((ts_coll)c); }

/* Alpha-beta ring: (steps) x latency + busbw factor x bytes / bandwidth. */
static double alpha_beta_s(plan_coll c, int n, double bytes, double gbps, double latency_us) {
  if (n < 2 || bytes <= 0) return 0;
  return ts_coll_steps((ts_coll)c, n) * latency_us * 1e-6 + ts_coll_busbw_factor((ts_coll)c, n) * bytes / (gbps * 1e9);
}

/* A TP collective (inside one node): its wire bytes through the calibrated
 * table when the calibration measured this fabric, else the intra-node
 * alpha-beta; with TACO the codec kernels pipeline with the transfer (first
 * encode and last decode exposed), as the compressed collectives run them,
 * unless the calibration measured the compressed collective itself (keyed by
 * the bf16 payload it compresses: `payload`). */
static double tp_coll_s(estimator *x, plan_coll c, double payload, double wire, int elem_bytes,
                        const plan_codec *cd, double *codec_s) {
  const plan *p = x->p;
  int n = p->tp;
  if (n < 2) return 0;
  const char *name = coll_name(c);
  bool taco = cd->kind == PLAN_CODEC_TACO || cd->kind == PLAN_CODEC_TACO_CAAT;
  double us;
  if (taco) {
    char cname[48];
    snprintf(cname, sizeof cname, "%s.taco%d", name, cd->group);
    if (x->intra_calibrated && schema_has_coll(x->lk.cal, cname)) { /* measured with its codec */
      if (schema_lookup_coll(&x->lk, cname, n, payload, &us, x->e)) x->failed = 1;
      return us * 1e-6;
    }
  }
  sim_intra_coll how; /* as the simulator prices it: the measured table, else the NCCL model */
  if (sim_intra_coll_us(&x->lk, &p->cluster, x->intra_calibrated, name, n, wire, &how, x->e)) x->failed = 1;
  double xfer = how.us * 1e-6;
  if (!taco) return xfer;
  double in = wire / (1.0 + 8.0 / cd->group) * elem_bytes; /* bytes the codec reads */
  double enc = kernel_s(x, "taco_encode", in, cd->group, false), dec = kernel_s(x, "taco_decode", in, cd->group, false);
  double dse = c == PLAN_COLL_ALLREDUCE ? kernel_s(x, "taco_decode_sum_encode", in, cd->group, false) : 0;
  double chunks = sim_codec_chunks(in); /* as the simulator pipelines it (sim_costs.c) */
  double pre = enc / chunks + (chunks > 1 ? 0 : dse), post = dec / chunks, mid = enc + dec + dse - pre - post;
  *codec_s += enc + dec + dse;
  return pre + fmax(mid, xfer) + post;
}

/* A TP message as the program builder sizes it: caat_rule 1 = forward
 * row-parallel output (floor(p h) channels, bf16), 2 = backward input
 * gradient (those channels, fp32); TACO compresses what remains if it is at
 * least codec_min_bytes. */
static double tp_msg_s(estimator *x, plan_coll c, plan_traffic t, int caat_rule, double bytes, double *codec_s) {
  const plan *p = x->p;
  const plan_codec *pc = &p->codec[t];
  bool caat = pc->kind == PLAN_CODEC_CAAT || pc->kind == PLAN_CODEC_TACO_CAAT;
  bool taco = pc->kind == PLAN_CODEC_TACO || pc->kind == PLAN_CODEC_TACO_CAAT;
  double sent = bytes;
  int elem = 2;
  if (caat_rule && caat) {
    double frac = floor(pc->p * p->model.hidden) / p->model.hidden;
    sent = caat_rule == 1 ? bytes * frac : bytes * frac * 2.0;
    elem = caat_rule == 1 ? 2 : 4;
  }
  plan_codec none = {.kind = PLAN_CODEC_NONE};
  if (taco && sent >= p->codec_min_bytes) {
    plan_codec k = *pc;
    double wire = plan_codec_wire_bytes(&k, sent, elem);
    return tp_coll_s(x, c, sent / elem * 2.0, wire, elem, &k, codec_s);
  }
  return tp_coll_s(x, c, sent, sent, elem, &none, codec_s);
}

/* Per-GPU bandwidth towards other nodes: the node's NICs shared by its GPUs. */
static double nic_gbps_per_gpu(const topo_cluster *c) {
  if (c->nic.per_node < 1 || c->nodes < 2) return c->intra.gbps_per_gpu;
  double share = c->nic.gbps * c->nic.per_node / c->gpus_per_node;
  double over = c->fabric.oversubscription >= 1 ? c->fabric.oversubscription : 1;
  return share / over;
}

/* A DP or PP group crosses nodes when its members (stride apart) do. */
static bool crosses_nodes(const plan *p, int stride, int members) {
  return (long long)stride * members > p->cluster.gpus_per_node;
}

/* The latency of one step of a cross-node ring, as the simulator charges it
 * (sim_comm.c): the worst route among the ring's edges, i.e. the route from
 * the first member to its neighbour or, across leaves, to the last member
 * (the wrap-around edge), NICs, node uplinks and leaf uplinks included
 * (topo_route.c). */
double sim_search_ring_latency_us(const topo_cluster *cl, int stride, int n) {
  long long last = (long long)stride * (n - 1), total = topo_total_gpus(cl);
  if (last >= total) last = total - 1;
  return fmax(topo_path_latency_us(cl, 0, stride < total ? stride : (int)last),
              topo_path_latency_us(cl, 0, (int)last));
}

/* The latency steps of NCCL's tree over the group as the simulator builds it
 * (sim_edges.c): a chain inside each node, a binary heap of node leaders. */
static int tree_depth(const plan *p, int stride, int n) {
  const int gpn = p->cluster.gpus_per_node;
  int per_node = stride >= gpn ? 1 : gpn / stride;
  if (per_node > n) per_node = n;
  int leaders = (n + per_node - 1) / per_node, levels = 0;
  if (leaders > 4096) leaders = 4096;
  while ((1 << levels) < leaders + 1) levels++;
  int depth = per_node - 1 + (levels > 1 ? levels - 1 : 0);
  return depth < 1 ? 1 : depth;
}

/* The latency part of one cross-node collective of the group (0 inside a node). */
static double group_alpha_s(const plan *p, plan_coll c, int n, int stride) {
  if (n < 2 || !crosses_nodes(p, stride, n)) return 0;
  return ts_coll_steps((ts_coll)c, n) * sim_search_ring_latency_us(&p->cluster, stride, n) * 1e-6;
}

/* Members of a cross-node group (n members, stride GPUs apart) on each node
 * when every node holds the same number k >= 2 of them; else 1. The
 * simulator then runs k rings (NCCL's channels, sim_edges.c), each leaving
 * a node through a different member's NIC, so the group's inter-node ring
 * traffic uses k of the node's NIC shares (its intra-node steps then bound
 * it). */
int sim_search_ring_members_per_node(int gpus_per_node, int stride, int n) {
  if (stride >= gpus_per_node || gpus_per_node % stride) return 1;
  int k = gpus_per_node / stride;
  return k >= 2 && k < n && n % k == 0 ? k : 1;
}

/* lat: the ring's step latency across nodes (sim_search_ring_latency_us), found once by callers that
 * price many collectives of one group */
static double group_coll_lat_s(const plan *p, plan_coll c, int n, int stride, double bytes, double lat) {
  const topo_cluster *cl = &p->cluster;
  if (!crosses_nodes(p, stride, n)) return alpha_beta_s(c, n, bytes, cl->intra.gbps_per_gpu, cl->intra.latency_us);
  double gbps = nic_gbps_per_gpu(cl);
  int k = sim_search_ring_members_per_node(cl->gpus_per_node, stride, n);
  double ring = alpha_beta_s(c, n, bytes, fmin(k * gbps, k > 1 ? cl->intra.gbps_per_gpu : gbps), lat);
  if (c != PLAN_COLL_ALLREDUCE || n < 2 || bytes <= 0) return ring;
  /* all-reduce: NCCL's (and the simulator's) cheaper of ring and tree, the
   * tree two passes of the whole message over 2 x depth latency steps */
  double tree = 2.0 * tree_depth(p, stride, n) * lat * 1e-6 + 2.0 * bytes / (gbps * 1e9);
  return fmin(ring, tree);
}

static double group_coll_s(const plan *p, plan_coll c, int n, int stride, double bytes) {
  double lat = crosses_nodes(p, stride, n) ? sim_search_ring_latency_us(&p->cluster, stride, n) : 0;
  return group_coll_lat_s(p, c, n, stride, bytes, lat);
}

/* The embedding's parameters on a GPU (this shard's model_embedding_ops, as plan_program_zero.c counts
 * them; listing the ops formats their names, which thousands of candidates of one model would repeat):
 * the last model and TP asked remembered. -1 when the ops cannot be listed. */
static double embedding_params(const plan *p, const model_shard *sh) {
  static char model[sizeof p->model.name];
  static int tp, vocab, hidden;
  static double params = -1;
  if (params < 0 || strcmp(model, p->model.name) || tp != p->tp || vocab != p->model.vocab || hidden != p->model.hidden) {
    model_op ops[MODEL_MAX_LAYER_OPS];
    ts_err e;
    int n = model_embedding_ops(&p->model, sh, ops, MODEL_MAX_LAYER_OPS, &e);
    if (n < 0) return -1;
    params = 0;
    for (int i = 0; i < n; i++) params += ops[i].params;
    snprintf(model, sizeof model, "%s", p->model.name);
    tp = p->tp, vocab = p->model.vocab, hidden = p->model.hidden;
  }
  return params;
}

/* ---- one layer, one micro-batch ---- */

typedef struct {
  double compute, recompute, tp_exposed, codec;
  double gemm, gemm_recompute; /* the parts of compute and recompute the clock model speeds up as GEMMs
                                  (GEMMs and attention, as sim_costs.c's compute_us counts them) */
  double fwd, fwd_gemm;        /* the forward's part of compute and of gemm */
  double tp_fwd, cp_fwd;       /* the forward's part of tp_exposed and of the CP ring (a recomputed forward's
                                  collectives belong to the backward) */
} layer_cost;

/* Whether an op's time is GEMM time for the clock model. */
static bool clock_gemm(const model_op *o) { return o->kind == MODEL_OP_GEMM || o->kind == MODEL_OP_ATTENTION; }

/* The bytes of a sequence-parallel all-gather of `act` BF16 bytes feeding op o (its input, or a row-parallel
 * GEMM's output gradient: grad), as the programs size it: FP8 when o is an FP8 GEMM
 * (plan_fp8_sp_gather_elem_bytes). */
static double sp_gather(const plan *p, const model_op *o, bool grad, double act) {
  return act / 2.0 * plan_fp8_sp_gather_elem_bytes(p, o, grad);
}

/* That all-gather's time on traffic class t (a ring step of it: `act` the step's BF16 bytes). An FP8 one
 * travels as it is: a codec does not compress data that is FP8 already (plan_program.c, sp_allgather). */
static double sp_msg_s(estimator *x, plan_traffic t, const model_op *o, bool grad, double act, double *codec_s) {
  const double bytes = sp_gather(x->p, o, grad, act);
  if (!plan_fp8_gemm(x->p, o)) return tp_msg_s(x, PLAN_COLL_ALLGATHER, t, 0, bytes, codec_s);
  const plan_codec none = {.kind = PLAN_CODEC_NONE};
  return tp_coll_s(x, PLAN_COLL_ALLGATHER, bytes, bytes, 2, &none, codec_s);
}

/* tensorwise under SP: the amax all-reduce over the TP group before the quantize of op o's gathered tensor
 * (plan_fp8_amax_reduction; plan_program.c, fp8_amax_reduce), 0 without. */
static double amax_s(estimator *x, const model_op *o) {
  if (!plan_fp8_amax_reduction(x->p, o)) return 0.0;
  const plan_codec none = {.kind = PLAN_CODEC_NONE};
  double unused = 0;
  return tp_coll_s(x, PLAN_COLL_ALLREDUCE, PLAN_FP8_AMAX_BYTES, PLAN_FP8_AMAX_BYTES, 4, &none, &unused);
}

static void layer_costs(estimator *x, const model_op *ops, int n, double act_bytes, layer_cost *lc) {
  const plan *p = x->p;
  const bool sp = p->sequence_parallel && p->tp > 1, tp = p->tp > 1;
  memset(lc, 0, sizeof *lc);
  double fwd = 0, fwd_comm = 0, fwd_codec = 0, fwd_gemm = 0;
  /* forward: collectives after row-parallel GEMMs (and SP gathers before column ones) wait */
  for (int i = 0; i < n; i++) {
    const model_op *o = &ops[i];
    double t = o->kind == MODEL_OP_GEMM ? linear_gemm_s(x, o, o->m, o->n, o->k, false) : other_op_s(x, o, false);
    bool starts_block = o->parallel == MODEL_PAR_COLUMN && (i == 0 || ops[i - 1].parallel != MODEL_PAR_COLUMN);
    const double in = (double)o->m * (double)o->k; /* (layout.fp8: the input's cast) */
    fwd += t + (sp && starts_block ? fp8_gathered_cast_s(x, o, in) : fp8_cast_s(x, o, in));
    if (clock_gemm(o)) fwd_gemm += t;
    if (sp && starts_block)
      fwd_comm += amax_s(x, o) + sp_msg_s(x, PLAN_TRAFFIC_TP_FWD, o, false, act_bytes, &fwd_codec);
    if (tp && o->parallel == MODEL_PAR_ROW)
      fwd_comm += tp_msg_s(x, sp ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, PLAN_TRAFFIC_TP_FWD, 1, act_bytes,
                           &fwd_codec);
  }
  /* backward: dgrad, then the input-gradient collective overlapping wgrad */
  double bwd = 0, bwd_exposed = 0, bwd_codec = 0, bwd_gemm = 0;
  for (int i = n - 1; i >= 0; i--) {
    const model_op *o = &ops[i];
    if (sp && o->parallel == MODEL_PAR_ROW)
      bwd_exposed += amax_s(x, o) + sp_msg_s(x, PLAN_TRAFFIC_TP_BWD, o, true, act_bytes, &bwd_codec);
    if (o->kind != MODEL_OP_GEMM) {
      double t = other_op_s(x, o, true);
      bwd += t;
      if (clock_gemm(o)) bwd_gemm += t;
      continue;
    }
    double dgrad = linear_gemm_s(x, o, o->m, o->k, o->n, false), wgrad = linear_gemm_s(x, o, o->k, o->n, o->m, true);
    const double dy = (double)o->m * (double)o->n; /* (layout.fp8: dY's cast) */
    bwd += dgrad + wgrad + (sp && o->parallel == MODEL_PAR_ROW ? fp8_gathered_cast_s(x, o, dy) : fp8_cast_s(x, o, dy));
    bwd_gemm += dgrad + wgrad;
    bool starts_block = o->parallel == MODEL_PAR_COLUMN && (i == 0 || ops[i - 1].parallel != MODEL_PAR_COLUMN);
    if (tp && starts_block) {
      /* Launched beside the dgrad/wgrad GEMMs, a collective waits for the
       * running kernel to free the SMs (NCCL needs them; measured on 2 x H200,
       * as the simulator models it), and the next op waits for the
       * collective: nothing of it hides behind the GEMMs. */
      double c = tp_msg_s(x, sp ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, PLAN_TRAFFIC_TP_BWD, 2, act_bytes,
                          &bwd_codec);
      if (sp) c += sp_msg_s(x, PLAN_TRAFFIC_TP_BWD, o, false, act_bytes, &bwd_codec);
      bwd_exposed += c;
    }
  }
  lc->compute = fwd + bwd;
  lc->gemm = fwd_gemm + bwd_gemm;
  lc->tp_exposed = fwd_comm + bwd_exposed;
  lc->fwd = fwd, lc->fwd_gemm = fwd_gemm, lc->tp_fwd = fwd_comm;
  lc->codec = fwd_codec + bwd_codec;
  if (p->recompute == MODEL_RECOMPUTE_FULL) {
    lc->recompute = fwd;
    lc->gemm_recompute = fwd_gemm;
    lc->tp_exposed += fwd_comm;
    lc->codec += fwd_codec;
  } else if (p->recompute == MODEL_RECOMPUTE_SELECTIVE) {
    for (int i = 0; i < n; i++)
      if (ops[i].kind == MODEL_OP_ATTENTION) lc->recompute += other_op_s(x, &ops[i], false);
    lc->gemm_recompute = lc->recompute;
  }
}

/* Logits, cross-entropy and final norm of the last stage, per micro-batch. */
static double head_s(estimator *x, const model_op *head, int n, double act_bytes, double *tp_s, double *gemm) {
  const plan *p = x->p;
  double t = 0, codec = 0;
  for (int i = 0; i < n; i++) {
    const model_op *o = &head[i];
    double d = o->kind == MODEL_OP_GEMM
                 ? gemm_s(x, o->m, o->n, o->k) + gemm_s(x, o->m, o->k, o->n) + gemm_wgrad_s(x, o->k, o->n, o->m)
                 : other_op_s(x, o, false) + other_op_s(x, o, true);
    t += d;
    if (clock_gemm(o)) *gemm += d;
  }
  if (p->tp > 1) {
    plan_coll c = p->sequence_parallel ? PLAN_COLL_ALLGATHER : PLAN_COLL_ALLREDUCE;
    *tp_s += tp_msg_s(x, c, PLAN_TRAFFIC_TP_BWD, 0, act_bytes, &codec);
    if (p->sequence_parallel) *tp_s += tp_msg_s(x, PLAN_COLL_ALLGATHER, PLAN_TRAFFIC_TP_FWD, 0, act_bytes, &codec);
  }
  return t;
}

/* ---- the layouts of issue 22 (added) ---- */

/* Context parallelism: the attention runs as cp pieces (the shard's op is
 * one) beside the KV ring; a ring step costs what it outlasts the piece it
 * runs beside (forward and a recomputed forward: cp - 1 KV steps; backward:
 * a KV and a dKV step per piece on one stream, and the last dKV home after
 * the last piece). Returns the exposed ring time per layer and micro-batch. */
static double cp_layer(estimator *x, const model_op *ops, int n, layer_cost *lc) {
  const plan *p = x->p;
  const int cp = plan_cp(p);
  if (cp < 2) return 0;
  double af = 0, ab = 0;
  for (int i = 0; i < n; i++)
    if (ops[i].kind == MODEL_OP_ATTENTION) af += other_op_s(x, &ops[i], false), ab += other_op_s(x, &ops[i], true);
  lc->compute += (cp - 1) * (af + ab);
  lc->gemm += (cp - 1) * (af + ab);
  lc->fwd += (cp - 1) * af, lc->fwd_gemm += (cp - 1) * af;
  if (p->recompute != MODEL_RECOMPUTE_NONE) lc->recompute += (cp - 1) * af, lc->gemm_recompute += (cp - 1) * af;
  double step = group_coll_s(p, PLAN_COLL_ALLGATHER, cp, p->tp, plan_cp_kv_bytes(p) * cp / (cp - 1.0));
  double fwd = (cp - 1) * fmax(0.0, step - af);
  lc->cp_fwd = fwd;
  return fwd * (p->recompute != MODEL_RECOMPUTE_NONE ? 2 : 1) + (cp - 1) * fmax(0.0, 2 * step - ab) + step;
}

/* tp_comm_overlap: the TP time a layer leaves exposed, piece by piece as
 * the programs run it (plan_program.c, plan/README.md) and the simulator
 * prices it (sim_comm.c): an uncompressed piece is a userbuffer kernel on
 * SMs of its own and starts when its data is ready; a compressed one (TACO)
 * needs the SMs of the GEMM piece running when it is ready and starts when
 * that piece ends. Each GEMM piece runs slower while its userbuffer kernel
 * holds SMs (sim_tpo_piece_us: the measured ratio for the kernel's time beside
 * it, layout.tp_comm_overlap_cfg's num_sm and set_sm_margin, else TE's
 * defaults), as sim_costs.c prices it.
 * The pieces follow each GEMM's method (plan_tpo_splits); the search itself
 * keeps TE's defaults. */

/* GEMM op mop (phase, part) of t0 seconds alone, piece by piece as the program splits it
 * (plan_tpo_ops_pieces), each priced as the simulator prices it beside its userbuffer kernel
 * (sim_tpo_piece_us), summed. */
static double tpo_gemm_s(estimator *x, const model_op *ops, int n, int mop, int phase, int part, double t0) {
  const int k = plan_tpo_ops_pieces(x->p, ops, n, mop, phase, part);
  double sum = 0;
  for (int s = 0; s < k; s++) {
    double us;
    if (sim_tpo_piece_us(&x->lk, x->p, x->intra_calibrated, ops, n, mop, phase, part, s, k, t0 / k * 1e6, &us,
                         x->e)) {
      x->failed = 1;
      return t0;
    }
    sum += us;
  }
  return sum * 1e-6;
}

/* Whether the program builder compresses this TP message (tp_message). */
static bool tpo_compressed(const plan *p, plan_traffic t, double bytes) {
  return plan_codec_has_taco(p->codec[t].kind) && bytes >= p->codec_min_bytes;
}

/* Ring exchange: t - 1 all-gather steps of `step` seconds on the TP stream
 * and a GEMM of `gemm` seconds as t pieces, piece s after step s. Returns
 * how long the pieces end after the GEMM would alone. Compressed steps wait
 * for the running piece, so steps and pieces alternate. */
double sim_search_tpo_ring_exposed(int t, double gemm, double step, bool compressed) {
  double q = gemm / t;
  if (compressed) return (t - 1) * step;
  double e = q;
  for (int s = 1; s < t; s++) e = fmax(e, s * step) + q;
  return e - gemm;
}

/* Pipelined reduce-scatter: the GEMM as k pieces, each followed by the
 * reduce-scatter of its rows (`piece` seconds), the next GEMM piece not
 * waiting. Returns how long the last reduce-scatter ends after the GEMM. A
 * compressed piece starts when the next GEMM piece ends (the last one at
 * once: nothing runs after it until its reduce-scatter is done). */
double sim_search_tpo_pipeline_exposed(int k, double gemm, double piece, bool compressed) {
  double q = gemm / k, r = 0;
  for (int i = 0; i < k; i++) {
    double ready = (i + 1 + (compressed && i < k - 1 ? 1 : 0)) * q;
    r = fmax(ready, r) + piece;
  }
  return r - gemm;
}

static void tpo_layer(estimator *x, const model_op *ops, int n, double act, layer_cost *lc) {
  const plan *p = x->p;
  if (!p->tp_comm_overlap) return;
  const int t = p->tp;
  double extra = 0, extra_fwd = 0, fwd = 0, bwd = 0, unused = 0; /* extra: GEMM time lost to the kernels' SMs */
  const double step = act / (t - 1);
  for (int i = 0; i < n; i++) {
    const model_op *o = &ops[i];
    if (o->kind != MODEL_OP_GEMM) continue;
    double f0 = linear_gemm_s(x, o, o->m, o->n, o->k, false), d0 = linear_gemm_s(x, o, o->m, o->k, o->n, false),
           w0 = linear_gemm_s(x, o, o->k, o->n, o->m, true);
    double gf = tpo_gemm_s(x, ops, n, i, PLAN_PHASE_FWD, PLAN_PART_WHOLE, f0);
    double gd = tpo_gemm_s(x, ops, n, i, PLAN_PHASE_BWD, PLAN_PART_DGRAD, d0);
    double gw = tpo_gemm_s(x, ops, n, i, PLAN_PHASE_BWD, PLAN_PART_WGRAD, w0);
    extra += (gf - f0) + (gd - d0) + (gw - w0);
    extra_fwd += gf - f0;
    bool starts_block = o->parallel == MODEL_PAR_COLUMN && (i == 0 || ops[i - 1].parallel != MODEL_PAR_COLUMN);
    if (starts_block) {
      /* forward: the SP gather as a ring exchange beside the block's first GEMM */
      const bool fp8 = plan_fp8_gemm(p, o); /* FP8 gathers: never compressed (sp_msg_s) */
      fwd += amax_s(x, o);
      fwd += sim_search_tpo_ring_exposed(t, gf, sp_msg_s(x, PLAN_TRAFFIC_TP_FWD, o, false, step, &unused),
                              !fp8 && tpo_compressed(p, PLAN_TRAFFIC_TP_FWD, step));
      double ag = sp_msg_s(x, PLAN_TRAFFIC_TP_BWD, o, false, act, &unused);
      int dg = plan_tpo_ops_gemm(p, ops, n, i, PLAN_PHASE_BWD, PLAN_PART_DGRAD);
      if (plan_tpo_dgrad_scatters(p, dg)) {
        /* backward, ub_overlap_rs_dgrad: the dgrad's pieces reduce-scattered behind it (after the re-gather on
         * the TP stream, which runs beside the first pieces); the wgrad beside nothing */
        int kd = plan_tpo_splits(p, dg);
        double rp = tp_msg_s(x, PLAN_COLL_REDUCESCATTER, PLAN_TRAFFIC_TP_BWD, 2, act / kd, &unused);
        bool c = tpo_compressed(p, PLAN_TRAFFIC_TP_BWD, act / kd);
        if (c) {
          bwd += ag + sim_search_tpo_pipeline_exposed(kd, gd, rp, true);
        } else {
          double r = ag; /* the TP stream: the re-gather, then piece j's reduce-scatter once piece j is done */
          for (int j = 0; j < kd; j++) r = fmax((j + 1) * gd / kd, r) + rp;
          bwd += r - gd;
        }
      } else {
        /* backward, bulk: the re-gather beside the dgrad, the input-gradient reduce-scatter beside the wgrad */
        double rs = tp_msg_s(x, PLAN_COLL_REDUCESCATTER, PLAN_TRAFFIC_TP_BWD, 2, act, &unused);
        if (tpo_compressed(p, PLAN_TRAFFIC_TP_BWD, act))
          bwd += ag + rs;
        else
          bwd += fmax(0.0, ag - gd) + fmax(0.0, rs - gw);
      }
    }
    if (o->parallel == MODEL_PAR_ROW) {
      /* forward: the reduce-scatter in the method's pieces (pipeline: num_splits; ring exchange: tp) */
      int k = plan_tpo_splits(p, plan_tpo_ops_gemm(p, ops, n, i, PLAN_PHASE_FWD, PLAN_PART_WHOLE));
      double piece = act / k;
      fwd += sim_search_tpo_pipeline_exposed(k, gf, tp_msg_s(x, PLAN_COLL_REDUCESCATTER, PLAN_TRAFFIC_TP_FWD, 1, piece, &unused),
                                  tpo_compressed(p, PLAN_TRAFFIC_TP_FWD, piece));
      /* backward: the output gradient's gather as a ring exchange beside the dgrad */
      bwd += amax_s(x, o);
      bwd += sim_search_tpo_ring_exposed(t, gd, sp_msg_s(x, PLAN_TRAFFIC_TP_BWD, o, true, step, &unused),
                              !plan_fp8_gemm(p, o) && tpo_compressed(p, PLAN_TRAFFIC_TP_BWD, step));
    }
  }
  lc->compute += extra;
  lc->gemm += extra;
  lc->fwd += extra_fwd, lc->fwd_gemm += extra_fwd, lc->tp_fwd = fwd;
  if (p->recompute == MODEL_RECOMPUTE_FULL) lc->recompute += extra_fwd, lc->gemm_recompute += extra_fwd;
  lc->tp_exposed = fwd * (p->recompute == MODEL_RECOMPUTE_FULL ? 2 : 1) + bwd;
}

/* ZeRO-2's reduce-scatters left after the compute (search_estimate.c).
 * Every backward step closes k buckets of DP work r in all (one
 * reduce-scatter each, on the one DP stream, in order), spaced evenly over
 * its b seconds; a forward step (f) closes none. The stage's last backward
 * steps run back to back (`run` of them: the cool-down's and the last
 * 1F1B pair's), `pairs` forward-backward pairs before them, and the compute
 * idles `idle` seconds within the run (the pipeline's drain). The stream
 * ends at the latest of: the last bucket alone (r / k); the run's work from
 * its first bucket on, less the time left after that bucket (run (r - b) +
 * b / k - idle); and all the pairs' work with it (each pair adds
 * r - f - b). When r exceeds b the run falls behind by r - b per step: the
 * cool-down has no forwards to hide the reduce-scatters behind. */
double sim_search_zero2_tail_s(int run, int pairs, double f, double b, double r, double k, double idle) {
  if (!(r > 0) || run < 1) return 0;
  if (k < 1) k = 1;
  double from_run = run * (r - b) + b / k - idle;
  return fmax(r / k, fmax(from_run, from_run + pairs * (r - f - b)));
}

/* overlap_param_gather's wait (search_estimate.c). The programs
 * (plan_program.c, sharding_before_unit) dispatch the first two buckets'
 * gathers at the start and each next one when the compute reaches the
 * first use of the bucket before it, on the one DP stream; the compute
 * waits at each bucket's first use for its gather. So bucket j starts at
 * s_j = s_{j-1} + max(h_{j-1}, g_j), h_{j-1} the compute between the two
 * first uses, s_0 = g_0: the compute waits g_0 plus each next gather's
 * excess over the compute before it. */
double sim_search_param_gather_wait_s(const double *g, const double *h, int n) {
  double t = n > 0 ? g[0] : 0;
  for (int j = 1; j < n; j++) t += fmax(0.0, g[j] - h[j - 1]);
  return t;
}

/* The buckets reduced after the last micro-batch's backward only (ZeRO-1,
 * plain DP; search_estimate.c). Chunk c's k[c] buckets (work r[c]) close
 * during its last backward step (b seconds), chunk 0's the stage's last step,
 * chunk c's `gap` seconds before chunk c - 1's (interleaved: pp backward
 * steps, chunk c's last micro-batch is c x pp steps from the end); idle: the
 * compute's idle in the drain. As for ZeRO-2, the DP stream (in order) ends
 * at the latest of: the last bucket alone, and each chunk's work with the
 * later chunks' from its first bucket on, less the time from that bucket to
 * the compute's end. */
double sim_search_last_backward_tail_s(const double *r, const int *k, int n, double b, double gap, double idle) {
  if (n < 1 || !(r[0] > 0)) return 0;
  double t = r[0] / (k[0] > 0 ? k[0] : 1), work = 0;
  for (int c = 0; c < n; c++) {
    work += r[c];
    t = fmax(t, work - c * gap - (c > 0 ? idle : 0.0) - (b - b / (k[c] > 0 ? k[c] : 1)));
  }
  return t;
}

/* Data-parallel traffic under the sharding stages and overlaps (zero_stage
 * >= 2, overlap_param_gather, overlap_grad_reduce false; today's path
 * otherwise): ZeRO-2 reduce-scatters every micro-batch's gradients beside
 * its backward (the tail left after the compute: zero2_tail); ZeRO-3 also
 * gathers each layer's bf16 parameters twice per micro-batch, prefetched
 * beside the compute; overlap_param_gather moves ZeRO-1/2's gathers beside
 * the first forward. */
static double dp_sharded_s(const plan *p, double reduce, double gather, double gather_wait, double reduce_tail,
                           double zero2_tail) {
  double t;
  if (p->zero_stage == 2)
    t = zero2_tail;
  else
    t = p->overlap_grad_reduce_off ? reduce : reduce_tail;
  if (p->zero1) t += p->overlap_param_gather ? gather_wait : gather;
  return t;
}

/* Pipeline transfers slowed by DP collectives on the same NIC (search_estimate.c):
 * n transfers, each t_bw seconds of bandwidth alone; beside a DP flow a
 * transfer gets half the NIC (SimGrid's fair share of the link, as a real
 * NIC's queues share it). busy: the fraction of the transfers that meet a DP
 * collective; dp_s: how long that collective runs from the transfer's start
 * (0: longer than the transfer). A transfer that meets one for d seconds
 * moves d / 2 of its bytes' time in them and the rest alone: it takes
 * t_bw + min(t_bw, d / 2). Returns the time added to the n transfers. */
double sim_search_pp_dp_shared_s(int n, double t_bw, double busy, double dp_s) {
  if (n < 1 || !(t_bw > 0) || !(busy > 0)) return 0;
  double extra = dp_s > 0 ? fmin(t_bw, dp_s / 2.0) : t_bw;
  return n * fmin(busy, 1.0) * extra;
}

/* ZeRO-3's wait per micro-batch on one stage. One reduce-scatter and two
 * gathers per unit (layer, embedding, head), each paying the ring's latency
 * steps: the stage's bytes, the latency units times (on 2,048 cross-leaf
 * members, 2047 x 7.5 us each), all on the one DP stream beside the
 * compute. The programs (plan_program.c, sharding_before_unit) prefetch
 * within a step only: at the start of each chunk's forward and backward
 * step the compute waits for its first unit's whole gather and for the
 * second unit's beyond the first unit's compute (sim_search_zero3_step_wait_s:
 * the embedding's forward and the head's backward are short, a layer's are
 * not); the rest of the DP work hides behind the compute when it fits:
 * max(the 2 vpp step waits, DP work - compute). */
double sim_search_zero3_wait_s(double step_waits, double dp_work, double compute) {
  return fmax(step_waits, dp_work - compute);
}

/* At a step's start the program issues the gathers of the first unit and
 * the next (prefetch >= 1) on the in-order DP stream: the first unit's
 * compute starts when its gather ends (g_first), the second's when its own
 * gather, queued behind, ends (g_first + g_second) or when the first unit's
 * compute ends (g_first + c_first), whichever is later. */
double sim_search_zero3_step_wait_s(double g_first, double g_second, double c_first) {
  return g_first + fmax(0.0, g_second - c_first);
}

/* A backward step's units reduce-scatter as they end; the last one's (the
 * chunk's first layer, rs_last) starts when the step's compute ends, and
 * the next step's gathers, issued at its start, queue behind it on the
 * in-order DP stream: each of the steps that follow one of the stage's
 * `backward_steps` backward steps (all but the last, which the tail
 * counts) waits rs_last more before its first unit. */
double sim_search_zero3_after_backward_s(int backward_steps, double rs_last) {
  return backward_steps > 1 ? (backward_steps - 1) * rs_last : 0.0;
}

/* The last backward of the iteration (stage 0's chunk 0) ends with its first
 * layer and then the embedding: the first layer's reduce-scatter leaves when
 * that layer's backward ends, the embedding's waits behind it on the DP
 * stream, and the optimizer waits for both (plan_program.c,
 * sharding_after_unit). The stream ends rs_prev + rs_last after the layer,
 * c_last of it hidden by the embedding's backward; at least the last
 * reduce-scatter is left. */
double sim_search_zero3_tail_s(double rs_prev, double rs_last, double c_last) {
  return fmax(rs_last, rs_prev + rs_last - c_last);
}

/* ZeRO-3's per-unit figures on a stage (sim_search_estimate_plan): gathers
 * and reduce-scatters of a layer, the embedding and the head, each with
 * its ring latency, and the compute the step-start waits hide behind. */
typedef struct {
  double g_layer, g_emb, g_head, rs_layer, rs_emb;
  double emb_fwd, emb_bwd, head_bwd; /* compute of the embedding's forward / backward, the head's backward */
} zero3_units;

static double zero3_wait(const plan *p, const zero3_units *u, double params, double per_mb_compute,
                         double layer_fwd, double layer_bwd, int units, double *dp_work) {
  const int shards = plan_dp_shards(p);
  double reduce = group_coll_s(p, PLAN_COLL_REDUCESCATTER, shards, p->tp, plan_grad_bytes(p) * params);
  double gather = group_coll_s(p, PLAN_COLL_ALLGATHER, shards, p->tp, 2.0 * params);
  double a_rs = group_alpha_s(p, PLAN_COLL_REDUCESCATTER, shards, p->tp);
  double a_ag = group_alpha_s(p, PLAN_COLL_ALLGATHER, shards, p->tp);
  double work = reduce + 2.0 * gather + (units - 1) * (a_rs + 2.0 * a_ag);
  *dp_work = work;
  /* the 2 vpp steps of a micro-batch: a layer first, except stage 0's first forward (the embedding)
   * and the last stage's last backward (the head); with pp > 1 these are on different stages: the
   * one that waits more sets the pace */
  double layer_f = sim_search_zero3_step_wait_s(u->g_layer, u->g_layer, layer_fwd);
  double layer_b = sim_search_zero3_step_wait_s(u->g_layer, u->g_layer, layer_bwd);
  double emb_f = sim_search_zero3_step_wait_s(u->g_emb, u->g_layer, u->emb_fwd);
  double head_b = sim_search_zero3_step_wait_s(u->g_head, u->g_layer, u->head_bwd);
  double steps = (p->vpp - 1) * (layer_f + layer_b);
  steps += p->pp == 1 ? emb_f + head_b : fmax(emb_f + layer_b, layer_f + head_b);
  /* a backward step ends with its first layer's reduce-scatter on the DP stream: the step after it
   * (m vpp - 1 of them on a stage) finds its first gather queued behind it */
  const int m = plan_micro_batches(p);
  steps += sim_search_zero3_after_backward_s(m * p->vpp, u->rs_layer) / m;
  return sim_search_zero3_wait_s(steps, work, per_mb_compute);
}

/* ---- the clock model ---- */

double sim_search_clock_duty(double busy, double steady_idle, double bubble) {
  if (!(busy > 0)) return 1.0;
  double fill = fmin(fmax(bubble, 0.0), busy), steady = busy - fill;
  double d_steady = steady > 0 ? steady / (steady + fmax(steady_idle, 0.0)) : 1.0;
  double d_fill = fill > 0 ? fill / (fill + bubble) : 1.0;
  return (steady * d_steady + fill * d_fill) / busy;
}

/* The duty and busy/idle cycle of an estimated iteration (mean breakdown).
 * Collectives inside a node over NVLink draw power (sim_comm_draws_power);
 * a pipeline that waits does so once per chunk and micro-batch. */
static double estimate_duty(const plan *p, const sim_search_estimate *est, double *cycle_us) {
  topo_intra_kind k = p->cluster.intra.kind;
  const bool nvlink = k == TOPO_INTRA_NVLINK || k == TOPO_INTRA_NVSWITCH;
  const bool tp_draws = nvlink && !crosses_nodes(p, 1, p->tp);
  const bool pp_draws = nvlink && p->pp > 1 && !crosses_nodes(p, p->tp * plan_cp(p) * p->dp, 2);
  double busy = est->compute_s + (tp_draws ? est->tp_exposed_s : 0.0);
  double steady_idle = (pp_draws ? 0.0 : est->pp_exposed_s) + est->cp_exposed_s +
                       (p->zero_stage == 3 ? est->dp_exposed_s : 0.0);
  double gaps = p->pp > 1 ? (double)plan_micro_batches(p) * p->vpp : 1.0;
  *cycle_us = est->iteration_s / gaps * 1e6;
  return sim_search_clock_duty(busy, steady_idle, est->bubble_s);
}

/* ---- one iteration from the per-layer costs ---- */

typedef struct {
  layer_cost lc;
  double cp_ring;                   /* exposed KV ring per layer and micro-batch */
  double head, head_gemm, head_tp;  /* the output head per micro-batch (last stage) */
  zero3_units z3;                   /* ZeRO-3: the units' gathers and reduce-scatters (at speed 1) */
  int dp_buckets;                   /* ZeRO-1/2: the buckets one micro-batch's backward closes on stage 0 */
  plan_zero_bucket bucket[SEARCH_MAX_BUCKETS]; /* and each one (when they fit) */
  double bucket_gather[SEARCH_MAX_BUCKETS];    /* its parameters' all-gather */
  double fp8_layer_params; /* a layer's FP8 GEMM weights (layout.fp8; plan_fp8_gemm_weights) */
  double bucket_reduce[SEARCH_MAX_BUCKETS];    /* its gradients' reduce-scatter (ZeRO-1/2) or all-reduce */
  double host_layer, host_fwd; /* a framework's host time per layer and micro-batch (its forward), 0 without one:
                                * the GPU cannot run a layer-micro-batch faster than its host issues it */
} stage_costs;

/* A chunk step of stage 0 (which ends the iteration: its last backward is the pipeline's last):
 * forward f and backward b (per_layer: a layer's compute, recompute and exposed TP and CP per
 * micro-batch, f_layer: the forward's part; the head with the layers when pp is 1, its forward a
 * third of its GEMMs). */
static void stage0_steps(const plan *p, const stage_costs *sc, double per_layer, double f_layer, double head,
                         double *f, double *b) {
  const double lpc = plan_chunk_layers(p, 0);
  *f = lpc * f_layer, *b = lpc * (per_layer - f_layer);
  if (p->pp == 1) *f += head / 3.0, *b += 2.0 * head / 3.0 + sc->head_tp;
}

/* ZeRO-1's and plain DP's buckets (after the last micro-batch's backward)
 * on stage 0: each bucket's collective with its ring latency, the chunks'
 * last backward steps pp steps apart under interleaving. -1 without the
 * bucket list (the caller then keeps the old overlap: the last pass and
 * half the drain). */
static double last_backward_tail(const plan *p, const stage_costs *sc, double per_layer, double f_layer,
                                 double head, double drain_idle) {
  if (sc->dp_buckets < 1 || sc->dp_buckets > SEARCH_MAX_BUCKETS || p->vpp > SEARCH_MAX_BUCKETS) return -1;
  double r[SEARCH_MAX_BUCKETS] = {0}, f, b;
  int k[SEARCH_MAX_BUCKETS] = {0};
  for (int j = 0; j < sc->dp_buckets; j++) {
    r[sc->bucket[j].chunk] += sc->bucket_reduce[j];
    k[sc->bucket[j].chunk]++;
  }
  stage0_steps(p, sc, per_layer, f_layer, head, &f, &b);
  return sim_search_last_backward_tail_s(r, k, p->vpp, b, p->pp * b, drain_idle);
}

/* overlap_param_gather on stage 0 (whose wait delays every stage): the
 * compute between two buckets' first uses is the forward of the first
 * one's layers, and, at the end of a chunk, the forward of that chunk for
 * the other micro-batches of its group (interleaved: pp of them run each
 * chunk in turn). Without the bucket list (more buckets than it holds):
 * the gathers beside one micro-batch's forward. */
static double param_gather_wait(const plan *p, const stage_costs *sc, double f_layer, double gather, double first_fwd) {
  if (sc->dp_buckets < 1 || sc->dp_buckets > SEARCH_MAX_BUCKETS) return fmax(0.0, gather - first_fwd);
  const int m = plan_micro_batches(p), others = (p->vpp > 1 ? (m < p->pp ? m : p->pp) : 1) - 1;
  const double f_chunk = plan_chunk_layers(p, 0) * f_layer;
  double h[SEARCH_MAX_BUCKETS];
  for (int j = 0; j < sc->dp_buckets; j++)
    h[j] = sc->bucket[j].layers * f_layer + (sc->bucket[j].chunk_last ? others * f_chunk : 0.0);
  return sim_search_param_gather_wait_s(sc->bucket_gather, h, sc->dp_buckets);
}

/* ZeRO-2 on stage 0: its steps (stage0_steps), the schedule's warm-up
 * (plan_warmup_steps) and each bucket's reduce-scatter paying the ring's
 * latency steps (as ZeRO-3's units do). */
static double zero2_tail(const plan *p, const stage_costs *sc, double per_layer, double f_layer, double head,
                         double drain_idle) {
  const int m = plan_micro_batches(p), steps = m * p->vpp, warm = plan_warmup_steps(p, 0), shards = plan_dp_shards(p);
  const int run = steps - warm >= 1 ? warm + 1 : steps, pairs = steps - warm >= 1 ? steps - warm - 1 : 0;
  double f, b;
  stage0_steps(p, sc, per_layer, f_layer, head, &f, &b);
  double work = 0;
  if (sc->dp_buckets <= SEARCH_MAX_BUCKETS) {
    for (int j = 0; j < sc->dp_buckets; j++) work += sc->bucket_reduce[j];
  } else { /* the stage's bytes, each bucket paying the ring's latency steps */
    double bytes = plan_grad_bytes(p) * plan_params_of_stage(p, 0);
    double alpha = group_alpha_s(p, PLAN_COLL_REDUCESCATTER, shards, p->tp);
    work = group_coll_s(p, PLAN_COLL_REDUCESCATTER, shards, p->tp, bytes) + (sc->dp_buckets - 1) * alpha;
  }
  return sim_search_zero2_tail_s(run, pairs, f, b, work / p->vpp, (double)sc->dp_buckets / p->vpp, drain_idle);
}

/* Compute time at the clock's speeds: GEMM (and attention) time / gemm_speed, the rest / mem_speed. */
static double at_speed(double total, double gemm, double gs, double ms) { return gemm / gs + (total - gemm) / ms; }

/* The iteration at GEMM speed gs and memory-bound speed ms. The pace is the
 * last stage's (its layers and the head); the breakdown is the mean over the
 * pipeline's stages, as the simulator reports it: the head computes on one
 * stage of pp, and the others wait for it (bubble). */
static int assemble(estimator *x, const stage_costs *sc, double gs, double ms, sim_search_estimate *est) {
  const plan *p = x->p;
  const layer_cost *lc = &sc->lc;
  memset(est, 0, sizeof *est);
  est->clock_gemm_speed = 1.0;
  /* L: the layers of the fullest stage (every stage's under an even split); with the embedding and
   * the loss accounted as layers the last stage has one layer fewer beside the head. Lmean: the mean
   * over the stages, for the breakdown. */
  const int m = plan_micro_batches(p), L = plan_max_stage_layers(p);
  const double Lmean = (double)p->layers / p->pp;
  const bool head_in_slot = p->pp > 1 && p->account_loss;
  const double compute = at_speed(lc->compute, lc->gemm, gs, ms), recompute = at_speed(lc->recompute, lc->gemm_recompute, gs, ms);
  const double head = at_speed(sc->head, sc->head_gemm, gs, ms);
  const double f_layer = fmax(at_speed(lc->fwd, lc->fwd_gemm, gs, ms) + lc->tp_fwd + lc->cp_fwd, sc->host_fwd);
  /* data parallel: fp32 gradients of this GPU's parameters (the largest stage's) */
  double params = 0, gather_bytes = 0;
  for (int s = 0; s < p->pp; s += (p->pp > 2 ? p->pp - 1 : 1)) params = fmax(params, plan_params_of_stage(p, s));
  if (p->pp == 2) params = fmax(plan_params_of_stage(p, 0), plan_params_of_stage(p, 1));
  /* the parameter all-gather's bytes on the same stages: BF16, the FP8 GEMMs' in FP8 under fp8_param_gather
   * (plan_fp8_param_gather_saved) */
  for (int s = 0; s < p->pp; s++)
    if (p->pp <= 2 || s == 0 || s == p->pp - 1)
      gather_bytes = fmax(gather_bytes, 2.0 * plan_params_of_stage(p, s) - plan_fp8_param_gather_saved(p) *
                                                                            sc->fp8_layer_params * plan_stage_layers(p, s));
  const int shards = plan_dp_shards(p); /* gradients are reduced over dp x cp */
  /* ZeRO-3's waits hold each micro-batch of the stage back: they set the pipeline's pace */
  /* per micro-batch on the last stage (its layers plus the output head) */
  double per_layer = fmax(compute + recompute + lc->tp_exposed + sc->cp_ring, sc->host_layer);
  double z3 = 0, z3_tail = 0, z3_work = 0;
  if (p->zero_stage == 3 && shards > 1) {
    zero3_units u = sc->z3;
    u.emb_fwd /= ms, u.emb_bwd /= ms, u.head_bwd = 2.0 * head / 3.0; /* at the clock's speeds */
    z3 = zero3_wait(p, &u, params, L * (compute + recompute), f_layer, per_layer - f_layer, L + (p->pp == 1 ? 2 : 1),
                    &z3_work);
    z3_tail = sim_search_zero3_tail_s(u.rs_layer, u.rs_emb, u.emb_bwd);
  }
  double stage_mb = L * per_layer + (head_in_slot ? fmax(0.0, head + sc->head_tp - per_layer) : head + sc->head_tp) + z3;
  double pipeline = (m + (double)(p->pp - 1) / p->vpp) * stage_mb;
  double last_bubble = (double)(p->pp - 1) / p->vpp * stage_mb;
  est->compute_s = m * (Lmean * (compute + recompute) + head / p->pp);
  est->tp_exposed_s = m * (Lmean * lc->tp_exposed + sc->head_tp / p->pp);
  est->codec_s = m * Lmean * lc->codec;
  est->cp_exposed_s = m * Lmean * sc->cp_ring;
  est->dp_exposed_s = m * z3 + z3_tail;
  est->bubble_s = fmax(0.0, pipeline - est->compute_s - est->tp_exposed_s - est->cp_exposed_s - m * z3);

  /* pipeline transfers: activation forward, gradient backward, per chunk */
  if (p->pp > 1) {
    model_shard sh = {.tp = p->tp, .sequence_parallel = p->sequence_parallel, .micro_batch = p->micro_batch,
                      .seq = plan_local_seq(p), .no_hidden_dropout = !(p->hidden_dropout > 0)};
    double msg = model_activation_tensor_bytes(&p->model, &sh);
    int stride = p->tp * plan_cp(p) * p->dp; /* tp-cp-dp-pp order */
    double t = crosses_nodes(p, stride, 2)
            ? p->cluster.nic.latency_us * 1e-6 + msg / (nic_gbps_per_gpu(&p->cluster) * 1e9)
            : p->cluster.intra.latency_us * 1e-6 + msg / (p->cluster.intra.gbps_per_gpu * 1e9);
    est->pp_exposed_s = 2.0 * m * p->vpp * t;
    /* Beside DP collectives that leave through the same NIC (both groups cross nodes), a transfer gets
     * half of it: ZeRO-1 and plain DP reduce each chunk's buckets after its last micro-batch's backward,
     * while that micro-batch's gradient crosses the pp stages (the group's chain, no slack); ZeRO-2 and
     * ZeRO-3 keep the DP stream busy beside every step. */
    if (crosses_nodes(p, stride, 2) && shards > 1 && crosses_nodes(p, p->tp, shards)) {
      const double t_bw = msg / (nic_gbps_per_gpu(&p->cluster) * 1e9);
      const double grads = plan_grad_bytes(p) * params;
      double f, b;
      stage0_steps(p, sc, per_layer, f_layer, head, &f, &b);
      if (p->zero_stage == 3) {
        est->pp_exposed_s += sim_search_pp_dp_shared_s(2 * m * p->vpp, t_bw, fmin(1.0, z3_work / (L * (compute + recompute))), 0);
      } else if (p->zero_stage == 2) {
        double r = group_coll_s(p, PLAN_COLL_REDUCESCATTER, shards, p->tp, grads) / p->vpp;
        est->pp_exposed_s += sim_search_pp_dp_shared_s(2 * m * p->vpp, t_bw, fmin(1.0, r / (f + b)), 0);
      } else if (!p->overlap_grad_reduce_off) {
        double r = group_coll_s(p, p->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, shards, p->tp, grads) / p->vpp;
        est->pp_exposed_s += sim_search_pp_dp_shared_s(p->vpp * p->pp, t_bw, 1.0, r);
      }
    }
  }

  double opt_params = p->zero1 ? params / shards : params;
  est->optimizer_s = kernel_s(x, "optimizer", 30.0 * opt_params, 0, false) / ms;
  if (p->zero_stage == 3) {
    /* counted in the pace above */
  } else if (shards > 1 && (p->zero_stage >= 2 || p->overlap_param_gather || p->overlap_grad_reduce_off || plan_cp(p) > 1)) {
    double reduce = group_coll_s(p, p->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, shards, p->tp,
                                 4.0 * params);
    double gather = group_coll_s(p, PLAN_COLL_ALLGATHER, shards, p->tp, gather_bytes);
    double z2 = p->zero_stage == 2 ? zero2_tail(p, sc, per_layer, f_layer, head, 0.5 * last_bubble) : 0.0;
    double pg = p->zero1 && p->overlap_param_gather
                  ? param_gather_wait(p, sc, f_layer, gather, L * compute / 3.0 /* a third of forward + backward */)
                  : 0.0;
    double tail = p->zero_stage < 2 ? last_backward_tail(p, sc, per_layer, f_layer, head, 0.5 * last_bubble) : 0.0;
    if (tail < 0) tail = fmax(0.0, reduce - (L * compute + 0.5 * last_bubble));
    est->dp_exposed_s = dp_sharded_s(p, reduce, gather, pg, tail, z2);
  } else if (p->dp > 1) {
    double grads = 4.0 * params;
    double reduce = group_coll_s(p, p->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, p->dp, p->tp, grads);
    /* Buckets leave as their layers' last backward ends (last_backward_tail;
     * without the bucket list: they overlap the last micro-batch's pass
     * through the stage and the idle gaps of the pipeline drain, half the
     * bubble). */
    double overlap = L * compute + 0.5 * last_bubble;
    double tail = last_backward_tail(p, sc, per_layer, f_layer, head, 0.5 * last_bubble);
    est->dp_exposed_s = tail >= 0 ? tail : fmax(0.0, reduce - overlap);
    if (p->zero1) est->dp_exposed_s += group_coll_s(p, PLAN_COLL_ALLGATHER, p->dp, p->tp, gather_bytes);
  }
  if (x->failed) return -1;

  est->iteration_s = pipeline + est->pp_exposed_s + (p->zero_stage == 3 ? z3_tail : est->dp_exposed_s) + est->optimizer_s;
  double tokens = (double)p->global_batch * p->seq;
  est->tokens_per_s = tokens / est->iteration_s;
  est->tflops_per_gpu = plan_model_flops(p) / est->iteration_s / plan_world_size(p) / 1e12;
  est->mfu = est->tflops_per_gpu * 1e12 / (p->cluster.gpu.bf16_tflops * 1e12);
  return 0;
}

/* ZeRO-3's units on a stage: a layer's, the embedding's and the head's
 * parameters gathered (bf16) and reduce-scattered (the gradient bytes), as
 * plan_program.c issues them, and the embedding's compute. */
static int zero3_units_of(estimator *x, const model_shard *sh, const model_op *ops, int n, const model_op *head,
                          int nh, zero3_units *u) {
  const plan *p = x->p;
  const int shards = plan_dp_shards(p), gb = plan_grad_bytes(p);
  model_op emb[MODEL_MAX_LAYER_OPS];
  int ne = model_embedding_ops(&p->model, sh, emb, MODEL_MAX_LAYER_OPS, x->e);
  if (ne < 0) return -1;
  double layer = 0, e = 0, h = 0;
  for (int i = 0; i < n; i++) layer += ops[i].params;
  for (int i = 0; i < nh; i++) h += head[i].params;
  if (p->model.tied_embeddings && p->pp > 1) /* the head's tied copy (plan_head_params) */
    h += (double)model_vocab_per_gpu(&p->model, p->tp) * p->model.hidden;
  memset(u, 0, sizeof *u);
  for (int i = 0; i < ne; i++) {
    e += emb[i].params;
    u->emb_fwd += emb[i].kind == MODEL_OP_GEMM ? gemm_s(x, emb[i].m, emb[i].n, emb[i].k) : other_op_s(x, &emb[i], false);
    u->emb_bwd += emb[i].kind == MODEL_OP_GEMM ? gemm_s(x, emb[i].m, emb[i].k, emb[i].n) + gemm_wgrad_s(x, emb[i].k, emb[i].n, emb[i].m)
                                               : other_op_s(x, &emb[i], true);
  }
  const double lat = crosses_nodes(p, p->tp, shards) ? sim_search_ring_latency_us(&p->cluster, p->tp, shards) : 0;
  u->g_layer = group_coll_lat_s(p, PLAN_COLL_ALLGATHER, shards, p->tp, 2.0 * layer, lat);
  u->g_emb = group_coll_lat_s(p, PLAN_COLL_ALLGATHER, shards, p->tp, 2.0 * e, lat);
  u->g_head = group_coll_lat_s(p, PLAN_COLL_ALLGATHER, shards, p->tp, 2.0 * h, lat);
  u->rs_layer = group_coll_lat_s(p, PLAN_COLL_REDUCESCATTER, shards, p->tp, gb * layer, lat);
  u->rs_emb = group_coll_lat_s(p, PLAN_COLL_REDUCESCATTER, shards, p->tp, gb * e, lat);
  return x->failed ? -1 : 0;
}

int sim_search_estimate_attention_s(const plan *p, const schema_calibration *cal, bool bwd, double *s, ts_err *e) {
  estimator x = {.p = p, .e = e};
  schema_roofline roof;
  sim_roofline_of(&p->cluster, &roof);
  schema_lookup_init(&x.lk, cal, &roof, NULL);
  memo_use(cal);
  model_shard sh = {.tp = p->tp, .sequence_parallel = p->sequence_parallel, .micro_batch = p->micro_batch,
                    .seq = plan_local_seq(p), .no_hidden_dropout = !(p->hidden_dropout > 0)};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&p->model, &sh, ops, MODEL_MAX_LAYER_OPS, e);
  if (n < 0) return -1;
  for (int i = 0; i < n; i++)
    if (ops[i].kind == MODEL_OP_ATTENTION) {
      *s = other_op_s(&x, &ops[i], bwd);
      return x.failed ? -1 : 0;
    }
  return ts_fail(e, p->model.name, "attention", "the model has no attention op");
}

/* The expert all-to-alls of one MoE layer and micro-batch (dispatch and combine, forward and backward; plan
 * p's EP > 1): each the all-to-all of this rank's token copies (bf16, top-k copies a token or the flex
 * dispatcher's once a destination, as plan_program_moe.c sends them; TACO's wire bytes where the EP policy
 * compresses them) over the EP group, by the alpha-beta model of the group's links (intra-node or the NICs),
 * exposed: the experts wait for the dispatch, the layer's output for the combine. Returns the forward's two
 * and sets *bwd to the backward's two. 0 without experts or EP. */
double sim_search_moe_alltoall_s(const plan *p, double *bwd) {
  *bwd = 0;
  if (p->model.experts <= 0 || p->ep <= 1) return 0;
  int members[1024];
  int n = plan_group_members(p, 0, PLAN_GROUP_EP, members, 1024);
  if (n < 2) return 0;
  int stride = members[1] - members[0];
  if (stride < 1) stride = 1;
  double t = (double)p->micro_batch * p->seq / (p->sequence_parallel ? p->tp : 1) / (p->cp > 1 ? p->cp : 1);
  double bytes = 2.0 * t * plan_moe_dispatch_copies(p) * p->model.hidden;
  const plan_codec *pc = &p->codec[PLAN_TRAFFIC_EP];
  if (plan_codec_has_taco(pc->kind) && bytes >= p->codec_min_bytes) {
    plan_codec c = {.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
    bytes = plan_codec_wire_bytes(&c, bytes, 2);
  }
  double one = group_coll_s(p, PLAN_COLL_ALLTOALL, n, stride, bytes);
  *bwd = 2 * one;
  return 2 * one;
}

/* A framework's host time per layer-micro-batch (the plan's host_framework, the calibration's
 * "framework_host"; sim/README.md "The host"): the section's forward + backward of the plan's layer kind
 * (MoE when the model has experts), the recomputed share of the forward again (lc's recompute over its
 * forward), and the layer's communication calls are not counted (tens of microseconds against
 * milliseconds). The simulator's host clock is the reference; this is the closed form's floor. */
static void host_floor(const plan *p, const schema_calibration *cal, const layer_cost *lc, stage_costs *sc) {
  sc->host_layer = sc->host_fwd = 0;
  if (p->host_framework == PLAN_HOST_EXECUTOR || !cal->fw_host.framework[0]) return;
  const int k = p->model.experts > 0 ? SCHEMA_FW_LAYER_MOE : SCHEMA_FW_LAYER_DENSE;
  const double f = cal->fw_host.layer_fwd_us[k] * 1e-6, b = cal->fw_host.layer_bwd_us[k] * 1e-6;
  const double rc = lc->fwd > 0 ? fmin(1.0, lc->recompute / lc->fwd) : 0;
  sc->host_fwd = f;
  sc->host_layer = f + b + rc * f;
}

int sim_search_estimate_plan(const plan *p, const schema_calibration *cal, sim_search_estimate *est, ts_err *e) {
  memset(est, 0, sizeof *est);
  estimator x = {.p = p, .e = e};
  schema_roofline roof;
  sim_roofline_of(&p->cluster, &roof);
  schema_lookup_init(&x.lk, cal, &roof, NULL);
  memo_use(cal);
  x.intra_calibrated = sim_transport_matches(cal->transport, p->cluster.intra.kind);
  model_shard sh = {.tp = p->tp, .sequence_parallel = p->sequence_parallel, .micro_batch = p->micro_batch,
                    .seq = plan_local_seq(p), .no_hidden_dropout = !(p->hidden_dropout > 0)}; /* this CP rank's tokens */
  model_op ops[MODEL_MAX_LAYER_OPS], head[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&p->model, &sh, ops, MODEL_MAX_LAYER_OPS, e);
  if (n < 0) return -1;
  int nh = model_output_ops(&p->model, &sh, head, MODEL_MAX_LAYER_OPS, e);
  if (nh < 0) return -1;
  /* the full (unsplit) activation: what every TP collective of a layer moves */
  model_shard whole = sh;
  whole.sequence_parallel = false;
  double act = model_activation_tensor_bytes(&p->model, &whole);

  layer_cost lc;
  layer_costs(&x, ops, n, act, &lc);
  tpo_layer(&x, ops, n, act, &lc);
  double cp_ring = cp_layer(&x, ops, n, &lc);
  { /* the expert all-to-alls, on the MoE layers' share of the layers (a recomputed MoE block sends them again) */
    double a2a_bwd, a2a_fwd = sim_search_moe_alltoall_s(p, &a2a_bwd);
    double share = p->model.experts > 0 && p->layers > 0
                       ? (double)(p->layers - (p->model.dense_layers < p->layers ? p->model.dense_layers : 0)) / p->layers
                       : 0;
    double rc = p->recompute == MODEL_RECOMPUTE_FULL || plan_recomputes(p, PLAN_RECOMPUTE_MOE) ? a2a_fwd : 0;
    lc.tp_fwd += share * a2a_fwd;
    lc.tp_exposed += share * (a2a_fwd + a2a_bwd + rc);
  }
  stage_costs sc = {.lc = lc, .cp_ring = cp_ring, .fp8_layer_params = plan_fp8_gemm_weights(p, ops, n)};
  if (plan_dp_shards(p) > 1 && p->zero_stage < 3) {
    double layer = 0, head_params = 0, emb = embedding_params(p, &sh);
    for (int i = 0; i < n; i++) layer += ops[i].params;
    for (int i = 0; i < nh; i++) head_params += head[i].params;
    if (p->model.tied_embeddings && p->pp > 1) /* the head's tied copy (plan_head_params) */
      head_params += (double)model_vocab_per_gpu(&p->model, p->tp) * p->model.hidden;
    if (emb < 0 ||
        (sc.dp_buckets = plan_zero_bucket_list_of(p, 0, layer, emb, head_params, sc.bucket, SEARCH_MAX_BUCKETS)) < 1)
      return ts_fail_sys(e, "estimate: the model's ops cannot be listed for the DP buckets");
    const int shards = plan_dp_shards(p);
    const plan_coll reduce = p->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE;
    const double lat = crosses_nodes(p, p->tp, shards) ? sim_search_ring_latency_us(&p->cluster, p->tp, shards) : 0;
    for (int j = 0; j < sc.dp_buckets && j < SEARCH_MAX_BUCKETS; j++) {
      const double gb = 2.0 * sc.bucket[j].params - plan_fp8_param_gather_saved(p) * sc.fp8_layer_params * sc.bucket[j].layers;
      sc.bucket_gather[j] = group_coll_lat_s(p, PLAN_COLL_ALLGATHER, shards, p->tp, gb, lat);
      sc.bucket_reduce[j] = group_coll_lat_s(p, reduce, shards, p->tp, plan_grad_bytes(p) * sc.bucket[j].params, lat);
    }
  }
  if (plan_dp_shards(p) > 1 && p->zero_stage == 3 && zero3_units_of(&x, &sh, ops, n, head, nh, &sc.z3)) return -1;
  sc.head = head_s(&x, head, nh, act, &sc.head_tp, &sc.head_gemm);
  if (x.failed) return -1;
  host_floor(p, cal, &lc, &sc);

  /* The clock model (sim_clock.c): the GPU's duty sets its GEMM and memory
   * speeds, the speeds the timeline and so the duty; two passes after the
   * first, as the simulator's passes settle in two or three. */
  if (assemble(&x, &sc, 1.0, 1.0, est)) return -1;
  sim_clock_model model;
  const sim_options so = {.cal = cal, .clock_model = sim_search_clock_model()};
  if (sim_clock_model_resolve(&so, &model, e)) return -1;
  if (model == SIM_CLOCK_MODEL_POWER) { /* the power-cap model: the busy share split by the GEMM share of compute */
    double g = 1.0, mem = 1.0;
    for (int pass = 0; pass < 2; pass++) {
      double cycle_us, duty = estimate_duty(p, est, &cycle_us);
      double G = (sc.lc.gemm + sc.lc.gemm_recompute) / g;
      double M = (sc.lc.compute + sc.lc.recompute - sc.lc.gemm - sc.lc.gemm_recompute) / mem;
      double share = G + M > 0 ? G / (G + M) : 0;
      double f = schema_power_clock(&cal->power, duty * share, duty * (1 - share), 1 - duty);
      schema_power_speeds(&cal->power, f, &g, &mem);
      if (assemble(&x, &sc, g, mem, est)) return -1;
      est->clock_duty = duty, est->clock_gemm_speed = g;
    }
    return 0;
  }
  for (int pass = 0; pass < 2 && model == SIM_CLOCK_MODEL_DUTY; pass++) {
    double cycle_us, g, mem;
    est->clock_duty = estimate_duty(p, est, &cycle_us);
    schema_clock_speed(cal, est->clock_duty, cycle_us, &g, &mem);
    if (!(g > 0) || !(mem > 0)) break;
    double duty = est->clock_duty;
    if (assemble(&x, &sc, g, mem, est)) return -1;
    est->clock_duty = duty, est->clock_gemm_speed = g;
  }
  return 0;
}


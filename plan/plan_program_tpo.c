/* plan_program_tpo.c — Megatron-Core's --tp-comm-overlap under sequence
 * parallelism (Transformer Engine's userbuffers): which GEMM runs beside
 * which communication kernel, how many SMs that kernel holds, and the
 * per-GEMM configuration layout.tp_comm_overlap_cfg (Megatron-LM's
 * --tp-comm-overlap-cfg YAML, handed to TE's initialize_ub as ub_cfgs by
 * megatron/training/initialize.py, _initialize_tp_communicators,
 * NVIDIA/Megatron-LM at d98e8a6).
 *
 * Transformer Engine's defaults (transformer_engine/pytorch/module/base.py,
 * initialize_ub, get_default_config; TE 1.x-2.x, read at
 * NVIDIA/TransformerEngine d0067d0):
 *   ring_exchange: qkv_fprop, fc1_fprop (the SP all-gather before the first
 *     column-parallel GEMM) and proj_dgrad, fc2_dgrad (the all-gather of the
 *     output gradient before the row-parallel dgrad): tp_size splits, the
 *     chunks moved peer to peer by the copy engine (use_ce), num_sm 1;
 *   pipeline: proj_fprop, fc2_fprop (the reduce-scatter after the
 *     row-parallel GEMM): 4 splits, num_sm 16 (set_sm_margin: the GEMM runs
 *     on the other SMs);
 *   bulk: qkv_dgrad, fc1_dgrad (the all-gather of the layer input for the
 *     wgrad, beside the dgrad GEMM) and qkv_wgrad, fc1_wgrad (the
 *     reduce-scatter of the input gradient, beside the wgrad GEMM): num_sm 16.
 * The methods TE runs for each GEMM (same sources, and
 * transformer_engine/common/include/transformer_engine/comm_gemm_overlap.h):
 *   - an all-gather (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad) only as
 *     ring_exchange: initialize_ub refuses pipeline for an AllGather, and the
 *     bulk/pipeline object (CommOverlapBase) has no split_overlap_ag;
 *   - proj_fprop, fc2_fprop: pipeline (num_splits pieces, each reduce-scattered
 *     behind the next piece's GEMM) or ring_exchange (CommOverlapP2P's
 *     reduce-scatter: tp pieces, 2 tp - 1 buffer chunks). "bulk" there builds
 *     the same CommOverlap object as pipeline and the module runs it pipelined,
 *     so tacosim asks for "pipeline" instead;
 *   - qkv_dgrad, fc1_dgrad: bulk, or ring_exchange / pipeline, which makes TE
 *     reduce-scatter the dgrad's own output in pieces beside it
 *     (ub_overlap_rs_dgrad; Megatron-LM's --tp-comm-overlap-rs-dgrad), gather
 *     the wgrad's input with NCCL beside the dgrad (layernorm_linear.py,
 *     gather_along_first_dim async) and drop the wgrad's overlap: initialize_ub
 *     then refuses a config for qkv_wgrad / fc1_wgrad;
 *   - qkv_wgrad, fc1_wgrad: bulk only (the module calls bulk_overlap).
 * TE's newer "external" overlap (proj_wgrad, fc2_wgrad beside the ring
 * exchange of proj_dgrad / fc2_dgrad) is not modelled: those keys are refused.
 * The programs (plan_program.c) split the GEMMs and collectives that way;
 * the simulator prices a GEMM piece beside such a kernel slower by the
 * calibration's measured ratio for the SMs the kernel holds and the GEMM's
 * set_sm_margin (sms / (sms - n) without one) for as long as the kernel runs
 * (sim_tpo_gemm_us; which kernel runs beside which piece:
 * plan_tpo_ops_companion), and the kernel itself at the collective's price
 * without waiting for the GEMM's SMs. Pipeline and bulk kernels hold num_sm SMs; ring exchange with the copy
 * engine (use_ce) holds none (userbuffers_send launches a 1-block 1-thread
 * signal kernel beside cudaMemcpyAsync, userbuffers_recv a 1-thread wait;
 * TE's userbuffers.cu at d0067d0): its GEMM runs at its own speed, or, with
 * set_sm_margin true, told sms - num_sm SMs with nothing beside it (the
 * proportional rule, which calibration/tpo-sm's t_margin follows). */
#include <string.h>

#include "plan.h"
#include "plan_internal.h"
#include "ts_json.h"

static const char *const gemm_names[PLAN_TPO_GEMMS + 1] = {
    "qkv_fprop", "qkv_dgrad", "qkv_wgrad", "proj_fprop", "proj_dgrad",
    "fc1_fprop", "fc1_dgrad", "fc1_wgrad", "fc2_fprop", "fc2_dgrad", NULL};
static const char *const method_names[] = {"ring_exchange", "pipeline", "bulk", NULL}; /* plan_tpo_method - 1 */

const char *plan_tpo_gemm_name(int g) { return g >= 0 && g < PLAN_TPO_GEMMS ? gemm_names[g] : "?"; }
const char *plan_tpo_method_name(int m) {
  return m >= PLAN_TPO_RING_EXCHANGE && m <= PLAN_TPO_BULK ? method_names[m - 1] : "default";
}

static plan_tpo_method default_method(int g) {
  switch (g) {
  case PLAN_TPO_QKV_FPROP: case PLAN_TPO_FC1_FPROP: case PLAN_TPO_PROJ_DGRAD: case PLAN_TPO_FC2_DGRAD:
    return PLAN_TPO_RING_EXCHANGE;
  case PLAN_TPO_PROJ_FPROP: case PLAN_TPO_FC2_FPROP: return PLAN_TPO_PIPELINE;
  default: return PLAN_TPO_BULK;
  }
}

plan_tpo_method plan_tpo_method_of(const plan *p, int g) {
  if (g < 0 || g >= PLAN_TPO_GEMMS) return PLAN_TPO_DEFAULT;
  int m = p->tpo_cfg[g].method;
  return m ? (plan_tpo_method)m : default_method(g);
}

int plan_tpo_num_sm(const plan *p, int g) {
  if (g < 0 || g >= PLAN_TPO_GEMMS) return 0;
  if (p->tpo_cfg[g].num_sm > 0) return p->tpo_cfg[g].num_sm;
  switch (plan_tpo_method_of(p, g)) { /* TE's get_default_config: by the method in force */
  case PLAN_TPO_RING_EXCHANGE: return PLAN_TPO_RING_SMS;
  case PLAN_TPO_PIPELINE: return PLAN_TPO_PIPELINE_SMS;
  default: return PLAN_TPO_BULK_SMS;
  }
}

bool plan_tpo_sm_margin(const plan *p, int g) {
  if (g < 0 || g >= PLAN_TPO_GEMMS) return false;
  if (p->tpo_cfg[g].set_sm_margin) return p->tpo_cfg[g].set_sm_margin == 2;
  return plan_tpo_method_of(p, g) != PLAN_TPO_RING_EXCHANGE; /* get_default_config */
}

int plan_tpo_held_sms(const plan *p, int g) {
  if (g < 0 || g >= PLAN_TPO_GEMMS || plan_tpo_method_of(p, g) == PLAN_TPO_RING_EXCHANGE) return 0;
  return plan_tpo_num_sm(p, g);
}

int plan_tpo_splits(const plan *p, int g) {
  switch (plan_tpo_method_of(p, g)) {
  case PLAN_TPO_RING_EXCHANGE: return p->tp;
  case PLAN_TPO_PIPELINE: return p->tpo_cfg[g].num_splits > 0 ? p->tpo_cfg[g].num_splits : PLAN_TPO_PIPELINE_SPLITS;
  default: return 1;
  }
}

bool plan_tpo_dgrad_scatters(const plan *p, int g) {
  return (g == PLAN_TPO_QKV_DGRAD || g == PLAN_TPO_FC1_DGRAD) && plan_tpo_method_of(p, g) != PLAN_TPO_BULK;
}

int plan_tpo_ops_first_column(const model_op *ops, int n, int mop) {
  if (mop < 0 || mop >= n || ops[mop].parallel != MODEL_PAR_COLUMN) return 0;
  for (int i = mop - 1; i >= 0; i--) {
    if (ops[i].parallel == MODEL_PAR_ROW) return 1;
    if (ops[i].parallel == MODEL_PAR_COLUMN) return 0;
  }
  return 1;
}

/* The attention block (qkv, proj) until the layer's first row-parallel op, the MLP block (fc1, fc2) after. */
static bool mlp_block(const model_op *ops, int mop) {
  for (int i = 0; i < mop; i++)
    if (ops[i].parallel == MODEL_PAR_ROW) return true;
  return false;
}

int plan_tpo_ops_gemm(const plan *p, const model_op *ops, int n, int mop, int phase, int part) {
  if (mop < 0 || mop >= n || ops[mop].kind != MODEL_OP_GEMM) return -1;
  const bool fwd = phase == PLAN_PHASE_FWD || phase == PLAN_PHASE_RECOMPUTE, mlp = mlp_block(ops, mop);
  const int par = ops[mop].parallel;
  if (par == MODEL_PAR_ROW) {
    if (fwd) return mlp ? PLAN_TPO_FC2_FPROP : PLAN_TPO_PROJ_FPROP;
    return part == PLAN_PART_DGRAD ? (mlp ? PLAN_TPO_FC2_DGRAD : PLAN_TPO_PROJ_DGRAD) : -1;
  }
  if (par != MODEL_PAR_COLUMN || !plan_tpo_ops_first_column(ops, n, mop)) return -1;
  if (fwd) return mlp ? PLAN_TPO_FC1_FPROP : PLAN_TPO_QKV_FPROP;
  const int dgrad = mlp ? PLAN_TPO_FC1_DGRAD : PLAN_TPO_QKV_DGRAD;
  if (part == PLAN_PART_DGRAD) return dgrad; /* bulk: beside the input's all-gather; else its own reduce-scatter */
  if (plan_tpo_dgrad_scatters(p, dgrad)) return -1; /* the wgrad overlaps nothing then */
  return mlp ? PLAN_TPO_FC1_WGRAD : PLAN_TPO_QKV_WGRAD; /* beside the bulk reduce-scatter of the input gradient */
}

int plan_tpo_ops_sms(const plan *p, const model_op *ops, int n, int mop, int phase, int part) {
  return plan_tpo_num_sm(p, plan_tpo_ops_gemm(p, ops, n, mop, phase, part));
}

int plan_tpo_ops_pieces(const plan *p, const model_op *ops, int n, int mop, int phase, int part) {
  const int g = plan_tpo_ops_gemm(p, ops, n, mop, phase, part);
  if (g < 0) return 1;
  switch (g) {
  case PLAN_TPO_QKV_WGRAD: case PLAN_TPO_FC1_WGRAD: return 1; /* bulk only */
  case PLAN_TPO_QKV_DGRAD: case PLAN_TPO_FC1_DGRAD: return plan_tpo_dgrad_scatters(p, g) ? plan_tpo_splits(p, g) : 1;
  default: return plan_tpo_splits(p, g); /* the gathers: tp pieces; proj_fprop / fc2_fprop: by the method */
  }
}

/* The pairs of plan_program.c: row_parallel_chunked and the rs-dgrad branch of layer_backward
 * (gemm_pieces_then_coll: piece s's reduce-scatter issued after it, on the TP stream beside piece s + 1),
 * and layer_backward's bulk branch (the re-gather issued before the dgrad, the input gradient's
 * reduce-scatter after it, beside the wgrad). */
int plan_tpo_ops_companion(const plan *p, const model_op *ops, int n, int mop, int phase, int part, int piece,
                           int pieces, plan_tpo_companion *c) {
  memset(c, 0, sizeof *c);
  c->gemm = plan_tpo_ops_gemm(p, ops, n, mop, phase, part);
  const int g = c->gemm;
  if (g < 0 || plan_tpo_held_sms(p, g) <= 0) return 0;
  const double act = 2.0 * p->micro_batch * plan_local_seq(p) * p->model.hidden; /* the builder's full_bytes */
  int caat_rule;
  c->traffic = phase == PLAN_PHASE_BWD ? PLAN_TRAFFIC_TP_BWD : PLAN_TRAFFIC_TP_FWD;
  switch (g) {
  case PLAN_TPO_PROJ_FPROP: case PLAN_TPO_FC2_FPROP: /* pipeline: the previous piece's reduce-scatter */
  case PLAN_TPO_QKV_DGRAD: case PLAN_TPO_FC1_DGRAD:
    if (plan_tpo_method_of(p, g) == PLAN_TPO_PIPELINE ||
        ((g == PLAN_TPO_QKV_DGRAD || g == PLAN_TPO_FC1_DGRAD) && plan_tpo_dgrad_scatters(p, g))) {
      if (pieces < 2 || piece < 1) return 0;
      c->coll = PLAN_COLL_REDUCESCATTER;
      c->bytes = plan_row_share(act, piece - 1, pieces);
      caat_rule = g == PLAN_TPO_PROJ_FPROP || g == PLAN_TPO_FC2_FPROP ? 1 : 2;
    } else { /* bulk dgrad: the re-gather of the layer input (FP8 when the GEMM is: plan_fp8_sp_gather_elem_bytes) */
      c->coll = PLAN_COLL_ALLGATHER;
      c->bytes = act / 2.0 * plan_fp8_sp_gather_elem_bytes(p, &ops[mop], false);
      caat_rule = 0;
    }
    break;
  case PLAN_TPO_QKV_WGRAD: case PLAN_TPO_FC1_WGRAD: /* bulk: the input gradient's reduce-scatter */
    c->coll = PLAN_COLL_REDUCESCATTER;
    c->bytes = act;
    caat_rule = 2;
    break;
  default: return 0; /* the all-gathers: ring exchange only (held 0 above) */
  }
  plan_codec codec;
  plan_tp_message(p, c->traffic, caat_rule, c->bytes, &codec, &c->wire);
  if (c->coll == PLAN_COLL_ALLGATHER && plan_fp8_gemm(p, &ops[mop])) /* FP8: travels as it is (plan_program.c) */
    codec.kind = PLAN_CODEC_NONE, c->wire = c->bytes;
  return codec.kind == PLAN_CODEC_NONE && c->wire > 0;
}

/* The layer's ops as the programs build them (plan_shard), or -1. */
static int layer_ops(const plan *p, model_op *ops) {
  model_shard s = plan_shard(p);
  ts_err e;
  return model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
}

int plan_tpo_first_column(const plan *p, int mop) {
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = layer_ops(p, ops);
  return n < 0 ? 0 : plan_tpo_ops_first_column(ops, n, mop);
}

int plan_tpo_comm_gemm(const plan *p, int mop, int phase, int part) {
  if (!p->tp_comm_overlap || p->tp < 2 || mop < 0) return -1;
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = layer_ops(p, ops);
  return n < 0 ? -1 : plan_tpo_ops_gemm(p, ops, n, mop, phase, part);
}

int plan_tpo_comm_companion(const plan *p, int mop, int phase, int part, int piece, int pieces,
                            plan_tpo_companion *c) {
  memset(c, 0, sizeof *c);
  c->gemm = -1;
  if (!p->tp_comm_overlap || p->tp < 2 || mop < 0) return 0;
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = layer_ops(p, ops);
  return n < 0 ? 0 : plan_tpo_ops_companion(p, ops, n, mop, phase, part, piece, pieces, c);
}

int plan_tpo_comm_sms(const plan *p, int mop, int phase, int part) {
  if (!p->tp_comm_overlap || p->tp < 2 || mop < 0) return 0;
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = layer_ops(p, ops);
  return n < 0 ? 0 : plan_tpo_ops_sms(p, ops, n, mop, phase, part);
}

/* ---- layout.tp_comm_overlap_cfg ---- */

#define CFG "layout.tp_comm_overlap_cfg"

/* TE's other ub_cfgs keys. set_sm_margin (whether cuBLAS is told to leave the kernel's num_sm SMs free)
 * is stored (plan_tpo_sm_margin): it picks the measured ratio of the calibration's "tp_comm_overlap_sm"
 * (sim_tpo_gemm_us). Accepted, nothing to model: cga_size (the communication kernel's thread-block
 * cluster size). Accepted at the value that runs what the model prices, refused otherwise: aggregate false
 * (true merges ring-exchange chunks in pairs), atomic_gemm false (FP8 only), fp8_buf false (FP8 buffers),
 * use_ce true (false moves ring chunks with SMs instead of the copy engine). Refused: the stream
 * priorities, pipeline_rs_overlap_first_gemm, is_reduce_scatter (set by the method and the GEMM). */
static const char *const te_refused[] = {"comm_priority", "gemm_priority", "pipeline_rs_overlap_first_gemm",
                                         "is_reduce_scatter", NULL};
static const struct {
  const char *key;
  int value; /* the one accepted: 0 false, 1 true, -1 any boolean, -2 a count 1..16 */
} te_accepted[] = {{"cga_size", -2}, {"set_sm_margin", -1}, {"aggregate", 0},
                   {"atomic_gemm", 0}, {"fp8_buf", 0},      {"use_ce", 1}};

/* 1: an accepted TE key (checked), 0: not one of them, -1: failed. */
static int te_key(json_t *v, const char *k, const char *field, const char *file, ts_err *e) {
  for (size_t i = 0; i < sizeof te_accepted / sizeof te_accepted[0]; i++) {
    if (strcmp(k, te_accepted[i].key)) continue;
    json_t *m = json_object_get(v, k);
    if (te_accepted[i].value == -2) {
      if (!json_is_integer(m) || json_integer_value(m) < 1 || json_integer_value(m) > 16)
        return ts_fail(e, file, field, "must be an integer in 1..16");
      return 1;
    }
    if (!json_is_boolean(m)) return ts_fail(e, file, field, "must be true or false");
    if (te_accepted[i].value >= 0 && json_is_true(m) != (te_accepted[i].value == 1))
      return ts_fail(e, file, field, "%s is not modelled (Transformer Engine's %s %s is what tacosim prices)",
                     json_is_true(m) ? "true" : "false", k, te_accepted[i].value ? "true" : "false");
    return 1;
  }
  for (int i = 0; te_refused[i]; i++)
    if (!strcmp(k, te_refused[i]))
      return ts_fail(e, file, field, "a Transformer Engine setting tacosim does not model");
  return 0;
}

int plan_load_tpo_cfg(json_t *layout, const char *file, plan *p, ts_err *e) {
  memset(p->tpo_cfg, 0, sizeof p->tpo_cfg);
  p->tp_comm_overlap_cfg_given = false;
  json_t *cfg = json_object_get(layout, "tp_comm_overlap_cfg");
  if (!cfg || json_is_null(cfg)) return 0;
  if (!json_is_object(cfg)) return ts_fail(e, file, CFG, "must be an object of Transformer Engine GEMM names");
  p->tp_comm_overlap_cfg_given = true;
  const char *key;
  json_t *v;
  json_object_foreach(cfg, key, v) {
    char path[128];
    snprintf(path, sizeof path, CFG ".%.40s", key);
    int g = 0;
    while (g < PLAN_TPO_GEMMS && strcmp(key, gemm_names[g])) g++;
    if (g == PLAN_TPO_GEMMS) {
      if (!strcmp(key, "proj_wgrad") || !strcmp(key, "fc2_wgrad"))
        return ts_fail(e, file, path, "Transformer Engine's \"external\" overlap of this wgrad is not modelled");
      return ts_fail(e, file, path,
                     "unknown GEMM (Transformer Engine's: qkv_fprop, qkv_dgrad, qkv_wgrad, proj_fprop, proj_dgrad, "
                     "fc1_fprop, fc1_dgrad, fc1_wgrad, fc2_fprop, fc2_dgrad)");
    }
    if (!json_is_object(v)) return ts_fail(e, file, path, "must be an object (method, num_sm, num_splits, ...)");
    const char *k;
    json_t *m;
    json_object_foreach(v, k, m) {
      bool known = !strcmp(k, "method") || !strcmp(k, "num_sm") || !strcmp(k, "num_splits");
      if (known) continue;
      char field[192];
      snprintf(field, sizeof field, "%s.%.40s", path, k);
      int t = te_key(v, k, field, file, e);
      if (t < 0) return -1;
      if (t == 0) return ts_fail(e, file, field, "unknown field");
    }
    int method;
    long long n;
    p->tpo_cfg[g].given = 1;
    if (tsj_enum_opt(v, "method", method_names, -1, &method, file, path, e)) return -1;
    p->tpo_cfg[g].method = (uint8_t)(method + 1);
    json_t *margin = json_object_get(v, "set_sm_margin"); /* checked by te_key */
    p->tpo_cfg[g].set_sm_margin = margin ? (uint8_t)(json_is_true(margin) ? 2 : 1) : 0;
    if (tsj_int_opt(v, "num_sm", 1, 1 << 20, 0, &n, file, path, e)) return -1;
    p->tpo_cfg[g].num_sm = (int)n;
    if (tsj_int_opt(v, "num_splits", 1, PLAN_TPO_MAX_SPLITS, 0, &n, file, path, e)) return -1;
    p->tpo_cfg[g].num_splits = (int)n;
  }
  return 0;
}

static int cfg_fail(ts_err *e, const char *file, int g, const char *field, const char *why) {
  char path[128];
  snprintf(path, sizeof path, CFG ".%s%s%s", gemm_names[g], field ? "." : "", field ? field : "");
  return ts_fail(e, file, path, "%s", why);
}

/* Whether TE runs GEMM g with method m (the header's list). */
static const char *method_refused(int g, int m) {
  switch (g) {
  case PLAN_TPO_QKV_FPROP: case PLAN_TPO_FC1_FPROP: case PLAN_TPO_PROJ_DGRAD: case PLAN_TPO_FC2_DGRAD:
    return m == PLAN_TPO_RING_EXCHANGE ? NULL
           : "this all-gather overlaps only as ring_exchange in Transformer Engine (initialize_ub refuses "
             "pipeline for an AllGather; the bulk/pipeline communicator has no split all-gather)";
  case PLAN_TPO_PROJ_FPROP: case PLAN_TPO_FC2_FPROP:
    return m != PLAN_TPO_BULK ? NULL
           : "bulk builds Transformer Engine's pipeline communicator here and the module runs it pipelined "
             "(split_overlap_rs): write \"pipeline\"";
  case PLAN_TPO_QKV_WGRAD: case PLAN_TPO_FC1_WGRAD:
    return m == PLAN_TPO_BULK ? NULL : "the wgrad's reduce-scatter overlaps only as bulk in Transformer Engine";
  default: return NULL; /* qkv_dgrad, fc1_dgrad: all three */
  }
}

int plan_validate_tpo(const plan *p, ts_err *e) {
  const char *f = p->path, *field = "layout.tp_comm_overlap";
  if (p->tp_comm_overlap_cfg_given && !p->tp_comm_overlap)
    return ts_fail(e, f, CFG, "needs layout.tp_comm_overlap true");
  if (!p->tp_comm_overlap) return 0;
  if (p->tp < 2) return ts_fail(e, f, field, "true needs tensor parallelism (tp >= 2)");
  if (!p->sequence_parallel)
    return ts_fail(e, f, field, "true needs sequence_parallel (Megatron-Core overlaps the SP all-gathers and "
                   "reduce-scatters; without SP see layout.tp_overlap_chunks)");
  long long tokens = (long long)p->micro_batch * plan_local_seq(p);
  const int sms = p->cluster.gpu.sms;
  for (int g = 0; g < PLAN_TPO_GEMMS; g++) {
    const plan_tpo_cfg *c = &p->tpo_cfg[g];
    const char *why = c->method ? method_refused(g, c->method) : NULL;
    if (why) return cfg_fail(e, f, g, "method", why);
    if (c->num_sm > 0 && c->num_sm >= sms) {
      char m[128];
      snprintf(m, sizeof m, "%d SMs: the %s has %d, and the GEMM beside the kernel needs at least one (1..%d)",
               c->num_sm, p->cluster.gpu.name, sms, sms - 1);
      return cfg_fail(e, f, g, "num_sm", m);
    }
    if (c->num_splits > 0 && plan_tpo_method_of(p, g) != PLAN_TPO_PIPELINE)
      return cfg_fail(e, f, g, "num_splits",
                      plan_tpo_method_of(p, g) == PLAN_TPO_RING_EXCHANGE
                          ? "only the pipeline method splits by num_splits (ring_exchange always runs tp pieces)"
                          : "only the pipeline method splits by num_splits (bulk runs the GEMM whole)");
    if ((g == PLAN_TPO_QKV_WGRAD || g == PLAN_TPO_FC1_WGRAD) && c->given && plan_tpo_dgrad_scatters(p, g - 1))
      return cfg_fail(e, f, g, NULL, "given while its dgrad uses a method other than bulk, which drops the wgrad's "
                      "overlap (Transformer Engine's initialize_ub refuses this too)");
  }
  for (int g = 0; g < PLAN_TPO_GEMMS; g++) {
    if (plan_tpo_method_of(p, g) != PLAN_TPO_PIPELINE) continue;
    int k = plan_tpo_splits(p, g);
    if (tokens % ((long long)k * p->tp) == 0) continue;
    if (p->tpo_cfg[g].num_splits > 0) {
      char m[160];
      snprintf(m, sizeof m, "the %lld tokens of a micro-batch do not split into %d pipeline chunks x tp %d", tokens,
               k, p->tp);
      return cfg_fail(e, f, g, "num_splits", m);
    }
    return ts_fail(e, f, field, "the %lld tokens of a micro-batch do not split into %d pipeline chunks x tp %d",
                   tokens, k, p->tp);
  }
  if (p->pp_scatter_gather) return ts_fail(e, f, field, "true with pp_scatter_gather (which needs no SP)");
  return 0;
}

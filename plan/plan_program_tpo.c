/* plan_program_tpo.c — Megatron-Core's --tp-comm-overlap under sequence
 * parallelism (Transformer Engine's userbuffers): which GEMM runs beside
 * which communication kernel, and how many SMs that kernel holds.
 *
 * Transformer Engine's defaults (transformer_engine/pytorch/module/base.py,
 * initialize_ub, get_default_config; TE 1.x-2.x):
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
 * The programs (plan_program.c) split the GEMMs and collectives that way;
 * the simulator prices a GEMM beside such a kernel on the GPU's SMs less the
 * kernel's (time x sms / (sms - n)), and the kernel itself at the
 * collective's price without waiting for the GEMM's SMs. */
#include "plan.h"
#include "plan_internal.h"

int plan_tpo_ops_first_column(const model_op *ops, int n, int mop) {
  if (mop < 0 || mop >= n || ops[mop].parallel != MODEL_PAR_COLUMN) return 0;
  for (int i = mop - 1; i >= 0; i--) {
    if (ops[i].parallel == MODEL_PAR_ROW) return 1;
    if (ops[i].parallel == MODEL_PAR_COLUMN) return 0;
  }
  return 1;
}

int plan_tpo_ops_sms(const model_op *ops, int n, int mop, int phase, int part) {
  if (mop < 0 || mop >= n || ops[mop].kind != MODEL_OP_GEMM) return 0;
  const bool fwd = phase == PLAN_PHASE_FWD || phase == PLAN_PHASE_RECOMPUTE;
  const int par = ops[mop].parallel;
  if (par == MODEL_PAR_ROW) {
    if (fwd) return PLAN_TPO_PIPELINE_SMS;
    return part == PLAN_PART_DGRAD ? PLAN_TPO_RING_SMS : 0;
  }
  if (par != MODEL_PAR_COLUMN || !plan_tpo_ops_first_column(ops, n, mop)) return 0;
  if (fwd) return PLAN_TPO_RING_SMS;
  return PLAN_TPO_BULK_SMS; /* dgrad beside the bulk all-gather, wgrad beside the bulk reduce-scatter */
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

int plan_tpo_comm_sms(const plan *p, int mop, int phase, int part) {
  if (!p->tp_comm_overlap || p->tp < 2 || mop < 0) return 0;
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = layer_ops(p, ops);
  return n < 0 ? 0 : plan_tpo_ops_sms(ops, n, mop, phase, part);
}

int plan_validate_tpo(const plan *p, ts_err *e) {
  const char *f = p->path, *field = "layout.tp_comm_overlap";
  if (!p->tp_comm_overlap) return 0;
  if (p->tp < 2) return ts_fail(e, f, field, "true needs tensor parallelism (tp >= 2)");
  if (!p->sequence_parallel)
    return ts_fail(e, f, field, "true needs sequence_parallel (Megatron-Core overlaps the SP all-gathers and "
                   "reduce-scatters; without SP see layout.tp_overlap_chunks)");
  long long tokens = (long long)p->micro_batch * plan_local_seq(p);
  if (tokens % ((long long)PLAN_TPO_PIPELINE_SPLITS * p->tp))
    return ts_fail(e, f, field, "the %lld tokens of a micro-batch do not split into %d pipeline chunks x tp %d",
                   tokens, PLAN_TPO_PIPELINE_SPLITS, p->tp);
  if (p->pp_scatter_gather) return ts_fail(e, f, field, "true with pp_scatter_gather (which needs no SP)");
  return 0;
}

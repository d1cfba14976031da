/* plan_limits.c — the size of the programs a plan makes, estimated before
 * they are built, and the bounds past which a plan is refused (exit 2, naming
 * the fields) instead of running out of memory minutes later (issue 20:
 * gpt-tiny with 4,096 layers and a global batch of 4,096 took 26.5 s and
 * 12.6 GB before failing to build rank 0's program).
 *
 * Ops per rank: every micro-batch runs every layer of the rank's stage
 * forward and backward; per (micro-batch, layer) at most 3 ops per model op
 * (forward, and the backward's data- and weight-gradient halves), 4 with full
 * recomputation, plus 8 for the layer's TP collectives, PP messages and
 * waits; plus a fixed part per layer (DP buckets, optimizer) and per
 * iteration. The test holds the estimate between 1x and 2x the ops built. */
#include <stdio.h>

#include "plan.h"
#include "plan_internal.h"

double plan_estimate_ops_per_rank(const plan *p) {
  model_shard s = plan_shard(p);
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e;
  int n = model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  if (n < 0) n = MODEL_MAX_LAYER_OPS;
  double layers = (double)p->layers / (p->pp > 0 ? p->pp : 1); /* every chunk of a stage */
  if (plan_uneven_stages(p)) { /* the largest stage (plan_stages.c), when its counts are valid */
    int most = plan_max_stage_layers(p);
    if (most > layers && most <= p->layers) layers = most;
  }
  double per = (p->recompute == MODEL_RECOMPUTE_FULL ? 4.0 : 3.0) * n + 8.0;
  /* context parallelism: the attention's cp pieces and the ring's steps, forward (twice with recompute) and
   * backward: at most 3 cp pieces and 4 cp steps per layer and micro-batch (plan_program_cp.c) */
  if (plan_cp(p) > 1) per += 7.0 * plan_cp(p);
  /* layout.fp8: each FP8 GEMM's input cast (forward, a recomputation) and output-gradient cast per layer and
   * micro-batch, its weight cast once per layer (plan_program.c, fp8_forward_casts) */
  int fp8 = 0;
  for (int i = 0; i < n && n < MODEL_MAX_LAYER_OPS; i++) fp8 += plan_fp8_gemm(p, &ops[i]);
  per += (p->recompute == MODEL_RECOMPUTE_FULL ? 3.0 : 2.0) * fp8;
  if (p->sequence_parallel && p->tp > 1) per += fp8; /* the transposes after the FP8 gathers (fp8_sp_transpose) */
  double micro = (double)p->global_batch / ((double)p->micro_batch * (p->dp > 0 ? p->dp : 1));
  return micro * layers * per + (16.0 + fp8) * layers + 256.0;
}

double plan_estimate_program_bytes(const plan *p, int ranks) {
  return plan_estimate_ops_per_rank(p) * (double)ranks * (double)sizeof(plan_op);
}

double plan_estimate_sim_bytes(const plan *p, int ranks) {
  return plan_estimate_ops_per_rank(p) * (double)ranks * ((double)sizeof(plan_op) + PLAN_SIM_BYTES_PER_OP);
}

/* The fields that make programs grow: micro-batches (batch.global over
 * batch.micro x layout.dp) and layers (the model's, or layers_override). */
#define GROWTH_FIELDS "batch.global, layers_override"

int plan_check_program_size(const plan *p, const char *file, ts_err *e) {
  double ops = plan_estimate_ops_per_rank(p);
  if (ops > PLAN_MAX_OPS_PER_RANK)
    return ts_fail(e, file, GROWTH_FIELDS,
                   "each rank's program would hold about %.3g ops (%lld micro-batches x %d layers per stage, "
                   "%.1f GiB), more than the %.3g tacosim builds; use fewer micro-batches (a larger batch.micro or "
                   "a smaller batch.global) or fewer layers",
                   ops, p->global_batch / ((long long)p->micro_batch * p->dp), p->layers / p->pp,
                   ops * sizeof(plan_op) / 1073741824.0, (double)PLAN_MAX_OPS_PER_RANK);
  return 0;
}

int plan_check_sim_size(const plan *p, int ranks, const char *file, ts_err *e) {
  if (plan_check_program_size(p, file, e)) return -1;
  double bytes = plan_estimate_sim_bytes(p, ranks);
  if (bytes > PLAN_MAX_SIM_BYTES)
    return ts_fail(e, file, "layout, " GROWTH_FIELDS,
                   "simulating %d ranks of about %.3g ops each needs about %.1f GiB, more than the %.0f GiB bound; "
                   "use --mode reduced (one rank per stage), fewer micro-batches or fewer layers",
                   ranks, plan_estimate_ops_per_rank(p), bytes / 1073741824.0, PLAN_MAX_SIM_BYTES / 1073741824.0);
  return 0;
}

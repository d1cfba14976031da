/* plan_internal.h — shared between the files of plan/, not a public API. */
#ifndef PLAN_INTERNAL_H
#define PLAN_INTERNAL_H

#include "plan.h"

/* Default gradient bucket: Megatron-LM's max(40M, 1M * dp) parameters, in
 * fp32 gradients (4 bytes each). */
double plan_default_dp_bucket_bytes(int dp);
/* Default threshold under which messages travel uncompressed: 8 MiB, the
 * threshold the TACO authors measured on their machines. */
#define PLAN_DEFAULT_CODEC_MIN_BYTES (8.0 * 1024 * 1024)

/* Finish times of every (micro, virtual stage) forward and backward step in
 * the ideal pipeline (forward 1, backward 2, zero-cost communication),
 * indexed [micro * V + v] with V = pp * vpp. Used to order PP messages. */
typedef struct {
  int V, m;
  int64_t *fwd_finish, *bwd_finish;
} plan_ideal;
int plan_ideal_build(const plan *p, plan_ideal *t, ts_err *e);
void plan_ideal_free(plan_ideal *t);
int64_t plan_ideal_step_cost(int backward);

/* The sharded layer this plan runs (tp, sequence parallel, micro, seq). */
model_shard plan_shard(const plan *p);
/* Norm parameters of one layer (replicated across TP). */
double plan_norm_params_per_layer(const plan *p);

#endif

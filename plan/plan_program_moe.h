/* plan_program_moe.h — the MoE part of a rank's program (plan_program_moe.c),
 * and the few emitters of plan_program.c it builds with. Internal to plan/. */
#ifndef PLAN_PROGRAM_MOE_H
#define PLAN_PROGRAM_MOE_H

#include "plan.h"

typedef struct builder plan_builder;

/* plan_program.c's builder, as plan_program_moe.c sees it. */
const plan *plan_b_plan(const plan_builder *b);
const model_op *plan_b_ops(const plan_builder *b, int *n);
int plan_b_stage(const plan_builder *b);
plan_op *plan_b_op(plan_builder *b, int32_t i);
int32_t plan_b_last_op(const plan_builder *b);
void plan_b_set_last_op(plan_builder *b, int32_t i);
void plan_b_wait_for(plan_builder *b, int32_t i); /* the next compute op waits for op i */
int plan_b_bucket_add(plan_builder *b, double params, int layer, int chunk);
int32_t plan_b_compute(plan_builder *b, plan_phase phase, int model_op, plan_part part, int layer, int micro,
                       int chunk, double flops, double bytes);
int32_t plan_b_collective(plan_builder *b, plan_stream stream, plan_group_kind group, plan_coll coll, plan_traffic t,
                          plan_phase phase, int model_op, int layer, int micro, int chunk, double bytes, double wire,
                          plan_codec codec, int32_t dep);

/* Routed-expert op i (MODEL_PAR_EXPERT) of layer, forward (or recompute):
 * before the first, the dispatch all-to-all over EP (and the all-gather
 * over expert TP); after the last, the imbalance wait and the combine
 * (reduce-scatter over expert TP, all-to-all over EP). */
int plan_moe_forward_op(plan_builder *b, int i, int layer, int micro, int chunk, plan_phase phase);
/* The same backward, in reverse: the output gradient dispatched before the
 * last expert op's backward, the input gradient combined after the first's
 * dgrad (its wgrad runs beside the combine). */
int plan_moe_backward_op(plan_builder *b, int i, int layer, int micro, int chunk);
/* After a layer's last backward: its non-expert parameters join the DP
 * bucket, its expert gradients are reduced over the expert-DP group. */
int plan_moe_layer_grads(plan_builder *b, int layer, int chunk);
/* After the optimizer (op index opt): ZeRO-1's all-gather of each MoE
 * layer's updated expert parameters over the expert-DP group. */
int plan_moe_after_optimizer(plan_builder *b, int32_t opt);

/* Context parallelism (plan_program_cp.c): attention op i as cp pieces
 * beside the KV ring (forward or recompute; backward with the dKV ring). */
int plan_cp_attention_forward(plan_builder *b, int i, int layer, int micro, int chunk, plan_phase phase);
int plan_cp_attention_backward(plan_builder *b, int i, int layer, int micro, int chunk);

#endif

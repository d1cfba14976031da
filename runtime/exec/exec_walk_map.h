/* exec_walk_map.h — what the executor makes of a plan_build_program() op
 * (plain C, no CUDA: the CPU tests check shipped plans against it).
 *
 * The executor knows the layer ops by model.h's names; a plan numbers them by
 * their index in model_layer_ops() of its shard (RoPE models insert "rope"),
 * so the indices are looked up by name once per plan. */
#ifndef EXEC_WALK_MAP_H
#define EXEC_WALK_MAP_H

#include "plan.h"
#include "ts_error.h"

typedef enum {
  EXEC_OP_LN1, EXEC_OP_QKV, EXEC_OP_ATTN, EXEC_OP_ATTN_OUT, EXEC_OP_ATTN_RESIDUAL,
  EXEC_OP_LN2, EXEC_OP_FC1, EXEC_OP_ACT, EXEC_OP_FC2, EXEC_OP_MLP_RESIDUAL,
  EXEC_OP_ROPE, /* RoPE models only: between qkv and attn */
  EXEC_OP_Q_NORM, EXEC_OP_K_NORM, /* the QK norm (model qk_norm: Qwen3): between qkv and rope */
  /* mixture-of-experts layers (after ln2, in place of fc1 .. fc2; exec_moe.c), the shared FFN when the model has one */
  EXEC_OP_ROUTER, EXEC_OP_ROUTER_TOPK, EXEC_OP_PERMUTE, EXEC_OP_EXPERT_FC1, EXEC_OP_EXPERT_ACT, EXEC_OP_EXPERT_FC2,
  EXEC_OP_UNPERMUTE, EXEC_OP_SHARED_FC1, EXEC_OP_SHARED_ACT, EXEC_OP_SHARED_FC2,
  /* multi-head latent attention (model attention "mla": DeepSeek-V3; exec_mla.c), in place of qkv (and the QK
   * norm): the query down-projection, its norm, the up-projection into qkv's queries; the key/value
   * down-projection (latent and shared rope key), the latent's norm, the up-projection into the key and value
   * heads. model.h's names. */
  EXEC_OP_Q_A, EXEC_OP_Q_A_NORM, EXEC_OP_Q_B, EXEC_OP_KV_A, EXEC_OP_KV_A_NORM, EXEC_OP_KV_B,
  EXEC_OP_COUNT
} exec_layer_op;
extern const char *const exec_layer_op_names[EXEC_OP_COUNT]; /* "ln1", "qkv", ... as model.h names them */
/* The layer's ops in forward order (the order of model_layer_ops()). */
extern const exec_layer_op exec_layer_fwd_order[EXEC_OP_COUNT];

/* The GEMMs among the layer ops (their backward may come as dgrad and wgrad halves). */
int exec_layer_op_is_gemm(exec_layer_op op);
/* Whether a model of these traits has layer op `op` (rope: RoPE models; q_norm, k_norm: models with the QK
 * norm; fc1, act, fc2: dense models and MoE models with dense layers; the MoE ops: MoE models; the shared
 * FFN's: MoE models with shared experts; q_a .. kv_b in place of qkv: models with multi-head latent attention). */
int exec_layer_op_present(exec_layer_op op, int rope, int qk_norm, int moe, int dense_layers, int shared, int mla);

/* index[op] = the model_op index of each executor layer op in p's shard
 * (-1 for the ops the model does not have, exec_layer_op_present); returns -1 (with
 * e) when the plan's layer has an op the executor does not run. */
int exec_walk_layer_op_index(const plan *p, int index[EXEC_OP_COUNT], ts_err *e);

/* 0 when the executor can run every op of prog as the program orders it (the
 * op kinds, phases, GEMM halves, collectives and streams it supports), else -1
 * naming the first op it cannot run and why. */
int exec_walk_check_program(const plan *p, const plan_program *prog, ts_err *e);

/* The pipeline stage a send/recv of stage `stage` (of pp) talks to: forward
 * activations go to the next stage and come from the previous one, gradients
 * the other way; with interleaved chunks the last stage's next is the first
 * (virtual stage v + 1 of chunk c runs on stage (stage + 1) mod pp). */
int exec_walk_pp_peer_stage(int stage, int pp, const plan_op *op);

/* Activation slots of a program: micro-batch k takes the lowest free slot at
 * its first op (in program order) and gives it back after its last op, so
 * the slots are the most micro-batches the program holds at once (forwards
 * begun minus backwards finished: every micro-batch under GPipe, pp - stage
 * under 1F1B). Fills slot_of[micros] and prev_of[micros] (the micro-batch
 * that held the slot before k, -1 if none: k's ops wait for its last ops on
 * every stream) and returns the slot count (>= 1), or -1 naming an op whose
 * micro-batch is out of range. Ops without a micro-batch (micro < 0) hold none.
 * skip_fwd_recv: a micro-batch's lifetime begins at its first op that is not
 * the receive of a forward activation (the executor lands those in boundary
 * buffers of their own, counted with skip_fwd_recv 0: plan_build_program
 * posts the next forward's receive before the backward in hand). */
static inline int exec_walk_is_fwd_recv(const plan_op *op) {
  return op->kind == PLAN_OP_RECV && op->phase == PLAN_PHASE_FWD;
}
int exec_walk_slots(const plan_program *prog, int micros, int skip_fwd_recv, int *slot_of, int *prev_of, ts_err *e);

#endif

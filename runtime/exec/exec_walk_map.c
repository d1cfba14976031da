/* exec_walk_map.c — which plan ops the executor runs (see exec_walk_map.h). */
#include "exec_walk_map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

const char *const exec_layer_op_names[EXEC_OP_COUNT] = {
    "ln1", "qkv", "attn", "attn_out", "attn_residual", "ln2", "fc1", "act", "fc2", "mlp_residual", "rope",
    "q_norm", "k_norm", "router", "router_topk", "permute", "expert_fc1", "expert_act", "expert_fc2", "unpermute", "shared_fc1",
    "shared_act", "shared_fc2", "q_a", "q_a_norm", "q_b", "kv_a", "kv_a_norm", "kv_b"};
const exec_layer_op exec_layer_fwd_order[EXEC_OP_COUNT] = {
    EXEC_OP_LN1, EXEC_OP_Q_A, EXEC_OP_Q_A_NORM, EXEC_OP_Q_B, EXEC_OP_KV_A, EXEC_OP_KV_A_NORM, EXEC_OP_KV_B,
    EXEC_OP_QKV, EXEC_OP_Q_NORM, EXEC_OP_K_NORM, EXEC_OP_ROPE, EXEC_OP_ATTN, EXEC_OP_ATTN_OUT, EXEC_OP_ATTN_RESIDUAL,
    EXEC_OP_LN2, EXEC_OP_FC1, EXEC_OP_ACT, EXEC_OP_FC2, EXEC_OP_ROUTER, EXEC_OP_ROUTER_TOPK, EXEC_OP_PERMUTE,
    EXEC_OP_EXPERT_FC1, EXEC_OP_EXPERT_ACT, EXEC_OP_EXPERT_FC2, EXEC_OP_UNPERMUTE, EXEC_OP_SHARED_FC1,
    EXEC_OP_SHARED_ACT, EXEC_OP_SHARED_FC2, EXEC_OP_MLP_RESIDUAL};

int exec_layer_op_is_gemm(exec_layer_op op) {
  return op == EXEC_OP_QKV || op == EXEC_OP_ATTN_OUT || op == EXEC_OP_FC1 || op == EXEC_OP_FC2 ||
         op == EXEC_OP_ROUTER || op == EXEC_OP_EXPERT_FC1 || op == EXEC_OP_EXPERT_FC2 || op == EXEC_OP_SHARED_FC1 ||
         op == EXEC_OP_SHARED_FC2 || op == EXEC_OP_Q_A || op == EXEC_OP_Q_B || op == EXEC_OP_KV_A || op == EXEC_OP_KV_B;
}

int exec_layer_op_present(exec_layer_op op, int rope, int qk_norm, int moe, int dense_layers, int shared, int mla) {
  if (op >= EXEC_OP_Q_A && op <= EXEC_OP_KV_B) return mla;
  if (op == EXEC_OP_QKV) return !mla;
  if (op == EXEC_OP_ROPE) return rope;
  if (op == EXEC_OP_Q_NORM || op == EXEC_OP_K_NORM) return qk_norm;
  if (op == EXEC_OP_FC1 || op == EXEC_OP_ACT || op == EXEC_OP_FC2) return !moe || dense_layers > 0;
  if (op == EXEC_OP_SHARED_FC1 || op == EXEC_OP_SHARED_ACT || op == EXEC_OP_SHARED_FC2) return moe && shared;
  if (op >= EXEC_OP_ROUTER) return moe;
  return 1;
}

int exec_walk_layer_op_index(const plan *p, int index[EXEC_OP_COUNT], ts_err *e) {
  model_shard shard = {.tp = p->tp, .sequence_parallel = p->sequence_parallel, .micro_batch = p->micro_batch,
                       .seq = p->seq, .no_hidden_dropout = !(p->hidden_dropout > 0)};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&p->model, &shard, ops, MODEL_MAX_LAYER_OPS, e);
  if (n < 0) return -1;
  for (int i = 0; i < EXEC_OP_COUNT; i++) index[i] = -1;
  for (int j = 0; j < n; j++) {
    int found = -1;
    for (int i = 0; i < EXEC_OP_COUNT; i++)
      if (!strcmp(ops[j].name, exec_layer_op_names[i])) found = i;
    if (found < 0)
      return ts_fail(e, p->path, "model", "layer op \"%s\" of %s is not run by the executor", ops[j].name,
                     p->model.name);
    index[found] = j;
  }
  const model_config *mc = &p->model;
  for (int i = 0; i < EXEC_OP_COUNT; i++)
    if (index[i] < 0 && exec_layer_op_present((exec_layer_op)i, mc->position == MODEL_POS_ROPE, mc->qk_norm, model_is_moe(mc),
                                              mc->dense_layers, mc->shared_experts > 0, mc->attention == MODEL_ATTN_MLA))
      return ts_fail(e, p->path, "model", "the layer of %s has no \"%s\"", p->model.name, exec_layer_op_names[i]);
  return 0;
}

static int layer_op_of(const int index[EXEC_OP_COUNT], int model_op) {
  if (model_op < 0) return -1; /* not a layer op (an absent one, such as rope, is indexed -1) */
  for (int i = 0; i < EXEC_OP_COUNT; i++)
    if (index[i] == model_op) return i;
  return -1;
}

static int is_gemm(int lop) { return lop >= 0 && exec_layer_op_is_gemm((exec_layer_op)lop); }

/* Why op cannot run, or NULL. */
static const char *unsupported(const plan *p, const int index[EXEC_OP_COUNT], const plan_op *op, int i) {
  for (int d = 0; d < PLAN_MAX_DEPS; d++)
    if (op->dep[d] >= i) return "a dependency on a later op";
  if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
    if (op->stream != PLAN_STREAM_PP || op->model_op != PLAN_MOP_PP_ACTIVATION) return "an unknown send/recv";
    if (op->codec.kind != PLAN_CODEC_NONE && op->codec.kind != PLAN_CODEC_TACO)
      return "a pipeline message with a codec other than TACO";
    if (op->chunk < 0 || op->chunk >= p->vpp) return "a send/recv of an unknown model chunk";
    return op->micro >= 0 ? NULL : "a send/recv without a micro-batch";
  }
  int lop = layer_op_of(index, op->model_op);
  const int fwd = op->phase != PLAN_PHASE_BWD; /* forward, or its recomputation */
  if (op->row_chunks > 1) { /* tp_overlap_chunks: rows of a forward row-parallel GEMM and their all-reduce */
    const long long tokens = (long long)p->micro_batch * p->seq;
    if (op->row_chunk >= op->row_chunks || tokens % op->row_chunks) return "a row chunk that does not split the tokens";
    if (!fwd || (lop != EXEC_OP_ATTN_OUT && lop != EXEC_OP_FC2) || op->layer < 0 || op->layer >= p->layers)
      return "a row-split op other than a forward attn_out / fc2 or its all-reduce";
    if (op->kind == PLAN_OP_COMPUTE)
      return op->stream == PLAN_STREAM_COMPUTE && op->part == PLAN_PART_WHOLE ? NULL : "a row-split GEMM half";
    return op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_TP && op->stream == PLAN_STREAM_TP &&
                   op->coll == PLAN_COLL_ALLREDUCE && op->codec.kind == PLAN_CODEC_NONE
               ? NULL
               : "a row-split collective other than an uncompressed TP all-reduce";
  }
  if (op->kind == PLAN_OP_COMPUTE) {
    if (op->stream != PLAN_STREAM_COMPUTE) return "a compute op off the compute stream";
    switch (op->model_op) {
    case PLAN_MOP_EMBEDDING: case PLAN_MOP_FINAL_NORM: case PLAN_MOP_OPTIMIZER:
      return op->part == PLAN_PART_WHOLE ? NULL : "a GEMM half of a non-GEMM op";
    case PLAN_MOP_LOSS:
      return op->phase == PLAN_PHASE_FWD && op->part != PLAN_PART_WHOLE ? "a GEMM half in the forward" : NULL;
    case PLAN_MOP_MOE_IMBALANCE: /* the simulator's wait for the busiest EP rank; the executor's is real */
      return p->ep > 1 && op->part == PLAN_PART_WHOLE ? NULL : "an MoE imbalance op without EP";
    case PLAN_MOP_MLA_KV_SCATTER: /* MLA: kv_b's output into place, or its gradient back (exec_mla.c) */
      return index[EXEC_OP_KV_B] >= 0 && op->part == PLAN_PART_WHOLE && op->layer >= 0 && op->layer < p->layers &&
                     op->phase != PLAN_PHASE_OPTIMIZER
                 ? NULL
                 : "a kv_scatter op of a model without MLA, of no layer or with a GEMM half";
    default: break;
    }
    if (lop < 0 || op->layer < 0 || op->layer >= p->layers) return "an unknown compute op";
    if (op->phase == PLAN_PHASE_OPTIMIZER) return "a layer op in the optimizer phase";
    if (op->part != PLAN_PART_WHOLE && (!is_gemm(lop) || op->phase != PLAN_PHASE_BWD))
      return "a GEMM half of a non-GEMM op";
    return NULL;
  }
  /* collectives */
  if (op->group == PLAN_GROUP_EMBEDDING)
    return op->model_op == PLAN_MOP_EMBEDDING_GRADS && op->stream == PLAN_STREAM_DP && op->coll == PLAN_COLL_ALLREDUCE
               ? NULL
               : "an unknown embedding-group collective";
  if (op->group == PLAN_GROUP_DP) {
    if (op->stream != PLAN_STREAM_DP) return "a DP collective off the DP stream";
    /* ZeRO-1: buckets are reduce-scattered, parameters all-gathered after the optimizer */
    if (op->model_op == PLAN_MOP_GRAD_BUCKET && op->coll == (p->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE))
      return op->codec.kind == PLAN_CODEC_NONE || op->codec.kind == PLAN_CODEC_TACO
                 ? NULL
                 : "a DP gradient bucket with a codec other than TACO";
    if (op->model_op == PLAN_MOP_PARAM_GATHER && op->coll == PLAN_COLL_ALLGATHER && p->zero1) return NULL;
    return "an unknown DP collective";
  }
  if (op->group == PLAN_GROUP_EP) /* the MoE token dispatch / combine (exec_moe_ep.c) */
    return op->model_op == PLAN_MOP_MOE_TOKENS && op->coll == PLAN_COLL_ALLTOALL &&
                   (op->codec.kind == PLAN_CODEC_NONE || op->codec.kind == PLAN_CODEC_TACO) &&
                   op->phase != PLAN_PHASE_RECOMPUTE && op->layer >= 0 && op->layer < p->layers
               ? NULL
               : "an EP collective other than a token all-to-all (plain or TACO)";
  if (op->group == PLAN_GROUP_EDP) /* ep < dp: one layer's expert gradients over expert-DP (exec_moe_ep.c) */
    return op->model_op == PLAN_MOP_EXPERT_GRADS && op->coll == PLAN_COLL_ALLREDUCE && op->stream == PLAN_STREAM_DP &&
                   op->codec.kind == PLAN_CODEC_NONE && op->tag >= 0 && op->tag < p->layers
               ? NULL
               : "an expert-DP collective other than an uncompressed all-reduce of a layer's expert gradients";
  if (op->group != PLAN_GROUP_TP || op->stream != PLAN_STREAM_TP) return "a collective of an unsupported group";
  if (op->coll == PLAN_COLL_ALLGATHER || op->coll == PLAN_COLL_REDUCESCATTER) {
    const int ag = op->coll == PLAN_COLL_ALLGATHER;
    if (!p->sequence_parallel) return "an all-gather/reduce-scatter without sequence parallelism";
    if (op->codec.kind != PLAN_CODEC_NONE && op->codec.kind != PLAN_CODEC_TACO)
      return "a sequence-parallel all-gather/reduce-scatter with a codec other than TACO";
    if (op->model_op == PLAN_MOP_EMBEDDING) return ag != fwd ? NULL : "an SP collective of the embedding";
    if (op->model_op == PLAN_MOP_LOSS) return ag == fwd ? NULL : "an SP collective of the output layer";
    if (ag && (lop == EXEC_OP_QKV || lop == EXEC_OP_FC1)) return NULL; /* the input, and again for the wgrad */
    if (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2) return ag != fwd ? NULL : "an SP collective of a row-parallel GEMM";
    if (!ag && !fwd && (lop == EXEC_OP_QKV || lop == EXEC_OP_FC1)) return NULL;
    return "an SP collective after an op that has none";
  }
  if (op->coll != PLAN_COLL_ALLREDUCE) return "an all-to-all";
  if (op->model_op == PLAN_MOP_EMBEDDING || op->model_op == PLAN_MOP_LOSS || op->model_op == PLAN_MOP_NORM_GRADS)
    return NULL;
  if (fwd && (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2)) return NULL;
  if (!fwd && (lop == EXEC_OP_QKV || lop == EXEC_OP_FC1)) return NULL;
  return "a TP all-reduce after an op that has none";
}

int exec_walk_check_program(const plan *p, const plan_program *prog, ts_err *e) {
  int index[EXEC_OP_COUNT];
  if (exec_walk_layer_op_index(p, index, e)) return -1;
  /* GPipe, 1F1B and interleaved 1F1B: every micro-batch in flight in an activation slot (exec_walk_slots) */
  if (p->pp > 1 && !p->model.tied_embeddings)
    return ts_fail(e, p->path, "model", "the executor's pipeline needs tied embeddings");
  for (int i = 0; i < prog->n; i++) {
    const char *why = unsupported(p, index, &prog->ops[i], i);
    if (why) {
      char name[128];
      plan_op_name(p, &prog->ops[i], name, sizeof name);
      return ts_fail(e, p->path, "program", "rank %d op %d (%s): %s", prog->rank, i, name, why);
    }
  }
  return 0;
}

int exec_walk_pp_peer_stage(int stage, int pp, const plan_op *op) {
  const int send = op->kind == PLAN_OP_SEND, fwd = op->phase == PLAN_PHASE_FWD;
  return (stage + (send == fwd ? 1 : -1) + pp) % pp;
}

int exec_walk_slots(const plan_program *prog, int micros, int skip_fwd_recv, int *slot_of, int *prev_of, ts_err *e) {
  if (micros < 1) return ts_fail_sys(e, "exec_walk_slots: %d micro-batches", micros);
  int *last = malloc((size_t)micros * sizeof *last), *holder = malloc((size_t)micros * sizeof *holder);
  int *before = malloc((size_t)micros * sizeof *before); /* per slot: its last holder */
  if (!last || !holder || !before) {
    free(last), free(holder), free(before);
    return ts_fail_sys(e, "exec_walk_slots: out of memory");
  }
  for (int k = 0; k < micros; k++) last[k] = -1, holder[k] = -1, before[k] = -1, slot_of[k] = -1, prev_of[k] = -1;
  int rc = 0;
  for (int i = 0; i < prog->n; i++) {
    const int k = prog->ops[i].micro;
    if (k >= micros) {
      rc = ts_fail(e, NULL, "program", "rank %d op %d: micro-batch %d of %d", prog->rank, i, k, micros);
      goto out;
    }
    if (k >= 0) last[k] = i;
  }
  for (int i = 0; i < prog->n; i++) {
    const int k = prog->ops[i].micro;
    if (k < 0 || (skip_fwd_recv && exec_walk_is_fwd_recv(&prog->ops[i]))) continue;
    if (slot_of[k] < 0) { /* its first op: the lowest free slot */
      int s = 0;
      while (holder[s] >= 0) s++; /* at most micros slots are ever held */
      holder[s] = k, slot_of[k] = s, prev_of[k] = before[s];
      if (s + 1 > rc) rc = s + 1;
    }
    if (i == last[k]) holder[slot_of[k]] = -1, before[slot_of[k]] = k;
  }
  for (int k = 0; k < micros; k++)
    if (slot_of[k] < 0) slot_of[k] = 0; /* a micro-batch this rank never touches */
  if (rc == 0) rc = 1;
out:
  free(last), free(holder), free(before);
  return rc;
}

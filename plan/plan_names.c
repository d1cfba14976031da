/* plan_names.c — printable names of ops and of the plan's enums. */
#include <stdio.h>
#include <string.h>

#include "plan.h"

const char *plan_op_kind_name(plan_op_kind k) {
  static const char *const n[] = {"compute", "collective", "send", "recv"};
  return (unsigned)k < 4 ? n[k] : "?";
}
const char *plan_stream_name(plan_stream s) {
  static const char *const n[] = {"compute", "tp", "pp", "dp", "cp", "ep"};
  return (unsigned)s < PLAN_STREAM_COUNT ? n[s] : "?";
}
const char *plan_coll_name(plan_coll c) { return c == (plan_coll)TS_COLL_SENDRECV ? "?" : ts_coll_name((ts_coll)c); }
const char *plan_phase_name(plan_phase ph) {
  static const char *const n[] = {"fwd", "bwd", "recompute", "optimizer"};
  return (unsigned)ph < 4 ? n[ph] : "?";
}
const char *plan_traffic_name(plan_traffic t) {
  static const char *const n[] = {"tp_fwd", "tp_bwd", "pp", "dp", "ep", "cp"};
  return (unsigned)t < PLAN_TRAFFIC_COUNT ? n[t] : "?";
}
const char *plan_group_name(plan_group_kind g) {
  static const char *const n[] = {"tp", "dp", "pp", "embedding", "ep", "etp", "edp", "cp", "ep_rail", "ep_node"};
  return (unsigned)g < PLAN_GROUP_COUNT ? n[g] : "?";
}
const char *plan_codec_kind_name(plan_codec_kind k) { return ts_codec_name((ts_codec)k); }
const char *plan_recompute_name(model_recompute r) {
  static const char *const n[] = {"none", "selective", "full"};
  return (unsigned)r < 3 ? n[r] : "?";
}
const char *plan_schedule_name(plan_schedule s) {
  static const char *const n[] = {"gpipe", "1f1b", "interleaved-1f1b"};
  return (unsigned)s < 3 ? n[s] : "?";
}

const char *plan_attention_backend_name(plan_attention_backend b) {
  static const char *const n[] = {"fused", "unfused", "flash", "executor"}; /* plan_load.c's order */
  return (unsigned)b < 4 ? n[b] : "?";
}

static const char *special_name(int model_op) {
  switch (model_op) {
  case PLAN_MOP_EMBEDDING: return "embedding";
  case PLAN_MOP_LOSS: return "loss";
  case PLAN_MOP_OPTIMIZER: return "optimizer";
  case PLAN_MOP_FINAL_NORM: return "final_norm";
  case PLAN_MOP_NORM_GRADS: return "norm_grads";
  case PLAN_MOP_GRAD_BUCKET: return "grad_bucket";
  case PLAN_MOP_PARAM_GATHER: return "param_gather";
  case PLAN_MOP_EMBEDDING_GRADS: return "embedding_grads";
  case PLAN_MOP_PP_ACTIVATION: return "activation";
  case PLAN_MOP_MOE_IMBALANCE: return "moe_imbalance";
  case PLAN_MOP_EXPERT_GRADS: return "expert_grads";
  case PLAN_MOP_EXPERT_GATHER: return "expert_gather";
  case PLAN_MOP_MOE_TOKENS: return "moe_tokens";
  case PLAN_MOP_FP8_CAST: return "fp8_cast";
  case PLAN_MOP_MLA_KV_SCATTER: return "kv_scatter";
  default: return "op";
  }
}

void plan_op_name(const plan *p, const plan_op *op, char *buf, size_t cap) {
  if (!cap) return;
  char what[48];
  const int layer_op = op->model_op == PLAN_MOP_FP8_CAST ? plan_fp8_cast_gemm(op->tag) : op->model_op;
  if (layer_op >= 0) {
    model_shard s = {.tp = p->tp, .sequence_parallel = p->sequence_parallel, .micro_batch = p->micro_batch,
                     .seq = p->seq, .no_hidden_dropout = !(p->hidden_dropout > 0)};
    model_op ops[MODEL_MAX_LAYER_OPS];
    ts_err e;
    int n = model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
    if (layer_op < n)
      snprintf(what, sizeof what, "%s", ops[layer_op].name);
    else
      snprintf(what, sizeof what, "op%d", layer_op);
    if (op->model_op == PLAN_MOP_FP8_CAST) { /* "fc1.fp8_cast_input" */
      static const char *const tensors[] = {"input", "grad", "weight", "?"};
      size_t u = strlen(what);
      snprintf(what + u, sizeof what - u, ".fp8_cast_%s", tensors[plan_fp8_cast_what(op->tag) & 3]);
    }
  } else {
    snprintf(what, sizeof what, "%s", special_name(op->model_op));
  }
  size_t used = 0;
#define PUT(...)                                                                   \
  do {                                                                             \
    if (used < cap) used += (size_t)snprintf(buf + used, cap - used, __VA_ARGS__); \
  } while (0)
  if (op->layer >= 0) PUT("layer%d.", op->layer);
  if (p->vpp > 1 || op->model_op == PLAN_MOP_GRAD_BUCKET || op->model_op == PLAN_MOP_PARAM_GATHER)
    PUT("chunk%d.", op->chunk);
  if (op->micro >= 0) PUT("mb%d.", op->micro);
  if (op->phase == PLAN_PHASE_OPTIMIZER && op->model_op == PLAN_MOP_OPTIMIZER)
    PUT("%s", what);
  else
    PUT("%s.%s", plan_phase_name((plan_phase)op->phase), what);
  if (op->model_op == PLAN_MOP_GRAD_BUCKET || op->model_op == PLAN_MOP_PARAM_GATHER) PUT("%d", op->tag);
  if (op->row_chunks > 1) PUT(".rows%dof%d", op->row_chunk + 1, op->row_chunks); /* tp_overlap_chunks */
  switch ((plan_op_kind)op->kind) {
  case PLAN_OP_COMPUTE:
    if (op->part == PLAN_PART_DGRAD) PUT(".dgrad");
    if (op->part == PLAN_PART_WGRAD) PUT(".wgrad");
    break;
  case PLAN_OP_COLLECTIVE:
    PUT(".%s", plan_coll_name((plan_coll)op->coll));
    if (op->group != PLAN_GROUP_TP) PUT(".%s", plan_group_name((plan_group_kind)op->group));
    break;
  case PLAN_OP_SEND: PUT(".send.to%d", op->peer); break;
  case PLAN_OP_RECV: PUT(".recv.from%d", op->peer); break;
  }
#undef PUT
}

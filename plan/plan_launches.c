/* plan_launches.c — what the host issues for each compute op: kernel
 * launches, cuBLASLt GEMM calls, and whether it then waits for the GPU.
 * The simulator's host clock (sim/README.md) prices them; without it they
 * change nothing.
 *
 * The counts are the executor's (tacorun execute), read from its code:
 *   GEMM op (runtime/exec/exec_layer.c): forward one GEMM; backward one per
 *     half (dgrad, wgrad), two for a whole backward; the router's input
 *     gradient adds one kernel (exec_moe.c router_dgrad: the add into ln2's
 *     gradient, or a copy);
 *   routed-expert GEMM op (exec_moe.c experts()): one GEMM per local expert
 *     (model_op.groups; the executor skips an expert that received no row,
 *     which random routing over these token counts leaves none);
 *   attention (runtime/ops/exec_flash.cu): forward one kernel, backward three
 *     (the dO.O row sums, the dK/dV and dQ kernel, the dQ store);
 *   norm: forward one, backward two (input and weight gradients);
 *   element-wise (activation, RoPE, residual add), top-k, un-permute: one
 *     each way; the residual adds' backward passes the gradient on (none);
 *     the sigmoid router's top-k forward two (exec_moe.c topk_group_fwd:
 *     the scores, then the group-limited choice);
 *   permute forward (exec_moe.c permute_fwd): the row map (count, scan,
 *     positions: three kernels), the copy of the rows per expert to the host
 *     (one), then the permutation (one) — and the host waits for the copy
 *     (host_sync), as Megatron-Core's dropless dispatcher waits for its
 *     token counts; backward one;
 *   embedding one each way; final norm as a norm; loss forward the logits
 *     GEMM and two kernels (cross-entropy, the loss sum), backward one GEMM
 *     per half and a memset on the input-gradient half; optimizer one
 *     (AdamW over the shard), and with DeepSeek-V3's balancing bias two more
 *     (exec_moe_bias_update: the loads' copy to the GPU, the update kernel;
 *     at DP > 1 their all-reduce of layers x experts int32, not counted);
 *     the MoE imbalance wait none (no kernel: the
 *     busiest rank's work);
 *   and every op the executor walks from the program (exec_walk.c) is framed
 *   by two event records on its stream (ready, done: the cross-stream
 *   dependencies and the per-op profile), queued by the host like a launch:
 *   PLAN_WALK_EVENTS of them (plan_op.events), priced by the calibration's
 *   event_us when it has one, else as a kernel launch (sim/README.md "The
 *   host").
 * The executor's other waits for the GPU are not in the program: after each
 * iteration it reads the loss and the NaN/Inf counters
 * (exec_model_check_finite), outside the timed window, and its set-up. */
#include <string.h>

#include "plan.h"

#define PLAN_WALK_EVENTS 2

static void set(plan_op *op, int kernels, int gemms, int sync) {
  op->events = PLAN_WALK_EVENTS;
  op->launches = (uint16_t)(kernels > 0x7ff ? 0x7ff : kernels);
  op->gemm_launches = (uint16_t)(gemms > 0x7ff ? 0x7ff : gemms);
  op->host_sync = (uint16_t)(sync != 0);
}

/* GEMM calls of one pass of a GEMM op: its groups (routed experts) or one. */
static int gemms_of(const model_op *m) { return m->groups > 1 ? m->groups : 1; }

static void set_layer_op(const plan *p, const model_op *m, plan_op *op) {
  const int bwd = op->phase == PLAN_PHASE_BWD;
  const int halves = bwd && op->part == PLAN_PART_WHOLE ? 2 : 1;
  switch (m->kind) {
  case MODEL_OP_GEMM: {
    int extra = bwd && op->part != PLAN_PART_WGRAD && !strcmp(m->name, "router");
    set(op, extra, gemms_of(m) * halves, 0);
    return;
  }
  case MODEL_OP_ATTENTION: set(op, bwd ? 3 : 1, 0, 0); return;
  case MODEL_OP_NORM: set(op, bwd ? 2 : 1, 0, 0); return;
  default: break;
  }
  if (!strcmp(m->name, "permute")) {
    set(op, bwd ? 1 : 5, 0, !bwd);
    return;
  }
  if (bwd && strstr(m->name, "residual")) {
    set(op, 0, 0, 0);
    return;
  }
  set(op, !bwd && p->model.router == MODEL_ROUTER_SIGMOID && !strcmp(m->name, "router_topk") ? 2 : 1, 0, 0);
}

void plan_op_set_launches(const plan *p, const model_op *ops, int n, plan_op *op) {
  const int bwd = op->phase == PLAN_PHASE_BWD;
  if (op->model_op >= 0 && op->model_op < n) {
    set_layer_op(p, &ops[op->model_op], op);
    return;
  }
  switch (op->model_op) {
  case PLAN_MOP_EMBEDDING: set(op, 1, 0, 0); return;
  case PLAN_MOP_FINAL_NORM: set(op, bwd ? 2 : 1, 0, 0); return;
  case PLAN_MOP_LOSS:
    if (!bwd) set(op, 2, 1, 0);
    else set(op, op->part == PLAN_PART_DGRAD ? 1 : 0, op->part == PLAN_PART_WHOLE ? 2 : 1, 0);
    return;
  case PLAN_MOP_OPTIMIZER: set(op, model_is_moe(&p->model) && p->model.router_expert_bias ? 3 : 1, 0, 0); return;
  case PLAN_MOP_FP8_CAST: set(op, 1, 0, 0); return; /* (current scaling's amax kernel: counted in the cast's bytes) */
  case PLAN_MOP_MLA_KV_SCATTER: set(op, 1, 0, 0); return; /* rt_mla_kv_scatter, or rt_mla_kv_gather backward */
  default: /* the MoE imbalance wait: no kernel and no op of the executor's (it runs EP 1 only) */
    op->launches = op->gemm_launches = 0, op->events = 0, op->host_sync = 0;
    return;
  }
}

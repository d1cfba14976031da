/* plan_mla.c — multi-head latent attention's layout op (see plan.h, PLAN_MOP_MLA_KV_SCATTER).
 *
 * kv_b's GEMM writes each token's heads as [k_nope | v] (heads x (qk_nope + v_head) columns); attention
 * reads Q and K of qk_nope + qk_rope columns a head and V of v_head. The executor copies each head's k_nope
 * and v into their places in the attention's input (rt_mla_kv_scatter, runtime/ops/rt_mla.cu) and, in the
 * backward, their gradients back (rt_mla_kv_gather, the same kernel with the copy reversed) before kv_b's
 * dgrad and wgrad; the shared rope key's broadcast into every key head is the rope op's (model_layer.c).
 * The program has the copy as an op of its own after kv_b's forward and before its backward, priced by its
 * bytes as the other memory-bound kernels (sim_costs.c). Every MLA training plan has it: the executor runs
 * it whatever the plan's attention backend names (it runs its own attention for all of them). */
#include <string.h>

#include "plan.h"

bool plan_mla_kv_scatter_after(const plan *p, const model_op *o) {
  return p->model.attention == MODEL_ATTN_MLA && o->kind == MODEL_OP_GEMM && strcmp(o->name, "kv_b") == 0;
}

double plan_mla_kv_scatter_bytes(const plan *p) {
  const model_config *m = &p->model;
  const double tokens = (double)p->micro_batch * (double)plan_local_seq(p);
  const double elems = tokens * (double)(m->heads / p->tp) * (double)(m->qk_nope_head_dim + m->v_head_dim);
  return 2.0 * 2.0 * elems; /* BF16: read once, written once */
}

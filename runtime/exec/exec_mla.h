/* exec_mla.h — multi-head latent attention's layer ops in the executor
 * (DeepSeek-V2/V3; model attention "mla"; the float64 reference's
 * exec_ref_mla.c): q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b and rope, as
 * model.h's layer lays them out, forward and backward, at TP 1. q_b writes the
 * queries straight into qkv's query columns; kv_b's output goes to a scratch
 * buffer, from which the program's kv_scatter op (plan.h, PLAN_MOP_MLA_KV_SCATTER)
 * copies it into the key-nope and value columns (rt_mla_kv_scatter); rope
 * rotates the query heads' rope parts and writes the shared rope key, rotated
 * once, into every key head (rt_mla_rope_fwd; its backward sums the key heads'
 * gradients). The attention then runs on qkv with head_dim nope + rope and
 * values of v_head (exec_core.h: the unfused path). Internal to runtime/exec. */
#ifndef EXEC_MLA_H
#define EXEC_MLA_H

#include <stddef.h>

#include "exec_model.h"

/* Working buffers shared by every layer (bf16; T tokens). */
struct exec_mla_scratch {
  void *kvb;     /* [T x heads (nope + v)]: kv_b's output (forward), its gradient (backward) */
  void *ckv;     /* [T x kv_lora]: c_kv copied out of kva, the latent norm's input (forward and backward) */
  void *dkva;    /* [T x (kv_lora + rope)]: the gradient of kv_a's output */
  void *dlat;    /* [T x max(q_lora, kv_lora)]: a latent norm's output gradient (dckvn, then dcqn) */
  void *dlat_in; /* the same size: its input gradient (dckv, then dcq) */
  void *dx_tmp;  /* the same size: exec_norm_bwd's scratch */
};

/* 1 when the model has MLA and layer op `op` is one of its own (q_a .. kv_b, and rope). */
int exec_mla_op(const exec_model *m, exec_layer_op op);
/* Allocates the scratch of a model with MLA (nothing otherwise; *allocated grows by what it takes) and
 * refuses what the executor's MLA does not run (TP > 1 is refused by the model's creation; learned
 * positions: NOT IMPLEMENTED). */
int exec_mla_create(exec_model *m, size_t *allocated, ts_err *e);
void exec_mla_destroy(exec_model *m);
/* Forward and backward of layer op `op` of layer l (exec_mla_op); part: PLAN_PART_WHOLE, or the dgrad /
 * wgrad half of a GEMM. The backward's input is m->dqkv (the attention's gradient of qkv); kv_a's dgrad
 * writes the gradient of the layer's normed input n1 into m->dtmp, q_a's adds to it. */
int exec_mla_fwd(exec_model *m, exec_layer_op op, int l, ts_err *e);
int exec_mla_bwd(exec_model *m, exec_layer_op op, int l, int part, ts_err *e);
/* The program's kv_scatter op of layer l (after kv_b's forward, before its backward): kv_b's output
 * (scratch kvb) into qkv's key-nope and value columns (backward 0), or their gradients in m->dqkv back into
 * kvb (backward 1), which kv_b's dgrad and wgrad then read. */
int exec_mla_kv_copy(exec_model *m, int l, int backward, ts_err *e);

#endif

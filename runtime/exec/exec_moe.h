/* exec_moe.h — the mixture-of-experts layer ops of the executor (exec_moe.c),
 * at EP = 1 on one GPU or EP (2 .. 8, dividing DP) over the DP ranks: router GEMM (FP32 logits), top-k with the softmax over
 * the chosen logits (or DeepSeek-V3's sigmoid, group-limited, biased, scaled top-k: moe_route_group.h), permutation into expert order, the experts' FFN GEMMs
 * as a loop of cuBLASLt GEMMs over the experts that received rows (what the
 * calibration's gemm_grouped tables time), un-permutation with the weighted
 * combine, the shared FFN; and their backward. The routing kernels are
 * kernels/moe_route.h's. Internal to runtime/exec. */
#ifndef EXEC_MOE_H
#define EXEC_MOE_H

#include <stdint.h>

#include "exec_model.h"

/* What an MoE layer keeps per micro-batch slot (T tokens, k copies each). */
struct exec_moe_acts {
  int32_t *idx, *pos, *count; /* device: [T k] chosen experts, their rows in expert order, [E] rows per expert */
  float *w;                   /* device [T k]: the copies' weights */
  float *sel;                 /* device [T k]: the chosen experts' sigmoid scores (DeepSeek-V3's router) */
  int32_t *hcount;            /* host copy of count (the expert GEMMs' row counts) */
  void *xp, *eu, *ea, *ey;    /* bf16 [T k x h] permuted input, [T k x U] fc1 out, [T k x fe] act, [T k x h] out */
  /* The expert side: the rows this rank's experts take, R of them (at EP 1 the
   * permuted rows themselves: xe = xp, ye = ey; at EP > 1 those received by the
   * dispatch all-to-all, exec_moe_ep.c; eu and ea hold ep x T k rows then). */
  void *xe, *ye;                /* bf16 [R x h] expert input and output */
  long long erows;              /* R */
  int nseg;                     /* the expert GEMMs' row segments, in expert-side order (host) */
  int32_t *seg_ex;              /* [E x ep] each segment's expert */
  long long *seg_cnt;           /* [E x ep] its rows */
  long long *scnt, *rcnt;       /* [ep] rows sent to / received from each EP rank (host) */
  long long *soff, *roff;       /* [ep] where those runs start: in xp (by destination), on the expert side (by source) */
  int ep_fwd, ep_bwd;           /* the phase's next token all-to-all: 0 the dispatch, 1 the combine */
};

/* Working buffers shared by every MoE layer. */
struct exec_moe_scratch {
  float *logits, *dw;                   /* [T x E] router logits (FP32), [T k] the weights' gradient */
  int32_t *map;                         /* moe_map's scratch, E + 1 */
  void *dy, *dea, *deu, *dxp, *dlogits, *dn2; /* bf16 gradients: [Tk x h], [R x fe], [R x U], [Tk x h], [T x E], [T x h] */
  void *dye, *dxe;                      /* the expert side's [R x h] output and input gradients (= dy, dxp at EP 1) */
  int32_t *allcount, *hall;             /* [ep x E] every EP rank's rows per expert: device, host */
  void *enc_send, *enc_recv;            /* TACO all-to-all: the encoded blocks, one slot per peer (at first use) */
  /* DeepSeek-V3's balancing bias (cfg.router_bias_rate > 0): [layers x E] each (dense layers' rows unused) */
  float *bias;                          /* device: the bias added to the scores for the choice */
  long long *load;                      /* host: tokens routed to each expert since the last update (this rank's) */
  int32_t *load32, *dload;              /* pinned host staging and device copy of load at the update (DP-summed) */
};

/* Allocates the MoE buffers of the model's MoE layers (none for a dense model);
 * refuses what the executor's MoE does not run (TP, PP > 1, recomputation). */
int exec_moe_create(exec_model *m, ts_err *e);
void exec_moe_destroy(exec_model *m);
/* Forward and backward of MoE layer op `op` (EXEC_OP_ROUTER .. EXEC_OP_SHARED_FC2) of layer l;
 * part: PLAN_PART_WHOLE, or the dgrad / wgrad half of a GEMM. */
int exec_moe_fwd(exec_model *m, exec_layer_op op, int l, ts_err *e);
int exec_moe_bwd(exec_model *m, exec_layer_op op, int l, int part, ts_err *e);
/* DeepSeek-V3's aux-loss-free balancing after the optimizer step (Megatron-Core's
 * _update_router_expert_bias): each MoE layer's loads since the last update,
 * summed over the DP ranks (an all-reduce on the DP communicator), move its
 * bias by rate x sign(mean - load) (moe_route_group.h); the loads restart
 * from 0. Nothing without the bias. */
int exec_moe_bias_update(exec_model *m, ts_err *e);
/* The bias [layers x E] (rows of dense layers ignored): set from float64 values
 * (rounded to float), read back; and the loads counted since the last update. */
int exec_moe_bias_set(exec_model *m, const double *bias, ts_err *e);
int exec_moe_bias_get(exec_model *m, float *bias, ts_err *e);
void exec_moe_loads(const exec_model *m, long long *load);
/* The experts each token of the current slot's micro-batch went to in each MoE layer's last forward, read
 * back into choice [layers x tokens x top_k] (a dense layer's rows -1; EP > 1: this rank's tokens). */
int exec_moe_choice_get(exec_model *m, int *choice, ts_err *e);
/* EP > 1 (exec_moe_ep.c): the program's token all-to-all `op` (PLAN_MOP_MOE_TOKENS
 * over the EP group): in each phase the layer's first is the dispatch, its
 * second the combine. The EP group: ep consecutive DP ranks (tp = pp = 1). */
int exec_moe_tokens(exec_model *m, const plan_op *op, ts_err *e);
/* EP < DP: the program's expert-DP reduction `op` (PLAN_MOP_EXPERT_GRADS, tag =
 * layer): the layer's expert gradients all-reduced over expert-DP, on the DP
 * stream after what the compute stream has enqueued. */
int exec_moe_expert_grads(exec_model *m, const plan_op *op, ts_err *e);

#endif

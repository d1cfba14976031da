/* exec_model_internal.h — what the executor's files share inside the module
 * (exec_model.c: the model's memory and parameters; exec_layer.c: the compute
 * of each op; exec_step.c: running program ops, collectives, the built-in
 * program). Not for other modules. */
#ifndef EXEC_MODEL_INTERNAL_H
#define EXEC_MODEL_INTERNAL_H

#include "exec_model.h"
#include "gpu_check.h"

#define EX_CUDA(call) CUDA_CHECK(e, call)
#define EX_NCCL(call) NCCL_CHECK(e, call)
#define EX_TRY(call)                                                                                         \
  do {                                                                                                       \
    if ((call) != 0) return -1;                                                                              \
  } while (0)

/* parameters (exec_model.c) */
int exec_layer_tensor(const exec_model *m, int layer, exec_tensor_kind kind);
int exec_final_norm_tensor(const exec_model *m, int bias);
void *exec_w16_of(const exec_model *m, int t);
float *exec_grad_of(const exec_model *m, int t);
int exec_uses_caat(const exec_model *m);
coll_opts exec_codec_opts(const plan_codec *c);
/* Waits for stream s (cudaStreamSynchronize), bounded by m->wait_timeout_s and
 * polling the asynchronous errors of the model's communicators, so a dead
 * peer ends in a named error, not a hang. */
int exec_stream_wait(exec_model *m, cudaStream_t s, ts_err *e);
/* Marks the NaN/Inf counters of the compressed calls unused and clears them (exec_model.c). */
int exec_nf_reset(exec_model *m, ts_err *e);

/* compute of each op (exec_layer.c); all enqueue on m->stream */
int exec_flush_wgrad(exec_model *m, ts_err *e); /* runs a deferred weight-gradient GEMM */
int exec_tp_allreduce_plain(exec_model *m, void *buf, size_t count, ncclDataType_t type, ncclRedOp_t op, ts_err *e);
int exec_layer_fwd(exec_model *m, exec_layer_op op, int l, ts_err *e);
/* Rows [row0, row0 + rows) of a row-parallel GEMM's forward (tp_overlap_chunks), on
 * sm_count SMs (0: all; exec_gemm_shape.sm_count). */
int exec_layer_fwd_rows(exec_model *m, exec_layer_op op, int l, long long row0, long long rows, int sm_count,
                        ts_err *e);
int exec_layer_bwd(exec_model *m, exec_layer_op op, int l, int part, ts_err *e);
int exec_final_norm_fwd(exec_model *m, ts_err *e);
int exec_final_norm_bwd(exec_model *m, ts_err *e);
int exec_logits_loss_fwd(exec_model *m, int micro, ts_err *e);
int exec_loss_fwd(exec_model *m, int micro, ts_err *e); /* final norm + logits + loss */
int exec_logits_dgrad(exec_model *m, ts_err *e);
int exec_logits_wgrad(exec_model *m, ts_err *e);
int exec_loss_bwd(exec_model *m, ts_err *e); /* dgrad, its TP all-reduce || wgrad, final norm */
int exec_embedding_fwd(exec_model *m, int micro, ts_err *e);
int exec_embedding_bwd(exec_model *m, int micro, ts_err *e);
int exec_caat_sync_replicated(exec_model *m, cudaStream_t stream, ts_err *e);
int exec_sp_sync_norms(exec_model *m, cudaStream_t stream, ts_err *e); /* SP: sum norm-weight gradients over TP */
int exec_optimizer_step(exec_model *m, ts_err *e);

#endif

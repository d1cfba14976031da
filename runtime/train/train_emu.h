/* train_emu.h — tensor parallelism of k ranks emulated on one GPU for
 * `tacorun train --tp-emulate k` (issue 25). Each rank is a thread with its
 * own exec_model built for TP = k, rank r (its shards, its initial weights,
 * the GEMMs of its shapes: the row-parallel GEMMs are the k partial GEMMs over
 * slices of the inner dimension). Its TP communicator is a handle of this
 * module: the layer all-reduces come through exec_model's tp_allreduce_hook,
 * the executor's other TP all-reduces (embedding, vocabulary-parallel loss,
 * CAAT-Net's replicated gradients) through ncclAllReduce, which
 * train_emu_nccl.c intercepts for these handles only (NCCL's profiling
 * interface: every other communicator goes on to pncclAllReduce). Each
 * collective: every rank records its stream's readiness and meets the others
 * at a barrier; rank 0 runs the reduction on one stream with the kernels of
 * kernels/coll_emu.h (the real collective's codec kernels in its order); every
 * rank's stream waits for it. */
#ifndef TRAIN_EMU_H
#define TRAIN_EMU_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>

#include "coll_emu.h"
#include "exec_model.h"
#include "ts_error.h"

typedef struct train_emu train_emu;

/* The codec of the layer all-reduces (both directions). */
typedef struct {
  coll_emu_opts ar; /* the all-reduce (CAAT-Net: of the shared channels) */
  int caat;         /* CAAT-Net partial all-reduce with p */
  double p;
} train_emu_codec;

/* k ranks, layer messages of up to max_elems elements (tokens x hidden). */
int train_emu_create(train_emu **w, int k, size_t max_elems, ts_err *e);
void train_emu_destroy(train_emu *w);
/* The run's codec (call from one thread between runs, every rank waiting). */
void train_emu_set_codec(train_emu *w, const train_emu_codec *c);
ncclComm_t train_emu_comm(train_emu *w, int rank);
/* For exec_model.tp_allreduce_hook (ctx: train_emu_hook_ctx(w, rank)). */
int train_emu_hook(void *ctx, void *buf, size_t rows, size_t cols, int backward, cudaStream_t stream, ts_err *e);
void *train_emu_hook_ctx(train_emu *w, int rank);
/* NaN/Inf in the layer all-reduces' TACO encodes (the codec sends them as
 * zeros, so the loss may stay finite): rank 0 calls step_begin before a
 * training or evaluation step's ops and step_check after them. With inject,
 * rank 0's partial of the step's first layer all-reduce gets a NaN before it
 * is reduced (tacorun train --inject-nan). step_check fails naming the step,
 * the layer, the tensor and the count (the first call that met any); it
 * resets the counters. */
void train_emu_step_begin(train_emu *w, int step, int layers, int inject);
int train_emu_step_check(train_emu *w, ts_err *e);
/* The largest rc over the ranks (every rank calls it). */
int train_emu_agree(train_emu *w, int rank, int rc);
/* vals[i] = max over ranks (every rank calls it). */
void train_emu_max(train_emu *w, int rank, double *vals, int n);
/* CAAT-Net: the replicated tensors' gradients averaged over the ranks (what
 * exec_caat_sync_replicated does over NCCL), before the optimizer step. */
int train_emu_sync_replicated(train_emu *w, int rank, exec_model *m, ts_err *e);
/* Statistics of the tensors the layer all-reduces carry (rank 0's partial):
 * while out != NULL, each layer all-reduce appends a CSV row
 * step,layer,tensor,elements,rms,max_abs,max_over_rms,kurtosis to out.
 * Set by rank 0 around one training step. Layers/tensors follow the call order
 * (forward: attn_out then fc2 per layer; backward: fc1 then qkv, last layer first). */
void train_emu_stats(train_emu *w, FILE *out, int step, int layers);
/* At the statistics of training step `step`, also dump the first `rows` rows of
 * rank 0's partial of layers 0, L/2 and L-1 as FP32 files in dir, listed in
 * dir/dump-index.csv (file,step,layer,tensor,rows,cols), for the reshaping. */
int train_emu_dump(train_emu *w, const char *dir, int step, int rows, ts_err *e);

/* The emulated ncclAllReduce for this module's handles; 1 in *mine when the
 * communicator is one of them (else nothing is done). */
ncclResult_t train_emu_nccl_allreduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                                      ncclComm_t comm, cudaStream_t stream, int *mine);

/* Statistics of a BF16 buffer into 4 doubles of device memory: sum x, sum x^2,
 * sum x^4, max |x| (train_stats.cu). */
int train_stats_bf16(const void *x, size_t n, double *acc_dev, cudaStream_t stream);

#endif

/* train_fp8.h — the per-tensor FP8 all-reduce (kernels/fp8_plain.h) as the
 * executor's TP all-reduce (exec_model.h's tp_allreduce_hook): every rank
 * encodes its whole tensor with one absmax scale, the FP8 blocks are
 * all-gathered over the TP communicator, and every rank decodes and sums all
 * of them in rank order (the same bits on every rank). At TP = 2 each rank
 * sends n bytes, as the two-shot TACO all-reduce does (plus 16). */
#ifndef TRAIN_FP8_H
#define TRAIN_FP8_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "exec_model.h"
#include "ts_error.h"

typedef struct {
  ncclComm_t comm;
  int nranks;
  size_t cap_n;           /* elements the buffers hold */
  void *send, *recv;      /* one block; nranks blocks */
  unsigned *scratch;      /* the absmax */
} train_fp8;

/* Allocates for messages of up to cap_n elements and installs the hook on m. */
int train_fp8_attach(train_fp8 *f, exec_model *m, ts_err *e);
void train_fp8_free(train_fp8 *f);

/* GPU kernels against the plain-C reference, bit for bit, over sizes and
 * special cases; prints a table; 0 when all agree. */
int train_fp8_check(ts_err *e);

#endif

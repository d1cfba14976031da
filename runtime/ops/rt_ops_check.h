/* rt_ops_check.h — checking every CUDA, cuBLAS(Lt) and NCCL call with file:line.
 *
 * Each macro evaluates the call once; on failure it fills the ts_err `e` in
 * scope with "FILE:LINE: CALL: reason" and returns -1 from the enclosing
 * function (which must return int). After a kernel launch use
 * RT_CHECK_LAUNCH(e) so a bad launch configuration is caught where it
 * happened, not at the next synchronization. */
#ifndef RT_OPS_CHECK_H
#define RT_OPS_CHECK_H

#include <cuda_runtime_api.h>

#include "ts_error.h"
#include "gpu_check.h"

#define RT_CHECK_CUDA(e, call) CUDA_CHECK(e, call)

#define RT_CHECK_LAUNCH(e) RT_CHECK_CUDA(e, cudaGetLastError())

/* cuBLAS status codes are plain ints here so this header needs no cuBLAS include. */
#define RT_CHECK_CUBLAS(e, call) CUBLAS_CHECK(e, call)

/* NCCL: the file using it includes nccl.h (this header does not need it). */
#define RT_CHECK_NCCL(e, call) NCCL_CHECK(e, call)

/* Propagates a failure of one of our own functions that already filled e. */
#define RT_TRY(call)                                                                             \
  do {                                                                                           \
    if ((call) != 0) return -1;                                                                  \
  } while (0)

#endif

/* gpu_check.h — the one way a CUDA, cuBLAS(Lt) or NCCL call is checked.
 *
 * Modelled on NCCL's CUDACHECK / NCCLCHECKGOTO: the call is evaluated once;
 * when its status is not success, the failure statement runs. That statement
 * may read `gpu_s_` (the status) and is one of
 *   return ...;            the function gives up at once (nothing to free), or
 *   ...; goto fail;        resources are freed in reverse order at `fail:`.
 *
 *   GPU_CHECK(type, ok, call, on_fail)  the pattern itself, for any error sink
 *
 * With a ts_err *e (common/ts_error.h; the message is "FILE:LINE: CALL: why"):
 *   CUDA_CHECK(e, call)                 return -1 (ts_fail_sys) on failure
 *   CUDA_CHECK_GOTO(e, call, label)     fill e and goto label
 *   CUDA_CHECK_RC(e, rc, call, label)   fill e, rc = -1, goto label (a function returning rc)
 *   CUDA_CHECK_LAUNCH(e)                after a kernel launch (cudaGetLastError)
 *   CUDA_CHECK_EXIT(call)               a test program: print and exit(1)
 *   CUBLAS_CHECK(e, call), CUBLAS_CHECK_GOTO(e, call, label)
 *   NCCL_CHECK(e, call), NCCL_CHECK_GOTO(e, call, label)
 *
 * Other sinks (the kernels' coll_set_error and TACO_FAIL, a test's exit) use
 * GPU_CHECK with their own failure statement. Header only; it includes the
 * CUDA runtime API. cuBLAS statuses are compared as int so that this header
 * needs no cuBLAS include; NCCL's macros need nccl.h where they are used. */
#ifndef TS_GPU_CHECK_H
#define TS_GPU_CHECK_H

#include <cuda_runtime_api.h>

#define GPU_CHECK(type, ok, call, on_fail)                                                                     \
  do {                                                                                                         \
    type gpu_s_ = (type)(call);                                                                                \
    if (gpu_s_ != (ok)) {                                                                                      \
      on_fail;                                                                                                 \
    }                                                                                                          \
  } while (0)

#define GPU_FAIL_CUDA_(e, call)                                                                                \
  ts_fail_sys((e), "%s:%d: %s: %s", __FILE__, __LINE__, #call, cudaGetErrorString((cudaError_t)gpu_s_))
#define GPU_FAIL_CUBLAS_(e, call) ts_fail_sys((e), "%s:%d: %s: cuBLAS status %d", __FILE__, __LINE__, #call, gpu_s_)
#define GPU_FAIL_NCCL_(e, call)                                                                                \
  ts_fail_sys((e), "%s:%d: %s: %s", __FILE__, __LINE__, #call, ncclGetErrorString((ncclResult_t)gpu_s_))

#define CUDA_CHECK(e, call) GPU_CHECK(cudaError_t, cudaSuccess, call, return GPU_FAIL_CUDA_(e, call))
#define CUDA_CHECK_GOTO(e, call, label)                                                                        \
  GPU_CHECK(cudaError_t, cudaSuccess, call, GPU_FAIL_CUDA_(e, call); goto label)
#define CUDA_CHECK_RC(e, rc, call, label)                                                                      \
  GPU_CHECK(cudaError_t, cudaSuccess, call, (rc) = GPU_FAIL_CUDA_(e, call); goto label)
#define CUDA_CHECK_LAUNCH(e) CUDA_CHECK(e, cudaGetLastError())
/* A test program's sink: print "FILE:LINE: CALL: why" and exit(1) (stdio.h, stdlib.h included by the caller). */
#define CUDA_CHECK_EXIT(call)                                                                                  \
  GPU_CHECK(cudaError_t, cudaSuccess, call,                                                                    \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(gpu_s_)); exit(1))

#define CUBLAS_CHECK(e, call) GPU_CHECK(int, 0, call, return GPU_FAIL_CUBLAS_(e, call))
#define CUBLAS_CHECK_GOTO(e, call, label) GPU_CHECK(int, 0, call, GPU_FAIL_CUBLAS_(e, call); goto label)

#define NCCL_CHECK(e, call) GPU_CHECK(ncclResult_t, ncclSuccess, call, return GPU_FAIL_NCCL_(e, call))
#define NCCL_CHECK_GOTO(e, call, label)                                                                        \
  GPU_CHECK(ncclResult_t, ncclSuccess, call, GPU_FAIL_NCCL_(e, call); goto label)

#endif

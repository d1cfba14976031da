/* lt_handle.c — see lt_handle.h. */
#include "lt_handle.h"

#include <cuda_runtime_api.h>

int lt_handle_open(cublasLtHandle_t *handle, void **workspace, size_t bytes, const char *what, ts_err *e) {
  *handle = NULL, *workspace = NULL;
  int st = (int)cublasLtCreate(handle);
  if (st != 0) return ts_fail_sys(e, "%s: cublasLtCreate: cuBLAS status %d", what, st);
  cudaError_t ce = cudaMalloc(workspace, bytes);
  if (ce != cudaSuccess) {
    cublasLtDestroy(*handle);
    *handle = NULL, *workspace = NULL;
    return ts_fail_sys(e, "%s: cudaMalloc(cuBLASLt workspace, %zu bytes): %s", what, bytes, cudaGetErrorString(ce));
  }
  return 0;
}

void lt_handle_close(cublasLtHandle_t handle, void *workspace) {
  if (workspace) cudaFree(workspace);
  if (handle) cublasLtDestroy(handle);
}

/* lt_handle.c — see lt_handle.h. */
#include "lt_handle.h"

#include <cuda_runtime_api.h>
#include <stdint.h>

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

int lt_first_algo(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                  cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, size_t ws_bytes,
                  const unsigned align[4], cublasLtMatmulAlgo_t *algo, int *status) {
  static const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  cublasLtMatmulPreference_t pref;
  int st = (int)cublasLtMatmulPreferenceCreate(&pref);
  if (st != 0) {
    *status = st;
    return -1;
  }
  const uint64_t ws = ws_bytes;
  st = (int)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  for (int i = 0; i < 4 && st == 0; i++) {
    const uint32_t a = align[i];
    st = (int)cublasLtMatmulPreferenceSetAttribute(pref, which[i], &a, sizeof a);
  }
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  if (st == 0) st = (int)cublasLtMatmulAlgoGetHeuristic(handle, op, la, lb, lc, ld, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  *status = st;
  if (st != 0 || found < 1) return -1;
  *algo = result.algo;
  return 0;
}

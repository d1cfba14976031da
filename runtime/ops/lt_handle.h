/* lt_handle.h — what exec_gemm.c's BF16 GEMMs and exec_gemm_fp8.c's FP8 ones share about cuBLASLt: a
 * handle with its device workspace, opened and closed as one, and the heuristic's first algorithm for a
 * GEMM's descriptors under the operands' alignments. */
#ifndef LT_HANDLE_H
#define LT_HANDLE_H

#include <cublasLt.h>
#include <stddef.h>

#include "ts_error.h"

/* Creates the handle and a workspace of `bytes` on the current device; on failure nothing is left
 * allocated and e names `what` (the caller) and the call that failed. */
int lt_handle_open(cublasLtHandle_t *handle, void **workspace, size_t bytes, const char *what, ts_err *e);
/* Frees what lt_handle_open made, in reverse order. */
void lt_handle_close(cublasLtHandle_t handle, void *workspace);
/* The heuristic's first algorithm for op with A la, B lb, C lc and D ld (cuBLASLt's operand order), a
 * workspace of at most ws_bytes and the given minimum alignments (bytes) of the four buffers: 0 and *algo,
 * or -1 with *status the cuBLAS status (0 when the heuristic returned no algorithm); the caller names the
 * shape in its error. */
int lt_first_algo(cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                  cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld, size_t ws_bytes,
                  const unsigned align[4], cublasLtMatmulAlgo_t *algo, int *status);

#endif

/* lt_handle.h — a cuBLASLt handle with its device workspace, opened and closed as one (exec_gemm.c's
 * BF16 GEMMs and exec_gemm_fp8.c's FP8 ones each keep one). */
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

#endif

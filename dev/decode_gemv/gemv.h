/* gemv.h — a weight-streaming GEMV for the decode projections (batch 1..8
 * rows), written to read the weights at the HBM rate where cuBLASLt's
 * tensor-core GEMM pads the batch to a tile. It lost: cuBLASLt was faster at
 * every decode shape measured (README.md), so the runtime does not carry it.
 *
 * Layouts are the executor's (BF16, row-major):
 *   NN:  Y[m x n] = X[m x k] . W[k x n]      the layer projections (qkv, attn_out, fc1, fc2)
 *   NT:  Y[m x n] = X[m x k] . W[n x k]^T    the output layer (logits)
 * Every function launches on `stream` (a cudaStream_t) and returns 0 or -1 with e. */
#ifndef DEV_GEMV_H
#define DEV_GEMV_H

#include <stddef.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEV_GEMV_MAX_M 8 /* rows (sequences) the GEMV takes */

/* Whether the GEMV runs this shape (m <= DEV_GEMV_MAX_M, n and k multiples of 8). */
int dev_gemv_supported(long long m, long long n, long long k);
/* NN: k is split over blocks, partial sums added in FP32 into `ws` (m x n
 * floats, all zero on entry; the kernel that writes Y leaves it zero again:
 * allocate it once with dev_gemv_ws_bytes and clear it once). */
size_t dev_gemv_ws_bytes(long long m, long long n);
int dev_gemv_nn(const void *X, const void *W, void *Y, float *ws, int m, long long n, long long k, void *stream,
                ts_err *e);
/* NT: one warp per output column (a row of W), no workspace. */
int dev_gemv_nt(const void *X, const void *W, void *Y, int m, long long n, long long k, void *stream, ts_err *e);

/* The plain-C reference (gemv_ref.c): y (m x n, float64) from BF16 X and W. */
void dev_gemv_ref(int nt, int m, long long n, long long k, const unsigned short *X, const unsigned short *W, double *y);

#ifdef __cplusplus
}
#endif
#endif

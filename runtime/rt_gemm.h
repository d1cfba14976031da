/* rt_gemm.h — BF16 matrix products through cuBLASLt, for calibration and the executor.
 *
 * All matrices are row-major. rt_gemm_bf16 computes
 *     C[m x n] = alpha * op(A) . op(B) + beta * C
 * with op(A) of shape m x k (A stored k x m when trans_a) and op(B) of shape
 * k x n (B stored n x k when trans_b), BF16 inputs and output, FP32
 * accumulation. The Megatron-style linear layer with weight W stored
 * [out x in] is:
 *     forward  Y[m x n]  = X[m x k] . W^T      trans_b = 1
 *     dgrad    dX[m x k] = dY[m x n] . W       (shape m, k, n)
 *     wgrad    dW[n x k] = dY^T . X            trans_a = 1 (shape n, k, m)
 *
 * One rt_gemm per device holds the cuBLASLt handle, a workspace and a cache
 * of the heuristic's algorithm per shape, so the heuristic runs once per
 * shape. Not thread-safe: one per thread/device. */
#ifndef RT_GEMM_H
#define RT_GEMM_H

#include <stddef.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rt_gemm rt_gemm;

/* workspace_bytes 0: 32 MiB (what cuBLAS recommends on Hopper). */
int rt_gemm_create(rt_gemm **out, size_t workspace_bytes, ts_err *e);
void rt_gemm_destroy(rt_gemm *g);

/* stream is a cudaStream_t. */
int rt_gemm_bf16(rt_gemm *g, int trans_a, int trans_b, long long m, long long n, long long k,
                 float alpha, const void *A, const void *B, float beta, void *C, void *stream, ts_err *e);

/* `batch` independent products, matrix i at base + i * stride (in elements). */
int rt_gemm_bf16_batched(rt_gemm *g, int trans_a, int trans_b, long long m, long long n, long long k,
                         long long batch, float alpha, const void *A, long long stride_a, const void *B,
                         long long stride_b, float beta, void *C, long long stride_c, void *stream,
                         ts_err *e);

/* Shapes whose algorithm is cached (for progress messages and tests). */
int rt_gemm_cached_shapes(const rt_gemm *g);

#ifdef __cplusplus
}
#endif
#endif

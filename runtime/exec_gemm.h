/* exec_gemm.h — the executor's cuBLASLt GEMM: row-major BF16 operands with any
 * leading dimension (attention reads Q, K, V in place inside the qkv tensor)
 * and a BF16 or FP32 result (weight gradients accumulate in FP32, beta = 1,
 * the way Megatron-LM fuses gradient accumulation). rt_gemm.h covers packed
 * BF16-only products; this adds the two features the executor needs.
 *
 *   C[m x n] = alpha * op(A) . op(B) + beta * C,  op(A) m x k, op(B) k x n,
 *   A stored [m x k] (or [k x m] when trans_a) with row stride lda, etc.
 * Batched: matrix i of each operand at base + i * stride (elements). */
#ifndef EXEC_GEMM_H
#define EXEC_GEMM_H

#include "ts_error.h"

typedef struct exec_gemm exec_gemm;

typedef struct {
  int trans_a, trans_b;
  long long m, n, k;
  long long lda, ldb, ldc;
  long long batch, stride_a, stride_b, stride_c; /* batch 1: strides ignored */
  int c_fp32;                                    /* C is float, else bf16 */
} exec_gemm_shape;

int exec_gemm_create(exec_gemm **out, ts_err *e);
void exec_gemm_destroy(exec_gemm *g);
/* stream: a cudaStream_t. */
int exec_gemm_run(exec_gemm *g, const exec_gemm_shape *s, float alpha, const void *A, const void *B, float beta,
                  void *C, void *stream, ts_err *e);

#endif

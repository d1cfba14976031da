/* exec_gemm.h — the executor's cuBLASLt GEMM: row-major BF16 operands with any
 * leading dimension (attention reads Q, K, V in place inside the qkv tensor)
 * and a BF16 or FP32 result (weight gradients accumulate in FP32, beta = 1,
 * the way Megatron-LM fuses gradient accumulation). It is the project's only GEMM path:
 * the executor and `tacorun calibrate` both run their products through it.
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
  int sm_count; /* > 0: cuBLASLt picks a kernel for this many SMs (CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET),
                 * leaving the others to a collective beside it; 0: the whole GPU */
  int rows_vary; /* 1: m or k follows the data (the MoE expert GEMMs' rows follow the routing): a new shape may
                  * reuse a cached algorithm (--variant gemm-algo, exec_gemm.c); 0: the heuristic picks it */
} exec_gemm_shape;

/* The executor's packed products, one layout per use. `tacorun calibrate`
 * times its GEMM table through these same layouts and output types, so the
 * table holds what the executor runs (a linear layer's weight is stored
 * [in x out], the vocabulary embedding [vocab x hidden]):
 *   EXEC_GEMM_NN      C[m x n]  = A[m x k] . B[k x n]     linear forward; logits input gradient
 *   EXEC_GEMM_NT      C[m x n]  = A[m x k] . B[n x k]^T   linear input gradient; logits forward
 *   EXEC_GEMM_TN_ACC  C[m x n] += A[k x m]^T . B[k x n]   weight gradients, C in FP32 (beta 1) */
typedef enum { EXEC_GEMM_NN, EXEC_GEMM_NT, EXEC_GEMM_TN_ACC } exec_gemm_layout;

exec_gemm_shape exec_gemm_packed(exec_gemm_layout layout, long long m, long long n, long long k);
/* The beta each layout runs with (1 where it accumulates). */
float exec_gemm_packed_beta(exec_gemm_layout layout);

/* Plans (descriptors and algorithm) built for new shapes since creation, the
 * heuristic queries among them, those that reused a cached algorithm
 * (--variant gemm-algo=bucket, ops_variants.h), and the host time spent;
 * every call and its host time (the cache lookup, a plan, the enqueue). */
typedef struct {
  long long plans, heuristics, reused;
  double plan_s;
  long long calls;
  double call_s;
} exec_gemm_stats;

int exec_gemm_create(exec_gemm **out, ts_err *e);
void exec_gemm_destroy(exec_gemm *g);
exec_gemm_stats exec_gemm_get_stats(const exec_gemm *g);
/* stream: a cudaStream_t. */
int exec_gemm_run(exec_gemm *g, const exec_gemm_shape *s, float alpha, const void *A, const void *B, float beta,
                  void *C, void *stream, ts_err *e);

#endif

/* exec_gemm_fp8.h — a cuBLASLt FP8 GEMM beside exec_gemm.h's BF16 one: E4M3 operands scaled per tensor,
 * FP32 accumulation, a BF16 result, as Transformer Engine runs a linear layer's GEMMs under FP8 training.
 *
 *   D[m x n] = (*a_scale) (*b_scale) . A[m x k] . B[n x k]^T
 *
 * A and B are row-major E4M3 codes with leading dimension k; D is row-major BF16 with leading dimension n;
 * a_scale and b_scale are device pointers to one float each, each 16-byte aligned (cuBLASLt 13.1 refuses a
 * scale 4 bytes past an aligned one with status 15, NOT_SUPPORTED, at the call: measured on an H100; callers
 * keep them EXEC_GEMM_FP8_SCALE_STRIDE floats apart), the dequantization scales (Transformer
 * Engine's scale_inv: the code times the scale is the value). This is the one layout Hopper's FP8 tensor
 * cores take (cuBLASLt's "TN": both operands contiguous along k), so Transformer Engine runs every FP8
 * GEMM this way, on FP8 copies of X, W and dY kept in both orientations: the forward, the data gradient
 * and the weight gradient are each such a product of two k-contiguous operands.
 *
 * cuBLASLt's FP8 kernels need n and k multiples of 16 and the three buffers 16-byte aligned; m is free.
 * A shape or buffer outside that is refused with an error naming the requirement. Descriptors and the
 * heuristic's algorithm are cached per (shape, accumulation, alignments), so timed calls never query the
 * heuristic. `tacorun calibrate --only gemm_fp8` times it ("gemm_fp8", runtime/calibrate/calibrate_fp8.c)
 * and checks it against a plain-C reference first (calib_gemm_fp8_check). */
#ifndef EXEC_GEMM_FP8_H
#define EXEC_GEMM_FP8_H

#include "ts_error.h"

typedef struct exec_gemm_fp8 exec_gemm_fp8;

typedef struct {
  long long m, n, k;
  /* 1: CUBLASLT_MATMUL_DESC_FAST_ACCUM, the tensor cores' partial sums not promoted to FP32 along k
   * (Transformer Engine's forward GEMMs: its recipes' fp8_gemm_fprop use_split_accumulator=False);
   * 0: promoted (its data- and weight-gradient GEMMs, use_split_accumulator=True) */
  int fast_accum;
} exec_gemm_fp8_shape;

int exec_gemm_fp8_create(exec_gemm_fp8 **out, ts_err *e);
void exec_gemm_fp8_destroy(exec_gemm_fp8 *g);
/* stream: a cudaStream_t (NULL: the default stream). */
/* Floats between two scales kept in one allocation (256 bytes: each stays as aligned as the allocation). */
#define EXEC_GEMM_FP8_SCALE_STRIDE 64

int exec_gemm_fp8_run(exec_gemm_fp8 *g, const exec_gemm_fp8_shape *s, const void *A, const float *a_scale,
                      const void *B, const float *b_scale, void *D, void *stream, ts_err *e);

#endif

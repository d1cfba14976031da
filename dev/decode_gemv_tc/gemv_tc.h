/* gemv_tc.h — the decode step's weight-streaming tensor-core skinny GEMM (issue 24):
 * y[m x n] = x[m x k] . W[k x n] for m = 1..16 rows (a decode step's batch),
 * BF16 operands, FP32 sums, BF16 result, W row-major [k x n] as the inference
 * executor stores a linear layer's weight (EXEC_GEMM_NN). It lost: cuBLASLt was
 * faster at 39 of 44 projection points and on every plan's TPOT (../README.md), so
 * the runtime does not carry it (it was runtime/ops/infer_gemv.cu, `tacorun execute
 * --decode-gemm gemv|gemv-pdl`).
 *
 * Tensor-core mma (m16n8k16) with the batch as the 16 rows of A: a lane loads 16
 * bytes (8 outputs' weights) of 16 k rows, 8 lanes side by side on a row (128
 * contiguous bytes), and forms B fragments from halves of its own words (the k order
 * within a chunk is permuted so that this works; x follows the same order, 32 bytes a
 * lane a chunk). A block of 4 warps takes 64 columns and a range of k (the warps
 * interleave over 64-row chunks and are summed through shared memory); the k ranges
 * (split-K) are chosen per shape (fewest waves of resident blocks x (chunks a warp + 1)),
 * their FP32 partials summed by the last block of each column range to arrive (a counter
 * per range, reset by that block: no second launch, the same order of sums every run).
 * Details: gemv_tc.cu. The driver (main.c) checks it against dev_gemv_tc_ref and times
 * it beside cuBLASLt. */
#ifndef DEV_GEMV_TC_H
#define DEV_GEMV_TC_H

#include <stddef.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEV_GEMV_TC_MAX_M 16

typedef struct dev_gemv_tc dev_gemv_tc;

/* A context with `ws_bytes` of FP32 split-K partials (0: 32 MiB) and the column
 * counters, on the current device. */
int dev_gemv_tc_create(dev_gemv_tc **out, size_t ws_bytes, ts_err *e);
void dev_gemv_tc_destroy(dev_gemv_tc *g);

/* 1 when the kernel runs this shape: 1 <= m <= 16, n % 8 == 0, k % 16 == 0 (and W and
 * x must be 16-byte aligned: checked by dev_gemv_tc_run). */
int dev_gemv_tc_fits(long long m, long long n, long long k);
/* The split-K count it uses for a shape (deterministic: the same shape splits the same way). */
int dev_gemv_tc_splits(const dev_gemv_tc *g, long long m, long long n, long long k);

/* y = x . W on `stream` (a cudaStream_t), launched with programmatic stream serialization
 * when pdl is set (its weight loads may then start while the previous kernel on the stream
 * ends; x is read, and anything written, after that kernel is done); fails (ts_fail_sys) on
 * a shape dev_gemv_tc_fits refuses or unaligned pointers. */
int dev_gemv_tc_run(dev_gemv_tc *g, int pdl, const void *x, const void *w, void *y, long long m, long long n,
                    long long k, void *stream, ts_err *e);

/* The plain-C reference (gemv_tc_ref.c): y[m x n] = x[m x k] . w[k x n], all row-major,
 * sums in double. */
void dev_gemv_tc_ref(const float *x, const float *w, double *y, int m, long long n, long long k);

#ifdef __cplusplus
}
#endif

#endif

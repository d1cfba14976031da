/* infer_gemv.h — the decode step's weight-streaming skinny GEMM (issue 24):
 * y[m x n] = x[m x k] . W[k x n] for m = 1..16 rows (a decode step's batch),
 * BF16 operands, FP32 sums, BF16 result, W row-major [k x n] as the inference
 * executor stores a linear layer's weight (infer_model.h: EXEC_GEMM_NN).
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
 * Details: infer_gemv.cu. `tacorun bench-decode` checks it against infer_ref_gemm_nn
 * (infer_ref.h) and times it beside cuBLASLt; the executor's decode GEMMs go through
 * infer_gemm_nn below (`tacorun execute --decode-gemm`, default cuBLASLt: the GEMV lost). */
#ifndef INFER_GEMV_H
#define INFER_GEMV_H

#include <stddef.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "exec_gemm.h" /* C declarations without guards of their own */

#define INFER_GEMV_MAX_M 16

typedef struct infer_gemv infer_gemv;

/* A context with `ws_bytes` of FP32 split-K partials (0: 32 MiB) and the column
 * counters, on the current device. */
int infer_gemv_create(infer_gemv **out, size_t ws_bytes, ts_err *e);
void infer_gemv_destroy(infer_gemv *g);

/* 1 when the kernel runs this shape: 1 <= m <= 16, n % 8 == 0, k % 16 == 0 (and W and
 * x must be 16-byte aligned: checked by infer_gemv_nn / _run). */
int infer_gemv_fits(long long m, long long n, long long k);
/* The split-K count it uses for a shape (deterministic: the same shape splits the same way). */
int infer_gemv_splits(const infer_gemv *g, long long m, long long n, long long k);

/* y = x . W on `stream` (a cudaStream_t); fails (ts_fail_sys) on a shape
 * infer_gemv_fits refuses or unaligned pointers. */
int infer_gemv_nn(infer_gemv *g, const void *x, const void *w, void *y, long long m, long long n, long long k,
                  void *stream, ts_err *e);
/* The same product, launched with programmatic stream serialization when pdl is set (its
 * weight loads may then start while the previous kernel on the stream ends; x is read, and
 * anything written, after that kernel is done). */
int infer_gemv_run(infer_gemv *g, int pdl, const void *x, const void *w, void *y, long long m, long long n,
                   long long k, void *stream, ts_err *e);

/* The decode GEMM path the executor and `tacorun calibrate-infer` share (--decode-gemm): a
 * linear layer's product C[m x n] = A[m x k] . B[k x n] (EXEC_GEMM_NN) by the GEMV when gemv
 * is set, m <= gemv_max_m and infer_gemv_fits, else by cuBLASLt (exec_gemm). The default is
 * cuBLASLt only: the GEMV lost to it (runtime/RESULTS-decode.md, 2026-12-04 GEMV section). */
typedef struct {
  exec_gemm *lt;
  infer_gemv *gemv; /* NULL: cuBLASLt only */
  int gemv_max_m;   /* largest m run by the GEMV (0: none) */
  int pdl;          /* launch the GEMV with programmatic stream serialization (infer_gemv_run) */
} infer_gemm_path;
int infer_gemm_nn(const infer_gemm_path *p, long long m, long long n, long long k, const void *A, const void *B,
                  void *C, void *stream, ts_err *e);
/* 1 when infer_gemm_nn runs (m, n, k) by the GEMV. */
int infer_gemm_uses_gemv(const infer_gemm_path *p, long long m, long long n, long long k);

#ifdef __cplusplus
}
#endif

#endif

/* infer_decode.h — decode-step kernels that stream the weights and the KV
 * cache at the HBM rate (issue 24): a weight-streaming GEMV for the decode
 * projections (batch 1..8 rows) and a split-K (flash-decoding) attention over
 * the cache whose warps keep several cached positions in flight.
 * `tacorun bench-decode` (bench_decode.c) checks them against plain-C
 * references and times them beside cuBLASLt (exec_gemm) and the first
 * decode attention (infer_kernels.h).
 *
 * Layouts are the executor's (BF16, row-major):
 *   NN:  Y[m x n] = X[m x k] . W[k x n]      the layer projections (qkv, attn_out, fc1, fc2)
 *   NT:  Y[m x n] = X[m x k] . W[n x k]^T    the output layer (logits)
 * Every function launches on `stream` (a cudaStream_t) and returns 0 or -1 with e. */
#ifndef INFER_DECODE_H
#define INFER_DECODE_H

#include <stddef.h>

#include "infer_kernels.h"
#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INFER_GEMV_MAX_M 8 /* rows (sequences) the GEMV takes; more: the tensor-core GEMM */

/* Whether the GEMV runs this shape (m <= INFER_GEMV_MAX_M, n and k multiples of 8). */
int infer_gemv_supported(long long m, long long n, long long k);
/* NN: k is split over blocks, partial sums added in FP32 into `ws` (m x n
 * floats, all zero on entry; the kernel that writes Y leaves it zero again:
 * allocate it once with infer_gemv_ws_bytes and clear it once). */
size_t infer_gemv_ws_bytes(long long m, long long n);
int infer_gemv_nn(const void *X, const void *W, void *Y, float *ws, int m, long long n, long long k, void *stream,
                  ts_err *e);
/* NT: one warp per output column (a row of W), no workspace. */
int infer_gemv_nt(const void *X, const void *W, void *Y, int m, long long n, long long k, void *stream, ts_err *e);

/* Decode attention as infer_decode_attention (same arguments and result;
 * `partial` of infer_decode2_partial_bytes): 8 warps a block, each warp
 * loading 4 cached positions' keys and values before using them, and about
 * four blocks per SM. head_dim 64 with 1, 2, 4, 7, 8 or 16 query heads per
 * KV head, 128 with 1 to 8 (7: Qwen2.5 7B; 16 would need 64 KiB of shared
 * memory). */
size_t infer_decode2_partial_bytes(const infer_attn_dims *a, long long len);
int infer_decode_attention2(const void *q, const void *k_cache, const void *v_cache, void *out, void *partial,
                            const infer_attn_dims *a, long long len, void *stream, ts_err *e);

/* One decode-attention call of a timing loop (calib_time_us's launch, used by
 * bench-decode and calibrate-infer): call `iter` reads KV set iter % sets of
 * the pools k and v (sets of set_bytes each, so that repeats read HBM, not
 * L2), with the v2 kernel or, v2 = 0, infer_decode_attention. */
typedef struct {
  int v2;
  infer_attn_dims a;
  long long len;
  void *q, *out, *part;
  char *k, *v;
  size_t set_bytes;
  int sets;
} infer_decode_timing;
static inline int infer_decode_timing_launch(void *ctx, long long iter, ts_err *e) {
  const infer_decode_timing *c = (const infer_decode_timing *)ctx;
  size_t off = (size_t)(iter % c->sets) * c->set_bytes;
  return (c->v2 ? infer_decode_attention2 : infer_decode_attention)(c->q, c->k + off, c->v + off, c->out, c->part,
                                                                    &c->a, c->len, NULL, e);
}

#ifdef __cplusplus
}
#endif
#endif

/* infer_decode.h — the decode step's split-K (flash-decoding) attention over
 * the KV cache (issue 24): v2 (CUDA cores, several cached positions in flight
 * a warp) and v3 (tensor-core mma over the query heads of a KV head; the
 * executor's default, runtime/RESULTS-decode.md), each over a BF16 or an FP8
 * cache. `tacorun bench-decode` (bench_decode.c) checks them against a
 * plain-C reference and times them beside the first decode attention
 * (infer_kernels.h); `tacorun execute --infer-check` checks v1, v3 and the
 * FP8 variants. (The weight-streaming GEMV that was here lost to cuBLASLt:
 * dev/decode_gemv/.) Every function launches on `stream` (a cudaStream_t)
 * and returns 0 or -1 with e. */
#ifndef INFER_DECODE_H
#define INFER_DECODE_H

#include <stddef.h>

#include "infer_decode_pqh.h"
#include "infer_kernels.h"
#include "infer_kv8.h"
#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decode attention as infer_decode_attention (same arguments and result;
 * `partial` of infer_decode2_partial_bytes): 8 warps a block, each warp
 * loading 4 cached positions' keys and values before using them, and about
 * four blocks per SM. head_dim 64 with 1, 2, 4, 7, 8 or 16 query heads per
 * KV head, 128 with 1 to 8 (7: Qwen2.5 7B; 16 would need 64 KiB of shared
 * memory). */
size_t infer_decode2_partial_bytes(const infer_attn_dims *a, long long len);
int infer_decode_attention2(const void *q, const void *k_cache, const void *v_cache, void *out, void *partial,
                            const infer_attn_dims *a, long long len, void *stream, ts_err *e);
/* The same kernel over the FP8 cache c (infer_kv8.h): codes converted in
 * registers, each score times its key's scale, each softmax weight times its
 * value's scale; same shapes, partials (infer_decode2_partial_bytes) and output. */
int infer_decode_attention2_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                const infer_attn_dims *a, long long len, void *stream, ts_err *e);

/* Decode attention v3 (same arguments and result as infer_decode_attention2;
 * `partial` of infer_decode3_partial_bytes): tensor-core mma over the query
 * heads of a KV head group (S = Q K^T and P V by m16n8k16 mma, one 16-position
 * tile at a time a warp, 4 warps a block), loaded straight from the cache
 * without shared memory, the online softmax on the mma fragments; one split
 * writes the output itself, more are merged by a combine kernel. head_dim 128 with 1 to
 * 8, 12 or 16 query heads per KV head; 64 with 1, 2, 4, 6, 7, 8 or 16. */
size_t infer_decode3_partial_bytes(const infer_attn_dims *a, long long len);
int infer_decode_attention3(const void *q, const void *k_cache, const void *v_cache, void *out, void *partial,
                            const infer_attn_dims *a, long long len, void *stream, ts_err *e);
/* v3 over the FP8 cache c: codes to FP16 in registers (FP16 mma; q in FP16,
 * so |q| must stay below 65504), scores times the key scales, value weights
 * times the value scales (kept in [0, 1] by a max of their own); same
 * partials and output. */
int infer_decode_attention3_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                const infer_attn_dims *a, long long len, void *stream, ts_err *e);

/* Decode attention v4: v3's kernel (same arguments, partials of
 * infer_decode3_partial_bytes, the same arithmetic in the same order: the same
 * bits) with the next tile's loads kept in flight in registers while a warp
 * computes the tile in hand, in place of v3's L2 prefetch; over a BF16 cache
 * 2 blocks an SM fit (v3: 3). */
int infer_decode_attention4(const void *q, const void *k_cache, const void *v_cache, void *out, void *partial,
                            const infer_attn_dims *a, long long len, void *stream, ts_err *e);
int infer_decode_attention4_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                const infer_attn_dims *a, long long len, void *stream, ts_err *e);

/* Decode attention v5: over the FP8 cache a kernel with the cached positions as the mma's
 * rows (S^T = K Q^T and O^T = V^T P^T, the G <= 8 query heads of a KV head as the 8 columns:
 * half of v3's mma and 2 movmatrix a tile where v3 spends 32; V's codes reach the mma by byte
 * permutes; the next tile's loads in flight as v4), built for head_dim 128 with 1 to 8 query
 * heads per KV head, elsewhere v4's kernel; over a BF16 cache v4's kernel. Same arguments,
 * partials (infer_decode3_partial_bytes) and output; the FP8 kernel's arithmetic differs from
 * v3's (the same FP16 products in another order), so its bits do. dev/decode_attn_fp8/ has
 * its variants and timings. */
int infer_decode_attention5(const void *q, const void *k_cache, const void *v_cache, void *out, void *partial,
                            const infer_attn_dims *a, long long len, void *stream, ts_err *e);
int infer_decode_attention5_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                const infer_attn_dims *a, long long len, void *stream, ts_err *e);

/* The decode attention the executor runs and `tacorun calibrate-infer` times unless told
 * otherwise (their --decode-attention): 3 to 5 (runtime/RESULTS-decode.md says why). */
#define INFER_DECODE_DEFAULT 5

/* One decode-attention call of a timing loop (calib_time_us's launch, used by
 * bench-decode and calibrate-infer): call `iter` reads KV set iter % sets of
 * the pools k and v (sets of set_bytes each, so that repeats read HBM, not
 * L2) with `kernel`: INFER_DEC_V1 (infer_decode_attention), INFER_DEC_V2
 * (infer_decode_attention2), INFER_DEC_V3 (infer_decode_attention3), or
 * INFER_DEC_V4 (infer_decode_attention4), INFER_DEC_V5 (infer_decode_attention5), or
 * INFER_DEC_V2_FP8 / INFER_DEC_V3_FP8 / INFER_DEC_V4_FP8 / INFER_DEC_V5_FP8
 * (infer_decode_attention2_fp8 / 3_fp8 / 4_fp8 / 5_fp8
 * over k8/v8, the same head vectors as E4M3 codes, and their scales ks/vs:
 * set iter % sets starts at head vector off / (2 head_dim)). After INFER_DEC_KERNELS (bench-decode's
 * kernels, which it loops over), calibrate-infer's: INFER_DEC_PQH / INFER_DEC_PQH_FP8
 * (infer_decode_pqh / infer_decode_pqh_fp8, infer_decode_pqh.h; `part` of
 * infer_decode_pqh_partial_bytes). */
enum {
  INFER_DEC_V1,
  INFER_DEC_V2,
  INFER_DEC_V2_FP8,
  INFER_DEC_V3,
  INFER_DEC_V3_FP8,
  INFER_DEC_V4,
  INFER_DEC_V4_FP8,
  INFER_DEC_V5,
  INFER_DEC_V5_FP8,
  INFER_DEC_KERNELS,
  INFER_DEC_PQH,
  INFER_DEC_PQH_FP8
};
static inline int infer_dec_is_fp8(int kernel) {
  return kernel == INFER_DEC_V2_FP8 || kernel == INFER_DEC_V3_FP8 || kernel == INFER_DEC_V4_FP8 ||
         kernel == INFER_DEC_V5_FP8 || kernel == INFER_DEC_PQH_FP8;
}
typedef struct {
  int kernel; /* INFER_DEC_* */
  infer_attn_dims a;
  long long len;
  void *q, *out, *part;
  char *k, *v;
  char *k8, *v8; /* E4M3 codes (infer_kv8_quantize of k and v) */
  float *ks, *vs; /* their scales, one per head vector */
  size_t set_bytes;
  int sets;
} infer_decode_timing;
static inline int infer_decode_timing_launch(void *ctx, long long iter, ts_err *e) {
  const infer_decode_timing *c = (const infer_decode_timing *)ctx;
  size_t off = (size_t)(iter % c->sets) * c->set_bytes;
  if (infer_dec_is_fp8(c->kernel)) {
    size_t row = off / 2 / (size_t)c->a.head_dim; /* first head vector of the set */
    infer_kv8 k8 = {c->k8 + row * (size_t)c->a.head_dim, c->v8 + row * (size_t)c->a.head_dim, c->ks + row,
                    c->vs + row};
    if (c->kernel == INFER_DEC_PQH_FP8) return infer_decode_pqh_fp8(c->q, &k8, c->out, c->part, &c->a, c->len, NULL, e);
    return (c->kernel == INFER_DEC_V5_FP8   ? infer_decode_attention5_fp8
            : c->kernel == INFER_DEC_V4_FP8 ? infer_decode_attention4_fp8
            : c->kernel == INFER_DEC_V3_FP8 ? infer_decode_attention3_fp8
                                            : infer_decode_attention2_fp8)(
        c->q, &k8, c->out, c->part, &c->a, c->len, NULL, e);
  }
  if (c->kernel == INFER_DEC_PQH)
    return infer_decode_pqh(c->q, c->k + off, c->v + off, c->out, c->part, &c->a, c->len, NULL, e);
  return (c->kernel == INFER_DEC_V5   ? infer_decode_attention5
          : c->kernel == INFER_DEC_V4 ? infer_decode_attention4
          : c->kernel == INFER_DEC_V3 ? infer_decode_attention3
          : c->kernel == INFER_DEC_V2 ? infer_decode_attention2
                                      : infer_decode_attention)(c->q, c->k + off, c->v + off, c->out, c->part, &c->a,
                                                                c->len, NULL, e);
}

#ifdef __cplusplus
}
#endif
#endif

/* attn_fp8.h — decode attention over the FP8 KV cache with the cached positions as
 * the mma's M rows (dev/decode_attn_fp8/README.md): S^T = K Q^T and O^T = V^T P^T,
 * m16n8k16 FP16 mma, the G <= 8 query heads of a KV head as N = 8, so a 16-position
 * tile costs 8 + 8 mma at head_dim 128 where v3 (infer_decode_attention3_fp8)
 * spends 16 + 16 with 16 - G of its rows empty; V reaches the mma's A fragments by
 * byte permutes of the codes before conversion (no movmatrix), P by two movmatrix.
 * Same arguments, cache layout (infer_kv8.h), partial layout and result as
 * infer_decode_attention3_fp8; head_dim 128 with 4 or 8 query heads per KV head.
 * Every function launches on `stream` and returns 0 or -1 with e. */
#ifndef DEV_ATTN_FP8_H
#define DEV_ATTN_FP8_H

#include <stddef.h>

#include "infer_kernels.h"
#include "infer_kv8.h"
#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the FP32 partials for `len` cached positions (v3's layout and split rule). */
size_t dev_attn_fp8_partial_bytes(const infer_attn_dims *a, long long len);
int dev_attn_fp8(const void *q, const infer_kv8 *c, void *out, void *partial, const infer_attn_dims *a, long long len,
                 void *stream, ts_err *e);
/* The same with the codes converted by integer ops (shifts and masks: E4M3 bits placed in
 * FP16's, the value times 2^-8, undone in the score scale and the output) in place of the
 * cvt instructions: which of the two is faster tells whether the conversions bound it. */
int dev_attn_fp8_alu(const void *q, const infer_kv8 *c, void *out, void *partial, const infer_attn_dims *a,
                     long long len, void *stream, ts_err *e);
/* dev_attn_fp8 without the next tile's loads in flight (one tile's registers: 4 blocks an SM
 * where dev_attn_fp8 fits 3): more warps in flight instead of more loads a warp. */
int dev_attn_fp8_b4(const void *q, const infer_kv8 *c, void *out, void *partial, const infer_attn_dims *a,
                    long long len, void *stream, ts_err *e);
/* Fills rows head vectors of codes (finite E4M3: no 0x7f / 0xff) and scales (powers of two
 * times 1/448, 2^-4 .. 2^4) from seed, for timing runs whose values do not matter. */
int dev_attn_fp8_fill(void *codes, float *scales, long long rows, int head_dim, unsigned long long seed, void *stream,
                      ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

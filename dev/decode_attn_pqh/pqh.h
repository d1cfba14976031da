/* pqh.h — decode attention read per query head (dev/decode_attn_pqh/README.md), the
 * library's kernel since 2026-12-06 (infer_decode_pqh.h; this file keeps the driver's fill):
 * split-K
 * (flash-decoding) on CUDA cores, no mma, one block of 128 threads per (query head h,
 * split, sequence b), blockIdx.x = h so that the G query heads of one KV head are
 * consecutive blocks (as the grid (heads, batch) of the engines' masked multi-head
 * attention was). Each block reads the keys and values of cache head h / (hl / kvl) for its
 * slice of the positions, online softmax, FP32 partials; a combine kernel merges the
 * slices (one slice: the block writes the output itself).
 *
 * The same kernel runs two ways, by the cache's heads a->kvl (query head h reads cache head
 * h / (hl / kvl)):
 *   aliased  a cache of kvl heads: query head h reads KV head h / G (the real
 *            per-query-head kernel: G blocks read the same cache lines);
 *   copies   a cache of hl heads (kvl = hl): head h reads a copy of its own (G times
 *            the bytes, what a price of G x the cache read assumes).
 * q [batch x hl x d] BF16, out [batch x hl x d] BF16, caches [batch x kvl x max_seq x d]
 * (BF16, or the FP8 cache of infer_kv8.h); head_dim 128 only. Every function launches on
 * `stream` and returns 0 or -1 with e. */
#ifndef DEV_PQH_H
#define DEV_PQH_H

#include <stddef.h>

#include "infer_kernels.h"
#include "infer_kv8.h"
#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills n bytes of a timing cache with finite values whose size does not matter: BF16
 * (fp8 = 0: words of magnitude 2^-7 .. 2^-6) or E4M3 codes (fp8 = 1, no NaN code); scales
 * (may be NULL) of `rows` floats set to 1/448. */
int dev_pqh_fill(void *bytes, size_t n, int fp8, float *scales, long long rows, void *stream, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

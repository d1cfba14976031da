/* infer_decode_pqh.h — decode attention read once per query head, a calibration kernel
 * (`tacorun calibrate-infer --per-query-head`: the "attention_decode_pqh[_fp8].g<G>" tables that
 * price a plan's "decode_attention": "per-query-head", sim/INFERENCE.md). Not the executor's:
 * it runs v3 (infer_decode.h), which reads each KV head's cache once for its G query heads.
 *
 * The kernel is the one `dev/decode_attn_pqh` measured ("aliased"): split-K (flash-decoding) on
 * CUDA cores, no mma, one block of 128 threads per (query head h, slice of the positions,
 * sequence b), blockIdx.x = h, so the G query heads of one KV head are consecutive blocks (the
 * grid of the engines' masked multi-head attention before TensorRT-LLM's XQA: one block a
 * (sequence, query head); vLLM's paged attention likewise). Query head h reads KV head h / G of
 * the cache: the G blocks of a KV head read the same lines, so L2 serves part of the repeats.
 * A half warp takes one position (16 lanes x 8 dimensions), a warp two a step, four steps'
 * keys and values loaded before use; online softmax in the log2 domain; FP32 partials and a
 * combine kernel (one slice: the block writes the output).
 *
 * Shapes as infer_decode_attention: q [batch x hl x d] BF16, out [batch x hl x d] BF16, caches
 * [batch x kvl x max_seq x d] (BF16, or the FP8 cache of infer_kv8.h: scores times the key's
 * scale, weights times the value's); head_dim 128 only, hl a multiple of kvl (G = hl / kvl,
 * any G >= 1). Plain-C reference: infer_ref_decode_attention (infer_ref.h). Every
 * function launches on `stream` (a cudaStream_t) and returns 0 or -1 with e. */
#ifndef INFER_DECODE_PQH_H
#define INFER_DECODE_PQH_H

#include <stddef.h>

#include "infer_kernels.h"
#include "infer_kv8.h"
#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the FP32 partials at len positions: batch x hl x slices x (d + 2) floats. */
size_t infer_decode_pqh_partial_bytes(const infer_attn_dims *a, long long len);
int infer_decode_pqh(const void *q, const void *k_cache, const void *v_cache, void *out, void *partial,
                     const infer_attn_dims *a, long long len, void *stream, ts_err *e);
int infer_decode_pqh_fp8(const void *q, const infer_kv8 *c, void *out, void *partial, const infer_attn_dims *a,
                         long long len, void *stream, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

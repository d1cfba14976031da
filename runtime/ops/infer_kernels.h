/* infer_kernels.h — CUDA kernels of inference (prefill and decode with a KV
 * cache) that the training executor does not have: RoPE applied while Q, K and
 * V are scattered into the attention layouts and the cache, the head-major to
 * token-major copy after prefill attention, the memory-bound decode attention
 * over the cache (split over the cached positions, then combined), and greedy
 * sampling (arg max over the vocabulary shards).
 *
 * Layouts (BF16 unless said otherwise; hl = heads on this GPU, kvl = KV heads
 * on this GPU, d = head_dim, g = hl / kvl query heads per KV head):
 *   qkv    [batch * seq x (hl + 2 kvl) d]  token-major (Q | K | V columns), the QKV GEMM's output
 *   q      [batch x hl x seq x d]          head-major, so that the g query heads of one KV head
 *                                          are g * seq contiguous rows (one GEMM per KV head)
 *   cache  [batch x kvl x max_seq x d]     K and V, one each per layer
 *   out    [batch * seq x hl d]            token-major, the attention output projection's input
 * Every function launches on `stream` (a cudaStream_t) and returns 0 or -1 with e. */
#ifndef INFER_KERNELS_H
#define INFER_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int batch, hl, kvl, head_dim;
  long long max_seq;  /* positions per sequence in the cache */
  double rope_theta;  /* 0: no rotary embedding */
} infer_attn_dims;

/* Rotates Q and K of `seq` tokens per sequence at positions pos0 .. pos0+seq-1
 * (HF/Llama convention: pairs (i, i + d/2), angle pos * theta^(-2i/d)), writes
 * Q head-major into q and K, V into the caches at those positions. */
int infer_rope_scatter(const void *qkv, void *q, void *k_cache, void *v_cache, const infer_attn_dims *a, int seq,
                       long long pos0, void *stream, ts_err *e);

/* out[(b * seq + s) x hl d] = o[b][h][s][:] (head-major to token-major). */
int infer_heads_to_tokens(const void *o, void *out, int batch, int hl, int seq, int head_dim, void *stream,
                          ts_err *e);

/* Decode attention: for each sequence b and query head h, softmax(q . K^T /
 * sqrt(d)) . V over cached positions 0 .. len-1 (q [batch x hl x d], out
 * [batch x hl d]). Each block reads one KV head's keys and values of one slice
 * of the positions once for its g query heads (flash-decoding split), writing
 * FP32 partial maxima, sums and outputs to `partial`; a second kernel combines
 * the slices. head_dim 64 or 128, g in {1, 2, 4, 8, 16}. */
size_t infer_decode_partial_bytes(const infer_attn_dims *a, long long len);
int infer_decode_attention(const void *q, const void *k_cache, const void *v_cache, void *out, void *partial,
                           const infer_attn_dims *a, long long len, void *stream, ts_err *e);

/* Greedy sampling over vocabulary shards gathered from tp GPUs: logits holds
 * tp blocks of [batch x vocab_local] (an all-gather's output); token[b] = the
 * global index of the largest logit among the first vocab_valid words (ties:
 * the smallest index; NaN never chosen; token 0 if all are NaN). Two kernels:
 * chunks of 4,096 words, then a pick per sequence; `scratch` holds the chunks'
 * results (infer_argmax_scratch_bytes, device memory, 8-byte aligned). */
size_t infer_argmax_scratch_bytes(int batch, int tp, long long vocab_local);
int infer_argmax(const void *logits, int32_t *token, int batch, int tp, long long vocab_local, long long vocab_valid,
                 void *scratch, void *stream, ts_err *e);

/* x[0..n) = value (norm weights of a synthetic model start at 1). */
int infer_fill_bf16(void *x, long long n, float value, void *stream, ts_err *e);

/* dst[b] = src[b * seq + seq - 1] (rows of `cols`): the last token of each sequence. */
int infer_last_rows(const void *src, void *dst, int batch, long long seq, int cols, void *stream, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

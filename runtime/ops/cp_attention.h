/* cp_attention.h — one ring step of context parallelism's attention on the
 * GPU, the log-sum-exp combine of the steps, and the ring's backward
 * (Megatron-Core / Transformer Engine ring attention; the float64 reference
 * is cp_attention_ref.h, whose 2 cp chunk split and global positions these
 * kernels use). Plain kernels, correctness over speed: one thread per (row,
 * head), BF16 inputs, FP32 scores, softmax and accumulation.
 *
 * Layouts (cp_attn_shape): CP rank r holds n = seq / cp tokens in its local
 * order (local token t is global position cp_ref_position(seq, cp, r, t)).
 * q is [n rows, row stride ldq] BF16, query head h in columns [h*d, (h+1)*d);
 * k and v [n rows, row stride ldkv] BF16, the rows of the KV block of rank src
 * (its local order), kv_heads heads of d columns each; query head h reads KV
 * head h / (heads / kv_heads) (grouped-query attention; kv_heads = heads is
 * plain multi-head). The executor's packed QKV rows [Q | K | V] are q = qkv,
 * k = qkv + heads*d, v = k + kv_heads*d, ldq = ldkv = (heads + 2 kv_heads) d.
 * Block outputs and the accumulator are [n x heads*d] FP32; log-sum-exps are
 * [heads x n] FP32, natural log of the scaled scores (scale 1/sqrt(d)).
 *
 * Every function launches on `stream` and returns 0, or -1 with e (bad shape:
 * seq not divisible by 2 cp, r or src outside 0..cp-1, d outside 1..128,
 * heads not a multiple of kv_heads, a row stride shorter than its heads). */
#ifndef CP_ATTENTION_H
#define CP_ATTENTION_H

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int seq, cp;         /* the whole sequence, the CP size */
  int heads, kv_heads; /* query heads, key/value heads (a divisor of heads) */
  int d;               /* head_dim, 1..128 */
  long long ldq, ldkv; /* row strides of q and of k, v, in elements */
} cp_attn_shape;

/* Plain multi-head attention, q, k, v each [n x heads*d]. */
static inline cp_attn_shape cp_attn_shape_mha(int seq, int cp, int heads, int d) {
  cp_attn_shape s = {seq, cp, heads, heads, d, (long long)heads * d, (long long)heads * d};
  return s;
}

/* Rank r's query rows against rank src's KV block under the causal mask of
 * the global positions: writes every row of out (the block's normalised
 * output) and lse. A row with no visible key gets lse = -INFINITY and an
 * output row of zeros (the combine skips it). */
int cp_attn_block(const cp_attn_shape *s, const void *q, const void *k, const void *v, float *out, float *lse, int r,
                  int src, void *stream, ts_err *e);

/* Folds one step's (blk_out, blk_lse) into the accumulator (acc_out,
 * acc_lse), n rows x heads: first != 0 copies it (the accumulator's old
 * contents are not read); otherwise a row whose block lse is -INFINITY is
 * left as it is, and the others become
 *   acc = (e^L acc + e^l blk) / (e^L + e^l),  L = log(e^L + e^l)
 * in the stable form (max subtracted). */
int cp_attn_combine(float *acc_out, float *acc_lse, const float *blk_out, const float *blk_lse, int first, int n,
                    int heads, int d, void *stream, ts_err *e);

/* out [count] BF16 = in [count] FP32, rounded to nearest even. */
int cp_attn_to_bf16(const float *in, void *out, long long count, void *stream, ts_err *e);

/* Backward (the ring: at step s rank r holds the KV block of
 * src = (r - s) mod cp and that block's dK, dV accumulator, which travels the
 * ring with it back to its owner). dout is [n x heads*d] BF16 (the upstream
 * gradient of rank r's rows); out and lse the combined forward output
 * [n x heads*d] FP32 and log-sum-exp [heads x n] of rank r; delta
 * [heads x n] FP32.
 *
 * cp_attn_bwd_delta: delta = rowsum(dout * out) per (row, head).
 * cp_attn_block_bwd_q: ADDS the block's part of dQ to dq [n x heads*d] FP32
 *   (rank r's rows): scale * sum_j p (dout.v_j - delta) k_j over the visible
 *   keys j of block src, p = e^(scale q.k_j - lse).
 * cp_attn_block_bwd_kv: ADDS rank r's part to the block's dk, dv
 *   [n x kv_heads*d] FP32 (block src's rows, its local order):
 *   dk_j += scale * sum_t p (dout_t.v_j - delta_t) q_t, dv_j += sum_t p dout_t
 *   over rank r's rows t that see key j and the query heads of the group. */
int cp_attn_bwd_delta(const void *dout, const float *out, float *delta, int n, int heads, int d, void *stream,
                      ts_err *e);
int cp_attn_block_bwd_q(const cp_attn_shape *s, const void *q, const void *k, const void *v, const void *dout,
                        const float *lse, const float *delta, float *dq, int r, int src, void *stream, ts_err *e);
int cp_attn_block_bwd_kv(const cp_attn_shape *s, const void *q, const void *k, const void *v, const void *dout,
                         const float *lse, const float *delta, float *dk, float *dv, int r, int src, void *stream,
                         ts_err *e);

/* The same on the CPU (synchronous, host pointers), through the very
 * per-row functions the kernels run: for checking the arithmetic, the mask,
 * the combine and the backward on a machine without a GPU. */
int cp_attn_block_host(const cp_attn_shape *s, const void *q, const void *k, const void *v, float *out, float *lse,
                       int r, int src, ts_err *e);
int cp_attn_combine_host(float *acc_out, float *acc_lse, const float *blk_out, const float *blk_lse, int first,
                         int n, int heads, int d, ts_err *e);
int cp_attn_bwd_delta_host(const void *dout, const float *out, float *delta, int n, int heads, int d, ts_err *e);
int cp_attn_block_bwd_q_host(const cp_attn_shape *s, const void *q, const void *k, const void *v, const void *dout,
                             const float *lse, const float *delta, float *dq, int r, int src, ts_err *e);
int cp_attn_block_bwd_kv_host(const cp_attn_shape *s, const void *q, const void *k, const void *v, const void *dout,
                              const float *lse, const float *delta, float *dk, float *dv, int r, int src, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

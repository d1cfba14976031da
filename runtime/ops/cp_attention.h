/* cp_attention.h — one ring step of context parallelism's attention on the
 * GPU, and the log-sum-exp combine of the steps (Megatron-Core / Transformer
 * Engine ring attention; the float64 reference is cp_attention_ref.h, whose
 * 2 cp chunk split and global positions these kernels use). Plain kernels,
 * correctness over speed: one thread per (query row, head), BF16 inputs,
 * FP32 scores, softmax and accumulation.
 *
 * Layouts: CP rank r holds n = seq / cp tokens in its local order (local
 * token t is global position cp_ref_position(seq, cp, r, t)). q, k, v are
 * [n x heads*d] BF16, row-major, head h in columns [h*d, (h+1)*d): q the rank's
 * own rows, k and v the rows of the KV block of rank src (its local order).
 * Block outputs and the accumulator are [n x heads*d] FP32; log-sum-exps are
 * [heads x n] FP32, natural log of the scaled scores (scale 1/sqrt(d)).
 *
 * Every function launches on `stream` and returns 0, or -1 with e
 * (bad shape: seq not divisible by 2 cp, r or src outside 0..cp-1, d outside 1..128). */
#ifndef CP_ATTENTION_H
#define CP_ATTENTION_H

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rank r's query rows against rank src's KV block under the causal mask of
 * the global positions: writes every row of out (the block's normalised
 * output) and lse. A row with no visible key gets lse = -INFINITY and an
 * output row of zeros (the combine skips it). */
int cp_attn_block(const void *q, const void *k, const void *v, float *out, float *lse, int seq, int cp, int r,
                  int src, int heads, int d, void *stream, ts_err *e);

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

/* Backward (Megatron-Core / Transformer Engine ring: at step s rank r holds
 * the KV block of src = (r - s) mod cp and that block's dK, dV accumulator,
 * which travels the ring with it back to its owner). dout is [n x heads*d]
 * BF16 (the upstream gradient of rank r's rows); out and lse the combined
 * forward output [n x heads*d] FP32 and log-sum-exp [heads x n] of rank r;
 * delta [heads x n] FP32.
 *
 * cp_attn_bwd_delta: delta = rowsum(dout * out) per (row, head).
 * cp_attn_block_bwd_q: ADDS the block's part of dQ to dq [n x heads*d] FP32
 *   (rank r's rows): scale * sum_j p (dout.v_j - delta) k_j over the visible
 *   keys j of block src, p = e^(scale q.k_j - lse).
 * cp_attn_block_bwd_kv: ADDS rank r's part to the block's dk, dv
 *   [n x heads*d] FP32 (block src's rows, its local order):
 *   dk_j += scale * sum_t p (dout_t.v_j - delta_t) q_t, dv_j += sum_t p dout_t
 *   over rank r's rows t that see key j. */
int cp_attn_bwd_delta(const void *dout, const float *out, float *delta, int n, int heads, int d, void *stream,
                      ts_err *e);
int cp_attn_block_bwd_q(const void *q, const void *k, const void *v, const void *dout, const float *lse,
                        const float *delta, float *dq, int seq, int cp, int r, int src, int heads, int d, void *stream,
                        ts_err *e);
int cp_attn_block_bwd_kv(const void *q, const void *k, const void *v, const void *dout, const float *lse,
                         const float *delta, float *dk, float *dv, int seq, int cp, int r, int src, int heads, int d,
                         void *stream, ts_err *e);

/* The same on the CPU (synchronous, host pointers), through the very
 * per-row functions the kernels run: for checking the arithmetic, the mask
 * and the combine on a machine without a GPU. */
int cp_attn_block_host(const void *q, const void *k, const void *v, float *out, float *lse, int seq, int cp, int r,
                       int src, int heads, int d, ts_err *e);
int cp_attn_combine_host(float *acc_out, float *acc_lse, const float *blk_out, const float *blk_lse, int first,
                         int n, int heads, int d, ts_err *e);
int cp_attn_bwd_delta_host(const void *dout, const float *out, float *delta, int n, int heads, int d, ts_err *e);
int cp_attn_block_bwd_q_host(const void *q, const void *k, const void *v, const void *dout, const float *lse,
                             const float *delta, float *dq, int seq, int cp, int r, int src, int heads, int d,
                             ts_err *e);
int cp_attn_block_bwd_kv_host(const void *q, const void *k, const void *v, const void *dout, const float *lse,
                              const float *delta, float *dk, float *dv, int seq, int cp, int r, int src, int heads,
                              int d, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

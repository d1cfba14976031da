/* exec_kernels.h — the executor's own CUDA kernels, the ones rt_ops.h does not
 * have: vocabulary-parallel embedding and cross-entropy (Megatron-LM's split of
 * the vocabulary across tensor-parallel ranks), norm weight gradients, FP32 ->
 * BF16 copies and a non-finite counter. BF16 tensors are void*; every function
 * launches on `stream` (a cudaStream_t) and returns 0 or -1 with e. */
#ifndef EXEC_KERNELS_H
#define EXEC_KERNELS_H

#include <stdint.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* out[t] = (vocab_start <= tok[t] < vocab_start + vocab_local ? wte[tok - vocab_start] : 0)
 *          + (add_position ? wpe[t % seq] : 0), rows of `hidden`. */
int exec_embed_fwd(const int32_t *tokens, const void *wte, long long vocab_start, long long vocab_local,
                   const void *wpe, int add_position, void *out, long long tokens_n, int seq, int hidden,
                   void *stream, ts_err *e);
/* dwte[tok - vocab_start] += dx[t] for local tokens; dwpe[t % seq] += dx[t] (FP32 accumulators; dwpe NULL: none).
 * Atomic adds, or with --variant reduce=ordered each row of dwte and dwpe summed
 * by one block in position order (hidden <= 8192; one block per local word). */
int exec_embed_bwd(const int32_t *tokens, const void *dx, float *dwte, long long vocab_start, long long vocab_local,
                   float *dwpe, long long tokens_n, int seq, int hidden, void *stream, ts_err *e);

/* Norm weight gradients: dgamma[j] += sum_r dy[r][j] * xhat[r][j], dbeta[j] += sum_r dy[r][j]
 * with xhat = (x - mean) * rstd (mean NULL: RMSNorm; dbeta NULL: no bias). Blocks
 * of 256 rows added atomically, or with --variant reduce=ordered one block per 32
 * columns over every row (a fixed order, fewer blocks). */
int exec_norm_wgrad(const void *dy, const void *x, const float *mean, const float *rstd, float *dgamma, float *dbeta,
                    long long rows, int cols, void *stream, ts_err *e);
/* The whole norm backward in one kernel: the weight gradients as exec_norm_wgrad,
 * and dx += the input gradient (LayerNorm, or RMSNorm when mean is NULL) with
 * one BF16 rounding. Supported: cols a multiple of 8, at most 4096. */
int exec_norm_bwd_fused_supported(int cols);
int exec_norm_bwd_fused(const void *dy, const void *x, const void *gamma, const float *mean, const float *rstd,
                        float *dgamma, float *dbeta, void *dx, long long rows, int cols, void *stream, ts_err *e);

/* Vocabulary-parallel softmax cross-entropy in three passes around two
 * all-reduces over the tensor-parallel group (done by the caller):
 *   1. rowmax[r] = max of the local logits               -> all-reduce MAX
 *   2. sums[r] = sum exp(z - rowmax), sums[rows + r] = logit of the label
 *      when this rank holds it, else 0                   -> all-reduce SUM
 *   3. loss_sum += loss_scale * sum_r (log sums[r] + rowmax[r] - sums[rows + r]);
 *      logits become grad_scale * (softmax - onehot), in place. The sum over
 *      the rows: atomic adds, or with --variant reduce=ordered each row's term
 *      written over sums[rows + r] and added in row order by one more kernel. */
/* Only the first `vocab_valid` columns are real words: the padding columns
 * (Megatron-LM pads the vocabulary) take no probability and get zero gradient. */
int exec_ce_rowmax(const void *logits, float *rowmax, long long rows, int vocab_local, int vocab_valid, void *stream,
                   ts_err *e);
int exec_ce_sums(const void *logits, const int32_t *labels, long long vocab_start, const float *rowmax, float *sums,
                 long long rows, int vocab_local, int vocab_valid, void *stream, ts_err *e);
int exec_ce_finish(void *logits, const int32_t *labels, long long vocab_start, const float *rowmax,
                   float *sums, float *loss_sum, float loss_scale, float grad_scale, long long rows,
                   int vocab_local, int vocab_valid, void *stream, ts_err *e);
/* The same loss in one read of the logits plus the in-place gradient pass
 * (the default where vocab_local % 8 == 0 and not --variant ce=unfused):
 *   1. exec_ce_stats: rowmax[r] = this rank's max, sums[r] = sum exp(z - it),
 *      sums[rows + r] = the label's logit or 0, sums[2 rows + r] = the max again
 *      (sums holds 3 rows floats)                       -> all-reduce MAX of rowmax
 *   2. exec_ce_rescale: sums[r] relative to the global max (TP > 1 only)
 *                                                       -> all-reduce SUM of sums[0 .. 2 rows)
 *   3. exec_ce_finish8: as exec_ce_finish, 16-byte loads and stores. */
int exec_ce_fused_selected(int vocab_local);
int exec_ce_stats(const void *logits, const int32_t *labels, long long vocab_start, float *rowmax, float *sums,
                  long long rows, int vocab_local, int vocab_valid, void *stream, ts_err *e);
int exec_ce_rescale(const float *rowmax, float *sums, long long rows, void *stream, ts_err *e);
int exec_ce_finish8(void *logits, const int32_t *labels, long long vocab_start, const float *rowmax,
                    float *sums, float *loss_sum, float loss_scale, float grad_scale, long long rows,
                    int vocab_local, int vocab_valid, void *stream, ts_err *e);

/* Causal softmax that touches only the lower triangle: rows of `batch` seq x seq
 * matrices; P[i][j] = softmax_j<=i(scale S[i][j]) written for j < ceil8(i + 1)
 * (zeros past the diagonal inside that last group of 8); P's entries further
 * right are never written, so the caller zeroes P once. seq % 8 == 0, seq <= 8192.
 * Half the memory traffic of a full-row softmax for a causal mask. */
int exec_softmax_causal_lower_fwd(const void *s, void *p, long long batch, int seq, float scale, void *stream,
                                  ts_err *e);
/* dS = scale * P * (dP - sum_j P dP) on the lower triangle (same writes as above). */
int exec_softmax_causal_lower_bwd(const void *p, const void *dp, void *ds, long long batch, int seq, float scale,
                                  void *stream, ts_err *e);

/* y (bf16) = x (fp32). */
int exec_f32_to_bf16(const float *x, void *y, long long n, void *stream, ts_err *e);
/* y (fp32) = x (bf16). */
int exec_bf16_to_f32(const void *x, float *y, long long n, void *stream, ts_err *e);
/* x[0..n) = value. */
int exec_fill_f32(float *x, long long n, float value, void *stream, ts_err *e);
/* *count += number of NaN or Inf among x[0..n). */
int exec_count_nonfinite(const float *x, long long n, unsigned long long *count, void *stream, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

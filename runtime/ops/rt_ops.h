/* rt_ops.h — the memory-bound kernels of a transformer layer (CUDA, BF16).
 *
 * Tensors are row-major BF16 (passed as void*; 2 bytes per element) unless a
 * parameter says float. Statistics and optimizer state are FP32. Every
 * function launches on `stream` (a cudaStream_t), checks the launch and
 * returns 0, or -1 with "file:line: ..." in e. rt_ops_ref.h holds a plain-C
 * reference of each, and rt_ops_selfcheck() compares them on random inputs.
 *
 * Attention here is the unfused form the executor uses: S = Q K^T (batched
 * cuBLASLt GEMM), P = softmax(scale * S) with a causal mask, O = P V; its
 * backward uses rt_softmax_bwd between the batched GEMMs. */
#ifndef RT_OPS_H
#define RT_OPS_H

#include <stdint.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* y = (x - mean) * rstd * gamma + beta, per row; mean and rstd (FP32, one per row) saved for backward. */
int rt_layernorm_fwd(const void *x, const void *gamma, const void *beta, void *y, float *mean, float *rstd,
                     long long rows, int cols, float eps, void *stream, ts_err *e);
/* Input gradient of LayerNorm (the weight gradients are not computed here). */
int rt_layernorm_bwd_dx(const void *dy, const void *x, const void *gamma, const float *mean, const float *rstd,
                        void *dx, long long rows, int cols, void *stream, ts_err *e);
/* y = x * rstd * gamma with rstd = 1 / sqrt(mean(x^2) + eps). */
int rt_rmsnorm_fwd(const void *x, const void *gamma, void *y, float *rstd, long long rows, int cols, float eps,
                   void *stream, ts_err *e);
int rt_rmsnorm_bwd_dx(const void *dy, const void *x, const void *gamma, const float *rstd, void *dx,
                      long long rows, int cols, void *stream, ts_err *e);

/* GELU, tanh approximation (as GPT-2/3 and Megatron use). */
int rt_gelu_fwd(const void *x, void *y, long long n, void *stream, ts_err *e);
int rt_gelu_bwd(const void *dy, const void *x, void *dx, long long n, void *stream, ts_err *e);
/* SwiGLU on x[rows x 2f] = [gate | up]: y[rows x f] = silu(gate) * up. dx is rows x 2f. */
int rt_swiglu_fwd(const void *x, void *y, long long rows, int f, void *stream, ts_err *e);
int rt_swiglu_bwd(const void *dy, const void *x, void *dx, long long rows, int f, void *stream, ts_err *e);
/* y = a + b (residual connection); y may alias a or b. */
int rt_add(const void *a, const void *b, void *y, long long n, void *stream, ts_err *e);

/* P = softmax(scale * S) per row over `batch` matrices of seq x seq, with a
 * causal mask (column j > row i gets probability 0). P may alias S. */
int rt_softmax_causal_fwd(const void *s, void *p, long long batch, int seq, float scale, void *stream, ts_err *e);
/* dS = scale * P * (dP - sum_j(P dP)) per row of length cols; dS may alias dP. */
int rt_softmax_bwd(const void *p, const void *dp, void *ds, long long rows, int cols, float scale, void *stream,
                   ts_err *e);

/* Vocabulary-parallel embedding lookup: y[row] = table[ids[row] - first_id]
 * when the id falls in this GPU's rows [first_id, first_id + table_rows), else
 * zeros (the TP all-reduce that follows sums the shards). */
int rt_embedding_fwd(const void *table, const int32_t *ids, void *y, long long rows, int cols, long long first_id,
                     long long table_rows, void *stream, ts_err *e);

/* Softmax cross-entropy over logits[rows x vocab] with integer labels:
 * loss[row] (FP32) and dlogits = (softmax - onehot) / rows, fused in one pass
 * pair per row. dlogits may alias logits. */
int rt_cross_entropy(const void *logits, const int32_t *labels, float *loss, void *dlogits, long long rows,
                     int vocab, void *stream, ts_err *e);

/* One AdamW step on n parameters: FP32 master weights, gradients and moments,
 * BF16 copy of the weights written for the next forward. step counts from 1. */
typedef struct {
  float lr, beta1, beta2, eps, weight_decay;
  int step;
} rt_adamw_params;
int rt_adamw_step(float *master, void *weights_bf16, const float *grad, float *m, float *v, long long n,
                  rt_adamw_params p, void *stream, ts_err *e);

/* Fills with uniform random values in [-scale, scale] and never exactly zero
 * (calibration must not time zeros: the tensor cores run faster on them). */
int rt_fill_random_bf16(void *x, long long n, uint64_t seed, float scale, void *stream, ts_err *e);
int rt_fill_random_f32(float *x, long long n, uint64_t seed, float scale, void *stream, ts_err *e);
/* FP32 uniform in [lo, hi] (e.g. positive second moments). */
int rt_fill_random_f32_range(float *x, long long n, uint64_t seed, float lo, float hi, void *stream, ts_err *e);
int rt_fill_labels(int32_t *labels, long long n, int vocab, uint64_t seed, void *stream, ts_err *e);

/* Runs every kernel above on small random inputs (odd sizes included) and
 * compares with the plain-C reference; returns -1 naming the first op out of
 * tolerance. Needs a current CUDA device. Prints one line per op to `log`
 * when it is not NULL (a FILE*). */
int rt_ops_selfcheck(void *log, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

/* rt_ops_layer.h — the position and bias kernels of the zoo's layers (CUDA,
 * BF16 tensors, FP32 parameters of the rotation and FP32 bias gradients).
 *
 * RoPE as HF/Llama: in each head of d columns, the pair (i, i + d/2) is
 * rotated by the angle pos * inv_freq[i], pos = row % seq (the token's place
 * in its sequence). The inverse (the backward: the rotation's transpose)
 * rotates by -angle. Plain-C references: rt_ops_ref.h (rt_ref_rope,
 * rt_ref_bias_add, rt_ref_bias_grad); rt_ops_selfcheck() compares them. */
#ifndef RT_OPS_LAYER_H
#define RT_OPS_LAYER_H

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* In place on the first heads x d columns of each row of x [rows x ld]
 * (qkv: the query heads, then the key heads). inv_freq: d/2 floats on the device. */
int rt_rope(void *x, long long rows, int ld, int heads, int d, int seq, const float *inv_freq, int inverse,
            void *stream, ts_err *e);
/* y[rows x cols] += b (one BF16 row broadcast), in place; y's rows are ld apart (ld >= cols). */
int rt_bias_add(void *y, const void *b, long long rows, int cols, int ld, void *stream, ts_err *e);
/* db[j] += sum over rows of dy[r][j] (FP32 accumulators; dy BF16 [rows x cols], rows ld apart). */
int rt_bias_grad(const void *dy, float *db, long long rows, int cols, int ld, void *stream, ts_err *e);

/* The QK norm (Qwen3's q_norm / k_norm, Megatron-LM's qk_layernorm): an RMSNorm of each of `heads`
 * heads of d columns (d a multiple of 32, at most 256) at the start of each row of x [rows x ld]
 * (the query heads of qkv at x = qkv, the key heads at x = qkv + query columns). Forward in place:
 * saved [rows x heads d] keeps the input, rstd [rows x heads] each head's 1/rms = 1 / sqrt(mean(x^2)
 * + eps), and x becomes x rstd gamma (gamma: d BF16 weights). FP32 arithmetic, one BF16 rounding
 * per output. saved and rstd both NULL (the inference executor: no backward) skip them: x only,
 * the same values. Plain-C references rt_ref_qk_norm_fwd / _bwd (rt_ops_ref.h). */
int rt_qk_norm_fwd(void *x, int ld, void *saved, const void *gamma, float *rstd, long long rows, int heads, int d,
                   float eps, void *stream, ts_err *e);
/* Backward in place: dy (the first heads x d columns of each row of dx [rows x ld]) becomes
 * dx = rstd (gamma dy - xh mean(gamma dy xh)), xh = saved x rstd; dgamma[d] (FP32) += the sum over
 * rows and heads of dy xh. */
int rt_qk_norm_bwd(void *dx, int ld, const void *saved, const void *gamma, const float *rstd, float *dgamma,
                   long long rows, int heads, int d, void *stream, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

/* rt_ops_ref.h — plain-C references of the kernels in rt_ops.h.
 *
 * Same math, on FP32 arrays, accumulating in double, so the GPU kernels can be
 * checked against them (rt_ops_selfcheck) and the CPU tests can check the
 * references themselves. BF16 helpers convert exactly as the GPU does
 * (round to nearest even). */
#ifndef RT_OPS_REF_H
#define RT_OPS_REF_H

#include <stdint.h>

uint16_t rt_ref_bf16_from_float(float f);
float rt_ref_bf16_to_float(uint16_t h);

void rt_ref_layernorm_fwd(const float *x, const float *gamma, const float *beta, float *y, float *mean, float *rstd,
                          long long rows, int cols, float eps);
void rt_ref_layernorm_bwd_dx(const float *dy, const float *x, const float *gamma, const float *mean,
                             const float *rstd, float *dx, long long rows, int cols);
void rt_ref_rmsnorm_fwd(const float *x, const float *gamma, float *y, float *rstd, long long rows, int cols,
                        float eps);
void rt_ref_rmsnorm_bwd_dx(const float *dy, const float *x, const float *gamma, const float *rstd, float *dx,
                           long long rows, int cols);
void rt_ref_gelu_fwd(const float *x, float *y, long long n);
void rt_ref_gelu_bwd(const float *dy, const float *x, float *dx, long long n);
void rt_ref_swiglu_fwd(const float *x, float *y, long long rows, int f);
void rt_ref_swiglu_bwd(const float *dy, const float *x, float *dx, long long rows, int f);
void rt_ref_add(const float *a, const float *b, float *y, long long n);
void rt_ref_softmax_causal_fwd(const float *s, float *p, long long batch, int seq, float scale);
void rt_ref_softmax_bwd(const float *p, const float *dp, float *ds, long long rows, int cols, float scale);
void rt_ref_embedding_fwd(const float *table, const int32_t *ids, float *y, long long rows, int cols,
                           long long first_id, long long table_rows);
void rt_ref_cross_entropy(const float *logits, const int32_t *labels, float *loss, float *dlogits, long long rows,
                          int vocab);
/* master, m, v updated in place; w16 gets the rounded weights. */
void rt_ref_adamw_step(float *master, float *w16, const float *grad, float *m, float *v, long long n, float lr,
                       float beta1, float beta2, float eps, float weight_decay, int step);

/* rt_ops_layer.h's kernels: RoPE in place on the first heads x d columns of
 * each row of x [rows x ld] (position row % seq, inv_freq as the GPU gets it,
 * angle pos * inv_freq[i] in double), the bias row added in place, the bias
 * gradient's column sums added to db. */
void rt_ref_rope(float *x, long long rows, int ld, int heads, int d, int seq, const float *inv_freq, int inverse);
void rt_ref_bias_add(float *y, const float *b, long long rows, int cols, int ld);
void rt_ref_bias_grad(const float *dy, float *db, long long rows, int cols, int ld);
/* rt_ops_layer.h's QK norm: each of `heads` heads of d columns at the start of each row of x [rows x ld],
 * RMS-normed in place (sums in double), its input kept in saved [rows x heads d], 1/rms in rstd
 * [rows x heads] (either NULL: not kept); the backward turns dy in place into dx and adds dy xh into dgamma[d]. */
void rt_ref_qk_norm_fwd(float *x, int ld, float *saved, const float *gamma, float *rstd, long long rows, int heads,
                        int d, float eps);
void rt_ref_qk_norm_bwd(float *dx, int ld, const float *saved, const float *gamma, const float *rstd, float *dgamma,
                        long long rows, int heads, int d);

/* rt_mla.h's kernels on FP32 arrays (sums in double): kvb's heads into qkv's key-nope and value columns
 * (gather: the reverse, dqkv into dkvb); RoPE of the query heads' rope parts in place and of the shared
 * key kr into every key head (backward: the query parts rotated back in place, the key heads' rope-part
 * gradients summed and rotated back into dkr). */
void rt_ref_mla_kv_scatter(const float *kvb, float *qkv, long long rows, int ld, int heads, int nope, int rope, int dv);
void rt_ref_mla_kv_gather(const float *dqkv, float *dkvb, long long rows, int ld, int heads, int nope, int rope, int dv);
void rt_ref_mla_rope_fwd(float *qkv, int ld, const float *kr, int kr_ld, long long rows, int heads, int nope, int rope,
                         int seq, const float *inv_freq);
void rt_ref_mla_rope_bwd(float *dqkv, int ld, float *dkr, int kr_ld, long long rows, int heads, int nope, int rope,
                         int seq, const float *inv_freq);

#endif

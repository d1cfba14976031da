/* rt_mla.h — the layout kernels of multi-head latent attention (DeepSeek-V2/V3;
 * the executor's exec_mla.c, the reference's exec_ref_mla.c): they move the
 * latent projections' outputs into the [q | k | v] buffer the attention reads
 * and the gradients back, and apply RoPE to the rope parts (CUDA, BF16
 * tensors, FP32 arithmetic, one BF16 rounding per output).
 *
 * Layout, per row (token) of qkv [rows x ld]: q at columns [0, Qc) (Qc =
 * heads x dqk, dqk = nope + rope; head j's [nope | rope] at j dqk), k at [Qc,
 * 2 Qc) (the same per head), v at [2 Qc, 2 Qc + heads dv). kv_b's output
 * kvb [rows x heads (nope + dv)] holds head j's [k_nope | v] at j (nope + dv).
 * RoPE as rt_rope (rt_ops_layer.h) on rope columns: pairs (i, i + rope / 2),
 * angle (row % seq) inv_freq[i], inverse by -angle.
 * Plain-C references: rt_ref_mla_* (rt_ops_ref.h); rt_ops_selfcheck() compares them. */
#ifndef RT_MLA_H
#define RT_MLA_H

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Forward: each head's k_nope and v from kvb into qkv's key-nope and value columns (the rope columns
 * and q untouched). Backward (gather): the same columns of dqkv into dkvb [rows x heads (nope + dv)]. */
int rt_mla_kv_scatter(const void *kvb, void *qkv, long long rows, int ld, int heads, int nope, int rope, int dv,
                      void *stream, ts_err *e);
int rt_mla_kv_gather(const void *dqkv, void *dkvb, long long rows, int ld, int heads, int nope, int rope, int dv,
                     void *stream, ts_err *e);
/* Forward: each query head's rope part rotated in place; the shared key kr [rows x kr_ld] (its first
 * rope columns; kv_a's output past c_kv) rotated into every key head's rope columns (kr untouched).
 * Backward: each query head's rope-part gradient rotated back in place; the shared key's gradient =
 * the rotation back of the sum over the heads of their key rope-part gradients (FP32 sum), written to
 * dkr's first rope columns. inv_freq: rope / 2 floats on the device. */
int rt_mla_rope_fwd(void *qkv, int ld, const void *kr, int kr_ld, long long rows, int heads, int nope, int rope,
                    int seq, const float *inv_freq, void *stream, ts_err *e);
int rt_mla_rope_bwd(void *dqkv, int ld, void *dkr, int kr_ld, long long rows, int heads, int nope, int rope, int seq,
                    const float *inv_freq, void *stream, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

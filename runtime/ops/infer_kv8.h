/* infer_kv8.h — the FP8 KV cache (a plan's "kv_cache": "fp8"): keys and values
 * stored as E4M3 codes with one FP32 scale per (sequence, KV head, position)
 * for K and one for V, scale = amax / 448 over the head vector (the BF16
 * values the BF16 cache would hold), code = E4M3(x / scale) rounded to nearest
 * even, saturating. Dynamic per-position scales need no calibration pass and
 * follow outlier tokens; they cost 4 bytes per head vector (head_dim 128:
 * 3.1 % on top of 1 byte an element), read once per position by the decode
 * attention (infer_decode_attention2_fp8, infer_decode.h).
 *
 * Layouts: codes [batch x kvl x max_seq x d] bytes, scales [batch x kvl x
 * max_seq] floats (as the BF16 cache, infer_kernels.h). Plain-C references:
 * infer_ref_kv8_quantize / infer_ref_kv8_dequantize (infer_ref.h). Every
 * function launches on `stream` and returns 0 or -1 with e. */
#ifndef INFER_KV8_H
#define INFER_KV8_H

#include "infer_kernels.h"
#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define INFER_KV8_MAX 448.0f /* the largest finite E4M3 value */

typedef struct {
  void *k, *v;     /* codes */
  float *ks, *vs;  /* scales */
} infer_kv8;

/* Bytes of one layer's FP8 cache (K and V, codes and scales). */
double infer_kv8_layer_bytes(const infer_attn_dims *a);

/* infer_rope_scatter with the FP8 cache: Q head-major into q (BF16), K and V
 * quantized on append at positions pos0 .. pos0+seq-1 of c; when k_stage and
 * v_stage are not NULL (prefill) the BF16 K and V also go there, [batch x kvl
 * x seq x d], for the prefill attention (which runs on BF16 as with the BF16
 * cache). head_dim even and <= 256. */
int infer_rope_scatter_fp8(const void *qkv, void *q, const infer_kv8 *c, void *k_stage, void *v_stage,
                           const infer_attn_dims *a, int seq, long long pos0, void *stream, ts_err *e);

/* rows head vectors x[rows x d] (BF16) -> codes[rows x d], scales[rows]: the
 * same quantizer (benchmarks and checks fill caches with it). d <= 256. */
int infer_kv8_quantize(const void *x, void *codes, float *scales, long long rows, int head_dim, void *stream,
                       ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

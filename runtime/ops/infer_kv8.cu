/* infer_kv8.cu — the FP8 KV cache: RoPE + quantize on append, and the
 * quantizer alone (infer_kv8.h). A warp quantizes one head vector: each lane
 * holds up to 8 of its elements, the warp's amax gives the scale. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "gpu_check.h"
#include "infer_kv8.h"
#include "infer_rope.cuh"

typedef __nv_bfloat16 bf16;

#define KV8_MAX_PER_LANE 8 /* head_dim <= 256 */

/* The warp's head vector: lane holds val[n] at columns col[n] (n < cnt);
 * writes codes[col] and *scale (lane 0). Values are BF16-rounded already. */
__device__ __forceinline__ void kv8_store_warp(const float *val, const int *col, int cnt, uint8_t *codes,
                                               float *scale) {
  float amax = 0.f;
#pragma unroll
  for (int n = 0; n < KV8_MAX_PER_LANE; n++)
    if (n < cnt) amax = fmaxf(amax, fabsf(val[n]));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float inv = amax > 0.f ? INFER_KV8_MAX / amax : 0.f;
#pragma unroll
  for (int n = 0; n < KV8_MAX_PER_LANE; n++)
    if (n < cnt) codes[col[n]] = (uint8_t)__nv_cvt_float_to_fp8(__fmul_rn(val[n], inv), __NV_SATFINITE, __NV_E4M3);
  if ((threadIdx.x & 31) == 0) *scale = __fdiv_rn(amax, INFER_KV8_MAX);
}

__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16(x)); }

/* Block: one token (b * seq + s); warp: one head at a time (Q, K or V), lane:
 * pairs (i, i + d/2) for i = lane, lane + 32, ... */
__global__ void rope_scatter_fp8_kernel(const bf16 *qkv, bf16 *q, uint8_t *kc, uint8_t *vc, float *ks, float *vs,
                                        bf16 *kst, bf16 *vst, int hl, int kvl, int d, long long max_seq, int seq,
                                        long long pos0, float log2_theta) {
  const long long t = blockIdx.x;
  const int b = (int)(t / seq), s = (int)(t % seq);
  const long long pos = pos0 + s;
  const int half = d / 2, heads = hl + 2 * kvl, lane = threadIdx.x & 31;
  const int warps = blockDim.x >> 5, per = (half + 31) / 32;
  const bf16 *row = qkv + t * (long long)heads * d;
  for (int hh = threadIdx.x >> 5; hh < heads; hh += warps) {
    float val[KV8_MAX_PER_LANE];
    int col[KV8_MAX_PER_LANE], cnt = 0;
    for (int n = 0; n < KV8_MAX_PER_LANE / 2; n++) {
      const int i = lane + 32 * n;
      if (n >= per || i >= half) break;
      float x1 = __bfloat162float(row[hh * d + i]), x2 = __bfloat162float(row[hh * d + i + half]);
      if (hh < hl + kvl && log2_theta > 0.f) infer_rope_rotate(x1, x2, pos, i, d, log2_theta);
      val[cnt] = round_bf16(x1), col[cnt++] = i;
      val[cnt] = round_bf16(x2), col[cnt++] = i + half;
    }
    if (hh < hl) {
      bf16 *dst = q + (((long long)b * hl + hh) * seq + s) * d;
      for (int n = 0; n < cnt; n++) dst[col[n]] = __float2bfloat16(val[n]);
      continue;
    }
    const bool is_k = hh < hl + kvl;
    const int j = is_k ? hh - hl : hh - hl - kvl;
    const long long slot = ((long long)b * kvl + j) * max_seq + pos;
    bf16 *stage = is_k ? kst : vst;
    if (stage) {
      bf16 *dst = stage + (((long long)b * kvl + j) * seq + s) * d;
      for (int n = 0; n < cnt; n++) dst[col[n]] = __float2bfloat16(val[n]);
    }
    kv8_store_warp(val, col, cnt, (is_k ? kc : vc) + slot * d, (is_k ? ks : vs) + slot);
  }
}

extern "C" int infer_rope_scatter_fp8(const void *qkv, void *q, const infer_kv8 *c, void *k_stage, void *v_stage,
                                      const infer_attn_dims *a, int seq, long long pos0, void *stream, ts_err *e) {
  if (a->head_dim % 2 || a->head_dim > 32 * KV8_MAX_PER_LANE || seq < 1 || pos0 < 0 || pos0 + seq > a->max_seq)
    return ts_fail_sys(e, "infer_rope_scatter_fp8: bad shape (head_dim %d: even and <= %d, seq %d, pos0 %lld, "
                       "max_seq %lld)", a->head_dim, 32 * KV8_MAX_PER_LANE, seq, pos0, a->max_seq);
  if (!c || !c->k || !c->v || !c->ks || !c->vs || (!k_stage) != (!v_stage))
    return ts_fail_sys(e, "infer_rope_scatter_fp8: the FP8 cache, its scales or one of the two stages is missing");
  long long tokens = (long long)a->batch * seq;
  if (tokens <= 0) return 0;
  float l2t = a->rope_theta > 0 ? (float)log2(a->rope_theta) : 0.f;
  rope_scatter_fp8_kernel<<<(unsigned)tokens, 256, 0, (cudaStream_t)stream>>>(
      (const bf16 *)qkv, (bf16 *)q, (uint8_t *)c->k, (uint8_t *)c->v, c->ks, c->vs, (bf16 *)k_stage,
      (bf16 *)v_stage, a->hl, a->kvl, a->head_dim, a->max_seq, seq, pos0, l2t);
  CUDA_CHECK(e, cudaGetLastError());
  return 0;
}

/* Warp per row, lane over columns lane, lane + 32, ... */
__global__ void kv8_quantize_kernel(const bf16 *x, uint8_t *codes, float *scales, long long rows, int d) {
  const long long r = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  float val[KV8_MAX_PER_LANE];
  int col[KV8_MAX_PER_LANE], cnt = 0;
  for (int c = lane; c < d && cnt < KV8_MAX_PER_LANE; c += 32) val[cnt] = __bfloat162float(x[r * d + c]), col[cnt++] = c;
  kv8_store_warp(val, col, cnt, codes + r * d, scales + r);
}

extern "C" int infer_kv8_quantize(const void *x, void *codes, float *scales, long long rows, int head_dim,
                                  void *stream, ts_err *e) {
  if (head_dim < 1 || head_dim > 32 * KV8_MAX_PER_LANE || rows < 0)
    return ts_fail_sys(e, "infer_kv8_quantize: head_dim %d (1 .. %d), rows %lld", head_dim, 32 * KV8_MAX_PER_LANE,
                       rows);
  if (rows == 0) return 0;
  kv8_quantize_kernel<<<(unsigned)((rows + 7) / 8), 256, 0, (cudaStream_t)stream>>>((const bf16 *)x, (uint8_t *)codes,
                                                                                  scales, rows, head_dim);
  CUDA_CHECK(e, cudaGetLastError());
  return 0;
}

extern "C" double infer_kv8_layer_bytes(const infer_attn_dims *a) {
  return 2.0 * a->batch * a->kvl * (double)a->max_seq * (a->head_dim + sizeof(float));
}

/* infer_decode.cu — split-K decode attention (infer_decode.h). */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "gpu_check.h"
#include "infer_decode.h"
#include "ops_device.cuh"

typedef __nv_bfloat16 bf16;

#define DEC_CUDA(e, call) CUDA_CHECK(e, call)
#define DEC_LAUNCHED(e) DEC_CUDA(e, cudaGetLastError())

/* ---- split-K decode attention ---------------------------------------------------
 * Block (split, kv head j, sequence b): positions [split * chunk, +chunk) of
 * the cache; warp w takes groups of DEC2_U consecutive positions, every
 * DEC2_WARPS-th group, and loads the group's keys and values before the
 * online softmax (base 2) uses them; the warps are merged through shared
 * memory into one FP32 partial (max, sum, output) per query head and split,
 * which the combine kernel reduces. */

#define DEC2_WARPS 8
#define DEC2_U 4

static long long decode2_chunk(const infer_attn_dims *a, long long len) {
  long long units = (long long)a->batch * a->kvl, want = (4LL * sm_count() + units - 1) / units;
  long long chunk = (len + want - 1) / want;
  return chunk < DEC2_WARPS * DEC2_U ? DEC2_WARPS * DEC2_U : chunk;
}

extern "C" size_t infer_decode2_partial_bytes(const infer_attn_dims *a, long long len) {
  long long chunk = decode2_chunk(a, len), nsplit = (len + chunk - 1) / chunk;
  return (size_t)a->batch * a->hl * nsplit * (a->head_dim + 2) * sizeof(float);
}

template <int D> __device__ __forceinline__ void load_lane(const bf16 *p, float *x) {
  if (D == 128) {
    uint2 u = *(const uint2 *)p;
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
    float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
    x[0] = a.x, x[1] = a.y, x[2] = b.x, x[3] = b.y;
  } else {
    float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)p);
    x[0] = a.x, x[1] = a.y;
  }
}

/* Two E4M3 codes -> two floats (exact: E4M3 values are halves). */
__device__ __forceinline__ float2 e4m3x2_to_float2(__nv_fp8x2_storage_t v) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(v, __NV_E4M3);
  return __half22float2(*(const __half2 *)&h);
}

template <int D> __device__ __forceinline__ void load_lane(const uint8_t *p, float *x) {
  if (D == 128) {
    uint32_t u = *(const uint32_t *)p;
    float2 a = e4m3x2_to_float2((__nv_fp8x2_storage_t)(u & 0xffffu)), b = e4m3x2_to_float2((__nv_fp8x2_storage_t)(u >> 16));
    x[0] = a.x, x[1] = a.y, x[2] = b.x, x[3] = b.y;
  } else {
    float2 a = e4m3x2_to_float2(*(const __nv_fp8x2_storage_t *)p);
    x[0] = a.x, x[1] = a.y;
  }
}

/* The cache's element type: BF16 (no scales) or E4M3 with one FP32 scale per
 * (sequence, KV head, position) for K and one for V (infer_kv8.h). One kernel
 * body serves both: the FP8 one loads codes, multiplies each score by its key
 * scale and each weight by its value scale. */
struct kv_bf16 {
  typedef bf16 T;
  static constexpr bool scaled = false;
};
struct kv_e4m3 {
  typedef uint8_t T;
  static constexpr bool scaled = true;
};

template <int D, int G, typename KV>
__global__ void __launch_bounds__(DEC2_WARPS * 32)
    decode2_partial_kernel(const bf16 *q, const typename KV::T *kc, const typename KV::T *vc, const float *ks,
                           const float *vs, float *part, int hl, int kvl, long long max_seq, long long len,
                           long long chunk, int nsplit, float qscale) {
  constexpr int E = D / 32;
  const int split = blockIdx.x, j = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float qf[G][E], m[G], l[G], acc[G][E];
#pragma unroll
  for (int i = 0; i < G; i++) {
    load_lane<D>(q + ((long long)b * hl + j * G + i) * D + lane * E, qf[i]);
#pragma unroll
    for (int x = 0; x < E; x++) qf[i][x] *= qscale, acc[i][x] = 0.f;
    m[i] = -INFINITY, l[i] = 0.f;
  }
  const long long srow = ((long long)b * kvl + j) * max_seq, base = srow * D + lane * E;
  const long long p0 = (long long)split * chunk, p1 = p0 + chunk < len ? p0 + chunk : len;
  for (long long g0 = p0 + (long long)warp * DEC2_U; g0 < p1; g0 += DEC2_WARPS * DEC2_U) {
    float k[DEC2_U][E], v[DEC2_U][E], ksc[DEC2_U], vsc[DEC2_U];
#pragma unroll
    for (int u = 0; u < DEC2_U; u++)
      if (g0 + u < p1) {
        load_lane<D>(kc + base + (g0 + u) * D, k[u]);
        load_lane<D>(vc + base + (g0 + u) * D, v[u]);
        if (KV::scaled) ksc[u] = ks[srow + g0 + u], vsc[u] = vs[srow + g0 + u];
      }
#pragma unroll
    for (int u = 0; u < DEC2_U; u++) {
      if (g0 + u >= p1) break;
#pragma unroll
      for (int i = 0; i < G; i++) {
        float s = 0.f;
#pragma unroll
        for (int x = 0; x < E; x++) s = fmaf(qf[i][x], k[u][x], s);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (KV::scaled) s *= ksc[u];
        const float mn = fmaxf(m[i], s), c = exp2f(m[i] - mn), pe = exp2f(s - mn);
        const float pv = KV::scaled ? pe * vsc[u] : pe;
        l[i] = l[i] * c + pe;
#pragma unroll
        for (int x = 0; x < E; x++) acc[i][x] = fmaf(pv, v[u][x], acc[i][x] * c);
        m[i] = mn;
      }
    }
  }
  __shared__ float sm_m[DEC2_WARPS][G], sm_l[DEC2_WARPS][G], sm_acc[DEC2_WARPS][G][D];
#pragma unroll
  for (int i = 0; i < G; i++) {
    if (lane == 0) sm_m[warp][i] = m[i], sm_l[warp][i] = l[i];
#pragma unroll
    for (int x = 0; x < E; x++) sm_acc[warp][i][lane * E + x] = acc[i][x];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < G * D; idx += blockDim.x) {
    const int i = idx / D, dd = idx % D;
    float M = -INFINITY;
    for (int w = 0; w < DEC2_WARPS; w++) M = fmaxf(M, sm_m[w][i]);
    float L = 0.f, A = 0.f;
    for (int w = 0; w < DEC2_WARPS; w++) {
      const float f = sm_m[w][i] == -INFINITY ? 0.f : exp2f(sm_m[w][i] - M);
      L += sm_l[w][i] * f, A += sm_acc[w][i][dd] * f;
    }
    float *pp = part + (((long long)b * hl + j * G + i) * nsplit + split) * (D + 2);
    if (dd == 0) pp[0] = M, pp[1] = L;
    pp[2 + dd] = A;
  }
}

__global__ void decode2_combine_kernel(const float *part, bf16 *out, int nsplit, int D) {
  const long long bh = blockIdx.x; /* b * hl + h */
  const float *pp = part + bh * nsplit * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < nsplit; s++) M = fmaxf(M, pp[s * (D + 2)]);
  for (int dd = threadIdx.x; dd < D; dd += blockDim.x) {
    float L = 0.f, A = 0.f;
    for (int s = 0; s < nsplit; s++) {
      const float *q = pp + s * (D + 2);
      const float f = q[0] == -INFINITY ? 0.f : exp2f(q[0] - M);
      L += q[1] * f, A += q[2 + dd] * f;
    }
    out[bh * D + dd] = __float2bfloat16(A / L);
  }
}

template <int D, int G, typename KV>
static void launch_dec2(dim3 grid, cudaStream_t st, const bf16 *q, const void *kc, const void *vc, const float *ks,
                        const float *vs, float *part, const infer_attn_dims *a, long long len, long long chunk,
                        int nsplit, float qscale) {
  decode2_partial_kernel<D, G, KV><<<grid, DEC2_WARPS * 32, 0, st>>>(
      q, (const typename KV::T *)kc, (const typename KV::T *)vc, ks, vs, part, a->hl, a->kvl, a->max_seq, len, chunk,
      nsplit, qscale);
}

/* The split-K decode attention over a cache of element type KV (scales ks, vs:
 * FP8 only), then the combine. */
template <typename KV>
static int decode2_run(const char *who, const void *q, const void *k_cache, const void *v_cache, const float *ks,
                       const float *vs, void *out, void *partial, const infer_attn_dims *a, long long len,
                       void *stream, ts_err *e) {
  const int D = a->head_dim;
  if (a->kvl < 1 || a->hl % a->kvl || len < 1 || len > a->max_seq)
    return ts_fail_sys(e, "%s: bad shape (heads %d, kv heads %d, len %lld, max_seq %lld)", who, a->hl, a->kvl, len,
                       a->max_seq);
  const int G = a->hl / a->kvl;
  const long long chunk = decode2_chunk(a, len);
  const int nsplit = (int)((len + chunk - 1) / chunk);
  dim3 grid((unsigned)nsplit, (unsigned)a->kvl, (unsigned)a->batch);
  cudaStream_t st = (cudaStream_t)stream;
  const float qscale = (float)(1.4426950408889634 / sqrt((double)D)); /* base 2 */
  const bf16 *Q = (const bf16 *)q;
  float *P = (float *)partial;
#define DEC2_CASE(d_, g_)                                                                                    \
  if (D == d_ && G == g_) launch_dec2<d_, g_, KV>(grid, st, Q, k_cache, v_cache, ks, vs, P, a, len, chunk, nsplit, qscale); \
  else
  DEC2_CASE(128, 1) DEC2_CASE(128, 2) DEC2_CASE(128, 3) DEC2_CASE(128, 4) DEC2_CASE(128, 5) DEC2_CASE(128, 6)
  DEC2_CASE(128, 7) DEC2_CASE(128, 8)
  DEC2_CASE(64, 1) DEC2_CASE(64, 2) DEC2_CASE(64, 4) DEC2_CASE(64, 7) DEC2_CASE(64, 8) DEC2_CASE(64, 16)
  return ts_fail_sys(e, "%s: head_dim %d with %d query heads per KV head is not built "
                        "(head_dim 64: 1, 2, 4, 7, 8 or 16 heads per KV head; 128: 1 to 8)", who, D, G);
#undef DEC2_CASE
  DEC_LAUNCHED(e);
  decode2_combine_kernel<<<(unsigned)((long long)a->batch * a->hl), D, 0, st>>>(P, (bf16 *)out, nsplit, D);
  DEC_LAUNCHED(e);
  return 0;
}

extern "C" int infer_decode_attention2(const void *q, const void *k_cache, const void *v_cache, void *out,
                                       void *partial, const infer_attn_dims *a, long long len, void *stream,
                                       ts_err *e) {
  return decode2_run<kv_bf16>("infer_decode_attention2", q, k_cache, v_cache, NULL, NULL, out, partial, a, len, stream,
                              e);
}

extern "C" int infer_decode_attention2_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                           const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  if (!c || !c->k || !c->v || !c->ks || !c->vs)
    return ts_fail_sys(e, "infer_decode_attention2_fp8: the FP8 cache or its scales are missing");
  return decode2_run<kv_e4m3>("infer_decode_attention2_fp8", q, c->k, c->v, c->ks, c->vs, out, partial, a, len,
                              stream, e);
}

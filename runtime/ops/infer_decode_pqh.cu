/* infer_decode_pqh.cu — decode attention read once per query head (infer_decode_pqh.h): the kernel of
 * dev/decode_attn_pqh/pqh.cu run "aliased" (cache head h / G). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <math.h>
#include <stdint.h>

#include <type_traits>

#include "gpu_check.h"
#include "infer_decode_pqh.h"

#define PQ_D 128
#define PQ_WARPS 4
#define PQ_THREADS (PQ_WARPS * 32)
#define PQ_U 4                            /* steps of 2 positions a warp with their loads in flight */
#define PQ_TILE (PQ_WARPS * 2 * PQ_U)     /* positions a block iteration: 32 */
#define PQ_TARGET_BLOCKS 2048             /* about 16 blocks of 128 threads on each of 132 SMs */
#define PQ_MIN_CHUNK 128

typedef __nv_bfloat16 bf16;

/* 8 BF16 (16 bytes) to floats */
__device__ __forceinline__ void pq_cvt8(uint4 x, float f[8]) {
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; i++) f[2 * i] = __uint_as_float(w[i] << 16), f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}
/* 8 E4M3 codes (8 bytes) to floats */
__device__ __forceinline__ void pq_cvt8(uint2 x, float f[8]) {
  const uint32_t w[2] = {x.x, x.y};
#pragma unroll
  for (int i = 0; i < 2; i++) {
    __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w[i] & 0xffff), __NV_E4M3);
    __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w[i] >> 16), __NV_E4M3);
    float2 a = __half22float2(*(__half2 *)&lo), b = __half22float2(*(__half2 *)&hi);
    f[4 * i] = a.x, f[4 * i + 1] = a.y, f[4 * i + 2] = b.x, f[4 * i + 3] = b.y;
  }
}

/* One block: query head h = blockIdx.x, slice blockIdx.y, sequence blockIdx.z. A half warp
 * (16 lanes, 8 dimensions each) takes one position; a warp 2 positions a step, PQ_U steps'
 * keys and values loaded before use. Scores in the log2 domain (q times log2(e)/sqrt(d)). */
template <bool FP8>
__global__ void __launch_bounds__(PQ_THREADS) pq_kernel(const bf16 *__restrict__ q, const void *__restrict__ kc,
                                                        const void *__restrict__ vc, const float *__restrict__ ks,
                                                        const float *__restrict__ vs, float *__restrict__ part,
                                                        bf16 *__restrict__ out, int hl, int kvc, int kv_div,
                                                        long long max_seq, long long len, long long chunk) {
  typedef typename std::conditional<FP8, uint2, uint4>::type vec;
  const int h = blockIdx.x, split = blockIdx.y, b = blockIdx.z, nsplit = gridDim.y;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, half = lane >> 4, sub = lane & 15;
  const long long p0 = (long long)split * chunk, p1 = min(len, p0 + chunk);
  const size_t row0 = ((size_t)b * kvc + h / kv_div) * (size_t)max_seq;
  const vec *K = (const vec *)kc + row0 * (PQ_D / 8) + sub, *V = (const vec *)vc + row0 * (PQ_D / 8) + sub;
  float qf[8], acc[8], m = -INFINITY, l = 0;
  pq_cvt8(*((const uint4 *)(q + ((size_t)b * hl + h) * PQ_D) + sub), qf);
  const float qs = 1.4426950408889634f / sqrtf((float)PQ_D);
#pragma unroll
  for (int i = 0; i < 8; i++) qf[i] *= qs, acc[i] = 0.f;
  for (long long base = p0 + warp * 2 * PQ_U; base < p1; base += PQ_TILE) {
    vec kr[PQ_U], vr[PQ_U];
    float s[PQ_U], vsc[PQ_U];
#pragma unroll
    for (int u = 0; u < PQ_U; u++) {
      const long long p = base + 2 * u + half;
      if (p < p1) {
        kr[u] = __ldg(K + p * (PQ_D / 8)), vr[u] = __ldg(V + p * (PQ_D / 8));
        s[u] = FP8 ? __ldg(ks + row0 + p) : 1.f, vsc[u] = FP8 ? __ldg(vs + row0 + p) : 1.f;
      } else {
        kr[u] = vec{}, vr[u] = vec{}, s[u] = 0.f, vsc[u] = 0.f;
      }
    }
    float mnew = m;
#pragma unroll
    for (int u = 0; u < PQ_U; u++) {
      float kf[8], dot = 0.f;
      pq_cvt8(kr[u], kf);
#pragma unroll
      for (int i = 0; i < 8; i++) dot = fmaf(qf[i], kf[i], dot);
#pragma unroll
      for (int o = 8; o; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      s[u] = base + 2 * u + half < p1 ? dot * s[u] : -INFINITY;
      mnew = fmaxf(mnew, s[u]);
    }
    if (mnew != -INFINITY) { /* this half warp had a position */
      const float corr = exp2f(m - mnew);
      l *= corr;
#pragma unroll
      for (int i = 0; i < 8; i++) acc[i] *= corr;
#pragma unroll
      for (int u = 0; u < PQ_U; u++) {
        float vf[8];
        const float w = exp2f(s[u] - mnew);
        l += w;
        const float wv = w * vsc[u];
        pq_cvt8(vr[u], vf);
#pragma unroll
        for (int i = 0; i < 8; i++) acc[i] = fmaf(wv, vf[i], acc[i]);
      }
      m = mnew;
    }
  }
  { /* the two half warps */
    const float mo = __shfl_xor_sync(0xffffffffu, m, 16), lo = __shfl_xor_sync(0xffffffffu, l, 16);
    const float mm = fmaxf(m, mo), a = mm == -INFINITY ? 0.f : exp2f(m - mm), c = mm == -INFINITY ? 0.f : exp2f(mo - mm);
    l = l * a + lo * c;
#pragma unroll
    for (int i = 0; i < 8; i++) acc[i] = acc[i] * a + __shfl_xor_sync(0xffffffffu, acc[i], 16) * c;
    m = mm;
  }
  __shared__ float sm[PQ_WARPS], sl[PQ_WARPS], sacc[PQ_WARPS][PQ_D];
  if (lane == 0) sm[warp] = m, sl[warp] = l;
  if (half == 0)
#pragma unroll
    for (int i = 0; i < 8; i++) sacc[warp][sub * 8 + i] = acc[i];
  __syncthreads();
  const int t = threadIdx.x;
  float mm = -INFINITY, L = 0.f, O = 0.f;
#pragma unroll
  for (int w = 0; w < PQ_WARPS; w++) mm = fmaxf(mm, sm[w]);
#pragma unroll
  for (int w = 0; w < PQ_WARPS; w++) {
    const float f = sm[w] == -INFINITY ? 0.f : exp2f(sm[w] - mm);
    L += sl[w] * f, O += sacc[w][t] * f;
  }
  const size_t bh = (size_t)b * hl + h;
  if (nsplit == 1) {
    out[bh * PQ_D + t] = __float2bfloat16(O / L);
  } else {
    float *pp = part + (bh * nsplit + split) * (PQ_D + 2);
    if (t == 0) pp[0] = mm, pp[1] = L;
    pp[2 + t] = O;
  }
}

/* One block per (query head, sequence): thread t merges dimension t over the slices. */
__global__ void __launch_bounds__(PQ_D) pq_combine(const float *__restrict__ part, bf16 *__restrict__ out, int hl,
                                                   int nsplit) {
  const size_t bh = (size_t)blockIdx.y * hl + blockIdx.x;
  const float *pp = part + bh * nsplit * (PQ_D + 2);
  const int t = threadIdx.x;
  float mm = -INFINITY, L = 0.f, O = 0.f;
  for (int s = 0; s < nsplit; s++) mm = fmaxf(mm, pp[s * (PQ_D + 2)]);
  for (int s = 0; s < nsplit; s++) {
    const float f = exp2f(pp[s * (PQ_D + 2)] - mm);
    L += pp[s * (PQ_D + 2) + 1] * f, O += pp[s * (PQ_D + 2) + 2 + t] * f;
  }
  out[bh * PQ_D + t] = __float2bfloat16(O / L);
}

/* Slices of the positions (and positions a slice, *chunk) for batch x hl blocks over len positions: about
 * PQ_TARGET_BLOCKS blocks, a slice at least PQ_MIN_CHUNK positions, a multiple of the tile. */
static int pq_splits(int batch, int hl, long long len, long long *chunk) {
  const long long heads = (long long)batch * hl, most = (len + PQ_MIN_CHUNK - 1) / PQ_MIN_CHUNK;
  long long want = (PQ_TARGET_BLOCKS + heads - 1) / heads;
  if (want > most) want = most;
  if (want < 1) want = 1;
  long long c = (len + want - 1) / want;
  c = (c + PQ_TILE - 1) / PQ_TILE * PQ_TILE;
  *chunk = c;
  return (int)((len + c - 1) / c);
}

extern "C" size_t infer_decode_pqh_partial_bytes(const infer_attn_dims *a, long long len) {
  long long chunk;
  const int ns = pq_splits(a->batch, a->hl, len < 1 ? 1 : len, &chunk);
  return (size_t)a->batch * a->hl * ns * (a->head_dim + 2) * sizeof(float);
}

static int pq_launch(int fp8, const void *q, const void *k, const void *v, const float *ks, const float *vs, void *out,
                     void *partial, const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  if (a->head_dim != PQ_D) return ts_fail_sys(e, "infer_decode_pqh: head_dim %d is not 128", a->head_dim);
  if (a->kvl < 1 || a->hl < 1 || a->hl % a->kvl)
    return ts_fail_sys(e, "infer_decode_pqh: %d query heads are not a multiple of %d KV heads", a->hl, a->kvl);
  if (len < 1 || len > a->max_seq)
    return ts_fail_sys(e, "infer_decode_pqh: length %lld not in 1..%lld", len, a->max_seq);
  if (a->batch < 1 || a->batch > 65535)
    return ts_fail_sys(e, "infer_decode_pqh: batch %d not in 1..65535", a->batch);
  const int kv_div = a->hl / a->kvl; /* query head h reads KV head h / G */
  long long chunk;
  const int ns = pq_splits(a->batch, a->hl, len, &chunk);
  cudaStream_t st = (cudaStream_t)stream;
  dim3 grid((unsigned)a->hl, (unsigned)ns, (unsigned)a->batch);
  if (fp8)
    pq_kernel<true><<<grid, PQ_THREADS, 0, st>>>((const bf16 *)q, k, v, ks, vs, (float *)partial, (bf16 *)out, a->hl,
                                                 a->kvl, kv_div, a->max_seq, len, chunk);
  else
    pq_kernel<false><<<grid, PQ_THREADS, 0, st>>>((const bf16 *)q, k, v, NULL, NULL, (float *)partial, (bf16 *)out,
                                                  a->hl, a->kvl, kv_div, a->max_seq, len, chunk);
  CUDA_CHECK_LAUNCH(e);
  if (ns > 1) {
    pq_combine<<<dim3((unsigned)a->hl, (unsigned)a->batch), PQ_D, 0, st>>>((const float *)partial, (bf16 *)out, a->hl, ns);
    CUDA_CHECK_LAUNCH(e);
  }
  return 0;
}

extern "C" int infer_decode_pqh(const void *q, const void *k_cache, const void *v_cache, void *out, void *partial,
                                const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  return pq_launch(0, q, k_cache, v_cache, NULL, NULL, out, partial, a, len, stream, e);
}

extern "C" int infer_decode_pqh_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                    const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  return pq_launch(1, q, c->k, c->v, c->ks, c->vs, out, partial, a, len, stream, e);
}

/* moe_route.cu — the MoE routing kernels (contract and reference: moe_route.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "moe_route.h"

#define FULL 0xffffffffu
#define VEC 8 /* bf16 per 16-byte load */

static __device__ __forceinline__ void unpack(uint4 v, float *f) {
  const __nv_bfloat162 *p = reinterpret_cast<const __nv_bfloat162 *>(&v);
  for (int i = 0; i < 4; i++) {
    float2 x = __bfloat1622float2(p[i]);
    f[2 * i] = x.x, f[2 * i + 1] = x.y;
  }
}

static __device__ __forceinline__ uint4 pack(const float *f) {
  uint4 v;
  __nv_bfloat162 *p = reinterpret_cast<__nv_bfloat162 *>(&v);
  for (int i = 0; i < 4; i++) p[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

/* One warp per token; lane l holds experts l, l + 32, ... */
__global__ void topk_kernel(const float *logits, int t, int E, int k, int32_t *idx, float *w) {
  const int lane = threadIdx.x & 31, r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= t) return;
  const float *l = logits + (size_t)r * E;
  float v[MOE_ROUTE_MAX_E / 32];
  unsigned taken = 0; /* bit q: expert lane + 32 q chosen */
  const int per = (E + 31) / 32;
  for (int q = 0; q < per; q++) v[q] = lane + 32 * q < E ? l[lane + 32 * q] : -INFINITY;
  float chosen[MOE_ROUTE_MAX_K];
  int cidx[MOE_ROUTE_MAX_K];
  for (int j = 0; j < k; j++) {
    float bv = -INFINITY;
    int bi = 0x7fffffff;
    for (int q = 0; q < per; q++) {
      int e = lane + 32 * q;
      if (e < E && !(taken >> q & 1u) && (v[q] > bv || (v[q] == bv && e < bi))) bv = v[q], bi = e;
    }
    for (int o = 16; o; o >>= 1) {
      float ov = __shfl_xor_sync(FULL, bv, o);
      int oi = __shfl_xor_sync(FULL, bi, o);
      if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
    }
    if ((bi & 31) == lane) taken |= 1u << (bi / 32);
    chosen[j] = bv, cidx[j] = bi;
  }
  if (lane == 0) {
    float sum = 0.0f;
    for (int j = 0; j < k; j++) sum = sum + expf(chosen[j] - chosen[0]);
    for (int j = 0; j < k; j++) {
      idx[(size_t)r * k + j] = cidx[j];
      w[(size_t)r * k + j] = expf(chosen[j] - chosen[0]) / sum;
    }
  }
}

/* Block e counts the copies routed to expert e. */
__global__ void count_kernel(const int32_t *idx, long long n, int32_t *count) {
  const int e = blockIdx.x;
  int c = 0;
  for (long long base = 0; base < n; base += blockDim.x) {
    long long i = base + threadIdx.x;
    c += __syncthreads_count(i < n && idx[i] == e);
  }
  if (threadIdx.x == 0) count[e] = c;
}

__global__ void scan_kernel(const int32_t *count, int E, int32_t *off) {
  int32_t s = 0;
  for (int e = 0; e < E; e++) off[e] = s, s += count[e];
  off[E] = s;
}

/* Block e gives its copies consecutive rows from off[e], in index order. */
__global__ void pos_kernel(const int32_t *idx, long long n, const int32_t *off, int32_t *pos) {
  __shared__ int warp_n[32];
  const int e = blockIdx.x, lane = threadIdx.x & 31, wid = threadIdx.x / 32, nw = blockDim.x / 32;
  int32_t at = off[e];
  for (long long base = 0; base < n; base += blockDim.x) {
    long long i = base + threadIdx.x;
    bool mine = i < n && idx[i] == e;
    unsigned b = __ballot_sync(FULL, mine);
    if (lane == 0) warp_n[wid] = __popc(b);
    __syncthreads();
    int before = 0, total = 0;
    for (int q = 0; q < nw; q++) {
      before += q < wid ? warp_n[q] : 0;
      total += warp_n[q];
    }
    if (mine) pos[i] = at + before + __popc(b & ((1u << lane) - 1u));
    at += total;
    __syncthreads();
  }
}

__global__ void permute_kernel(const uint4 *x, const int32_t *pos, int k, int hv, uint4 *out) {
  const long long i = blockIdx.x;
  const uint4 *src = x + (i / k) * hv;
  uint4 *dst = out + (long long)pos[i] * hv;
  for (int c = threadIdx.x; c < hv; c += blockDim.x) dst[c] = src[c];
}

__global__ void combine_kernel(const uint4 *y, const int32_t *pos, const float *w, int k, int hv, uint4 *out) {
  const long long r = blockIdx.x;
  for (int c = threadIdx.x; c < hv; c += blockDim.x) {
    float acc[VEC] = {0}, f[VEC];
    for (int j = 0; j < k; j++) {
      unpack(y[(long long)pos[r * k + j] * hv + c], f);
      if (w) {
        float wj = w[r * k + j];
        for (int q = 0; q < VEC; q++) acc[q] = fmaf(wj, f[q], acc[q]);
      } else {
        for (int q = 0; q < VEC; q++) acc[q] = __fadd_rn(acc[q], f[q]);
      }
    }
    out[r * hv + c] = pack(acc);
  }
}

__global__ void combine_bwd_kernel(const uint4 *dout, const uint4 *y, const int32_t *pos, const float *w, int k,
                                   int hv, uint4 *dy, float *dw) {
  __shared__ float part[32];
  const long long i = blockIdx.x;
  const uint4 *g = dout + (i / k) * hv, *yr = y + (long long)pos[i] * hv;
  uint4 *d = dy + (long long)pos[i] * hv;
  const float wi = w[i];
  float dot = 0.0f;
  for (int c = threadIdx.x; c < hv; c += blockDim.x) {
    float gf[VEC], yf[VEC], o[VEC];
    unpack(g[c], gf);
    unpack(yr[c], yf);
    for (int q = 0; q < VEC; q++) o[q] = __fmul_rn(wi, gf[q]), dot = fmaf(gf[q], yf[q], dot);
    d[c] = pack(o);
  }
  for (int o = 16; o; o >>= 1) dot += __shfl_xor_sync(FULL, dot, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = dot;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int q = 0; q < (int)blockDim.x / 32; q++) s += part[q];
    dw[i] = s;
  }
}

/* One thread per (token, expert): the chosen ones get w_j (dw_j - s), the others 0. */
__global__ void topk_bwd_kernel(const int32_t *idx, const float *w, const float *dw, long long n, int E, int k,
                                uint16_t *dlogits) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long r = i / E;
  const int e = (int)(i % E);
  const float *wr = w + r * k, *dr = dw + r * k;
  float s = 0.0f, v = 0.0f;
  for (int j = 0; j < k; j++) s = fmaf(wr[j], dr[j], s);
  for (int j = 0; j < k; j++)
    if (idx[r * k + j] == e) v = __fmul_rn(wr[j], __fsub_rn(dr[j], s));
  __nv_bfloat16 b = __float2bfloat16_rn(v);
  dlogits[i] = *reinterpret_cast<uint16_t *>(&b);
}

static int threads_for(int hv) { return hv >= 256 ? 256 : (hv >= 128 ? 128 : (hv >= 64 ? 64 : 32)); }

extern "C" int moe_topk(const float *logits, int t, int E, int k, int32_t *idx, float *w, void *stream) {
  if (t <= 0) return 0;
  if (E < 1 || E > MOE_ROUTE_MAX_E || k < 1 || k > MOE_ROUTE_MAX_K || k > E) return (int)cudaErrorInvalidValue;
  topk_kernel<<<(t + 7) / 8, 256, 0, (cudaStream_t)stream>>>(logits, t, E, k, idx, w);
  return (int)cudaGetLastError();
}

extern "C" int moe_map(const int32_t *idx, int t, int E, int k, int32_t *pos, int32_t *count, int32_t *scratch,
                       void *stream) {
  if (E < 1 || E > MOE_ROUTE_MAX_E) return (int)cudaErrorInvalidValue;
  cudaStream_t s = (cudaStream_t)stream;
  long long n = (long long)t * k;
  count_kernel<<<E, 1024, 0, s>>>(idx, n, count);
  scan_kernel<<<1, 1, 0, s>>>(count, E, scratch);
  pos_kernel<<<E, 1024, 0, s>>>(idx, n, scratch, pos);
  return (int)cudaGetLastError();
}

extern "C" int moe_permute(const uint16_t *x, const int32_t *pos, int t, int k, int h, uint16_t *out, void *stream) {
  if (h % VEC) return (int)cudaErrorInvalidValue;
  if ((long long)t * k == 0) return 0;
  permute_kernel<<<(unsigned)((long long)t * k), threads_for(h / VEC), 0, (cudaStream_t)stream>>>(
      (const uint4 *)x, pos, k, h / VEC, (uint4 *)out);
  return (int)cudaGetLastError();
}

extern "C" int moe_combine(const uint16_t *y, const int32_t *pos, const float *w, int t, int k, int h, uint16_t *out,
                           void *stream) {
  if (h % VEC) return (int)cudaErrorInvalidValue;
  if (t == 0) return 0;
  combine_kernel<<<t, threads_for(h / VEC), 0, (cudaStream_t)stream>>>((const uint4 *)y, pos, w, k, h / VEC,
                                                                       (uint4 *)out);
  return (int)cudaGetLastError();
}

extern "C" int moe_combine_bwd(const uint16_t *dout, const uint16_t *y, const int32_t *pos, const float *w, int t,
                               int k, int h, uint16_t *dy, float *dw, void *stream) {
  if (h % VEC) return (int)cudaErrorInvalidValue;
  if ((long long)t * k == 0) return 0;
  combine_bwd_kernel<<<(unsigned)((long long)t * k), threads_for(h / VEC), 0, (cudaStream_t)stream>>>(
      (const uint4 *)dout, (const uint4 *)y, pos, w, k, h / VEC, (uint4 *)dy, dw);
  return (int)cudaGetLastError();
}

extern "C" int moe_topk_bwd(const int32_t *idx, const float *w, const float *dw, int t, int E, int k,
                            uint16_t *dlogits, void *stream) {
  if (E < 1 || E > MOE_ROUTE_MAX_E || k < 1 || k > MOE_ROUTE_MAX_K || k > E) return (int)cudaErrorInvalidValue;
  const long long n = (long long)t * E;
  if (n == 0) return 0;
  topk_bwd_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(idx, w, dw, n, E, k, dlogits);
  return (int)cudaGetLastError();
}

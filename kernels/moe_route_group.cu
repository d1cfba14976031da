/* moe_route_group.cu — DeepSeek-V3's routing kernels (contract and reference: moe_route_group.h).
 * Explicit _rn intrinsics throughout: the build contracts a*b+c into fma (-fmad=true), the reference does not. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "moe_route_group.h"

#define FULL 0xffffffffu
#define PER (MOE_ROUTE_MAX_E / 32) /* experts a lane holds at most */

__global__ void sigmoid_kernel(const float *x, long long n, float *s) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) s[i] = __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x[i])));
}

/* The warp's largest v among the lane's experts e (lane + 32 q) with free[q] set and in [lo, hi); ties to the
 * lower expert; every lane gets the value and the expert (0x7fffffff: none). */
static __device__ void warp_argmax(const float *v, unsigned free_bits, int lane, int per, int lo, int hi, float *bv,
                                   int *bi) {
  float b = -INFINITY;
  int x = 0x7fffffff;
  for (int q = 0; q < per; q++) {
    const int e = lane + 32 * q;
    if (e >= lo && e < hi && (free_bits >> q & 1u) && (x == 0x7fffffff || v[q] > b)) b = v[q], x = e;
  }
  for (int o = 16; o; o >>= 1) {
    const float ob = __shfl_xor_sync(FULL, b, o);
    const int ox = __shfl_xor_sync(FULL, x, o);
    if (ox != 0x7fffffff && (x == 0x7fffffff || ob > b || (ob == b && ox < x))) b = ob, x = ox;
  }
  *bv = b, *bi = x;
}

/* One warp per token; lane l holds experts l, l + 32, ... (bit q of a mask: expert lane + 32 q). */
__global__ void topk_group_kernel(const float *s, const float *bias, int t, int E, int k, moe_group_route g,
                                  int32_t *idx, float *w, float *sel) {
  const int lane = threadIdx.x & 31, r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= t) return;
  const float *sr = s + (size_t)r * E;
  const int per = (E + 31) / 32;
  float v[PER], sv[PER];
  for (int q = 0; q < per; q++) {
    const int e = lane + 32 * q;
    sv[q] = e < E ? sr[e] : 0.0f;
    v[q] = e < E ? (bias ? __fadd_rn(sv[q], bias[e]) : sv[q]) : -INFINITY;
  }
  const unsigned all = per == 32 ? FULL : (1u << per) - 1u;
  unsigned free_bits = all;
  if (g.groups > 0) {
    const int G = g.groups, gper = E / G, n = k / g.group_topk;
    float gs[MOE_GROUP_MAX];
    unsigned used = 0; /* experts counted in their group's score */
    for (int q = 0; q < G; q++) {
      float sum = 0.0f;
      for (int i = 0; i < n; i++) {
        float bv;
        int bi;
        warp_argmax(v, all & ~used, lane, per, q * gper, (q + 1) * gper, &bv, &bi);
        if ((bi & 31) == lane) used |= 1u << (bi / 32);
        sum = __fadd_rn(sum, bv);
      }
      gs[q] = sum;
    }
    unsigned keep = 0, gtaken = 0;
    for (int i = 0; i < g.group_topk; i++) { /* every lane holds gs[]: the same choice everywhere */
      int b = -1;
      for (int q = 0; q < G; q++)
        if (!(gtaken >> q & 1u) && (b < 0 || gs[q] > gs[b])) b = q;
      gtaken |= 1u << b, keep |= 1u << b;
    }
    free_bits = 0;
    for (int q = 0; q < per; q++) {
      const int e = lane + 32 * q;
      if (e < E && (keep >> (e / gper) & 1u)) free_bits |= 1u << q;
    }
  }
  float S = 0.0f, cs[MOE_ROUTE_MAX_K];
  int ci[MOE_ROUTE_MAX_K];
  for (int j = 0; j < k; j++) {
    float bv;
    int bi;
    warp_argmax(v, free_bits, lane, per, 0, E, &bv, &bi);
    float mine = 0.0f; /* the chosen expert's s, from the lane holding it */
    if ((bi & 31) == lane) free_bits &= ~(1u << (bi / 32)), mine = sv[bi / 32];
    cs[j] = __shfl_sync(FULL, mine, bi & 31), ci[j] = bi;
    S = __fadd_rn(S, cs[j]);
  }
  if (lane == 0)
    for (int j = 0; j < k; j++) {
      const size_t o = (size_t)r * k + j;
      idx[o] = ci[j], sel[o] = cs[j];
      w[o] = k > 1 ? __fmul_rn(__fdiv_rn(cs[j], __fadd_rn(S, 1e-20f)), g.scale) : __fmul_rn(cs[j], g.scale);
    }
}

/* One thread per (token, expert): the chosen ones get g_j sel_j (1 - sel_j), the others 0. */
__global__ void topk_group_bwd_kernel(const int32_t *idx, const float *sel, const float *dw, long long n, int E, int k,
                                      float scale, uint16_t *dlogits) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const long long r = i / E;
  const int e = (int)(i % E);
  const float *sr = sel + r * k, *dr = dw + r * k;
  float S = 0.0f, d = 0.0f, v = 0.0f;
  for (int j = 0; j < k; j++) S = __fadd_rn(S, sr[j]);
  const float Sp = __fadd_rn(S, 1e-20f);
  for (int j = 0; j < k; j++) d = fmaf(__fdiv_rn(sr[j], Sp), dr[j], d);
  for (int j = 0; j < k; j++)
    if (idx[r * k + j] == e) {
      const float gj = k > 1 ? __fdiv_rn(__fmul_rn(scale, __fsub_rn(dr[j], d)), Sp) : __fmul_rn(scale, dr[j]);
      v = __fmul_rn(gj, __fmul_rn(sr[j], __fsub_rn(1.0f, sr[j])));
    }
  __nv_bfloat16 b = __float2bfloat16_rn(v);
  dlogits[i] = *reinterpret_cast<uint16_t *>(&b);
}

/* One block per row: the row's sum, then each expert's step. */
__global__ void bias_update_kernel(const int32_t *load, float *bias, int E, float rate) {
  __shared__ long long part[32];
  const int32_t *l = load + (size_t)blockIdx.x * E;
  float *b = bias + (size_t)blockIdx.x * E;
  long long sum = 0;
  for (int e = threadIdx.x; e < E; e += blockDim.x) sum += l[e];
  for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(FULL, sum, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x / 32] = sum;
  __syncthreads();
  sum = 0;
  for (int q = 0; q < (int)blockDim.x / 32; q++) sum += part[q];
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const long long off = sum - (long long)E * l[e];
    b[e] = __fadd_rn(b[e], off > 0 ? rate : off < 0 ? -rate : 0.0f);
  }
}

extern "C" int moe_sigmoid(const float *x, long long n, float *s, void *stream) {
  if (n <= 0) return 0;
  sigmoid_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(x, n, s);
  return (int)cudaGetLastError();
}

extern "C" int moe_topk_group(const float *s, const float *bias, int t, int E, int k, const moe_group_route *g,
                              int32_t *idx, float *w, float *sel, void *stream) {
  if (moe_group_route_valid(E, k, g)) return (int)cudaErrorInvalidValue;
  if (t <= 0) return 0;
  topk_group_kernel<<<(t + 7) / 8, 256, 0, (cudaStream_t)stream>>>(s, bias, t, E, k, *g, idx, w, sel);
  return (int)cudaGetLastError();
}

extern "C" int moe_topk_group_bwd(const int32_t *idx, const float *sel, const float *dw, int t, int E, int k,
                                  float scale, uint16_t *dlogits, void *stream) {
  if (E < 1 || E > MOE_ROUTE_MAX_E || k < 1 || k > MOE_ROUTE_MAX_K || k > E) return (int)cudaErrorInvalidValue;
  const long long n = (long long)t * E;
  if (n <= 0) return 0;
  topk_group_bwd_kernel<<<(unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)stream>>>(idx, sel, dw, n, E, k, scale,
                                                                                      dlogits);
  return (int)cudaGetLastError();
}

extern "C" int moe_bias_update(const int32_t *load, float *bias, int rows, int E, float rate, void *stream) {
  if (E < 1 || E > MOE_ROUTE_MAX_E) return (int)cudaErrorInvalidValue;
  if (rows <= 0) return 0;
  bias_update_kernel<<<rows, 256, 0, (cudaStream_t)stream>>>(load, bias, E, rate);
  return (int)cudaGetLastError();
}

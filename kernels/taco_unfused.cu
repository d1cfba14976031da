/* taco_unfused.cu — the TACO encode as three separate passes through an FP32
 * workspace (adaptive scale, Hadamard, cast to FP8), the way an unfused
 * implementation would run it. Bit-identical to the fused encode on finite
 * input; it exists so that bench-codec can measure what fusion buys. */
#include <cuda_runtime.h>
#include <stdint.h>

#include "taco_codec.h"
#include "taco_device.cuh"
#include "taco_dispatch.cuh"

using namespace taco;

template <int G> struct UnfusedIdx {
  static constexpr int T = G / 32;
  size_t group, base;
  int t;
  bool active;
  __device__ UnfusedIdx(size_t ngroups) {
    size_t tid = (size_t)blockIdx.x * BLOCK + threadIdx.x;
    group = tid / T;
    t = (int)(threadIdx.x % T);
    active = group < ngroups;
    base = group * G;
  }
};

/* the adaptive scale and the multiplier m = s_a / sqrt(G), from the sum of squares */
template <int G, bool E5M2> __device__ __forceinline__ float adaptive_scale(float sum_squares, float &m) {
  const float mean = sum_squares * (1.0f / (float)G);
  const float s_a = fminf(fmaxf(fp8_max<E5M2>() * (1.0f / sqrtf(mean + 1e-6f)), 1e-3f), 1e3f);
  m = s_a * rsqrt_group<G>();
  return s_a;
}

/* pass 1: the group's sum of squares (for s_a), and x in FP32 into the
 * workspace (scaled by s_a / sqrt(G) first only where the fused encode does) */
template <int G, typename Tin, bool E5M2>
__global__ void __launch_bounds__(BLOCK) scale_pass(const Tin *__restrict__ x, size_t n, size_t ngroups,
                                                    float *__restrict__ work, float *__restrict__ sumsq_out) {
  UnfusedIdx<G> ix(ngroups);
  constexpr int T = G / 32;
  float v[PER_THREAD];
  if (ix.active && ix.base + G <= n) {
#pragma unroll
    for (int c = 0; c < NCHUNK; c++) load_chunk(x + ix.base + chunk_offset(c, ix.t, T), v + c * CHUNK);
  } else {
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) {
      size_t e = ix.base + elem_offset(i, ix.t, T);
      v[i] = (ix.active && e < n) ? load_one(x, e) : 0.0f;
    }
  }
  const float sum_squares = group_sum_squares<G>(v);
  if (!ix.active) return;
  if (!(sum_squares <= PRESCALE_ABOVE)) {
    float m;
    adaptive_scale<G, E5M2>(sum_squares, m);
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) v[i] = __fmul_rn(v[i], m);
  }
#pragma unroll
  for (int c = 0; c < NCHUNK; c++) store_chunk(work + ix.base + chunk_offset(c, ix.t, T), v + c * CHUNK);
  if (ix.t == 0) sumsq_out[ix.group] = sum_squares;
}

/* pass 2: y = H v, in place */
template <int G> __global__ void __launch_bounds__(BLOCK) hadamard_pass(float *__restrict__ work, size_t ngroups) {
  UnfusedIdx<G> ix(ngroups);
  constexpr int T = G / 32;
  float v[PER_THREAD];
#pragma unroll
  for (int c = 0; c < NCHUNK; c++)
    if (ix.active)
      load_chunk(work + ix.base + chunk_offset(c, ix.t, T), v + c * CHUNK);
    else
#pragma unroll
      for (int j = 0; j < CHUNK; j++) v[c * CHUNK + j] = 0.0f;
  fwht<G>(v, ix.t);
  if (!ix.active) return;
#pragma unroll
  for (int c = 0; c < NCHUNK; c++) store_chunk(work + ix.base + chunk_offset(c, ix.t, T), v + c * CHUNK);
}

/* pass 3: s_q from the absmax, FP8 codes and the two scales */
template <int G, bool E5M2>
__global__ void __launch_bounds__(BLOCK) cast_pass(const float *__restrict__ work, const float *__restrict__ sumsq_in,
                                                   size_t ngroups, uint8_t *__restrict__ payload,
                                                   float2 *__restrict__ scales) {
  UnfusedIdx<G> ix(ngroups);
  constexpr int T = G / 32;
  float v[PER_THREAD];
#pragma unroll
  for (int c = 0; c < NCHUNK; c++)
    if (ix.active)
      load_chunk(work + ix.base + chunk_offset(c, ix.t, T), v + c * CHUNK);
    else
#pragma unroll
      for (int j = 0; j < CHUNK; j++) v[c * CHUNK + j] = 0.0f;
  float absmax = 0.0f;
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) absmax = fmaxf(absmax, fabsf(v[i]));
#pragma unroll
  for (int m2 = 1; m2 < T; m2 <<= 1) absmax = fmaxf(absmax, __shfl_xor_sync(FULL_MASK, absmax, m2));
  if (!ix.active) return;
  const float sum_squares = sumsq_in[ix.group];
  float m;
  const float s_a = adaptive_scale<G, E5M2>(sum_squares, m);
  const bool prescale = !(sum_squares <= PRESCALE_ABOVE);
  const float ymax = prescale ? absmax : __fmul_rn(absmax, m);
  const float s_q = fminf(fmaxf(ymax / fp8_max<E5M2>(), 1e-12f), 1e6f), inv = 1.0f / s_q;
  const float k = prescale ? inv : __fmul_rn(m, inv);
  uint32_t words[NCHUNK * 2];
#pragma unroll
  for (int w = 0; w < NCHUNK * 2; w++)
    words[w] = fp8x4<E5M2>(v[4 * w] * k, v[4 * w + 1] * k, v[4 * w + 2] * k, v[4 * w + 3] * k);
  store_codes(payload, ix.base, ix.t, T, words);
  if (ix.t == 0) scales[ix.group] = make_float2(s_a, s_q);
}

extern "C" size_t taco_unfused_workspace_bytes(size_t n, int group) {
  size_t ngroups = taco_groups(n, group);
  return ngroups * (size_t)group * sizeof(float) + ((ngroups * sizeof(float) + 15) & ~(size_t)15);
}

extern "C" int taco_encode_unfused(const void *x, taco_dtype dt, size_t n, taco_params p, void *block,
                                   void *workspace, void *stream) {
  if (!taco_params_valid(p)) return TACO_FAIL("bad codec params (group %d)", p.group);
  if (n == 0) return 0;
  if (!x || !block || !workspace) return TACO_FAIL("NULL buffer");
  if (((uintptr_t)x | (uintptr_t)block | (uintptr_t)workspace) & 15u) return TACO_FAIL("buffers must be 16-byte aligned");
  size_t ngroups = taco_groups(n, p.group);
  float *work = (float *)workspace, *sumsq = work + ngroups * (size_t)p.group;
  uint8_t *payload = (uint8_t *)block;
  float2 *scales = (float2 *)(payload + ngroups * (size_t)p.group);
  cudaStream_t s = (cudaStream_t)stream;
  return with_group_fp8(p, [&](auto gc, auto ec) {
    constexpr int G = decltype(gc)::value;
    constexpr bool E5 = decltype(ec)::value;
    unsigned grid = (unsigned)((ngroups * (G / 32) + BLOCK - 1) / BLOCK);
    if (dt == TACO_DTYPE_BF16)
      scale_pass<G, uint16_t, E5><<<grid, BLOCK, 0, s>>>((const uint16_t *)x, n, ngroups, work, sumsq);
    else
      scale_pass<G, float, E5><<<grid, BLOCK, 0, s>>>((const float *)x, n, ngroups, work, sumsq);
    TACO_CUDA_CHECK(cudaGetLastError());
    hadamard_pass<G><<<grid, BLOCK, 0, s>>>(work, ngroups);
    TACO_CUDA_CHECK(cudaGetLastError());
    cast_pass<G, E5><<<grid, BLOCK, 0, s>>>(work, sumsq, ngroups, payload, scales);
    TACO_CUDA_CHECK(cudaGetLastError());
    return 0;
  });
}

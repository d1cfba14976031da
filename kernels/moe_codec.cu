/* moe_codec.cu — the fused MoE codec kernels (contract and format:
 * moe_codec.h). The codec's math is the codec's own device code
 * (taco_device.cuh: group layout, sum of squares, encode_group, the decode's
 * accumulate_codes and transform), so the bits are those of taco_encode /
 * taco_decode; only the addressing (token row -> its k permuted rows) is new.
 *
 * One tile = one token group slice: T = G/32 lanes hold a group of G elements
 * (32 each). Grid: one tile per thread (blocks retire as they finish). */
#include <cuda_runtime.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>

#include "moe_codec.h"
#include "moe_route.h"
#include "taco_device.cuh"
#include "taco_dispatch.cuh"

using namespace taco;

namespace {

/* this warp's slots of the block's transpose buffer (the G >= 256 transform) */
__device__ __forceinline__ float4 *moe_transpose_buffer() {
  __shared__ float4 buffer[BLOCK / 32 * XPOSE_WARP_FLOAT4];
  return buffer + (threadIdx.x / 32) * XPOSE_WARP_FLOAT4;
}

/* Token group (r, c) = tile g / T: read once, encoded once (encode_group, as
 * taco_encode's kernel), codes and scales stored at the k rows pos[r k + j]. */
template <int G, bool E5M2, bool XPOSE>
__global__ void __launch_bounds__(BLOCK)
    permute_encode_kernel(const uint16_t *__restrict__ x, const int32_t *__restrict__ pos, int k, int h,
                          size_t ngroups, uint8_t *__restrict__ payload, float2 *__restrict__ scales,
                          taco_nonfinite *nf) {
  constexpr int T = G / PER_THREAD;
  const int t = (int)(threadIdx.x % T), gpr = h / G;
  const size_t tid = (size_t)blockIdx.x * BLOCK + threadIdx.x, group = tid / T;
  if ((tid & ~(size_t)31) / T >= ngroups) return; /* whole warps only: every lane takes part in the shuffles */
  const bool active = group < ngroups;
  const size_t r = active ? group / gpr : 0;
  const int c = active ? (int)(group % gpr) : 0;
  float4 *wbuf = nullptr;
  if constexpr (XPOSE) wbuf = moe_transpose_buffer();
  float v[PER_THREAD];
  if (active) {
    raw_input<uint16_t, PER_THREAD> raw;
    load_raw<G, 0>(x + r * h + (size_t)c * G, t, raw);
    unpack_raw(raw, v);
  } else {
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) v[i] = 0.0f;
  }
  float sum_squares = group_sum_squares<G>(v);
  bool group_bad = false;
  if (__any_sync(FULL_MASK, !(sum_squares <= FLT_MAX))) { /* NaN/Inf (or huge finite values: checked exactly) */
    unsigned long long count = 0;
    int first = INT_MAX;
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++)
      if ((__float_as_uint(v[i]) & 0x7f800000u) == 0x7f800000u) {
        count++;
        first = min(first, elem_offset(i, t, T));
      }
    const unsigned ballot = __ballot_sync(FULL_MASK, count != 0);
    group_bad = ((ballot >> ((int)(threadIdx.x & 31) / T * T)) & ((1u << T) - 1u)) != 0;
    if (count && nf && active) /* the element is in each of the token's k copies */
      for (int j = 0; j < k; j++) {
        atomicAdd(&nf->count, count);
        atomicMin(&nf->first_index, (unsigned long long)pos[r * k + j] * h + (unsigned long long)c * G + first);
      }
    if (group_bad) {
#pragma unroll
      for (int i = 0; i < PER_THREAD; i++) v[i] = 0.0f;
      sum_squares = 0.0f;
    }
  }
  uint32_t words[PER_THREAD / 4];
  float s_a, s_q;
  encode_group<G, E5M2, XPOSE>(v, sum_squares, t, words, s_a, s_q, wbuf);
  if (!active) return;
  if (group_bad) {
#pragma unroll
    for (int w = 0; w < PER_THREAD / 4; w++) words[w] = 0;
    s_a = s_q = 0.0f;
  }
  for (int j = 0; j < k; j++) {
    const size_t row = (size_t)__ldg(pos + r * k + j), gi = row * gpr + c;
    store_codes(payload, gi * G, t, T, words);
    if (t == 0) scales[gi] = make_float2(s_a, s_q);
  }
}

/* Token group (r, c): the k rows' groups decoded as taco_decode does (codes
 * times scale from 0, the transform), each rounded to BF16, combined with fmaf
 * in order j (moe_combine); the next row's codes are loaded before the current
 * one is transformed. P elements per thread: the library runs 32 (64, one
 * cross-lane stage fewer with the same bits, measured 0-12 % slower on the
 * H200 at 26 of 28 shapes: kernels/RESULTS.md, MoE codec section). */
template <int G, bool E5M2, bool XPOSE, int P>
__global__ void __launch_bounds__(BLOCK)
    decode_combine_kernel(const uint8_t *__restrict__ payload, const float2 *__restrict__ scales,
                          const int32_t *__restrict__ pos, const float *__restrict__ w, int k, int h, size_t ngroups,
                          uint16_t *__restrict__ out) {
  constexpr int T = G / P, NK = P / CHUNK;
  const int t = (int)(threadIdx.x % T), gpr = h / G;
  const size_t tid = (size_t)blockIdx.x * BLOCK + threadIdx.x, group = tid / T;
  if ((tid & ~(size_t)31) / T >= ngroups) return;
  const bool active = group < ngroups;
  const size_t r = active ? group / gpr : 0;
  const int c = active ? (int)(group % gpr) : 0;
  float4 *wbuf = nullptr;
  if constexpr (XPOSE) wbuf = moe_transpose_buffer();
  float sum[P];
#pragma unroll
  for (int i = 0; i < P; i++) sum[i] = 0.0f;
  uint2 q[NK];
  float2 s = make_float2(0.0f, 0.0f);
  int32_t next_row = active ? __ldg(pos + r * k) : 0;
  auto fetch = [&](int32_t row, uint2(&qq)[NK], float2 &ss) {
    const size_t gi = (size_t)row * gpr + c;
    ss = ld_stream<0>(scales + gi);
    load_codes<G, 0, P>(payload, gi * G, t, qq);
  };
  if (active) {
    fetch(next_row, q, s);
    if (k > 1) next_row = __ldg(pos + r * k + 1);
  }
  for (int j = 0; j < k; j++) {
    float acc[P];
#pragma unroll
    for (int i = 0; i < P; i++) acc[i] = 0.0f;
    if (active) accumulate_codes<E5M2, P>(q, decode_multiplier<G>(s), acc);
    if (active && j + 1 < k) {
      fetch(next_row, q, s);
      if (j + 2 < k) next_row = __ldg(pos + r * k + j + 2); /* the row after next: its index ahead of its data */
    }
    fwht_variant<G, XPOSE, P>(acc, t, wbuf);
    const float wj = w && active ? __ldg(w + r * k + j) : 0.0f;
#pragma unroll
    for (int i = 0; i < P; i++) {
      const float y = __bfloat162float(__float2bfloat16_rn(acc[i])); /* what taco_decode stores */
      sum[i] = w ? fmaf(wj, y, sum[i]) : __fadd_rn(sum[i], y);
    }
  }
  if (!active) return;
  uint16_t *dst = out + r * h + (size_t)c * G;
#pragma unroll
  for (int ch = 0; ch < NK; ch++) store_chunk(dst + chunk_offset_p<P>(ch, t, T), sum + ch * CHUNK);
}

/* the transform variant taco_codec's AUTO default runs: the shared-memory transpose from G = 256 */
template <int G> constexpr bool use_xpose() { return G >= 256; }

int check_device_args(const void *in, const int32_t *pos, int t, int k, int h, taco_params p, const void *out) {
  if (moe_codec_check_args(in, pos, t, k, h, p, out)) return -1;
  if (((uintptr_t)in | (uintptr_t)out) & 15u) return TACO_FAIL("moe codec: input and output must be 16-byte aligned");
  return 0;
}

unsigned grid_for(size_t ngroups, int group) {
  const size_t threads = ngroups * (size_t)(group / PER_THREAD);
  return (unsigned)((threads + BLOCK - 1) / BLOCK);
}

} // namespace

extern "C" int moe_permute_encode(const uint16_t *x, const int32_t *pos, int t, int k, int h, taco_params p,
                                  void *block, taco_nonfinite *nf, void *stream) {
  if (check_device_args(x, pos, t, k, h, p, block)) return -1;
  const size_t ngroups = (size_t)t * (size_t)(h / p.group), rows = (size_t)t * (size_t)k;
  uint8_t *payload = (uint8_t *)block;
  float2 *scales = (float2 *)(payload + rows * (size_t)h);
  cudaStream_t st = (cudaStream_t)stream;
  return with_group_fp8(p, [&](auto gc, auto fc) {
    constexpr int G = decltype(gc)::value;
    constexpr bool E5M2 = decltype(fc)::value;
    permute_encode_kernel<G, E5M2, use_xpose<G>()>
        <<<grid_for(ngroups, G), BLOCK, 0, st>>>(x, pos, k, h, ngroups, payload, scales, nf);
    TACO_CUDA_CHECK(cudaGetLastError());
    return 0;
  });
}

extern "C" int moe_decode_combine(const void *block, const int32_t *pos, const float *w, int t, int k, int h,
                                  taco_params p, uint16_t *out, void *stream) {
  if (check_device_args(block, pos, t, k, h, p, out)) return -1;
  const size_t ngroups = (size_t)t * (size_t)(h / p.group), rows = (size_t)t * (size_t)k;
  const uint8_t *payload = (const uint8_t *)block;
  const float2 *scales = (const float2 *)(payload + rows * (size_t)h);
  cudaStream_t st = (cudaStream_t)stream;
  return with_group_fp8(p, [&](auto gc, auto fc) {
    constexpr int G = decltype(gc)::value;
    constexpr bool E5M2 = decltype(fc)::value;
    decode_combine_kernel<G, E5M2, use_xpose<G>(), PER_THREAD>
        <<<grid_for(ngroups, G), BLOCK, 0, st>>>(payload, scales, pos, w, k, h, ngroups, out);
    TACO_CUDA_CHECK(cudaGetLastError());
    return 0;
  });
}

/* taco_codec.cu — fused TACO encode, decode, decode-sum and decode-sum-encode
 * on sm_90: one read of the input and one write of the output per kernel,
 * the Hadamard transform in registers and warp shuffles (taco_device.cuh). */
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>

#include <type_traits>

#include "taco_codec.h"
#include "taco_device.cuh"
#include "taco_dispatch.cuh"
#include "taco_internal.h"

using namespace taco;

/* ---- kernels ---- */

/* Group g's source elements start at x + (g / groups_per_row) * ld + (g % groups_per_row) * G,
 * so one kernel serves a contiguous tensor (groups_per_row = ngroups) and the
 * shared columns of a CAAT-Net tensor (groups_per_row = shared / G, ld = cols). */
template <int G, typename Tin, bool E5M2>
__global__ void __launch_bounds__(BLOCK) encode_kernel(const Tin *__restrict__ x, size_t n, size_t ngroups,
                                                       size_t groups_per_row, size_t ld, uint8_t *__restrict__ payload,
                                                       float2 *__restrict__ scales, taco_nonfinite *nf) {
  constexpr int T = G / 32;
  const size_t tid = (size_t)blockIdx.x * BLOCK + threadIdx.x;
  const size_t group = tid / T;
  const int t = (int)(threadIdx.x % T);
  const bool active = group < ngroups;
  const size_t base = group * G;
  const Tin *src = x + (group / groups_per_row) * ld + (group % groups_per_row) * G;
  float v[PER_THREAD];
  if (active && base + G <= n) {
#pragma unroll
    for (int c = 0; c < 2; c++) load_chunk(src + chunk_offset(c, t, T), v + c * CHUNK);
  } else {
#pragma unroll
    for (int c = 0; c < 2; c++)
#pragma unroll
      for (int j = 0; j < CHUNK; j++) {
        size_t e = (size_t)chunk_offset(c, t, T) + j;
        v[c * CHUNK + j] = (active && base + e < n) ? load_one(src, e) : 0.0f;
      }
  }
  /* NaN or Inf: count and report, and zero the whole group */
  unsigned bad = 0;
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) bad |= (__float_as_uint(v[i]) & 0x7f800000u) == 0x7f800000u;
  const unsigned ballot = __ballot_sync(FULL_MASK, bad);
  bool group_bad = false;
  if (ballot) {
    const int first_lane = (int)(threadIdx.x & 31) / T * T;
    group_bad = ((ballot >> first_lane) & ((1u << T) - 1u)) != 0;
    if (bad && nf) {
      unsigned long long count = 0, first = ULLONG_MAX;
#pragma unroll
      for (int c = 0; c < 2; c++)
#pragma unroll
        for (int j = 0; j < CHUNK; j++)
          if ((__float_as_uint(v[c * CHUNK + j]) & 0x7f800000u) == 0x7f800000u) {
            unsigned long long e = base + chunk_offset(c, t, T) + j;
            count++;
            first = e < first ? e : first;
          }
      atomicAdd(&nf->count, count);
      atomicMin(&nf->first_index, first);
    }
    if (group_bad)
#pragma unroll
      for (int i = 0; i < PER_THREAD; i++) v[i] = 0.0f;
  }
  uint32_t words[8];
  float s_a, s_q;
  encode_group<G, E5M2>(v, t, words, s_a, s_q);
  if (!active) return;
  if (group_bad) {
#pragma unroll
    for (int w = 0; w < 8; w++) words[w] = 0;
    s_a = s_q = 0.0f;
  }
  store_codes(payload, base, t, T, words);
  if (t == 0) scales[group] = make_float2(s_a, s_q);
}

/* Sum of k blocks' dequantized values before the (linear) transform, then one
 * transform; stored as Tout, or re-encoded when ENCODE. */
template <int G, typename Tout, bool E5M2, bool ENCODE>
__global__ void __launch_bounds__(BLOCK) decode_sum_kernel(const uint8_t *__restrict__ in, size_t wire, int k,
                                                           size_t n, size_t ngroups, Tout *__restrict__ y,
                                                           uint8_t *__restrict__ out_payload,
                                                           float2 *__restrict__ out_scales) {
  constexpr int T = G / 32;
  const size_t tid = (size_t)blockIdx.x * BLOCK + threadIdx.x;
  const size_t group = tid / T;
  const int t = (int)(threadIdx.x % T);
  const bool active = group < ngroups;
  const size_t base = group * G;
  float acc[PER_THREAD];
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) acc[i] = 0.0f;
  if (active) {
    for (int b = 0; b < k; b++) {
      const uint8_t *payload = in + (size_t)b * wire;
      const float2 s = __ldcs(reinterpret_cast<const float2 *>(payload + ngroups * G) + group);
      const float c = s.x > 0.0f ? rsqrt_group<G>() / s.x : 0.0f;
#pragma unroll
      for (int ch = 0; ch < 2; ch++) {
        const uint4 q = __ldcs(reinterpret_cast<const uint4 *>(payload + base + chunk_offset(ch, t, T)));
        const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int k4 = 0; k4 < 4; k4++) {
          float f[4];
          fp8x4_to_float<E5M2>(w[k4], f);
#pragma unroll
          for (int j = 0; j < 4; j++) {
            float &a = acc[ch * CHUNK + k4 * 4 + j];
            a = __fadd_rn(a, __fmul_rn(__fmul_rn(f[j], s.y), c));
          }
        }
      }
    }
  }
  fwht<G>(acc, t);
  if constexpr (ENCODE) {
    if (base + G > n) /* padding of the last group re-encodes as zeros */
#pragma unroll
      for (int c = 0; c < 2; c++)
#pragma unroll
        for (int j = 0; j < CHUNK; j++)
          if (base + chunk_offset(c, t, T) + j >= n) acc[c * CHUNK + j] = 0.0f;
    uint32_t words[8];
    float s_a, s_q;
    encode_group<G, E5M2>(acc, t, words, s_a, s_q);
    if (!active) return;
    store_codes(out_payload, base, t, T, words);
    if (t == 0) out_scales[group] = make_float2(s_a, s_q);
  } else {
    if (!active) return;
    if (base + G <= n) {
#pragma unroll
      for (int c = 0; c < 2; c++) store_chunk(y + base + chunk_offset(c, t, T), acc + c * CHUNK);
    } else {
#pragma unroll
      for (int c = 0; c < 2; c++)
#pragma unroll
        for (int j = 0; j < CHUNK; j++) {
          size_t e = base + chunk_offset(c, t, T) + j;
          if (e < n) store_one(y, e, acc[c * CHUNK + j]);
        }
    }
  }
}

/* ---- host ---- */

static int check_common(taco_params p, size_t n, const void *a, const void *b) {
  if (!taco_params_valid(p)) return TACO_FAIL("group %d / fp8 %d: want group 32..512 (power of two), E4M3 or E5M2", p.group, (int)p.fp8);
  if (n && (!a || !b)) return TACO_FAIL("NULL buffer for %zu elements", n);
  if (((uintptr_t)a | (uintptr_t)b) & 15u) return TACO_FAIL("buffers must be 16-byte aligned (%p, %p)", a, b);
  return 0;
}

static unsigned grid_for(size_t ngroups, int group) {
  size_t threads = ngroups * (size_t)(group / 32);
  return (unsigned)((threads + BLOCK - 1) / BLOCK);
}

static int launch_encode(const void *x, taco_dtype dt, size_t n, size_t groups_per_row, size_t ld, taco_params p,
                         void *block, taco_nonfinite *nf, void *stream) {
  size_t ngroups = taco_groups(n, p.group);
  uint8_t *payload = (uint8_t *)block;
  float2 *scales = (float2 *)(payload + ngroups * (size_t)p.group);
  cudaStream_t s = (cudaStream_t)stream;
  return with_group_fp8(p, [&](auto gc, auto ec) {
    constexpr int G = decltype(gc)::value;
    constexpr bool E5 = decltype(ec)::value;
    if (dt == TACO_DTYPE_BF16)
      encode_kernel<G, uint16_t, E5><<<grid_for(ngroups, G), BLOCK, 0, s>>>(
          (const uint16_t *)x, n, ngroups, groups_per_row ? groups_per_row : ngroups, ld, payload, scales, nf);
    else
      encode_kernel<G, float, E5><<<grid_for(ngroups, G), BLOCK, 0, s>>>(
          (const float *)x, n, ngroups, groups_per_row ? groups_per_row : ngroups, ld, payload, scales, nf);
    TACO_CUDA_CHECK(cudaGetLastError());
    return 0;
  });
}

extern "C" int taco_encode(const void *x, taco_dtype dt, size_t n, taco_params p, void *block, taco_nonfinite *nf,
                           void *stream) {
  if (check_common(p, n, x, block)) return -1;
  if (n == 0) return 0;
  return launch_encode(x, dt, n, 0, 0, p, block, nf, stream);
}

extern "C" int caat_gather_encode(const void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared,
                                  taco_params p, void *block, taco_nonfinite *nf, void *stream) {
  if (check_common(p, rows * shared, x, block)) return -1;
  if (shared > cols) return TACO_FAIL("shared %zu > cols %zu", shared, cols);
  if (shared % (size_t)p.group) return TACO_FAIL("shared %zu is not a multiple of the group %d", shared, p.group);
  if ((cols * (dt == TACO_DTYPE_BF16 ? 2 : 4)) % 16) return TACO_FAIL("row of %zu elements is not 16-byte aligned", cols);
  if (rows * shared == 0) return 0;
  return launch_encode(x, dt, rows * shared, shared / (size_t)p.group, cols, p, block, nf, stream);
}

static int launch_decode_sum(const void *in, int k, size_t n, taco_params p, void *y, taco_dtype dt, void *block,
                             void *stream) {
  if (k < 1) return TACO_FAIL("k = %d, want >= 1", k);
  if (n == 0) return 0;
  size_t ngroups = taco_groups(n, p.group), wire = taco_wire_bytes(n, p.group);
  cudaStream_t s = (cudaStream_t)stream;
  const uint8_t *src = (const uint8_t *)in;
  uint8_t *out_payload = (uint8_t *)block;
  float2 *out_scales = block ? (float2 *)(out_payload + ngroups * (size_t)p.group) : nullptr;
  return with_group_fp8(p, [&](auto gc, auto ec) {
    constexpr int G = decltype(gc)::value;
    constexpr bool E5 = decltype(ec)::value;
    unsigned grid = grid_for(ngroups, G);
    if (block)
      decode_sum_kernel<G, float, E5, true><<<grid, BLOCK, 0, s>>>(src, wire, k, n, ngroups, nullptr, out_payload,
                                                                   out_scales);
    else if (dt == TACO_DTYPE_BF16)
      decode_sum_kernel<G, uint16_t, E5, false><<<grid, BLOCK, 0, s>>>(src, wire, k, n, ngroups, (uint16_t *)y,
                                                                       nullptr, nullptr);
    else
      decode_sum_kernel<G, float, E5, false><<<grid, BLOCK, 0, s>>>(src, wire, k, n, ngroups, (float *)y, nullptr,
                                                                    nullptr);
    TACO_CUDA_CHECK(cudaGetLastError());
    return 0;
  });
}

extern "C" int taco_decode(const void *block, size_t n, taco_params p, void *y, taco_dtype dt, void *stream) {
  if (check_common(p, n, block, y)) return -1;
  return launch_decode_sum(block, 1, n, p, y, dt, nullptr, stream);
}

extern "C" int taco_decode_sum(const void *in, int k, size_t n, taco_params p, void *y, taco_dtype dt,
                               void *stream) {
  if (check_common(p, n, in, y)) return -1;
  return launch_decode_sum(in, k, n, p, y, dt, nullptr, stream);
}

extern "C" int taco_decode_sum_encode(const void *in, int k, size_t n, taco_params p, void *block, void *stream) {
  if (check_common(p, n, in, block)) return -1;
  return launch_decode_sum(in, k, n, p, nullptr, TACO_DTYPE_FP32, block, stream);
}

extern "C" int taco_nonfinite_reset(taco_nonfinite *nf, void *stream) {
  if (!nf) return TACO_FAIL("NULL taco_nonfinite");
  cudaStream_t s = (cudaStream_t)stream;
  TACO_CUDA_CHECK(cudaMemsetAsync(&nf->count, 0, sizeof nf->count, s));
  TACO_CUDA_CHECK(cudaMemsetAsync(&nf->first_index, 0xff, sizeof nf->first_index, s));
  return 0;
}

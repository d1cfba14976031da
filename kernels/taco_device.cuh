/* taco_device.cuh — device building blocks of the TACO kernels: the thread
 * layout of a group, 16-byte loads and stores, the Hadamard transform in
 * registers and warp shuffles, and the per-group encode. taco_ref.h states the
 * order of operations these follow (the reference follows the same order). */
#ifndef TACO_DEVICE_CUH
#define TACO_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <stdint.h>

namespace taco {

constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int PER_THREAD = 32; /* elements a thread holds: two chunks */
constexpr int CHUNK = 16;      /* consecutive elements loaded together */
constexpr int BLOCK = 128;     /* threads per block */

/* A group of G elements is held by T = G/32 consecutive lanes; lane t holds
 * chunks c = 0, 1 starting at element (c*T + t)*16. */
__device__ __forceinline__ int chunk_offset(int c, int t, int lanes) { return (c * lanes + t) * CHUNK; }

template <int G> __device__ __forceinline__ constexpr float rsqrt_group() {
  return G == 32 ? 0.17677669529663688f
         : G == 64 ? 0.125f
         : G == 128 ? 0.08838834764831845f
         : G == 256 ? 0.0625f
                    : 0.04419417382415922f;
}
template <bool E5M2> __device__ __forceinline__ constexpr float fp8_max() { return E5M2 ? 57344.0f : 448.0f; }

/* ---- loads and stores of one chunk (16 elements, 16-byte aligned) ---- */

__device__ __forceinline__ void unpack_bf16x8(uint4 u, float *v) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}
__device__ __forceinline__ void load_chunk(const uint16_t *p, float *v) {
  const uint4 *q = reinterpret_cast<const uint4 *>(p);
  uint4 a = __ldcs(q), b = __ldcs(q + 1);
  unpack_bf16x8(a, v);
  unpack_bf16x8(b, v + 8);
}
__device__ __forceinline__ void load_chunk(const float *p, float *v) {
  const float4 *q = reinterpret_cast<const float4 *>(p);
#pragma unroll
  for (int k = 0; k < 4; k++) {
    float4 f = __ldcs(q + k);
    v[4 * k] = f.x, v[4 * k + 1] = f.y, v[4 * k + 2] = f.z, v[4 * k + 3] = f.w;
  }
}
__device__ __forceinline__ float load_one(const uint16_t *p, size_t i) { return __uint_as_float((uint32_t)p[i] << 16); }
__device__ __forceinline__ float load_one(const float *p, size_t i) { return p[i]; }

__device__ __forceinline__ uint32_t pack_bf16x2(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t *>(&h);
}
__device__ __forceinline__ void store_chunk(uint16_t *p, const float *v) {
  uint4 a, b;
  a.x = pack_bf16x2(v[0], v[1]), a.y = pack_bf16x2(v[2], v[3]), a.z = pack_bf16x2(v[4], v[5]), a.w = pack_bf16x2(v[6], v[7]);
  b.x = pack_bf16x2(v[8], v[9]), b.y = pack_bf16x2(v[10], v[11]), b.z = pack_bf16x2(v[12], v[13]),
  b.w = pack_bf16x2(v[14], v[15]);
  uint4 *q = reinterpret_cast<uint4 *>(p);
  __stcs(q, a);
  __stcs(q + 1, b);
}
__device__ __forceinline__ void store_chunk(float *p, const float *v) {
  float4 *q = reinterpret_cast<float4 *>(p);
#pragma unroll
  for (int k = 0; k < 4; k++) __stcs(q + k, make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]));
}
__device__ __forceinline__ void store_one(uint16_t *p, size_t i, float v) {
  __nv_bfloat16 h = __float2bfloat16_rn(v);
  p[i] = *reinterpret_cast<uint16_t *>(&h);
}
__device__ __forceinline__ void store_one(float *p, size_t i, float v) { p[i] = v; }

/* ---- FP8 ---- */

template <bool E5M2> __device__ __forceinline__ uint32_t fp8x4(float a, float b, float c, float d) {
  const __nv_fp8_interpretation_t k = E5M2 ? __NV_E5M2 : __NV_E4M3;
  uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, k);
  uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, k);
  return lo | (hi << 16);
}
/* 4 codes of a word -> 4 exact floats */
template <bool E5M2> __device__ __forceinline__ void fp8x4_to_float(uint32_t w, float *v) {
  const __nv_fp8_interpretation_t k = E5M2 ? __NV_E5M2 : __NV_E4M3;
  __half2 lo = __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xffffu), k));
  __half2 hi = __half2(__nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w >> 16), k));
  float2 a = __half22float2(lo), b = __half22float2(hi);
  v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
}

/* ---- Hadamard: stages h = 1 .. G/2 in increasing order ---- */

template <int G> __device__ __forceinline__ void fwht(float (&v)[PER_THREAD], int t) {
  constexpr int T = G / 32;
#pragma unroll
  for (int h = 1; h < CHUNK; h <<= 1)
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++)
      if (!(i & h)) {
        float a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
#pragma unroll
  for (int m = 1; m < T; m <<= 1) {
    /* lower lane: own + other (a + b); upper lane: other - own (a - b); one fma each */
    const float sign = (t & m) ? -1.0f : 1.0f;
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++) {
      float o = __shfl_xor_sync(FULL_MASK, v[i], m);
      v[i] = fmaf(sign, v[i], o);
    }
  }
#pragma unroll
  for (int j = 0; j < CHUNK; j++) {
    float a = v[j], b = v[j + CHUNK];
    v[j] = a + b;
    v[j + CHUNK] = a - b;
  }
}

/* ---- one group's encode; every lane of the warp must call these ---- */

/* sum of squares of the group, the same value in each of its lanes */
template <int G> __device__ __forceinline__ float group_sum_squares(const float (&v)[PER_THREAD]) {
  constexpr int T = G / 32;
  float acc = 0.0f;
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) acc = fmaf(v[i], v[i], acc);
#pragma unroll
  for (int m = 1; m < T; m <<= 1) acc = acc + __shfl_xor_sync(FULL_MASK, acc, m);
  return acc;
}

/* from the group's sum of squares: scales, transform, FP8 codes (4 per word) */
template <int G, bool E5M2>
__device__ __forceinline__ void encode_group(float (&v)[PER_THREAD], float sum_squares, int t, uint32_t (&words)[8],
                                             float &s_a_out, float &s_q_out) {
  constexpr int T = G / 32;
  constexpr float FMAX = fp8_max<E5M2>();
  const float mean = sum_squares * (1.0f / (float)G);
  const float s_a = fminf(fmaxf(FMAX * (1.0f / sqrtf(mean + 1e-6f)), 1e-3f), 1e3f);
  const float m = s_a * rsqrt_group<G>();
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) v[i] = __fmul_rn(v[i], m);
  fwht<G>(v, t);
  float absmax = 0.0f;
#pragma unroll
  for (int i = 0; i < PER_THREAD; i++) absmax = fmaxf(absmax, fabsf(v[i]));
#pragma unroll
  for (int m2 = 1; m2 < T; m2 <<= 1) absmax = fmaxf(absmax, __shfl_xor_sync(FULL_MASK, absmax, m2));
  const float s_q = fminf(fmaxf(absmax / FMAX, 1e-12f), 1e6f), inv = 1.0f / s_q;
#pragma unroll
  for (int w = 0; w < 8; w++)
    words[w] = fp8x4<E5M2>(v[4 * w] * inv, v[4 * w + 1] * inv, v[4 * w + 2] * inv, v[4 * w + 3] * inv);
  s_a_out = s_a;
  s_q_out = s_q;
}

/* ---- a thread's 32 input elements as raw 16-byte words, so the next tile's
 * loads can be issued before the current tile is computed ---- */

template <typename Tin> struct raw_input {
  static constexpr int WORDS = 2 * CHUNK * (int)sizeof(Tin) / 16; /* 4 for bf16, 8 for fp32 */
  uint4 w[WORDS];
};
template <int G, typename Tin> __device__ __forceinline__ void load_raw(const Tin *group_src, int t, raw_input<Tin> &r) {
  constexpr int T = G / 32, HALF = raw_input<Tin>::WORDS / 2;
#pragma unroll
  for (int c = 0; c < 2; c++) {
    const uint4 *p = reinterpret_cast<const uint4 *>(group_src + chunk_offset(c, t, T));
#pragma unroll
    for (int k = 0; k < HALF; k++) r.w[c * HALF + k] = __ldcs(p + k);
  }
}
__device__ __forceinline__ void unpack_raw(const raw_input<uint16_t> &r, float (&v)[PER_THREAD]) {
#pragma unroll
  for (int k = 0; k < 4; k++) unpack_bf16x8(r.w[k], v + 8 * k);
}
__device__ __forceinline__ void unpack_raw(const raw_input<float> &r, float (&v)[PER_THREAD]) {
#pragma unroll
  for (int k = 0; k < 8; k++) {
    v[4 * k] = __uint_as_float(r.w[k].x), v[4 * k + 1] = __uint_as_float(r.w[k].y);
    v[4 * k + 2] = __uint_as_float(r.w[k].z), v[4 * k + 3] = __uint_as_float(r.w[k].w);
  }
}

/* ---- decode: acc += q * d for one block's codes ---- */
template <bool E5M2> __device__ __forceinline__ void accumulate_codes(const uint4 (&q)[2], float d, float (&acc)[PER_THREAD]) {
#pragma unroll
  for (int ch = 0; ch < 2; ch++) {
    const uint32_t w[4] = {q[ch].x, q[ch].y, q[ch].z, q[ch].w};
#pragma unroll
    for (int k4 = 0; k4 < 4; k4++) {
      float f[4];
      fp8x4_to_float<E5M2>(w[k4], f);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        float &a = acc[ch * CHUNK + k4 * 4 + j];
        a = fmaf(f[j], d, a);
      }
    }
  }
}
template <int G> __device__ __forceinline__ float decode_multiplier(float2 s) {
  return __fmul_rn(s.y, s.x > 0.0f ? rsqrt_group<G>() / s.x : 0.0f);
}

__device__ __forceinline__ void store_codes(uint8_t *payload, size_t base, int t, int lanes, const uint32_t (&w)[8]) {
#pragma unroll
  for (int c = 0; c < 2; c++)
    __stcs(reinterpret_cast<uint4 *>(payload + base + chunk_offset(c, t, lanes)),
           make_uint4(w[4 * c], w[4 * c + 1], w[4 * c + 2], w[4 * c + 3]));
}

} // namespace taco

#endif

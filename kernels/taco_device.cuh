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
constexpr int PER_THREAD = 32;               /* elements a thread holds */
constexpr int CHUNK = 8;                     /* consecutive elements: 16 bytes of BF16 */
constexpr int NCHUNK = PER_THREAD / CHUNK;   /* chunks per thread */
constexpr int BLOCK = 128;                   /* threads per block */
/* Above this sum of squares a group is scaled before its transform (so that
 * the transform cannot overflow); below it, after (one multiply fewer). */
constexpr float PRESCALE_ABOVE = 1e30f;

/* A group of G elements is held by T = G/32 consecutive lanes; lane t holds
 * chunks c = 0..3 of 8 elements starting at element (c*T + t)*8, so the lanes
 * of a group read and write adjacent 16-byte pieces. */
__device__ __forceinline__ int chunk_offset(int c, int t, int lanes) { return (c * lanes + t) * CHUNK; }
__device__ __forceinline__ int elem_offset(int i, int t, int lanes) { return chunk_offset(i / CHUNK, t, lanes) + i % CHUNK; }

/* Layouts of P elements per thread (taco_set_per_thread): P = 32 is the one
 * above. P = 64 gives each thread the elements of two neighbouring lanes of
 * the P = 32 layout ("virtual lanes" 2t and 2t+1 of G/32): S = P/32 adjacent
 * 16-byte chunks per c, so lane t of T = G/P holds chunks k = c*S + b at
 * element (c*T*S + t*S + b)*8, register index i = k*8 + j. The element bits
 * of a virtual lane become a register bit, so one cross-lane stage fewer, and
 * every operation and its order (sum of squares per virtual lane, then the
 * xor-butterfly; Hadamard stages in increasing h) stay those of P = 32:
 * results are bit-identical to it and to the reference. */
template <int P> __device__ __forceinline__ int chunk_offset_p(int k, int t, int lanes) {
  constexpr int S = P / 32;
  return ((k / S) * lanes * S + t * S + k % S) * CHUNK;
}
template <int P> __device__ __forceinline__ int elem_offset_p(int i, int t, int lanes) {
  return chunk_offset_p<P>(i / CHUNK, t, lanes) + i % CHUNK;
}

template <int G> __device__ __forceinline__ constexpr float rsqrt_group() {
  return G == 32 ? 0.17677669529663688f
         : G == 64 ? 0.125f
         : G == 128 ? 0.08838834764831845f
         : G == 256 ? 0.0625f
                    : 0.04419417382415922f;
}
template <bool E5M2> __device__ __forceinline__ constexpr float fp8_max() { return E5M2 ? 57344.0f : 448.0f; }

/* ---- global loads of the streamed inputs ----
 * LV (taco_loads): 0 = __ldcs (ld.global.cs: evict-first, the first version);
 * 1 and 2 = ld.global.nc.L1::no_allocate.L2::256B: read-only path, no L1
 * allocation, and a hint that the L2 fetch the whole 256-byte block from HBM
 * (the neighbouring lanes and the next tile want it), which raises the bytes in
 * flight per load without registers. 2 also keeps two tiles of loads in flight
 * per thread instead of one (the kernels' prefetch depth). */
template <int LV> __device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
  if constexpr (LV == 0) {
    return __ldcs(p);
  } else {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p));
    return r;
  }
}
template <int LV> __device__ __forceinline__ uint2 ld_stream(const uint2 *p) {
  if constexpr (LV == 0) {
    return __ldcs(p);
  } else {
    uint2 r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    return r;
  }
}
template <int LV> __device__ __forceinline__ float2 ld_stream(const float2 *p) {
  if constexpr (LV == 0) {
    return __ldcs(p);
  } else {
    float2 r;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v2.f32 {%0, %1}, [%2];" : "=f"(r.x), "=f"(r.y) : "l"(p));
    return r;
  }
}
template <int LV> __device__ __forceinline__ constexpr int prefetch_tiles() { return LV == 2 ? 2 : 1; }

/* ---- loads and stores of one chunk (8 elements, 16-byte aligned) ---- */

__device__ __forceinline__ void unpack_bf16x8(uint4 u, float *v) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    v[2 * k] = __uint_as_float(w[k] << 16);
    v[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
  }
}
__device__ __forceinline__ void load_chunk(const uint16_t *p, float *v) {
  unpack_bf16x8(__ldcs(reinterpret_cast<const uint4 *>(p)), v);
}
__device__ __forceinline__ void load_chunk(const float *p, float *v) {
  const float4 *q = reinterpret_cast<const float4 *>(p);
#pragma unroll
  for (int k = 0; k < 2; k++) {
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
  uint4 a;
  a.x = pack_bf16x2(v[0], v[1]), a.y = pack_bf16x2(v[2], v[3]), a.z = pack_bf16x2(v[4], v[5]), a.w = pack_bf16x2(v[6], v[7]);
  __stcs(reinterpret_cast<uint4 *>(p), a);
}
__device__ __forceinline__ void store_chunk(float *p, const float *v) {
  float4 *q = reinterpret_cast<float4 *>(p);
  __stcs(q, make_float4(v[0], v[1], v[2], v[3]));
  __stcs(q + 1, make_float4(v[4], v[5], v[6], v[7]));
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

/* ---- Hadamard: stages h = 1 .. G/2 in increasing order ----
 * element bits: 3 in-chunk bits (h = 1, 2, 4; in registers), log2(T) lane
 * bits (h = 8 .. 4T; warp shuffles), 2 chunk bits (h = 8T, 16T; registers). */

template <int G, int P = PER_THREAD> __device__ __forceinline__ void fwht(float (&v)[P], int t) {
  constexpr int T = G / P, LOW = CHUNK * (P / 32); /* register strides below LOW: element bits below the lane bits */
#pragma unroll
  for (int h = 1; h < LOW; h <<= 1)
#pragma unroll
    for (int i = 0; i < P; i++)
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
    for (int i = 0; i < P; i++) {
      float o = __shfl_xor_sync(FULL_MASK, v[i], m);
      v[i] = fmaf(sign, v[i], o);
    }
  }
#pragma unroll
  for (int h = LOW; h < P; h <<= 1)
#pragma unroll
    for (int i = 0; i < P; i++)
      if (!(i & h)) {
        float a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
}

/* ---- Hadamard through one shared-memory transpose (the default variant) ----
 * Same butterflies in the same stage order as fwht (so bit-identical results),
 * but the cross-lane stages run in registers: after the in-chunk stages
 * (element bits 0-2) the warp swaps, through shared memory, the low LX =
 * min(log2 T, 3) register bits j with the low LX lane bits t ("layout B"); the
 * element bits 3 .. 3+LX-1 then sit in registers. G = 512 keeps one shuffle
 * stage (lane bit 3). The chunk bits (h = 8T, 16T) are registers in both
 * layouts. Then the warp swaps back. Each lane moves 8 float4 (its 4 chunks'
 * element j together) per direction; a lane's 8 slots are padded to 9 so that
 * every 8-lane phase of a 128-bit access hits 8 different 16-byte bank groups. */

constexpr int XPOSE_SLOTS = 9;                          /* float4 slots per lane, one of them padding */
constexpr int XPOSE_WARP_FLOAT4 = 32 * XPOSE_SLOTS;     /* per warp: 4608 bytes */

template <int T> __device__ __forceinline__ constexpr int xpose_bits() { return T >= 8 ? 3 : T == 4 ? 2 : T == 2 ? 1 : 0; }

/* in-register stages on register-index bits [lo_h, hi_h) (h = 1, 2, 4, 8, 16) */
template <int LO_H, int HI_H> __device__ __forceinline__ void register_stages(float (&v)[PER_THREAD]) {
#pragma unroll
  for (int h = LO_H; h < HI_H; h <<= 1)
#pragma unroll
    for (int i = 0; i < PER_THREAD; i++)
      if (!(i & h)) {
        float a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
}

/* lane = threadIdx.x % 32; wbuf = this warp's XPOSE_WARP_FLOAT4 slots */
template <int G>
__device__ __forceinline__ void fwht_xpose(float (&v)[PER_THREAD], int t, int lane, float4 *__restrict__ wbuf) {
  constexpr int T = G / 32, LX = xpose_bits<T>(), MASK = (1 << LX) - 1;
  if constexpr (T == 1) {
    fwht<G>(v, t); /* G = 32: every stage is in registers already */
  } else {
    register_stages<1, CHUNK>(v); /* element bits 0-2 */
    /* A -> B: lane writes element j of its 4 chunks to its slot j */
    float4 *mine = wbuf + lane * XPOSE_SLOTS;
#pragma unroll
    for (int j = 0; j < CHUNK; j++) mine[j] = make_float4(v[j], v[CHUNK + j], v[2 * CHUNK + j], v[3 * CHUNK + j]);
    __syncwarp();
    /* register j of layout B = A's lane (t & ~MASK) | (j & MASK), A's register (j & ~MASK) | (t & MASK) */
    const int group_lane0 = lane - t;
    float4 *theirs = wbuf + (group_lane0 + (t & ~MASK)) * XPOSE_SLOTS + (t & MASK);
#pragma unroll
    for (int j = 0; j < CHUNK; j++) {
      const float4 f = theirs[(j & MASK) * XPOSE_SLOTS + (j & ~MASK)];
      v[j] = f.x, v[CHUNK + j] = f.y, v[2 * CHUNK + j] = f.z, v[3 * CHUNK + j] = f.w;
    }
    register_stages<1, (1 << LX)>(v); /* element bits 3 .. 3+LX-1 */
#pragma unroll
    for (int m = 1 << LX; m < T; m <<= 1) { /* G = 512: element bit 6, lane bit 3 */
      const float sign = (t & m) ? -1.0f : 1.0f;
#pragma unroll
      for (int i = 0; i < PER_THREAD; i++) {
        float o = __shfl_xor_sync(FULL_MASK, v[i], m);
        v[i] = fmaf(sign, v[i], o);
      }
    }
    register_stages<CHUNK, PER_THREAD>(v); /* the chunk bits */
    /* B -> A: each lane rewrites the slots it read (no one else reads them meanwhile) */
#pragma unroll
    for (int j = 0; j < CHUNK; j++)
      theirs[(j & MASK) * XPOSE_SLOTS + (j & ~MASK)] =
          make_float4(v[j], v[CHUNK + j], v[2 * CHUNK + j], v[3 * CHUNK + j]);
    __syncwarp();
#pragma unroll
    for (int j = 0; j < CHUNK; j++) {
      const float4 f = mine[j];
      v[j] = f.x, v[CHUNK + j] = f.y, v[2 * CHUNK + j] = f.z, v[3 * CHUNK + j] = f.w;
    }
  }
}

/* the variant chosen at compile time: XPOSE (shared memory; P = 32 only) or shuffles */
template <int G, bool XPOSE, int P = PER_THREAD>
__device__ __forceinline__ void fwht_variant(float (&v)[P], int t, float4 *__restrict__ wbuf) {
  if constexpr (XPOSE) {
    static_assert(P == PER_THREAD, "the shared-memory transpose is written for 32 elements per thread");
    fwht_xpose<G>(v, t, (int)(threadIdx.x & 31), wbuf);
  } else {
    fwht<G, P>(v, t);
  }
}

/* ---- one group's encode; every lane of the warp must call these ---- */

/* sum of squares of the group, the same value in each of its lanes: per
 * virtual lane of 32 elements (in index order), then the xor-butterfly over
 * virtual lanes (the first P/32 steps inside the thread) */
template <int G, int P = PER_THREAD> __device__ __forceinline__ float group_sum_squares(const float (&v)[P]) {
  constexpr int T = G / P, S = P / 32;
  float acc[S];
#pragma unroll
  for (int b = 0; b < S; b++) acc[b] = 0.0f;
#pragma unroll
  for (int i = 0; i < P; i++) acc[(i / CHUNK) % S] = fmaf(v[i], v[i], acc[(i / CHUNK) % S]);
  float sum = acc[0];
  if constexpr (S == 2) sum = acc[0] + acc[1];
#pragma unroll
  for (int m = 1; m < T; m <<= 1) sum = sum + __shfl_xor_sync(FULL_MASK, sum, m);
  return sum;
}

/* the two scales from the group's sum of squares: s_a, and m = s_a / sqrt(G) */
template <int G, bool E5M2> __device__ __forceinline__ float group_scales(float sum_squares, float &m) {
  constexpr float FMAX = fp8_max<E5M2>();
  const float mean = sum_squares * (1.0f / (float)G);
  const float s_a = fminf(fmaxf(FMAX * (1.0f / sqrtf(mean + 1e-6f)), 1e-3f), 1e3f);
  m = s_a * rsqrt_group<G>();
  return s_a;
}

/* transformed values v (= H x, or H (x m) when prescaled) -> s_q and FP8 codes */
template <int G, bool E5M2, int P = PER_THREAD>
__device__ __forceinline__ void encode_finish(const float (&v)[P], float m, bool prescale, uint32_t (&words)[P / 4],
                                              float &s_q_out) {
  constexpr int T = G / P;
  constexpr float FMAX = fp8_max<E5M2>();
  float absmax = 0.0f;
#pragma unroll
  for (int i = 0; i < P; i++) absmax = fmaxf(absmax, fabsf(v[i]));
#pragma unroll
  for (int m2 = 1; m2 < T; m2 <<= 1) absmax = fmaxf(absmax, __shfl_xor_sync(FULL_MASK, absmax, m2));
  const float ymax = prescale ? absmax : __fmul_rn(absmax, m);
  const float s_q = fminf(fmaxf(ymax / FMAX, 1e-12f), 1e6f), inv = 1.0f / s_q;
  const float k = prescale ? inv : __fmul_rn(m, inv);
#pragma unroll
  for (int w = 0; w < P / 4; w++)
    words[w] = fp8x4<E5M2>(v[4 * w] * k, v[4 * w + 1] * k, v[4 * w + 2] * k, v[4 * w + 3] * k);
  s_q_out = s_q;
}

/* from the group's sum of squares: scales, transform, FP8 codes (4 per word).
 * Usual case: y = H x, s_q from absmax(y) * m, q = fp8(y * (m / s_q)) with
 * m = s_a / sqrt(G): one multiply per element. Groups whose sum of squares
 * exceeds PRESCALE_ABOVE are scaled by m before the transform instead. */
template <int G, bool E5M2, bool XPOSE = false, int P = PER_THREAD>
__device__ __forceinline__ void encode_group(float (&v)[P], float sum_squares, int t, uint32_t (&words)[P / 4],
                                             float &s_a_out, float &s_q_out, float4 *__restrict__ wbuf = nullptr) {
  float m;
  const float s_a = group_scales<G, E5M2>(sum_squares, m);
  const bool prescale = !(sum_squares <= PRESCALE_ABOVE);
  if (prescale)
#pragma unroll
    for (int i = 0; i < P; i++) v[i] = __fmul_rn(v[i], m);
  fwht_variant<G, XPOSE, P>(v, t, wbuf);
  encode_finish<G, E5M2, P>(v, m, prescale, words, s_q_out);
  s_a_out = s_a;
}

/* Re-encode of a decoded sum without any transform (decode-sum-encode, direct):
 * acc holds the sum in the Hadamard domain (x = H acc, before the transform),
 * so y = H x = G acc and, by Parseval, sum(x^2) = G sum(acc^2). Both are
 * exact scalings by a power of two of what the lanes hold. */
template <int G, bool E5M2, int P = PER_THREAD>
__device__ __forceinline__ void encode_transformed(float (&acc)[P], uint32_t (&words)[P / 4], float &s_a_out,
                                                   float &s_q_out) {
  const float sum_squares = group_sum_squares<G, P>(acc) * (float)G;
  float m;
  const float s_a = group_scales<G, E5M2>(sum_squares, m);
  const bool prescale = !(sum_squares <= PRESCALE_ABOVE);
#pragma unroll
  for (int i = 0; i < P; i++) acc[i] = acc[i] * (float)G;
  if (prescale)
#pragma unroll
    for (int i = 0; i < P; i++) acc[i] = __fmul_rn(acc[i], m);
  encode_finish<G, E5M2, P>(acc, m, prescale, words, s_q_out);
  s_a_out = s_a;
}

/* ---- a thread's P input elements as raw 16-byte words, so the next tile's
 * loads can be issued before the current tile is computed ---- */

template <typename Tin, int P = PER_THREAD> struct raw_input {
  static constexpr int WORDS = P * (int)sizeof(Tin) / 16; /* P/8 for bf16, P/4 for fp32 */
  uint4 w[WORDS];
};
template <int G, int LV, typename Tin, int P>
__device__ __forceinline__ void load_raw(const Tin *group_src, int t, raw_input<Tin, P> &r) {
  constexpr int T = G / P, NK = P / CHUNK, PER_CHUNK = raw_input<Tin, P>::WORDS / NK;
#pragma unroll
  for (int k = 0; k < NK; k++) {
    const uint4 *p = reinterpret_cast<const uint4 *>(group_src + chunk_offset_p<P>(k, t, T));
#pragma unroll
    for (int q = 0; q < PER_CHUNK; q++) r.w[k * PER_CHUNK + q] = ld_stream<LV>(p + q);
  }
}
template <int P> __device__ __forceinline__ void unpack_raw(const raw_input<uint16_t, P> &r, float (&v)[P]) {
#pragma unroll
  for (int k = 0; k < P / 8; k++) unpack_bf16x8(r.w[k], v + 8 * k);
}
template <int P> __device__ __forceinline__ void unpack_raw(const raw_input<float, P> &r, float (&v)[P]) {
#pragma unroll
  for (int k = 0; k < P / 4; k++) {
    v[4 * k] = __uint_as_float(r.w[k].x), v[4 * k + 1] = __uint_as_float(r.w[k].y);
    v[4 * k + 2] = __uint_as_float(r.w[k].z), v[4 * k + 3] = __uint_as_float(r.w[k].w);
  }
}

/* ---- decode: acc += q * d for one block's codes (8 bytes per chunk) ---- */
template <bool E5M2, int P = PER_THREAD>
__device__ __forceinline__ void accumulate_codes(const uint2 (&q)[P / CHUNK], float d, float (&acc)[P]) {
#pragma unroll
  for (int ch = 0; ch < P / CHUNK; ch++) {
    const uint32_t w[2] = {q[ch].x, q[ch].y};
#pragma unroll
    for (int k2 = 0; k2 < 2; k2++) {
      float f[4];
      fp8x4_to_float<E5M2>(w[k2], f);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        float &a = acc[ch * CHUNK + k2 * 4 + j];
        a = fmaf(f[j], d, a);
      }
    }
  }
}
template <int G> __device__ __forceinline__ float decode_multiplier(float2 s) {
  return __fmul_rn(s.y, s.x > 0.0f ? rsqrt_group<G>() / s.x : 0.0f);
}
/* P = 64: a lane's two chunks of one c are adjacent, 16 bytes of codes in one load */
template <int G, int LV, int P = PER_THREAD>
__device__ __forceinline__ void load_codes(const uint8_t *payload, size_t base, int t, uint2 (&q)[P / CHUNK]) {
  constexpr int T = G / P;
  if constexpr (P == 64) {
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const uint4 u = ld_stream<LV>(reinterpret_cast<const uint4 *>(payload + base + chunk_offset_p<P>(2 * c, t, T)));
      q[2 * c] = make_uint2(u.x, u.y);
      q[2 * c + 1] = make_uint2(u.z, u.w);
    }
  } else {
#pragma unroll
    for (int c = 0; c < P / CHUNK; c++)
      q[c] = ld_stream<LV>(reinterpret_cast<const uint2 *>(payload + base + chunk_offset_p<P>(c, t, T)));
  }
}

template <int P = PER_THREAD>
__device__ __forceinline__ void store_codes(uint8_t *payload, size_t base, int t, int lanes,
                                            const uint32_t (&w)[P / 4]) {
  if constexpr (P == 64) {
#pragma unroll
    for (int c = 0; c < 4; c++)
      __stcs(reinterpret_cast<uint4 *>(payload + base + chunk_offset_p<P>(2 * c, t, lanes)),
             make_uint4(w[4 * c], w[4 * c + 1], w[4 * c + 2], w[4 * c + 3]));
  } else {
#pragma unroll
    for (int c = 0; c < P / CHUNK; c++)
      __stcs(reinterpret_cast<uint2 *>(payload + base + chunk_offset_p<P>(c, t, lanes)),
             make_uint2(w[2 * c], w[2 * c + 1]));
  }
}

} // namespace taco

#endif

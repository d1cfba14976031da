/* taco_tiled.cu — the encode and decode of contiguous tensors with warp tiles
 * (taco_set_tiling): each warp owns whole tiles of 32 lanes x P elements
 * (contiguous in memory, the same lane layout as taco_codec.cu's kernels, so
 * results are bit-identical), walks them with pointer increments and
 * compile-time offsets (no per-tile 64-bit index arithmetic or bound checks;
 * the last partial tile goes through a checked path), on a grid sized so that
 * every warp gets the same number of tiles. Inputs arrive either
 *   WARP: through registers, the next tile's loads issued before the current
 *         tile is computed (as taco_codec.cu), or
 *   BULK: through a per-warp ring of `stages` tiles in shared memory filled by
 *         1-D bulk asynchronous copies (cp.async.bulk, completion on an
 *         mbarrier per slot): several tiles per warp in flight without
 *         registers while the Hadamard transform runs.
 * Round 5 options (taco_set_tiled_options): two tiles of loads in flight per
 * lane (DEPTH2), L2 evict-first policies on the streams (EVICT), programmatic
 * dependent launch (PDL), a grid of exactly blocks-per-SM x SMs (FULLGRID).
 * Also a plain streaming copy kernel: the same-size copy ceiling bench-codec
 * prints next to cudaMemcpyAsync, and streaming kernels of the encode's and
 * the decode's read/write mix (taco_stream_device). */
#include <cuda_runtime.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "taco_codec.h"
#include "taco_device.cuh"
#include "taco_dispatch.cuh"
#include "taco_internal.h"

using namespace taco;

namespace {

constexpr int WARPS = BLOCK / 32;
constexpr int MAX_STAGES = 16;

/* ---- mbarrier and bulk copy (PTX ISA 8.0, sm_90) ---- */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
/* the slot was read through the generic proxy; the next bulk copy writes it through the async proxy */
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}

/* ---- round 5: programmatic dependent launch and L2 eviction hints ---- */

/* Wait until the previous kernel of the stream has finished and its writes are
 * visible (a no-op unless this kernel was launched with programmatic stream
 * serialization), then let the next kernel's blocks be placed on the SMs as
 * this one's blocks exit. Every tiled and streaming kernel starts with it. */
__device__ __forceinline__ void pdl_begin() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

/* The streamed global loads and stores. EV = false: ld/st.global.cs (the
 * round-4 kernels); true: no L1 allocation and an L2 evict-first policy
 * (createpolicy), so that the single-pass streams leave L2 to each other.
 * The asm is volatile so that no load moves above pdl_begin's wait. */
template <bool EV> struct stream_io {
  uint64_t policy = 0;
  __device__ __forceinline__ stream_io() {
    if constexpr (EV) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  }
  __device__ __forceinline__ uint4 ld(const void *p) const {
    if constexpr (!EV) {
      return __ldcs(reinterpret_cast<const uint4 *>(p));
    } else {
      uint4 r;
      asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
          : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
          : "l"(p), "l"(policy));
      return r;
    }
  }
  __device__ __forceinline__ uint2 ld2(const void *p) const {
    if constexpr (!EV) {
      return __ldcs(reinterpret_cast<const uint2 *>(p));
    } else {
      uint2 r;
      asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(r.x), "=r"(r.y) : "l"(p), "l"(policy));
      return r;
    }
  }
  __device__ __forceinline__ float2 ldf2(const float2 *p) const {
    if constexpr (!EV) {
      return __ldcs(p);
    } else {
      const uint2 u = ld2(p);
      return make_float2(__uint_as_float(u.x), __uint_as_float(u.y));
    }
  }
  __device__ __forceinline__ void st(void *p, uint4 v) const {
    if constexpr (!EV)
      __stcs(reinterpret_cast<uint4 *>(p), v);
    else
      asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(v.x),
                   "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy)
                   : "memory");
  }
  __device__ __forceinline__ void st2(void *p, uint2 v) const {
    if constexpr (!EV)
      __stcs(reinterpret_cast<uint2 *>(p), v);
    else
      asm volatile("st.global.L1::no_allocate.L2::cache_hint.v2.u32 [%0], {%1, %2}, %3;" ::"l"(p), "r"(v.x), "r"(v.y),
                   "l"(policy)
                   : "memory");
  }
};

/* OPT, the compile-time part of the options: bit 0 DEPTH2, bit 1 EVICT */
template <int OPT> __host__ __device__ constexpr int opt_depth() { return (OPT & 1) ? 2 : 1; }
template <int OPT> __host__ __device__ constexpr bool opt_evict() { return (OPT & 2) != 0; }

/* ---- tile geometry: a warp tile is 32 lanes x P elements = 32/T whole groups ---- */
template <int G, int P> struct tile_shape {
  static constexpr int T = G / P, S = P / 32, ELEMS = 32 * P, GROUPS = 32 / T, NK = P / CHUNK;
};
/* chunk k's element offset from the lane's first element (gi * G + t * S * CHUNK):
 * chunk_offset_p<P>(k, t, T) without its lane term, a compile-time constant */
template <int G, int P> __device__ __forceinline__ constexpr int chunk_rel(int k) {
  constexpr int T = G / P, S = P / 32;
  return ((k / S) * T * S + k % S) * CHUNK;
}

template <typename T> __device__ __forceinline__ uint4 ld16(const T *p, bool smem) {
  return smem ? *reinterpret_cast<const uint4 *>(p) : __ldcs(reinterpret_cast<const uint4 *>(p));
}

/* a lane's P inputs as raw 16-byte words, from global memory (streaming) or a shared slot */
template <int G, int P, bool SMEM, typename Tin>
__device__ __forceinline__ void load_lane(const Tin *lane_src, raw_input<Tin, P> &r) {
  constexpr int NK = P / CHUNK, PER = raw_input<Tin, P>::WORDS / NK;
#pragma unroll
  for (int k = 0; k < NK; k++)
#pragma unroll
    for (int q = 0; q < PER; q++) r.w[k * PER + q] = ld16(lane_src + chunk_rel<G, P>(k) + q * (16 / (int)sizeof(Tin)), SMEM);
}

/* the same from global memory through the stream's loads */
template <int G, int P, bool EV, typename Tin>
__device__ __forceinline__ void load_lane_io(const Tin *lane_src, raw_input<Tin, P> &r, const stream_io<EV> &io) {
  constexpr int NK = P / CHUNK, PER = raw_input<Tin, P>::WORDS / NK;
#pragma unroll
  for (int k = 0; k < NK; k++)
#pragma unroll
    for (int q = 0; q < PER; q++) r.w[k * PER + q] = io.ld(lane_src + chunk_rel<G, P>(k) + q * (16 / (int)sizeof(Tin)));
}

/* a lane's codes from global memory (8 bytes per chunk; 16 for two adjacent chunks at P = 64) */
template <int G, int P, bool EV>
__device__ __forceinline__ void load_lane_codes_io(const uint8_t *lane_src, uint2 (&q)[P / CHUNK], const stream_io<EV> &io) {
  if constexpr (P == 64) {
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const uint4 u = io.ld(lane_src + chunk_rel<G, P>(2 * c));
      q[2 * c] = make_uint2(u.x, u.y);
      q[2 * c + 1] = make_uint2(u.z, u.w);
    }
  } else {
#pragma unroll
    for (int c = 0; c < P / CHUNK; c++) q[c] = io.ld2(lane_src + chunk_rel<G, P>(c));
  }
}

/* a lane's codes (8 bytes per chunk; 16 for two adjacent chunks at P = 64) */
template <int G, int P, bool SMEM>
__device__ __forceinline__ void load_lane_codes(const uint8_t *lane_src, uint2 (&q)[P / CHUNK]) {
  if constexpr (P == 64) {
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const uint4 u = ld16(lane_src + chunk_rel<G, P>(2 * c), SMEM);
      q[2 * c] = make_uint2(u.x, u.y);
      q[2 * c + 1] = make_uint2(u.z, u.w);
    }
  } else {
#pragma unroll
    for (int c = 0; c < P / CHUNK; c++) {
      const uint2 *p = reinterpret_cast<const uint2 *>(lane_src + chunk_rel<G, P>(c));
      q[c] = SMEM ? *p : __ldcs(p);
    }
  }
}

template <int G, int P, bool EV>
__device__ __forceinline__ void store_lane_codes(uint8_t *lane_dst, const uint32_t (&w)[P / 4], const stream_io<EV> &io) {
  if constexpr (P == 64) {
#pragma unroll
    for (int c = 0; c < 4; c++)
      io.st(lane_dst + chunk_rel<G, P>(2 * c), make_uint4(w[4 * c], w[4 * c + 1], w[4 * c + 2], w[4 * c + 3]));
  } else {
#pragma unroll
    for (int c = 0; c < P / CHUNK; c++) io.st2(lane_dst + chunk_rel<G, P>(c), make_uint2(w[2 * c], w[2 * c + 1]));
  }
}

__device__ __forceinline__ float4 *tiled_transpose_buffer() {
  __shared__ float4 buffer[WARPS * XPOSE_WARP_FLOAT4];
  return buffer + (threadIdx.x / 32) * XPOSE_WARP_FLOAT4;
}

/* A per-warp ring of `stages` slots of SLOT bytes, one mbarrier each. Lane 0
 * issues the copies; every lane waits on the slot it is about to read. */
struct bulk_ring {
  uint8_t *slots;
  uint64_t *bars;
  int stages, slot;
  uint32_t phase;
};

__device__ __forceinline__ bulk_ring ring_setup(int stages, int slot_bytes) {
  extern __shared__ __align__(128) uint8_t dyn_smem[];
  __shared__ uint64_t bars[WARPS][MAX_STAGES];
  const int w = threadIdx.x / 32;
  bulk_ring r = {dyn_smem + (size_t)w * stages * slot_bytes, bars[w], stages, 0, 0};
  if ((threadIdx.x & 31) == 0) {
    for (int s = 0; s < stages; s++) mbar_init(&r.bars[s], 1);
    mbar_init_fence();
  }
  __syncwarp();
  return r;
}
__device__ __forceinline__ void ring_advance(bulk_ring &r) {
  if (++r.slot == r.stages) r.slot = 0, r.phase ^= 1u;
}

/* ---- encode ---- */

/* NaN or Inf in a group whose sum of squares is not finite (or huge): count,
 * report the first index, and zero the group (its codes and scales become 0).
 * Every lane of the warp calls this. Returns whether this lane's group is bad. */
template <int G, int P>
__device__ __forceinline__ bool screen_nonfinite(float (&v)[P], float &sum_squares, size_t base, int t, taco_nonfinite *nf) {
  constexpr int T = G / P;
  unsigned long long count = 0, first = ULLONG_MAX;
#pragma unroll
  for (int i = 0; i < P; i++)
    if ((__float_as_uint(v[i]) & 0x7f800000u) == 0x7f800000u) {
      unsigned long long e = base + elem_offset_p<P>(i, t, T);
      count++;
      first = e < first ? e : first;
    }
  const unsigned ballot = __ballot_sync(FULL_MASK, count != 0);
  const bool bad = ((ballot >> ((int)(threadIdx.x & 31) / T * T)) & ((1u << T) - 1u)) != 0;
  if (count && nf) {
    atomicAdd(&nf->count, count);
    atomicMin(&nf->first_index, first);
  }
  if (bad) {
#pragma unroll
    for (int i = 0; i < P; i++) v[i] = 0.0f;
    sum_squares = 0.0f;
  }
  return bad;
}

/* one group slice: scales, transform, codes; stores unless !active (every lane calls this) */
template <int G, bool E5M2, bool XPOSE, int P, bool EV>
__device__ __forceinline__ void encode_slice(float (&v)[P], size_t base, int t, bool active, uint8_t *lane_dst,
                                             float2 *group_scale, float4 *wbuf, taco_nonfinite *nf,
                                             const stream_io<EV> &io) {
  float sum_squares = group_sum_squares<G, P>(v);
  bool bad = false;
  if (__any_sync(FULL_MASK, !(sum_squares <= FLT_MAX))) bad = screen_nonfinite<G, P>(v, sum_squares, base, t, nf);
  uint32_t words[P / 4];
  float s_a, s_q;
  encode_group<G, E5M2, XPOSE, P>(v, sum_squares, t, words, s_a, s_q, wbuf);
  if (!active) return;
  if (bad) {
#pragma unroll
    for (int w = 0; w < P / 4; w++) words[w] = 0;
    s_a = s_q = 0.0f;
  }
  store_lane_codes<G, P>(lane_dst, words, io);
  if (t == 0) *group_scale = make_float2(s_a, s_q);
}

/* Register caps (ptxas, no spills at these): 32 per thread through registers
 * 102 (5 blocks of 128 threads per SM, as the grid kernels have), through a
 * bulk ring 80 (6 blocks; no prefetch registers); 64 per thread 168 / 128. */
template <int P, bool BULK> constexpr int min_blocks() { return P == 64 ? (BULK ? 4 : 3) : (BULK ? 6 : 5); }
/* DEPTH2 holds a second tile of loads: one block per SM fewer (32 per thread: 128
 * registers; 64: 255), which ptxas needs to keep them without spills */
template <int P, bool BULK, int OPT> constexpr int encode_min_blocks() {
  return (OPT & 1) ? min_blocks<P, BULK>() - 1 : min_blocks<P, BULK>();
}

template <int G, typename Tin, bool E5M2, bool XPOSE, int P, bool BULK, int OPT>
__global__ void __launch_bounds__(BLOCK, encode_min_blocks<P, BULK, OPT>())
    encode_tiled_kernel(const Tin *__restrict__ x, size_t n, size_t ngroups, uint32_t full_tiles, int stages,
                        uint8_t *__restrict__ payload, float2 *__restrict__ scales, taco_nonfinite *nf) {
  constexpr int DEPTH = opt_depth<OPT>();
  const stream_io<opt_evict<OPT>()> io;
  pdl_begin();
  using shape = tile_shape<G, P>;
  constexpr int T = shape::T, ELEMS = shape::ELEMS, GROUPS = shape::GROUPS;
  constexpr uint32_t SLOT = ELEMS * sizeof(Tin);
  const int lane = (int)(threadIdx.x & 31), t = lane % T, gi = lane / T;
  const uint32_t warp = blockIdx.x * WARPS + threadIdx.x / 32, nwarps = gridDim.x * WARPS;
  const int lane_first = gi * G + t * shape::S * CHUNK;
  float4 *wbuf = nullptr;
  if constexpr (XPOSE) wbuf = tiled_transpose_buffer();
  const size_t step = (size_t)nwarps * ELEMS;
  const Tin *src = x + (size_t)warp * ELEMS + lane_first;
  uint8_t *dst = payload + (size_t)warp * ELEMS + lane_first;
  float2 *sc = scales + (size_t)warp * GROUPS + gi;
  raw_input<Tin, P> raw[DEPTH]; /* raw[0]: the next tile's loads; raw[1] (DEPTH2): the one after */
  bulk_ring ring;
  if constexpr (BULK) {
    ring = ring_setup(stages, SLOT);
    if (lane == 0)
      for (int s = 0; s < stages; s++) {
        const uint32_t u = warp + (uint32_t)s * nwarps;
        if (u >= full_tiles) break;
        mbar_expect_tx(&ring.bars[s], SLOT);
        bulk_load(ring.slots + (size_t)s * SLOT, x + (size_t)u * ELEMS, SLOT, &ring.bars[s]);
      }
  } else {
#pragma unroll
    for (int d = 0; d < DEPTH; d++)
      if (warp + (uint32_t)d * nwarps < full_tiles) load_lane_io<G, P>(src + (size_t)d * step, raw[d], io);
  }
  for (uint32_t tile = warp; tile < full_tiles; tile += nwarps) {
    float v[P];
    if constexpr (BULK) {
      uint8_t *slot = ring.slots + (size_t)ring.slot * SLOT;
      mbar_wait(&ring.bars[ring.slot], ring.phase);
      load_lane<G, P, true>(reinterpret_cast<const Tin *>(slot) + lane_first, raw[0]);
      __syncwarp();
      const uint32_t refill = tile + (uint32_t)stages * nwarps;
      if (lane == 0 && refill < full_tiles) {
        proxy_fence();
        mbar_expect_tx(&ring.bars[ring.slot], SLOT);
        bulk_load(slot, x + (size_t)refill * ELEMS, SLOT, &ring.bars[ring.slot]);
      }
      ring_advance(ring);
      unpack_raw(raw[0], v);
    } else {
      unpack_raw(raw[0], v);
      if constexpr (DEPTH == 2) raw[0] = raw[1];
      if (tile + (uint32_t)DEPTH * nwarps < full_tiles) load_lane_io<G, P>(src + DEPTH * step, raw[DEPTH - 1], io);
    }
    encode_slice<G, E5M2, XPOSE, P>(v, (size_t)tile * ELEMS + (size_t)gi * G, t, true, dst, sc, wbuf, nf, io);
    src += step;
    dst += step;
    sc += (size_t)nwarps * GROUPS;
  }
  /* the last, partial tile (groups past the full tiles, the last one maybe
   * zero-padded): element loads with bounds, by the warp whose turn it is */
  if ((size_t)full_tiles * GROUPS < ngroups && warp == full_tiles % nwarps) {
    const size_t group = (size_t)full_tiles * GROUPS + gi, base = group * G;
    const bool active = group < ngroups;
    /* elements of this lane left in the tensor, counted from its first one: the
     * loads then use one base pointer with constant offsets (few registers) */
    const Tin *lane_src = x + base + t * shape::S * CHUNK;
    const long long left = active ? (long long)n - (long long)(base + t * shape::S * CHUNK) : 0;
    float v[P];
#pragma unroll
    for (int i = 0; i < P; i++) {
      const int rel = chunk_rel<G, P>(i / CHUNK) + i % CHUNK;
      v[i] = rel < left ? load_one(lane_src, (size_t)rel) : 0.0f;
    }
    encode_slice<G, E5M2, XPOSE, P>(v, base, t, active, payload + base + t * shape::S * CHUNK, scales + group, wbuf, nf,
                                    io);
  }
}

/* ---- decode (one block) ---- */

template <bool EV> __device__ __forceinline__ void store_chunk_io(uint16_t *p, const float *v, const stream_io<EV> &io) {
  io.st(p, make_uint4(pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7])));
}
template <bool EV> __device__ __forceinline__ void store_chunk_io(float *p, const float *v, const stream_io<EV> &io) {
  io.st(p, make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3])));
  io.st(p + 4, make_uint4(__float_as_uint(v[4]), __float_as_uint(v[5]), __float_as_uint(v[6]), __float_as_uint(v[7])));
}

template <int G, typename Tout, int P, bool EV>
__device__ __forceinline__ void store_lane_values(Tout *lane_dst, const float (&acc)[P], const stream_io<EV> &io) {
#pragma unroll
  for (int c = 0; c < P / CHUNK; c++) store_chunk_io(lane_dst + chunk_rel<G, P>(c), acc + c * CHUNK, io);
}

template <int G, typename Tout, bool E5M2, bool XPOSE, int P, bool BULK, int OPT>
__global__ void __launch_bounds__(BLOCK) decode_tiled_kernel(const uint8_t *__restrict__ in, size_t n, size_t ngroups,
                                                             uint32_t full_tiles, int stages, Tout *__restrict__ y) {
  constexpr int DEPTH = opt_depth<OPT>();
  const stream_io<opt_evict<OPT>()> io;
  pdl_begin();
  using shape = tile_shape<G, P>;
  constexpr int T = shape::T, ELEMS = shape::ELEMS, GROUPS = shape::GROUPS, NK = shape::NK;
  constexpr uint32_t CODES = ELEMS, SCALES = GROUPS * 8, SLOT = CODES + SCALES;
  const int lane = (int)(threadIdx.x & 31), t = lane % T, gi = lane / T;
  const uint32_t warp = blockIdx.x * WARPS + threadIdx.x / 32, nwarps = gridDim.x * WARPS;
  const int lane_first = gi * G + t * shape::S * CHUNK;
  float4 *wbuf = nullptr;
  if constexpr (XPOSE) wbuf = tiled_transpose_buffer();
  const float2 *all_scales = reinterpret_cast<const float2 *>(in + ngroups * G);
  const size_t step = (size_t)nwarps * ELEMS;
  const uint8_t *src = in + (size_t)warp * ELEMS + lane_first;
  const float2 *sc = all_scales + (size_t)warp * GROUPS + gi;
  Tout *dst = y + (size_t)warp * ELEMS + lane_first;
  uint2 q[DEPTH][NK]; /* [0]: the next tile's codes; [1] (DEPTH2): the one after */
  float2 s[DEPTH];
  bulk_ring ring;
  if constexpr (BULK) {
    ring = ring_setup(stages, SLOT);
    if (lane == 0)
      for (int k = 0; k < stages; k++) {
        const uint32_t u = warp + (uint32_t)k * nwarps;
        if (u >= full_tiles) break;
        mbar_expect_tx(&ring.bars[k], SLOT);
        bulk_load(ring.slots + (size_t)k * SLOT, in + (size_t)u * ELEMS, CODES, &ring.bars[k]);
        bulk_load(ring.slots + (size_t)k * SLOT + CODES, all_scales + (size_t)u * GROUPS, SCALES, &ring.bars[k]);
      }
  } else {
#pragma unroll
    for (int d = 0; d < DEPTH; d++)
      if (warp + (uint32_t)d * nwarps < full_tiles) {
        load_lane_codes_io<G, P>(src + (size_t)d * step, q[d], io);
        s[d] = io.ldf2(sc + (size_t)d * nwarps * GROUPS);
      }
  }
  for (uint32_t tile = warp; tile < full_tiles; tile += nwarps) {
    float acc[P];
#pragma unroll
    for (int i = 0; i < P; i++) acc[i] = 0.0f;
    if constexpr (BULK) {
      uint8_t *slot = ring.slots + (size_t)ring.slot * SLOT;
      mbar_wait(&ring.bars[ring.slot], ring.phase);
      load_lane_codes<G, P, true>(slot + lane_first, q[0]);
      s[0] = reinterpret_cast<const float2 *>(slot + CODES)[gi];
      __syncwarp();
      const uint32_t refill = tile + (uint32_t)stages * nwarps;
      if (lane == 0 && refill < full_tiles) {
        proxy_fence();
        mbar_expect_tx(&ring.bars[ring.slot], SLOT);
        bulk_load(slot, in + (size_t)refill * ELEMS, CODES, &ring.bars[ring.slot]);
        bulk_load(slot + CODES, all_scales + (size_t)refill * GROUPS, SCALES, &ring.bars[ring.slot]);
      }
      ring_advance(ring);
      accumulate_codes<E5M2, P>(q[0], decode_multiplier<G>(s[0]), acc);
    } else {
      accumulate_codes<E5M2, P>(q[0], decode_multiplier<G>(s[0]), acc);
      if constexpr (DEPTH == 2) {
#pragma unroll
        for (int c = 0; c < NK; c++) q[0][c] = q[1][c];
        s[0] = s[1];
      }
      if (tile + (uint32_t)DEPTH * nwarps < full_tiles) {
        load_lane_codes_io<G, P>(src + DEPTH * step, q[DEPTH - 1], io);
        s[DEPTH - 1] = io.ldf2(sc + (size_t)DEPTH * nwarps * GROUPS);
      }
    }
    fwht_variant<G, XPOSE, P>(acc, t, wbuf);
    store_lane_values<G, Tout, P>(dst, acc, io);
    src += step;
    dst += step;
    sc += (size_t)nwarps * GROUPS;
  }
  /* the last, partial tile: element stores with bounds */
  if ((size_t)full_tiles * GROUPS < ngroups && warp == full_tiles % nwarps) {
    const size_t group = (size_t)full_tiles * GROUPS + gi, base = group * G;
    const bool active = group < ngroups;
    float acc[P];
#pragma unroll
    for (int i = 0; i < P; i++) acc[i] = 0.0f;
    if (active) {
      load_lane_codes_io<G, P>(in + base + t * shape::S * CHUNK, q[0], io);
      accumulate_codes<E5M2, P>(q[0], decode_multiplier<G>(io.ldf2(all_scales + group)), acc);
    }
    fwht_variant<G, XPOSE, P>(acc, t, wbuf);
    if (active) {
      if (base + G <= n) {
        store_lane_values<G, Tout, P>(y + base + t * shape::S * CHUNK, acc, io);
      } else {
        Tout *lane_dst = y + base + t * shape::S * CHUNK;
        const long long left = (long long)n - (long long)(base + t * shape::S * CHUNK);
#pragma unroll
        for (int i = 0; i < P; i++) {
          const int rel = chunk_rel<G, P>(i / CHUNK) + i % CHUNK;
          if (rel < left) store_one(lane_dst, (size_t)rel, acc[i]);
        }
      }
    }
  }
}

/* ---- a plain streaming copy (16-byte loads and stores, 4 in flight per thread) ---- */
__global__ void __launch_bounds__(BLOCK) copy_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, size_t n16) {
  const size_t stride = (size_t)gridDim.x * BLOCK;
  size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    const uint4 a = __ldcs(src + i), b = __ldcs(src + i + stride), c = __ldcs(src + i + 2 * stride),
                d = __ldcs(src + i + 3 * stride);
    __stcs(dst + i, a);
    __stcs(dst + i + stride, b);
    __stcs(dst + i + 2 * stride, c);
    __stcs(dst + i + 3 * stride, d);
  }
  for (; i < n16; i += stride) __stcs(dst + i, __ldcs(src + i));
}

/* ---- streaming kernels of a fixed read/write mix (taco_stream_device) ----
 * Unit u reads R 16-byte words src[r * units + u] and writes W words
 * dst[w * units + u] (so every instruction of a warp touches 512 contiguous
 * bytes); U units in flight per thread (4, or 8 with DEPTH2). */
template <int R, int W, bool EV, int U>
__global__ void __launch_bounds__(BLOCK) stream_kernel(const uint4 *__restrict__ src, uint4 *__restrict__ dst, size_t units) {
  const stream_io<EV> io;
  pdl_begin();
  const size_t stride = (size_t)gridDim.x * BLOCK;
  size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x;
  for (; i + (U - 1) * stride < units; i += U * stride) {
    uint4 a[U][R];
#pragma unroll
    for (int u = 0; u < U; u++)
#pragma unroll
      for (int r = 0; r < R; r++) a[u][r] = io.ld(src + r * units + i + u * stride);
#pragma unroll
    for (int u = 0; u < U; u++) {
      uint4 v = a[u][0];
      if constexpr (R == 2) v.x ^= a[u][1].x, v.y ^= a[u][1].y, v.z ^= a[u][1].z, v.w ^= a[u][1].w;
#pragma unroll
      for (int w = 0; w < W; w++) io.st(dst + w * units + i + u * stride, v);
    }
  }
  for (; i < units; i += stride) {
    uint4 v = io.ld(src + i);
    if constexpr (R == 2) {
      const uint4 b = io.ld(src + units + i);
      v.x ^= b.x, v.y ^= b.y, v.z ^= b.z, v.w ^= b.w;
    }
#pragma unroll
    for (int w = 0; w < W; w++) io.st(dst + w * units + i, v);
  }
}

/* ---- host ---- */

/* kernel launch, with programmatic stream serialization when pdl */
template <typename... KArgs, typename... Args>
static int launch_kernel(void (*kernel)(KArgs...), unsigned blocks, size_t smem, cudaStream_t s, bool pdl,
                         Args... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(blocks);
  cfg.blockDim = dim3(BLOCK);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  TACO_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...));
  return 0;
}

struct grid_cache {
  int stages = -1, per_sm = 0, sms = 0;
};

/* Blocks for `tiles` warp tiles: as many warps as fit at once (or the
 * taco_set_blocks_per_sm cap), then as few as keep each warp's tile count the
 * same (no warp walks one tile more than most: the tail of a 64 MiB tensor).
 * Also raises the kernel's dynamic shared memory limit where needed. */
template <auto KERNEL> static int tiled_grid(uint32_t tiles, int stages, size_t smem, bool full, unsigned *blocks) {
  static grid_cache cache;
  if (cache.stages != stages) {
    int dev = 0;
    TACO_CUDA_CHECK(cudaGetDevice(&dev));
    TACO_CUDA_CHECK(cudaDeviceGetAttribute(&cache.sms, cudaDevAttrMultiProcessorCount, dev));
    /* static (transpose buffer, barriers) plus dynamic shared memory over 48 KiB needs the opt-in */
    if (smem) TACO_CUDA_CHECK(cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    TACO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cache.per_sm, KERNEL, BLOCK, smem));
    if (cache.per_sm < 1) return TACO_FAIL("%zu bytes of shared memory per block: no block fits on an SM", smem);
    cache.stages = stages;
  }
  const int override_bps = taco_blocks_per_sm_setting();
  const uint64_t need = tiles ? tiles : 1; /* at least one warp (the partial tile) */
  uint64_t warps;
  if (override_bps == 0) {
    warps = need;
  } else {
    const uint64_t cap = (uint64_t)(override_bps > 0 ? override_bps : cache.per_sm) * cache.sms * WARPS;
    const uint64_t per_warp = (need + cap - 1) / cap;
    warps = full ? (need < cap ? need : cap) : (need + per_warp - 1) / per_warp;
  }
  *blocks = (unsigned)((warps + WARPS - 1) / WARPS);
  return 0;
}

/* which P and transform a (per_thread, xpose) request runs: P = 64 only for G >= 64, shuffles there */
template <int G, typename F> static int with_tile_variant(int per_thread, int xpose, F &&f) {
  if constexpr (G >= 64)
    if (per_thread == 64) return f(std::false_type{}, std::integral_constant<int, 64>{});
  if constexpr (G > 32)
    if (xpose) return f(std::true_type{}, std::integral_constant<int, 32>{});
  return f(std::false_type{}, std::integral_constant<int, 32>{});
}

template <typename F> static int with_bulk(int stages, F &&f) {
  return stages > 0 ? f(std::true_type{}) : f(std::false_type{});
}

/* Calls f(integral_constant<int, OPT>) for the DEPTH2 / EVICT bits of opts where
 * SUPPORTED (the combinations the defaults run: fewer kernels to build), else OPT 0. */
template <bool SUPPORTED, typename F> static int with_opt(unsigned opts, F &&f) {
  if constexpr (SUPPORTED) {
    switch (opts & (TACO_TILED_DEPTH2 | TACO_TILED_EVICT)) {
    case TACO_TILED_DEPTH2: return f(std::integral_constant<int, 1>{});
    case TACO_TILED_EVICT: return f(std::integral_constant<int, 2>{});
    case TACO_TILED_DEPTH2 | TACO_TILED_EVICT: return f(std::integral_constant<int, 3>{});
    default: break;
    }
  }
  return f(std::integral_constant<int, 0>{});
}
/* the (G, transform, P) the library's defaults run: encode G = 128 32 per thread
 * with shuffles, G = 256 64 per thread; decode G = 128 shuffles, G = 256 shared memory */
template <int G, bool XP, int P> constexpr bool encode_opt_built() {
  return (G == 128 && !XP && P == 32) || (G == 256 && !XP && P == 64);
}
template <int G, bool XP, int P> constexpr bool decode_opt_built() {
  return P == 32 && ((G == 128 && !XP) || (G == 256 && XP));
}

} // namespace

extern "C" int taco_tiled_encode(const void *x, taco_dtype dt, size_t n, taco_params p, int xpose, int per_thread,
                                 int stages, void *block, taco_nonfinite *nf, void *stream) {
  const size_t ngroups = taco_groups(n, p.group);
  uint8_t *payload = (uint8_t *)block;
  float2 *scales = (float2 *)(payload + ngroups * (size_t)p.group);
  cudaStream_t s = (cudaStream_t)stream;
  if (stages < 0 || stages > MAX_STAGES) return TACO_FAIL("bulk stages %d: want 0..%d", stages, MAX_STAGES);
  return with_group_fp8(p, [&](auto gc, auto ec) {
    constexpr int G = decltype(gc)::value;
    constexpr bool E5 = decltype(ec)::value;
    return with_tile_variant<G>(per_thread, xpose, [&](auto xc, auto pc) {
      constexpr bool XP = decltype(xc)::value;
      constexpr int P = decltype(pc)::value;
      const size_t tiles = n / (32 * (size_t)P);
      if (tiles > (size_t)INT32_MAX) return TACO_FAIL("%zu elements: too many tiles for the tiled encode", n);
      const unsigned opts = taco_tiled_options();
      const bool pdl = opts & TACO_TILED_PDL, full = opts & TACO_TILED_FULLGRID;
      return with_bulk(stages, [&](auto bc) {
        constexpr bool BULK = decltype(bc)::value;
        return with_opt<!BULK && encode_opt_built<G, XP, P>()>(opts, [&](auto oc) {
          constexpr int OPT = decltype(oc)::value;
          unsigned blocks = 0;
          if (dt == TACO_DTYPE_BF16) {
            constexpr auto K = encode_tiled_kernel<G, uint16_t, E5, XP, P, BULK, OPT>;
            const size_t smem = BULK ? (size_t)WARPS * stages * 32 * P * sizeof(uint16_t) : 0;
            if (tiled_grid<K>((uint32_t)tiles, stages, smem, full, &blocks)) return -1;
            return launch_kernel(K, blocks, smem, s, pdl, (const uint16_t *)x, n, ngroups, (uint32_t)tiles, stages,
                                 payload, scales, nf);
          }
          constexpr auto K = encode_tiled_kernel<G, float, E5, XP, P, BULK, OPT>;
          const size_t smem = BULK ? (size_t)WARPS * stages * 32 * P * sizeof(float) : 0;
          if (tiled_grid<K>((uint32_t)tiles, stages, smem, full, &blocks)) return -1;
          return launch_kernel(K, blocks, smem, s, pdl, (const float *)x, n, ngroups, (uint32_t)tiles, stages, payload,
                               scales, nf);
        });
      });
    });
  });
}

extern "C" int taco_tiled_decode(const void *block, size_t n, taco_params p, void *y, taco_dtype dt, int xpose,
                                 int per_thread, int stages, void *stream) {
  const size_t ngroups = taco_groups(n, p.group);
  cudaStream_t s = (cudaStream_t)stream;
  if (stages < 0 || stages > MAX_STAGES) return TACO_FAIL("bulk stages %d: want 0..%d", stages, MAX_STAGES);
  return with_group_fp8(p, [&](auto gc, auto ec) {
    constexpr int G = decltype(gc)::value;
    constexpr bool E5 = decltype(ec)::value;
    /* the decode is built for 32 per thread only (64 made its stores slower, round 3) */
    return with_tile_variant<G>(32, xpose, [&](auto xc, auto pc) {
      constexpr bool XP = decltype(xc)::value;
      constexpr int P = decltype(pc)::value;
      const size_t tiles = n / (32 * (size_t)P);
      if (tiles > (size_t)INT32_MAX) return TACO_FAIL("%zu elements: too many tiles for the tiled decode", n);
      (void)per_thread;
      const unsigned opts = taco_tiled_options();
      const bool pdl = opts & TACO_TILED_PDL, full = opts & TACO_TILED_FULLGRID;
      return with_bulk(stages, [&](auto bc) {
        constexpr bool BULK = decltype(bc)::value;
        const size_t smem = BULK ? (size_t)WARPS * stages * (32 * P + 32 / (G / P) * 8) : 0;
        return with_opt<!BULK && decode_opt_built<G, XP, P>()>(opts, [&](auto oc) {
          constexpr int OPT = decltype(oc)::value;
          unsigned blocks = 0;
          if (dt == TACO_DTYPE_BF16) {
            constexpr auto K = decode_tiled_kernel<G, uint16_t, E5, XP, P, BULK, OPT>;
            if (tiled_grid<K>((uint32_t)tiles, stages, smem, full, &blocks)) return -1;
            return launch_kernel(K, blocks, smem, s, pdl, (const uint8_t *)block, n, ngroups, (uint32_t)tiles, stages,
                                 (uint16_t *)y);
          }
          constexpr auto K = decode_tiled_kernel<G, float, E5, XP, P, BULK, OPT>;
          if (tiled_grid<K>((uint32_t)tiles, stages, smem, full, &blocks)) return -1;
          return launch_kernel(K, blocks, smem, s, pdl, (const uint8_t *)block, n, ngroups, (uint32_t)tiles, stages,
                               (float *)y);
        });
      });
    });
  });
}

extern "C" int taco_copy_device(void *dst, const void *src, size_t bytes, void *stream) {
  if (((uintptr_t)dst | (uintptr_t)src | bytes) & 15u) return TACO_FAIL("copy: pointers and size must be 16-byte aligned");
  if (bytes == 0) return 0;
  static int per_sm = 0, sms = 0;
  if (!per_sm) {
    int dev = 0;
    TACO_CUDA_CHECK(cudaGetDevice(&dev));
    TACO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    TACO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, copy_kernel, BLOCK, 0));
  }
  const size_t n16 = bytes / 16, want = (n16 + BLOCK - 1) / BLOCK, cap = (size_t)per_sm * (size_t)sms;
  copy_kernel<<<(unsigned)(want < cap ? want : cap), BLOCK, 0, (cudaStream_t)stream>>>((const uint4 *)src, (uint4 *)dst,
                                                                                       n16);
  TACO_CUDA_CHECK(cudaGetLastError());
  return 0;
}

/* ---- round 5 options and the streaming kernels (taco_internal.h) ---- */

static int tiled_options_value = TACO_TILED_OPTS_DEFAULT; /* until taco_set_tiled_options */

static const struct {
  const char *name;
  unsigned flag;
} option_names[] = {{"d2", TACO_TILED_DEPTH2}, {"ef", TACO_TILED_EVICT}, {"pdl", TACO_TILED_PDL}, {"full", TACO_TILED_FULLGRID}};

extern "C" int taco_parse_tiled_options(const char *s, unsigned *flags) {
  if (!s || !flags) return TACO_FAIL("NULL options");
  if (!strcmp(s, "none")) return *flags = 0, 0;
  unsigned f = 0;
  char buf[64];
  if (snprintf(buf, sizeof buf, "%s", s) >= (int)sizeof buf || !*buf) return TACO_FAIL("options '%s': want none or d2+ef+pdl+full", s);
  char *save = NULL;
  for (char *tok = strtok_r(buf, "+", &save); tok; tok = strtok_r(NULL, "+", &save)) {
    unsigned hit = 0;
    for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++)
      if (!strcmp(tok, option_names[i].name)) hit = option_names[i].flag;
    if (!hit) return TACO_FAIL("options '%s': '%s' is not d2, ef, pdl or full", s, tok);
    f |= hit;
  }
  *flags = f;
  return 0;
}

extern "C" void taco_format_tiled_options(unsigned flags, char *buf, size_t size) {
  if (!buf || !size) return;
  buf[0] = '\0';
  size_t len = 0;
  for (size_t i = 0; i < sizeof option_names / sizeof option_names[0]; i++)
    if (flags & option_names[i].flag) {
      const int k = snprintf(buf + len, size - len, "%s%s", len ? "+" : "", option_names[i].name);
      if (k < 0 || (size_t)k >= size - len) return;
      len += (size_t)k;
    }
  if (!len) snprintf(buf, size, "none");
}

extern "C" unsigned taco_tiled_options(void) { return (unsigned)tiled_options_value; }

extern "C" int taco_set_tiled_options(unsigned flags) {
  if (flags & ~TACO_TILED_ALL) return TACO_FAIL("tiled options 0x%x: unknown bits (want TACO_TILED_* flags)", flags);
  tiled_options_value = (int)flags;
  return 0;
}

/* a streaming kernel on as many blocks as fit at once (cached per kernel) */
template <auto KERNEL> static int launch_stream_kernel(const void *src, void *dst, size_t units, cudaStream_t s, bool pdl) {
  static int per_sm = 0, sms = 0;
  if (!per_sm) {
    int dev = 0;
    TACO_CUDA_CHECK(cudaGetDevice(&dev));
    TACO_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    TACO_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, KERNEL, BLOCK, 0));
    if (per_sm < 1) return TACO_FAIL("stream kernel: no block fits on an SM");
  }
  const size_t want = (units + BLOCK - 1) / BLOCK, cap = (size_t)per_sm * (size_t)sms;
  return launch_kernel(KERNEL, (unsigned)(want < cap ? want : cap), 0, s, pdl, (const uint4 *)src, (uint4 *)dst, units);
}

template <int R, int W> static int launch_stream(const void *src, void *dst, size_t units, cudaStream_t s) {
  const unsigned opts = taco_tiled_options();
  const bool pdl = opts & TACO_TILED_PDL;
  switch (opts & (TACO_TILED_DEPTH2 | TACO_TILED_EVICT)) {
  case TACO_TILED_DEPTH2: return launch_stream_kernel<stream_kernel<R, W, false, 8>>(src, dst, units, s, pdl);
  case TACO_TILED_EVICT: return launch_stream_kernel<stream_kernel<R, W, true, 4>>(src, dst, units, s, pdl);
  case TACO_TILED_DEPTH2 | TACO_TILED_EVICT: return launch_stream_kernel<stream_kernel<R, W, true, 8>>(src, dst, units, s, pdl);
  default: return launch_stream_kernel<stream_kernel<R, W, false, 4>>(src, dst, units, s, pdl);
  }
}

extern "C" int taco_stream_device(void *dst, const void *src, int reads, int writes, size_t units, void *stream) {
  if (((uintptr_t)dst | (uintptr_t)src) & 15u) return TACO_FAIL("stream: pointers must be 16-byte aligned");
  if (!dst || !src) return TACO_FAIL("stream: NULL buffer");
  if (units == 0) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  if (reads == 1 && writes == 1) return launch_stream<1, 1>(src, dst, units, s);
  if (reads == 2 && writes == 1) return launch_stream<2, 1>(src, dst, units, s);
  if (reads == 1 && writes == 2) return launch_stream<1, 2>(src, dst, units, s);
  return TACO_FAIL("stream: %d reads and %d writes per unit: want 1:1, 2:1 or 1:2", reads, writes);
}

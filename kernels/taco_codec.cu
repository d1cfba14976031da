/* taco_codec.cu — fused TACO encode, decode, decode-sum and decode-sum-encode
 * on sm_90: one read of the input and one write of the output per kernel,
 * the Hadamard transform in registers and warp shuffles (taco_device.cuh). */
#include <cuda_runtime.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

#include "taco_codec.h"
#include "taco_device.cuh"
#include "taco_dispatch.cuh"
#include "taco_internal.h"

using namespace taco;

/* ---- kernels ----
 * Persistent grids: a thread walks tiles (one group slice of 32 elements) with
 * a stride of the whole grid, and issues the loads of its next tile before it
 * computes the current one, so each thread keeps two tiles of reads in flight.
 * Loop bounds are per warp (its first group), so every lane takes part in the
 * shuffles; lanes past the end compute on zeros and store nothing. */

/* This warp's slots of the block's transpose buffer (fwht_xpose). A kernel
 * instantiated without XPOSE never calls it, so it holds no shared memory. */
__device__ __forceinline__ float4 *warp_transpose_buffer() {
  __shared__ float4 buffer[BLOCK / 32 * XPOSE_WARP_FLOAT4];
  return buffer + (threadIdx.x / 32) * XPOSE_WARP_FLOAT4;
}

/* Group g's source elements start at x + (g / groups_per_row) * ld + (g % groups_per_row) * G,
 * so one kernel serves a contiguous tensor (groups_per_row = ngroups) and the
 * shared columns of a CAAT-Net tensor (groups_per_row = shared / G, ld = cols). */
template <int G, typename Tin, bool E5M2, bool XPOSE, int LV, int P>
__global__ void __launch_bounds__(BLOCK) encode_kernel(const Tin *__restrict__ x, size_t n, size_t ngroups,
                                                       size_t groups_per_row, size_t ld, uint8_t *__restrict__ payload,
                                                       float2 *__restrict__ scales, taco_nonfinite *nf) {
  constexpr int T = G / P, DEPTH = prefetch_tiles<LV>();
  const int t = (int)(threadIdx.x % T);
  const size_t stride = (size_t)gridDim.x * BLOCK;
  size_t tid = (size_t)blockIdx.x * BLOCK + threadIdx.x;
  auto source = [&](size_t g) { return x + (g / groups_per_row) * ld + (g % groups_per_row) * G; };
  auto full = [&](size_t g) { return g < ngroups && g * G + G <= n; };
  float4 *wbuf = nullptr;
  if constexpr (XPOSE) wbuf = warp_transpose_buffer();
  /* raw[0]: this tile's loads; raw[1] (DEPTH 2): the next tile's */
  raw_input<Tin, P> raw[DEPTH];
  bool raw_full[DEPTH];
#pragma unroll
  for (int d = 0; d < DEPTH; d++) {
    raw_full[d] = full((tid + d * stride) / T);
    if (raw_full[d]) load_raw<G, LV>(source((tid + d * stride) / T), t, raw[d]);
  }
  for (; (tid & ~(size_t)31) / T < ngroups; tid += stride) {
    const size_t group = tid / T, base = group * G;
    const bool active = group < ngroups;
    float v[P];
    if (raw_full[0]) {
      unpack_raw(raw[0], v);
    } else { /* the partial last group, or lanes past the end */
      const Tin *src = source(group);
#pragma unroll
      for (int i = 0; i < P; i++) {
        size_t e = (size_t)elem_offset_p<P>(i, t, T);
        v[i] = (active && base + e < n) ? load_one(src, e) : 0.0f;
      }
    }
    if constexpr (DEPTH == 2) {
      raw[0] = raw[1];
      raw_full[0] = raw_full[1];
    }
    const size_t next = (tid + DEPTH * stride) / T;
    raw_full[DEPTH - 1] = full(next);
    if (raw_full[DEPTH - 1]) load_raw<G, LV>(source(next), t, raw[DEPTH - 1]);

    float sum_squares = group_sum_squares<G, P>(v);
    bool group_bad = false;
    /* NaN or Inf make the sum non-finite (so can huge finite values: checked exactly here) */
    if (__any_sync(FULL_MASK, !(sum_squares <= FLT_MAX))) {
      unsigned long long count = 0, first = ULLONG_MAX;
#pragma unroll
      for (int i = 0; i < P; i++)
        if ((__float_as_uint(v[i]) & 0x7f800000u) == 0x7f800000u) {
          unsigned long long e = base + elem_offset_p<P>(i, t, T);
          count++;
          first = e < first ? e : first;
        }
      const unsigned ballot = __ballot_sync(FULL_MASK, count != 0);
      group_bad = ((ballot >> ((int)(threadIdx.x & 31) / T * T)) & ((1u << T) - 1u)) != 0;
      if (count && nf) {
        atomicAdd(&nf->count, count);
        atomicMin(&nf->first_index, first);
      }
      if (group_bad) {
#pragma unroll
        for (int i = 0; i < P; i++) v[i] = 0.0f;
        sum_squares = 0.0f;
      }
    }
    uint32_t words[P / 4];
    float s_a, s_q;
    encode_group<G, E5M2, XPOSE, P>(v, sum_squares, t, words, s_a, s_q, wbuf);
    if (!active) continue;
    if (group_bad) {
#pragma unroll
      for (int w = 0; w < P / 4; w++) words[w] = 0;
      s_a = s_q = 0.0f;
    }
    store_codes<P>(payload, base, t, T, words);
    if (t == 0) scales[group] = make_float2(s_a, s_q);
  }
}

/* Sum of k blocks' dequantized values before the (linear) transform, then one
 * transform; stored as Tout (MODE 0), or re-encoded: MODE 1 transforms the sum
 * back (x = H acc) and encodes x as taco_encode would (a second transform);
 * MODE 2 ("direct") re-encodes in the Hadamard domain with no transform at all
 * (encode_transformed), for whole groups only: the launcher sends a partial
 * last group to MODE 1. Groups [g0, gend) of a block of ngroups; block 0 of
 * the next tile(s) is prefetched (LV: taco_loads), blocks 1..k-1 load in place. */
template <int G, typename Tout, bool E5M2, int MODE, bool XPOSE, int LV, int P>
__global__ void __launch_bounds__(BLOCK) decode_sum_kernel(const uint8_t *__restrict__ in, size_t wire, int k,
                                                           size_t n, size_t ngroups, size_t g0, size_t gend,
                                                           Tout *__restrict__ y, uint8_t *__restrict__ out_payload,
                                                           float2 *__restrict__ out_scales) {
  constexpr int T = G / P, DEPTH = prefetch_tiles<LV>(), NK = P / CHUNK;
  const int t = (int)(threadIdx.x % T);
  const size_t stride = (size_t)gridDim.x * BLOCK;
  size_t tid = (size_t)blockIdx.x * BLOCK + threadIdx.x;
  float4 *wbuf = nullptr;
  if constexpr (XPOSE) wbuf = warp_transpose_buffer();
  uint2 q0[DEPTH][NK];
  float2 s0[DEPTH];
  auto fetch = [&](const uint8_t *blk, size_t g, uint2(&q)[NK], float2 &s) {
    s = ld_stream<LV>(reinterpret_cast<const float2 *>(blk + ngroups * G) + g);
    load_codes<G, LV, P>(blk, g * G, t, q);
  };
#pragma unroll
  for (int d = 0; d < DEPTH; d++) {
    s0[d] = make_float2(0.0f, 0.0f);
    if (g0 + (tid + d * stride) / T < gend) fetch(in, g0 + (tid + d * stride) / T, q0[d], s0[d]);
  }
  for (; g0 + (tid & ~(size_t)31) / T < gend; tid += stride) {
    const size_t group = g0 + tid / T, base = group * G;
    const bool active = group < gend;
    float acc[P];
#pragma unroll
    for (int i = 0; i < P; i++) acc[i] = 0.0f;
    if (active) accumulate_codes<E5M2, P>(q0[0], decode_multiplier<G>(s0[0]), acc);
    if constexpr (DEPTH == 2) {
#pragma unroll
      for (int c = 0; c < NK; c++) q0[0][c] = q0[1][c];
      s0[0] = s0[1];
    }
    const size_t next = g0 + (tid + DEPTH * stride) / T;
    if (next < gend) fetch(in, next, q0[DEPTH - 1], s0[DEPTH - 1]);
    if (active)
      for (int b = 1; b < k; b++) {
        uint2 q[NK];
        float2 s;
        fetch(in + (size_t)b * wire, group, q, s);
        accumulate_codes<E5M2, P>(q, decode_multiplier<G>(s), acc);
      }
    if constexpr (MODE == 2) {
      uint32_t words[P / 4];
      float s_a, s_q;
      encode_transformed<G, E5M2, P>(acc, words, s_a, s_q);
      if (!active) continue;
      store_codes<P>(out_payload, base, t, T, words);
      if (t == 0) out_scales[group] = make_float2(s_a, s_q);
      continue;
    }
    fwht_variant<G, XPOSE, P>(acc, t, wbuf);
    if constexpr (MODE == 1) {
      if (base + G > n) /* padding of the last group re-encodes as zeros */
#pragma unroll
        for (int i = 0; i < P; i++)
          if (base + elem_offset_p<P>(i, t, T) >= n) acc[i] = 0.0f;
      uint32_t words[P / 4];
      float s_a, s_q;
      encode_group<G, E5M2, XPOSE, P>(acc, group_sum_squares<G, P>(acc), t, words, s_a, s_q, wbuf);
      if (!active) continue;
      store_codes<P>(out_payload, base, t, T, words);
      if (t == 0) out_scales[group] = make_float2(s_a, s_q);
    } else {
      if (!active) continue;
      if (base + G <= n) {
#pragma unroll
        for (int c = 0; c < NK; c++) store_chunk(y + base + chunk_offset_p<P>(c, t, T), acc + c * CHUNK);
      } else {
#pragma unroll
        for (int i = 0; i < P; i++) {
          size_t e = base + elem_offset_p<P>(i, t, T);
          if (e < n) store_one(y, e, acc[i]);
        }
      }
    }
  }
}

/* Blocks of a persistent grid: as many as fit on the device at once, at most
 * as many as the work needs. Cached per kernel. For tuning,
 * taco_set_blocks_per_sm overrides the occupancy (0: one tile per thread, no
 * persistence). The variant settings below are the library's defaults (the
 * winners of kernels/RESULTS.md) until a caller sets them; the library reads
 * no environment (`tacorun bench-codec --variants` times the others). */
static int blocks_per_sm_setting = -1; /* -1: occupancy; 0: no persistence; n > 0 */

static int blocks_per_sm_override(void) { return blocks_per_sm_setting; }

extern "C" int taco_blocks_per_sm_setting(void) { return blocks_per_sm_override(); }

extern "C" int taco_set_blocks_per_sm(int blocks) {
  if (blocks < -1 || blocks > 64) return TACO_FAIL("blocks per SM %d: want -1 (occupancy), 0 or 1..64", blocks);
  blocks_per_sm_setting = blocks;
  return 0;
}

template <auto KERNEL> static unsigned persistent_grid(size_t threads, bool persistent = true) {
  static int per_sm = 0, sms = 0;
  size_t want = (threads + BLOCK - 1) / BLOCK;
  int override_bps = blocks_per_sm_override();
  if (override_bps == 0 || !persistent) return (unsigned)(want ? want : 1);
  if (!per_sm) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, KERNEL, BLOCK, 0) != cudaSuccess || per_sm < 1)
      per_sm = 1, sms = sms > 0 ? sms : 132;
  }
  size_t cap = (size_t)(override_bps > 0 ? override_bps : per_sm) * (size_t)sms;
  return (unsigned)(want < cap ? (want ? want : 1) : cap);
}

/* Which Hadamard variant the kernels run (taco_set_hadamard). G = 32 has no
 * cross-lane stage, so both settings run the same (shuffle-free) kernel. */
static int hadamard_setting = TACO_HADAMARD_DEFAULT;

static taco_hadamard hadamard_current(void) { return (taco_hadamard)hadamard_setting; }

extern "C" int taco_set_hadamard(taco_hadamard h) {
  if (h != TACO_HADAMARD_SHUFFLE && h != TACO_HADAMARD_SMEM && h != TACO_HADAMARD_AUTO)
    return TACO_FAIL("hadamard variant %d: want TACO_HADAMARD_SHUFFLE, _SMEM or _AUTO", (int)h);
  hadamard_setting = h;
  return 0;
}

/* How the kernels load their streamed input (taco_set_loads), and how
 * decode-sum-encode re-encodes (taco_set_dse). */
static int loads_setting = TACO_LOADS_DEFAULT, dse_setting = TACO_DSE_DEFAULT;

static taco_loads loads_current(void) { return (taco_loads)loads_setting; }

extern "C" int taco_set_loads(taco_loads l) {
  if (l != TACO_LOADS_STREAM && l != TACO_LOADS_L2PF && l != TACO_LOADS_DEEP)
    return TACO_FAIL("loads variant %d: want TACO_LOADS_STREAM, _L2PF or _DEEP", (int)l);
  loads_setting = l;
  return 0;
}

static taco_dse dse_current(void) { return (taco_dse)dse_setting; }

extern "C" int taco_set_dse(taco_dse d) {
  if (d != TACO_DSE_DIRECT && d != TACO_DSE_TRANSFORM)
    return TACO_FAIL("decode-sum-encode variant %d: want TACO_DSE_DIRECT or TACO_DSE_TRANSFORM", (int)d);
  dse_setting = d;
  return 0;
}

/* How encode and decode walk a contiguous tensor (taco_set_tiling). */
static int tiling_setting = TACO_TILING_DEFAULT, bulk_stages_setting = TACO_BULK_STAGES_DEFAULT;

static taco_tiling tiling_current(void) { return (taco_tiling)tiling_setting; }

extern "C" int taco_set_tiling(taco_tiling t, int stages) {
  if (t != TACO_TILING_GRID && t != TACO_TILING_WARP && t != TACO_TILING_BULK && t != TACO_TILING_AUTO)
    return TACO_FAIL("tiling %d: want TACO_TILING_GRID, _WARP, _BULK or _AUTO", (int)t);
  if (t == TACO_TILING_BULK && (stages < 1 || stages > 16)) return TACO_FAIL("bulk stages %d: want 1..16", stages);
  tiling_setting = t;
  if (t == TACO_TILING_BULK) bulk_stages_setting = stages;
  return 0;
}

/* stages for taco_tiled_*: -1 = GRID (not tiled), 0 = WARP, n = BULK with n stages */
static int tiled_stages(bool decode) {
  const taco_tiling t = tiling_current();
  if (t == TACO_TILING_AUTO) return decode ? -1 : 0;
  return t == TACO_TILING_GRID ? -1 : t == TACO_TILING_WARP ? 0 : bulk_stages_setting;
}

/* Calls f(integral_constant<int, LV>) for the current loads setting. */
template <typename F> static int with_loads(F &&f) {
  switch (loads_current()) {
  case TACO_LOADS_L2PF: return f(std::integral_constant<int, 1>{});
  case TACO_LOADS_DEEP: return f(std::integral_constant<int, 2>{});
  default: return f(std::integral_constant<int, 0>{});
  }
}

/* Elements per thread (taco_set_per_thread): 32, 64 for G >= 64, or 0 (AUTO). */
static int per_thread_setting = TACO_PER_THREAD_DEFAULT;

static int per_thread_current(void) { return per_thread_setting; }

extern "C" int taco_set_per_thread(int p) {
  if (p != 0 && p != 32 && p != 64) return TACO_FAIL("elements per thread %d: want 0 (auto), 32 or 64", p);
  per_thread_setting = p;
  return 0;
}

/* Calls f(bool_constant<XPOSE>) for the current setting. AUTO: the transpose
 * from G = 256 up (3-4 cross-lane stages saved), where it measured faster. */
template <int G, typename F> static int with_hadamard(F &&f) {
  if constexpr (G > 32) {
    const taco_hadamard h = hadamard_current();
    if (h == TACO_HADAMARD_SMEM || (h == TACO_HADAMARD_AUTO && G >= 256)) return f(std::true_type{});
  }
  return f(std::false_type{});
}

/* Calls f(bool_constant<XPOSE>, integral_constant<LV>, integral_constant<P>)
 * for the current settings. 64 elements per thread (G >= 64) has one
 * cross-lane stage fewer and runs it with shuffles (the transpose is written
 * for 32); its loads are STREAM or L2PF (DEEP, two tiles of 64, would need
 * more registers than a thread has: it runs as L2PF). */
enum kernel_kind { KIND_ENCODE, KIND_DECODE, KIND_DSE };

/* AUTO: where 64 per thread measured faster on the H200 (kernels/RESULTS.md
 * round 3): the encode from G = 256 up (one of three cross-lane stages
 * saved, +4-5 points), decode-sum-encode (+2-9); not the decode or
 * decode-sum, whose stores it makes slower. */
template <int G> static bool use_64(kernel_kind kind, bool allow64) {
  const int p = per_thread_current();
  if (G < 64 || p == 32 || !allow64) return false;
  if (p == 64) return true;
  return kind == KIND_DSE || (kind == KIND_ENCODE && G >= 256);
}

template <int G, typename F> static int with_variant(kernel_kind kind, bool allow64, F &&f) {
  if constexpr (G >= 64) {
    if (use_64<G>(kind, allow64)) {
      if (loads_current() == TACO_LOADS_STREAM)
        return f(std::false_type{}, std::integral_constant<int, 0>{}, std::integral_constant<int, 64>{});
      return f(std::false_type{}, std::integral_constant<int, 1>{}, std::integral_constant<int, 64>{});
    }
  }
  return with_hadamard<G>([&](auto xc) {
    return with_loads([&](auto lc) { return f(xc, lc, std::integral_constant<int, 32>{}); });
  });
}

/* ---- host ---- */

static int check_common(taco_params p, size_t n, const void *a, const void *b) {
  if (!taco_params_valid(p)) return TACO_FAIL("group %d / fp8 %d: want group 32..512 (power of two), E4M3 or E5M2", p.group, (int)p.fp8);
  if (n && (!a || !b)) return TACO_FAIL("NULL buffer for %zu elements", n);
  if (((uintptr_t)a | (uintptr_t)b) & 15u) return TACO_FAIL("buffers must be 16-byte aligned (%p, %p)", a, b);
  return 0;
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
    const size_t gpr = groups_per_row ? groups_per_row : ngroups;
    return with_variant<G>(KIND_ENCODE, true, [&](auto xc, auto lc, auto pc) {
      constexpr bool XP = decltype(xc)::value;
      constexpr int LV = decltype(lc)::value, P = decltype(pc)::value;
      const size_t threads = ngroups * (G / P);
      const int stages = tiled_stages(false);
      if (stages >= 0 && LV == 0 && gpr == ngroups) /* a contiguous tensor: warp tiles */
        return taco_tiled_encode(x, dt, n, p, XP, P, stages, block, nf, stream);
      if (dt == TACO_DTYPE_BF16)
        encode_kernel<G, uint16_t, E5, XP, LV, P>
            <<<persistent_grid<encode_kernel<G, uint16_t, E5, XP, LV, P>>(threads), BLOCK, 0, s>>>(
                (const uint16_t *)x, n, ngroups, gpr, ld, payload, scales, nf);
      else
        encode_kernel<G, float, E5, XP, LV, P><<<persistent_grid<encode_kernel<G, float, E5, XP, LV, P>>(threads),
                                                 BLOCK, 0, s>>>((const float *)x, n, ngroups, gpr, ld, payload,
                                                                scales, nf);
      TACO_CUDA_CHECK(cudaGetLastError());
      return 0;
    });
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
    const size_t whole = n / G; /* groups without padding */
    /* 64 per thread loads 16 bytes of codes at once: blocks after the first
     * are 16-byte aligned only when the wire size is (an even group count) */
    const bool aligned_blocks = k == 1 || wire % 16 == 0;
    return with_variant<G>(block ? KIND_DSE : KIND_DECODE, aligned_blocks, [&](auto xc, auto lc, auto pc) {
      constexpr bool XP = decltype(xc)::value;
      constexpr int LV = decltype(lc)::value, P = decltype(pc)::value;
      const size_t threads = ngroups * (G / P);
      const int stages = tiled_stages(true);
      if (!block && k == 1 && stages >= 0 && LV == 0) /* a plain decode: warp tiles (32 per thread) */
        return taco_tiled_decode(in, n, p, y, dt, XP, P, stages, stream);
      if (block && dse_current() == TACO_DSE_DIRECT) {
        if (whole)
          decode_sum_kernel<G, float, E5, 2, XP, LV, P>
              <<<persistent_grid<decode_sum_kernel<G, float, E5, 2, XP, LV, P>>(whole * (G / P)), BLOCK, 0, s>>>(
                  src, wire, k, n, ngroups, 0, whole, nullptr, out_payload, out_scales);
        if (whole < ngroups) /* the zero-padded last group: transform back, zero the padding, encode */
          decode_sum_kernel<G, float, E5, 1, XP, LV, P><<<1, BLOCK, 0, s>>>(src, wire, k, n, ngroups, whole, ngroups,
                                                                            nullptr, out_payload, out_scales);
      } else if (block)
        decode_sum_kernel<G, float, E5, 1, XP, LV, P>
            <<<persistent_grid<decode_sum_kernel<G, float, E5, 1, XP, LV, P>>(threads), BLOCK, 0, s>>>(
                src, wire, k, n, ngroups, 0, ngroups, nullptr, out_payload, out_scales);
      else if (dt == TACO_DTYPE_BF16)
        /* G = 32 decodes faster with one tile per thread (measured: its stores are the most scattered) */
        decode_sum_kernel<G, uint16_t, E5, 0, XP, LV, P>
            <<<persistent_grid<decode_sum_kernel<G, uint16_t, E5, 0, XP, LV, P>>(threads, G > 32), BLOCK, 0, s>>>(
                src, wire, k, n, ngroups, 0, ngroups, (uint16_t *)y, nullptr, nullptr);
      else
        decode_sum_kernel<G, float, E5, 0, XP, LV, P>
            <<<persistent_grid<decode_sum_kernel<G, float, E5, 0, XP, LV, P>>(threads, G > 32), BLOCK, 0, s>>>(
                src, wire, k, n, ngroups, 0, ngroups, (float *)y, nullptr, nullptr);
      TACO_CUDA_CHECK(cudaGetLastError());
      return 0;
    });
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

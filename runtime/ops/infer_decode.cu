/* infer_decode.cu — split-K decode attention (infer_decode.h). */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "gpu_check.h"
#include "infer_decode.h"
#include "infer_decode_split.cuh"
#include "ops_device.cuh"

typedef __nv_bfloat16 bf16;

#define DEC_CUDA(e, call) CUDA_CHECK(e, call)
#define DEC_LAUNCHED(e) DEC_CUDA(e, cudaGetLastError())

/* ---- split-K decode attention ---------------------------------------------------
 * Block (split, kv head j, sequence b): positions [split * chunk, +chunk) of
 * the cache; warp w takes groups of DEC2_U consecutive positions, every
 * DEC2_WARPS-th group, and loads the group's keys and values before the
 * online softmax (base 2) uses them; the warps are merged through shared
 * memory into one FP32 partial (max, sum, output) per query head and split,
 * which the combine kernel reduces. */

#define DEC2_WARPS 8
#define DEC2_U 4

static long long decode2_chunk(const infer_attn_dims *a, long long len) {
  long long units = (long long)a->batch * a->kvl, want = (4LL * sm_count() + units - 1) / units;
  long long chunk = (len + want - 1) / want;
  return chunk < DEC2_WARPS * DEC2_U ? DEC2_WARPS * DEC2_U : chunk;
}

extern "C" size_t infer_decode2_partial_bytes(const infer_attn_dims *a, long long len) {
  long long chunk = decode2_chunk(a, len), nsplit = (len + chunk - 1) / chunk;
  return (size_t)a->batch * a->hl * nsplit * (a->head_dim + 2) * sizeof(float);
}

template <int D> __device__ __forceinline__ void load_lane(const bf16 *p, float *x) {
  if (D == 128) {
    uint2 u = *(const uint2 *)p;
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
    float2 a = __bfloat1622float2(h[0]), b = __bfloat1622float2(h[1]);
    x[0] = a.x, x[1] = a.y, x[2] = b.x, x[3] = b.y;
  } else {
    float2 a = __bfloat1622float2(*(const __nv_bfloat162 *)p);
    x[0] = a.x, x[1] = a.y;
  }
}

/* Two E4M3 codes -> two floats (exact: E4M3 values are halves). */
__device__ __forceinline__ float2 e4m3x2_to_float2(__nv_fp8x2_storage_t v) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(v, __NV_E4M3);
  return __half22float2(*(const __half2 *)&h);
}

template <int D> __device__ __forceinline__ void load_lane(const uint8_t *p, float *x) {
  if (D == 128) {
    uint32_t u = *(const uint32_t *)p;
    float2 a = e4m3x2_to_float2((__nv_fp8x2_storage_t)(u & 0xffffu)), b = e4m3x2_to_float2((__nv_fp8x2_storage_t)(u >> 16));
    x[0] = a.x, x[1] = a.y, x[2] = b.x, x[3] = b.y;
  } else {
    float2 a = e4m3x2_to_float2(*(const __nv_fp8x2_storage_t *)p);
    x[0] = a.x, x[1] = a.y;
  }
}

/* The cache's element type: BF16 (no scales) or E4M3 with one FP32 scale per
 * (sequence, KV head, position) for K and one for V (infer_kv8.h). One kernel
 * body serves both: the FP8 one loads codes, multiplies each score by its key
 * scale and each weight by its value scale. */
struct kv_bf16 {
  typedef bf16 T;
  static constexpr bool scaled = false;
};
struct kv_e4m3 {
  typedef uint8_t T;
  static constexpr bool scaled = true;
};

template <int D, int G, typename KV>
__global__ void __launch_bounds__(DEC2_WARPS * 32)
    decode2_partial_kernel(const bf16 *q, const typename KV::T *kc, const typename KV::T *vc, const float *ks,
                           const float *vs, float *part, int hl, int kvl, long long max_seq, long long len,
                           long long chunk, int nsplit, float qscale) {
  constexpr int E = D / 32;
  const int split = blockIdx.x, j = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float qf[G][E], m[G], l[G], acc[G][E];
#pragma unroll
  for (int i = 0; i < G; i++) {
    load_lane<D>(q + ((long long)b * hl + j * G + i) * D + lane * E, qf[i]);
#pragma unroll
    for (int x = 0; x < E; x++) qf[i][x] *= qscale, acc[i][x] = 0.f;
    m[i] = -INFINITY, l[i] = 0.f;
  }
  const long long srow = ((long long)b * kvl + j) * max_seq, base = srow * D + lane * E;
  const long long p0 = (long long)split * chunk, p1 = p0 + chunk < len ? p0 + chunk : len;
  for (long long g0 = p0 + (long long)warp * DEC2_U; g0 < p1; g0 += DEC2_WARPS * DEC2_U) {
    float k[DEC2_U][E], v[DEC2_U][E], ksc[DEC2_U], vsc[DEC2_U];
#pragma unroll
    for (int u = 0; u < DEC2_U; u++)
      if (g0 + u < p1) {
        load_lane<D>(kc + base + (g0 + u) * D, k[u]);
        load_lane<D>(vc + base + (g0 + u) * D, v[u]);
        if (KV::scaled) ksc[u] = ks[srow + g0 + u], vsc[u] = vs[srow + g0 + u];
      }
#pragma unroll
    for (int u = 0; u < DEC2_U; u++) {
      if (g0 + u >= p1) break;
#pragma unroll
      for (int i = 0; i < G; i++) {
        float s = 0.f;
#pragma unroll
        for (int x = 0; x < E; x++) s = fmaf(qf[i][x], k[u][x], s);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (KV::scaled) s *= ksc[u];
        const float mn = fmaxf(m[i], s), c = exp2f(m[i] - mn), pe = exp2f(s - mn);
        const float pv = KV::scaled ? pe * vsc[u] : pe;
        l[i] = l[i] * c + pe;
#pragma unroll
        for (int x = 0; x < E; x++) acc[i][x] = fmaf(pv, v[u][x], acc[i][x] * c);
        m[i] = mn;
      }
    }
  }
  decode_warps_to_partial<DEC2_WARPS, G, D, E>(m, l, acc, warp, lane, b, j, hl, split, nsplit, part);
}

/* ---- decode attention v3: tensor-core mma over the query heads of a group ------------
 * Block (split, kv head j, sequence b) of DEC3_WARPS warps; warp w takes tiles of 16
 * consecutive positions, every DEC3_WARPS-th tile of the block's chunk. Per tile, one
 * m16n8k16 mma a k-step computes S = Q K^T for the g <= 16 query heads (rows; rows >= g
 * are zero) against the 16 positions (two n-tiles of 8), the online softmax (base 2) runs
 * on S's fragments (a head's running max is shared by the 4 lanes of a quad: 2 shuffles a
 * tile), and P V is head_dim / 8 more mma, P's fragments being S's (the C layout of two
 * n8 tiles is the A layout of one k16). Loads need no shared memory:
 *  - lane (r = lane / 4, c = lane % 4) loads a quarter of the dims of the positions r and
 *    8 + r of the tile, for K and V, 16 bytes a load, the quad's four loads side by side
 *    (64 contiguous bytes: whole sectors; chunk_map says which dims a lane's word w holds);
 *  - Q.K^T sums over dims, so any order of the dims serves if Q and K use the same one:
 *    k-step s takes 32-bit words 2s, 2s+1 of a lane's chunk as its k slots 2c, 2c+1 and
 *    2c+8, 2c+9 (Q's A fragments load the same dims of its head rows);
 *  - for P V the lane needs V at 2 positions of one dim: movmatrix.trans turns the 8 x 8
 *    tile of word t of 8 positions' chunks into it; output dims come out as those of the
 *    lane's own word t.
 * The next tile's rows (and, at the start, the first tile's) are prefetched into L2.
 * FP8 cache (E4M3, scales ks/vs per position): codes -> FP16 pairs (one cvt each), FP16
 * mma; each score times its key's scale; the value weights are 2^(s + log2 vs - mv) with a
 * running max mv of their own (in [0, 1], so FP16 keeps them), the sum of weights l keeps
 * the max m of the scores; the block turns its output back to m's scale (A 2^(mv - m)).
 * Partials (output; max, sum) per split are merged by decode3_combine_kernel; with one split
 * the block writes the output itself (no combine launch). */

#define DEC3_WARPS 4
#define DEC3_TILE 16

/* Positions per block: about 8 blocks an SM (3 fit at once: several waves, so that the last one is
 * short), at least one tile a warp, whole rounds of the warps' tiles. */
static long long decode3_chunk(const infer_attn_dims *a, long long len) {
  const long long step = (long long)DEC3_WARPS * DEC3_TILE;
  long long units = (long long)a->batch * a->kvl, want = (8LL * sm_count() + units - 1) / units;
  long long chunk = (len + want - 1) / want;
  chunk = (chunk + step - 1) / step * step;
  return chunk < step ? step : chunk;
}

extern "C" size_t infer_decode3_partial_bytes(const infer_attn_dims *a, long long len) {
  long long chunk = decode3_chunk(a, len), nsplit = (len + chunk - 1) / chunk;
  return (size_t)a->batch * a->hl * nsplit * (a->head_dim + 2) * sizeof(float);
}

template <bool F16>
__device__ __forceinline__ void mma16816(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  if (F16)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t movtrans(uint32_t x) {
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

template <bool F16> __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t u;
  if (F16) {
    __half2 h = __floats2half2_rn(lo, hi);
    memcpy(&u, &h, 4);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    memcpy(&u, &h, 4);
  }
  return u;
}

/* A lane's W = d / 8 words (pairs of the mma's 16-bit type) of one cached row, zeros for a
 * position past the chunk. Each load instruction of a quad reads 64 contiguous bytes of the
 * row (two whole 32-byte sectors): BF16, lane c's uint4 i holds dims 32 i + 8 c .. + 7, so
 * word w is dims word_dim(w, c), +1; E4M3, uint4 i holds dims 64 i + 16 c .. + 15. */
template <typename T> struct chunk_map;
template <> struct chunk_map<bf16> {
  static __device__ __forceinline__ int word_dim(int w, int c) { return 32 * (w >> 2) + 8 * c + 2 * (w & 3); }
};
template <> struct chunk_map<uint8_t> {
  static __device__ __forceinline__ int word_dim(int w, int c) { return 64 * (w >> 3) + 16 * c + 2 * (w & 7); }
};
/* A lane's share of one cached row as loaded: U 16-byte words, each quad's four side by
 * side (64 contiguous bytes: BF16 dims 32 i + 8 c .. + 7, E4M3 dims 64 i + 16 c .. + 15),
 * zeros for a position past the chunk; unpack_row turns it into the W words (pairs of the
 * mma's 16-bit type) that chunk_map describes. */
template <int W, typename T> struct row_raw {
  static constexpr int U = sizeof(T) == 2 ? W / 4 : W / 8;
  uint4 u[U];
};
template <int W, typename T> __device__ __forceinline__ void load_row(const T *row, int c, bool ok, row_raw<W, T> &x) {
#pragma unroll
  for (int i = 0; i < row_raw<W, T>::U; i++)
    x.u[i] = ok ? *(const uint4 *)((const char *)row + 64 * i + 16 * c) : make_uint4(0, 0, 0, 0);
}
__device__ __forceinline__ uint32_t e4m3x2_to_half2_bits(uint32_t two) {
  __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xffffu), __NV_E4M3);
  return (uint32_t)h.x | ((uint32_t)h.y << 16);
}
template <int W> __device__ __forceinline__ void unpack_row(const row_raw<W, bf16> &x, uint32_t *w) {
#pragma unroll
  for (int i = 0; i < W / 4; i++) w[4 * i] = x.u[i].x, w[4 * i + 1] = x.u[i].y, w[4 * i + 2] = x.u[i].z, w[4 * i + 3] = x.u[i].w;
}
template <int W> __device__ __forceinline__ void unpack_row(const row_raw<W, uint8_t> &x, uint32_t *w) {
#pragma unroll
  for (int i = 0; i < W / 8; i++) {
    const uint32_t y[4] = {x.u[i].x, x.u[i].y, x.u[i].z, x.u[i].w};
#pragma unroll
    for (int k = 0; k < 4; k++) w[8 * i + 2 * k] = e4m3x2_to_half2_bits(y[k]), w[8 * i + 2 * k + 1] = e4m3x2_to_half2_bits(y[k] >> 16);
  }
}
/* The next tile's rows into L2 while this one is computed (one prefetch per 128-byte line). */
template <int D, typename T> __device__ __forceinline__ void prefetch_row(const T *row, int c) {
  constexpr int BYTES = D * (int)sizeof(T);
  if (c * 128 < BYTES) asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)row + c * 128));
}

/* One tile as a lane loads it: its K and V rows (positions r and 8 + r) and, FP8, the key
 * and value scales of its score positions 8 n + 2 c + i ([n][i]). */
template <int W, typename T> struct dec3_tile {
  row_raw<W, T> k0, k1, v0, v1;
  float ks[2][2], vs[2][2];
};
/* What a warp carries from tile to tile: the output accumulators (P V's C fragments), and
 * per row (r, r + 8) the running max of the scores, of the value weights' exponents and
 * this lane's part of the sum of weights. */
template <int W> struct dec3_state {
  float acc[W][4];
  float m[2], mv[2], l[2];
};

/* Issue the loads of the tile at t0 (rows of the cache of this (sequence, KV head) at kb,
 * vb; scales at ks, vs + srow); nothing waits for them here. */
template <int D, typename KV>
__device__ __forceinline__ void dec3_load(const typename KV::T *kb, const typename KV::T *vb, const float *ks,
                                          const float *vs, long long srow, long long t0, long long p1, int r,
                                          int c, dec3_tile<D / 8, typename KV::T> &t) {
  const long long pa = t0 + r, pb = t0 + 8 + r;
  load_row<D / 8>(kb + pa * D, c, pa < p1, t.k0);
  load_row<D / 8>(kb + pb * D, c, pb < p1, t.k1);
  load_row<D / 8>(vb + pa * D, c, pa < p1, t.v0);
  load_row<D / 8>(vb + pb * D, c, pb < p1, t.v1);
  if (KV::scaled)
#pragma unroll
    for (int n = 0; n < 2; n++)
#pragma unroll
      for (int i = 0; i < 2; i++) {
        const long long p = t0 + 8 * n + 2 * c + i;
        t.ks[n][i] = p < p1 ? ks[srow + p] : 1.f;
        t.vs[n][i] = p < p1 ? vs[srow + p] : 1.f;
      }
}

/* The tile at t0 (loaded into tl) into the warp's state st: S = Q K^T, the online softmax,
 * P V. */
template <int D, int G, typename KV>
__device__ __forceinline__ void dec3_step(const uint32_t (&qa)[D / 16][4], const dec3_tile<D / 8, typename KV::T> &tl,
                                          long long t0, long long p1, int c, float qscale, dec3_state<D / 8> &st) {
  constexpr int W = D / 8, KS = D / 16;
  constexpr bool TWO = G > 8; /* query heads in rows 8..15 too */
  constexpr bool F16 = KV::scaled;
  uint32_t k0[W], k1[W], v0[W], v1[W];
  unpack_row<W>(tl.k0, k0);
  unpack_row<W>(tl.k1, k1);
  unpack_row<W>(tl.v0, v0);
  unpack_row<W>(tl.v1, v1);
  /* this lane's scores: [n-tile][row half][2]: positions t0 + 8 n + 2c + {0, 1} */
  float s0[4] = {0.f, 0.f, 0.f, 0.f}, s1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int s = 0; s < KS; s++) {
    mma16816<F16>(s0, qa[s], k0[2 * s], k0[2 * s + 1]);
    mma16816<F16>(s1, qa[s], k1[2 * s], k1[2 * s + 1]);
  }
  float sc[2][2][2], lv[2][2]; /* [n-tile][half][i], log2 of the value scales [n-tile][i] */
#pragma unroll
  for (int n = 0; n < 2; n++)
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const long long p = t0 + 8 * n + 2 * c + i;
      const float *sv = n ? s1 : s0;
      float f = qscale;
      lv[n][i] = 0.f;
      if (KV::scaled && p < p1) f *= tl.ks[n][i], lv[n][i] = __log2f(tl.vs[n][i]);
      sc[n][0][i] = p < p1 ? sv[i] * f : -INFINITY;
      sc[n][1][i] = p < p1 ? sv[2 + i] * f : -INFINITY;
    }
  uint32_t pf[4]; /* P's A fragment: rows r, r + 8; k slots 2c.. (n-tile 0), 2c + 8.. (n-tile 1) */
#pragma unroll
  for (int h = 0; h < (TWO ? 2 : 1); h++) {
    float tm = fmaxf(fmaxf(sc[0][h][0], sc[0][h][1]), fmaxf(sc[1][h][0], sc[1][h][1]));
    float tv = KV::scaled ? fmaxf(fmaxf(sc[0][h][0] + lv[0][0], sc[0][h][1] + lv[0][1]),
                                  fmaxf(sc[1][h][0] + lv[1][0], sc[1][h][1] + lv[1][1]))
                          : tm;
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) {
      tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
      if (KV::scaled) tv = fmaxf(tv, __shfl_xor_sync(0xffffffffu, tv, o));
    }
    const float mn = fmaxf(st.m[h], tm), mref = mn == -INFINITY ? 0.f : mn;
    const float vn = KV::scaled ? fmaxf(st.mv[h], tv) : mn, vref = vn == -INFINITY ? 0.f : vn;
    const float corr = exp2f(st.m[h] - mref), vcorr = KV::scaled ? exp2f(st.mv[h] - vref) : corr;
    float pe[2][2], pw[2][2];
#pragma unroll
    for (int n = 0; n < 2; n++)
#pragma unroll
      for (int i = 0; i < 2; i++) {
        pe[n][i] = exp2f(sc[n][h][i] - mref);
        pw[n][i] = KV::scaled ? exp2f(sc[n][h][i] + lv[n][i] - vref) : pe[n][i];
      }
    st.l[h] = st.l[h] * corr + (pe[0][0] + pe[0][1]) + (pe[1][0] + pe[1][1]);
    st.m[h] = mn, st.mv[h] = vn;
#pragma unroll
    for (int t = 0; t < W; t++) st.acc[t][2 * h] *= vcorr, st.acc[t][2 * h + 1] *= vcorr;
    pf[h] = pack2<F16>(pw[0][0], pw[0][1]);
    pf[2 + h] = pack2<F16>(pw[1][0], pw[1][1]);
  }
  if (!TWO) pf[1] = pf[3] = 0u;
#pragma unroll
  for (int t = 0; t < W; t++) mma16816<F16>(st.acc[t], pf, movtrans(v0[t]), movtrans(v1[t]));
}

/* v3 (PIPE false) loads a tile, prefetches the next one's rows into L2 and computes it; v4
 * (PIPE true) keeps the next tile's loads in flight in registers while it computes this one
 * (two tiles' buffers, no L2 prefetch), the same arithmetic in the same order: the same bits.
 * Registers: v3 and v4 over the FP8 cache fit 3 blocks an SM; v4 over BF16 (two tiles of 64
 * registers a lane) 2. */
template <typename KV, bool PIPE> struct dec3_blocks {
  static constexpr int value = PIPE && !KV::scaled ? 2 : 3;
};
template <int D, int G, typename KV, bool PIPE>
__global__ void __launch_bounds__(DEC3_WARPS * 32, (dec3_blocks<KV, PIPE>::value))
    decode3_kernel(const bf16 *q, const typename KV::T *kc, const typename KV::T *vc, const float *ks,
                   const float *vs, float *part, bf16 *out, int hl, int kvl, long long max_seq, long long len,
                   long long chunk, int nsplit, float qscale) {
  typedef chunk_map<typename KV::T> map;
  constexpr int W = D / 8, KS = D / 16;
  constexpr bool TWO = G > 8; /* query heads in rows 8..15 too */
  constexpr bool F16 = KV::scaled;
  constexpr long long STRIDE = DEC3_WARPS * DEC3_TILE;
  const int split = blockIdx.x, j = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r = lane >> 2, c = lane & 3;
  const long long srow = ((long long)b * kvl + j) * max_seq;
  const typename KV::T *kb = kc + srow * D, *vb = vc + srow * D;
  const long long p0 = (long long)split * chunk, p1 = p0 + chunk < len ? p0 + chunk : len;
  long long t0 = p0 + (long long)warp * DEC3_TILE;
  dec3_tile<W, typename KV::T> ta, tb;
  if (PIPE) {
    dec3_load<D, KV>(kb, vb, ks, vs, srow, t0, p1, r, c, ta); /* in flight while Q is read */
  } else { /* the first tile's rows on their way while Q is read */
    const long long fa = t0 + r, fb = fa + 8;
    if (fa < p1) prefetch_row<D>(kb + fa * D, c), prefetch_row<D>(vb + fa * D, c);
    if (fb < p1) prefetch_row<D>(kb + fb * D, c), prefetch_row<D>(vb + fb * D, c);
  }
  /* Q's A fragments: rows r and r + 8 (heads j G + row, zero past G), the words of K's map */
  uint32_t qa[KS][4];
  {
    uint32_t w0[W], w1[W];
#pragma unroll
    for (int h = 0; h < 2; h++) {
      uint32_t *w = h ? w1 : w0;
      const int row = r + 8 * h;
      const bf16 *src = q + ((long long)b * hl + j * G + row) * D;
#pragma unroll
      for (int i = 0; i < W; i++) {
        w[i] = row < G ? *(const uint32_t *)(src + map::word_dim(i, c)) : 0u;
        if (F16) {
          __nv_bfloat162 x;
          memcpy(&x, &w[i], 4);
          const float2 f = __bfloat1622float2(x);
          w[i] = pack2<true>(f.x, f.y);
        }
      }
    }
#pragma unroll
    for (int s = 0; s < KS; s++) qa[s][0] = w0[2 * s], qa[s][2] = w0[2 * s + 1], qa[s][1] = w1[2 * s], qa[s][3] = w1[2 * s + 1];
  }
  dec3_state<W> st;
#pragma unroll
  for (int t = 0; t < W; t++) st.acc[t][0] = st.acc[t][1] = st.acc[t][2] = st.acc[t][3] = 0.f;
#pragma unroll
  for (int h = 0; h < 2; h++) st.m[h] = st.mv[h] = -INFINITY, st.l[h] = 0.f;
  if (PIPE) { /* two buffers by name (a register array indexed at run time would go to local memory) */
    while (t0 < p1) {
      dec3_load<D, KV>(kb, vb, ks, vs, srow, t0 + STRIDE, p1, r, c, tb);
      dec3_step<D, G, KV>(qa, ta, t0, p1, c, qscale, st);
      t0 += STRIDE;
      if (t0 >= p1) break;
      dec3_load<D, KV>(kb, vb, ks, vs, srow, t0 + STRIDE, p1, r, c, ta);
      dec3_step<D, G, KV>(qa, tb, t0, p1, c, qscale, st);
      t0 += STRIDE;
    }
  } else {
    for (; t0 < p1; t0 += STRIDE) {
      dec3_load<D, KV>(kb, vb, ks, vs, srow, t0, p1, r, c, ta);
      { /* the next tile's */
        const long long na = t0 + r + STRIDE, nb = na + 8;
        if (na < p1) prefetch_row<D>(kb + na * D, c), prefetch_row<D>(vb + na * D, c);
        if (nb < p1) prefetch_row<D>(kb + nb * D, c), prefetch_row<D>(vb + nb * D, c);
      }
      dec3_step<D, G, KV>(qa, ta, t0, p1, c, qscale, st);
    }
  }
  float(&acc)[W][4] = st.acc;
  float(&m)[2] = st.m, (&mv)[2] = st.mv, (&l)[2] = st.l;
  /* the quad's sums; then the warps through shared memory */
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int o = 1; o < 4; o <<= 1) l[h] += __shfl_xor_sync(0xffffffffu, l[h], o);
  constexpr int R = TWO ? 16 : 8;
  __shared__ float sm_m[DEC3_WARPS][R], sm_mv[DEC3_WARPS][R], sm_l[DEC3_WARPS][R], sm_acc[DEC3_WARPS][R][D];
#pragma unroll
  for (int h = 0; h < (TWO ? 2 : 1); h++) {
    const int row = r + 8 * h;
    if (c == 0) sm_m[warp][row] = m[h], sm_mv[warp][row] = mv[h], sm_l[warp][row] = l[h];
#pragma unroll
    for (int t = 0; t < W; t++) {
      sm_acc[warp][row][map::word_dim(t, c)] = acc[t][2 * h];
      sm_acc[warp][row][map::word_dim(t, c) + 1] = acc[t][2 * h + 1];
    }
  }
  __syncthreads();
  decode3_merge_warps<DEC3_WARPS, D, R, KV::scaled>(sm_m, sm_mv, sm_l, sm_acc, G, b, j, hl, split, nsplit, part, out);
}

/* ---- decode attention v5 over the FP8 cache: the cached positions as the mma's rows -----
 * (dev/decode_attn_fp8/README.md measured it against v3 and v4.) Block (split, KV head j,
 * sequence b) of DEC3_WARPS warps over v3's chunk; warp w takes the 16-position tiles
 * t0 = p0 + 16 w, + 64, ..., the next tile's loads in flight in registers (as v4) while it
 * computes the one in hand. Lane (r = lane / 4, c = lane % 4):
 *  - S^T = K Q^T by m16n8k16 FP16 mma: A = 16 positions x 16 dims of K, B = Q^T (16 dims x the
 *    G <= 8 query heads as the columns, zero past G). The lane loads 32 bytes of the K rows
 *    t0 + r and t0 + 8 + r (16-byte words 64 i + 16 c: v3's order), converts them to FP16 pairs
 *    (one cvt a pair) and k-step s takes its words 2s, 2s + 1; Q's fragments hold the same dims.
 *    8 mma a tile (v3: 16, half of its rows empty at G <= 8). The C fragment gives the lane
 *    positions r, r + 8 of heads 2c, 2c + 1.
 *  - the online softmax (base 2) per head, as v3's FP8 path: scores times the key scales, value
 *    weights 2^(s + log2 vs - mv) with a running max mv of their own; a head's max over the
 *    tile by 3 shuffles across the 8 lanes of equal c.
 *  - O^T = V^T P^T: A = 16 dims x 16 positions of V^T, B = P^T. The lane loads 16 bytes (dims
 *    16 r .. + 15) of the V rows t0 + 2c, 2c + 1, 2c + 8, 2c + 9, and a byte permute of two
 *    rows' words puts one dim's codes of positions 2c, 2c + 1 side by side, so one cvt gives an A
 *    register (no movmatrix for V); P^T's B fragment is S^T's C fragment by two movmatrix.
 *    8 mma a tile (v3: 16 and 32 movmatrix).
 * The warps merge through shared memory into v3's partials (output at the scores' max; max,
 * sum), which v3's combine reduces; one split writes the output. Head dim 128, G 1 to 8. */

#define DEC5_D 128

/* The two E4M3 codes in the low (cvt_lo) or high (cvt_hi) 16 bits of x -> an FP16 pair (exact). */
__device__ __forceinline__ uint32_t cvt_lo(uint32_t x) {
  uint32_t y;
  asm("{.reg .b16 t; cvt.u16.u32 t, %1; cvt.rn.f16x2.e4m3x2 %0, t;}" : "=r"(y) : "r"(x));
  return y;
}
__device__ __forceinline__ uint32_t cvt_hi(uint32_t x) {
  uint32_t y;
  asm("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.rn.f16x2.e4m3x2 %0, hi;}" : "=r"(y) : "r"(x));
  return y;
}
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t y;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(y) : "r"(a), "r"(b), "r"(sel));
  return y;
}

/* One tile as a lane loads it: K rows r, 8 + r (two 16-byte words each), V rows 2c, 2c + 1,
 * 2c + 8, 2c + 9 (one 16-byte word each), the key and value scales of positions r, 8 + r. */
struct dec5_tile {
  uint4 k[2][2], v[4];
  float ks[2], vs[2];
};
struct dec5_state {
  float acc[8][4]; /* O^T's C fragments: m-tile t, dims 16 r + 2t (+1) x heads 2c, 2c + 1 */
  float m[2], mv[2], l[2]; /* per head 2c + e */
};

__device__ __forceinline__ void dec5_load(const uint8_t *kb, const uint8_t *vb, const float *ks, const float *vs,
                                          long long t0, long long p1, int r, int c, dec5_tile &t) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const long long p = t0 + 8 * h + r;
    const bool ok = p < p1;
#pragma unroll
    for (int i = 0; i < 2; i++)
      t.k[h][i] = ok ? __ldg((const uint4 *)(kb + p * DEC5_D + 64 * i + 16 * c)) : make_uint4(0, 0, 0, 0);
    t.ks[h] = ok ? __ldg(ks + p) : 1.f;
    t.vs[h] = ok ? __ldg(vs + p) : 1.f;
  }
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const long long p = t0 + 2 * c + (i & 1) + 8 * (i >> 1);
    t.v[i] = p < p1 ? __ldg((const uint4 *)(vb + p * DEC5_D + 16 * r)) : make_uint4(0, 0, 0, 0);
  }
}

__device__ __forceinline__ void dec5_step(const uint32_t (&qb)[8][2], const dec5_tile &tl, long long t0, long long p1,
                                          int r, float qscale, dec5_state &st) {
  float s[4] = {0.f, 0.f, 0.f, 0.f}; /* S^T: rows r (s[0..1]) and 8 + r (s[2..3]) */
#pragma unroll
  for (int i = 0; i < 2; i++) {
    const uint32_t x0[4] = {tl.k[0][i].x, tl.k[0][i].y, tl.k[0][i].z, tl.k[0][i].w};
    const uint32_t x1[4] = {tl.k[1][i].x, tl.k[1][i].y, tl.k[1][i].z, tl.k[1][i].w};
#pragma unroll
    for (int w = 0; w < 4; w++) { /* word w of 16-byte word i: k-step 4 i + w */
      const uint32_t a[4] = {cvt_lo(x0[w]), cvt_lo(x1[w]), cvt_hi(x0[w]), cvt_hi(x1[w])};
      mma16816<true>(s, a, qb[4 * i + w][0], qb[4 * i + w][1]);
    }
  }
  float sc[2][2], lv[2]; /* scores [position h][head e], log2 of the value scales */
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const bool ok = t0 + 8 * h + r < p1;
    const float f = qscale * tl.ks[h];
    lv[h] = ok ? __log2f(tl.vs[h]) : 0.f;
    sc[h][0] = ok ? s[2 * h] * f : -INFINITY;
    sc[h][1] = ok ? s[2 * h + 1] * f : -INFINITY;
  }
  float pw[2][2];
#pragma unroll
  for (int e = 0; e < 2; e++) {
    float tm = fmaxf(sc[0][e], sc[1][e]), tv = fmaxf(sc[0][e] + lv[0], sc[1][e] + lv[1]);
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) {
      tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, o));
      tv = fmaxf(tv, __shfl_xor_sync(0xffffffffu, tv, o));
    }
    const float mn = fmaxf(st.m[e], tm), mref = mn == -INFINITY ? 0.f : mn;
    const float vn = fmaxf(st.mv[e], tv), vref = vn == -INFINITY ? 0.f : vn;
    const float corr = exp2f(st.m[e] - mref), vcorr = exp2f(st.mv[e] - vref);
    pw[0][e] = exp2f(sc[0][e] + lv[0] - vref), pw[1][e] = exp2f(sc[1][e] + lv[1] - vref);
    st.l[e] = st.l[e] * corr + (exp2f(sc[0][e] - mref) + exp2f(sc[1][e] - mref));
    st.m[e] = mn, st.mv[e] = vn;
#pragma unroll
    for (int t = 0; t < 8; t++) st.acc[t][e] *= vcorr, st.acc[t][2 + e] *= vcorr;
  }
  /* P^T's B fragment: positions 2c, 2c + 1 (b0) and 2c + 8, 2c + 9 (b1) of head r */
  const uint32_t b0 = movtrans(pack2<true>(pw[0][0], pw[0][1])), b1 = movtrans(pack2<true>(pw[1][0], pw[1][1]));
  const uint32_t v0[4] = {tl.v[0].x, tl.v[0].y, tl.v[0].z, tl.v[0].w}, v1[4] = {tl.v[1].x, tl.v[1].y, tl.v[1].z, tl.v[1].w},
                 v2[4] = {tl.v[2].x, tl.v[2].y, tl.v[2].z, tl.v[2].w}, v3[4] = {tl.v[3].x, tl.v[3].y, tl.v[3].z, tl.v[3].w};
#pragma unroll
  for (int w = 0; w < 4; w++) { /* dims 16 r + 4 w .. + 3: m-tiles 2w (dims +0, +1) and 2w + 1 (+2, +3) */
    const uint32_t lo01 = prmt(v0[w], v1[w], 0x5140), hi01 = prmt(v0[w], v1[w], 0x7362);
    const uint32_t lo89 = prmt(v2[w], v3[w], 0x5140), hi89 = prmt(v2[w], v3[w], 0x7362);
    const uint32_t a0[4] = {cvt_lo(lo01), cvt_hi(lo01), cvt_lo(lo89), cvt_hi(lo89)};
    const uint32_t a1[4] = {cvt_lo(hi01), cvt_hi(hi01), cvt_lo(hi89), cvt_hi(hi89)};
    mma16816<true>(st.acc[2 * w], a0, b0, b1);
    mma16816<true>(st.acc[2 * w + 1], a1, b0, b1);
  }
}

template <int G>
__global__ void __launch_bounds__(DEC3_WARPS * 32, 3)
    decode5_fp8_kernel(const bf16 *q, const uint8_t *kc, const uint8_t *vc, const float *ksc, const float *vsc,
                       float *part, bf16 *out, int hl, int kvl, long long max_seq, long long len, long long chunk,
                       int nsplit, float qscale) {
  constexpr long long STRIDE = DEC3_WARPS * DEC3_TILE;
  const int split = blockIdx.x, j = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, r = lane >> 2, c = lane & 3;
  const long long srow = ((long long)b * kvl + j) * max_seq;
  const uint8_t *kb = kc + srow * DEC5_D, *vb = vc + srow * DEC5_D;
  const float *ks = ksc + srow, *vs = vsc + srow;
  const long long p0 = (long long)split * chunk, p1 = p0 + chunk < len ? p0 + chunk : len;
  long long t0 = p0 + (long long)warp * DEC3_TILE;
  dec5_tile ta, tb;
  dec5_load(kb, vb, ks, vs, t0, p1, r, c, ta); /* in flight while Q is read */
  /* Q^T's B fragments: head j G + r (zero past G); k-step s = 4 i + w holds the dims of K's word
   * w of 16-byte word i, codes 4 w .. 4 w + 3 of dims 64 i + 16 c: (+0, +1) in b0, (+2, +3) in b1 */
  uint32_t qb[8][2];
  {
    const bf16 *src = q + ((long long)b * hl + j * G + r) * DEC5_D;
#pragma unroll
    for (int s = 0; s < 8; s++)
#pragma unroll
      for (int x = 0; x < 2; x++) {
        const int dim = 64 * (s >> 2) + 16 * c + 4 * (s & 3) + 2 * x;
        float f0 = 0.f, f1 = 0.f;
        if (r < G) f0 = __bfloat162float(src[dim]), f1 = __bfloat162float(src[dim + 1]);
        qb[s][x] = pack2<true>(f0, f1);
      }
  }
  dec5_state st;
#pragma unroll
  for (int t = 0; t < 8; t++) st.acc[t][0] = st.acc[t][1] = st.acc[t][2] = st.acc[t][3] = 0.f;
#pragma unroll
  for (int e = 0; e < 2; e++) st.m[e] = st.mv[e] = -INFINITY, st.l[e] = 0.f;
  while (t0 < p1) { /* two buffers by name (a register array indexed at run time would go to local memory) */
    dec5_load(kb, vb, ks, vs, t0 + STRIDE, p1, r, c, tb);
    dec5_step(qb, ta, t0, p1, r, qscale, st);
    t0 += STRIDE;
    if (t0 >= p1) break;
    dec5_load(kb, vb, ks, vs, t0 + STRIDE, p1, r, c, ta);
    dec5_step(qb, tb, t0, p1, r, qscale, st);
    t0 += STRIDE;
  }
  /* the sums over the 8 lanes of equal c; then the warps through shared memory */
#pragma unroll
  for (int e = 0; e < 2; e++)
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) st.l[e] += __shfl_xor_sync(0xffffffffu, st.l[e], o);
  __shared__ float sm_m[DEC3_WARPS][8], sm_mv[DEC3_WARPS][8], sm_l[DEC3_WARPS][8], sm_acc[DEC3_WARPS][8][DEC5_D];
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const int head = 2 * c + e;
    if (head < G) {
      if (r == 0) sm_m[warp][head] = st.m[e], sm_mv[warp][head] = st.mv[e], sm_l[warp][head] = st.l[e];
#pragma unroll
      for (int t = 0; t < 8; t++) {
        sm_acc[warp][head][16 * r + 2 * t] = st.acc[t][e];
        sm_acc[warp][head][16 * r + 2 * t + 1] = st.acc[t][2 + e];
      }
    }
  }
  __syncthreads();
  decode3_merge_warps<DEC3_WARPS, DEC5_D, 8, true>(sm_m, sm_mv, sm_l, sm_acc, G, b, j, hl, split, nsplit, part, out);
}

/* v3's combine: block (sequence, head) of 128 threads; the max and the sum over the splits
 * by all threads, then thread t sums 4 dims (float4) of every (128 / (D / 4))-th split,
 * 4 splits' loads in flight, and the thread groups are added through shared memory. */
__device__ __forceinline__ float block_reduce3(float v, bool is_max, float *red) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  __syncthreads(); /* red may still be read from a previous call */
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  v = red[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); w++) v = is_max ? fmaxf(v, red[w]) : v + red[w];
  return v;
}

#define DEC3_COMBINE_THREADS 128

template <int D>
__global__ void __launch_bounds__(DEC3_COMBINE_THREADS) decode3_combine_kernel(const float *part, bf16 *out,
                                                                                int nsplit, long long rows) {
  constexpr int TPR = D / 4, GROUPS = DEC3_COMBINE_THREADS / TPR; /* threads per split row, rows at once */
  __shared__ float red[32];
  __shared__ float4 sacc[GROUPS][TPR];
  const long long bh = blockIdx.x; /* b * hl + h */
  const float *pa = part + bh * nsplit * D, *ml = part + rows * nsplit * D + bh * nsplit * 2;
  float M = -INFINITY, L = 0.f;
  for (int s = threadIdx.x; s < nsplit; s += blockDim.x) M = fmaxf(M, ml[2 * s]);
  M = block_reduce3(M, true, red);
  for (int s = threadIdx.x; s < nsplit; s += blockDim.x)
    L += ml[2 * s] == -INFINITY ? 0.f : ml[2 * s + 1] * exp2f(ml[2 * s] - M);
  L = block_reduce3(L, false, red);
  const int g = threadIdx.x / TPR, x = threadIdx.x % TPR;
  float4 A = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
  for (int s = g; s < nsplit; s += GROUPS) {
    const float m = ml[2 * s], f = m == -INFINITY ? 0.f : exp2f(m - M);
    const float4 v = *(const float4 *)(pa + (long long)s * D + 4 * x);
    A.x += v.x * f, A.y += v.y * f, A.z += v.z * f, A.w += v.w * f;
  }
  sacc[g][x] = A;
  __syncthreads();
  if (g == 0) {
    for (int k = 1; k < GROUPS; k++) {
      const float4 v = sacc[k][x];
      A.x += v.x, A.y += v.y, A.z += v.z, A.w += v.w;
    }
    const float inv = 1.f / L;
    __nv_bfloat162 *o = (__nv_bfloat162 *)(out + bh * D + 4 * x);
    o[0] = __floats2bfloat162_rn(A.x * inv, A.y * inv);
    o[1] = __floats2bfloat162_rn(A.z * inv, A.w * inv);
  }
}

/* ---- the launcher of v2 to v5 -------------------------------------------------------- */

/* (head_dim, query heads per KV head) that version V's kernels are built for (v4, v5: v3's). */
template <int V, int D, int G> struct dec_built {
  static constexpr bool value =
      V == 2 ? (D == 128 ? G >= 1 && G <= 8 : G == 1 || G == 2 || G == 4 || G == 7 || G == 8 || G == 16)
             : (D == 128 ? (G >= 1 && G <= 8) || G == 12 || G == 16
                         : G == 1 || G == 2 || G == 4 || G == 6 || G == 7 || G == 8 || G == 16);
};

struct dec_launch {
  dim3 grid;
  cudaStream_t st;
  const bf16 *q;
  const void *kc, *vc;
  const float *ks, *vs;
  float *part;
  bf16 *out;
  const infer_attn_dims *a;
  long long len, chunk;
  int nsplit;
  float qscale;
};

/* The partial kernel of version V (v3's also writes the output when it is the only split). */
template <int V, int D, int G, typename KV> static void launch_partial(const dec_launch &l) {
  typedef typename KV::T T;
  if constexpr (!dec_built<V, D, G>::value) return;
  else if constexpr (V == 2)
    decode2_partial_kernel<D, G, KV><<<l.grid, DEC2_WARPS * 32, 0, l.st>>>(
        l.q, (const T *)l.kc, (const T *)l.vc, l.ks, l.vs, l.part, l.a->hl, l.a->kvl, l.a->max_seq, l.len, l.chunk,
        l.nsplit, l.qscale);
  else if constexpr (V == 5 && KV::scaled && D == DEC5_D && G <= 8)
    decode5_fp8_kernel<G><<<l.grid, DEC3_WARPS * 32, 0, l.st>>>(l.q, (const uint8_t *)l.kc, (const uint8_t *)l.vc, l.ks,
                                                                l.vs, l.part, l.out, l.a->hl, l.a->kvl, l.a->max_seq,
                                                                l.len, l.chunk, l.nsplit, l.qscale);
  else /* v3, v4; v5 over BF16 and at the shapes its FP8 kernel is not built for: v4 */
    decode3_kernel<D, G, KV, V >= 4><<<l.grid, DEC3_WARPS * 32, 0, l.st>>>(l.q, (const T *)l.kc, (const T *)l.vc, l.ks, l.vs,
                                                                    l.part, l.out, l.a->hl, l.a->kvl, l.a->max_seq,
                                                                    l.len, l.chunk, l.nsplit, l.qscale);
}

/* The split-K decode attention of version V (2 to 5) over a cache of element type KV
 * (scales ks, vs: FP8 only), then the combine (v3 to v5: only with more than one split). */
template <int V, typename KV>
static int decode_run(const char *who, const void *q, const void *k_cache, const void *v_cache, const float *ks,
                      const float *vs, void *out, void *partial, const infer_attn_dims *a, long long len,
                      void *stream, ts_err *e) {
  const int D = a->head_dim;
  if (a->kvl < 1 || a->hl % a->kvl || len < 1 || len > a->max_seq)
    return ts_fail_sys(e, "%s: bad shape (heads %d, kv heads %d, len %lld, max_seq %lld)", who, a->hl, a->kvl, len,
                       a->max_seq);
  const int G = a->hl / a->kvl;
  dec_launch l;
  l.chunk = V == 2 ? decode2_chunk(a, len) : decode3_chunk(a, len);
  l.nsplit = (int)((len + l.chunk - 1) / l.chunk);
  l.grid = dim3((unsigned)l.nsplit, (unsigned)a->kvl, (unsigned)a->batch);
  l.st = (cudaStream_t)stream;
  l.qscale = (float)(1.4426950408889634 / sqrt((double)D)); /* base 2 */
  l.q = (const bf16 *)q, l.kc = k_cache, l.vc = v_cache, l.ks = ks, l.vs = vs;
  l.part = (float *)partial, l.out = (bf16 *)out, l.a = a, l.len = len;
#define DEC_CASE(d_, g_)                                                                                   \
  if (D == d_ && G == g_ && dec_built<V, d_, g_>::value) launch_partial<V, d_, g_, KV>(l);                  \
  else
  DEC_CASE(128, 1) DEC_CASE(128, 2) DEC_CASE(128, 3) DEC_CASE(128, 4) DEC_CASE(128, 5) DEC_CASE(128, 6)
  DEC_CASE(128, 7) DEC_CASE(128, 8) DEC_CASE(128, 12) DEC_CASE(128, 16)
  DEC_CASE(64, 1) DEC_CASE(64, 2) DEC_CASE(64, 4) DEC_CASE(64, 6) DEC_CASE(64, 7) DEC_CASE(64, 8) DEC_CASE(64, 16)
  return ts_fail_sys(e, "%s: head_dim %d with %d query heads per KV head is not built (%s)", who, D, G,
                     V == 2 ? "head_dim 64: 1, 2, 4, 7, 8 or 16 heads per KV head; 128: 1 to 8"
                            : "head_dim 128: 1 to 8, 12 or 16 heads per KV head; 64: 1, 2, 4, 6, 7, 8 or 16");
#undef DEC_CASE
  DEC_LAUNCHED(e);
  const long long rows = (long long)a->batch * a->hl;
  if (V == 2)
    decode_combine_kernel<<<(unsigned)rows, D, 0, l.st>>>(l.part, l.out, l.nsplit, D);
  else if (l.nsplit > 1 && D == 128)
    decode3_combine_kernel<128><<<(unsigned)rows, DEC3_COMBINE_THREADS, 0, l.st>>>(l.part, l.out, l.nsplit, rows);
  else if (l.nsplit > 1)
    decode3_combine_kernel<64><<<(unsigned)rows, DEC3_COMBINE_THREADS, 0, l.st>>>(l.part, l.out, l.nsplit, rows);
  else
    return 0;
  DEC_LAUNCHED(e);
  return 0;
}

/* Whether an FP8 cache lacks its codes or scales (the FP8 entry points refuse it). */
static bool kv8_missing(const infer_kv8 *c) { return !c || !c->k || !c->v || !c->ks || !c->vs; }

/* The entry points of version V over a BF16 and over an FP8 cache (infer_decode.h). */
template <int V>
static int decode_bf16(const char *who, const void *q, const void *k_cache, const void *v_cache, void *out,
                       void *partial, const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  return decode_run<V, kv_bf16>(who, q, k_cache, v_cache, NULL, NULL, out, partial, a, len, stream, e);
}
template <int V>
static int decode_fp8(const char *who, const void *q, const infer_kv8 *c, void *out, void *partial,
                      const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  if (kv8_missing(c)) return ts_fail_sys(e, "%s: the FP8 cache or its scales are missing", who);
  return decode_run<V, kv_e4m3>(who, q, c->k, c->v, c->ks, c->vs, out, partial, a, len, stream, e);
}

extern "C" int infer_decode_attention2(const void *q, const void *k_cache, const void *v_cache, void *out,
                                       void *partial, const infer_attn_dims *a, long long len, void *stream,
                                       ts_err *e) {
  return decode_bf16<2>("infer_decode_attention2", q, k_cache, v_cache, out, partial, a, len, stream, e);
}
extern "C" int infer_decode_attention2_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                           const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  return decode_fp8<2>("infer_decode_attention2_fp8", q, c, out, partial, a, len, stream, e);
}
extern "C" int infer_decode_attention3(const void *q, const void *k_cache, const void *v_cache, void *out,
                                       void *partial, const infer_attn_dims *a, long long len, void *stream,
                                       ts_err *e) {
  return decode_bf16<3>("infer_decode_attention3", q, k_cache, v_cache, out, partial, a, len, stream, e);
}
extern "C" int infer_decode_attention3_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                           const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  return decode_fp8<3>("infer_decode_attention3_fp8", q, c, out, partial, a, len, stream, e);
}
extern "C" int infer_decode_attention4(const void *q, const void *k_cache, const void *v_cache, void *out,
                                       void *partial, const infer_attn_dims *a, long long len, void *stream,
                                       ts_err *e) {
  return decode_bf16<4>("infer_decode_attention4", q, k_cache, v_cache, out, partial, a, len, stream, e);
}
extern "C" int infer_decode_attention4_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                           const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  return decode_fp8<4>("infer_decode_attention4_fp8", q, c, out, partial, a, len, stream, e);
}
extern "C" int infer_decode_attention5(const void *q, const void *k_cache, const void *v_cache, void *out,
                                       void *partial, const infer_attn_dims *a, long long len, void *stream,
                                       ts_err *e) {
  return decode_bf16<5>("infer_decode_attention5", q, k_cache, v_cache, out, partial, a, len, stream, e);
}
extern "C" int infer_decode_attention5_fp8(const void *q, const infer_kv8 *c, void *out, void *partial,
                                           const infer_attn_dims *a, long long len, void *stream, ts_err *e) {
  return decode_fp8<5>("infer_decode_attention5_fp8", q, c, out, partial, a, len, stream, e);
}

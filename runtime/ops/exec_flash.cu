/* exec_flash.cu — fused causal attention, see exec_flash.h.
 *
 * Tensor-core work is mma.sync.m16n8k16 (BF16 in, FP32 accumulate) on
 * fragments loaded by ldmatrix from shared-memory tiles whose rows are padded
 * by 8 elements (16 bytes), which makes every ldmatrix bank-conflict free.
 * Tiles arrive by cp.async so that the next tile loads while this one is
 * multiplied. A warp owns 16 rows of the output tile; the row statistics of
 * the online softmax stay in registers (a row's 4 owning threads are one quad,
 * reduced with two shuffles).
 *
 * The 64-row kernels (--variant flash-fwd=v1, --variant flash-bwd=v1/split; the 128-row
 * defaults are described above their kernels, flash_fwd128_kernel and
 * flash_bwd128_kernel):
 * Forward (one CTA per 64 queries of one head): for each 64-key block at or
 * left of the diagonal, S = Q.K^T, mask, online softmax (running max m, sum
 * l, rescaling O), O += P.V with P taken straight from the S accumulators.
 * Saves lse = m + log2(l) per row (base 2, scaled scores).
 * Backward (split), two kernels without atomics (FlashAttention-2's split into a
 * key-major and a query-major pass, at the cost of recomputing S and dP in
 * both): dK/dV per 64-key block looping over queries, dQ per 64-query block
 * looping over keys; P = exp2(S*scale*log2e - lse), dS = P*(dP - dsum) with
 * dsum = rowsum(dO*O) from a small kernel.
 * Every grid launches its tiles longest first across all heads (cta_tile):
 * with one head's tiles launched together, the last wave held the longest
 * tiles of the last heads and ran them on a mostly idle GPU (2026-11-30, 2 x
 * H200, batch 2 x 16 heads x 2048 x 128: forward 185.7 -> 129.8 us, backward
 * 535.0 -> 438.8 us from the order alone). */
extern "C" {
#include "ts_error.h"
}
#include "exec_flash.h"
#include "ops_variants.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef __nv_bfloat16 bf16;

#define FLASH_LAUNCH(what)                                                                                   \
  do {                                                                                                       \
    cudaError_t ce_ = cudaGetLastError();                                                                    \
    if (ce_ != cudaSuccess)                                                                                  \
      return ts_fail_sys(e, "%s:%d: %s launch: %s", __FILE__, __LINE__, what, cudaGetErrorString(ce_));      \
  } while (0)

/* ---- PTX wrappers ---- */

static __device__ __forceinline__ uint32_t smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem)), "l"(gmem));
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
static __device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

static __device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
static __device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
/* c[4] += a[4] (16x16, row) . (b0, b1) (16x8, col) */
static __device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}
/* 2^x on the special-function unit, results below 2^-126 flushed to zero
 * (exp2f adds a range fix-up around the same instruction for subnormal
 * results; a probability under 2^-126 is zero in BF16 P.V anyway). */
static __device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* Which tile (0 = launched first) and which (batch, head) a CTA works on.
 * head_major: grid (tiles, batch*heads), the tiles of one head launch
 * together, so the longest tiles of the last heads launch in the last wave
 * and run alone. Otherwise grid (batch*heads, tiles): tile t of every head
 * launches before tile t + 1 of any, longest first across all heads (the
 * longest-processing-time-first order), so short tiles fill the last wave. */
static __device__ __forceinline__ void cta_tile(int head_major, int &tile, int &ntiles, int &bh) {
  if (head_major) {
    tile = blockIdx.x, ntiles = gridDim.x, bh = blockIdx.y;
  } else {
    tile = blockIdx.y, ntiles = gridDim.y, bh = blockIdx.x;
  }
}

/* ---- fragment addressing ----
 * Thread `lane` points ldmatrix.x4 at one row of one of four 8x8 matrices.
 * A operand (16 rows x 16 cols at r0, c0 of a row-major tile): matrices
 * (rows 0-7, cols 0-7), (rows 8-15, cols 0-7), (rows 0-7, cols 8-15), (8-15, 8-15).
 * B operand from a tile stored [n][k] (rows are output columns): matrices
 * (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15): regs 0,1 are
 * the b0,b1 of n-tile n0, regs 2,3 of n-tile n0 + 8.
 * B operand from a tile stored [k][n] (.trans): matrices (k 0-7, n 0-7),
 * (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15), same register meaning. */
template <int SD>
static __device__ __forceinline__ const bf16 *frag_a(const bf16 *tile, int r0, int c0, int lane) {
  return tile + (r0 + (lane & 7) + ((lane >> 3) & 1) * 8) * SD + c0 + (lane >> 4) * 8;
}
template <int SD>
static __device__ __forceinline__ const bf16 *frag_b_nk(const bf16 *tile, int n0, int k0, int lane) {
  return tile + (n0 + (lane & 7) + (lane >> 4) * 8) * SD + k0 + ((lane >> 3) & 1) * 8;
}
template <int SD>
static __device__ __forceinline__ const bf16 *frag_b_kn(const bf16 *tile, int k0, int n0, int lane) {
  return tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * SD + n0 + (lane >> 4) * 8;
}

/* ROWS x D tile from global (row stride ld elements) into shared (row stride SD), NT threads. */
template <int ROWS, int D, int SD, int NT = 128>
static __device__ __forceinline__ void load_tile(bf16 *s, const bf16 *g, long long ld, int tid) {
  constexpr int CPR = D / 8; /* 16-byte chunks per row */
  for (int c = tid; c < ROWS * CPR; c += NT) {
    int r = c / CPR, col = (c % CPR) * 8;
    cp_async16(s + r * SD + col, g + (long long)r * ld + col);
  }
}

/* acc[NT][4] += A(16 x D at row r0 of sA) . B^T where B is stored [n][k] rows n0.. of sB (NT n-tiles). */
template <int D, int SD, int NT>
static __device__ __forceinline__ void mma_abt(float acc[][4], const bf16 *sA, int r0, const bf16 *sB, int n0,
                                               int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    uint32_t a[4];
    ldsm_x4(a, frag_a<SD>(sA, r0, kk * 16, lane));
#pragma unroll
    for (int np = 0; np < NT / 2; np++) {
      uint32_t b[4];
      ldsm_x4(b, frag_b_nk<SD>(sB, n0 + np * 16, kk * 16, lane));
      mma16816(acc[2 * np], a, b[0], b[1]);
      mma16816(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

/* acc[D/8][4] += P (16 x 16*KT, accumulator layout in p[2*KT][4]) . B where B is stored [k][n], rows k0... */
template <int D, int SD, int KT>
static __device__ __forceinline__ void mma_pb(float acc[][4], const float p[][4], const bf16 *sB, int k0, int lane) {
#pragma unroll
  for (int kk = 0; kk < KT; kk++) {
    uint32_t a[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]), pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                     pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]), pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int np = 0; np < D / 16; np++) {
      uint32_t b[4];
      ldsm_x4_t(b, frag_b_kn<SD>(sB, k0 + kk * 16, np * 16, lane));
      mma16816(acc[2 * np], a, b[0], b[1]);
      mma16816(acc[2 * np + 1], a, b[2], b[3]);
    }
  }
}

/* Writes a warp's 16 x D accumulator (times mul) as BF16 rows of dst (row stride ld). */
template <int D>
static __device__ __forceinline__ void store_rows(bf16 *dst, long long ld, const float acc[][4], float mul0,
                                                  float mul1, int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < D / 8; nt++) {
    int col = nt * 8 + 2 * t;
    *reinterpret_cast<uint32_t *>(dst + (long long)g * ld + col) = pack_bf16(acc[nt][0] * mul0, acc[nt][1] * mul0);
    *reinterpret_cast<uint32_t *>(dst + (long long)(g + 8) * ld + col) =
        pack_bf16(acc[nt][2] * mul1, acc[nt][3] * mul1);
  }
}

/* Writes a warp's 16 x D accumulator as FP32 rows of dst (row stride ld floats; dst 8-byte aligned). */
template <int D>
static __device__ __forceinline__ void store_rows_f32(float *dst, long long ld, const float acc[][4], int lane) {
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int nt = 0; nt < D / 8; nt++) {
    int col = nt * 8 + 2 * t;
    *reinterpret_cast<float2 *>(dst + (long long)g * ld + col) = make_float2(acc[nt][0], acc[nt][1]);
    *reinterpret_cast<float2 *>(dst + (long long)(g + 8) * ld + col) = make_float2(acc[nt][2], acc[nt][3]);
  }
}

/* ---- forward ---- */

/* NW warps of 16 query rows (a CTA per 16 NW queries: NW = 4 is the v1
 * kernel, NW = 8 shares each K/V tile among 8 warps), 64-key blocks. */
template <int D, int NW>
__global__ void __launch_bounds__(32 * NW, NW == 8 ? 2 : 3) flash_fwd_kernel(const bf16 *qkv, bf16 *out, float *lse, int S, int H,
                                                            long long ld, long long hl, int G, long long kvl,
                                                            float scale_log2, int head_major) {
  constexpr int BQ = 16 * NW, B = 64, SD = D + 8, NT = 32 * NW;
  extern __shared__ __align__(16) unsigned char flash_smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(flash_smem), *sK = sQ + BQ * SD, *sV = sK + B * SD;
  int tile, ntiles, bh;
  cta_tile(head_major, tile, ntiles, bh);
  const int qb = ntiles - 1 - tile; /* the longest rows first */
  const int b = bh / H, h = bh % H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bf16 *Q = qkv + (long long)b * S * ld + (long long)h * D;
  const bf16 *K = qkv + (long long)b * S * ld + hl + (long long)(h / G) * D, *V = K + kvl; /* the group's K/V head */
  const int wrow0 = qb * BQ + warp * 16; /* this warp's first query */
  const int nkb = (qb + 1) * BQ / B;

  load_tile<BQ, D, SD, NT>(sQ, Q + (long long)qb * BQ * ld, ld, tid);
  load_tile<B, D, SD, NT>(sK, K, ld, tid);
  cp_async_commit();

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int j = 0; j < nkb; j++) {
    cp_async_wait_all();
    __syncthreads(); /* K_j is in; every warp is done with V_{j-1} */
    load_tile<B, D, SD, NT>(sV, V + (long long)j * B * ld, ld, tid);
    cp_async_commit();

    /* some key of block j at or left of some row of the warp; a row that
     * sees none of them keeps its (finite, from block 0) max and adds zeros */
    const bool active = j * B <= wrow0 + 15;
    float s[8][4];
    if (active) {
#pragma unroll
    for (int i = 0; i < 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
    mma_abt<D, SD, 8>(s, sQ, warp * 16, sK, 0, lane);

    if (j * B + B - 1 > wrow0) { /* key column > query row is masked */
#pragma unroll
      for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int x = 0; x < 4; x++) {
          int row = wrow0 + g + (x >= 2 ? 8 : 0), col = j * B + nt * 8 + 2 * t + (x & 1);
          if (col > row) s[nt][x] = -INFINITY;
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = -INFINITY;
#pragma unroll
      for (int nt = 0; nt < 8; nt++) mx = fmaxf(mx, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float m_new = fmaxf(m[r], mx * scale_log2); /* every row has a visible key: finite */
      float alpha = exp2f(m[r] - m_new);
      m[r] = m_new;
      l[r] *= alpha;
#pragma unroll
      for (int nt = 0; nt < D / 8; nt++) {
        o[nt][2 * r] *= alpha;
        o[nt][2 * r + 1] *= alpha;
      }
#pragma unroll
      for (int nt = 0; nt < 8; nt++) {
        float p0 = exp2f(s[nt][2 * r] * scale_log2 - m_new), p1 = exp2f(s[nt][2 * r + 1] * scale_log2 - m_new);
        s[nt][2 * r] = p0;
        s[nt][2 * r + 1] = p1;
        l[r] += p0 + p1; /* this thread's part; the quad is summed at the end */
      }
    }
    }

    cp_async_wait_all();
    __syncthreads(); /* V_j is in; every warp is done with K_j */
    if (j + 1 < nkb) {
      load_tile<B, D, SD, NT>(sK, K + (long long)(j + 1) * B * ld, ld, tid);
      cp_async_commit();
    }
    if (active) mma_pb<D, SD, 4>(o, s, sV, 0, lane);
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = 1.f / l[r];
  }
  const long long row0 = wrow0;
  store_rows<D>(out + ((long long)b * S + row0) * hl + (long long)h * D, hl, o, inv[0], inv[1], lane);
  if (t == 0) {
    lse[(long long)bh * S + row0 + g] = m[0] + log2f(l[0]);
    lse[(long long)bh * S + row0 + g + 8] = m[1] + log2f(l[1]);
  }
}

/* ---- two 16-row m-tiles per warp ----
 * With one m16 tile per warp every B fragment read by ldmatrix feeds two mma;
 * with two m-tiles it feeds four, which halves the shared-memory traffic per
 * FLOP (shared-memory bandwidth, not the tensor cores, bounds mma.sync
 * kernels with 16-row warps). */

/* acc[2][NT][4] += A(32 x D at rows r0.. of sA) . B^T, B stored [n][k] rows n0.. of sB. */
template <int D, int SDA, int SDB, int NT>
static __device__ __forceinline__ void mma_abt2(float acc[2][NT][4], const bf16 *sA, int r0, const bf16 *sB, int n0,
                                                int lane) {
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    uint32_t a0[4], a1[4];
    ldsm_x4(a0, frag_a<SDA>(sA, r0, kk * 16, lane));
    ldsm_x4(a1, frag_a<SDA>(sA, r0 + 16, kk * 16, lane));
#pragma unroll
    for (int np = 0; np < NT / 2; np++) {
      uint32_t b[4];
      ldsm_x4(b, frag_b_nk<SDB>(sB, n0 + np * 16, kk * 16, lane));
      mma16816(acc[0][2 * np], a0, b[0], b[1]);
      mma16816(acc[0][2 * np + 1], a0, b[2], b[3]);
      mma16816(acc[1][2 * np], a1, b[0], b[1]);
      mma16816(acc[1][2 * np + 1], a1, b[2], b[3]);
    }
  }
}

/* acc[2][N/8][4] += P (32 x 16 KT, accumulators p[2][2 KT][4]) . B, B stored [k][n] (k rows from 0, n cols n0..n0+N). */
template <int N, int SD, int KT>
static __device__ __forceinline__ void mma_pb2(float acc[2][N / 8][4], const float p[2][2 * KT][4], const bf16 *sB,
                                               int n0, int lane) {
#pragma unroll
  for (int kk = 0; kk < KT; kk++) {
    uint32_t a[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
      a[mt][0] = pack_bf16(p[mt][2 * kk][0], p[mt][2 * kk][1]);
      a[mt][1] = pack_bf16(p[mt][2 * kk][2], p[mt][2 * kk][3]);
      a[mt][2] = pack_bf16(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
      a[mt][3] = pack_bf16(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int np = 0; np < N / 16; np++) {
      uint32_t b[4];
      ldsm_x4_t(b, frag_b_kn<SD>(sB, kk * 16, n0 + np * 16, lane));
      mma16816(acc[0][2 * np], a[0], b[0], b[1]);
      mma16816(acc[0][2 * np + 1], a[0], b[2], b[3]);
      mma16816(acc[1][2 * np], a[1], b[0], b[1]);
      mma16816(acc[1][2 * np + 1], a[1], b[2], b[3]);
    }
  }
}

/* acc[2][N/8][4] += A (32 x 16 KT from shared memory, row-major at rows r0, cols from 0) . B stored [k][n]. */
template <int N, int SDA, int SDB, int KT>
static __device__ __forceinline__ void mma_sb2(float acc[2][N / 8][4], const bf16 *sA, int r0, const bf16 *sB, int n0,
                                               int lane) {
#pragma unroll
  for (int kk = 0; kk < KT; kk++) {
    uint32_t a0[4], a1[4];
    ldsm_x4(a0, frag_a<SDA>(sA, r0, kk * 16, lane));
    ldsm_x4(a1, frag_a<SDA>(sA, r0 + 16, kk * 16, lane));
#pragma unroll
    for (int np = 0; np < N / 16; np++) {
      uint32_t b[4];
      ldsm_x4_t(b, frag_b_kn<SDB>(sB, kk * 16, n0 + np * 16, lane));
      mma16816(acc[0][2 * np], a0, b[0], b[1]);
      mma16816(acc[0][2 * np + 1], a0, b[2], b[3]);
      mma16816(acc[1][2 * np], a1, b[0], b[1]);
      mma16816(acc[1][2 * np + 1], a1, b[2], b[3]);
    }
  }
}

/* Forward on 128-query tiles (seq a multiple of 128): 4 warps of 32 rows, 64-key
 * blocks; otherwise as flash_fwd_kernel. A warp skips the one key block right
 * of all its rows.
 * TWO_STAGE (the default): K and V in two buffers each, block j + 1 loading
 * (cp.async) during all of block j, one barrier per block, exp2 flushed to
 * zero below 2^-126 (exp2_ftz). Otherwise (--variant flash-fwd=fa128, the default
 * until 2026-11-30 05:15 UTC): one buffer each, K_{j+1} loading during P.V of
 * block j and V_j during S of block j, two barriers per block, exp2f. */
template <int D, bool TWO_STAGE>
__global__ void __launch_bounds__(128, 2) flash_fwd128_kernel(const bf16 *qkv, bf16 *out, float *lse, int S, int H,
                                                              long long ld, long long hl, int G, long long kvl,
                                                              float scale_log2, int head_major) {
  constexpr int BQ = 128, BK = 64, SD = D + 8;
  extern __shared__ __align__(16) unsigned char flash_smem[];
  /* sK, sV: [2][BK][SD] each when TWO_STAGE, else [BK][SD] */
  bf16 *sQ = reinterpret_cast<bf16 *>(flash_smem), *sK = sQ + BQ * SD, *sV = sK + (TWO_STAGE ? 2 : 1) * BK * SD;
  int tile, ntiles, bh;
  cta_tile(head_major, tile, ntiles, bh);
  const int qt = ntiles - 1 - tile; /* the longest rows first */
  const int b = bh / H, h = bh % H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bf16 *Q = qkv + (long long)b * S * ld + (long long)h * D;
  const bf16 *K = qkv + (long long)b * S * ld + hl + (long long)(h / G) * D, *V = K + kvl; /* the group's K/V head */
  const int wrow0 = qt * BQ + warp * 32; /* this warp's first query */

  load_tile<BQ, D, SD>(sQ, Q + (long long)qt * BQ * ld, ld, tid);
  load_tile<BK, D, SD>(sK, K, ld, tid);
  if (TWO_STAGE) load_tile<BK, D, SD>(sV, V, ld, tid);
  cp_async_commit();

  float o[2][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.f;
  float m[2][2] = {{-INFINITY, -INFINITY}, {-INFINITY, -INFINITY}}, l[2][2] = {{0.f, 0.f}, {0.f, 0.f}};

  const int nkb = 2 * qt + 2;
  for (int j = 0; j < nkb; j++) {
    const bf16 *cK = sK, *cV = sV;
    cp_async_wait_all();
    __syncthreads(); /* TWO_STAGE: K_j, V_j are in, every warp is done with block j - 1's buffers;
                        else K_j is in, every warp is done with V_{j-1} */
    if (TWO_STAGE) {
      const int buf = j & 1;
      cK = sK + buf * BK * SD;
      cV = sV + buf * BK * SD;
      if (j + 1 < nkb) {
        load_tile<BK, D, SD>(sK + (buf ^ 1) * BK * SD, K + (long long)(j + 1) * BK * ld, ld, tid);
        load_tile<BK, D, SD>(sV + (buf ^ 1) * BK * SD, V + (long long)(j + 1) * BK * ld, ld, tid);
        cp_async_commit();
      }
    } else {
      load_tile<BK, D, SD>(sV, V + (long long)j * BK * ld, ld, tid);
      cp_async_commit();
    }

    /* key j*64 <= every row of the warp, or the block lies right of all of them
     * (j*64 - wrow0 is a multiple of 32, so there is no partial case) */
    const bool active = j * BK <= wrow0;
    float s[2][8][4];
    if (active) {
#pragma unroll
      for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int i = 0; i < 8; i++) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.f;
      mma_abt2<D, SD, SD, 8>(s, sQ, warp * 32, cK, 0, lane);
      if (j * BK + BK - 1 > wrow0) { /* some key right of some row: mask */
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
          for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int x = 0; x < 4; x++) {
              int row = wrow0 + mt * 16 + g + (x >= 2 ? 8 : 0), col = j * BK + nt * 8 + 2 * t + (x & 1);
              if (col > row) s[mt][nt][x] = -INFINITY;
            }
      }
#pragma unroll
      for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
          float mx = -INFINITY;
#pragma unroll
          for (int nt = 0; nt < 8; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
          float m_new = fmaxf(m[mt][r], mx * scale_log2); /* key j*64 is visible: finite */
          float alpha = TWO_STAGE ? exp2_ftz(m[mt][r] - m_new) : exp2f(m[mt][r] - m_new);
          m[mt][r] = m_new;
          l[mt][r] *= alpha;
#pragma unroll
          for (int nt = 0; nt < D / 8; nt++) {
            o[mt][nt][2 * r] *= alpha;
            o[mt][nt][2 * r + 1] *= alpha;
          }
#pragma unroll
          for (int nt = 0; nt < 8; nt++) {
            const float x0 = fmaf(s[mt][nt][2 * r], scale_log2, -m_new);
            const float x1 = fmaf(s[mt][nt][2 * r + 1], scale_log2, -m_new);
            const float p0 = TWO_STAGE ? exp2_ftz(x0) : exp2f(x0), p1 = TWO_STAGE ? exp2_ftz(x1) : exp2f(x1);
            s[mt][nt][2 * r] = p0;
            s[mt][nt][2 * r + 1] = p1;
            l[mt][r] += p0 + p1; /* this thread's part; the quad is summed at the end */
          }
        }
    }

    if (!TWO_STAGE) {
      cp_async_wait_all();
      __syncthreads(); /* V_j is in; every warp is done with K_j */
      if (j + 1 < nkb) {
        load_tile<BK, D, SD>(sK, K + (long long)(j + 1) * BK * ld, ld, tid);
        cp_async_commit();
      }
    }
    if (active) mma_pb2<D, SD, 4>(o, s, cV, 0, lane);
  }

#pragma unroll
  for (int mt = 0; mt < 2; mt++) {
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 1);
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 2);
      inv[r] = 1.f / l[mt][r];
    }
    const long long row0 = wrow0 + mt * 16;
    store_rows<D>(out + ((long long)b * S + row0) * hl + (long long)h * D, hl, o[mt], inv[0], inv[1], lane);
    if (t == 0) {
      lse[(long long)bh * S + row0 + g] = m[mt][0] + log2f(l[mt][0]);
      lse[(long long)bh * S + row0 + g + 8] = m[mt][1] + log2f(l[mt][1]);
    }
  }
}

/* ---- backward ---- */

/* dsum[bh][s] = sum_d dO[s][h*D + d] * O[s][h*D + d]; one warp per row. */
template <int D>
__global__ void flash_dsum_kernel(const bf16 *out, const bf16 *dout, float *dsum, long long rows, int S, int H,
                                  long long hl) {
  long long r = (long long)blockIdx.x * 4 + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const long long bh = r / S, s = r % S, b = bh / H, h = bh % H;
  const long long off = (b * S + s) * hl + h * D;
  float acc = 0.f;
  for (int c = lane * 2; c < D; c += 64) {
    float2 o = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(out + off + c));
    float2 d = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(dout + off + c));
    acc += o.x * d.x + o.y * d.y;
  }
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) dsum[r] = acc;
}

/* What the two key-block backward kernels (flash_bwd_dkdv_kernel and
 * flash_bwd128_kernel) share: the CTA's (batch, key/value head) and key
 * block, that head's K and V, and the cp.async loads of one query step (BQ
 * rows of Q and dO of query head gi of the group, their lse and dsum) into
 * buffer `buf` of the step's shared-memory tiles (not committed). G query
 * heads share a key/value head (G = 1: multi-head); the CTA runs the steps of
 * all G, so dK and dV sum over the group in registers. NT threads. */
template <int D, int BQ, int NT>
struct BwdHead {
  int key_block, b, kvh, S, H, G, part, g0;
  const bf16 *qkv_b, *dout_b, *K, *V;
  const float *lse, *dsum;
  long long ld, hl;

  /* parts > 1 (flash_bwd128_kernel only): the grid's head index is
   * (batch, key/value head) x parts + part, and this CTA runs the group's
   * query heads g0 .. g0 + G / parts - 1 (g0 = part * G / parts) */
  __device__ __forceinline__ BwdHead(const bf16 *qkv, const bf16 *dout, const float *lse_, const float *dsum_,
                                     int S_, int H_, int G_, long long ld_, long long hl_, long long kvl,
                                     int head_major, int parts = 1)
      : S(S_), H(H_), G(G_), lse(lse_), dsum(dsum_), ld(ld_), hl(hl_) {
    int ntiles, unit;
    cta_tile(head_major, key_block, ntiles, unit); /* key block 0 sees every query: the longest first */
    const int bkv = unit / parts;
    part = unit % parts;
    g0 = part * (G / parts);
    b = bkv / (H / G);
    kvh = bkv % (H / G);
    qkv_b = qkv + (long long)b * S * ld;
    dout_b = dout + (long long)b * S * hl;
    K = qkv_b + hl + (long long)kvh * D;
    V = K + kvl;
  }
  /* (batch, query head) index of this CTA's query head gi (head g0 + gi of the group): lse, dsum and dq_acc rows */
  __device__ __forceinline__ int bhq(int gi) const { return b * H + kvh * G + g0 + gi; }
  /* K and V rows key0.. of the block (BK rows) */
  template <int BK, int SD>
  __device__ __forceinline__ void load_keys(bf16 *sK, bf16 *sV, int key0, int tid) const {
    load_tile<BK, D, SD, NT>(sK, K + (long long)key0 * ld, ld, tid);
    load_tile<BK, D, SD, NT>(sV, V + (long long)key0 * ld, ld, tid);
  }
  /* queries q0 .. q0 + BQ - 1 of this CTA's query head gi into buffer buf of sQ, sdO ([2][BQ][SD]) and sL, sDs ([2][BQ]) */
  template <int SD>
  __device__ __forceinline__ void load_step(bf16 *sQ, bf16 *sdO, float *sL, float *sDs, int gi, int q0, int buf,
                                            int tid) const {
    const long long h = (long long)kvh * G + g0 + gi;
    const bf16 *Q = qkv_b + h * D, *dO = dout_b + h * D;
    const float *L = lse + (long long)bhq(gi) * S, *Ds = dsum + (long long)bhq(gi) * S;
    load_tile<BQ, D, SD, NT>(sQ + buf * BQ * SD, Q + (long long)q0 * ld, ld, tid);
    load_tile<BQ, D, SD, NT>(sdO + buf * BQ * SD, dO + (long long)q0 * hl, hl, tid);
    if (tid < BQ / 4) cp_async16(sL + buf * BQ + tid * 4, L + q0 + tid * 4);
    else if (tid < BQ / 2) cp_async16(sDs + buf * BQ + (tid - BQ / 4) * 4, Ds + q0 + (tid - BQ / 4) * 4);
  }
};

/* The row sums of flash_dsum_kernel with 16-byte loads (8 columns a thread,
 * D/8 threads a row reduced by shuffles), and dq_acc's rows ([bh][seq][D])
 * zeroed in the same pass unless dq_acc is NULL: one kernel instead of the
 * row sums and a memset. out, dout and dq_acc 16-byte aligned. */
template <int D>
__global__ void __launch_bounds__(256) flash_dsum16_kernel(const bf16 *out, const bf16 *dout, float *dsum,
                                                           float *dq_acc, long long rows, int S, int H, long long hl) {
  constexpr int TPR = D / 8; /* 4, 8 or 16: a row's threads are aligned lanes of one warp */
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x, r = i / TPR;
  const int c = (int)(i % TPR) * 8;
  const bool live = r < rows;
  float acc = 0.f;
  if (live) {
    const long long bh = r / S, s = r % S, b = bh / H, h = bh % H;
    const long long off = (b * S + s) * hl + h * D + c;
    const uint4 o = *reinterpret_cast<const uint4 *>(out + off), d = *reinterpret_cast<const uint4 *>(dout + off);
    const __nv_bfloat162 *o2 = reinterpret_cast<const __nv_bfloat162 *>(&o);
    const __nv_bfloat162 *d2 = reinterpret_cast<const __nv_bfloat162 *>(&d);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const float2 of = __bfloat1622float2(o2[k]), df = __bfloat1622float2(d2[k]);
      acc += of.x * df.x + of.y * df.y;
    }
    if (dq_acc) {
      float4 *z = reinterpret_cast<float4 *>(dq_acc + r * D + c);
      z[0] = make_float4(0.f, 0.f, 0.f, 0.f);
      z[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
#pragma unroll
  for (int m = TPR / 2; m > 0; m >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, m);
  if (live && c == 0) dsum[r] = acc;
}

/* dK, dV of one block of 16 NW keys (NW warps, 16 keys each), looping over
 * 32-query steps from the diagonal down. ATOMIC_DQ: also dQ's share of this
 * key block, dS (through shared memory) . K, added in FP32 to dq_acc
 * [bh][seq][D]. NW = 8 shares each step's Q and dO tiles among more warps
 * and adds dQ over more keys per atomic (opt-in, see bwd_warps). */
template <int D, bool ATOMIC_DQ, int NW>
__global__ void __launch_bounds__(32 * NW) flash_bwd_dkdv_kernel(const bf16 *qkv, const bf16 *dout, const float *lse,
                                                                 const float *dsum, bf16 *dqkv, float *dq_acc, int S,
                                                                 int H, int G, long long ld, long long hl,
                                                                 long long kvl, float scale_log2, float scale,
                                                                 int head_major) {
  constexpr int BK = 16 * NW, BQ = 32, SD = D + 8, SDS = BQ + 8, NT = 32 * NW;
  static_assert(2 * D / NW >= 16, "a warp's dQ columns must hold one ldmatrix.x4 pair");
  extern __shared__ __align__(16) unsigned char flash_smem[];
  bf16 *sK = reinterpret_cast<bf16 *>(flash_smem), *sV = sK + BK * SD;
  bf16 *sQ = sV + BK * SD;      /* [2][BQ][SD] */
  bf16 *sdO = sQ + 2 * BQ * SD; /* [2][BQ][SD] */
  float *sL = reinterpret_cast<float *>(sdO + 2 * BQ * SD); /* [2][BQ] lse, then [2][BQ] dsum */
  float *sDs = sL + 2 * BQ;
  bf16 *sdS = reinterpret_cast<bf16 *>(sDs + 2 * BQ); /* [BK][SDS]: dS^T of the step (ATOMIC_DQ) */
  const BwdHead<D, BQ, NT> hd(qkv, dout, lse, dsum, S, H, G, ld, hl, kvl, head_major);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;

  /* the steps of the G query heads one after another (step it: head it / steps) */
  const int q_first = hd.key_block * BK, steps = (S - q_first) / BQ, all_steps = G * steps;
  hd.template load_keys<BK, SD>(sK, sV, q_first, tid);
  hd.template load_step<SD>(sQ, sdO, sL, sDs, 0, q_first, 0, tid);
  cp_async_commit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++) {
    dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = 0.f;
    dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.f;
  }
  const int key_lo = q_first + warp * 16; /* this warp's first key */

  /* step it is step st of query head gi; the next one is (ngi, nst) (counters, no division) */
  int gi = 0, st = 0, ngi = 0, nst = 0;
  for (int it = 0; it < all_steps; it++, gi = ngi, st = nst) {
    ngi = gi, nst = st + 1;
    if (nst == steps) nst = 0, ngi++;
    const int buf = it & 1, q0 = q_first + st * BQ, bh = hd.bhq(gi);
    cp_async_wait_all();
    __syncthreads(); /* step it is in; every warp is done with buffer buf ^ 1 */
    if (it + 1 < all_steps) {
      hd.template load_step<SD>(sQ, sdO, sL, sDs, ngi, q_first + nst * BQ, buf ^ 1, tid);
      cp_async_commit();
    }
    const bf16 *cQ = sQ + buf * BQ * SD, *cdO = sdO + buf * BQ * SD;
    const float *cL = sL + buf * BQ, *cD = sDs + buf * BQ;

    float p[4][4], dp[4][4]; /* S^T and dP^T: 16 keys x 32 queries */
#pragma unroll
    for (int i = 0; i < 4; i++) {
      p[i][0] = p[i][1] = p[i][2] = p[i][3] = 0.f;
      dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
    }
    mma_abt<D, SD, 4>(p, sK, warp * 16, cQ, 0, lane);
    mma_abt<D, SD, 4>(dp, sV, warp * 16, cdO, 0, lane);
    const bool diag = q0 < key_lo + 16;
#pragma unroll
    for (int nt = 0; nt < 4; nt++)
#pragma unroll
      for (int x = 0; x < 4; x++) {
        int key = key_lo + g + (x >= 2 ? 8 : 0), qc = nt * 8 + 2 * t + (x & 1);
        float pv = exp2f(p[nt][x] * scale_log2 - cL[qc]);
        if (diag && q0 + qc < key) pv = 0.f;
        p[nt][x] = pv;
        dp[nt][x] = pv * (dp[nt][x] - cD[qc]); /* dS^T (unscaled) */
      }
    if (ATOMIC_DQ) {
#pragma unroll
      for (int nt = 0; nt < 4; nt++) {
        const int k0 = warp * 16 + g, q = nt * 8 + 2 * t;
        *reinterpret_cast<uint32_t *>(sdS + k0 * SDS + q) = pack_bf16(dp[nt][0], dp[nt][1]);
        *reinterpret_cast<uint32_t *>(sdS + (k0 + 8) * SDS + q) = pack_bf16(dp[nt][2], dp[nt][3]);
      }
    }
    mma_pb<D, SD, 2>(dv, p, cdO, 0, lane);
    mma_pb<D, SD, 2>(dk, dp, cQ, 0, lane);
    if (ATOMIC_DQ) {
      __syncthreads(); /* the whole 64-key dS^T is in */
      /* warp: 16 of the step's queries x half of D, summed over the block's 64 keys */
      /* warp: 16 of the step's queries x 2 D / NW columns, in chunks of at most
       * 32 columns (registers: dK and dV stay live) */
      constexpr int WC = 2 * D / NW, NC = WC < 32 ? WC : 32;
      const int m0 = (warp & 1) * 16;
#pragma unroll
      for (int n0 = (warp >> 1) * WC; n0 < (warp >> 1) * WC + WC; n0 += NC) {
        float acc[NC / 8][4];
#pragma unroll
        for (int i = 0; i < NC / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
          uint32_t a[4]; /* A = dS (queries x keys), stored transposed [key][query] */
          ldsm_x4_t(a, sdS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * SDS + m0 + ((lane >> 3) & 1) * 8);
#pragma unroll
          for (int np = 0; np < NC / 16; np++) {
            uint32_t b[4];
            ldsm_x4_t(b, frag_b_kn<SD>(sK, kk * 16, n0 + np * 16, lane));
            mma16816(acc[2 * np], a, b[0], b[1]);
            mma16816(acc[2 * np + 1], a, b[2], b[3]);
          }
        }
        float *dst = dq_acc + ((long long)bh * S + q0 + m0) * D + n0;
#pragma unroll
        for (int nt = 0; nt < NC / 8; nt++) {
          const int col = nt * 8 + 2 * t;
          atomicAdd(reinterpret_cast<float2 *>(dst + g * D + col), make_float2(acc[nt][0], acc[nt][1]));
          atomicAdd(reinterpret_cast<float2 *>(dst + (g + 8) * D + col), make_float2(acc[nt][2], acc[nt][3]));
        }
      }
    }
  }

  bf16 *dK = dqkv + ((long long)hd.b * S + key_lo) * ld + hl + (long long)hd.kvh * D;
  store_rows<D>(dK, ld, dk, scale, scale, lane);
  store_rows<D>(dK + kvl, ld, dv, 1.f, 1.f, lane);
}

/* dQ of one 64-query block (warp: 16 queries), looping over the 64-key blocks up to the diagonal. */
template <int D>
__global__ void __launch_bounds__(128) flash_bwd_dq_kernel(const bf16 *qkv, const bf16 *dout, const float *lse,
                                                           const float *dsum, bf16 *dqkv, int S, int H, int G,
                                                           long long ld, long long hl, long long kvl,
                                                           float scale_log2, float scale, int head_major) {
  constexpr int B = 64, SD = D + 8;
  extern __shared__ __align__(16) unsigned char flash_smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(flash_smem), *sdO = sQ + B * SD;
  bf16 *sK = sdO + B * SD; /* [2][B][SD] */
  bf16 *sV = sK + 2 * B * SD;
  int tile, ntiles, bh;
  cta_tile(head_major, tile, ntiles, bh);
  const int qb = ntiles - 1 - tile; /* the longest rows first */
  const int b = bh / H, h = bh % H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bf16 *Q = qkv + (long long)b * S * ld + (long long)h * D;
  const bf16 *K = qkv + (long long)b * S * ld + hl + (long long)(h / G) * D, *V = K + kvl; /* the group's K/V head */
  const bf16 *dO = dout + (long long)b * S * hl + (long long)h * D;
  const int row0 = qb * B + warp * 16;
  const float L0 = lse[(long long)bh * S + row0 + g], L1 = lse[(long long)bh * S + row0 + g + 8];
  const float D0 = dsum[(long long)bh * S + row0 + g], D1 = dsum[(long long)bh * S + row0 + g + 8];

  load_tile<B, D, SD>(sQ, Q + (long long)qb * B * ld, ld, tid);
  load_tile<B, D, SD>(sdO, dO + (long long)qb * B * hl, hl, tid);
  load_tile<B, D, SD>(sK, K, ld, tid);
  load_tile<B, D, SD>(sV, V, ld, tid);
  cp_async_commit();

  float dq[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;

  for (int j = 0; j <= qb; j++) {
    const int buf = j & 1;
    cp_async_wait_all();
    __syncthreads();
    if (j < qb) {
      load_tile<B, D, SD>(sK + (buf ^ 1) * B * SD, K + (long long)(j + 1) * B * ld, ld, tid);
      load_tile<B, D, SD>(sV + (buf ^ 1) * B * SD, V + (long long)(j + 1) * B * ld, ld, tid);
      cp_async_commit();
    }
    const bf16 *cK = sK + buf * B * SD, *cV = sV + buf * B * SD;
    float s[8][4], dp[8][4];
#pragma unroll
    for (int i = 0; i < 8; i++) {
      s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
      dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
    }
    mma_abt<D, SD, 8>(s, sQ, warp * 16, cK, 0, lane);
    mma_abt<D, SD, 8>(dp, sdO, warp * 16, cV, 0, lane);
#pragma unroll
    for (int nt = 0; nt < 8; nt++)
#pragma unroll
      for (int x = 0; x < 4; x++) {
        int row = warp * 16 + g + (x >= 2 ? 8 : 0), col = nt * 8 + 2 * t + (x & 1);
        float pv = exp2f(s[nt][x] * scale_log2 - (x >= 2 ? L1 : L0));
        if (j == qb && col > row) pv = 0.f;
        dp[nt][x] = pv * (dp[nt][x] - (x >= 2 ? D1 : D0)); /* dS (unscaled) */
      }
    mma_pb<D, SD, 4>(dq, dp, cK, 0, lane);
  }
  store_rows<D>(dqkv + ((long long)b * S + row0) * ld + (long long)h * D, ld, dq, scale, scale, lane);
}

/* dqkv's Q block = scale * dq_acc ([bh][seq][D] FP32), two elements per thread. */
template <int D>
__global__ void flash_dq_store_kernel(const float *dq_acc, bf16 *dqkv, long long pairs, int S, int H, long long ld,
                                      float scale) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < pairs; i += (long long)gridDim.x * blockDim.x) {
    long long x = 2 * i, d = x % D, r = x / D, s = r % S, bh = r / S, b = bh / H, h = bh % H;
    float2 v = *reinterpret_cast<const float2 *>(dq_acc + x);
    *reinterpret_cast<uint32_t *>(dqkv + (b * S + s) * ld + h * D + d) = pack_bf16(scale * v.x, scale * v.y);
  }
}

/* flash_dq_store_kernel with four elements a thread (16-byte loads, 8-byte
 * stores; dq_acc 16-byte and dqkv 8-byte aligned). */
template <int D>
__global__ void flash_dq_store4_kernel(const float *dq_acc, bf16 *dqkv, long long quads, int S, int H, long long ld,
                                       float scale) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < quads; i += (long long)gridDim.x * blockDim.x) {
    long long x = 4 * i, d = x % D, r = x / D, s = r % S, bh = r / S, b = bh / H, h = bh % H;
    const float4 v = *reinterpret_cast<const float4 *>(dq_acc + x);
    *reinterpret_cast<uint2 *>(dqkv + (b * S + s) * ld + h * D + d) =
        make_uint2(pack_bf16(scale * v.x, scale * v.y), pack_bf16(scale * v.z, scale * v.w));
  }
}

/* Backward on 128-key blocks (FlashAttention-2's work split; seq a multiple
 * of 128, head_dim 64 or 128): 8 warps, 64-query steps from the diagonal
 * down, the next step's Q, dO, lse and dsum loading (cp.async) during this one.
 * Per step, three phases separated by barriers, each warp on its own tile:
 *   1. S^T and dP^T (128 keys x 64 queries; warp 32 x 32), P and dS^T (BF16)
 *      into shared memory;
 *   2. dV += P^T.dO and dK += dS^T.Q (128 keys x D; warp 32 keys x D/2), in
 *      registers for the whole block;
 *   3. dQ's share dS.K (64 queries x D; warp 32 x D/4), added in FP32 to dq_acc.
 * Every warp tile is two 16-row m-tiles wide (mma_abt2/mma_sb2). V4: dQ added
 * with float4 atomics (--variant flash-bwd=v4). FTZ (the default): P by exp2_ftz;
 * exp2f with --variant flash-bwd=fa128 (the default until 2026-11-30 05:15 UTC).
 * parts > 1: the group's G query heads are split over `parts` CTAs (G / parts
 * each, grid (batch x key/value heads x parts) x key blocks); each writes its
 * dK, dV sums unscaled in FP32 to slice `part` of dkv_part ([parts][batch *
 * seq][2 kvl]: dK | dV columns; part_slice = batch * seq * 2 kvl floats),
 * summed by flash_dkdv_reduce_kernel. parts 1:
 * dK, dV to dqkv in BF16 (dkv_part unused). */
template <int D, bool V4, bool FTZ>
__global__ void __launch_bounds__(256, 1) flash_bwd128_kernel(const bf16 *qkv, const bf16 *dout, const float *lse,
                                                              const float *dsum, bf16 *dqkv, float *dq_acc, int S,
                                                              int H, int G, long long ld, long long hl, long long kvl,
                                                              float scale_log2, float scale, int head_major, int parts,
                                                              float *dkv_part, long long part_slice) {
  constexpr int BK = 128, BQ = 64, SD = D + 8, SP = BQ + 8, NT = 256;
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  extern __shared__ __align__(16) unsigned char flash_smem[];
  bf16 *sK = reinterpret_cast<bf16 *>(flash_smem), *sV = sK + BK * SD;
  bf16 *sQ = sV + BK * SD;      /* [2][BQ][SD] */
  bf16 *sdO = sQ + 2 * BQ * SD; /* [2][BQ][SD] */
  bf16 *sP = sdO + 2 * BQ * SD; /* [BK][SP]: P^T of the step */
  bf16 *sdS = sP + BK * SP;     /* [BK][SP]: dS^T of the step (unscaled) */
  float *sL = reinterpret_cast<float *>(sdS + BK * SP); /* [2][BQ] lse, then [2][BQ] dsum */
  float *sDs = sL + 2 * BQ;
  const BwdHead<D, BQ, NT> hd(qkv, dout, lse, dsum, S, H, G, ld, hl, kvl, head_major, parts);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;

  /* the steps of this CTA's G / parts query heads one after another (step it: head it / steps) */
  const int key0 = hd.key_block * BK, steps = (S - key0) / BQ, all_steps = (G / parts) * steps;
  hd.template load_keys<BK, SD>(sK, sV, key0, tid);
  hd.template load_step<SD>(sQ, sdO, sL, sDs, 0, key0, 0, tid);
  cp_async_commit();

  /* phase 2's tile: keys kw*32.., columns dw*D/2.. */
  const int kw = warp & 3, dw = warp >> 2;
  float dk[2][D / 16][4], dv[2][D / 16][4];
#pragma unroll
  for (int mt = 0; mt < 2; mt++)
#pragma unroll
    for (int i = 0; i < D / 16; i++) {
      dk[mt][i][0] = dk[mt][i][1] = dk[mt][i][2] = dk[mt][i][3] = 0.f;
      dv[mt][i][0] = dv[mt][i][1] = dv[mt][i][2] = dv[mt][i][3] = 0.f;
    }
  /* phase 1's tile: keys kw*32.., queries qw*32..; phase 3's: queries q3*32.., columns d3*D/4.. */
  const int qw = warp >> 2, q3 = warp & 1, d3 = warp >> 1;

  /* step it is step st of query head gi; the next one is (ngi, nst) (counters, no division) */
  int gi = 0, st = 0, ngi = 0, nst = 0;
  for (int it = 0; it < all_steps; it++, gi = ngi, st = nst) {
    ngi = gi, nst = st + 1;
    if (nst == steps) nst = 0, ngi++;
    const int buf = it & 1, q0 = key0 + st * BQ, bh = hd.bhq(gi);
    cp_async_wait_all();
    __syncthreads(); /* step it is in; every warp is done with buffer buf ^ 1, sP and sdS */
    if (it + 1 < all_steps) {
      hd.template load_step<SD>(sQ, sdO, sL, sDs, ngi, key0 + nst * BQ, buf ^ 1, tid);
      cp_async_commit();
    }
    const bf16 *cQ = sQ + buf * BQ * SD, *cdO = sdO + buf * BQ * SD;
    const float *cL = sL + buf * BQ, *cD = sDs + buf * BQ;

    { /* phase 1 */
      float p[2][4][4], dp[2][4][4];
      const int k_lo = key0 + kw * 32, q_lo = q0 + qw * 32;
      if (q_lo + 31 < k_lo) { /* every query of the tile left of every key: P = dS = 0 */
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
          for (int i = 0; i < 4; i++)
            p[mt][i][0] = p[mt][i][1] = p[mt][i][2] = p[mt][i][3] = dp[mt][i][0] = dp[mt][i][1] = dp[mt][i][2] =
                dp[mt][i][3] = 0.f;
      } else {
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
#pragma unroll
          for (int i = 0; i < 4; i++)
            p[mt][i][0] = p[mt][i][1] = p[mt][i][2] = p[mt][i][3] = dp[mt][i][0] = dp[mt][i][1] = dp[mt][i][2] =
                dp[mt][i][3] = 0.f;
        mma_abt2<D, SD, SD, 4>(p, sK, kw * 32, cQ, qw * 32, lane);
        mma_abt2<D, SD, SD, 4>(dp, sV, kw * 32, cdO, qw * 32, lane);
        const bool diag = q_lo < k_lo + 31;
#pragma unroll
        for (int nt = 0; nt < 4; nt++)
#pragma unroll
          for (int c = 0; c < 2; c++) {
            const int qc = qw * 32 + nt * 8 + 2 * t + c;
            const float lq = cL[qc], dq = cD[qc];
#pragma unroll
            for (int mt = 0; mt < 2; mt++)
#pragma unroll
              for (int hi = 0; hi < 2; hi++) {
                const int x = 2 * hi + c, key = k_lo + mt * 16 + g + 8 * hi;
                const float xe = fmaf(p[mt][nt][x], scale_log2, -lq);
                float pv = FTZ ? exp2_ftz(xe) : exp2f(xe);
                if (diag && q0 + qc < key) pv = 0.f;
                p[mt][nt][x] = pv;
                dp[mt][nt][x] = pv * (dp[mt][nt][x] - dq); /* dS^T (unscaled) */
              }
          }
      }
#pragma unroll
      for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
          const int k = kw * 32 + mt * 16 + g, q = qw * 32 + nt * 8 + 2 * t;
          *reinterpret_cast<uint32_t *>(sP + k * SP + q) = pack_bf16(p[mt][nt][0], p[mt][nt][1]);
          *reinterpret_cast<uint32_t *>(sP + (k + 8) * SP + q) = pack_bf16(p[mt][nt][2], p[mt][nt][3]);
          *reinterpret_cast<uint32_t *>(sdS + k * SP + q) = pack_bf16(dp[mt][nt][0], dp[mt][nt][1]);
          *reinterpret_cast<uint32_t *>(sdS + (k + 8) * SP + q) = pack_bf16(dp[mt][nt][2], dp[mt][nt][3]);
        }
    }
    __syncthreads(); /* P^T and dS^T of all 128 keys x 64 queries are in */

    /* phase 2: dV += P^T.dO, dK += dS^T.Q over the step's 64 queries */
    mma_sb2<D / 2, SP, SD, BQ / 16>(dv, sP, kw * 32, cdO, dw * (D / 2), lane);
    mma_sb2<D / 2, SP, SD, BQ / 16>(dk, sdS, kw * 32, cQ, dw * (D / 2), lane);

    { /* phase 3: dQ (queries q3*32.., columns d3*D/4..) = dS . K over the block's 128 keys */
      constexpr int NC = D / 4;
      float acc[2][NC / 8][4];
#pragma unroll
      for (int mt = 0; mt < 2; mt++)
#pragma unroll
        for (int i = 0; i < NC / 8; i++) acc[mt][i][0] = acc[mt][i][1] = acc[mt][i][2] = acc[mt][i][3] = 0.f;
      /* keys left of the step's diagonal part only: queries q0.. see keys <= q0 + 63 */
#pragma unroll
      for (int kk = 0; kk < BK / 16; kk++) {
        if (key0 + kk * 16 > q0 + q3 * 32 + 31) break; /* dS = 0 from here on for this warp's queries */
        uint32_t a[2][4]; /* A = dS (queries x keys), stored transposed [key][query] */
#pragma unroll
        for (int mt = 0; mt < 2; mt++)
          ldsm_x4_t(a[mt], sdS + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * SP + q3 * 32 + mt * 16 +
                               ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int np = 0; np < NC / 16; np++) {
          uint32_t bb[4];
          ldsm_x4_t(bb, frag_b_kn<SD>(sK, kk * 16, d3 * NC + np * 16, lane));
          mma16816(acc[0][2 * np], a[0], bb[0], bb[1]);
          mma16816(acc[0][2 * np + 1], a[0], bb[2], bb[3]);
          mma16816(acc[1][2 * np], a[1], bb[0], bb[1]);
          mma16816(acc[1][2 * np + 1], a[1], bb[2], bb[3]);
        }
      }
#pragma unroll
      for (int mt = 0; mt < 2; mt++) {
        float *dst = dq_acc + ((long long)bh * S + q0 + q3 * 32 + mt * 16) * D + d3 * NC;
#pragma unroll
        for (int nt = 0; nt < NC / 8; nt++) {
          const int col = nt * 8 + 2 * t;
          if (V4) { /* lanes t, t^1 swap a row: even t adds 4 columns of row g, odd t of row g + 8 */
            const bool odd = t & 1;
            const float o0 = __shfl_xor_sync(0xffffffffu, odd ? acc[mt][nt][0] : acc[mt][nt][2], 1);
            const float o1 = __shfl_xor_sync(0xffffffffu, odd ? acc[mt][nt][1] : acc[mt][nt][3], 1);
            if (!odd)
              atomicAdd(reinterpret_cast<float4 *>(dst + g * D + col),
                        make_float4(acc[mt][nt][0], acc[mt][nt][1], o0, o1));
            else
              atomicAdd(reinterpret_cast<float4 *>(dst + (g + 8) * D + col - 2),
                        make_float4(o0, o1, acc[mt][nt][2], acc[mt][nt][3]));
          } else {
            atomicAdd(reinterpret_cast<float2 *>(dst + g * D + col), make_float2(acc[mt][nt][0], acc[mt][nt][1]));
            atomicAdd(reinterpret_cast<float2 *>(dst + (g + 8) * D + col),
                      make_float2(acc[mt][nt][2], acc[mt][nt][3]));
          }
        }
      }
    }
  }

  if (parts > 1) {
    const long long pld = 2 * kvl; /* a partial row: dK | dV */
    float *pK = dkv_part + hd.part * part_slice + ((long long)hd.b * S + key0 + kw * 32) * pld +
                (long long)hd.kvh * D + dw * (D / 2);
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
      store_rows_f32<D / 2>(pK + (long long)mt * 16 * pld, pld, dk[mt], lane);
      store_rows_f32<D / 2>(pK + (long long)mt * 16 * pld + kvl, pld, dv[mt], lane);
    }
    return;
  }
  bf16 *dK = dqkv + ((long long)hd.b * S + key0 + kw * 32) * ld + hl + (long long)hd.kvh * D + dw * (D / 2);
#pragma unroll
  for (int mt = 0; mt < 2; mt++) {
    store_rows<D / 2>(dK + (long long)mt * 16 * ld, ld, dk[mt], scale, scale, lane);
    store_rows<D / 2>(dK + (long long)mt * 16 * ld + kvl, ld, dv[mt], 1.f, 1.f, lane);
  }
}

/* dK, dV of the split backward (flash_bwd128_kernel with parts > 1): the sum
 * of the `parts` FP32 slices of dkv_part ([parts][rows][2 kvl], rows = batch *
 * seq) in slice order (deterministic), dK times `scale`, written as BF16 to
 * columns hl .. hl + 2 kvl of dqkv's rows (the layout and scaling of the
 * kernel's own epilogue with parts 1). Four elements a thread: dkv_part
 * 16-byte and dqkv 8-byte aligned, kvl a multiple of 4. */
__global__ void flash_dkdv_reduce_kernel(const float *dkv_part, int parts, long long rows, long long kvl,
                                         bf16 *dqkv, long long ld, long long hl, float scale) {
  const long long pld = 2 * kvl, quads = rows * pld / 4, slice = rows * pld;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < quads; i += (long long)gridDim.x * blockDim.x) {
    const long long x = 4 * i, r = x / pld, c = x % pld;
    float4 v = *reinterpret_cast<const float4 *>(dkv_part + x);
    for (int p = 1; p < parts; p++) {
      const float4 w = *reinterpret_cast<const float4 *>(dkv_part + p * slice + x);
      v.x += w.x, v.y += w.y, v.z += w.z, v.w += w.w;
    }
    const float m = c < kvl ? scale : 1.f;
    *reinterpret_cast<uint2 *>(dqkv + r * ld + hl + c) = make_uint2(pack_bf16(m * v.x, m * v.y), pack_bf16(m * v.z, m * v.w));
  }
}

/* ---- host side ---- */

int exec_flash_supported(long long seq, long long head_dim) {
  return seq > 0 && seq % 64 == 0 && seq <= (1LL << 30) && (head_dim == 32 || head_dim == 64 || head_dim == 128);
}

int exec_flash_selected(long long seq, long long head_dim) {
  /* The default where supported (passed the float64 test and `execute --check`
   * on 2 x H200, 2026-11-30); --variant attn=unfused keeps the batched-GEMM path. */
  if (ops_variant_is(OPS_V_ATTN, "unfused")) return 0;
  return exec_flash_supported(seq, head_dim) && seq >= 2 * head_dim + 4;
}

/* The launch order of the tiles (cta_tile): longest tiles of every head first
 * by default; --variant flash-order=head launches one head's tiles together (the
 * order until 2026-11-30 05:15 UTC), as does a grid of more than 65,535 tiles
 * a head (gridDim.y's limit). */
static int head_major(long long tiles) { return ops_variant_is(OPS_V_FLASH_ORDER, "head") || tiles > 65535 ? 1 : 0; }
static dim3 tile_grid(int tiles, int bh, int head_major_order) {
  return head_major_order ? dim3(tiles, bh) : dim3(bh, tiles);
}

/* Forward: --variant flash-fwd=v1 the 64-query kernel everywhere; =w8 8 warps of 16
 * rows on 128-query tiles (flash_fwd_kernel<D, 8>); =fa128 the one-stage
 * 128-query kernel; default: the two-stage 128-query kernel where seq is a
 * multiple of 128, else the 64-query one. */
static size_t fwd_smem(int d, int nw) { return (size_t)(16 * nw + 2 * 64) * (d + 8) * sizeof(bf16); }
static size_t fwd128_smem(int d, bool two_stage) {
  return (size_t)(128 + (two_stage ? 4 : 2) * 64) * (d + 8) * sizeof(bf16);
}
static size_t bwd128_smem(int d) {
  return (size_t)(2 * 128 + 4 * 64) * (d + 8) * sizeof(bf16) + (size_t)2 * 128 * (64 + 8) * sizeof(bf16) +
         4 * 64 * sizeof(float);
}
static size_t dkdv_smem(int d, bool atomic_dq, int nw) {
  const int bk = 16 * nw;
  return (size_t)(2 * bk + 4 * 32) * (d + 8) * sizeof(bf16) + 4 * 32 * sizeof(float) +
         (atomic_dq ? (size_t)bk * (32 + 8) * sizeof(bf16) : 0);
}

/* 4 warps (64-key blocks); --variant flash-bwd-warps=8: 8 warps (128-key blocks)
 * where the shape allows — measured slower (597 vs 576 us at batch 2 x 16
 * heads x 2048 x 128: one CTA of 255 registers a thread per SM). */
static int bwd_warps(int d, int S) { return ops_variant_is(OPS_V_FLASH_BWD_WARPS, "8") && d >= 64 && S % 128 == 0 ? 8 : 4; }
static size_t dq_smem(int d) { return (size_t)6 * 64 * (d + 8) * sizeof(bf16); }

template <int D>
static int flash_fwd_t(const bf16 *qkv, bf16 *out, float *lse, int batch, int S, int H, int KV, cudaStream_t st,
                       ts_err *e) {
  static int ready;
  if (!ready) {
    cudaError_t ce = cudaFuncSetAttribute(flash_fwd_kernel<D, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)fwd_smem(D, 4));
    if (ce == cudaSuccess)
      ce = cudaFuncSetAttribute(flash_fwd_kernel<D, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)fwd_smem(D, 8));
    if (ce == cudaSuccess)
      ce = cudaFuncSetAttribute(flash_fwd128_kernel<D, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)fwd128_smem(D, false));
    if (ce == cudaSuccess)
      ce = cudaFuncSetAttribute(flash_fwd128_kernel<D, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)fwd128_smem(D, true));
    if (ce != cudaSuccess) return ts_fail_sys(e, "flash attention forward: shared memory: %s", cudaGetErrorString(ce));
    ready = 1;
  }
  const long long hl = (long long)H * D, kvl = (long long)KV * D, ld = hl + 2 * kvl;
  const int G = H / KV;
  const float scale_log2 = (float)(1.4426950408889634 / sqrt((double)D));
  const int bh = batch * H;
  if (S % 128 == 0 && !ops_variant_is(OPS_V_FLASH_FWD, "v1")) {
    const int tiles = S / 128, hm = head_major(tiles);
    const dim3 grid = tile_grid(tiles, bh, hm);
    if (ops_variant_is(OPS_V_FLASH_FWD, "w8"))
      flash_fwd_kernel<D, 8><<<grid, 256, fwd_smem(D, 8), st>>>(qkv, out, lse, S, H, ld, hl, G, kvl, scale_log2, hm);
    else if (ops_variant_is(OPS_V_FLASH_FWD, "fa128"))
      flash_fwd128_kernel<D, false><<<grid, 128, fwd128_smem(D, false), st>>>(qkv, out, lse, S, H, ld, hl, G,
                                                                             kvl, scale_log2, hm);
    else
      flash_fwd128_kernel<D, true><<<grid, 128, fwd128_smem(D, true), st>>>(qkv, out, lse, S, H, ld, hl, G,
                                                                           kvl, scale_log2, hm);
  } else {
    const int tiles = S / 64, hm = head_major(tiles);
    flash_fwd_kernel<D, 4><<<tile_grid(tiles, bh, hm), 128, fwd_smem(D, 4), st>>>(qkv, out, lse, S, H, ld, hl, G,
                                                                                  kvl, scale_log2, hm);
  }
  FLASH_LAUNCH("flash attention forward");
  return 0;
}

/* SMs of the current device, asked once (0 until the query succeeds). */
static int sm_count(void) {
  static int n;
  if (!n) {
    int dev = 0, c = 0;
    if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
      n = c;
  }
  return n;
}

/* Floats of one slice of the split backward's dK | dV partials ([batch * seq][2 kvl]). */
static long long part_slice_floats(int batch, long long seq, long long kv_heads, long long head_dim) {
  return (long long)batch * seq * 2 * kv_heads * head_dim;
}

/* How many CTAs share a group's query heads in flash_bwd128_kernel (its
 * `parts`; exec_flash.h). The kernel is causal: with n = seq / 128 key
 * blocks, the CTA of key block k runs (n - k) x G / P steps, the longest
 * n x G / P; all CTAs together batch x kv_heads x G x n (n + 1) / 2 steps. The
 * rule (--variant flash-bwd-parts=0, the default): the smallest divisor P of
 * the group G whose longest CTA is at most 5/4 of an even spread of all steps
 * over the SMs, i.e. 8 SMs <= 5 P batch kv_heads (n + 1); G where none is.
 * P = 1 where the grid already fills the GPU (every zoo training shape at
 * TP 1; 8 query heads / 1 key/value head x 4096: P = 8). --variant
 * flash-bwd-parts=N (N > 0): the largest divisor of G at most N. Either way
 * P is cut to the largest divisor whose partials fit in the scratch after
 * the minimum (exec_flash_bwd_scratch_floats); 1 on every other backward path
 * (v1, v4, split, fa128, seq no multiple of 128, head_dim 32). */
static int bwd_parts(int batch, long long S, long long H, long long KV, long long D, long long scratch_floats) {
  if (D < 64 || S % 128 || !ops_variant_is(OPS_V_FLASH_BWD, "default") || batch < 1 || KV < 1 || H % KV) return 1;
  const long long G = H / KV, n = S / 128, want = atoll(ops_variant(OPS_V_FLASH_BWD_PARTS));
  const long long room = (scratch_floats - exec_flash_bwd_scratch_floats(batch, S, H, D)) / part_slice_floats(batch, S, KV, D);
  long long pick = G;
  if (want > 0) {
    for (pick = want < G ? want : G; G % pick; pick--) {
    }
  } else {
    for (long long p = 1; p < G; p++)
      if (G % p == 0 && 8LL * sm_count() <= 5 * p * batch * KV * (n + 1)) {
        pick = p;
        break;
      }
  }
  for (long long p = pick; p > 1; p--)
    if (G % p == 0 && p <= room) return (int)p;
  return 1;
}

/* Backward: --variant flash-bwd=split the two-pass backward (dK/dV pass, then a dQ
 * pass recomputing S and dP); =v1 one pass on 64-key blocks
 * (flash_bwd_dkdv_kernel with dQ atomics); =v4 the 128-key kernel with float4
 * dQ atomics; =fa128 the 128-key kernel with exp2f; default: the 128-key
 * kernel (flash_bwd128_kernel, exp2_ftz) where head_dim is 64 or 128 and seq
 * a multiple of 128, else v1. */
template <int D>
static int flash_bwd_t(const bf16 *qkv, const bf16 *out, const bf16 *dout, const float *lse, float *scratch,
                       long long scratch_floats, bf16 *dqkv, int batch, int S, int H, int KV, cudaStream_t st,
                       ts_err *e) {
  constexpr int DD = D >= 64 ? D : 64; /* the 128-key kernel runs for D >= 64 only */
  static int ready;
  if (!ready) {
    cudaError_t ce = cudaFuncSetAttribute(flash_bwd_dkdv_kernel<D, false, 4>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dkdv_smem(D, false, 4));
    if (ce == cudaSuccess)
      ce = cudaFuncSetAttribute(flash_bwd_dkdv_kernel<D, true, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)dkdv_smem(D, true, 4));
    if (ce == cudaSuccess && D >= 64)
      ce = cudaFuncSetAttribute(flash_bwd_dkdv_kernel<D, true, D >= 64 ? 8 : 4>,
                                cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dkdv_smem(D, true, D >= 64 ? 8 : 4));
    if (ce == cudaSuccess)
      ce = cudaFuncSetAttribute(flash_bwd_dq_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dq_smem(D));
    if (ce == cudaSuccess && D >= 64)
      ce = cudaFuncSetAttribute(flash_bwd128_kernel<DD, false, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)bwd128_smem(D));
    if (ce == cudaSuccess && D >= 64)
      ce = cudaFuncSetAttribute(flash_bwd128_kernel<DD, true, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)bwd128_smem(D));
    if (ce == cudaSuccess && D >= 64)
      ce = cudaFuncSetAttribute(flash_bwd128_kernel<DD, false, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)bwd128_smem(D));
    if (ce != cudaSuccess)
      return ts_fail_sys(e, "flash attention backward: shared memory: %s", cudaGetErrorString(ce));
    ready = 1;
  }
  const long long hl = (long long)H * D, rows = (long long)batch * H * S, kvl = (long long)KV * D, ld = hl + 2 * kvl;
  /* the key-block kernels run one CTA per (batch, key/value head) and key
   * block over the G query heads of its group; the dQ pass per query head */
  const int bh = batch * H, bkv = batch * KV, G = H / KV;
  const float scale = (float)(1.0 / sqrt((double)D)), scale_log2 = (float)(1.4426950408889634 / sqrt((double)D));
  if (scratch_floats < exec_flash_bwd_scratch_floats(batch, S, H, D))
    return ts_fail(e, NULL, "flash attention backward", "scratch of %lld floats, needs %lld", scratch_floats,
                   exec_flash_bwd_scratch_floats(batch, S, H, D));
  float *dsum = scratch, *dq_acc = scratch + ((rows + 3) / 4) * 4; /* 16-byte aligned */
  /* the two passes add no atomics: also the fixed-order choice (--variant reduce=ordered) */
  const bool split = ops_variant_is(OPS_V_FLASH_BWD, "split") || ops_variant_is(OPS_V_REDUCE, "ordered");
  /* 16-byte row sums that also clear dq_acc, 4-wide dQ store (default); the
   * 4-byte row sums, a memset and the 2-wide store with --variant flash-bwd=fa128
   * (the default until 2026-11-30 05:15 UTC) or pointers not aligned for them */
  const bool wide = !ops_variant_is(OPS_V_FLASH_BWD, "fa128") &&
                    ((uintptr_t)out | (uintptr_t)dout | (uintptr_t)scratch) % 16 == 0 && (uintptr_t)dqkv % 8 == 0;
  if (wide)
    flash_dsum16_kernel<D><<<(unsigned)((rows * (D / 8) + 255) / 256), 256, 0, st>>>(out, dout, dsum,
                                                                                      split ? NULL : dq_acc, rows, S,
                                                                                      H, hl);
  else
    flash_dsum_kernel<D><<<(unsigned)((rows + 3) / 4), 128, 0, st>>>(out, dout, dsum, rows, S, H, hl);
  FLASH_LAUNCH("flash attention backward (row sums)");
  const int hm64 = head_major(S / 64);
  const dim3 grid = tile_grid(S / 64, bkv, hm64);
  if (split) {
    flash_bwd_dkdv_kernel<D, false, 4><<<grid, 128, dkdv_smem(D, false, 4), st>>>(
        qkv, dout, lse, dsum, dqkv, NULL, S, H, G, ld, hl, kvl, scale_log2, scale, hm64);
    FLASH_LAUNCH("flash attention backward (dK, dV)");
    flash_bwd_dq_kernel<D><<<tile_grid(S / 64, bh, hm64), 128, dq_smem(D), st>>>(
        qkv, dout, lse, dsum, dqkv, S, H, G, ld, hl, kvl, scale_log2, scale, hm64);
    FLASH_LAUNCH("flash attention backward (dQ)");
    return 0;
  }
  if (!wide) {
    cudaError_t ce = cudaMemsetAsync(dq_acc, 0, (size_t)rows * D * sizeof(float), st);
    if (ce != cudaSuccess) return ts_fail_sys(e, "flash attention backward: clearing dQ: %s", cudaGetErrorString(ce));
  }
  if (D >= 64 && S % 128 == 0 && !ops_variant_is(OPS_V_FLASH_BWD, "v1")) {
    const int hm = head_major(S / 128);
    const dim3 grid128 = tile_grid(S / 128, bkv, hm);
    if (ops_variant_is(OPS_V_FLASH_BWD, "v4"))
      flash_bwd128_kernel<DD, true, true><<<grid128, 256, bwd128_smem(D), st>>>(
          qkv, dout, lse, dsum, dqkv, dq_acc, S, H, G, ld, hl, kvl, scale_log2, scale, hm, 1, NULL, 0);
    else if (ops_variant_is(OPS_V_FLASH_BWD, "fa128"))
      flash_bwd128_kernel<DD, false, false><<<grid128, 256, bwd128_smem(D), st>>>(
          qkv, dout, lse, dsum, dqkv, dq_acc, S, H, G, ld, hl, kvl, scale_log2, scale, hm, 1, NULL, 0);
    else {
      /* a group's query heads over `parts` CTAs where the grid is small (bwd_parts; the
       * reduce kernel needs the 16-byte scratch and 8-byte dqkv of `wide`) */
      const int parts = wide ? bwd_parts(batch, S, H, KV, D, scratch_floats) : 1;
      float *dkv_part = scratch + exec_flash_bwd_scratch_floats(batch, S, H, D); /* 16-byte aligned */
      const long long slice = part_slice_floats(batch, S, KV, D);
      flash_bwd128_kernel<DD, false, true><<<tile_grid(S / 128, bkv * parts, hm), 256, bwd128_smem(D), st>>>(
          qkv, dout, lse, dsum, dqkv, dq_acc, S, H, G, ld, hl, kvl, scale_log2, scale, hm, parts, dkv_part, slice);
      if (parts > 1) {
        FLASH_LAUNCH("flash attention backward (dK, dV partials, dQ)");
        const long long quads = slice / 4, blocks = (quads + 255) / 256;
        flash_dkdv_reduce_kernel<<<(unsigned)(blocks < 65535 * 8 ? blocks : 65535 * 8), 256, 0, st>>>(
            dkv_part, parts, (long long)batch * S, kvl, dqkv, ld, hl, scale);
        FLASH_LAUNCH("flash attention backward (dK, dV sum of the parts)");
      }
    }
  } else if (D >= 64 && bwd_warps(D, S) == 8) {
    constexpr int NW = D >= 64 ? 8 : 4; /* this branch runs for D >= 64 only */
    const int hm = head_major(S / (16 * NW));
    flash_bwd_dkdv_kernel<D, true, NW><<<tile_grid(S / (16 * NW), bkv, hm), 32 * NW, dkdv_smem(D, true, NW), st>>>(
        qkv, dout, lse, dsum, dqkv, dq_acc, S, H, G, ld, hl, kvl, scale_log2, scale, hm);
  } else {
    flash_bwd_dkdv_kernel<D, true, 4><<<grid, 128, dkdv_smem(D, true, 4), st>>>(
        qkv, dout, lse, dsum, dqkv, dq_acc, S, H, G, ld, hl, kvl, scale_log2, scale, hm64);
  }
  FLASH_LAUNCH("flash attention backward (dK, dV, dQ)");
  const long long pairs = rows * D / 2, quads = rows * D / 4;
  if (wide)
    flash_dq_store4_kernel<D><<<(unsigned)((quads + 255) / 256 < 65535 * 8 ? (quads + 255) / 256 : 65535 * 8), 256, 0,
                                st>>>(dq_acc, dqkv, quads, S, H, ld, scale);
  else
    flash_dq_store_kernel<D><<<(unsigned)((pairs + 255) / 256 < 65535 * 8 ? (pairs + 255) / 256 : 65535 * 8), 256, 0,
                               st>>>(dq_acc, dqkv, pairs, S, H, ld, scale);
  FLASH_LAUNCH("flash attention backward (dQ store)");
  return 0;
}

static int check_shape(const char *what, int batch, long long seq, long long heads, long long kv_heads,
                       long long head_dim, ts_err *e) {
  if (batch < 1 || heads < 1 || batch * heads > 65535)
    return ts_fail(e, NULL, what, "batch %d x heads %lld must be in 1..65535", batch, heads);
  if (kv_heads < 1 || heads % kv_heads)
    return ts_fail(e, NULL, what, "kv_heads %lld must divide heads %lld", kv_heads, heads);
  if (!exec_flash_supported(seq, head_dim))
    return ts_fail(e, NULL, what, "seq %lld (a multiple of 64) / head_dim %lld (32, 64 or 128) not supported", seq,
                   head_dim);
  if (seq > 0x7fffffff) return ts_fail(e, NULL, what, "seq %lld too long", seq);
  return 0;
}

int exec_flash_gqa_supported(long long seq, long long heads, long long kv_heads, long long head_dim) {
  return heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0 && exec_flash_supported(seq, head_dim);
}

extern "C" int exec_flash_fwd_gqa(const void *qkv, void *out, float *lse, int batch, long long seq, long long heads,
                                  long long kv_heads, long long head_dim, void *stream, ts_err *e) {
  if (check_shape("flash attention forward", batch, seq, heads, kv_heads, head_dim, e)) return -1;
  const bf16 *q = (const bf16 *)qkv;
  bf16 *o = (bf16 *)out;
  cudaStream_t st = (cudaStream_t)stream;
  const int S = (int)seq, H = (int)heads, KV = (int)kv_heads;
  switch (head_dim) {
  case 32: return flash_fwd_t<32>(q, o, lse, batch, S, H, KV, st, e);
  case 64: return flash_fwd_t<64>(q, o, lse, batch, S, H, KV, st, e);
  default: return flash_fwd_t<128>(q, o, lse, batch, S, H, KV, st, e);
  }
}

extern "C" int exec_flash_fwd(const void *qkv, void *out, float *lse, int batch, long long seq, long long heads,
                              long long head_dim, void *stream, ts_err *e) {
  return exec_flash_fwd_gqa(qkv, out, lse, batch, seq, heads, heads, head_dim, stream, e);
}

long long exec_flash_bwd_scratch_floats(int batch, long long seq, long long heads, long long head_dim) {
  long long rows = (long long)batch * heads * seq;
  return (rows + 3) / 4 * 4 + rows * head_dim;
}

long long exec_flash_bwd_gqa_scratch_floats(int batch, long long seq, long long heads, long long kv_heads,
                                           long long head_dim) {
  const long long base = exec_flash_bwd_scratch_floats(batch, seq, heads, head_dim);
  if (!exec_flash_gqa_supported(seq, heads, kv_heads, head_dim)) return base;
  return base + part_slice_floats(batch, seq, kv_heads, head_dim) *
                    bwd_parts(batch, seq, heads, kv_heads, head_dim, LLONG_MAX);
}

int exec_flash_bwd_parts(int batch, long long seq, long long heads, long long kv_heads, long long head_dim,
                         long long scratch_floats) {
  if (!exec_flash_gqa_supported(seq, heads, kv_heads, head_dim)) return 1;
  return bwd_parts(batch, seq, heads, kv_heads, head_dim, scratch_floats);
}

extern "C" int exec_flash_bwd_gqa(const void *qkv, const void *out, const void *dout, const float *lse,
                                  float *scratch, long long scratch_floats, void *dqkv, int batch, long long seq,
                                  long long heads, long long kv_heads, long long head_dim, void *stream, ts_err *e) {
  if (check_shape("flash attention backward", batch, seq, heads, kv_heads, head_dim, e)) return -1;
  const bf16 *q = (const bf16 *)qkv, *o = (const bf16 *)out, *d = (const bf16 *)dout;
  bf16 *dq = (bf16 *)dqkv;
  cudaStream_t st = (cudaStream_t)stream;
  const int S = (int)seq, H = (int)heads, KV = (int)kv_heads;
  switch (head_dim) {
  case 32: return flash_bwd_t<32>(q, o, d, lse, scratch, scratch_floats, dq, batch, S, H, KV, st, e);
  case 64: return flash_bwd_t<64>(q, o, d, lse, scratch, scratch_floats, dq, batch, S, H, KV, st, e);
  default: return flash_bwd_t<128>(q, o, d, lse, scratch, scratch_floats, dq, batch, S, H, KV, st, e);
  }
}

extern "C" int exec_flash_bwd(const void *qkv, const void *out, const void *dout, const float *lse, float *scratch,
                              void *dqkv, int batch, long long seq, long long heads, long long head_dim, void *stream,
                              ts_err *e) {
  return exec_flash_bwd_gqa(qkv, out, dout, lse, scratch, exec_flash_bwd_scratch_floats(batch, seq, heads, head_dim),
                            dqkv, batch, seq, heads, heads, head_dim, stream, e);
}

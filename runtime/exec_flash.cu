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
 * Forward (one CTA per 64 queries of one head): for each 64-key block at or
 * left of the diagonal, S = Q.K^T, mask, online softmax (running max m, sum
 * l, rescaling O), O += P.V with P taken straight from the S accumulators.
 * Saves lse = m + log2(l) per row (base 2, scaled scores).
 * Backward, two kernels without atomics (FlashAttention-2's split into a
 * key-major and a query-major pass, at the cost of recomputing S and dP in
 * both): dK/dV per 64-key block looping over queries, dQ per 64-query block
 * looping over keys; P = exp2(S*scale*log2e - lse), dS = P*(dP - dsum) with
 * dsum = rowsum(dO*O) from a small kernel. */
extern "C" {
#include "ts_error.h"
}
#include "exec_flash.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
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

/* ---- forward ---- */

template <int D>
__global__ void __launch_bounds__(128) flash_fwd_kernel(const bf16 *qkv, bf16 *out, float *lse, int S, int H,
                                                        long long ld, long long hl, float scale_log2) {
  constexpr int B = 64, SD = D + 8;
  extern __shared__ __align__(16) unsigned char flash_smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(flash_smem), *sK = sQ + B * SD, *sV = sK + B * SD;
  const int qb = (int)gridDim.x - 1 - (int)blockIdx.x; /* the longest rows first */
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bf16 *Q = qkv + (long long)b * S * ld + (long long)h * D, *K = Q + hl, *V = Q + 2 * hl;

  load_tile<B, D, SD>(sQ, Q + (long long)qb * B * ld, ld, tid);
  load_tile<B, D, SD>(sK, K, ld, tid);
  cp_async_commit();

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int j = 0; j <= qb; j++) {
    cp_async_wait_all();
    __syncthreads(); /* K_j is in; every warp is done with V_{j-1} */
    load_tile<B, D, SD>(sV, V + (long long)j * B * ld, ld, tid);
    cp_async_commit();

    float s[8][4];
#pragma unroll
    for (int i = 0; i < 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
    mma_abt<D, SD, 8>(s, sQ, warp * 16, sK, 0, lane);

    if (j == qb) { /* diagonal block: key column > query row is masked */
#pragma unroll
      for (int nt = 0; nt < 8; nt++)
#pragma unroll
        for (int x = 0; x < 4; x++) {
          int row = warp * 16 + g + (x >= 2 ? 8 : 0), col = nt * 8 + 2 * t + (x & 1);
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

    cp_async_wait_all();
    __syncthreads(); /* V_j is in; every warp is done with K_j */
    if (j < qb) {
      load_tile<B, D, SD>(sK, K + (long long)(j + 1) * B * ld, ld, tid);
      cp_async_commit();
    }
    mma_pb<D, SD, 4>(o, s, sV, 0, lane);
  }

  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = 1.f / l[r];
  }
  const long long row0 = (long long)qb * B + warp * 16;
  store_rows<D>(out + ((long long)b * S + row0) * hl + (long long)h * D, hl, o, inv[0], inv[1], lane);
  if (t == 0) {
    lse[(long long)bh * S + row0 + g] = m[0] + log2f(l[0]);
    lse[(long long)bh * S + row0 + g + 8] = m[1] + log2f(l[1]);
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

/* dK, dV of one block of 16 NW keys (NW warps, 16 keys each), looping over
 * 32-query steps from the diagonal down. ATOMIC_DQ: also dQ's share of this
 * key block, dS (through shared memory) . K, added in FP32 to dq_acc
 * [bh][seq][D]. NW = 8 shares each step's Q and dO tiles among more warps
 * and adds dQ over more keys per atomic (opt-in, see bwd_warps). */
template <int D, bool ATOMIC_DQ, int NW>
__global__ void __launch_bounds__(32 * NW) flash_bwd_dkdv_kernel(const bf16 *qkv, const bf16 *dout, const float *lse,
                                                                 const float *dsum, bf16 *dqkv, float *dq_acc, int S,
                                                                 int H, long long ld, long long hl, float scale_log2,
                                                                 float scale) {
  constexpr int BK = 16 * NW, BQ = 32, SD = D + 8, SDS = BQ + 8, NT = 32 * NW;
  static_assert(2 * D / NW >= 16, "a warp's dQ columns must hold one ldmatrix.x4 pair");
  extern __shared__ __align__(16) unsigned char flash_smem[];
  bf16 *sK = reinterpret_cast<bf16 *>(flash_smem), *sV = sK + BK * SD;
  bf16 *sQ = sV + BK * SD;      /* [2][BQ][SD] */
  bf16 *sdO = sQ + 2 * BQ * SD; /* [2][BQ][SD] */
  float *sL = reinterpret_cast<float *>(sdO + 2 * BQ * SD); /* [2][BQ] lse, then [2][BQ] dsum */
  float *sDs = sL + 2 * BQ;
  bf16 *sdS = reinterpret_cast<bf16 *>(sDs + 2 * BQ); /* [BK][SDS]: dS^T of the step (ATOMIC_DQ) */
  const int kb = blockIdx.x; /* block 0 sees every query: the longest first */
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bf16 *Q = qkv + (long long)b * S * ld + (long long)h * D, *K = Q + hl, *V = Q + 2 * hl;
  const bf16 *dO = dout + (long long)b * S * hl + (long long)h * D;
  const float *L = lse + (long long)bh * S, *Ds = dsum + (long long)bh * S;

  const int q_first = kb * BK, steps = (S - q_first) / BQ;
  load_tile<BK, D, SD, NT>(sK, K + (long long)q_first * ld, ld, tid);
  load_tile<BK, D, SD, NT>(sV, V + (long long)q_first * ld, ld, tid);
  auto load_step = [&](int st, int buf) {
    int q0 = q_first + st * BQ;
    load_tile<BQ, D, SD, NT>(sQ + buf * BQ * SD, Q + (long long)q0 * ld, ld, tid);
    load_tile<BQ, D, SD, NT>(sdO + buf * BQ * SD, dO + (long long)q0 * hl, hl, tid);
    if (tid < BQ / 4) cp_async16(sL + buf * BQ + tid * 4, L + q0 + tid * 4);
    else if (tid < BQ / 2) cp_async16(sDs + buf * BQ + (tid - BQ / 4) * 4, Ds + q0 + (tid - BQ / 4) * 4);
  };
  load_step(0, 0);
  cp_async_commit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++) {
    dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = 0.f;
    dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.f;
  }
  const int key_lo = q_first + warp * 16; /* this warp's first key */

  for (int st = 0; st < steps; st++) {
    const int buf = st & 1, q0 = q_first + st * BQ;
    cp_async_wait_all();
    __syncthreads(); /* step st is in; every warp is done with buffer buf ^ 1 */
    if (st + 1 < steps) {
      load_step(st + 1, buf ^ 1);
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

  bf16 *dK = dqkv + ((long long)b * S + key_lo) * ld + hl + (long long)h * D;
  store_rows<D>(dK, ld, dk, scale, scale, lane);
  store_rows<D>(dK + hl, ld, dv, 1.f, 1.f, lane);
}

/* dQ of one 64-query block (warp: 16 queries), looping over the 64-key blocks up to the diagonal. */
template <int D>
__global__ void __launch_bounds__(128) flash_bwd_dq_kernel(const bf16 *qkv, const bf16 *dout, const float *lse,
                                                           const float *dsum, bf16 *dqkv, int S, int H, long long ld,
                                                           long long hl, float scale_log2, float scale) {
  constexpr int B = 64, SD = D + 8;
  extern __shared__ __align__(16) unsigned char flash_smem[];
  bf16 *sQ = reinterpret_cast<bf16 *>(flash_smem), *sdO = sQ + B * SD;
  bf16 *sK = sdO + B * SD; /* [2][B][SD] */
  bf16 *sV = sK + 2 * B * SD;
  const int qb = (int)gridDim.x - 1 - (int)blockIdx.x;
  const int bh = blockIdx.y, b = bh / H, h = bh % H;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bf16 *Q = qkv + (long long)b * S * ld + (long long)h * D, *K = Q + hl, *V = Q + 2 * hl;
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

/* ---- host side ---- */

int exec_flash_supported(long long seq, long long head_dim) {
  return seq > 0 && seq % 64 == 0 && seq <= (1LL << 30) && (head_dim == 32 || head_dim == 64 || head_dim == 128);
}

int exec_flash_selected(long long seq, long long head_dim) {
  /* Opt-in (EXEC_ATTN=flash) until the kernels have passed on the GPUs. */
  const char *v = getenv("EXEC_ATTN");
  if (!v || strcmp(v, "flash") != 0) return 0;
  return exec_flash_supported(seq, head_dim) && seq >= 2 * head_dim + 4;
}

static size_t fwd_smem(int d) { return (size_t)3 * 64 * (d + 8) * sizeof(bf16); }
static size_t dkdv_smem(int d, bool atomic_dq, int nw) {
  const int bk = 16 * nw;
  return (size_t)(2 * bk + 4 * 32) * (d + 8) * sizeof(bf16) + 4 * 32 * sizeof(float) +
         (atomic_dq ? (size_t)bk * (32 + 8) * sizeof(bf16) : 0);
}

/* 4 warps (64-key blocks); EXEC_FLASH_BWD_WARPS=8: 8 warps (128-key blocks)
 * where the shape allows — measured slower (597 vs 576 us at batch 2 x 16
 * heads x 2048 x 128: one CTA of 255 registers a thread per SM). */
static int bwd_warps(int d, int S) {
  const char *v = getenv("EXEC_FLASH_BWD_WARPS");
  return v && strcmp(v, "8") == 0 && d >= 64 && S % 128 == 0 ? 8 : 4;
}
static size_t dq_smem(int d) { return (size_t)6 * 64 * (d + 8) * sizeof(bf16); }

template <int D>
static int flash_fwd_t(const bf16 *qkv, bf16 *out, float *lse, int batch, int S, int H, cudaStream_t st, ts_err *e) {
  static int ready;
  if (!ready) {
    cudaError_t ce = cudaFuncSetAttribute(flash_fwd_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)fwd_smem(D));
    if (ce != cudaSuccess) return ts_fail_sys(e, "flash attention forward: shared memory: %s", cudaGetErrorString(ce));
    ready = 1;
  }
  const long long hl = (long long)H * D;
  dim3 grid(S / 64, batch * H);
  flash_fwd_kernel<D><<<grid, 128, fwd_smem(D), st>>>(qkv, out, lse, S, H, 3 * hl, hl,
                                                       (float)(1.4426950408889634 / sqrt((double)D)));
  FLASH_LAUNCH("flash attention forward");
  return 0;
}

/* EXEC_FLASH_BWD=split: the two-pass backward (dK/dV pass, then a dQ pass
 * recomputing S and dP); default: one pass with dQ added atomically in FP32. */
static bool bwd_split(void) {
  const char *v = getenv("EXEC_FLASH_BWD");
  return v && strcmp(v, "split") == 0;
}

template <int D>
static int flash_bwd_t(const bf16 *qkv, const bf16 *out, const bf16 *dout, const float *lse, float *scratch,
                       bf16 *dqkv, int batch, int S, int H, cudaStream_t st, ts_err *e) {
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
    if (ce != cudaSuccess)
      return ts_fail_sys(e, "flash attention backward: shared memory: %s", cudaGetErrorString(ce));
    ready = 1;
  }
  const long long hl = (long long)H * D, rows = (long long)batch * H * S;
  const float scale = (float)(1.0 / sqrt((double)D)), scale_log2 = (float)(1.4426950408889634 / sqrt((double)D));
  float *dsum = scratch, *dq_acc = scratch + ((rows + 3) / 4) * 4; /* 16-byte aligned */
  flash_dsum_kernel<D><<<(unsigned)((rows + 3) / 4), 128, 0, st>>>(out, dout, dsum, rows, S, H, hl);
  FLASH_LAUNCH("flash attention backward (row sums)");
  dim3 grid(S / 64, batch * H);
  if (bwd_split()) {
    flash_bwd_dkdv_kernel<D, false, 4><<<grid, 128, dkdv_smem(D, false, 4), st>>>(qkv, dout, lse, dsum, dqkv, NULL,
                                                                                  S, H, 3 * hl, hl, scale_log2, scale);
    FLASH_LAUNCH("flash attention backward (dK, dV)");
    flash_bwd_dq_kernel<D><<<grid, 128, dq_smem(D), st>>>(qkv, dout, lse, dsum, dqkv, S, H, 3 * hl, hl, scale_log2,
                                                           scale);
    FLASH_LAUNCH("flash attention backward (dQ)");
    return 0;
  }
  cudaError_t ce = cudaMemsetAsync(dq_acc, 0, (size_t)rows * D * sizeof(float), st);
  if (ce != cudaSuccess) return ts_fail_sys(e, "flash attention backward: clearing dQ: %s", cudaGetErrorString(ce));
  if (D >= 64 && bwd_warps(D, S) == 8) {
    constexpr int NW = D >= 64 ? 8 : 4; /* this branch runs for D >= 64 only */
    dim3 grid8(S / (16 * NW), batch * H);
    flash_bwd_dkdv_kernel<D, true, NW><<<grid8, 32 * NW, dkdv_smem(D, true, NW), st>>>(
        qkv, dout, lse, dsum, dqkv, dq_acc, S, H, 3 * hl, hl, scale_log2, scale);
  } else {
    flash_bwd_dkdv_kernel<D, true, 4><<<grid, 128, dkdv_smem(D, true, 4), st>>>(qkv, dout, lse, dsum, dqkv, dq_acc,
                                                                              S, H, 3 * hl, hl, scale_log2, scale);
  }
  FLASH_LAUNCH("flash attention backward (dK, dV, dQ)");
  const long long pairs = rows * D / 2;
  flash_dq_store_kernel<D><<<(unsigned)((pairs + 255) / 256 < 65535 * 8 ? (pairs + 255) / 256 : 65535 * 8), 256, 0,
                             st>>>(dq_acc, dqkv, pairs, S, H, 3 * hl, scale);
  FLASH_LAUNCH("flash attention backward (dQ store)");
  return 0;
}

static int check_shape(const char *what, int batch, long long seq, long long heads, long long head_dim, ts_err *e) {
  if (batch < 1 || heads < 1 || batch * heads > 65535)
    return ts_fail(e, NULL, what, "batch %d x heads %lld must be in 1..65535", batch, heads);
  if (!exec_flash_supported(seq, head_dim))
    return ts_fail(e, NULL, what, "seq %lld (a multiple of 64) / head_dim %lld (32, 64 or 128) not supported", seq,
                   head_dim);
  if (seq > 0x7fffffff) return ts_fail(e, NULL, what, "seq %lld too long", seq);
  return 0;
}

extern "C" int exec_flash_fwd(const void *qkv, void *out, float *lse, int batch, long long seq, long long heads,
                              long long head_dim, void *stream, ts_err *e) {
  if (check_shape("flash attention forward", batch, seq, heads, head_dim, e)) return -1;
  const bf16 *q = (const bf16 *)qkv;
  bf16 *o = (bf16 *)out;
  cudaStream_t st = (cudaStream_t)stream;
  switch (head_dim) {
  case 32: return flash_fwd_t<32>(q, o, lse, batch, (int)seq, (int)heads, st, e);
  case 64: return flash_fwd_t<64>(q, o, lse, batch, (int)seq, (int)heads, st, e);
  default: return flash_fwd_t<128>(q, o, lse, batch, (int)seq, (int)heads, st, e);
  }
}

long long exec_flash_bwd_scratch_floats(int batch, long long seq, long long heads, long long head_dim) {
  long long rows = (long long)batch * heads * seq;
  return (rows + 3) / 4 * 4 + rows * head_dim;
}

extern "C" int exec_flash_bwd(const void *qkv, const void *out, const void *dout, const float *lse, float *scratch,
                              void *dqkv, int batch, long long seq, long long heads, long long head_dim, void *stream,
                              ts_err *e) {
  if (check_shape("flash attention backward", batch, seq, heads, head_dim, e)) return -1;
  const bf16 *q = (const bf16 *)qkv, *o = (const bf16 *)out, *d = (const bf16 *)dout;
  bf16 *dq = (bf16 *)dqkv;
  cudaStream_t st = (cudaStream_t)stream;
  switch (head_dim) {
  case 32: return flash_bwd_t<32>(q, o, d, lse, scratch, dq, batch, (int)seq, (int)heads, st, e);
  case 64: return flash_bwd_t<64>(q, o, d, lse, scratch, dq, batch, (int)seq, (int)heads, st, e);
  default: return flash_bwd_t<128>(q, o, d, lse, scratch, dq, batch, (int)seq, (int)heads, st, e);
  }
}

/* infer_gemv.cu — the decode step's weight-streaming skinny GEMM (infer_gemv.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "gpu_check.h"
#include "infer_gemv.h"
#include "ops_device.cuh"

typedef __nv_bfloat16 bf16;

#define GEMV_WARPS 4
#define GEMV_THREADS (GEMV_WARPS * 32)
#define GEMV_MIN_BLOCKS 4 /* blocks an SM the register budget allows (__launch_bounds__) */

struct infer_gemv {
  float *part;  /* [splits x m x n] FP32 partials */
  int *cnt;     /* one counter per column range, 0 between calls */
  size_t part_bytes;
  int cnt_len;
  int sms, slots[2]; /* SMs; blocks resident at once per variant */
};

/* ---- the kernel ------------------------------------------------------------------------
 * Block (bx, s): columns [bx NW, +NW) (NW = 32 U), k chunks [s cps, (s + 1) cps) of CH = 16 KU
 * rows. Warp w takes chunks w, w + 4, ...; in a chunk, k-step kk (16 rows k0..k0+15):
 *  - lane (g = lane / 4, t = lane % 4) loads 16 bytes of rows k0 + g (h = 0) and k0 + 8 + g
 *    (h = 1) at columns c_u = bx NW + 32 u + 8 t, u < U: per row a warp reads 64 U contiguous
 *    bytes, 2 U KU loads of 16 bytes a lane in flight;
 *  - word j of a load holds columns c_u + 2j, +1 of its row; movmatrix.trans of word j of
 *    the 8 rows gives lane (g, t) rows 2t, 2t+1 of column c_u(g / 2) + 2j + (g & 1) — the
 *    B fragment (k x n8) of an mma whose n index g stands for that column; h = 0 gives
 *    b0 b1 (k 2t, 2t+1), h = 1 b2 b3 (k 2t + 8, 2t + 9);
 *  - A is x (m16 x k16, rows past m zero), 32-bit words from global memory (L1);
 *  - C's c0, c1 of (u, j) are then y[g][c_u(t) + 2j, +1] (and c2, c3 row g + 8): a lane
 *    ends with the outputs of the 8 columns it loaded.
 * The 4 warps' sums meet in shared memory; with one split the block writes y, else its
 * FP32 partial, and the last block of the column range to arrive sums the partials in
 * split order and writes y. */

__device__ __forceinline__ uint4 ld_stream(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ uint32_t movtrans(uint32_t x) {
  uint32_t y;
  asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

__device__ __forceinline__ void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t word(const uint4 &v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

template <int U, int KU, bool M16>
__global__ void __launch_bounds__(GEMV_THREADS, GEMV_MIN_BLOCKS)
    gemv_nn_kernel(const bf16 *__restrict__ x, const bf16 *__restrict__ w, bf16 *__restrict__ y,
                   float *__restrict__ part, int *__restrict__ cnt, int m, int n, int k, int cps, int splits) {
  constexpr int NW = 32 * U, CH = 16 * KU;
  __shared__ float red[GEMV_WARPS][M16 ? 16 : 8][NW];
  __shared__ int last;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int bx = blockIdx.x, s = blockIdx.y;
  const int nch = (k + CH - 1) / CH, c1 = min((s + 1) * cps, nch);
  const int col0 = bx * NW + 8 * t;
  float acc[U][4][4];
#pragma unroll
  for (int u = 0; u < U; u++)
#pragma unroll
    for (int j = 0; j < 4; j++) acc[u][j][0] = acc[u][j][1] = acc[u][j][2] = acc[u][j][3] = 0.f;
  const bf16 *xg = x + (size_t)g * k + 2 * t, *xg8 = x + (size_t)(g + 8) * k + 2 * t;
  const bool rg = g < m, rg8 = M16 && g + 8 < m;
  for (int c = s * cps + warp; c < c1; c += GEMV_WARPS) {
    uint4 wv[KU][2][U];
    uint32_t a[KU][4];
#pragma unroll
    for (int kk = 0; kk < KU; kk++) {
      const int k0 = c * CH + kk * 16;
      const bool kin = k0 < k;
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int u = 0; u < U; u++) {
          const int col = col0 + 32 * u;
          wv[kk][h][u] = kin && col < n ? ld_stream(w + (size_t)(k0 + 8 * h + g) * n + col) : make_uint4(0, 0, 0, 0);
        }
    }
#pragma unroll
    for (int kk = 0; kk < KU; kk++) {
      const int k0 = c * CH + kk * 16;
      const bool kin = k0 < k;
      a[kk][0] = kin && rg ? *(const uint32_t *)(xg + k0) : 0u;
      a[kk][2] = kin && rg ? *(const uint32_t *)(xg + k0 + 8) : 0u;
      a[kk][1] = kin && rg8 ? *(const uint32_t *)(xg8 + k0) : 0u;
      a[kk][3] = kin && rg8 ? *(const uint32_t *)(xg8 + k0 + 8) : 0u;
    }
#pragma unroll
    for (int kk = 0; kk < KU; kk++)
#pragma unroll
      for (int u = 0; u < U; u++)
#pragma unroll
        for (int j = 0; j < 4; j++)
          mma_bf16(acc[u][j], a[kk], movtrans(word(wv[kk][0][u], j)), movtrans(word(wv[kk][1][u], j)));
  }
#pragma unroll
  for (int u = 0; u < U; u++)
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const int cc = 32 * u + 8 * t + 2 * j;
      *(float2 *)&red[warp][g][cc] = make_float2(acc[u][j][0], acc[u][j][1]);
      if (M16) *(float2 *)&red[warp][(g + 8) & 15][cc] = make_float2(acc[u][j][2], acc[u][j][3]);
    }
  __syncthreads();
  const int nb = bx * NW;
  for (int i = threadIdx.x; i < m * NW; i += GEMV_THREADS) {
    const int r = i / NW, cc = i % NW, col = nb + cc;
    if (col >= n) continue;
    float v = 0.f;
#pragma unroll
    for (int q = 0; q < GEMV_WARPS; q++) v += red[q][r][cc];
    if (splits == 1) y[(size_t)r * n + col] = __float2bfloat16(v);
    else part[((size_t)s * m + r) * n + col] = v;
  }
  if (splits == 1) return;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&cnt[bx], 1) == splits - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int i = threadIdx.x; i < m * NW; i += GEMV_THREADS) {
    const int r = i / NW, col = nb + i % NW;
    if (col >= n) continue;
    float v = 0.f;
    for (int q = 0; q < splits; q++) v += __ldcg(part + ((size_t)q * m + r) * n + col);
    y[(size_t)r * n + col] = __float2bfloat16(v);
  }
  if (threadIdx.x == 0) cnt[bx] = 0;
}

/* ---- host ----------------------------------------------------------------------------- */

/* The shipped configuration (U, KU): 64 columns a block, 4 k-steps in flight a warp. */
#define GEMV_U 2
#define GEMV_KU 4

template <int U, int KU> static int variant_slots(int sms) {
  int a = 0, b = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a, gemv_nn_kernel<U, KU, false>, GEMV_THREADS, 0) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, gemv_nn_kernel<U, KU, true>, GEMV_THREADS, 0) != cudaSuccess)
    return -1;
  return sms * (a < b ? a : b);
}

extern "C" int infer_gemv_create(infer_gemv **out, size_t ws_bytes, ts_err *e) {
  *out = NULL;
  infer_gemv *g = (infer_gemv *)calloc(1, sizeof *g);
  if (!g) return ts_fail_sys(e, "infer_gemv: out of host memory");
  g->part_bytes = ws_bytes ? ws_bytes : (size_t)32 << 20;
  g->cnt_len = 1 << 16;
  g->sms = sm_count();
  g->slots[0] = variant_slots<GEMV_U, GEMV_KU>(g->sms);
  g->slots[1] = variant_slots<4, 2>(g->sms);
  if (g->slots[0] < 1 || g->slots[1] < 1) {
    free(g);
    return ts_fail_sys(e, "infer_gemv: cudaOccupancyMaxActiveBlocksPerMultiprocessor failed or no block fits");
  }
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&g->part, g->part_bytes), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&g->cnt, (size_t)g->cnt_len * sizeof(int)), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(g->cnt, 0, (size_t)g->cnt_len * sizeof(int)), fail);
  *out = g;
  return 0;
fail:
  infer_gemv_destroy(g);
  return -1;
}

extern "C" void infer_gemv_destroy(infer_gemv *g) {
  if (!g) return;
  cudaFree(g->cnt);
  cudaFree(g->part);
  free(g);
}

extern "C" int infer_gemv_fits(long long m, long long n, long long k) {
  return m >= 1 && m <= INFER_GEMV_MAX_M && n >= 8 && n % 8 == 0 && k >= 16 && k % 16 == 0 && n < (1LL << 30) &&
         k < (1LL << 30) && n * k < (1LL << 40);
}

/* Splits of k for a grid of nblk column ranges x nch chunks: the fewest whole waves of
 * `slots` blocks times the chunks a block takes (ties: fewer splits); at least one chunk a
 * warp; the partials must fit the workspace. */
static int choose_splits(const infer_gemv *g, int slots, long long m, long long n, long long nblk, long long nch) {
  long long best = 1, best_cost = -1;
  for (long long sp = 1; sp <= nch / GEMV_WARPS || sp == 1; sp++) {
    const long long cps = (nch + sp - 1) / sp, real = (nch + cps - 1) / cps;
    if (real != sp) continue; /* the same as a smaller count */
    if (sp > 1 && (size_t)(sp * m * n) * sizeof(float) > g->part_bytes) break;
    if (sp > 1 && nblk > g->cnt_len) break;
    const long long waves = (nblk * sp + slots - 1) / slots, cost = waves * cps;
    if (best_cost < 0 || cost < best_cost) best = sp, best_cost = cost;
  }
  return (int)best;
}

template <int U, int KU>
static int launch(infer_gemv *g, int slots, const void *x, const void *w, void *y, long long m, long long n,
                  long long k, cudaStream_t st, ts_err *e) {
  constexpr int NW = 32 * U, CH = 16 * KU;
  const long long nblk = (n + NW - 1) / NW, nch = (k + CH - 1) / CH;
  const int sp = choose_splits(g, slots, m, n, nblk, nch);
  const int cps = (int)((nch + sp - 1) / sp);
  dim3 grid((unsigned)nblk, (unsigned)sp);
  if (m > 8)
    gemv_nn_kernel<U, KU, true><<<grid, GEMV_THREADS, 0, st>>>((const bf16 *)x, (const bf16 *)w, (bf16 *)y, g->part,
                                                              g->cnt, (int)m, (int)n, (int)k, cps, sp);
  else
    gemv_nn_kernel<U, KU, false><<<grid, GEMV_THREADS, 0, st>>>((const bf16 *)x, (const bf16 *)w, (bf16 *)y, g->part,
                                                               g->cnt, (int)m, (int)n, (int)k, cps, sp);
  CUDA_CHECK(e, cudaGetLastError());
  return 0;
}

extern "C" int infer_gemv_splits(const infer_gemv *g, long long m, long long n, long long k) {
  const int NW = 32 * GEMV_U, CH = 16 * GEMV_KU;
  return choose_splits(g, g->slots[0], m, n, (n + NW - 1) / NW, (k + CH - 1) / CH);
}

static int check_args(const void *x, const void *w, void *y, long long m, long long n, long long k, ts_err *e) {
  if (!infer_gemv_fits(m, n, k))
    return ts_fail_sys(e, "infer_gemv: shape m %lld n %lld k %lld not run (want m 1..%d, n %% 8 == 0, k %% 16 == 0)",
                       m, n, k, INFER_GEMV_MAX_M);
  if (((uintptr_t)w & 15) || ((uintptr_t)x & 3) || ((uintptr_t)y & 1))
    return ts_fail_sys(e, "infer_gemv: W must be 16-byte aligned, x 4-byte aligned");
  return 0;
}

extern "C" int infer_gemv_nn(infer_gemv *g, const void *x, const void *w, void *y, long long m, long long n,
                             long long k, void *stream, ts_err *e) {
  if (check_args(x, w, y, m, n, k, e)) return -1;
  return launch<GEMV_U, GEMV_KU>(g, g->slots[0], x, w, y, m, n, k, (cudaStream_t)stream, e);
}

/* bench-decode's second configuration (128 columns a block, 2 k-steps in flight a warp). */
extern "C" int infer_gemv_nn_wide(infer_gemv *g, const void *x, const void *w, void *y, long long m, long long n,
                                  long long k, void *stream, ts_err *e) {
  if (check_args(x, w, y, m, n, k, e)) return -1;
  return launch<4, 2>(g, g->slots[1], x, w, y, m, n, k, (cudaStream_t)stream, e);
}

extern "C" int infer_gemm_uses_gemv(const infer_gemm_path *p, long long m, long long n, long long k) {
  return p->gemv && m <= p->gemv_max_m && infer_gemv_fits(m, n, k);
}

extern "C" int infer_gemm_nn(const infer_gemm_path *p, long long m, long long n, long long k, const void *A,
                             const void *B, void *C, void *stream, ts_err *e) {
  if (infer_gemm_uses_gemv(p, m, n, k) && !((uintptr_t)B & 15) && !((uintptr_t)A & 3))
    return infer_gemv_nn(p->gemv, A, B, C, m, n, k, stream, e);
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NN, m, n, k);
  return exec_gemm_run(p->lt, &s, 1.f, A, B, 0.f, C, stream, e);
}

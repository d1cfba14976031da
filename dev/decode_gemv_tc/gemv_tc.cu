/* gemv_tc.cu — the decode step's weight-streaming tensor-core skinny GEMM (gemv_tc.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include "gpu_check.h"
#include "gemv_tc.h"
#include "ops_device.cuh"

typedef __nv_bfloat16 bf16;

#define GEMV_WARPS 4
#define GEMV_THREADS (GEMV_WARPS * 32)
#define GEMV_MIN_BLOCKS 4 /* blocks an SM the register budget allows (__launch_bounds__) */

struct dev_gemv_tc {
  float *part;  /* [splits x m x n] FP32 partials */
  int *cnt;     /* one counter per column range, 0 between calls */
  size_t part_bytes;
  int cnt_len;
  int sms, slots; /* SMs; blocks resident at once */
};

/* ---- the kernels -----------------------------------------------------------------------
 * A block of 4 warps takes NW = 64 columns [bx NW, +NW) and k chunks [s cps, (s + 1) cps)
 * of CH = 64 rows; warp w takes chunks w, w + 4, ...; x is A of m16n8k16 mma (batch rows, rows
 * past m zero), W gives B; the 4 warps' sums meet in shared memory; with one split the block
 * writes y, else its FP32 partial, and the last block of the column range to arrive sums the
 * partials in split order and writes y.
 *
 * gemv_prmt_kernel: lane (g = lane / 4, t = lane % 4) loads 16 bytes (columns
 * c_g = bx NW + 8 g .. + 7) of the chunk's rows kb + 16 t + 4 kk + r, kk, r < 4: one load
 * instruction reads 4 rows x 128 contiguous bytes, 16 loads of 16 bytes a lane in flight.
 * The k order of a 16-row step kk is free if x follows it: k slots 2t, 2t+1, 2t+8, 2t+9 of the
 * mma stand for rows kb + 16 t + 4 kk + 0, 1, 2, 3. Then B's b0 (slots 2t, 2t+1) of column
 * c_g + j is two halves of the lane's own words (rows r = 0, 1), b1 rows 2, 3: one byte
 * permute each, no exchange between lanes; n index g of mma j stands for column c_g + j, so
 * C's c0, c1 of mma j are y[g][bx NW + 16 t + j] and [.. + 8 + j] (c2, c3 row g + 8): a lane
 * ends with 16 contiguous columns. x: lane (g, t) needs x[g][kb + 16 t .. + 15] for the
 * whole chunk, two 16-byte loads (and two of row g + 8 for m > 8).
 *
 * The weights do not depend on the previous kernel: the first chunk's loads are issued
 * before griddepcontrol.wait, which (launched with programmatic stream serialization,
 * dev_gemv_tc_run's pdl) lets them overlap the previous kernel's end; x is read and
 * anything written only after the wait (without that launch attribute the wait returns at once). */

#define GEMV_NW 64
#define GEMV_CH 64

__device__ __forceinline__ uint4 ld_stream(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void griddep_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __forceinline__ void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t word(const uint4 &v, int j) {
  return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

/* The block's end: the warps' sums red[warp][row][col] into y or the partials (see above). */
template <int ROWS>
__device__ __forceinline__ void finish(float (*red)[ROWS][GEMV_NW], bf16 *__restrict__ y, float *__restrict__ part,
                                       int *__restrict__ cnt, int m, int n, int splits) {
  __shared__ int last;
  __syncthreads();
  const int bx = blockIdx.x, s = blockIdx.y, nb = bx * GEMV_NW;
  for (int i = threadIdx.x; i < m * GEMV_NW; i += GEMV_THREADS) {
    const int r = i / GEMV_NW, cc = i % GEMV_NW, col = nb + cc;
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
  for (int i = threadIdx.x; i < m * GEMV_NW; i += GEMV_THREADS) {
    const int r = i / GEMV_NW, col = nb + i % GEMV_NW;
    if (col >= n) continue;
    float v = 0.f;
    for (int q = 0; q < splits; q++) v += __ldcg(part + ((size_t)q * m + r) * n + col);
    y[(size_t)r * n + col] = __float2bfloat16(v);
  }
  if (threadIdx.x == 0) cnt[bx] = 0;
}

template <bool M16>
__global__ void __launch_bounds__(GEMV_THREADS, GEMV_MIN_BLOCKS)
    gemv_prmt_kernel(const bf16 *__restrict__ x, const bf16 *__restrict__ w, bf16 *__restrict__ y,
                     float *__restrict__ part, int *__restrict__ cnt, int m, int n, int k, int cps, int splits) {
  __shared__ float red[GEMV_WARPS][M16 ? 16 : 8][GEMV_NW];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int s = blockIdx.y;
  const int nch = (k + GEMV_CH - 1) / GEMV_CH, c1 = min((s + 1) * cps, nch);
  const int col = blockIdx.x * GEMV_NW + 8 * g;
  const bool cin = col < n, rg = g < m, rg8 = M16 && g + 8 < m;
  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  bool first = true;
  for (int c = s * cps + warp; c < c1; c += GEMV_WARPS) {
    const int kb = c * GEMV_CH + 16 * t; /* this lane's 16 rows of the chunk */
    const bool kin = kb < k;             /* k % 16 == 0: all 16 or none */
    uint4 wv[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
      for (int r = 0; r < 4; r++)
        wv[kk][r] = kin && cin ? ld_stream(w + (size_t)(kb + 4 * kk + r) * n + col) : make_uint4(0, 0, 0, 0);
    if (first) griddep_wait(), first = false;
    uint4 xa[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)}, xb[2] = {xa[0], xa[1]};
    if (kin && rg) {
      const uint4 *p = (const uint4 *)(x + (size_t)g * k + kb);
      xa[0] = p[0], xa[1] = p[1];
    }
    if (kin && rg8) {
      const uint4 *p = (const uint4 *)(x + (size_t)(g + 8) * k + kb);
      xb[0] = p[0], xb[1] = p[1];
    }
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      /* rows kb + 4 kk + 0, 1 are k slots 2t, 2t+1; + 2, 3 slots 2t+8, 2t+9 */
      const uint32_t a[4] = {word(xa[kk >> 1], 2 * (kk & 1)), word(xb[kk >> 1], 2 * (kk & 1)),
                             word(xa[kk >> 1], 2 * (kk & 1) + 1), word(xb[kk >> 1], 2 * (kk & 1) + 1)};
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const uint32_t sel = j & 1 ? 0x7632u : 0x5410u;
        const uint32_t b0 = __byte_perm(word(wv[kk][0], j >> 1), word(wv[kk][1], j >> 1), sel);
        const uint32_t b1 = __byte_perm(word(wv[kk][2], j >> 1), word(wv[kk][3], j >> 1), sel);
        mma_bf16(acc[j], a, b0, b1);
      }
    }
  }
  if (first) griddep_wait(); /* nothing is written before the previous kernel is done */
#pragma unroll
  for (int j = 0; j < 8; j++) {
    red[warp][g][16 * t + j] = acc[j][0];
    red[warp][g][16 * t + 8 + j] = acc[j][1];
    if (M16) {
      red[warp][(g + 8) & 15][16 * t + j] = acc[j][2];
      red[warp][(g + 8) & 15][16 * t + 8 + j] = acc[j][3];
    }
  }
  finish<M16 ? 16 : 8>(red, y, part, cnt, m, n, splits);
}

/* ---- host ----------------------------------------------------------------------------- */

typedef void (*gemv_kernel_t)(const bf16 *, const bf16 *, bf16 *, float *, int *, int, int, int, int, int);
static gemv_kernel_t kernel_of(bool m16) { return m16 ? gemv_prmt_kernel<true> : gemv_prmt_kernel<false>; }

/* Blocks resident at once on the GPU (the smaller of the two instantiations'). */
static int gemv_slots(int sms) {
  int a = 0, b = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a, kernel_of(false), GEMV_THREADS, 0) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, kernel_of(true), GEMV_THREADS, 0) != cudaSuccess)
    return -1;
  return sms * (a < b ? a : b);
}

extern "C" int dev_gemv_tc_create(dev_gemv_tc **out, size_t ws_bytes, ts_err *e) {
  *out = NULL;
  dev_gemv_tc *g = (dev_gemv_tc *)calloc(1, sizeof *g);
  if (!g) return ts_fail_sys(e, "dev_gemv_tc: out of host memory");
  g->part_bytes = ws_bytes ? ws_bytes : (size_t)32 << 20;
  g->cnt_len = 1 << 16;
  g->sms = sm_count();
  g->slots = gemv_slots(g->sms);
  if (g->slots < 1) {
    free(g);
    return ts_fail_sys(e, "dev_gemv_tc: cudaOccupancyMaxActiveBlocksPerMultiprocessor failed or no block fits");
  }
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&g->part, g->part_bytes), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&g->cnt, (size_t)g->cnt_len * sizeof(int)), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(g->cnt, 0, (size_t)g->cnt_len * sizeof(int)), fail);
  *out = g;
  return 0;
fail:
  dev_gemv_tc_destroy(g);
  return -1;
}

extern "C" void dev_gemv_tc_destroy(dev_gemv_tc *g) {
  if (!g) return;
  cudaFree(g->cnt);
  cudaFree(g->part);
  free(g);
}

extern "C" int dev_gemv_tc_fits(long long m, long long n, long long k) {
  return m >= 1 && m <= DEV_GEMV_TC_MAX_M && n >= 8 && n % 8 == 0 && k >= 16 && k % 16 == 0 && n < (1LL << 30) &&
         k < (1LL << 30) && n * k < (1LL << 40);
}

/* Splits of k for nblk column ranges x nch chunks, each split's chunks a multiple of the 4
 * warps: the fewest (waves of `slots` blocks) x (chunks a warp + 1, the block's start and end),
 * ties to fewer splits; the partials must fit the workspace. */
static int cps_of(int sp, long long nch);
static int choose_splits(const dev_gemv_tc *g, int slots, long long m, long long n, long long nblk, long long nch) {
  int best = 1;
  long long best_cost = -1;
  if (nblk > g->cnt_len) return 1;
  for (int sp = 1; sp <= nch; sp++) {
    const long long cps = cps_of(sp, nch), real = (nch + cps - 1) / cps;
    if (real != sp) continue; /* the same as a smaller count */
    if (sp > 1 && (size_t)(sp * m * n) * sizeof(float) > g->part_bytes) break;
    const long long waves = (nblk * sp + slots - 1) / slots, cost = waves * (cps / GEMV_WARPS + 1);
    if (best_cost < 0 || cost < best_cost) best = sp, best_cost = cost;
  }
  return best;
}

static int cps_of(int sp, long long nch) {
  long long cps = (nch + sp - 1) / sp;
  return (int)((cps + GEMV_WARPS - 1) / GEMV_WARPS * GEMV_WARPS);
}

extern "C" int dev_gemv_tc_splits(const dev_gemv_tc *g, long long m, long long n, long long k) {
  const long long nblk = (n + GEMV_NW - 1) / GEMV_NW, nch = (k + GEMV_CH - 1) / GEMV_CH;
  const int sp = choose_splits(g, g->slots, m, n, nblk, nch);
  return (int)((nch + cps_of(sp, nch) - 1) / cps_of(sp, nch));
}

extern "C" int dev_gemv_tc_run(dev_gemv_tc *g, int pdl, const void *x, const void *w, void *y, long long m,
                              long long n, long long k, void *stream, ts_err *e) {
  if (!dev_gemv_tc_fits(m, n, k))
    return ts_fail_sys(e, "dev_gemv_tc: shape m %lld n %lld k %lld not run (want m 1..%d, n %% 8 == 0, k %% 16 == 0)",
                       m, n, k, DEV_GEMV_TC_MAX_M);
  if (((uintptr_t)w & 15) || ((uintptr_t)x & 15) || ((uintptr_t)y & 1))
    return ts_fail_sys(e, "dev_gemv_tc: W and x must be 16-byte aligned");
  const long long nblk = (n + GEMV_NW - 1) / GEMV_NW, nch = (k + GEMV_CH - 1) / GEMV_CH;
  const int sp0 = choose_splits(g, g->slots, m, n, nblk, nch), cps = cps_of(sp0, nch);
  const int sp = (int)((nch + cps - 1) / cps);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)nblk, (unsigned)sp);
  cfg.blockDim = dim3(GEMV_THREADS);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = (cudaStream_t)stream;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = at;
  cfg.numAttrs = pdl ? 1 : 0;
  CUDA_CHECK(e, cudaLaunchKernelEx(&cfg, kernel_of(m > 8), (const bf16 *)x, (const bf16 *)w, (bf16 *)y,
                                   g->part, g->cnt, (int)m, (int)n, (int)k, cps, sp));
  return 0;
}

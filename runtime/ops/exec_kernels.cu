/* exec_kernels.cu — see exec_kernels.h. Simple row-per-block kernels; the hot
 * loops of an iteration are the GEMMs, these are a few percent of it. */
/* ts_error.h is a C header: its functions have C linkage. */
extern "C" {
#include "ts_error.h"
}
#include "exec_kernels.h"
#include "ops_variants.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "gpu_check.h"

typedef __nv_bfloat16 bf16;

#define CHECK_LAUNCH(what)                                                                                   \
  GPU_CHECK(cudaError_t, cudaSuccess, cudaGetLastError(),                                                    \
            return ts_fail_sys(e, "%s:%d: %s launch: %s", __FILE__, __LINE__, what, cudaGetErrorString(gpu_s_)))

static unsigned blocks_for(long long n, int threads) {
  long long b = (n + threads - 1) / threads;
  return (unsigned)(b > 65535LL * 32 ? 65535LL * 32 : (b < 1 ? 1 : b));
}

static __device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
static __device__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
/* Block-wide reductions for blockDim.x a multiple of 32, at most 1024. */
static __device__ float block_sum(float v, float *red) {
  v = warp_sum(v);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < (int)(blockDim.x / 32) ? red[lane] : 0.f;
  return warp_sum(t);
}
static __device__ float block_max(float v, float *red) {
  v = warp_max(v);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < (int)(blockDim.x / 32) ? red[lane] : -INFINITY;
  return warp_max(t);
}

/* ---- embedding ---- */

__global__ void embed_fwd_kernel(const int32_t *tokens, const bf16 *wte, long long vocab_start, long long vocab_local,
                                 const bf16 *wpe, int add_position, bf16 *out, int seq, int hidden) {
  long long t = blockIdx.x;
  long long tok = tokens[t] - vocab_start;
  int local = tok >= 0 && tok < vocab_local;
  const bf16 *w = wte + (local ? tok : 0) * hidden, *p = wpe + (t % seq) * hidden;
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    float v = (local ? __bfloat162float(w[j]) : 0.f) + (add_position ? __bfloat162float(p[j]) : 0.f);
    out[t * hidden + j] = __float2bfloat16(v);
  }
}

extern "C" int exec_embed_fwd(const int32_t *tokens, const void *wte, long long vocab_start, long long vocab_local,
                              const void *wpe, int add_position, void *out, long long tokens_n, int seq, int hidden,
                              void *stream, ts_err *e) {
  embed_fwd_kernel<<<(unsigned)tokens_n, 256, 0, (cudaStream_t)stream>>>(
      tokens, (const bf16 *)wte, vocab_start, vocab_local, (const bf16 *)wpe, add_position, (bf16 *)out, seq, hidden);
  CHECK_LAUNCH("embed_fwd");
  return 0;
}

__global__ void embed_bwd_kernel(const int32_t *tokens, const bf16 *dx, float *dwte, long long vocab_start,
                                 long long vocab_local, float *dwpe, int seq, int hidden) {
  long long t = blockIdx.x;
  long long tok = tokens[t] - vocab_start;
  int local = tok >= 0 && tok < vocab_local;
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    float d = __bfloat162float(dx[t * hidden + j]);
    if (local) atomicAdd(&dwte[tok * hidden + j], d);
    if (dwpe) atomicAdd(&dwpe[(t % seq) * hidden + j], d); /* NULL: no position embedding (RoPE) */
  }
}

/* --variant reduce=ordered: one block per local vocabulary row scans the
 * tokens in position order (EMBED_SCAN at a time), lists the positions that
 * hold its word in order, and adds their dx rows in that order; each thread
 * owns columns j = threadIdx.x + k blockDim.x, so dwte[row] has one writer. */
#define EMBED_SCAN 256
#define EMBED_COLS_PER_THREAD 32 /* hidden <= 256 x 32 = 8192 */
__global__ void __launch_bounds__(EMBED_SCAN) embed_bwd_ordered_kernel(const int32_t *tokens, const bf16 *dx,
                                                                       float *dwte, long long vocab_start,
                                                                       long long tokens_n, int hidden) {
  __shared__ int hits[EMBED_SCAN];
  __shared__ int warp_n[EMBED_SCAN / 32];
  const long long word = vocab_start + blockIdx.x;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float acc[EMBED_COLS_PER_THREAD];
#pragma unroll
  for (int k = 0; k < EMBED_COLS_PER_THREAD; k++) acc[k] = 0.f;
  for (long long t0 = 0; t0 < tokens_n; t0 += EMBED_SCAN) {
    const long long t = t0 + threadIdx.x;
    const bool hit = t < tokens_n && tokens[t] == word;
    const unsigned ballot = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warp_n[warp] = __popc(ballot);
    __syncthreads();
    int before = 0, total = 0;
    for (int w = 0; w < EMBED_SCAN / 32; w++) {
      before += w < warp ? warp_n[w] : 0;
      total += warp_n[w];
    }
    if (hit) hits[before + __popc(ballot & ((1u << lane) - 1))] = (int)threadIdx.x;
    __syncthreads();
    for (int i = 0; i < total; i++) { /* in position order */
      const bf16 *row = dx + (t0 + hits[i]) * (long long)hidden;
#pragma unroll
      for (int k = 0; k < EMBED_COLS_PER_THREAD; k++) {
        const int j = threadIdx.x + k * EMBED_SCAN;
        if (j < hidden) acc[k] += __bfloat162float(row[j]);
      }
    }
    __syncthreads(); /* hits and warp_n are refilled */
  }
  float *out = dwte + (long long)blockIdx.x * hidden;
#pragma unroll
  for (int k = 0; k < EMBED_COLS_PER_THREAD; k++) {
    const int j = threadIdx.x + k * EMBED_SCAN;
    if (j < hidden) out[j] += acc[k];
  }
}
/* dwpe[p] += dx rows of position p of each sequence, in sequence order. */
__global__ void embed_pos_bwd_ordered_kernel(const bf16 *dx, float *dwpe, long long tokens_n, int seq, int hidden) {
  const long long p = blockIdx.x;
  for (int j = threadIdx.x; j < hidden; j += blockDim.x) {
    float s = 0.f;
    for (long long t = p; t < tokens_n; t += seq) s += __bfloat162float(dx[t * hidden + j]);
    dwpe[p * hidden + j] += s;
  }
}

extern "C" int exec_embed_bwd(const int32_t *tokens, const void *dx, float *dwte, long long vocab_start,
                              long long vocab_local, float *dwpe, long long tokens_n, int seq, int hidden,
                              void *stream, ts_err *e) {
  if (!ops_variant_is(OPS_V_REDUCE, "ordered")) {
    embed_bwd_kernel<<<(unsigned)tokens_n, 256, 0, (cudaStream_t)stream>>>(tokens, (const bf16 *)dx, dwte, vocab_start,
                                                                           vocab_local, dwpe, seq, hidden);
    CHECK_LAUNCH("embed_bwd");
    return 0;
  }
  if (hidden > EMBED_SCAN * EMBED_COLS_PER_THREAD || vocab_local > 0x7fffffffLL)
    return ts_fail_sys(e, "exec_embed_bwd: --variant reduce=ordered takes hidden <= %d (got %d)",
                       EMBED_SCAN * EMBED_COLS_PER_THREAD, hidden);
  if (vocab_local > 0) {
    embed_bwd_ordered_kernel<<<(unsigned)vocab_local, EMBED_SCAN, 0, (cudaStream_t)stream>>>(
        tokens, (const bf16 *)dx, dwte, vocab_start, tokens_n, hidden);
    CHECK_LAUNCH("embed_bwd (ordered)");
  }
  if (dwpe) {
    embed_pos_bwd_ordered_kernel<<<(unsigned)seq, 256, 0, (cudaStream_t)stream>>>((const bf16 *)dx, dwpe, tokens_n,
                                                                                  seq, hidden);
    CHECK_LAUNCH("embed_bwd positions (ordered)");
  }
  return 0;
}

/* ---- norm weight gradients: 32 columns x 8 row lanes per block, rows split across blockIdx.y ---- */

#define WGRAD_ROWS_PER_BLOCK 256

__global__ void norm_wgrad_kernel(const bf16 *dy, const bf16 *x, const float *mean, const float *rstd, float *dgamma,
                                  float *dbeta, long long rows, int cols) {
  __shared__ float sg[8][33], sb[8][33];
  int c = blockIdx.x * 32 + threadIdx.x;
  long long r0 = (long long)blockIdx.y * WGRAD_ROWS_PER_BLOCK;
  long long r1 = r0 + WGRAD_ROWS_PER_BLOCK < rows ? r0 + WGRAD_ROWS_PER_BLOCK : rows;
  float g = 0.f, b = 0.f;
  if (gridDim.y == 1) r1 = rows; /* one block row: every row */
  if (c < cols)
    for (long long r = r0 + threadIdx.y; r < r1; r += 8) {
      float d = __bfloat162float(dy[r * cols + c]);
      float xhat = (__bfloat162float(x[r * cols + c]) - (mean ? mean[r] : 0.f)) * rstd[r];
      g += d * xhat;
      b += d;
    }
  sg[threadIdx.y][threadIdx.x] = g;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    for (int i = 1; i < 8; i++) {
      g += sg[i][threadIdx.x];
      b += sb[i][threadIdx.x];
    }
    if (gridDim.y == 1) { /* the block owns its columns: a fixed order (--variant reduce=ordered) */
      dgamma[c] += g;
      if (dbeta) dbeta[c] += b;
    } else {
      atomicAdd(&dgamma[c], g);
      if (dbeta) atomicAdd(&dbeta[c], b);
    }
  }
}

/* The same with two adjacent columns per thread (bf16x2 loads: a warp reads
 * 128 contiguous bytes of a row instead of 64), for an even column count. */
__global__ void norm_wgrad2_kernel(const bf16 *dy, const bf16 *x, const float *mean, const float *rstd, float *dgamma,
                                   float *dbeta, long long rows, int cols) {
  __shared__ float sg[8][65], sb[8][65];
  int c = (blockIdx.x * 32 + threadIdx.x) * 2;
  long long r0 = (long long)blockIdx.y * WGRAD_ROWS_PER_BLOCK;
  long long r1 = r0 + WGRAD_ROWS_PER_BLOCK < rows ? r0 + WGRAD_ROWS_PER_BLOCK : rows;
  float g0 = 0.f, g1 = 0.f, b0 = 0.f, b1 = 0.f;
  if (c < cols)
    for (long long r = r0 + threadIdx.y; r < r1; r += 8) {
      float2 d = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(dy + r * cols + c));
      float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(x + r * cols + c));
      float mu = mean ? mean[r] : 0.f, rs = rstd[r];
      g0 += d.x * (v.x - mu) * rs;
      g1 += d.y * (v.y - mu) * rs;
      b0 += d.x;
      b1 += d.y;
    }
  sg[threadIdx.y][2 * threadIdx.x] = g0, sg[threadIdx.y][2 * threadIdx.x + 1] = g1;
  sb[threadIdx.y][2 * threadIdx.x] = b0, sb[threadIdx.y][2 * threadIdx.x + 1] = b1;
  __syncthreads();
  /* 64 columns, 256 threads: the first 64 sum one column each over the 8 row groups */
  int t = threadIdx.y * 32 + threadIdx.x, col = blockIdx.x * 64 + t;
  if (t < 64 && col < cols) {
    float g = 0.f, b = 0.f;
    for (int i = 0; i < 8; i++) {
      g += sg[i][t];
      b += sb[i][t];
    }
    atomicAdd(&dgamma[col], g);
    if (dbeta) atomicAdd(&dbeta[col], b);
  }
}

extern "C" int exec_norm_wgrad(const void *dy, const void *x, const float *mean, const float *rstd, float *dgamma,
                               float *dbeta, long long rows, int cols, void *stream, ts_err *e) {
  if (ops_variant_is(OPS_V_REDUCE, "ordered")) { /* each block all rows of its 32 columns: no atomics */
    norm_wgrad_kernel<<<dim3((unsigned)((cols + 31) / 32), 1), dim3(32, 8), 0, (cudaStream_t)stream>>>(
        (const bf16 *)dy, (const bf16 *)x, mean, rstd, dgamma, dbeta, rows, cols);
    CHECK_LAUNCH("norm_wgrad (ordered)");
    return 0;
  }
  if (cols % 2 == 0) {
    dim3 grid2((unsigned)((cols + 63) / 64), (unsigned)((rows + WGRAD_ROWS_PER_BLOCK - 1) / WGRAD_ROWS_PER_BLOCK));
    norm_wgrad2_kernel<<<grid2, dim3(32, 8), 0, (cudaStream_t)stream>>>((const bf16 *)dy, (const bf16 *)x, mean, rstd,
                                                                         dgamma, dbeta, rows, cols);
    CHECK_LAUNCH("norm_wgrad");
    return 0;
  }
  dim3 grid((unsigned)((cols + 31) / 32), (unsigned)((rows + WGRAD_ROWS_PER_BLOCK - 1) / WGRAD_ROWS_PER_BLOCK));
  norm_wgrad_kernel<<<grid, dim3(32, 8), 0, (cudaStream_t)stream>>>((const bf16 *)dy, (const bf16 *)x, mean, rstd,
                                                                     dgamma, dbeta, rows, cols);
  CHECK_LAUNCH("norm_wgrad");
  return 0;
}

/* ---- norm backward in one pass ----
 * dx += rstd (g dy - mean(g dy) - xhat mean(g dy xhat)) (RMS: without the
 * mean(g dy) term), dgamma += sum_r dy xhat, dbeta += sum_r dy: the three
 * kernels of the unfused path (weight gradients, input gradient into a
 * scratch, residual add) read dy and x twice and the scratch once more; here
 * each element of dy, x and dx is read once from HBM. A thread owns 8 adjacent
 * columns for the whole range of rows of its block (its weight-gradient
 * partials stay in registers, one atomic per column and block at the end);
 * NORM_ROWS rows are reduced together (two barriers per group).
 * The loads run NORM_STAGES - 1 groups ahead through cp.async into shared
 * memory, so HBM stays busy through each group's barriers and stores (the
 * first version loaded a group only when the previous one was written: 62.7 us
 * alone at 4096 x 4096 on an H200, 2.1 TB/s). A thread copies and later reads
 * only its own 16-byte chunks of a stage, so refilling a stage needs no
 * barrier. At most 512 threads (4096 columns), one block per SM at 4096
 * columns (192 KiB of stages). Measured alone (LayerNorm, 4096 x 4096,
 * 2026-11-30): stages x rows 2 x 4 51.7 us, 3 x 2 55.1, 4 x 2 56.9, 6 x 1
 * 63.4: fewer barriers a row matter more than a deeper ring. */
#ifndef NORM_ROWS
#define NORM_ROWS 4
#endif
#ifndef NORM_STAGES
#define NORM_STAGES 2
#endif
#define NORM_MAX_THREADS 512

static __device__ __forceinline__ void bf16x8_to_float(const uint4 &u, float f[8]) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
  for (int j = 0; j < 4; j++) {
    float2 v = __bfloat1622float2(h[j]);
    f[2 * j] = v.x, f[2 * j + 1] = v.y;
  }
}

/* 16 bytes global -> shared without passing through registers (cp.async.cg: L2 only). */
static __device__ __forceinline__ void copy16_async(uint4 *dst, const void *src) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
static __device__ __forceinline__ void async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> static __device__ __forceinline__ void async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

static size_t norm_bwd_smem(int cols) { return (size_t)NORM_STAGES * NORM_ROWS * 3 * (cols / 8) * sizeof(uint4); }

template <bool RMS>
__global__ void __launch_bounds__(NORM_MAX_THREADS, 1)
    norm_bwd_fused_kernel(const bf16 *dy, const bf16 *x, const bf16 *gamma, const float *mean, const float *rstd,
                          float *dgamma, float *dbeta, bf16 *dx, long long rows, int cols) {
  extern __shared__ uint4 stages[]; /* [NORM_STAGES][NORM_ROWS][x, dy, dx][cols / 8] */
  __shared__ float red[NORM_MAX_THREADS / 32][2 * NORM_ROWS], tot[2 * NORM_ROWS];
  const int q = threadIdx.x, chunks = cols / 8, c = q * 8;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const bool on = q < chunks;
  /* this block's rows: an even split (blocks differ by at most one row) */
  const long long r0 = rows * blockIdx.x / gridDim.x, r1 = rows * (blockIdx.x + 1) / gridDim.x;
  const int groups = (int)((r1 - r0 + NORM_ROWS - 1) / NORM_ROWS);
  float g[8], ag[8], ab[8];
#pragma unroll
  for (int j = 0; j < 8; j++) g[j] = ag[j] = ab[j] = 0.f;
  if (on) bf16x8_to_float(*reinterpret_cast<const uint4 *>(gamma + c), g);

  /* one commit group per row group (empty past the end, so the wait count stays fixed) */
  auto issue = [&](int grp) {
    if (on && grp < groups) {
      uint4 *st = stages + (size_t)(grp % NORM_STAGES) * NORM_ROWS * 3 * chunks + q;
#pragma unroll
      for (int i = 0; i < NORM_ROWS; i++) {
        const long long rr = r0 + (long long)grp * NORM_ROWS + i;
        if (rr < r1) {
          copy16_async(st + (3 * i + 0) * chunks, x + rr * cols + c);
          copy16_async(st + (3 * i + 1) * chunks, dy + rr * cols + c);
          copy16_async(st + (3 * i + 2) * chunks, dx + rr * cols + c);
        }
      }
    }
    async_commit();
  };
  /* the row statistics one group ahead, in registers */
  float mu_next[NORM_ROWS], rs_next[NORM_ROWS];
  auto stats = [&](int grp) {
#pragma unroll
    for (int i = 0; i < NORM_ROWS; i++) {
      const long long rr = r0 + (long long)grp * NORM_ROWS + i;
      mu_next[i] = (!RMS && rr < r1) ? mean[rr] : 0.f;
      rs_next[i] = rr < r1 ? rstd[rr] : 0.f;
    }
  };
#pragma unroll
  for (int p = 0; p < NORM_STAGES - 1; p++) issue(p);
  stats(0);
  for (int grp = 0; grp < groups; grp++) {
    float mu[NORM_ROWS], rs[NORM_ROWS];
#pragma unroll
    for (int i = 0; i < NORM_ROWS; i++) mu[i] = mu_next[i], rs[i] = rs_next[i];
    issue(grp + NORM_STAGES - 1); /* refills the stage this thread finished with last group */
    stats(grp + 1);
    async_wait<NORM_STAGES - 1>(); /* this group's chunks of this thread have landed */
    const uint4 *st = stages + (size_t)(grp % NORM_STAGES) * NORM_ROWS * 3 * chunks + q;
    const long long r = r0 + (long long)grp * NORM_ROWS;
    float s[2 * NORM_ROWS];
#pragma unroll
    for (int i = 0; i < NORM_ROWS; i++) {
      float xv[8], dv[8], s1 = 0.f, s2 = 0.f;
      const bool live = on && r + i < r1;
      const uint4 zero = make_uint4(0, 0, 0, 0);
      bf16x8_to_float(live ? st[(3 * i + 0) * chunks] : zero, xv);
      bf16x8_to_float(live ? st[(3 * i + 1) * chunks] : zero, dv);
#pragma unroll
      for (int j = 0; j < 8; j++) {
        const float xh = (xv[j] - mu[i]) * rs[i], gd = g[j] * dv[j];
        ag[j] += dv[j] * xh;
        ab[j] += dv[j];
        s1 += gd;
        s2 += gd * xh;
      }
      s[2 * i] = warp_sum(s1);
      s[2 * i + 1] = warp_sum(s2);
    }
    if (lane == 0)
#pragma unroll
      for (int k = 0; k < 2 * NORM_ROWS; k++) red[warp][k] = s[k];
    __syncthreads();
    if (threadIdx.x < 2 * NORM_ROWS) {
      float v = 0.f;
      for (int w = 0; w < nwarps; w++) v += red[w][threadIdx.x];
      tot[threadIdx.x] = v / cols;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < NORM_ROWS; i++) {
      const long long rr = r + i;
      if (!on || rr >= r1) continue;
      const float mean_gd = RMS ? 0.f : tot[2 * i], mean_gdx = tot[2 * i + 1];
      float xv[8], dv[8], rv[8];
      bf16x8_to_float(st[(3 * i + 0) * chunks], xv);
      bf16x8_to_float(st[(3 * i + 1) * chunks], dv);
      bf16x8_to_float(st[(3 * i + 2) * chunks], rv);
      uint4 u;
      __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int a = 2 * j, b = 2 * j + 1;
        const float xa = (xv[a] - mu[i]) * rs[i], xb = (xv[b] - mu[i]) * rs[i];
        h[j] = __floats2bfloat162_rn(rv[a] + rs[i] * (g[a] * dv[a] - mean_gd - xa * mean_gdx),
                                     rv[b] + rs[i] * (g[b] * dv[b] - mean_gd - xb * mean_gdx));
      }
      *reinterpret_cast<uint4 *>(dx + rr * cols + c) = u;
    }
  }
  async_wait<0>(); /* nothing may be left in flight into shared memory at exit */
  if (!on || r0 >= r1) return;
  /* 16-byte atomics (sm_90) when the accumulators are 16-byte aligned: a quarter of the L2 operations */
  const bool vec = ((uintptr_t)dgamma % 16 == 0) && (!dbeta || (uintptr_t)dbeta % 16 == 0);
  if (vec) {
    atomicAdd(reinterpret_cast<float4 *>(dgamma + c), make_float4(ag[0], ag[1], ag[2], ag[3]));
    atomicAdd(reinterpret_cast<float4 *>(dgamma + c + 4), make_float4(ag[4], ag[5], ag[6], ag[7]));
    if (dbeta) {
      atomicAdd(reinterpret_cast<float4 *>(dbeta + c), make_float4(ab[0], ab[1], ab[2], ab[3]));
      atomicAdd(reinterpret_cast<float4 *>(dbeta + c + 4), make_float4(ab[4], ab[5], ab[6], ab[7]));
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; j++) {
      atomicAdd(&dgamma[c + j], ag[j]);
      if (dbeta) atomicAdd(&dbeta[c + j], ab[j]);
    }
  }
}

extern "C" int exec_norm_bwd_fused_supported(int cols) {
  return cols > 0 && cols % 8 == 0 && cols <= 8 * NORM_MAX_THREADS;
}

/* Shared memory above 48 KiB must be asked for, per kernel and device: once, for the widest rows. */
#define NORM_MAX_DEVICES 64
template <bool RMS> static int norm_bwd_prepare(int dev, int *blocks_per_sm, int threads, size_t smem, ts_err *e) {
  static bool granted[NORM_MAX_DEVICES];
  cudaError_t ce = cudaSuccess;
  if (dev < 0 || dev >= NORM_MAX_DEVICES) return ts_fail_sys(e, "norm backward: device %d out of range", dev);
  if (!granted[dev]) {
    ce = cudaFuncSetAttribute(norm_bwd_fused_kernel<RMS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int)norm_bwd_smem(8 * NORM_MAX_THREADS));
    granted[dev] = ce == cudaSuccess;
  }
  if (ce == cudaSuccess)
    ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks_per_sm, norm_bwd_fused_kernel<RMS>, threads, smem);
  if (ce != cudaSuccess) return ts_fail_sys(e, "norm backward: kernel attributes: %s", cudaGetErrorString(ce));
  if (*blocks_per_sm < 1) return ts_fail_sys(e, "norm backward: %zu B of shared memory do not fit an SM", smem);
  return 0;
}

extern "C" int exec_norm_bwd_fused(const void *dy, const void *x, const void *gamma, const float *mean,
                                   const float *rstd, float *dgamma, float *dbeta, void *dx, long long rows, int cols,
                                   void *stream, ts_err *e) {
  if (!exec_norm_bwd_fused_supported(cols) || rows < 1 || rows > 0x7fffffffLL)
    return ts_fail(e, NULL, "norm backward", "rows %lld / cols %d (a multiple of 8, at most 4096) not supported",
                   rows, cols);
  int dev = 0, sms = 0;
  cudaError_t ce = cudaGetDevice(&dev);
  if (ce == cudaSuccess) ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (ce != cudaSuccess) return ts_fail_sys(e, "norm backward: device attributes: %s", cudaGetErrorString(ce));
  const int threads = ((cols / 8 + 31) / 32) * 32;
  const size_t smem = norm_bwd_smem(cols);
  int per_sm = 0;
  if (mean ? norm_bwd_prepare<false>(dev, &per_sm, threads, smem, e)
           : norm_bwd_prepare<true>(dev, &per_sm, threads, smem, e))
    return -1;
  /* every SM busy, each block at least a few groups long (the atomics at the end cost a block's worth of columns) */
  long long blocks = (long long)sms * per_sm;
  const long long most = (rows + 4 * NORM_ROWS - 1) / (4 * NORM_ROWS);
  if (blocks > most) blocks = most;
  if (blocks < 1) blocks = 1;
  cudaStream_t st = (cudaStream_t)stream;
  if (mean)
    norm_bwd_fused_kernel<false><<<(unsigned)blocks, threads, smem, st>>>(
        (const bf16 *)dy, (const bf16 *)x, (const bf16 *)gamma, mean, rstd, dgamma, dbeta, (bf16 *)dx, rows, cols);
  else
    norm_bwd_fused_kernel<true><<<(unsigned)blocks, threads, smem, st>>>(
        (const bf16 *)dy, (const bf16 *)x, (const bf16 *)gamma, NULL, rstd, dgamma, dbeta, (bf16 *)dx, rows, cols);
  CHECK_LAUNCH("norm_bwd_fused");
  return 0;
}

/* ---- vocabulary-parallel cross-entropy ---- */

#define CE_THREADS 512

__global__ void ce_rowmax_kernel(const bf16 *logits, float *rowmax, int vocab, int valid) {
  __shared__ float red[32];
  const bf16 *z = logits + (long long)blockIdx.x * vocab;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) m = fmaxf(m, __bfloat162float(z[j]));
  m = block_max(m, red);
  if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

__global__ void ce_sums_kernel(const bf16 *logits, const int32_t *labels, long long vocab_start, const float *rowmax,
                               float *sums, long long rows, int vocab, int valid) {
  __shared__ float red[32];
  long long r = blockIdx.x;
  const bf16 *z = logits + r * vocab;
  float m = rowmax[r], s = 0.f;
  for (int j = threadIdx.x; j < valid; j += blockDim.x) s += __expf(__bfloat162float(z[j]) - m);
  s = block_sum(s, red);
  if (threadIdx.x == 0) {
    long long lab = labels[r] - vocab_start;
    sums[r] = s;
    sums[rows + r] = lab >= 0 && lab < valid ? __bfloat162float(z[lab]) : 0.f;
  }
}

__global__ void ce_finish_kernel(bf16 *logits, const int32_t *labels, long long vocab_start, const float *rowmax,
                                 float *sums, float *loss_sum, float loss_scale, float grad_scale,
                                 long long rows, int vocab, int valid) {
  long long r = blockIdx.x;
  bf16 *z = logits + r * vocab;
  float m = rowmax[r], inv = 1.f / sums[r];
  long long lab = labels[r] - vocab_start;
  for (int j = threadIdx.x; j < vocab; j += blockDim.x) {
    float p = j < valid ? __expf(__bfloat162float(z[j]) - m) * inv : 0.f;
    z[j] = __float2bfloat16(grad_scale * (p - (j == lab ? 1.f : 0.f)));
  }
  if (threadIdx.x == 0) {
    const float term = loss_scale * (logf(sums[r]) + m - sums[rows + r]);
    if (loss_sum) atomicAdd(loss_sum, term);
    else sums[rows + r] = term; /* --variant reduce=ordered: ce_loss_sum_kernel adds them */
  }
}

/* loss_sum += the rows' terms in a fixed order (one block: strided sums per
 * thread, then the block's shuffle tree). */
#define CE_SUM_THREADS 1024
__global__ void __launch_bounds__(CE_SUM_THREADS) ce_loss_sum_kernel(const float *terms, long long rows,
                                                                     float *loss_sum) {
  __shared__ float red[32];
  float s = 0.f;
  for (long long r = threadIdx.x; r < rows; r += blockDim.x) s += terms[r];
  s = block_sum(s, red);
  if (threadIdx.x == 0) *loss_sum += s;
}
static int ce_loss_ordered(const float *sums, float *loss_sum, long long rows, cudaStream_t st, ts_err *e) {
  ce_loss_sum_kernel<<<1, CE_SUM_THREADS, 0, st>>>(sums + rows, rows, loss_sum);
  CHECK_LAUNCH("ce_loss_sum");
  return 0;
}

extern "C" int exec_ce_rowmax(const void *logits, float *rowmax, long long rows, int vocab_local, int vocab_valid,
                              void *stream, ts_err *e) {
  ce_rowmax_kernel<<<(unsigned)rows, CE_THREADS, 0, (cudaStream_t)stream>>>((const bf16 *)logits, rowmax, vocab_local,
                                                                            vocab_valid);
  CHECK_LAUNCH("ce_rowmax");
  return 0;
}
extern "C" int exec_ce_sums(const void *logits, const int32_t *labels, long long vocab_start, const float *rowmax,
                            float *sums, long long rows, int vocab_local, int vocab_valid, void *stream, ts_err *e) {
  ce_sums_kernel<<<(unsigned)rows, CE_THREADS, 0, (cudaStream_t)stream>>>((const bf16 *)logits, labels, vocab_start,
                                                                          rowmax, sums, rows, vocab_local, vocab_valid);
  CHECK_LAUNCH("ce_sums");
  return 0;
}
extern "C" int exec_ce_finish(void *logits, const int32_t *labels, long long vocab_start, const float *rowmax,
                              float *sums, float *loss_sum, float loss_scale, float grad_scale, long long rows,
                              int vocab_local, int vocab_valid, void *stream, ts_err *e) {
  const int ordered = ops_variant_is(OPS_V_REDUCE, "ordered");
  ce_finish_kernel<<<(unsigned)rows, CE_THREADS, 0, (cudaStream_t)stream>>>(
      (bf16 *)logits, labels, vocab_start, rowmax, sums, ordered ? NULL : loss_sum, loss_scale, grad_scale, rows,
      vocab_local, vocab_valid);
  CHECK_LAUNCH("ce_finish");
  return ordered ? ce_loss_ordered(sums, loss_sum, rows, (cudaStream_t)stream, e) : 0;
}

/* ---- cross-entropy in one pass over the logits (the default) ----
 * Each thread keeps a running (max, sum of exp relative to it) over 8-wide
 * chunks read as one 16-byte load; the block combines the pairs. The three
 * kernels above read the logits three times with 2-byte loads. */

struct ce_ms {
  float m, s;
};
static __device__ __forceinline__ ce_ms ce_combine(ce_ms a, ce_ms b) {
  float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.f}; /* both empty: no exp(-inf - -inf) */
  return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}
static __device__ __forceinline__ ce_ms warp_ms(ce_ms v) {
  for (int o = 16; o > 0; o >>= 1) {
    ce_ms u = {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = ce_combine(v, u);
  }
  return v;
}

__global__ void __launch_bounds__(CE_THREADS) ce_stats_kernel(const bf16 *logits, const int32_t *labels,
                                                              long long vocab_start, float *rowmax, float *sums,
                                                              long long rows, int vocab, int valid) {
  __shared__ float red_m[32], red_s[32];
  const long long r = blockIdx.x;
  const bf16 *z = logits + r * vocab;
  ce_ms acc = {-INFINITY, 0.f};
  const int chunks = valid / 8; /* whole 8-wide chunks of real columns; the row is 16-byte aligned */
  for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
    uint4 u = __ldcs((const uint4 *)(z + 8 * (long long)c)); /* read once: do not keep in L2 */
    float f[8];
    bf16x8_to_float(u, f);
    float cm = f[0];
#pragma unroll
    for (int k = 1; k < 8; k++) cm = fmaxf(cm, f[k]);
    if (cm > acc.m) acc.s *= __expf(acc.m - cm), acc.m = cm;
#pragma unroll
    for (int k = 0; k < 8; k++) acc.s += __expf(f[k] - acc.m);
  }
  for (int j = 8 * chunks + threadIdx.x; j < valid; j += blockDim.x) { /* the tail of the real columns */
    float v = __bfloat162float(z[j]);
    if (v > acc.m) acc.s *= __expf(acc.m - v), acc.m = v;
    acc.s += __expf(v - acc.m);
  }
  acc = warp_ms(acc);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) red_m[warp] = acc.m, red_s[warp] = acc.s;
  __syncthreads();
  if (warp == 0) {
    ce_ms t = lane < (int)(blockDim.x / 32) ? ce_ms{red_m[lane], red_s[lane]} : ce_ms{-INFINITY, 0.f};
    t = warp_ms(t);
    if (lane == 0) {
      long long lab = labels[r] - vocab_start;
      rowmax[r] = t.m;
      sums[r] = t.s;
      sums[rows + r] = lab >= 0 && lab < valid ? __bfloat162float(z[lab]) : 0.f;
      sums[2 * rows + r] = t.m; /* this rank's own max, for ce_rescale after the all-reduce of rowmax */
    }
  }
}

/* After rowmax became the maximum over the TP ranks: each rank's sum, taken
 * relative to its own maximum, now relative to the global one. */
__global__ void ce_rescale_kernel(const float *rowmax, float *sums, long long rows) {
  long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (r < rows) sums[r] = sums[2 * rows + r] == -INFINITY ? 0.f : sums[r] * __expf(sums[2 * rows + r] - rowmax[r]);
}

__global__ void __launch_bounds__(CE_THREADS) ce_finish8_kernel(bf16 *logits, const int32_t *labels,
                                                                long long vocab_start, const float *rowmax,
                                                                float *sums, float *loss_sum, float loss_scale,
                                                                float grad_scale, long long rows, int vocab,
                                                                int valid) {
  const long long r = blockIdx.x;
  bf16 *z = logits + r * vocab;
  const float m = rowmax[r], inv = 1.f / sums[r];
  const long long lab = labels[r] - vocab_start;
  for (int c = threadIdx.x; c < vocab / 8; c += blockDim.x) {
    uint4 u = __ldcs((const uint4 *)(z + 8 * (long long)c));
    float f[8];
    bf16x8_to_float(u, f);
    __align__(16) bf16 out[8];
#pragma unroll
    for (int k = 0; k < 8; k++) {
      const int j = 8 * c + k;
      float p = j < valid ? __expf(f[k] - m) * inv : 0.f;
      out[k] = __float2bfloat16(grad_scale * (p - (j == lab ? 1.f : 0.f)));
    }
    *(uint4 *)(z + 8 * (long long)c) = *(const uint4 *)out;
  }
  if (threadIdx.x == 0) {
    const float term = loss_scale * (logf(sums[r]) + m - sums[rows + r]);
    if (loss_sum) atomicAdd(loss_sum, term);
    else sums[rows + r] = term; /* --variant reduce=ordered: ce_loss_sum_kernel adds them */
  }
}

extern "C" int exec_ce_fused_selected(int vocab_local) {
  return vocab_local % 8 == 0 && !ops_variant_is(OPS_V_CE, "unfused");
}

extern "C" int exec_ce_stats(const void *logits, const int32_t *labels, long long vocab_start, float *rowmax,
                             float *sums, long long rows, int vocab_local, int vocab_valid, void *stream, ts_err *e) {
  if (vocab_local % 8) return ts_fail_sys(e, "exec_ce_stats: vocab_local %d is not a multiple of 8", vocab_local);
  ce_stats_kernel<<<(unsigned)rows, CE_THREADS, 0, (cudaStream_t)stream>>>(
      (const bf16 *)logits, labels, vocab_start, rowmax, sums, rows, vocab_local, vocab_valid);
  CHECK_LAUNCH("ce_stats");
  return 0;
}
extern "C" int exec_ce_rescale(const float *rowmax, float *sums, long long rows, void *stream, ts_err *e) {
  ce_rescale_kernel<<<blocks_for(rows, 256), 256, 0, (cudaStream_t)stream>>>(rowmax, sums, rows);
  CHECK_LAUNCH("ce_rescale");
  return 0;
}
extern "C" int exec_ce_finish8(void *logits, const int32_t *labels, long long vocab_start, const float *rowmax,
                               float *sums, float *loss_sum, float loss_scale, float grad_scale, long long rows,
                               int vocab_local, int vocab_valid, void *stream, ts_err *e) {
  if (vocab_local % 8) return ts_fail_sys(e, "exec_ce_finish8: vocab_local %d is not a multiple of 8", vocab_local);
  const int ordered = ops_variant_is(OPS_V_REDUCE, "ordered");
  ce_finish8_kernel<<<(unsigned)rows, CE_THREADS, 0, (cudaStream_t)stream>>>(
      (bf16 *)logits, labels, vocab_start, rowmax, sums, ordered ? NULL : loss_sum, loss_scale, grad_scale, rows,
      vocab_local, vocab_valid);
  CHECK_LAUNCH("ce_finish8");
  return ordered ? ce_loss_ordered(sums, loss_sum, rows, (cudaStream_t)stream, e) : 0;
}

/* ---- causal softmax on the lower triangle ---- */

#define SM_THREADS 256
#define SM_MAX_CHUNKS 4 /* chunks of 8 per thread: seq <= 256 * 8 * 4 = 8192 */

static __device__ void load8(const bf16 *p, float *v) {
  uint4 r = *(const uint4 *)p;
  const __nv_bfloat162 *h = (const __nv_bfloat162 *)&r;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float2 f = __bfloat1622float2(h[i]);
    v[2 * i] = f.x, v[2 * i + 1] = f.y;
  }
}
static __device__ void store8(bf16 *p, const float *v) {
  uint4 r;
  __nv_bfloat162 *h = (__nv_bfloat162 *)&r;
#pragma unroll
  for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *(uint4 *)p = r;
}

__global__ void __launch_bounds__(SM_THREADS) softmax_lower_fwd_kernel(const bf16 *s, bf16 *p, int seq, float scale) {
  __shared__ float red[32];
  long long row = blockIdx.x;
  int i = (int)(row % seq), len8 = (i + 8) / 8; /* chunks of 8 covering columns 0..i */
  const bf16 *sr = s + row * seq;
  bf16 *pr = p + row * seq;
  float v[SM_MAX_CHUNKS][8], mx = -INFINITY;
#pragma unroll
  for (int c = 0; c < SM_MAX_CHUNKS; c++) {
    int chunk = threadIdx.x + c * SM_THREADS;
    if (chunk < len8) {
      load8(sr + chunk * 8, v[c]);
#pragma unroll
      for (int k = 0; k < 8; k++) {
        v[c][k] = chunk * 8 + k <= i ? v[c][k] * scale : -INFINITY;
        mx = fmaxf(mx, v[c][k]);
      }
    }
  }
  mx = block_max(mx, red);
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < SM_MAX_CHUNKS; c++)
    if (threadIdx.x + c * SM_THREADS < len8)
#pragma unroll
      for (int k = 0; k < 8; k++) {
        v[c][k] = __expf(v[c][k] - mx); /* exp(-inf) = 0 past the diagonal */
        sum += v[c][k];
      }
  float inv = 1.f / block_sum(sum, red);
#pragma unroll
  for (int c = 0; c < SM_MAX_CHUNKS; c++) {
    int chunk = threadIdx.x + c * SM_THREADS;
    if (chunk < len8) {
#pragma unroll
      for (int k = 0; k < 8; k++) v[c][k] *= inv;
      store8(pr + chunk * 8, v[c]);
    }
  }
}

__global__ void __launch_bounds__(SM_THREADS) softmax_lower_bwd_kernel(const bf16 *p, const bf16 *dp, bf16 *ds, int seq,
                                                                      float scale) {
  __shared__ float red[32];
  long long row = blockIdx.x;
  int i = (int)(row % seq), len8 = (i + 8) / 8;
  const bf16 *pr = p + row * seq, *dpr = dp + row * seq;
  bf16 *dsr = ds + row * seq;
  float pv[SM_MAX_CHUNKS][8], dv[SM_MAX_CHUNKS][8], dot = 0.f;
#pragma unroll
  for (int c = 0; c < SM_MAX_CHUNKS; c++) {
    int chunk = threadIdx.x + c * SM_THREADS;
    if (chunk < len8) {
      load8(pr + chunk * 8, pv[c]);
      load8(dpr + chunk * 8, dv[c]);
#pragma unroll
      for (int k = 0; k < 8; k++) {
        if (chunk * 8 + k > i) pv[c][k] = 0.f; /* P is zero past the diagonal; dP there is garbage */
        dot += pv[c][k] * dv[c][k];
      }
    }
  }
  dot = block_sum(dot, red);
#pragma unroll
  for (int c = 0; c < SM_MAX_CHUNKS; c++) {
    int chunk = threadIdx.x + c * SM_THREADS;
    if (chunk < len8) {
#pragma unroll
      for (int k = 0; k < 8; k++) pv[c][k] = scale * pv[c][k] * (dv[c][k] - dot);
      store8(dsr + chunk * 8, pv[c]);
    }
  }
}

static int softmax_shape_ok(long long batch, int seq, ts_err *e) {
  if (seq % 8 || seq > SM_THREADS * 8 * SM_MAX_CHUNKS || batch * seq > 0x7fffffffLL || batch < 1)
    return ts_fail_sys(e, "exec softmax: unsupported shape batch=%lld seq=%d (seq %% 8 == 0, seq <= %d)", batch, seq,
                       SM_THREADS * 8 * SM_MAX_CHUNKS);
  return 0;
}

extern "C" int exec_softmax_causal_lower_fwd(const void *s, void *p, long long batch, int seq, float scale,
                                             void *stream, ts_err *e) {
  if (softmax_shape_ok(batch, seq, e)) return -1;
  softmax_lower_fwd_kernel<<<(unsigned)(batch * seq), SM_THREADS, 0, (cudaStream_t)stream>>>((const bf16 *)s,
                                                                                             (bf16 *)p, seq, scale);
  CHECK_LAUNCH("softmax_lower_fwd");
  return 0;
}

extern "C" int exec_softmax_causal_lower_bwd(const void *p, const void *dp, void *ds, long long batch, int seq,
                                             float scale, void *stream, ts_err *e) {
  if (softmax_shape_ok(batch, seq, e)) return -1;
  softmax_lower_bwd_kernel<<<(unsigned)(batch * seq), SM_THREADS, 0, (cudaStream_t)stream>>>(
      (const bf16 *)p, (const bf16 *)dp, (bf16 *)ds, seq, scale);
  CHECK_LAUNCH("softmax_lower_bwd");
  return 0;
}

/* ---- conversions and checks ---- */

__global__ void f32_to_bf16_kernel(const float *x, bf16 *y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = __float2bfloat16(x[i]);
}
__global__ void bf16_to_f32_kernel(const bf16 *x, float *y, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = __bfloat162float(x[i]);
}
__global__ void fill_f32_kernel(float *x, long long n, float value) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    x[i] = value;
}
extern "C" int exec_fill_f32(float *x, long long n, float value, void *stream, ts_err *e) {
  if (n <= 0) return 0;
  fill_f32_kernel<<<blocks_for(n, 256), 256, 0, (cudaStream_t)stream>>>(x, n, value);
  CHECK_LAUNCH("fill_f32");
  return 0;
}

__global__ void count_nonfinite_kernel(const float *x, long long n, unsigned long long *count) {
  unsigned long long c = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    c += !isfinite(x[i]);
  for (int o = 16; o > 0; o >>= 1) c += __shfl_xor_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, c);
}

extern "C" int exec_f32_to_bf16(const float *x, void *y, long long n, void *stream, ts_err *e) {
  if (n <= 0) return 0;
  f32_to_bf16_kernel<<<blocks_for(n, 256), 256, 0, (cudaStream_t)stream>>>(x, (bf16 *)y, n);
  CHECK_LAUNCH("f32_to_bf16");
  return 0;
}
extern "C" int exec_bf16_to_f32(const void *x, float *y, long long n, void *stream, ts_err *e) {
  if (n <= 0) return 0;
  bf16_to_f32_kernel<<<blocks_for(n, 256), 256, 0, (cudaStream_t)stream>>>((const bf16 *)x, y, n);
  CHECK_LAUNCH("bf16_to_f32");
  return 0;
}
extern "C" int exec_count_nonfinite(const float *x, long long n, unsigned long long *count, void *stream, ts_err *e) {
  if (n <= 0) return 0;
  unsigned blocks = blocks_for(n, 256);
  if (blocks > 4096) blocks = 4096;
  count_nonfinite_kernel<<<blocks, 256, 0, (cudaStream_t)stream>>>(x, n, count);
  CHECK_LAUNCH("count_nonfinite");
  return 0;
}

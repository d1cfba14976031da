/* rt_ops_layer.cu — RoPE, bias and QK-norm kernels (see rt_ops_layer.h). Arithmetic is
 * FP32; one BF16 rounding per output. */
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

extern "C" { /* ts_error.h has no C++ guards of its own */
#include "ts_error.h"
}
#include "rt_ops_check.h"
#include "rt_ops_layer.h"
#include "ops_variants.h"

typedef __nv_bfloat16 bf16;

/* Threads (i, row): threadIdx.x is the pair index i < d/2, threadIdx.y the row within the block.
 * The angle's sine and cosine depend on (row, i) only: computed once, applied to every head of the
 * row (the same FP32 arithmetic per element as computing it per head). */
__global__ void rope_kernel(bf16 *x, long long rows, int ld, int heads, int d, int seq, const float *inv_freq,
                            float sign) {
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  const int half = d / 2, i = threadIdx.x;
  if (r >= rows || i >= half) return;
  const float pos = (float)(r % seq);
  float sn, cs;
  sincosf(pos * inv_freq[i], &sn, &cs);
  sn *= sign;
  bf16 *row = x + r * ld;
  for (int hd = 0; hd < heads; hd++) {
    bf16 *v = row + hd * d;
    const float x1 = __bfloat162float(v[i]), x2 = __bfloat162float(v[i + half]);
    v[i] = __float2bfloat16(x1 * cs - x2 * sn);
    v[i + half] = __float2bfloat16(x2 * cs + x1 * sn);
  }
}

/* half a multiple of 8, ld and d multiples of 8, x 16-byte aligned: a thread owns 8 pair indices of
 * a row (8 angles in registers) and walks the heads with two 16-byte loads and stores a head; the
 * same FP32 arithmetic per element as rope_kernel, so the two agree bit for bit. */
__global__ void rope_vec8_kernel(bf16 *__restrict__ x, long long rows, int ld, int heads, int d, int seq,
                                 const float *__restrict__ inv_freq, float sign) {
  const int half = d / 2, groups = half / 8;
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  const int g = threadIdx.x;
  if (r >= rows || g >= groups) return;
  const float pos = (float)(r % seq);
  float sn[8], cs[8];
#pragma unroll
  for (int j = 0; j < 8; j++) {
    sincosf(pos * inv_freq[8 * g + j], &sn[j], &cs[j]);
    sn[j] *= sign;
  }
  bf16 *row = x + r * ld + 8 * g;
#pragma unroll 4
  for (int hd = 0; hd < heads; hd++) {
    uint4 *p1 = reinterpret_cast<uint4 *>(row + hd * d), *p2 = reinterpret_cast<uint4 *>(row + hd * d + half);
    uint4 a = *p1, b = *p2;
    __nv_bfloat162 *a2 = reinterpret_cast<__nv_bfloat162 *>(&a), *b2 = reinterpret_cast<__nv_bfloat162 *>(&b);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const float2 x1 = __bfloat1622float2(a2[k]), x2 = __bfloat1622float2(b2[k]);
      const int j = 2 * k;
      a2[k] = __floats2bfloat162_rn(x1.x * cs[j] - x2.x * sn[j], x1.y * cs[j + 1] - x2.y * sn[j + 1]);
      b2[k] = __floats2bfloat162_rn(x2.x * cs[j] + x1.x * sn[j], x2.y * cs[j + 1] + x1.y * sn[j + 1]);
    }
    *p1 = a, *p2 = b;
  }
}

extern "C" int rt_rope(void *x, long long rows, int ld, int heads, int d, int seq, const float *inv_freq,
                       int inverse, void *stream, ts_err *e) {
  if (rows < 0 || rows > 2147483647LL || heads < 1 || d < 2 || d % 2 || d > 2048 || seq < 1 || ld < heads * d ||
      !inv_freq)
    return ts_fail_sys(e, "rt_rope: bad shape (rows %lld, ld %d, heads %d, d %d, seq %d)", rows, ld, heads, d, seq);
  if (rows == 0) return 0;
  const int half = d / 2;
  const float sign = inverse ? -1.f : 1.f;
  if (half % 8 == 0 && ld % 8 == 0 && ((uintptr_t)x & 15) == 0) {
    const int groups = half / 8, ty = groups >= 128 ? 1 : 128 / groups;
    const long long blocks = (rows + ty - 1) / ty;
    rope_vec8_kernel<<<(unsigned)blocks, dim3((unsigned)groups, (unsigned)ty), 0, (cudaStream_t)stream>>>(
        (bf16 *)x, rows, ld, heads, d, seq, inv_freq, sign);
  } else {
    const int ty = half >= 256 ? 1 : 256 / half;
    const long long blocks = (rows + ty - 1) / ty;
    rope_kernel<<<(unsigned)blocks, dim3((unsigned)half, (unsigned)ty), 0, (cudaStream_t)stream>>>(
        (bf16 *)x, rows, ld, heads, d, seq, inv_freq, sign);
  }
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* Any width or alignment: one element per thread and step. */
__global__ void bias_add_kernel(bf16 *y, const bf16 *b, long long n, int cols, int ld) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / cols;
    const int c = (int)(i % cols);
    bf16 *p = y + r * ld + c;
    *p = __float2bfloat16(__bfloat162float(*p) + __bfloat162float(b[c]));
  }
}

/* cols and ld multiples of 8, y and b 16-byte aligned: each thread owns 8 columns (one 16-byte
 * load of the bias, kept in registers) and walks the rows blockIdx.y, + gridDim.y, ...; the same
 * FP32 sum and BF16 rounding as bias_add_kernel, so the two agree bit for bit. */
__global__ void bias_add_vec8_kernel(bf16 *y, const bf16 *b, long long rows, int vcols, int ld) {
  const int v = blockIdx.x * blockDim.x + threadIdx.x;
  if (v >= vcols) return;
  const uint4 bv = *reinterpret_cast<const uint4 *>(b + 8 * (long long)v);
  const __nv_bfloat162 *b2 = reinterpret_cast<const __nv_bfloat162 *>(&bv);
  for (long long r = blockIdx.y; r < rows; r += gridDim.y) {
    uint4 *p = reinterpret_cast<uint4 *>(y + r * ld + 8 * (long long)v);
    uint4 yv = *p;
    __nv_bfloat162 *y2 = reinterpret_cast<__nv_bfloat162 *>(&yv);
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const float2 a = __bfloat1622float2(y2[k]), c = __bfloat1622float2(b2[k]);
      y2[k] = __floats2bfloat162_rn(a.x + c.x, a.y + c.y);
    }
    *p = yv;
  }
}

extern "C" int rt_bias_add(void *y, const void *b, long long rows, int cols, int ld, void *stream, ts_err *e) {
  if (rows < 0 || cols < 1 || ld < cols) return ts_fail_sys(e, "rt_bias_add: bad shape (%lld x %d, ld %d)", rows, cols, ld);
  const long long n = rows * cols;
  if (n == 0) return 0;
  if (cols % 8 == 0 && ld % 8 == 0 && (((uintptr_t)y | (uintptr_t)b) & 15) == 0) {
    const int vcols = cols / 8, threads = vcols < 256 ? (vcols + 31) / 32 * 32 : 256;
    const long long bx = (vcols + threads - 1) / threads;
    long long by = (132LL * 2048 + (long long)vcols - 1) / vcols; /* about 2,048 threads per SM in all */
    if (by > rows) by = rows;
    if (by > 65535) by = 65535;
    dim3 grid((unsigned)bx, (unsigned)by);
    bias_add_vec8_kernel<<<grid, threads, 0, (cudaStream_t)stream>>>((bf16 *)y, (const bf16 *)b, rows, vcols, ld);
  } else {
    long long blocks = (n + 255) / 256;
    if (blocks > 132 * 16) blocks = 132 * 16;
    bias_add_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>((bf16 *)y, (const bf16 *)b, n, cols, ld);
  }
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* 32 columns x 8 row lanes per block, BIAS_ROWS rows per block (blockIdx.y), one atomic per column and block;
 * with --variant reduce=ordered one block row over all rows and no atomics (a fixed order). */
#define BIAS_ROWS 256
__global__ void bias_grad_kernel(const bf16 *dy, float *db, long long rows, int cols, int ld) {
  __shared__ float part[8][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  const long long r0 = (long long)blockIdx.y * BIAS_ROWS;
  const long long r1 = gridDim.y == 1 ? rows : r0 + BIAS_ROWS < rows ? r0 + BIAS_ROWS : rows; /* one block row: all */
  float s = 0.f;
  if (c < cols)
    for (long long r = r0 + threadIdx.y; r < r1; r += 8) s += __bfloat162float(dy[r * ld + c]);
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float t = 0.f;
    for (int k = 0; k < 8; k++) t += part[k][threadIdx.x];
    if (gridDim.y == 1) db[c] += t; /* the block owns its columns (--variant reduce=ordered) */
    else atomicAdd(&db[c], t);
  }
}

extern "C" int rt_bias_grad(const void *dy, float *db, long long rows, int cols, int ld, void *stream, ts_err *e) {
  if (rows < 0 || cols < 1 || ld < cols) return ts_fail_sys(e, "rt_bias_grad: bad shape (%lld x %d, ld %d)", rows, cols, ld);
  if (rows == 0) return 0;
  const long long yb = ops_variant_is(OPS_V_REDUCE, "ordered") ? 1 : (rows + BIAS_ROWS - 1) / BIAS_ROWS;
  if (yb > 65535) return ts_fail_sys(e, "rt_bias_grad: %lld rows are too many", rows);
  dim3 grid((unsigned)((cols + 31) / 32), (unsigned)yb), block(32, 8);
  bias_grad_kernel<<<grid, block, 0, (cudaStream_t)stream>>>((const bf16 *)dy, db, rows, cols, ld);
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* ---- the QK norm: one warp per (row, head), each lane d / 32 of the head's d values ---- */

enum { QK_MAX_PER_LANE = 8 }; /* d <= 256 */

__device__ static float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* pairs = rows x heads; pair p is head p % heads of row p / heads. Every lane of a warp has the same p. */
/* One warp per (row, head) pair. SAVE (the training executor) keeps the input in saved and 1/rms
 * in rstd for the backward; the inference executor's instance writes x only. */
template <bool SAVE>
__device__ __forceinline__ void qk_norm_fwd_body(bf16 *x, int ld, bf16 *saved, const bf16 *g, float *rstd,
                                                 long long pairs, int heads, int d, float eps) {
  const int lane = threadIdx.x & 31, per = d / 32;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  for (long long p = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; p < pairs; p += warps) {
    bf16 *xr = x + (p / heads) * ld + (long long)(p % heads) * d, *sr = SAVE ? saved + p * d : NULL;
    float v[QK_MAX_PER_LANE], ss = 0.f;
    for (int k = 0; k < per; k++) {
      v[k] = __bfloat162float(xr[lane + 32 * k]);
      ss += v[k] * v[k];
    }
    const float rs = rsqrtf(warp_sum(ss) / (float)d + eps);
    if (SAVE && lane == 0) rstd[p] = rs;
    for (int k = 0; k < per; k++) {
      const int i = lane + 32 * k;
      if (SAVE) sr[i] = xr[i];
      xr[i] = __float2bfloat16(v[k] * rs * __bfloat162float(g[i]));
    }
  }
}

__global__ void qk_norm_fwd_kernel(bf16 *x, int ld, bf16 *saved, const bf16 *g, float *rstd, long long pairs,
                                   int heads, int d, float eps) {
  qk_norm_fwd_body<true>(x, ld, saved, g, rstd, pairs, heads, d, eps);
}

__global__ void qk_norm_fwd_nosave_kernel(bf16 *x, int ld, const bf16 *g, long long pairs, int heads, int d,
                                          float eps) {
  qk_norm_fwd_body<false>(x, ld, NULL, g, NULL, pairs, heads, d, eps);
}

/* dgamma: each lane sums its columns over the pairs it walks, the block's warps add into shared
 * memory, one atomic add per block and column into the FP32 accumulator. */
__global__ void qk_norm_bwd_kernel(bf16 *dx, int ld, const bf16 *saved, const bf16 *g, const float *rstd,
                                   float *dgamma, long long pairs, int heads, int d) {
  extern __shared__ float sdg[]; /* [d] */
  for (int i = threadIdx.x; i < d; i += blockDim.x) sdg[i] = 0.f;
  __syncthreads();
  const int lane = threadIdx.x & 31, per = d / 32;
  const long long warps = (long long)gridDim.x * (blockDim.x / 32);
  float acc[QK_MAX_PER_LANE];
  for (int k = 0; k < per; k++) acc[k] = 0.f;
  for (long long p = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32; p < pairs; p += warps) {
    bf16 *dr = dx + (p / heads) * ld + (long long)(p % heads) * d;
    const bf16 *sr = saved + p * d;
    const float rs = rstd[p];
    float dy[QK_MAX_PER_LANE], xh[QK_MAX_PER_LANE], dot = 0.f;
    for (int k = 0; k < per; k++) {
      const int i = lane + 32 * k;
      dy[k] = __bfloat162float(dr[i]);
      xh[k] = __bfloat162float(sr[i]) * rs;
      dot += __bfloat162float(g[i]) * dy[k] * xh[k];
      acc[k] += dy[k] * xh[k];
    }
    dot = warp_sum(dot) / (float)d;
    for (int k = 0; k < per; k++) {
      const int i = lane + 32 * k;
      dr[i] = __float2bfloat16(rs * (__bfloat162float(g[i]) * dy[k] - xh[k] * dot));
    }
  }
  for (int k = 0; k < per; k++) atomicAdd(&sdg[lane + 32 * k], acc[k]);
  __syncthreads();
  for (int i = threadIdx.x; i < d; i += blockDim.x) atomicAdd(&dgamma[i], sdg[i]);
}

static int qk_norm_shape_ok(long long rows, int ld, int heads, int d) {
  return rows >= 0 && heads >= 1 && d >= 32 && d % 32 == 0 && d <= 32 * QK_MAX_PER_LANE && ld >= heads * d;
}

static unsigned qk_norm_blocks(long long pairs) { /* 8 warps a block, at most 8 blocks per SM of an H100 */
  long long b = (pairs + 7) / 8;
  return (unsigned)(b < 1 ? 1 : b > 132 * 8 ? 132 * 8 : b);
}

extern "C" int rt_qk_norm_fwd(void *x, int ld, void *saved, const void *gamma, float *rstd, long long rows, int heads,
                              int d, float eps, void *stream, ts_err *e) {
  if (!qk_norm_shape_ok(rows, ld, heads, d) || !gamma || !saved != !rstd)
    return ts_fail_sys(e, "rt_qk_norm_fwd: bad shape (rows %lld, ld %d, heads %d, d %d: d a multiple of 32 up to %d; "
                       "saved and rstd both given or both NULL)", rows, ld, heads, d, 32 * QK_MAX_PER_LANE);
  if (rows == 0) return 0;
  const long long pairs = rows * heads;
  if (saved)
    qk_norm_fwd_kernel<<<qk_norm_blocks(pairs), 256, 0, (cudaStream_t)stream>>>(
        (bf16 *)x, ld, (bf16 *)saved, (const bf16 *)gamma, rstd, pairs, heads, d, eps);
  else
    qk_norm_fwd_nosave_kernel<<<qk_norm_blocks(pairs), 256, 0, (cudaStream_t)stream>>>(
        (bf16 *)x, ld, (const bf16 *)gamma, pairs, heads, d, eps);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_qk_norm_bwd(void *dx, int ld, const void *saved, const void *gamma, const float *rstd, float *dgamma,
                              long long rows, int heads, int d, void *stream, ts_err *e) {
  if (!qk_norm_shape_ok(rows, ld, heads, d) || !saved || !gamma || !rstd || !dgamma)
    return ts_fail_sys(e, "rt_qk_norm_bwd: bad shape (rows %lld, ld %d, heads %d, d %d: d a multiple of 32 up to %d)",
                       rows, ld, heads, d, 32 * QK_MAX_PER_LANE);
  if (rows == 0) return 0;
  const long long pairs = rows * heads;
  qk_norm_bwd_kernel<<<qk_norm_blocks(pairs), 256, (size_t)d * sizeof(float), (cudaStream_t)stream>>>(
      (bf16 *)dx, ld, (const bf16 *)saved, (const bf16 *)gamma, rstd, dgamma, pairs, heads, d);
  RT_CHECK_LAUNCH(e);
  return 0;
}

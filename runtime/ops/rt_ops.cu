/* rt_ops.cu — memory-bound transformer kernels (see rt_ops.h).
 *
 * Row kernels (norms, softmax, cross-entropy) give one 256-thread block to a
 * row and read it a few times: the row stays in L1/L2 between passes, so HBM
 * sees about one read and one write. Element kernels run a grid-stride loop.
 * Both use 16-byte accesses (8 BF16) when the row length allows it (W = 8),
 * else single elements (W = 1). Arithmetic is FP32. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

extern "C" { /* ts_error.h has no C++ guards of its own */
#include "ts_error.h"
}
#include "rt_ops.h"
#include "rt_ops_check.h"

typedef __nv_bfloat16 bf16;

#define ROW_THREADS 256
#define ELEM_THREADS 256

template <int W> __device__ __forceinline__ void load_w(const bf16 *p, float *o) {
  if (W == 8) {
    uint4 u = *reinterpret_cast<const uint4 *>(p);
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float2 f = __bfloat1622float2(h[i]);
      o[2 * i] = f.x;
      o[2 * i + 1] = f.y;
    }
  } else {
#pragma unroll
    for (int i = 0; i < W; i++) o[i] = __bfloat162float(p[i]);
  }
}

template <int W> __device__ __forceinline__ void store_w(bf16 *p, const float *v) {
  if (W == 8) {
    uint4 u;
    __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&u);
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4 *>(p) = u;
  } else {
#pragma unroll
    for (int i = 0; i < W; i++) p[i] = __float2bfloat16_rn(v[i]);
  }
}

/* Sum (or max) over the block; every thread gets the result. `red` holds 32 floats. */
__device__ float block_sum(float v, float *red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads(); /* red may still be read from a previous call */
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < (int)(blockDim.x / 32) ? red[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

__device__ float block_max(float v, float *red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float t = lane < (int)(blockDim.x / 32) ? red[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
  return t;
}

/* ---- LayerNorm / RMSNorm ---- */

template <int W, bool RMS>
__global__ void norm_fwd_kernel(const bf16 *x, const bf16 *gamma, const bf16 *beta, bf16 *y, float *mean_out,
                                float *rstd_out, int cols, float eps) {
  __shared__ float red[32];
  const bf16 *xr = x + (size_t)blockIdx.x * cols;
  bf16 *yr = y + (size_t)blockIdx.x * cols;
  float v[W], g[W], b[W], s = 0.f;
  float mean = 0.f;
  if (!RMS) {
    for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
      load_w<W>(xr + c, v);
#pragma unroll
      for (int i = 0; i < W; i++) s += v[i];
    }
    mean = block_sum(s, red) / cols;
    s = 0.f;
  }
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_w<W>(xr + c, v);
#pragma unroll
    for (int i = 0; i < W; i++) s += (v[i] - mean) * (v[i] - mean);
  }
  float rstd = rsqrtf(block_sum(s, red) / cols + eps);
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_w<W>(xr + c, v);
    load_w<W>(gamma + c, g);
    if (!RMS) load_w<W>(beta + c, b);
#pragma unroll
    for (int i = 0; i < W; i++) v[i] = (v[i] - mean) * rstd * g[i] + (RMS ? 0.f : b[i]);
    store_w<W>(yr + c, v);
  }
  if (threadIdx.x == 0) {
    if (mean_out) mean_out[blockIdx.x] = mean;
    rstd_out[blockIdx.x] = rstd;
  }
}

/* The same forward with the row held in registers: FWD_ROW_THREADS threads a
 * row, each keeping up to FWD_CHUNKS 16-byte chunks of it (so rows of up to
 * 64 x 8 x 8 = 4096 columns, a multiple of 8), read from HBM once instead of
 * three times through L1/L2 (the 256-thread kernel above: 29 us for 4096 x
 * 4096 on an H200, 2.3 TB/s). Same statistics (mean, then the centred sum of
 * squares), summed in another order. */
#define FWD_ROW_THREADS 64
#define FWD_CHUNKS 8

static __device__ __forceinline__ float pair_of_warps_sum(float v, float *red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads(); /* red may still be read from a previous call */
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  return red[0] + red[1];
}

template <bool RMS>
__global__ void __launch_bounds__(FWD_ROW_THREADS)
    norm_fwd_row_kernel(const bf16 *x, const bf16 *gamma, const bf16 *beta, bf16 *y, float *mean_out,
                        float *rstd_out, int cols, float eps) {
  __shared__ float red[FWD_ROW_THREADS / 32];
  const size_t off = (size_t)blockIdx.x * cols;
  const int chunks = cols / 8;
  uint4 u[FWD_CHUNKS];
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < FWD_CHUNKS; k++) {
    const int q = threadIdx.x + k * FWD_ROW_THREADS;
    u[k] = q < chunks ? *reinterpret_cast<const uint4 *>(x + off + 8 * q) : make_uint4(0, 0, 0, 0);
  }
  float mean = 0.f;
  if (!RMS) {
#pragma unroll
    for (int k = 0; k < FWD_CHUNKS; k++) {
      const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u[k]);
#pragma unroll
      for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(h[i]);
        s += f.x + f.y;
      }
    }
    mean = pair_of_warps_sum(s, red) / cols;
    s = 0.f;
  }
#pragma unroll
  for (int k = 0; k < FWD_CHUNKS; k++) {
    if (threadIdx.x + k * FWD_ROW_THREADS >= chunks) continue; /* zero padding is not centred data */
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u[k]);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float2 f = __bfloat1622float2(h[i]);
      s += (f.x - mean) * (f.x - mean) + (f.y - mean) * (f.y - mean);
    }
  }
  const float rstd = rsqrtf(pair_of_warps_sum(s, red) / cols + eps);
#pragma unroll
  for (int k = 0; k < FWD_CHUNKS; k++) {
    const int q = threadIdx.x + k * FWD_ROW_THREADS;
    if (q >= chunks) continue;
    float v[8], g[8], b[8];
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&u[k]);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float2 f = __bfloat1622float2(h[i]);
      v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
    load_w<8>(gamma + 8 * q, g);
    if (!RMS) load_w<8>(beta + 8 * q, b);
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = (v[i] - mean) * rstd * g[i] + (RMS ? 0.f : b[i]);
    store_w<8>(y + off + 8 * q, v);
  }
  if (threadIdx.x == 0) {
    if (mean_out) mean_out[blockIdx.x] = mean;
    rstd_out[blockIdx.x] = rstd;
  }
}

static bool norm_fwd_row_fits(int cols) { return cols % 8 == 0 && cols <= 8 * FWD_CHUNKS * FWD_ROW_THREADS; }

/* dx = rstd * (g dy - mean(g dy) - xhat mean(g dy xhat)); RMS drops the mean terms
 * (mean = 0, and no mean(g dy) term). */
template <int W, bool RMS>
__global__ void norm_bwd_kernel(const bf16 *dy, const bf16 *x, const bf16 *gamma, const float *mean_in,
                                const float *rstd_in, bf16 *dx, int cols) {
  __shared__ float red[32];
  size_t off = (size_t)blockIdx.x * cols;
  float mean = RMS ? 0.f : mean_in[blockIdx.x], rstd = rstd_in[blockIdx.x];
  float v[W], d[W], g[W], s1 = 0.f, s2 = 0.f;
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_w<W>(x + off + c, v);
    load_w<W>(dy + off + c, d);
    load_w<W>(gamma + c, g);
#pragma unroll
    for (int i = 0; i < W; i++) {
      float gd = g[i] * d[i];
      s1 += gd;
      s2 += gd * (v[i] - mean) * rstd;
    }
  }
  float mean_gd = RMS ? 0.f : block_sum(s1, red) / cols;
  float mean_gdx = block_sum(s2, red) / cols;
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_w<W>(x + off + c, v);
    load_w<W>(dy + off + c, d);
    load_w<W>(gamma + c, g);
#pragma unroll
    for (int i = 0; i < W; i++) v[i] = rstd * (g[i] * d[i] - mean_gd - (v[i] - mean) * rstd * mean_gdx);
    store_w<W>(dx + off + c, v);
  }
}

static int rows_ok(long long rows, int cols, ts_err *e, const char *what) {
  if (rows <= 0 || cols <= 0 || rows > 0x7fffffffLL)
    return ts_fail_sys(e, "%s: bad shape rows=%lld cols=%d", what, rows, cols);
  return 0;
}

extern "C" int rt_layernorm_fwd(const void *x, const void *gamma, const void *beta, void *y, float *mean,
                                float *rstd, long long rows, int cols, float eps, void *stream, ts_err *e) {
  RT_TRY(rows_ok(rows, cols, e, "rt_layernorm_fwd"));
  cudaStream_t st = (cudaStream_t)stream;
  if (norm_fwd_row_fits(cols))
    norm_fwd_row_kernel<false><<<(unsigned)rows, FWD_ROW_THREADS, 0, st>>>(
        (const bf16 *)x, (const bf16 *)gamma, (const bf16 *)beta, (bf16 *)y, mean, rstd, cols, eps);
  else if (cols % 8 == 0)
    norm_fwd_kernel<8, false><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)x, (const bf16 *)gamma,
                                                                      (const bf16 *)beta, (bf16 *)y, mean, rstd,
                                                                      cols, eps);
  else
    norm_fwd_kernel<1, false><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)x, (const bf16 *)gamma,
                                                                      (const bf16 *)beta, (bf16 *)y, mean, rstd,
                                                                      cols, eps);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_rmsnorm_fwd(const void *x, const void *gamma, void *y, float *rstd, long long rows, int cols,
                              float eps, void *stream, ts_err *e) {
  RT_TRY(rows_ok(rows, cols, e, "rt_rmsnorm_fwd"));
  cudaStream_t st = (cudaStream_t)stream;
  if (norm_fwd_row_fits(cols))
    norm_fwd_row_kernel<true><<<(unsigned)rows, FWD_ROW_THREADS, 0, st>>>((const bf16 *)x, (const bf16 *)gamma, NULL,
                                                                         (bf16 *)y, NULL, rstd, cols, eps);
  else if (cols % 8 == 0)
    norm_fwd_kernel<8, true><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)x, (const bf16 *)gamma, NULL,
                                                                     (bf16 *)y, NULL, rstd, cols, eps);
  else
    norm_fwd_kernel<1, true><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)x, (const bf16 *)gamma, NULL,
                                                                     (bf16 *)y, NULL, rstd, cols, eps);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_layernorm_bwd_dx(const void *dy, const void *x, const void *gamma, const float *mean,
                                   const float *rstd, void *dx, long long rows, int cols, void *stream,
                                   ts_err *e) {
  RT_TRY(rows_ok(rows, cols, e, "rt_layernorm_bwd_dx"));
  cudaStream_t st = (cudaStream_t)stream;
  if (cols % 8 == 0)
    norm_bwd_kernel<8, false><<<(unsigned)rows, ROW_THREADS, 0, st>>>(
        (const bf16 *)dy, (const bf16 *)x, (const bf16 *)gamma, mean, rstd, (bf16 *)dx, cols);
  else
    norm_bwd_kernel<1, false><<<(unsigned)rows, ROW_THREADS, 0, st>>>(
        (const bf16 *)dy, (const bf16 *)x, (const bf16 *)gamma, mean, rstd, (bf16 *)dx, cols);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_rmsnorm_bwd_dx(const void *dy, const void *x, const void *gamma, const float *rstd, void *dx,
                                 long long rows, int cols, void *stream, ts_err *e) {
  RT_TRY(rows_ok(rows, cols, e, "rt_rmsnorm_bwd_dx"));
  cudaStream_t st = (cudaStream_t)stream;
  if (cols % 8 == 0)
    norm_bwd_kernel<8, true><<<(unsigned)rows, ROW_THREADS, 0, st>>>(
        (const bf16 *)dy, (const bf16 *)x, (const bf16 *)gamma, NULL, rstd, (bf16 *)dx, cols);
  else
    norm_bwd_kernel<1, true><<<(unsigned)rows, ROW_THREADS, 0, st>>>(
        (const bf16 *)dy, (const bf16 *)x, (const bf16 *)gamma, NULL, rstd, (bf16 *)dx, cols);
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* ---- element-wise ---- */

static unsigned elem_blocks(long long chunks) {
  long long b = (chunks + ELEM_THREADS - 1) / ELEM_THREADS;
  if (b > 132LL * 32) b = 132LL * 32; /* a few waves of the 132 SMs; the loop strides over the rest */
  return (unsigned)(b < 1 ? 1 : b);
}

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_C 0.044715f

__device__ __forceinline__ float gelu(float x) {
  return 0.5f * x * (1.f + tanhf(GELU_K * (x + GELU_C * x * x * x)));
}
__device__ __forceinline__ float gelu_grad(float x) {
  float t = tanhf(GELU_K * (x + GELU_C * x * x * x));
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * GELU_K * (1.f + 3.f * GELU_C * x * x);
}

template <int W> __global__ void gelu_fwd_kernel(const bf16 *x, bf16 *y, long long chunks) {
  float v[W];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < chunks;
       i += (long long)gridDim.x * blockDim.x) {
    load_w<W>(x + i * W, v);
#pragma unroll
    for (int j = 0; j < W; j++) v[j] = gelu(v[j]);
    store_w<W>(y + i * W, v);
  }
}

template <int W> __global__ void gelu_bwd_kernel(const bf16 *dy, const bf16 *x, bf16 *dx, long long chunks) {
  float v[W], d[W];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < chunks;
       i += (long long)gridDim.x * blockDim.x) {
    load_w<W>(x + i * W, v);
    load_w<W>(dy + i * W, d);
#pragma unroll
    for (int j = 0; j < W; j++) v[j] = d[j] * gelu_grad(v[j]);
    store_w<W>(dx + i * W, v);
  }
}

template <int W> __global__ void add_kernel(const bf16 *a, const bf16 *b, bf16 *y, long long chunks) {
  float u[W], v[W];
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < chunks;
       i += (long long)gridDim.x * blockDim.x) {
    load_w<W>(a + i * W, u);
    load_w<W>(b + i * W, v);
#pragma unroll
    for (int j = 0; j < W; j++) u[j] += v[j];
    store_w<W>(y + i * W, u);
  }
}

__device__ __forceinline__ float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

/* chunk i covers W consecutive columns of one row of y (f columns per row). */
template <int W> __global__ void swiglu_fwd_kernel(const bf16 *x, bf16 *y, long long chunks, int f) {
  float g[W], u[W];
  int per_row = f / W;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < chunks;
       i += (long long)gridDim.x * blockDim.x) {
    long long row = i / per_row, c = (i % per_row) * W;
    const bf16 *xr = x + row * 2 * f;
    load_w<W>(xr + c, g);
    load_w<W>(xr + f + c, u);
#pragma unroll
    for (int j = 0; j < W; j++) g[j] = g[j] * sigmoid(g[j]) * u[j];
    store_w<W>(y + row * f + c, g);
  }
}

template <int W> __global__ void swiglu_bwd_kernel(const bf16 *dy, const bf16 *x, bf16 *dx, long long chunks, int f) {
  float g[W], u[W], d[W], dg[W];
  int per_row = f / W;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < chunks;
       i += (long long)gridDim.x * blockDim.x) {
    long long row = i / per_row, c = (i % per_row) * W;
    const bf16 *xr = x + row * 2 * f;
    load_w<W>(xr + c, g);
    load_w<W>(xr + f + c, u);
    load_w<W>(dy + row * f + c, d);
#pragma unroll
    for (int j = 0; j < W; j++) {
      float s = sigmoid(g[j]);
      dg[j] = d[j] * u[j] * s * (1.f + g[j] * (1.f - s));
      u[j] = d[j] * g[j] * s;
    }
    store_w<W>(dx + row * 2 * f + c, dg);
    store_w<W>(dx + row * 2 * f + f + c, u);
  }
}

static int n_ok(long long n, ts_err *e, const char *what) {
  if (n <= 0) return ts_fail_sys(e, "%s: bad element count %lld", what, n);
  return 0;
}

extern "C" int rt_gelu_fwd(const void *x, void *y, long long n, void *stream, ts_err *e) {
  RT_TRY(n_ok(n, e, "rt_gelu_fwd"));
  cudaStream_t st = (cudaStream_t)stream;
  if (n % 8 == 0)
    gelu_fwd_kernel<8><<<elem_blocks(n / 8), ELEM_THREADS, 0, st>>>((const bf16 *)x, (bf16 *)y, n / 8);
  else
    gelu_fwd_kernel<1><<<elem_blocks(n), ELEM_THREADS, 0, st>>>((const bf16 *)x, (bf16 *)y, n);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_gelu_bwd(const void *dy, const void *x, void *dx, long long n, void *stream, ts_err *e) {
  RT_TRY(n_ok(n, e, "rt_gelu_bwd"));
  cudaStream_t st = (cudaStream_t)stream;
  if (n % 8 == 0)
    gelu_bwd_kernel<8><<<elem_blocks(n / 8), ELEM_THREADS, 0, st>>>((const bf16 *)dy, (const bf16 *)x,
                                                                    (bf16 *)dx, n / 8);
  else
    gelu_bwd_kernel<1><<<elem_blocks(n), ELEM_THREADS, 0, st>>>((const bf16 *)dy, (const bf16 *)x, (bf16 *)dx, n);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_add(const void *a, const void *b, void *y, long long n, void *stream, ts_err *e) {
  RT_TRY(n_ok(n, e, "rt_add"));
  cudaStream_t st = (cudaStream_t)stream;
  if (n % 8 == 0)
    add_kernel<8><<<elem_blocks(n / 8), ELEM_THREADS, 0, st>>>((const bf16 *)a, (const bf16 *)b, (bf16 *)y, n / 8);
  else
    add_kernel<1><<<elem_blocks(n), ELEM_THREADS, 0, st>>>((const bf16 *)a, (const bf16 *)b, (bf16 *)y, n);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_swiglu_fwd(const void *x, void *y, long long rows, int f, void *stream, ts_err *e) {
  RT_TRY(rows_ok(rows, f, e, "rt_swiglu_fwd"));
  cudaStream_t st = (cudaStream_t)stream;
  if (f % 8 == 0)
    swiglu_fwd_kernel<8><<<elem_blocks(rows * f / 8), ELEM_THREADS, 0, st>>>((const bf16 *)x, (bf16 *)y,
                                                                             rows * f / 8, f);
  else
    swiglu_fwd_kernel<1><<<elem_blocks(rows * f), ELEM_THREADS, 0, st>>>((const bf16 *)x, (bf16 *)y, rows * f, f);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_swiglu_bwd(const void *dy, const void *x, void *dx, long long rows, int f, void *stream,
                             ts_err *e) {
  RT_TRY(rows_ok(rows, f, e, "rt_swiglu_bwd"));
  cudaStream_t st = (cudaStream_t)stream;
  if (f % 8 == 0)
    swiglu_bwd_kernel<8><<<elem_blocks(rows * f / 8), ELEM_THREADS, 0, st>>>((const bf16 *)dy, (const bf16 *)x,
                                                                             (bf16 *)dx, rows * f / 8, f);
  else
    swiglu_bwd_kernel<1><<<elem_blocks(rows * f), ELEM_THREADS, 0, st>>>((const bf16 *)dy, (const bf16 *)x,
                                                                         (bf16 *)dx, rows * f, f);
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* ---- softmax (attention) ---- */

/* Row r of the batch is row (r % seq) of its matrix: columns 0..r%seq are kept. */
template <int W> __global__ void softmax_causal_kernel(const bf16 *s, bf16 *p, int seq, float scale) {
  __shared__ float red[32];
  size_t off = (size_t)blockIdx.x * seq;
  int last = (int)(blockIdx.x % (unsigned)seq); /* last unmasked column */
  float v[W], mx = -INFINITY, sum = 0.f;
  for (int c = threadIdx.x * W; c < seq; c += blockDim.x * W) {
    load_w<W>(s + off + c, v);
#pragma unroll
    for (int i = 0; i < W; i++)
      if (c + i <= last) mx = fmaxf(mx, v[i] * scale);
  }
  mx = block_max(mx, red);
  for (int c = threadIdx.x * W; c < seq; c += blockDim.x * W) {
    load_w<W>(s + off + c, v);
#pragma unroll
    for (int i = 0; i < W; i++)
      if (c + i <= last) sum += __expf(v[i] * scale - mx);
  }
  float inv = 1.f / block_sum(sum, red);
  for (int c = threadIdx.x * W; c < seq; c += blockDim.x * W) {
    load_w<W>(s + off + c, v);
#pragma unroll
    for (int i = 0; i < W; i++) v[i] = c + i <= last ? __expf(v[i] * scale - mx) * inv : 0.f;
    store_w<W>(p + off + c, v);
  }
}

template <int W> __global__ void softmax_bwd_kernel(const bf16 *p, const bf16 *dp, bf16 *ds, int cols, float scale) {
  __shared__ float red[32];
  size_t off = (size_t)blockIdx.x * cols;
  float a[W], b[W], dot = 0.f;
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_w<W>(p + off + c, a);
    load_w<W>(dp + off + c, b);
#pragma unroll
    for (int i = 0; i < W; i++) dot += a[i] * b[i];
  }
  dot = block_sum(dot, red);
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    load_w<W>(p + off + c, a);
    load_w<W>(dp + off + c, b);
#pragma unroll
    for (int i = 0; i < W; i++) a[i] = scale * a[i] * (b[i] - dot);
    store_w<W>(ds + off + c, a);
  }
}

extern "C" int rt_softmax_causal_fwd(const void *s, void *p, long long batch, int seq, float scale, void *stream,
                                     ts_err *e) {
  RT_TRY(rows_ok(batch * seq, seq, e, "rt_softmax_causal_fwd"));
  cudaStream_t st = (cudaStream_t)stream;
  unsigned rows = (unsigned)(batch * seq);
  if (seq % 8 == 0)
    softmax_causal_kernel<8><<<rows, ROW_THREADS, 0, st>>>((const bf16 *)s, (bf16 *)p, seq, scale);
  else
    softmax_causal_kernel<1><<<rows, ROW_THREADS, 0, st>>>((const bf16 *)s, (bf16 *)p, seq, scale);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_softmax_bwd(const void *p, const void *dp, void *ds, long long rows, int cols, float scale,
                              void *stream, ts_err *e) {
  RT_TRY(rows_ok(rows, cols, e, "rt_softmax_bwd"));
  cudaStream_t st = (cudaStream_t)stream;
  if (cols % 8 == 0)
    softmax_bwd_kernel<8><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)p, (const bf16 *)dp, (bf16 *)ds,
                                                                  cols, scale);
  else
    softmax_bwd_kernel<1><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)p, (const bf16 *)dp, (bf16 *)ds,
                                                                  cols, scale);
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* ---- embedding ---- */

template <int W>
__global__ void embedding_kernel(const bf16 *table, const int32_t *ids, bf16 *y, int cols, long long first_id,
                                 long long table_rows) {
  long long id = (long long)ids[blockIdx.x] - first_id;
  bf16 *yr = y + (size_t)blockIdx.x * cols;
  float v[W];
  for (int c = threadIdx.x * W; c < cols; c += blockDim.x * W) {
    if (id >= 0 && id < table_rows) load_w<W>(table + (size_t)id * cols + c, v);
    else
#pragma unroll
      for (int i = 0; i < W; i++) v[i] = 0.f;
    store_w<W>(yr + c, v);
  }
}

extern "C" int rt_embedding_fwd(const void *table, const int32_t *ids, void *y, long long rows, int cols,
                                long long first_id, long long table_rows, void *stream, ts_err *e) {
  RT_TRY(rows_ok(rows, cols, e, "rt_embedding_fwd"));
  cudaStream_t st = (cudaStream_t)stream;
  if (cols % 8 == 0)
    embedding_kernel<8><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)table, ids, (bf16 *)y, cols, first_id,
                                                                table_rows);
  else
    embedding_kernel<1><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)table, ids, (bf16 *)y, cols, first_id,
                                                                table_rows);
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* ---- cross-entropy ---- */

template <int W>
__global__ void cross_entropy_kernel(const bf16 *logits, const int32_t *labels, float *loss, bf16 *dlogits, int vocab,
                                     float inv_rows) {
  __shared__ float red[32];
  size_t off = (size_t)blockIdx.x * vocab;
  float v[W], mx = -INFINITY, sum = 0.f;
  for (int c = threadIdx.x * W; c < vocab; c += blockDim.x * W) {
    load_w<W>(logits + off + c, v);
#pragma unroll
    for (int i = 0; i < W; i++) mx = fmaxf(mx, v[i]);
  }
  mx = block_max(mx, red);
  for (int c = threadIdx.x * W; c < vocab; c += blockDim.x * W) {
    load_w<W>(logits + off + c, v);
#pragma unroll
    for (int i = 0; i < W; i++) sum += __expf(v[i] - mx);
  }
  sum = block_sum(sum, red);
  int label = labels[blockIdx.x];
  float label_logit = __bfloat162float(logits[off + label]); /* read before dlogits may overwrite it */
  __syncthreads();
  if (threadIdx.x == 0) loss[blockIdx.x] = logf(sum) + mx - label_logit;
  float inv = 1.f / sum;
  for (int c = threadIdx.x * W; c < vocab; c += blockDim.x * W) {
    load_w<W>(logits + off + c, v);
#pragma unroll
    for (int i = 0; i < W; i++) v[i] = (__expf(v[i] - mx) * inv - (c + i == label ? 1.f : 0.f)) * inv_rows;
    store_w<W>(dlogits + off + c, v);
  }
}

extern "C" int rt_cross_entropy(const void *logits, const int32_t *labels, float *loss, void *dlogits,
                                long long rows, int vocab, void *stream, ts_err *e) {
  RT_TRY(rows_ok(rows, vocab, e, "rt_cross_entropy"));
  cudaStream_t st = (cudaStream_t)stream;
  float inv_rows = 1.f / (float)rows;
  if (vocab % 8 == 0)
    cross_entropy_kernel<8><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)logits, labels, loss,
                                                                    (bf16 *)dlogits, vocab, inv_rows);
  else
    cross_entropy_kernel<1><<<(unsigned)rows, ROW_THREADS, 0, st>>>((const bf16 *)logits, labels, loss,
                                                                    (bf16 *)dlogits, vocab, inv_rows);
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* ---- AdamW ----
 * About 30 bytes an element (master, grad, m, v read; master, m, v and the
 * BF16 copy written): the scalar grid-stride loop took 8.3 ms for ~910 M
 * parameters on an H200 (3.3 TB/s). The vector kernel moves four elements per
 * thread in 16-byte (8-byte for BF16) accesses over a grid of resident blocks;
 * the elements before the first 16-byte boundary of `master` and after the last
 * whole group of four go through the same per-element update. Both kernels
 * give the same bits (same expression, FP32). */

static __device__ __forceinline__ float adamw_one(float *m, float *v, float g, float w, const rt_adamw_params &p,
                                                  float bc1, float bc2) {
  const float mi = p.beta1 * *m + (1.f - p.beta1) * g;
  const float vi = p.beta2 * *v + (1.f - p.beta2) * g * g;
  *m = mi;
  *v = vi;
  return w - p.lr * ((mi / bc1) / (sqrtf(vi / bc2) + p.eps) + p.weight_decay * w);
}

__global__ void adamw_kernel(float *master, bf16 *w16, const float *grad, float *m, float *v, long long n,
                             rt_adamw_params p, float bc1, float bc2) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float w = adamw_one(&m[i], &v[i], grad[i], master[i], p, bc1, bc2);
    master[i] = w;
    w16[i] = __float2bfloat16_rn(w);
  }
}

/* Elements [head, head + 4 nvec) four at a time; the `head` elements before
 * and the (n - head) % 4 after one at a time by the first threads of block 0. */
__global__ void __launch_bounds__(ELEM_THREADS) adamw_vec_kernel(float *master, bf16 *w16, const float *grad, float *m,
                                                                 float *v, long long n, int head, long long nvec,
                                                                 rt_adamw_params p, float bc1, float bc2) {
  float4 *m4 = reinterpret_cast<float4 *>(master + head), *mm4 = reinterpret_cast<float4 *>(m + head);
  float4 *v4 = reinterpret_cast<float4 *>(v + head);
  const float4 *g4 = reinterpret_cast<const float4 *>(grad + head);
  uint2 *w4 = reinterpret_cast<uint2 *>(w16 + head);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < nvec; i += (long long)gridDim.x * blockDim.x) {
    const float4 g = __ldcs(&g4[i]); /* read once: streaming */
    float4 w = m4[i], a = mm4[i], b = v4[i];
    w.x = adamw_one(&a.x, &b.x, g.x, w.x, p, bc1, bc2);
    w.y = adamw_one(&a.y, &b.y, g.y, w.y, p, bc1, bc2);
    w.z = adamw_one(&a.z, &b.z, g.z, w.z, p, bc1, bc2);
    w.w = adamw_one(&a.w, &b.w, g.w, w.w, p, bc1, bc2);
    m4[i] = w, mm4[i] = a, v4[i] = b;
    uint2 h;
    *reinterpret_cast<__nv_bfloat162 *>(&h.x) = __floats2bfloat162_rn(w.x, w.y);
    *reinterpret_cast<__nv_bfloat162 *>(&h.y) = __floats2bfloat162_rn(w.z, w.w);
    w4[i] = h;
  }
  if (blockIdx.x == 0 && threadIdx.x < 8) {
    const long long tail = head + 4 * nvec;
    const long long i = threadIdx.x < 4 ? threadIdx.x : tail + threadIdx.x - 4;
    if ((threadIdx.x < 4 && i < head) || (threadIdx.x >= 4 && i < n)) {
      const float w = adamw_one(&m[i], &v[i], grad[i], master[i], p, bc1, bc2);
      master[i] = w;
      w16[i] = __float2bfloat16_rn(w);
    }
  }
}

extern "C" int rt_adamw_step(float *master, void *weights_bf16, const float *grad, float *m, float *v, long long n,
                             rt_adamw_params p, void *stream, ts_err *e) {
  RT_TRY(n_ok(n, e, "rt_adamw_step"));
  if (p.step < 1) return ts_fail_sys(e, "rt_adamw_step: step %d must count from 1", p.step);
  float bc1 = 1.f - powf(p.beta1, (float)p.step), bc2 = 1.f - powf(p.beta2, (float)p.step);
  cudaStream_t st = (cudaStream_t)stream;
  /* the vector kernel when, after the same `head` elements, every array sits on its access size */
  const int head = (int)((4 - ((uintptr_t)master / 4) % 4) % 4);
  const bool aligned = (uintptr_t)master % 4 == 0 && (uintptr_t)(grad + head) % 16 == 0 &&
                       (uintptr_t)(m + head) % 16 == 0 && (uintptr_t)(v + head) % 16 == 0 &&
                       (uintptr_t)((bf16 *)weights_bf16 + head) % 8 == 0;
  if (aligned && n >= head + 4) {
    const long long nvec = (n - head) / 4;
    long long blocks = (nvec + ELEM_THREADS - 1) / ELEM_THREADS;
    if (blocks > 132LL * 8) blocks = 132LL * 8; /* about one resident wave of 256-thread blocks; the loop strides on */
    adamw_vec_kernel<<<(unsigned)blocks, ELEM_THREADS, 0, st>>>(master, (bf16 *)weights_bf16, grad, m, v, n, head,
                                                                nvec, p, bc1, bc2);
  } else {
    adamw_kernel<<<elem_blocks(n), ELEM_THREADS, 0, st>>>(master, (bf16 *)weights_bf16, grad, m, v, n, p, bc1, bc2);
  }
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* ---- random inputs ---- */

__device__ __forceinline__ float uniform_nonzero(uint64_t seed, long long i) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1); /* splitmix64 */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  float u = (float)(z >> 40) * (1.f / 16777216.f) * 2.f - 1.f; /* [-1, 1) */
  if (fabsf(u) < 1e-3f) u = u < 0.f ? -1e-3f : 1e-3f;
  return u;
}

__global__ void fill_bf16_kernel(bf16 *x, long long n, uint64_t seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    x[i] = __float2bfloat16_rn(scale * uniform_nonzero(seed, i));
}
__global__ void fill_f32_kernel(float *x, long long n, uint64_t seed, float lo, float hi) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    x[i] = lo + (hi - lo) * (0.5f + 0.5f * uniform_nonzero(seed, i));
}
__global__ void fill_labels_kernel(int32_t *x, long long n, int vocab, uint64_t seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    int l = (int)((uniform_nonzero(seed, i) * 0.5f + 0.5f) * vocab);
    x[i] = l < 0 ? 0 : (l >= vocab ? vocab - 1 : l);
  }
}

extern "C" int rt_fill_random_bf16(void *x, long long n, uint64_t seed, float scale, void *stream, ts_err *e) {
  RT_TRY(n_ok(n, e, "rt_fill_random_bf16"));
  fill_bf16_kernel<<<elem_blocks(n), ELEM_THREADS, 0, (cudaStream_t)stream>>>((bf16 *)x, n, seed, scale);
  RT_CHECK_LAUNCH(e);
  return 0;
}
extern "C" int rt_fill_random_f32(float *x, long long n, uint64_t seed, float scale, void *stream, ts_err *e) {
  return rt_fill_random_f32_range(x, n, seed, -scale, scale, stream, e);
}
extern "C" int rt_fill_random_f32_range(float *x, long long n, uint64_t seed, float lo, float hi, void *stream,
                                        ts_err *e) {
  RT_TRY(n_ok(n, e, "rt_fill_random_f32_range"));
  fill_f32_kernel<<<elem_blocks(n), ELEM_THREADS, 0, (cudaStream_t)stream>>>(x, n, seed, lo, hi);
  RT_CHECK_LAUNCH(e);
  return 0;
}
extern "C" int rt_fill_labels(int32_t *labels, long long n, int vocab, uint64_t seed, void *stream, ts_err *e) {
  RT_TRY(n_ok(n, e, "rt_fill_labels"));
  if (vocab < 1) return ts_fail_sys(e, "rt_fill_labels: vocab %d", vocab);
  fill_labels_kernel<<<elem_blocks(n), ELEM_THREADS, 0, (cudaStream_t)stream>>>(labels, n, vocab, seed);
  RT_CHECK_LAUNCH(e);
  return 0;
}

/* gemv.cu — the weight-streaming decode GEMV (gemv.h), moved out of the
 * runtime: it lost to cuBLASLt at every decode shape measured (README.md). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "gemv.h"
#include "gpu_check.h"
#include "ops_device.cuh"

typedef __nv_bfloat16 bf16;

#define DEC_CUDA(e, call) CUDA_CHECK(e, call)
#define DEC_LAUNCHED(e) DEC_CUDA(e, cudaGetLastError())

/* ---- GEMV, NN: W [k x n] ------------------------------------------------------
 * Thread: 8 adjacent columns (one 16-byte load per row of W); block: 128
 * threads = 1024 columns, over a chunk of kc rows of W (X's chunk in shared
 * memory); 8 rows of W loaded before they are used; the block's sums added
 * into ws in FP32. */

#define GEMV_THREADS 128
#define GEMV_KC_MAX 512
#define GEMV_UNROLL 8

template <int M>
__global__ void __launch_bounds__(GEMV_THREADS)
    gemv_nn_kernel(const bf16 *__restrict__ X, const bf16 *__restrict__ W, float *ws, long long n, long long k, int kc) {
  __shared__ float xs[M][GEMV_KC_MAX];
  const long long k0 = (long long)blockIdx.y * kc;
  const int len = (int)(k - k0 < kc ? k - k0 : kc);
  for (int i = threadIdx.x; i < M * len; i += GEMV_THREADS) {
    const int r = i / len, c = i % len;
    xs[r][c] = __bfloat162float(X[(long long)r * k + k0 + c]);
  }
  __syncthreads();
  const long long col = ((long long)blockIdx.x * GEMV_THREADS + threadIdx.x) * 8;
  if (col >= n) return;
  float acc[M][8];
#pragma unroll
  for (int r = 0; r < M; r++)
#pragma unroll
    for (int i = 0; i < 8; i++) acc[r][i] = 0.f;
  const bf16 *w = W + k0 * n + col;
  int kk = 0;
  for (; kk + GEMV_UNROLL <= len; kk += GEMV_UNROLL) {
    uint4 u[GEMV_UNROLL];
#pragma unroll
    for (int j = 0; j < GEMV_UNROLL; j++) u[j] = __ldcs((const uint4 *)(w + (long long)(kk + j) * n));
#pragma unroll
    for (int j = 0; j < GEMV_UNROLL; j++) {
      float f[8];
      unpack8(u[j], f);
#pragma unroll
      for (int r = 0; r < M; r++) {
        const float xv = xs[r][kk + j];
#pragma unroll
        for (int i = 0; i < 8; i++) acc[r][i] = fmaf(xv, f[i], acc[r][i]);
      }
    }
  }
  for (; kk < len; kk++) {
    float f[8];
    unpack8(__ldcs((const uint4 *)(w + (long long)kk * n)), f);
#pragma unroll
    for (int r = 0; r < M; r++)
#pragma unroll
      for (int i = 0; i < 8; i++) acc[r][i] = fmaf(xs[r][kk], f[i], acc[r][i]);
  }
#pragma unroll
  for (int r = 0; r < M; r++)
#pragma unroll
    for (int i = 0; i < 8; i++) atomicAdd(ws + (long long)r * n + col + i, acc[r][i]);
}

/* Y = ws in BF16, and ws cleared for the next call (4 elements a thread). */
__global__ void gemv_finish_kernel(float4 *ws, uint2 *Y, long long n4) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n4) return;
  float4 v = ws[i];
  ws[i] = make_float4(0.f, 0.f, 0.f, 0.f);
  __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
  uint2 o;
  o.x = *(uint32_t *)&a, o.y = *(uint32_t *)&b;
  Y[i] = o;
}

extern "C" int dev_gemv_supported(long long m, long long n, long long k) {
  return m >= 1 && m <= DEV_GEMV_MAX_M && n >= 8 && k >= 8 && n % 8 == 0 && k % 8 == 0;
}

extern "C" size_t dev_gemv_ws_bytes(long long m, long long n) { return (size_t)m * (size_t)n * sizeof(float); }

template <int M>
static void launch_nn(dim3 grid, cudaStream_t st, const bf16 *X, const bf16 *W, float *ws, long long n, long long k,
                      int kc) {
  gemv_nn_kernel<M><<<grid, GEMV_THREADS, 0, st>>>(X, W, ws, n, k, kc);
}

extern "C" int dev_gemv_nn(const void *X, const void *W, void *Y, float *ws, int m, long long n, long long k,
                             void *stream, ts_err *e) {
  if (!dev_gemv_supported(m, n, k))
    return ts_fail_sys(e, "dev_gemv_nn: %d x %lld x %lld not supported (m <= %d, n and k multiples of 8)", m, n, k,
                       DEV_GEMV_MAX_M);
  const long long gx = (n / 8 + GEMV_THREADS - 1) / GEMV_THREADS, target = 4LL * sm_count();
  long long splits = (target + gx - 1) / gx;
  long long kc = (k + splits - 1) / splits;
  kc = (kc + 7) / 8 * 8;
  if (kc > GEMV_KC_MAX) kc = GEMV_KC_MAX;
  splits = (k + kc - 1) / kc;
  dim3 grid((unsigned)gx, (unsigned)splits);
  cudaStream_t st = (cudaStream_t)stream;
  const bf16 *x = (const bf16 *)X, *w = (const bf16 *)W;
  switch (m) {
  case 1: launch_nn<1>(grid, st, x, w, ws, n, k, (int)kc); break;
  case 2: launch_nn<2>(grid, st, x, w, ws, n, k, (int)kc); break;
  case 3: launch_nn<3>(grid, st, x, w, ws, n, k, (int)kc); break;
  case 4: launch_nn<4>(grid, st, x, w, ws, n, k, (int)kc); break;
  case 5: launch_nn<5>(grid, st, x, w, ws, n, k, (int)kc); break;
  case 6: launch_nn<6>(grid, st, x, w, ws, n, k, (int)kc); break;
  case 7: launch_nn<7>(grid, st, x, w, ws, n, k, (int)kc); break;
  default: launch_nn<8>(grid, st, x, w, ws, n, k, (int)kc); break;
  }
  DEC_LAUNCHED(e);
  const long long n4 = (long long)m * n / 4;
  gemv_finish_kernel<<<(unsigned)((n4 + 255) / 256), 256, 0, st>>>((float4 *)ws, (uint2 *)Y, n4);
  DEC_LAUNCHED(e);
  return 0;
}

/* ---- GEMV, NT: W [n x k] -------------------------------------------------------
 * Warp: one output column j (row j of W), lanes over k in 16-byte pieces, four
 * pieces loaded before use; 8 warps a block. */

template <int M>
__global__ void __launch_bounds__(256)
    gemv_nt_kernel(const bf16 *__restrict__ X, const bf16 *__restrict__ W, bf16 *Y, long long n, long long k) {
  const int lane = threadIdx.x & 31;
  const long long j = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (j >= n) return;
  const bf16 *w = W + j * k;
  float acc[M];
#pragma unroll
  for (int r = 0; r < M; r++) acc[r] = 0.f;
  long long kk = (long long)lane * 8;
  for (; kk + 3 * 256 < k; kk += 4 * 256) {
    uint4 u[4];
#pragma unroll
    for (int t = 0; t < 4; t++) u[t] = __ldcs((const uint4 *)(w + kk + t * 256));
#pragma unroll
    for (int t = 0; t < 4; t++) {
      float f[8];
      unpack8(u[t], f);
#pragma unroll
      for (int r = 0; r < M; r++) {
        float x[8];
        unpack8(__ldg((const uint4 *)(X + (long long)r * k + kk + t * 256)), x);
#pragma unroll
        for (int i = 0; i < 8; i++) acc[r] = fmaf(x[i], f[i], acc[r]);
      }
    }
  }
  for (; kk < k; kk += 256) {
    float f[8];
    unpack8(__ldcs((const uint4 *)(w + kk)), f);
#pragma unroll
    for (int r = 0; r < M; r++) {
      float x[8];
      unpack8(__ldg((const uint4 *)(X + (long long)r * k + kk)), x);
#pragma unroll
      for (int i = 0; i < 8; i++) acc[r] = fmaf(x[i], f[i], acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < M; r++) {
    float s = acc[r];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == r) Y[(long long)r * n + j] = __float2bfloat16(s);
  }
}

template <int M>
static void launch_nt(cudaStream_t st, const bf16 *X, const bf16 *W, bf16 *Y, long long n, long long k) {
  gemv_nt_kernel<M><<<(unsigned)((n + 7) / 8), 256, 0, st>>>(X, W, Y, n, k);
}

extern "C" int dev_gemv_nt(const void *X, const void *W, void *Y, int m, long long n, long long k, void *stream,
                             ts_err *e) {
  if (!dev_gemv_supported(m, n, k))
    return ts_fail_sys(e, "dev_gemv_nt: %d x %lld x %lld not supported (m <= %d, n and k multiples of 8)", m, n, k,
                       DEV_GEMV_MAX_M);
  cudaStream_t st = (cudaStream_t)stream;
  const bf16 *x = (const bf16 *)X, *w = (const bf16 *)W;
  bf16 *y = (bf16 *)Y;
  switch (m) {
  case 1: launch_nt<1>(st, x, w, y, n, k); break;
  case 2: launch_nt<2>(st, x, w, y, n, k); break;
  case 3: launch_nt<3>(st, x, w, y, n, k); break;
  case 4: launch_nt<4>(st, x, w, y, n, k); break;
  case 5: launch_nt<5>(st, x, w, y, n, k); break;
  case 6: launch_nt<6>(st, x, w, y, n, k); break;
  case 7: launch_nt<7>(st, x, w, y, n, k); break;
  default: launch_nt<8>(st, x, w, y, n, k); break;
  }
  DEC_LAUNCHED(e);
  return 0;
}


/* add_rmsnorm.cu — the residual add and the next RMSNorm as one kernel
 * (add_rmsnorm.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "add_rmsnorm.h"
#include "gpu_check.h"

typedef __nv_bfloat16 bf16;

/* Row per block of ADDN_THREADS threads, the row in registers: x = bf16(x + p),
 * y = x * rstd * gamma (BF16), rstd = 1 / sqrt(mean(x^2) + eps). The same
 * threads, chunk order and two-warp sum as rt_rmsnorm_fwd's row kernel
 * (rt_ops.cu), so x and y are bit-equal to rt_add then rt_rmsnorm_fwd. */
#define ADDN_THREADS 64
#define ADDN_CHUNKS 8

__global__ void __launch_bounds__(ADDN_THREADS)
    add_rmsnorm_kernel(bf16 *__restrict__ x, const bf16 *__restrict__ p, const bf16 *__restrict__ gamma,
                       bf16 *__restrict__ y, float *__restrict__ rstd_out, int cols, float eps) {
  __shared__ float red[ADDN_THREADS / 32];
  const size_t off = (size_t)blockIdx.x * cols;
  const int chunks = cols / 8;
  float v[ADDN_CHUNKS][8];
  float s = 0.f;
  uint4 ua[ADDN_CHUNKS], ub[ADDN_CHUNKS]; /* every load issued before the first store */
#pragma unroll
  for (int k = 0; k < ADDN_CHUNKS; k++) {
    const int q = threadIdx.x + k * ADDN_THREADS;
    ua[k] = ub[k] = make_uint4(0, 0, 0, 0);
    if (q < chunks)
      ua[k] = *reinterpret_cast<const uint4 *>(x + off + 8 * q), ub[k] = *reinterpret_cast<const uint4 *>(p + off + 8 * q);
  }
#pragma unroll
  for (int k = 0; k < ADDN_CHUNKS; k++) {
    const int q = threadIdx.x + k * ADDN_THREADS;
    if (q >= chunks) continue;
    const __nv_bfloat162 *ha = reinterpret_cast<const __nv_bfloat162 *>(&ua[k]),
                         *hb = reinterpret_cast<const __nv_bfloat162 *>(&ub[k]);
    uint4 o;
    __nv_bfloat162 *ho = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 fa = __bfloat1622float2(ha[i]), fb = __bfloat1622float2(hb[i]);
      ho[i] = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
      const float2 f = __bfloat1622float2(ho[i]);
      v[k][2 * i] = f.x, v[k][2 * i + 1] = f.y;
      s += (f.x - 0.f) * (f.x - 0.f) + (f.y - 0.f) * (f.y - 0.f);
    }
    *reinterpret_cast<uint4 *>(x + off + 8 * q) = o;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
  __syncthreads();
  const float rstd = rsqrtf((red[0] + red[1]) / cols + eps);
#pragma unroll
  for (int k = 0; k < ADDN_CHUNKS; k++) {
    const int q = threadIdx.x + k * ADDN_THREADS;
    if (q >= chunks) continue;
    uint4 g = *reinterpret_cast<const uint4 *>(gamma + 8 * q), o;
    const __nv_bfloat162 *hg = reinterpret_cast<const __nv_bfloat162 *>(&g);
    __nv_bfloat162 *ho = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 fg = __bfloat1622float2(hg[i]);
      ho[i] = __floats2bfloat162_rn((v[k][2 * i] - 0.f) * rstd * fg.x + 0.f,
                                    (v[k][2 * i + 1] - 0.f) * rstd * fg.y + 0.f);
    }
    *reinterpret_cast<uint4 *>(y + off + 8 * q) = o;
  }
  if (threadIdx.x == 0) rstd_out[blockIdx.x] = rstd;
}

extern "C" int dev_add_rmsnorm_fits(int cols) { return cols > 0 && cols % 8 == 0 && cols <= 8 * ADDN_CHUNKS * ADDN_THREADS; }

extern "C" int dev_add_rmsnorm(void *x, const void *p, const void *gamma, void *y, float *rstd, long long rows,
                                 int cols, float eps, void *stream, ts_err *e) {
  if (!dev_add_rmsnorm_fits(cols) || rows < 0 || rows > 0x7fffffffLL)
    return ts_fail_sys(e, "dev_add_rmsnorm: %lld rows of %d columns (a multiple of 8, at most %d)", rows, cols,
                       8 * ADDN_CHUNKS * ADDN_THREADS);
  if (rows == 0) return 0;
  add_rmsnorm_kernel<<<(unsigned)rows, ADDN_THREADS, 0, (cudaStream_t)stream>>>(
      (bf16 *)x, (const bf16 *)p, (const bf16 *)gamma, (bf16 *)y, rstd, cols, eps);
  CUDA_CHECK(e, cudaGetLastError());
  return 0;
}


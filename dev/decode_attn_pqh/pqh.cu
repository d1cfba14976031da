/* pqh.cu — the timing caches' fill (pqh.h); the kernel itself is the library's
 * (runtime/ops/infer_decode_pqh.cu, moved there from this folder on 2026-12-06). */
#include <stdint.h>

#include "gpu_check.h"
#include "pqh.h"

__global__ void pq_fill_kernel(uint32_t *w, size_t nw, int fp8, float *scales, long long rows) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nw; i += stride) {
    uint32_t x = (uint32_t)(i * 0x9e3779b1u) ^ (uint32_t)(i >> 29);
    x ^= x >> 15, x *= 0x2c1b3c6du, x ^= x >> 12;
    /* BF16: sign, exponent 120, random mantissa; E4M3: exponent bit 0 cleared (0xf7), so no NaN code */
    w[i] = fp8 ? x & 0xf7f7f7f7u : (x & 0x807f807fu) | 0x3c003c00u;
  }
  for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; scales && r < rows; r += (long long)stride)
    scales[r] = 1.f / 448.f;
}

extern "C" int dev_pqh_fill(void *bytes, size_t n, int fp8, float *scales, long long rows, void *stream, ts_err *e) {
  if (n % 4) return ts_fail_sys(e, "dev_pqh_fill: %zu bytes is not a multiple of 4", n);
  pq_fill_kernel<<<4096, 256, 0, (cudaStream_t)stream>>>((uint32_t *)bytes, n / 4, fp8, scales, rows);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

/* taco_testdata.cu — random test tensors on the GPU (see taco_testdata.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "taco_dispatch.cuh"
#include "taco_testdata.h"

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Box-Muller from two 32-bit halves of one hash */
__device__ __forceinline__ float normal_at(uint64_t seed, size_t i) {
  uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1));
  float u1 = ((float)(uint32_t)h + 0.5f) * 2.3283064e-10f, u2 = ((float)(uint32_t)(h >> 32) + 0.5f) * 2.3283064e-10f;
  return sqrtf(-2.0f * __logf(u1)) * __cosf(6.2831853f * u2);
}

template <typename T> __device__ __forceinline__ void put(T *x, size_t i, float v);
template <> __device__ __forceinline__ void put<float>(float *x, size_t i, float v) { x[i] = v; }
template <> __device__ __forceinline__ void put<__nv_bfloat16>(__nv_bfloat16 *x, size_t i, float v) {
  x[i] = __float2bfloat16_rn(v);
}

template <typename T> __global__ void fill_kernel(T *x, size_t n, uint64_t seed, float scale) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    put(x, i, scale * normal_at(seed, i));
}

extern "C" int taco_fill_random(void *x, taco_dtype dt, size_t n, uint64_t seed, float scale, void *stream) {
  if (n == 0) return 0;
  if (!x) return TACO_FAIL("NULL buffer");
  cudaStream_t s = (cudaStream_t)stream;
  if (dt == TACO_DTYPE_BF16)
    fill_kernel<__nv_bfloat16><<<4096, 256, 0, s>>>((__nv_bfloat16 *)x, n, seed, scale);
  else
    fill_kernel<float><<<4096, 256, 0, s>>>((float *)x, n, seed, scale);
  TACO_CUDA_CHECK(cudaGetLastError());
  return 0;
}

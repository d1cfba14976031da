/* coll_host.cu — the plain sum of k blocks (coll_host.h), the "decode" of the
 * uncompressed direct path. Reference: coll_host_sum_ref.c (same order of
 * additions: block 0 first, in float, one rounding at the end).
 * Memory bound: 16-byte loads per block and thread, a grid-stride loop. */
#include <stdint.h>

#include "coll_host.h"
#include "taco_fp8.h"

template <typename T>
__device__ __forceinline__ float to_f(T v);
template <>
__device__ __forceinline__ float to_f<uint16_t>(uint16_t v) { return taco_bf16_to_float(v); }
template <>
__device__ __forceinline__ float to_f<float>(float v) { return v; }
template <typename T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ uint16_t from_f<uint16_t>(float v) { return taco_bf16_from_float(v); }
template <>
__device__ __forceinline__ float from_f<float>(float v) { return v; }

/* Each thread sums one 16-byte vector (V elements) of every block; the tail
 * (n not a multiple of V) element by element. */
template <typename T>
__global__ void sum_blocks(const unsigned char *blocks, int k, size_t stride, size_t n, T *dst) {
  constexpr int V = 16 / sizeof(T);
  size_t nv = n / V;
  size_t step = (size_t)gridDim.x * blockDim.x;
  for (size_t v = (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < nv; v += step) {
    float acc[V];
    for (int e = 0; e < V; e++) acc[e] = 0.0f;
    for (int b = 0; b < k; b++) {
      uint4 raw = *(const uint4 *)(blocks + (size_t)b * stride + v * 16);
      const T *x = (const T *)&raw;
      for (int e = 0; e < V; e++) acc[e] += to_f<T>(x[e]);
    }
    uint4 out;
    T *y = (T *)&out;
    for (int e = 0; e < V; e++) y[e] = from_f<T>(acc[e]);
    *(uint4 *)(dst + v * V) = out;
  }
  for (size_t i = nv * V + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
    float acc = 0.0f;
    for (int b = 0; b < k; b++) acc += to_f<T>(((const T *)(blocks + (size_t)b * stride))[i]);
    dst[i] = from_f<T>(acc);
  }
}

extern "C" int coll_host_sum(const void *blocks, int k, size_t stride_bytes, size_t n, taco_dtype dtype, void *dst,
                             void *stream) {
  if (n == 0) return 0;
  if (k < 1 || ((uintptr_t)blocks & 15u) || ((uintptr_t)dst & 15u) || (stride_bytes & 15u))
    return (int)cudaErrorInvalidValue;
  int dev = 0, sms = 0;
  cudaError_t ce = cudaGetDevice(&dev);
  if (ce == cudaSuccess) ce = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (ce != cudaSuccess) return (int)ce;
  size_t es = dtype == TACO_DTYPE_BF16 ? 2 : 4, vecs = n * es / 16 + 1;
  size_t want = (vecs + 255) / 256, cap = (size_t)sms * 8;
  unsigned grid = (unsigned)(want < cap ? want : cap);
  cudaStream_t st = (cudaStream_t)stream;
  if (dtype == TACO_DTYPE_BF16)
    sum_blocks<uint16_t><<<grid, 256, 0, st>>>((const unsigned char *)blocks, k, stride_bytes, n, (uint16_t *)dst);
  else
    sum_blocks<float><<<grid, 256, 0, st>>>((const unsigned char *)blocks, k, stride_bytes, n, (float *)dst);
  return (int)cudaGetLastError();
}

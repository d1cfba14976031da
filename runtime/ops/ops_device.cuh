/* ops_device.cuh — small helpers the decode kernels share (CUDA only):
 * the device's SM count (cached; 132, the H100/H200's, when it cannot be
 * read) and the unpacking of 8 BF16 values from one 16-byte load. */
#ifndef OPS_DEVICE_CUH
#define OPS_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

static inline int sm_count(void) {
  static int sms;
  if (!sms) {
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms < 1)
      sms = 132;
  }
  return sms;
}

__device__ __forceinline__ void unpack8(const uint4 &u, float *f) {
  const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x, f[2 * i + 1] = t.y;
  }
}

#endif

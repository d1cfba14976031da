/* train_stats.cu — moments and absolute maximum of a BF16 tensor (train_emu.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

extern "C" int train_stats_bf16(const void *x, size_t n, double *acc_dev, cudaStream_t stream);

__global__ void train_stats_kernel(const __nv_bfloat16 *x, size_t n, double *acc) {
  double s1 = 0, s2 = 0, s4 = 0, mx = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    double v = (double)__bfloat162float(x[i]), v2 = v * v;
    s1 += v, s2 += v2, s4 += v2 * v2;
    mx = fabs(v) > mx ? fabs(v) : mx;
  }
  for (int o = 16; o; o >>= 1) {
    s1 += __shfl_down_sync(0xffffffffu, s1, o), s2 += __shfl_down_sync(0xffffffffu, s2, o);
    s4 += __shfl_down_sync(0xffffffffu, s4, o);
    double m2 = __shfl_down_sync(0xffffffffu, mx, o);
    mx = m2 > mx ? m2 : mx;
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&acc[0], s1), atomicAdd(&acc[1], s2), atomicAdd(&acc[2], s4);
    /* non-negative doubles order as their bit patterns */
    atomicMax((unsigned long long *)&acc[3], (unsigned long long)__double_as_longlong(mx));
  }
}

extern "C" int train_stats_bf16(const void *x, size_t n, double *acc_dev, cudaStream_t stream) {
  if (cudaMemsetAsync(acc_dev, 0, 4 * sizeof(double), stream) != cudaSuccess) return -1;
  train_stats_kernel<<<1024, 256, 0, stream>>>((const __nv_bfloat16 *)x, n, acc_dev);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

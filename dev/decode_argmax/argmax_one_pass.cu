/* argmax_one_pass.cu — the executor's greedy sampling until 2026-12-04 (argmax_one_pass.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "argmax_one_pass.h"
#include "gpu_check.h"

typedef __nv_bfloat16 bf16;

__global__ void dev_argmax_one_pass_kernel(const bf16 *logits, int32_t *token, int batch, int tp, long long vl,
                                           long long valid) {
  const int b = blockIdx.x;
  float best = -INFINITY;
  long long bi = 0x7fffffffffffffffLL;
  for (int r = 0; r < tp; r++) {
    const bf16 *row = logits + ((long long)r * batch + b) * vl;
    for (long long j = threadIdx.x; j < vl; j += blockDim.x) {
      long long g = (long long)r * vl + j;
      if (g >= valid) break;
      float v = __bfloat162float(row[j]);
      if (v > best || (v == best && g < bi)) best = v, bi = g;
    }
  }
  __shared__ float sv[32];
  __shared__ long long si[32];
  for (int o = 16; o > 0; o >>= 1) {
    float v2 = __shfl_xor_sync(0xffffffffu, best, o);
    long long i2 = __shfl_xor_sync(0xffffffffu, bi, o);
    if (v2 > best || (v2 == best && i2 < bi)) best = v2, bi = i2;
  }
  if ((threadIdx.x & 31) == 0) sv[threadIdx.x >> 5] = best, si[threadIdx.x >> 5] = bi;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); w++)
      if (sv[w] > best || (sv[w] == best && si[w] < bi)) best = sv[w], bi = si[w];
    token[b] = (int32_t)(bi == 0x7fffffffffffffffLL ? 0 : bi);
  }
}

extern "C" int dev_argmax_one_pass(const void *logits, int32_t *token, int batch, int tp, long long vocab_local,
                                   long long vocab_valid, void *stream, ts_err *e) {
  if (batch < 1 || tp < 1 || vocab_local < 1) return ts_fail_sys(e, "dev_argmax_one_pass: bad shape");
  dev_argmax_one_pass_kernel<<<batch, 512, 0, (cudaStream_t)stream>>>((const bf16 *)logits, token, batch, tp,
                                                                      vocab_local, vocab_valid);
  CUDA_CHECK(e, cudaGetLastError());
  return 0;
}

/* coll_emu_reduce.cu — the plain elementwise reduction of the emulated TP
 * all-reduce (coll_emu.h): FP32 in rank order, one rounding, every output. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "coll_emu.h"

extern "C" int coll_emu_fail(const char *fmt, ...);

struct emu_ptrs {
  const void *in[COLL_EMU_MAX_RANKS];
  void *out[COLL_EMU_MAX_RANKS];
};

__device__ static float emu_load(const void *x, taco_dtype dt, size_t i) {
  return dt == TACO_DTYPE_BF16 ? __bfloat162float(((const __nv_bfloat16 *)x)[i]) : ((const float *)x)[i];
}

__global__ void emu_reduce_kernel(emu_ptrs p, int k, size_t n, taco_dtype dt, coll_emu_op op) {
  const float inv = 1.0f / (float)k;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float acc = emu_load(p.in[0], dt, i);
    if (op == COLL_EMU_AVG) acc = __fmul_rn(acc, inv);
    for (int r = 1; r < k; r++) {
      float v = emu_load(p.in[r], dt, i);
      if (op == COLL_EMU_MAX) acc = fmaxf(acc, v);
      else acc = __fadd_rn(acc, op == COLL_EMU_AVG ? __fmul_rn(v, inv) : v);
    }
    for (int r = 0; r < k; r++) {
      if (dt == TACO_DTYPE_BF16) ((__nv_bfloat16 *)p.out[r])[i] = __float2bfloat16_rn(acc);
      else ((float *)p.out[r])[i] = acc;
    }
  }
}

extern "C" int coll_emu_plain(const void *const *in, void *const *out, int k, size_t n, taco_dtype dt, coll_emu_op op,
                              void *stream) {
  if (k < 1 || k > COLL_EMU_MAX_RANKS) return coll_emu_fail("coll_emu: %d ranks", k);
  if (!n) return 0;
  emu_ptrs p;
  for (int r = 0; r < k; r++) p.in[r] = in[r], p.out[r] = out[r];
  size_t blocks = (n + 255) / 256;
  if (blocks > 4096) blocks = 4096;
  emu_reduce_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(p, k, n, dt, op);
  cudaError_t ce = cudaGetLastError();
  return ce == cudaSuccess ? 0 : coll_emu_fail("coll_emu_plain: %s", cudaGetErrorString(ce));
}

/* fp8_ablate.cu — CUDA kernels of the ablation codecs (fp8_ablate.h): one
 * thread per group running the per-group code the reference runs
 * (fp8_ablate_group.h). Written for checking and ablation runs, not speed. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "fp8_ablate_group.h"

static char fa_err[256];
const char *fp8_ablate_last_error(void) { return fa_err; }

static int fa_check(cudaError_t ce, int line) {
  if (ce == cudaSuccess) return 0;
  snprintf(fa_err, sizeof fa_err, "fp8_ablate.cu:%d: %s", line, cudaGetErrorString(ce));
  return -1;
}
static int fa_params(taco_params p) {
  if (p.group < 32 || p.group > FA_MAX_GROUP || (p.group & (p.group - 1))) {
    snprintf(fa_err, sizeof fa_err, "fp8_ablate: group %d is not a power of two in [32, 512]", p.group);
    return -1;
  }
  return 0;
}

__global__ void fa_encode_kernel(fp8_ablate_kind k, const void *x, taco_dtype dt, size_t n, taco_params p, void *block) {
  size_t gi = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (gi < fa_groups(n, p.group)) fa_encode_one(k, x, dt, n, p, block, gi);
}
__global__ void fa_decode_sum_kernel(fp8_ablate_kind k, const void *in, int nb, size_t n, taco_params p, void *y,
                                     taco_dtype dt) {
  size_t gi = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (gi < fa_groups(n, p.group)) fa_decode_sum_one(k, in, nb, n, p, y, dt, gi);
}
__global__ void fa_dse_kernel(fp8_ablate_kind k, const void *in, int nb, size_t n, taco_params p, void *block) {
  size_t gi = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (gi < fa_groups(n, p.group)) fa_decode_sum_encode_one(k, in, nb, n, p, block, gi);
}

static unsigned fa_grid(size_t n, int g) { return (unsigned)((taco_groups(n, g) + 127) / 128); }

extern "C" int fp8_ablate_encode(fp8_ablate_kind k, const void *x, taco_dtype dt, size_t n, taco_params p, void *block,
                                 void *stream) {
  if (fa_params(p)) return -1;
  if (!n) return 0;
  fa_encode_kernel<<<fa_grid(n, p.group), 128, 0, (cudaStream_t)stream>>>(k, x, dt, n, p, block);
  return fa_check(cudaGetLastError(), __LINE__);
}
extern "C" int fp8_ablate_decode_sum(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p, void *y,
                                     taco_dtype dt, void *stream) {
  if (fa_params(p)) return -1;
  if (!n) return 0;
  fa_decode_sum_kernel<<<fa_grid(n, p.group), 128, 0, (cudaStream_t)stream>>>(k, in, nblocks, n, p, y, dt);
  return fa_check(cudaGetLastError(), __LINE__);
}
extern "C" int fp8_ablate_decode_sum_encode(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p,
                                            void *block, void *stream) {
  if (fa_params(p)) return -1;
  if (!n) return 0;
  fa_dse_kernel<<<fa_grid(n, p.group), 128, 0, (cudaStream_t)stream>>>(k, in, nblocks, n, p, block);
  return fa_check(cudaGetLastError(), __LINE__);
}

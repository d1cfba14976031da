/* coll_check.cu — random fill, poison, error metrics (see coll_check.h). */
#include "coll_check.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static __thread char check_error[512];
const char *coll_check_last_error(void) { return check_error; }

static int check_launch(const char *file, int line, const char *what) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return 0;
  snprintf(check_error, sizeof check_error, "%s:%d: %s: %s", file, line, what, cudaGetErrorString(e));
  return -1;
}
#define LAUNCHED(what) check_launch(__FILE__, __LINE__, what)

__device__ static inline float load(const void *p, taco_dtype dt, size_t i) {
  return dt == TACO_DTYPE_FP32 ? ((const float *)p)[i] : __bfloat162float(((const __nv_bfloat16 *)p)[i]);
}
__device__ static inline void store(void *p, taco_dtype dt, size_t i, float v) {
  if (dt == TACO_DTYPE_FP32) ((float *)p)[i] = v;
  else ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v);
}

__device__ static inline unsigned long long mix(unsigned long long z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ static void fill_random_kernel(void *x, taco_dtype dt, size_t n, unsigned long long seed, float sd) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    unsigned long long h = mix(seed ^ mix(i));
    float u1 = ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
    float u2 = (float)((h >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    float v = sd * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    /* An outlier channel, of one sign on every rank as in real activations
     * (so sums across ranks add up rather than cancel). */
    if ((i / 128) % 97 == 5 && i % 128 == 17) v = 100.0f * (1.0f + fabsf(v));
    store(x, dt, i, v);
  }
}

__global__ static void fill_poison_kernel(void *x, taco_dtype dt, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    store(x, dt, i, __int_as_float(0x7fc00000));
}

/* One warp per window of `group` elements. */
__global__ static void compare_kernel(const void *out, const void *ref, taco_dtype dt, size_t n, int group,
                                      coll_err_acc *acc) {
  size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32, nwarps = (size_t)gridDim.x * blockDim.x / 32;
  int lane = threadIdx.x % 32;
  size_t windows = (n + group - 1) / group;
  double err2_all = 0, ref2_all = 0;
  unsigned long long bad = 0;
  unsigned int unwritten = 0;
  for (size_t w = warp; w < windows; w += nwarps) {
    float e2 = 0, r2 = 0;
    size_t end = (w + 1) * (size_t)group < n ? (w + 1) * (size_t)group : n;
    for (size_t i = w * (size_t)group + lane; i < end; i += 32) {
      float o = load(out, dt, i), r = load(ref, dt, i);
      if (!isfinite(o)) {
        if (isnan(o)) unwritten++;
        bad++;
        continue;
      }
      float d = o - r;
      e2 += d * d;
      r2 += r * r;
    }
    for (int s = 16; s; s >>= 1) {
      e2 += __shfl_xor_sync(0xffffffffu, e2, s);
      r2 += __shfl_xor_sync(0xffffffffu, r2, s);
    }
    if (lane == 0) {
      float rel = r2 > 0 ? sqrtf(e2 / r2) : (e2 > 0 ? 1e30f : 0.0f);
      atomicMax(&acc->max_group_rel_bits, __float_as_uint(rel));
      err2_all += e2;
      ref2_all += r2;
    }
  }
  for (int s = 16; s; s >>= 1) {
    bad += __shfl_xor_sync(0xffffffffu, bad, s);
    unwritten += __shfl_xor_sync(0xffffffffu, unwritten, s);
  }
  if (lane == 0) {
    if (err2_all > 0) atomicAdd(&acc->err2, err2_all);
    if (ref2_all > 0) atomicAdd(&acc->ref2, ref2_all);
    if (bad) atomicAdd(&acc->nonfinite, bad);
    if (unwritten) atomicAdd(&acc->unwritten, unwritten);
  }
}

__global__ static void scale_cols_kernel(void *x, taco_dtype dt, size_t rows, size_t cols, size_t from, float s) {
  size_t width = cols - from, total = rows * width;
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < total; k += (size_t)gridDim.x * blockDim.x) {
    size_t i = k / width * cols + from + k % width;
    store(x, dt, i, load(x, dt, i) * s);
  }
}

static unsigned int blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return (unsigned int)(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

extern "C" int coll_fill_random(void *x, taco_dtype dt, size_t n, unsigned long long seed, float stddev, void *stream) {
  if (!n) return 0;
  fill_random_kernel<<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(x, dt, n, seed, stddev);
  return LAUNCHED("fill_random_kernel");
}

extern "C" int coll_fill_poison(void *x, taco_dtype dt, size_t n, void *stream) {
  if (!n) return 0;
  fill_poison_kernel<<<blocks_for(n), 256, 0, (cudaStream_t)stream>>>(x, dt, n);
  return LAUNCHED("fill_poison_kernel");
}

extern "C" int coll_compare(const void *out, const void *ref, taco_dtype dt, size_t n, int group, coll_err_acc *acc,
                            void *stream) {
  if (!n) return 0;
  if (group < 1) group = 128;
  size_t windows = (n + group - 1) / group;
  compare_kernel<<<blocks_for(windows * 32), 256, 0, (cudaStream_t)stream>>>(out, ref, dt, n, group, acc);
  return LAUNCHED("compare_kernel");
}

extern "C" double coll_err_max_group_rel(const coll_err_acc *acc) {
  float f;
  memcpy(&f, &acc->max_group_rel_bits, sizeof f);
  return f;
}

extern "C" double coll_err_rel_l2(const coll_err_acc *acc) {
  return acc->ref2 > 0 ? sqrt(acc->err2 / acc->ref2) : (acc->err2 > 0 ? INFINITY : 0.0);
}

extern "C" int coll_scale_cols_ref(void *x, taco_dtype dt, size_t rows, size_t cols, size_t from_col, float scale,
                                   void *stream) {
  if (from_col >= cols || !rows) return 0;
  scale_cols_kernel<<<blocks_for(rows * (cols - from_col)), 256, 0, (cudaStream_t)stream>>>(x, dt, rows, cols,
                                                                                          from_col, scale);
  return LAUNCHED("scale_cols_kernel");
}

/* fp8_plain.cu — CUDA kernels of the per-tensor FP8 codec (fp8_plain.h):
 * absmax, encode, decode-sum; bit-identical to fp8_plain_ref.c. */
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "fp8_plain.h"

static char g_err[256];
const char *fp8_plain_last_error(void) { return g_err; }

static int check(cudaError_t ce, const char *what) {
  if (ce == cudaSuccess) return 0;
  snprintf(g_err, sizeof g_err, "%s: %s", what, cudaGetErrorString(ce));
  return -1;
}

static const int THREADS = 256;

static int grid_for(size_t work) {
  size_t b = (work + THREADS - 1) / THREADS;
  if (b > 132 * 16) b = 132 * 16;
  return b ? (int)b : 1;
}

/* |x| bits of a bf16 (as float bits): integer order = float order, NaN above Inf */
__device__ __forceinline__ unsigned abs_bits(unsigned short h) { return ((unsigned)h << 16) & 0x7FFFFFFFu; }

__global__ void absmax_kernel(const unsigned short *__restrict__ x, size_t n, unsigned *__restrict__ out) {
  unsigned m = 0;
  const size_t n8 = ((size_t)x & 15) ? 0 : n / 8;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += stride) {
    uint4 w = reinterpret_cast<const uint4 *>(x)[i];
    unsigned v[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int k = 0; k < 4; k++) m = max(m, max(abs_bits((unsigned short)(v[k] & 0xffffu)), abs_bits((unsigned short)(v[k] >> 16))));
  }
  for (size_t i = n8 * 8 + (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) m = max(m, abs_bits(x[i]));
  m = __reduce_max_sync(0xffffffffu, m);
  __shared__ unsigned warp_max[32];
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  if (threadIdx.x < 32) {
    m = threadIdx.x < blockDim.x / 32 ? warp_max[threadIdx.x] : 0;
    m = __reduce_max_sync(0xffffffffu, m);
    if (threadIdx.x == 0 && m) atomicMax(out, m);
  }
}

__device__ __forceinline__ float scale_of(const unsigned *absmax) {
  return __fdiv_rn(__uint_as_float(*absmax), FP8_PLAIN_E4M3_MAX);
}

__device__ __forceinline__ unsigned char enc1(unsigned short h, float inv) {
  float v = __fmul_rn(__uint_as_float((unsigned)h << 16), inv);
  return (unsigned char)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

__global__ void encode_kernel(const unsigned short *__restrict__ x, size_t n, const unsigned *__restrict__ absmax,
                              unsigned char *__restrict__ block) {
  const float s = scale_of(absmax);
  const bool coded = fp8_plain_scale_codes(s);
  const float inv = coded ? __fdiv_rn(1.0f, s) : 0.0f;
  const size_t pad = (n + 15) / 16 * 16;
  const size_t n8 = ((size_t)x & 15) ? 0 : n / 8;
  const size_t stride = (size_t)gridDim.x * blockDim.x, t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t i = t0; i < n8; i += stride) {
    uint4 w = reinterpret_cast<const uint4 *>(x)[i];
    unsigned v[4] = {w.x, w.y, w.z, w.w};
    unsigned out[2] = {0, 0};
    if (coded)
#pragma unroll
      for (int k = 0; k < 4; k++) {
        unsigned lo = enc1((unsigned short)(v[k] & 0xffffu), inv), hi = enc1((unsigned short)(v[k] >> 16), inv);
        out[k >> 1] |= (lo | hi << 8) << (16 * (k & 1));
      }
    reinterpret_cast<uint2 *>(block)[i] = make_uint2(out[0], out[1]);
  }
  for (size_t i = n8 * 8 + t0; i < n; i += stride) block[i] = coded ? enc1(x[i], inv) : 0;
  /* padding, the scale, and the 12 zero bytes after it (thread 0 alone writes the scale) */
  for (size_t i = n + t0; i < pad + 16; i += stride)
    if (i < pad || i >= pad + 4) block[i] = 0;
  if (t0 == 0) *reinterpret_cast<float *>(block + pad) = s;
}

__device__ __forceinline__ float dec1(unsigned code) {
  __half_raw hr = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)code, __NV_E4M3);
  return __half2float(__half(hr));
}

__global__ void decode_sum_kernel(const unsigned char *__restrict__ blocks, int nblocks, size_t n, size_t bb,
                                  unsigned short *__restrict__ out) {
  const size_t pad = (n + 15) / 16 * 16;
  const size_t n8 = ((size_t)out & 15) ? 0 : n / 8;
  const size_t stride = (size_t)gridDim.x * blockDim.x, t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  for (size_t i = t0; i < n8; i += stride) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int r = 0; r < nblocks; r++) {
      const unsigned char *b = blocks + (size_t)r * bb;
      const float s = *reinterpret_cast<const float *>(b + pad);
      uint2 w = reinterpret_cast<const uint2 *>(b)[i];
#pragma unroll
      for (int k = 0; k < 8; k++) {
        unsigned code = ((k < 4 ? w.x : w.y) >> (8 * (k & 3))) & 0xffu;
        acc[k] = __fadd_rn(acc[k], __fmul_rn(dec1(code), s));
      }
    }
    unsigned o[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      unsigned lo = __bfloat16_as_ushort(__float2bfloat16_rn(acc[2 * k]));
      unsigned hi = __bfloat16_as_ushort(__float2bfloat16_rn(acc[2 * k + 1]));
      o[k] = lo | hi << 16;
    }
    reinterpret_cast<uint4 *>(out)[i] = make_uint4(o[0], o[1], o[2], o[3]);
  }
  for (size_t i = n8 * 8 + t0; i < n; i += stride) {
    float acc = 0.0f;
    for (int r = 0; r < nblocks; r++) {
      const unsigned char *b = blocks + (size_t)r * bb;
      acc = __fadd_rn(acc, __fmul_rn(dec1(b[i]), *reinterpret_cast<const float *>(b + pad)));
    }
    out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(acc));
  }
}

extern "C" int fp8_plain_encode(const void *x, size_t n, unsigned *scratch, void *block, void *stream) {
  cudaStream_t s = (cudaStream_t)stream;
  if (check(cudaMemsetAsync(scratch, 0, sizeof *scratch, s), "fp8_plain: cudaMemsetAsync")) return -1;
  absmax_kernel<<<grid_for(n / 8 + 1), THREADS, 0, s>>>((const unsigned short *)x, n, scratch);
  if (check(cudaGetLastError(), "fp8_plain: absmax kernel")) return -1;
  encode_kernel<<<grid_for(n / 8 + 1), THREADS, 0, s>>>((const unsigned short *)x, n, scratch, (unsigned char *)block);
  return check(cudaGetLastError(), "fp8_plain: encode kernel");
}

extern "C" int fp8_plain_decode_sum(const void *blocks, int nblocks, size_t n, void *out, void *stream) {
  if (nblocks < 1) {
    snprintf(g_err, sizeof g_err, "fp8_plain_decode_sum: %d blocks", nblocks);
    return -1;
  }
  decode_sum_kernel<<<grid_for(n / 8 + 1), THREADS, 0, (cudaStream_t)stream>>>(
      (const unsigned char *)blocks, nblocks, n, fp8_plain_block_bytes(n), (unsigned short *)out);
  return check(cudaGetLastError(), "fp8_plain: decode-sum kernel");
}

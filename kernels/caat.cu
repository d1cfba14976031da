/* caat.cu — CAAT-Net channel kernels: gather the first `shared` columns of a
 * [rows x cols] tensor into a dense [rows x shared] buffer (what the partial
 * all-reduce sends), scatter them back, and scale the private columns by
 * sqrt(TP). Rows are copied in 16-byte units when the row sizes allow. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "taco_codec.h"
#include "taco_dispatch.cuh"

constexpr int CAAT_BLOCK = 256;

/* dst[r * dst_stride + u] = src[r * src_stride + u] for u < row_units */
template <typename U>
__global__ void __launch_bounds__(CAAT_BLOCK) copy_rows(const U *__restrict__ src, size_t src_stride,
                                                        U *__restrict__ dst, size_t dst_stride, size_t rows,
                                                        size_t row_units) {
  size_t total = rows * row_units;
  for (size_t i = (size_t)blockIdx.x * CAAT_BLOCK + threadIdx.x; i < total; i += (size_t)gridDim.x * CAAT_BLOCK) {
    size_t r = i / row_units, u = i - r * row_units;
    dst[r * dst_stride + u] = src[r * src_stride + u];
  }
}

template <typename T> __device__ __forceinline__ void scale_elem(T *p, float s);
template <> __device__ __forceinline__ void scale_elem<float>(float *p, float s) { *p = *p * s; }
template <> __device__ __forceinline__ void scale_elem<uint16_t>(uint16_t *p, float s) {
  __nv_bfloat16 h = __float2bfloat16_rn(__uint_as_float((uint32_t)*p << 16) * s);
  *p = *reinterpret_cast<uint16_t *>(&h);
}

template <typename T>
__global__ void __launch_bounds__(CAAT_BLOCK) scale_private_kernel(T *x, size_t rows, size_t cols, size_t shared,
                                                                   float s) {
  size_t priv = cols - shared, total = rows * priv;
  for (size_t i = (size_t)blockIdx.x * CAAT_BLOCK + threadIdx.x; i < total; i += (size_t)gridDim.x * CAAT_BLOCK) {
    size_t r = i / priv, c = shared + (i - r * priv);
    scale_elem(x + r * cols + c, s);
  }
}

static unsigned caat_grid(size_t work) {
  size_t blocks = (work + CAAT_BLOCK - 1) / CAAT_BLOCK;
  return (unsigned)(blocks < 65536 ? (blocks ? blocks : 1) : 65536);
}

static int copy_launch(const void *src, size_t src_cols, void *dst, size_t dst_cols, size_t rows, size_t width,
                       taco_dtype dt, void *stream) {
  size_t es = dt == TACO_DTYPE_BF16 ? 2 : 4;
  cudaStream_t s = (cudaStream_t)stream;
  if (rows == 0 || width == 0) return 0;
  if (((src_cols * es) % 16 == 0) && ((dst_cols * es) % 16 == 0) && ((width * es) % 16 == 0) &&
      !(((uintptr_t)src | (uintptr_t)dst) & 15u)) {
    size_t k = 16 / es;
    copy_rows<uint4><<<caat_grid(rows * width / k), CAAT_BLOCK, 0, s>>>((const uint4 *)src, src_cols / k,
                                                                         (uint4 *)dst, dst_cols / k, rows, width / k);
  } else if (es == 2) {
    copy_rows<uint16_t><<<caat_grid(rows * width), CAAT_BLOCK, 0, s>>>((const uint16_t *)src, src_cols,
                                                                        (uint16_t *)dst, dst_cols, rows, width);
  } else {
    copy_rows<uint32_t><<<caat_grid(rows * width), CAAT_BLOCK, 0, s>>>((const uint32_t *)src, src_cols,
                                                                        (uint32_t *)dst, dst_cols, rows, width);
  }
  TACO_CUDA_CHECK(cudaGetLastError());
  return 0;
}

static int caat_check(const void *a, const void *b, size_t cols, size_t shared) {
  if (shared > cols) return TACO_FAIL("shared %zu > cols %zu", shared, cols);
  if (!a || !b) return TACO_FAIL("NULL buffer");
  return 0;
}

extern "C" int caat_gather_shared(const void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, void *out,
                                  void *stream) {
  if (caat_check(x, out, cols, shared)) return -1;
  return copy_launch(x, cols, out, shared, rows, shared, dt, stream);
}

extern "C" int caat_scatter_shared(const void *shared_in, taco_dtype dt, size_t rows, size_t cols, size_t shared,
                                   void *x, void *stream) {
  if (caat_check(shared_in, x, cols, shared)) return -1;
  return copy_launch(shared_in, shared, x, cols, rows, shared, dt, stream);
}

extern "C" int caat_scale_private(void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, float scale,
                                  void *stream) {
  if (caat_check(x, x, cols, shared)) return -1;
  if (rows == 0 || cols == shared) return 0;
  cudaStream_t s = (cudaStream_t)stream;
  unsigned grid = caat_grid(rows * (cols - shared));
  if (dt == TACO_DTYPE_BF16)
    scale_private_kernel<uint16_t><<<grid, CAAT_BLOCK, 0, s>>>((uint16_t *)x, rows, cols, shared, scale);
  else
    scale_private_kernel<float><<<grid, CAAT_BLOCK, 0, s>>>((float *)x, rows, cols, shared, scale);
  TACO_CUDA_CHECK(cudaGetLastError());
  return 0;
}

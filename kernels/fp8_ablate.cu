/* fp8_ablate.cu — CUDA kernels of the ablation codecs (fp8_ablate.h).
 *
 * A thread block holds FA_TPB threads (G when G > FA_TPB), one element of a
 * group per thread, FA_TPB / G groups per block, the groups in shared memory.
 * Every element goes through the same rounded operations as in the plain-C
 * reference (fp8_ablate_group.h), so the results are the same bits:
 *   - the Walsh-Hadamard transform runs the reference's stages h = 1 .. G/2 in
 *     order, each butterfly (a + b, a - b) by one thread, a barrier between stages;
 *   - the absmax is a maximum (exact in any order) of |v| as unsigned bits
 *     (non-negative floats order as their bits), NaN and Inf flagged apart as
 *     the reference does (a flagged group encodes with scale NaN, codes 0);
 *   - the decode-sum accumulates each element over the blocks in block order
 *     with fmaf, as the reference. */
#include <cuda_runtime.h>
#include <stdio.h>

#include "fp8_ablate_group.h"

#define FA_TPB 256

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

/* The block's groups in shared memory, and per warp its group's partial absmax and flag. */
struct fa_shared {
  float v[FA_MAX_GROUP > FA_TPB ? FA_MAX_GROUP : FA_TPB];
  unsigned wmax[FA_MAX_GROUP / 32 > FA_TPB / 32 ? FA_MAX_GROUP / 32 : FA_TPB / 32];
  int wbad[FA_MAX_GROUP / 32 > FA_TPB / 32 ? FA_MAX_GROUP / 32 : FA_TPB / 32];
};

/* This thread's place: element i of group gi (live: gi is a group of the block of n). */
struct fa_place {
  int g, i, base; /* group size, element in group, first thread of the group */
  size_t gi;
  int live;
};
__device__ static fa_place fa_here(size_t n, int g) {
  fa_place p;
  const int per = blockDim.x / g; /* groups per thread block */
  p.g = g, p.i = threadIdx.x % g, p.base = threadIdx.x - p.i;
  p.gi = (size_t)blockIdx.x * per + threadIdx.x / g;
  p.live = p.gi < fa_groups(n, g);
  return p;
}

/* In-place unnormalized WHT of every group of the block (fa_fwht's stages and butterflies). */
__device__ static void fa_fwht_block(float *v, const fa_place &p) {
  for (int h = 1; h < p.g; h *= 2) {
    __syncthreads();
    if (p.i < p.g / 2) {
      int j = p.base + (p.i / h) * 2 * h + p.i % h;
      float a = v[j], b = v[j + h];
      v[j] = FA_ADD(a, b), v[j + h] = FA_SUB(a, b);
    }
  }
  __syncthreads();
}

/* fa_encode_group for the block's groups: sh->v holds the values (padding zero). */
__device__ static void fa_encode_block(fp8_ablate_kind k, fa_shared *sh, const fa_place &p, taco_fp8 f, void *block,
                                       size_t n) {
  if (k == FP8_ABLATE_HADAMARD) {
    fa_fwht_block(sh->v, p);
    sh->v[threadIdx.x] = FA_MUL(sh->v[threadIdx.x], fa_rsqrt_group(p.g));
  }
  const float x = sh->v[threadIdx.x], a = fabsf(x);
  int bad = !(a <= 3.40282347e38f); /* NaN or Inf */
  unsigned m = bad ? 0u : __float_as_uint(a);
  for (int o = 16; o; o /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, o)), bad |= __shfl_xor_sync(0xffffffffu, bad, o);
  const int warp = threadIdx.x / 32;
  if (threadIdx.x % 32 == 0) sh->wmax[warp] = m, sh->wbad[warp] = bad;
  __syncthreads();
  m = 0, bad = 0;
  for (int w = p.base / 32; w < (p.base + p.g) / 32; w++) m = max(m, sh->wmax[w]), bad |= sh->wbad[w];
  const float amax = __uint_as_float(m);
  float sc = FA_DIV(amax, fa_fp8_max(f));
  sc = sc < 1e-12f ? 1e-12f : sc > 1e6f ? 1e6f : sc;
  if (bad) sc = taco_bits_float(0x7FC00000u);
  const float inv = FA_DIV(1.0f, sc);
  if (!p.live) return;
  fa_codes(block, p.gi, p.g)[p.i] = bad ? 0 : fa_fp8_code(FA_MUL(x, inv), f);
  if (p.i == 0) *fa_scale(block, n, p.g, p.gi) = sc;
}

/* The decode-sum of this thread's element over nb blocks, back from the transformed domain. */
__device__ static float fa_sum_block(fp8_ablate_kind k, fa_shared *sh, const fa_place &p, const void *in, int nb,
                                     size_t n, taco_fp8 f) {
  float acc = 0.0f;
  if (p.live) {
    const size_t bb = fa_block_bytes(n, p.g);
    for (int b = 0; b < nb; b++) {
      void *blk = (uint8_t *)in + (size_t)b * bb;
      acc = fmaf(fa_fp8_value(fa_codes(blk, p.gi, p.g)[p.i], f), *fa_scale(blk, n, p.g, p.gi), acc);
    }
  }
  if (k != FP8_ABLATE_HADAMARD) return acc;
  sh->v[threadIdx.x] = acc;
  fa_fwht_block(sh->v, p);
  return FA_MUL(sh->v[threadIdx.x], fa_rsqrt_group(p.g));
}

__global__ void fa_encode_kernel(fp8_ablate_kind k, const void *x, taco_dtype dt, size_t n, taco_params p, void *block) {
  __shared__ fa_shared sh;
  const fa_place pl = fa_here(n, p.group);
  const size_t j = pl.gi * (size_t)pl.g + (size_t)pl.i;
  sh.v[threadIdx.x] = pl.live && j < n ? fa_load(x, dt, j) : 0.0f;
  __syncthreads();
  fa_encode_block(k, &sh, pl, p.fp8, block, n);
}
__global__ void fa_decode_sum_kernel(fp8_ablate_kind k, const void *in, int nb, size_t n, taco_params p, void *y,
                                     taco_dtype dt) {
  __shared__ fa_shared sh;
  const fa_place pl = fa_here(n, p.group);
  const float v = fa_sum_block(k, &sh, pl, in, nb, n, p.fp8);
  const size_t j = pl.gi * (size_t)pl.g + (size_t)pl.i;
  if (pl.live && j < n) fa_store(y, dt, j, v);
}
__global__ void fa_dse_kernel(fp8_ablate_kind k, const void *in, int nb, size_t n, taco_params p, void *block) {
  __shared__ fa_shared sh;
  const fa_place pl = fa_here(n, p.group);
  const float v = fa_sum_block(k, &sh, pl, in, nb, n, p.fp8);
  const size_t j = pl.gi * (size_t)pl.g + (size_t)pl.i;
  __syncthreads(); /* every thread has read its transformed value before the encode overwrites it */
  sh.v[threadIdx.x] = pl.live && j < n ? v : 0.0f; /* the padding stays zero */
  __syncthreads();
  fa_encode_block(k, &sh, pl, p.fp8, block, n);
}

static unsigned fa_threads(int g) { return g > FA_TPB ? (unsigned)g : FA_TPB; }
static unsigned fa_grid(size_t n, int g) {
  const size_t per = fa_threads(g) / (unsigned)g;
  return (unsigned)((taco_groups(n, g) + per - 1) / per);
}

extern "C" int fp8_ablate_encode(fp8_ablate_kind k, const void *x, taco_dtype dt, size_t n, taco_params p, void *block,
                                 void *stream) {
  if (fa_params(p)) return -1;
  if (!n) return 0;
  fa_encode_kernel<<<fa_grid(n, p.group), fa_threads(p.group), 0, (cudaStream_t)stream>>>(k, x, dt, n, p, block);
  return fa_check(cudaGetLastError(), __LINE__);
}
extern "C" int fp8_ablate_decode_sum(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p, void *y,
                                     taco_dtype dt, void *stream) {
  if (fa_params(p)) return -1;
  if (!n) return 0;
  fa_decode_sum_kernel<<<fa_grid(n, p.group), fa_threads(p.group), 0, (cudaStream_t)stream>>>(k, in, nblocks, n, p, y,
                                                                                             dt);
  return fa_check(cudaGetLastError(), __LINE__);
}
extern "C" int fp8_ablate_decode_sum_encode(fp8_ablate_kind k, const void *in, int nblocks, size_t n, taco_params p,
                                            void *block, void *stream) {
  if (fa_params(p)) return -1;
  if (!n) return 0;
  fa_dse_kernel<<<fa_grid(n, p.group), fa_threads(p.group), 0, (cudaStream_t)stream>>>(k, in, nblocks, n, p, block);
  return fa_check(cudaGetLastError(), __LINE__);
}

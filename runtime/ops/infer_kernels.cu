/* infer_kernels.cu — inference kernels (see infer_kernels.h). */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

#include "infer_kernels.h"
#include "gpu_check.h"
#include "infer_decode_split.cuh"
#include "infer_rope.cuh"

typedef __nv_bfloat16 bf16;

#define INF_CUDA(e, call) CUDA_CHECK(e, call)
#define INF_LAUNCHED(e) INF_CUDA(e, cudaGetLastError())

/* ---- RoPE + scatter -------------------------------------------------------- */

__global__ void rope_scatter_kernel(const bf16 *qkv, bf16 *q, bf16 *kc, bf16 *vc, int hl, int kvl, int d,
                                    long long max_seq, int seq, long long pos0, float log2_theta) {
  const long long t = blockIdx.x; /* token: b * seq + s */
  const int b = (int)(t / seq), s = (int)(t % seq);
  const long long pos = pos0 + s;
  const int half = d / 2, heads = hl + 2 * kvl;
  const bf16 *row = qkv + t * (long long)heads * d;
  for (int idx = threadIdx.x; idx < heads * half; idx += blockDim.x) {
    const int hh = idx / half, i = idx % half;
    float x1 = __bfloat162float(row[hh * d + i]), x2 = __bfloat162float(row[hh * d + i + half]);
    if (hh < hl + kvl && log2_theta > 0.f) infer_rope_rotate(x1, x2, pos, i, d, log2_theta);
    bf16 *dst;
    if (hh < hl)
      dst = q + (((long long)b * hl + hh) * seq + s) * d;
    else if (hh < hl + kvl)
      dst = kc + (((long long)b * kvl + (hh - hl)) * max_seq + pos) * d;
    else
      dst = vc + (((long long)b * kvl + (hh - hl - kvl)) * max_seq + pos) * d;
    dst[i] = __float2bfloat16(x1);
    dst[i + half] = __float2bfloat16(x2);
  }
}

extern "C" int infer_rope_scatter(const void *qkv, void *q, void *k_cache, void *v_cache, const infer_attn_dims *a,
                                  int seq, long long pos0, void *stream, ts_err *e) {
  if (a->head_dim % 2 || seq < 1 || pos0 < 0 || pos0 + seq > a->max_seq)
    return ts_fail_sys(e, "infer_rope_scatter: bad shape (head_dim %d, seq %d, pos0 %lld, max_seq %lld)",
                       a->head_dim, seq, pos0, a->max_seq);
  long long tokens = (long long)a->batch * seq;
  if (tokens <= 0) return 0;
  float l2t = a->rope_theta > 0 ? (float)log2(a->rope_theta) : 0.f;
  rope_scatter_kernel<<<(unsigned)tokens, 256, 0, (cudaStream_t)stream>>>(
      (const bf16 *)qkv, (bf16 *)q, (bf16 *)k_cache, (bf16 *)v_cache, a->hl, a->kvl, a->head_dim, a->max_seq, seq,
      pos0, l2t);
  INF_LAUNCHED(e);
  return 0;
}

/* ---- head-major -> token-major ---------------------------------------------- */

__global__ void heads_to_tokens_kernel(const uint4 *o, uint4 *out, int hl, int seq, int dv, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    /* i indexes out in 8-element vectors: ((b * seq + s) * hl + h) * dv + x */
    long long x = i % dv, r = i / dv;
    long long h = r % hl, bs = r / hl;
    long long s = bs % seq, b = bs / seq;
    out[i] = o[((b * hl + h) * seq + s) * dv + x];
  }
}

extern "C" int infer_heads_to_tokens(const void *o, void *out, int batch, int hl, int seq, int head_dim,
                                     void *stream, ts_err *e) {
  if (head_dim % 8) return ts_fail_sys(e, "infer_heads_to_tokens: head_dim %d is not a multiple of 8", head_dim);
  long long n = (long long)batch * hl * seq * (head_dim / 8);
  if (n <= 0) return 0;
  unsigned blocks = (unsigned)((n + 255) / 256 < 65535 * 16 ? (n + 255) / 256 : 65535 * 16);
  heads_to_tokens_kernel<<<blocks, 256, 0, (cudaStream_t)stream>>>((const uint4 *)o, (uint4 *)out, hl, seq,
                                                                    head_dim / 8, n);
  INF_LAUNCHED(e);
  return 0;
}

/* ---- decode attention --------------------------------------------------------- */

#define DEC_WARPS 4
#define DEC_TARGET_BLOCKS 264 /* two per SM of an H200 (132 SMs) */

/* Positions per block: enough blocks to fill the GPU, at least 16 positions each. */
static long long decode_chunk(const infer_attn_dims *a, long long len) {
  long long units = (long long)a->batch * a->kvl;
  long long want = (DEC_TARGET_BLOCKS + units - 1) / units;
  long long chunk = (len + want - 1) / want;
  return chunk < 16 ? 16 : chunk;
}

extern "C" size_t infer_decode_partial_bytes(const infer_attn_dims *a, long long len) {
  long long chunk = decode_chunk(a, len), nsplit = (len + chunk - 1) / chunk;
  return (size_t)a->batch * a->hl * nsplit * (a->head_dim + 2) * sizeof(float);
}

template <int D> struct lane_vec;
template <> struct lane_vec<128> {
  static constexpr int E = 4;
  __device__ static void load(const bf16 *p, float *x) {
    uint2 u = *(const uint2 *)p;
    const bf16 *h = (const bf16 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) x[i] = __bfloat162float(h[i]);
  }
};
template <> struct lane_vec<64> {
  static constexpr int E = 2;
  __device__ static void load(const bf16 *p, float *x) {
    uint32_t u = *(const uint32_t *)p;
    const bf16 *h = (const bf16 *)&u;
    x[0] = __bfloat162float(h[0]), x[1] = __bfloat162float(h[1]);
  }
};

/* Block (split, kv head j, sequence b): positions [split * chunk, min(len, +chunk)),
 * warp w takes every DEC_WARPS-th; online softmax in base 2 per warp, then the
 * warps are merged through shared memory into one partial per query head. */
template <int D, int G>
__global__ void __launch_bounds__(DEC_WARPS * 32)
    decode_partial_kernel(const bf16 *q, const bf16 *kc, const bf16 *vc, float *part, int hl, int kvl,
                          long long max_seq, long long len, long long chunk, int nsplit, float qscale) {
  constexpr int E = lane_vec<D>::E;
  const int split = blockIdx.x, j = blockIdx.y, b = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float qf[G][E], m[G], l[G], acc[G][E];
#pragma unroll
  for (int i = 0; i < G; i++) {
    lane_vec<D>::load(q + ((long long)b * hl + j * G + i) * D + lane * E, qf[i]);
#pragma unroll
    for (int x = 0; x < E; x++) qf[i][x] *= qscale, acc[i][x] = 0.f;
    m[i] = -INFINITY, l[i] = 0.f;
  }
  const long long base = ((long long)b * kvl + j) * max_seq * D + lane * E;
  const long long p0 = (long long)split * chunk, p1 = p0 + chunk < len ? p0 + chunk : len;
  for (long long p = p0 + warp; p < p1; p += DEC_WARPS) {
    float k[E], v[E];
    lane_vec<D>::load(kc + base + p * D, k);
    lane_vec<D>::load(vc + base + p * D, v);
#pragma unroll
    for (int i = 0; i < G; i++) {
      float s = 0.f;
#pragma unroll
      for (int x = 0; x < E; x++) s += qf[i][x] * k[x];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      float mn = fmaxf(m[i], s), c = exp2f(m[i] - mn), pe = exp2f(s - mn);
      l[i] = l[i] * c + pe;
#pragma unroll
      for (int x = 0; x < E; x++) acc[i][x] = acc[i][x] * c + pe * v[x];
      m[i] = mn;
    }
  }
  decode_warps_to_partial<DEC_WARPS, G, D, E>(m, l, acc, warp, lane, b, j, hl, split, nsplit, part);
}

template <int D, int G>
static void launch_partial(dim3 grid, cudaStream_t st, const bf16 *q, const bf16 *kc, const bf16 *vc, float *part,
                           const infer_attn_dims *a, long long len, long long chunk, int nsplit, float qscale) {
  decode_partial_kernel<D, G><<<grid, DEC_WARPS * 32, 0, st>>>(q, kc, vc, part, a->hl, a->kvl, a->max_seq, len,
                                                                chunk, nsplit, qscale);
}

extern "C" int infer_decode_attention(const void *q, const void *k_cache, const void *v_cache, void *out,
                                      void *partial, const infer_attn_dims *a, long long len, void *stream,
                                      ts_err *e) {
  const int D = a->head_dim;
  if (a->kvl < 1 || a->hl % a->kvl || len < 1 || len > a->max_seq)
    return ts_fail_sys(e, "infer_decode_attention: bad shape (heads %d, kv heads %d, len %lld, max_seq %lld)", a->hl,
                       a->kvl, len, a->max_seq);
  const int G = a->hl / a->kvl;
  long long chunk = decode_chunk(a, len);
  int nsplit = (int)((len + chunk - 1) / chunk);
  dim3 grid((unsigned)nsplit, (unsigned)a->kvl, (unsigned)a->batch);
  cudaStream_t st = (cudaStream_t)stream;
  /* softmax in base 2: exp(x / sqrt(d)) = 2^(x log2(e) / sqrt(d)) */
  float qscale = (float)(1.4426950408889634 / sqrt((double)D));
  const bf16 *Q = (const bf16 *)q, *K = (const bf16 *)k_cache, *V = (const bf16 *)v_cache;
  float *P = (float *)partial;
#define DEC_CASE(d_, g_)                                                                                     \
  if (D == d_ && G == g_) launch_partial<d_, g_>(grid, st, Q, K, V, P, a, len, chunk, nsplit, qscale);       \
  else
  DEC_CASE(128, 1) DEC_CASE(128, 2) DEC_CASE(128, 4) DEC_CASE(128, 8) DEC_CASE(128, 16)
  DEC_CASE(64, 1) DEC_CASE(64, 2) DEC_CASE(64, 4) DEC_CASE(64, 8) DEC_CASE(64, 16)
  return ts_fail_sys(e, "infer_decode_attention: head_dim %d with %d query heads per KV head is not built "
                        "(head_dim 64 or 128; 1, 2, 4, 8 or 16 heads per KV head)", D, G);
#undef DEC_CASE
  INF_LAUNCHED(e);
  decode_combine_kernel<<<(unsigned)((long long)a->batch * a->hl), D, 0, st>>>(P, (bf16 *)out, nsplit, D);
  INF_LAUNCHED(e);
  return 0;
}

/* ---- greedy sampling --------------------------------------------------------- */

/* Two passes: blocks of AMAX_CHUNK words (a shard's row cut in chunks, 16-byte
 * loads where the shard's rows allow) each leave their (largest, first index),
 * then one block a sequence takes the best of its chunks. The order (larger
 * value, then smaller index; NaN never taken) is total, so the token does not
 * depend on how the vocabulary is cut: the same as one pass over the row. */
#define AMAX_CHUNK 4096
#define AMAX_THREADS 256
#define AMAX_NONE 0x7fffffffffffffffLL

__device__ __forceinline__ void amax_take(float v, long long g, float &best, long long &bi) {
  if (v > best || (v == best && g < bi)) best = v, bi = g;
}

/* the block's best (best, bi) in thread 0 */
__device__ void amax_block(float &best, long long &bi) {
  __shared__ float sv[AMAX_THREADS / 32];
  __shared__ long long si[AMAX_THREADS / 32];
  for (int o = 16; o > 0; o >>= 1) {
    float v2 = __shfl_xor_sync(0xffffffffu, best, o);
    long long i2 = __shfl_xor_sync(0xffffffffu, bi, o);
    amax_take(v2, i2, best, bi);
  }
  if ((threadIdx.x & 31) == 0) sv[threadIdx.x >> 5] = best, si[threadIdx.x >> 5] = bi;
  __syncthreads();
  if (threadIdx.x == 0)
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) amax_take(sv[w], si[w], best, bi);
}

/* block (shard r x chunk cj, sequence b): the best of words [cj * CHUNK, ..) of row b of shard r */
__global__ void argmax_chunks_kernel(const bf16 *logits, float *pv, long long *pi, int batch, int cps, long long vl,
                                     long long valid, int vec) {
  const int b = blockIdx.y, r = blockIdx.x / cps, cj = blockIdx.x % cps;
  const bf16 *row = logits + ((long long)r * batch + b) * vl;
  const long long j0 = (long long)cj * AMAX_CHUNK, g0 = (long long)r * vl;
  long long j1 = j0 + AMAX_CHUNK < vl ? j0 + AMAX_CHUNK : vl;
  if (valid - g0 < j1) j1 = valid - g0 > j0 ? valid - g0 : j0;
  float best = -INFINITY;
  long long bi = AMAX_NONE;
  if (vec) {
    for (long long j = j0 + 8LL * threadIdx.x; j < j1; j += 8LL * blockDim.x) {
      const uint4 u = *(const uint4 *)(row + j);
      const bf16 *w = (const bf16 *)&u;
#pragma unroll
      for (int k = 0; k < 8; k++)
        if (j + k < j1) amax_take(__bfloat162float(w[k]), g0 + j + k, best, bi);
    }
  } else {
    for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) amax_take(__bfloat162float(row[j]), g0 + j, best, bi);
  }
  amax_block(best, bi);
  if (threadIdx.x == 0) {
    const long long o = (long long)b * gridDim.x + blockIdx.x;
    pv[o] = best, pi[o] = bi;
  }
}

__global__ void argmax_pick_kernel(const float *pv, const long long *pi, int32_t *token, int n) {
  const int b = blockIdx.x;
  float best = -INFINITY;
  long long bi = AMAX_NONE;
  for (int i = threadIdx.x; i < n; i += blockDim.x) amax_take(pv[(long long)b * n + i], pi[(long long)b * n + i], best, bi);
  amax_block(best, bi);
  if (threadIdx.x == 0) token[b] = (int32_t)(bi == AMAX_NONE ? 0 : bi);
}

static int amax_chunks(int tp, long long vocab_local) {
  return tp * (int)((vocab_local + AMAX_CHUNK - 1) / AMAX_CHUNK);
}

extern "C" size_t infer_argmax_scratch_bytes(int batch, int tp, long long vocab_local) {
  if (batch < 1 || tp < 1 || vocab_local < 1) return 0;
  return (size_t)batch * (size_t)amax_chunks(tp, vocab_local) * (sizeof(float) + sizeof(long long));
}

extern "C" int infer_argmax(const void *logits, int32_t *token, int batch, int tp, long long vocab_local,
                            long long vocab_valid, void *scratch, void *stream, ts_err *e) {
  if (batch < 1 || tp < 1 || vocab_local < 1 || !scratch) return ts_fail_sys(e, "infer_argmax: bad shape");
  const int n = amax_chunks(tp, vocab_local);
  if (batch > 65535) return ts_fail_sys(e, "infer_argmax: batch %d above 65,535", batch);
  long long *pi = (long long *)scratch;
  float *pv = (float *)(pi + (size_t)batch * n);
  const int vec = vocab_local % 8 == 0 && ((uintptr_t)logits & 15) == 0;
  argmax_chunks_kernel<<<dim3((unsigned)n, (unsigned)batch), AMAX_THREADS, 0, (cudaStream_t)stream>>>(
      (const bf16 *)logits, pv, pi, batch, n / tp, vocab_local, vocab_valid, vec);
  INF_LAUNCHED(e);
  argmax_pick_kernel<<<batch, AMAX_THREADS, 0, (cudaStream_t)stream>>>(pv, pi, token, n);
  INF_LAUNCHED(e);
  return 0;
}

extern "C" int infer_last_rows(const void *src, void *dst, int batch, long long seq, int cols, void *stream,
                               ts_err *e) {
  size_t w = (size_t)cols * sizeof(bf16);
  INF_CUDA(e, cudaMemcpy2DAsync(dst, w, (const char *)src + (size_t)(seq - 1) * w, (size_t)seq * w, w,
                                (size_t)batch, cudaMemcpyDeviceToDevice, (cudaStream_t)stream));
  return 0;
}

__global__ void fill_kernel(bf16 *x, long long n, float v) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    x[i] = __float2bfloat16(v);
}

extern "C" int infer_fill_bf16(void *x, long long n, float value, void *stream, ts_err *e) {
  if (n <= 0) return 0;
  long long blocks = (n + 255) / 256;
  fill_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, (cudaStream_t)stream>>>((bf16 *)x, n, value);
  INF_LAUNCHED(e);
  return 0;
}

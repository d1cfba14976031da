/* rt_mla.cu — multi-head latent attention's layout and RoPE kernels (see rt_mla.h). */
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

extern "C" { /* ts_error.h has no C++ guards of its own */
#include "ts_error.h"
}
#include "rt_mla.h"
#include "rt_ops_check.h"

typedef __nv_bfloat16 bf16;

/* One element per thread and step over rows x heads x (nope + dv): kvb's element and its qkv column. */
template <bool GATHER>
__global__ void mla_kv_copy_kernel(const bf16 *src, bf16 *dst, long long rows, int ld, int heads, int nope, int rope,
                                   int dv) {
  const int bw = nope + dv, dqk = nope + rope;
  const long long qc = (long long)heads * dqk, n = rows * heads * bw;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / ((long long)heads * bw);
    const int rem = (int)(i - r * heads * bw), j = rem / bw, c = rem % bw;
    const long long col = c < nope ? qc + (long long)j * dqk + c : 2 * qc + (long long)j * dv + (c - nope);
    if (GATHER) dst[i] = src[r * ld + col];
    else dst[r * ld + col] = src[i];
  }
}

/* The same copy 16 bytes (8 elements) a thread and step, where every piece starts on a 16-byte boundary (nope, rope,
 * dv and ld multiples of 8, both buffers 16-byte aligned: kv_vec_ok): DeepSeek-V3's widths, where the kernel above
 * moved ~0.8 TB/s on one H100. Chunk i is elements 8i..8i+7 of kvb's compact [rows x heads x (nope + dv)]. */
template <bool GATHER>
__global__ void mla_kv_copy16_kernel(const bf16 *src, bf16 *dst, long long rows, int ld, int heads, int nope, int rope,
                                     int dv) {
  const int bw8 = (nope + dv) / 8, nope8 = nope / 8, dqk = nope + rope;
  const long long qc = (long long)heads * dqk, per_row = (long long)heads * bw8, n = rows * per_row;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long r = i / per_row;
    const int rem = (int)(i - r * per_row), j = rem / bw8, c8 = rem - j * bw8;
    const long long col = c8 < nope8 ? qc + (long long)j * dqk + 8LL * c8 : 2 * qc + (long long)j * dv + 8LL * (c8 - nope8);
    if (GATHER) *(uint4 *)(dst + 8 * i) = *(const uint4 *)(src + r * ld + col);
    else *(uint4 *)(dst + r * ld + col) = *(const uint4 *)(src + 8 * i);
  }
}

static int kv_vec_ok(const void *src, const void *dst, int ld, int nope, int rope, int dv) {
  return nope % 8 == 0 && rope % 8 == 0 && dv % 8 == 0 && ld % 8 == 0 && ((size_t)src % 16) == 0 &&
         ((size_t)dst % 16) == 0;
}

static int kv_shape_ok(long long rows, int ld, int heads, int nope, int rope, int dv) {
  return rows >= 0 && heads >= 1 && nope >= 1 && rope >= 0 && dv >= 1 &&
         (long long)ld >= 2LL * heads * (nope + rope) + (long long)heads * dv;
}

static unsigned copy_blocks(long long n) {
  long long b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

/* kv_b's output to its places in qkv (gather false) or their gradients back (true): one kernel either way. */
template <bool GATHER>
static int kv_copy(const char *what, const void *src, void *dst, long long rows, int ld, int heads, int nope, int rope,
                   int dv, void *stream, ts_err *e) {
  if (!kv_shape_ok(rows, ld, heads, nope, rope, dv))
    return ts_fail_sys(e, "%s: bad shape (rows %lld, ld %d, heads %d, nope %d, rope %d, dv %d)", what, rows, ld, heads,
                       nope, rope, dv);
  if (rows == 0) return 0;
  const long long n = rows * heads * (nope + dv);
  if (kv_vec_ok(src, dst, ld, nope, rope, dv))
    mla_kv_copy16_kernel<GATHER><<<copy_blocks(n / 8), 256, 0, (cudaStream_t)stream>>>((const bf16 *)src, (bf16 *)dst,
                                                                                       rows, ld, heads, nope, rope, dv);
  else
    mla_kv_copy_kernel<GATHER><<<copy_blocks(n), 256, 0, (cudaStream_t)stream>>>((const bf16 *)src, (bf16 *)dst, rows,
                                                                                 ld, heads, nope, rope, dv);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_mla_kv_scatter(const void *kvb, void *qkv, long long rows, int ld, int heads, int nope, int rope,
                                 int dv, void *stream, ts_err *e) {
  return kv_copy<false>("rt_mla_kv_scatter", kvb, qkv, rows, ld, heads, nope, rope, dv, stream, e);
}

extern "C" int rt_mla_kv_gather(const void *dqkv, void *dkvb, long long rows, int ld, int heads, int nope, int rope,
                                int dv, void *stream, ts_err *e) {
  return kv_copy<true>("rt_mla_kv_gather", dqkv, dkvb, rows, ld, heads, nope, rope, dv, stream, e);
}

/* Pair i of every query head's rope part of one row, rotated in place by (cs, sn) (the backward passes -sn). */
__device__ __forceinline__ void rotate_query_heads(bf16 *row, int heads, int dqk, int nope, int i, int half, float cs,
                                                   float sn) {
  for (int j = 0; j < heads; j++) {
    bf16 *v = row + (long long)j * dqk + nope;
    const float x1 = __bfloat162float(v[i]), x2 = __bfloat162float(v[i + half]);
    v[i] = __float2bfloat16(x1 * cs - x2 * sn);
    v[i + half] = __float2bfloat16(x2 * cs + x1 * sn);
  }
}

/* Threads (i, row): threadIdx.x the pair index i < rope / 2, threadIdx.y the row within the block; the
 * angle is computed once and applied to every head of the row (as rt_rope's kernel). */
__global__ void mla_rope_fwd_kernel(bf16 *qkv, int ld, const bf16 *kr, int kr_ld, long long rows, int heads, int nope,
                                    int rope, int seq, const float *inv_freq) {
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  const int half = rope / 2, i = threadIdx.x, dqk = nope + rope;
  if (r >= rows || i >= half) return;
  float sn, cs;
  sincosf((float)(r % seq) * inv_freq[i], &sn, &cs);
  bf16 *row = qkv + r * ld;
  rotate_query_heads(row, heads, dqk, nope, i, half, cs, sn);
  const float k1 = __bfloat162float(kr[r * kr_ld + i]), k2 = __bfloat162float(kr[r * kr_ld + i + half]);
  const bf16 o1 = __float2bfloat16(k1 * cs - k2 * sn), o2 = __float2bfloat16(k2 * cs + k1 * sn);
  bf16 *k = row + (long long)heads * dqk + nope;
  for (int j = 0; j < heads; j++) /* the shared key, rotated once, into every key head */
    k[(long long)j * dqk + i] = o1, k[(long long)j * dqk + i + half] = o2;
}

__global__ void mla_rope_bwd_kernel(bf16 *dqkv, int ld, bf16 *dkr, int kr_ld, long long rows, int heads, int nope,
                                    int rope, int seq, const float *inv_freq) {
  const long long r = (long long)blockIdx.x * blockDim.y + threadIdx.y;
  const int half = rope / 2, i = threadIdx.x, dqk = nope + rope;
  if (r >= rows || i >= half) return;
  float sn, cs;
  sincosf((float)(r % seq) * inv_freq[i], &sn, &cs);
  sn = -sn; /* the rotation's transpose */
  bf16 *row = dqkv + r * ld;
  rotate_query_heads(row, heads, dqk, nope, i, half, cs, sn);
  const bf16 *k = row + (long long)heads * dqk + nope;
  float s1 = 0.f, s2 = 0.f; /* the shared key's gradient: summed over the heads, then rotated back */
  for (int j = 0; j < heads; j++)
    s1 += __bfloat162float(k[(long long)j * dqk + i]), s2 += __bfloat162float(k[(long long)j * dqk + i + half]);
  dkr[r * kr_ld + i] = __float2bfloat16(s1 * cs - s2 * sn);
  dkr[r * kr_ld + i + half] = __float2bfloat16(s2 * cs + s1 * sn);
}

static int rope_shape_ok(int ld, int kr_ld, long long rows, int heads, int nope, int rope, int seq,
                         const float *inv_freq) {
  return rows >= 0 && rows <= 2147483647LL && heads >= 1 && nope >= 0 && rope >= 2 && rope % 2 == 0 &&
         rope <= 2048 && seq >= 1 && kr_ld >= rope && (long long)ld >= 2LL * heads * (nope + rope) && inv_freq;
}

static void rope_grid(long long rows, int rope, dim3 *grid, dim3 *block) {
  const int half = rope / 2, ty = half >= 256 ? 1 : 256 / half;
  *block = dim3((unsigned)half, (unsigned)ty);
  *grid = dim3((unsigned)((rows + ty - 1) / ty));
}

extern "C" int rt_mla_rope_fwd(void *qkv, int ld, const void *kr, int kr_ld, long long rows, int heads, int nope,
                               int rope, int seq, const float *inv_freq, void *stream, ts_err *e) {
  if (!rope_shape_ok(ld, kr_ld, rows, heads, nope, rope, seq, inv_freq))
    return ts_fail_sys(e, "rt_mla_rope_fwd: bad shape (rows %lld, ld %d, kr_ld %d, heads %d, nope %d, rope %d, seq %d)",
                       rows, ld, kr_ld, heads, nope, rope, seq);
  if (rows == 0) return 0;
  dim3 grid, block;
  rope_grid(rows, rope, &grid, &block);
  mla_rope_fwd_kernel<<<grid, block, 0, (cudaStream_t)stream>>>((bf16 *)qkv, ld, (const bf16 *)kr, kr_ld, rows, heads,
                                                                 nope, rope, seq, inv_freq);
  RT_CHECK_LAUNCH(e);
  return 0;
}

extern "C" int rt_mla_rope_bwd(void *dqkv, int ld, void *dkr, int kr_ld, long long rows, int heads, int nope, int rope,
                               int seq, const float *inv_freq, void *stream, ts_err *e) {
  if (!rope_shape_ok(ld, kr_ld, rows, heads, nope, rope, seq, inv_freq))
    return ts_fail_sys(e, "rt_mla_rope_bwd: bad shape (rows %lld, ld %d, kr_ld %d, heads %d, nope %d, rope %d, seq %d)",
                       rows, ld, kr_ld, heads, nope, rope, seq);
  if (rows == 0) return 0;
  dim3 grid, block;
  rope_grid(rows, rope, &grid, &block);
  mla_rope_bwd_kernel<<<grid, block, 0, (cudaStream_t)stream>>>((bf16 *)dqkv, ld, (bf16 *)dkr, kr_ld, rows, heads,
                                                                 nope, rope, seq, inv_freq);
  RT_CHECK_LAUNCH(e);
  return 0;
}

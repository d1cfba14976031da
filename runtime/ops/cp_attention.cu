/* cp_attention.cu — one ring step of context parallelism's attention, the
 * log-sum-exp combine and the ring's backward (see cp_attention.h). Each
 * thread owns one (query row, head), or for dK/dV one (key row, KV head) of
 * the block in hand: no two threads write the same row, no atomics. The
 * per-row work is a __host__ __device__ function so that the CPU versions
 * run the same arithmetic. */
#include "cp_attention.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "gpu_check.h"

#define CP_ATTN_MAX_D 128 /* the per-thread accumulator's length (512 bytes of local memory, within the default 1 KiB stack) */
#define CP_ATTN_THREADS 128

/* Global position of local token t of CP rank r: cp_attention_ref.c's cp_ref_position. */
__host__ __device__ static int cp_pos(int seq, int cp, int r, int t) {
  int c = seq / (2 * cp);
  return t < c ? r * c + t : (2 * cp - 1 - r) * c + (t - c);
}

__host__ __device__ static float bf16_at(const uint16_t *p, long long i) {
  uint32_t u = (uint32_t)p[i] << 16;
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, 4);
  return f;
#endif
}

/* Offsets of query row t, head h, and of key/value row j, KV head g, in q and in k, v. */
__host__ __device__ static long long q_at(const cp_attn_shape *s, int t, int h) {
  return t * s->ldq + (long long)h * s->d;
}
__host__ __device__ static long long kv_at(const cp_attn_shape *s, int j, int g) {
  return j * s->ldkv + (long long)g * s->d;
}

/* Query row t of rank r, head h, against rank src's n keys: two passes (the
 * largest visible score, then the weights), as the float64 reference. */
__host__ __device__ static void block_row(cp_attn_shape s, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                          float *out, float *lse, int r, int src, int t, int h) {
  const int n = s.seq / s.cp, d = s.d, g = h / (s.heads / s.kv_heads);
  const uint16_t *qr = q + q_at(&s, t, h);
  const float scale = 1.0f / sqrtf((float)d);
  const int qp = cp_pos(s.seq, s.cp, r, t);
  float mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    if (cp_pos(s.seq, s.cp, src, j) > qp) continue;
    const uint16_t *kr = k + kv_at(&s, j, g);
    float sc = 0;
    for (int x = 0; x < d; x++) sc += bf16_at(qr, x) * bf16_at(kr, x);
    if (sc * scale > mx) mx = sc * scale;
  }
  float *o = out + (long long)t * s.heads * d + (long long)h * d;
  if (mx == -INFINITY) { /* no visible key in this block */
    for (int x = 0; x < d; x++) o[x] = 0;
    lse[(long long)h * n + t] = -INFINITY;
    return;
  }
  float acc[CP_ATTN_MAX_D];
  for (int x = 0; x < d; x++) acc[x] = 0;
  float sum = 0;
  for (int j = 0; j < n; j++) {
    if (cp_pos(s.seq, s.cp, src, j) > qp) continue;
    const uint16_t *kr = k + kv_at(&s, j, g), *vr = v + kv_at(&s, j, g);
    float sc = 0;
    for (int x = 0; x < d; x++) sc += bf16_at(qr, x) * bf16_at(kr, x);
    float w = expf(sc * scale - mx);
    sum += w;
    for (int x = 0; x < d; x++) acc[x] += w * bf16_at(vr, x);
  }
  for (int x = 0; x < d; x++) o[x] = acc[x] / sum;
  lse[(long long)h * n + t] = mx + logf(sum);
}

/* Row t, head h of the accumulator takes in the block's row (see cp_attn_combine). */
__host__ __device__ static void combine_row(float *acc_out, float *acc_lse, const float *blk_out, const float *blk_lse,
                                            int first, int n, int heads, int d, int t, int h) {
  const long long off = (long long)t * heads * d + (long long)h * d, li = (long long)h * n + t;
  float *a = acc_out + off;
  const float *b = blk_out + off;
  const float l = blk_lse[li], L = acc_lse[li];
  if (first || (L == -INFINITY && l != -INFINITY)) { /* the accumulator holds nothing yet */
    for (int x = 0; x < d; x++) a[x] = b[x];
    acc_lse[li] = l;
    return;
  }
  if (l == -INFINITY) return; /* the block saw no key of this row */
  const float m = L > l ? L : l, wa = expf(L - m), wb = expf(l - m);
  for (int x = 0; x < d; x++) a[x] = (wa * a[x] + wb * b[x]) / (wa + wb);
  acc_lse[li] = m + logf(wa + wb);
}

/* ---- backward, per row ---- */

/* delta of rank r's row t, head h. */
__host__ __device__ static void delta_row(const uint16_t *dout, const float *out, float *delta, int n, int heads,
                                          int d, int t, int h) {
  const long long off = (long long)t * heads * d + (long long)h * d;
  float s = 0;
  for (int x = 0; x < d; x++) s += bf16_at(dout, off + x) * out[off + x];
  delta[(long long)h * n + t] = s;
}

/* p and ds of query row qr (lse, delta) against key row kr, value row vr, upstream gradient row dr. */
__host__ __device__ static void bwd_weights(const uint16_t *qr, const uint16_t *kr, const uint16_t *vr,
                                            const uint16_t *dr, float lse, float delta, float scale, int d, float *p,
                                            float *ds) {
  float sc = 0, dp = 0;
  for (int x = 0; x < d; x++) sc += bf16_at(qr, x) * bf16_at(kr, x), dp += bf16_at(dr, x) * bf16_at(vr, x);
  *p = expf(sc * scale - lse);
  *ds = *p * (dp - delta);
}

/* dQ of rank r's row t, head h, from the keys of block src it sees (added to dq). */
__host__ __device__ static void bwd_q_row(cp_attn_shape s, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                          const uint16_t *dout, const float *lse, const float *delta, float *dq,
                                          int r, int src, int t, int h) {
  const int n = s.seq / s.cp, d = s.d, g = h / (s.heads / s.kv_heads);
  const long long qo = q_at(&s, t, h), row = (long long)t * s.heads * d + (long long)h * d, li = (long long)h * n + t;
  const float scale = 1.0f / sqrtf((float)d);
  const int qp = cp_pos(s.seq, s.cp, r, t);
  for (int j = 0; j < n; j++) {
    if (cp_pos(s.seq, s.cp, src, j) > qp) continue;
    const long long kj = kv_at(&s, j, g);
    float p, ds;
    bwd_weights(q + qo, k + kj, v + kj, dout + row, lse[li], delta[li], scale, d, &p, &ds);
    for (int x = 0; x < d; x++) dq[row + x] += scale * ds * bf16_at(k, kj + x);
  }
}

/* dK, dV of block src's key j, KV head g, from rank r's rows that see it, over the query heads of
 * the group (added to dk, dv). */
__host__ __device__ static void bwd_kv_row(cp_attn_shape s, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                           const uint16_t *dout, const float *lse, const float *delta, float *dk,
                                           float *dv, int r, int src, int j, int g) {
  const int n = s.seq / s.cp, d = s.d, group = s.heads / s.kv_heads;
  const long long kj = kv_at(&s, j, g), gj = (long long)j * s.kv_heads * d + (long long)g * d;
  const float scale = 1.0f / sqrtf((float)d);
  const int kp = cp_pos(s.seq, s.cp, src, j);
  for (int h = g * group; h < (g + 1) * group; h++)
    for (int t = 0; t < n; t++) {
      if (cp_pos(s.seq, s.cp, r, t) < kp) continue;
      const long long qo = q_at(&s, t, h), row = (long long)t * s.heads * d + (long long)h * d,
                      li = (long long)h * n + t;
      float p, ds;
      bwd_weights(q + qo, k + kj, v + kj, dout + row, lse[li], delta[li], scale, d, &p, &ds);
      for (int x = 0; x < d; x++) {
        dk[gj + x] += scale * ds * bf16_at(q, qo + x);
        dv[gj + x] += p * bf16_at(dout, row + x);
      }
    }
}

/* ---- kernels: one thread per (row, head) ---- */

__global__ static void block_kernel(cp_attn_shape s, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                    float *out, float *lse, int r, int src) {
  const int n = s.seq / s.cp;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * s.heads) return;
  block_row(s, q, k, v, out, lse, r, src, (int)(i % n), (int)(i / n));
}

__global__ static void combine_kernel(float *acc_out, float *acc_lse, const float *blk_out, const float *blk_lse,
                                      int first, int n, int heads, int d) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * heads) return;
  combine_row(acc_out, acc_lse, blk_out, blk_lse, first, n, heads, d, (int)(i % n), (int)(i / n));
}

__global__ static void to_bf16_kernel(const float *in, __nv_bfloat16 *out, long long count) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ static void delta_kernel(const uint16_t *dout, const float *out, float *delta, int n, int heads, int d) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * heads) return;
  delta_row(dout, out, delta, n, heads, d, (int)(i % n), (int)(i / n));
}

__global__ static void bwd_q_kernel(cp_attn_shape s, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                    const uint16_t *dout, const float *lse, const float *delta, float *dq, int r,
                                    int src) {
  const int n = s.seq / s.cp;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * s.heads) return;
  bwd_q_row(s, q, k, v, dout, lse, delta, dq, r, src, (int)(i % n), (int)(i / n));
}

__global__ static void bwd_kv_kernel(cp_attn_shape s, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                     const uint16_t *dout, const float *lse, const float *delta, float *dk, float *dv,
                                     int r, int src) {
  const int n = s.seq / s.cp;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * s.kv_heads) return;
  bwd_kv_row(s, q, k, v, dout, lse, delta, dk, dv, r, src, (int)(i % n), (int)(i / n));
}

/* ---- shapes ---- */

static int check_block(const cp_attn_shape *s, int r, int src, ts_err *e) {
  if (!s) return ts_fail(e, NULL, "cp attention", "no shape");
  const int seq = s->seq, cp = s->cp;
  if (cp < 1 || seq < 2 * cp || seq % (2 * cp))
    return ts_fail(e, NULL, "cp attention", "seq %d is not a positive multiple of 2 cp = %d", seq, 2 * cp);
  if (r < 0 || r >= cp || src < 0 || src >= cp)
    return ts_fail(e, NULL, "cp attention", "rank %d or source %d outside 0..%d", r, src, cp - 1);
  if (s->heads < 1 || s->d < 1 || s->d > CP_ATTN_MAX_D)
    return ts_fail(e, NULL, "cp attention", "heads %d, head_dim %d (1..%d)", s->heads, s->d, CP_ATTN_MAX_D);
  if (s->kv_heads < 1 || s->heads % s->kv_heads)
    return ts_fail(e, NULL, "cp attention", "kv_heads %d does not divide heads %d", s->kv_heads, s->heads);
  if (s->ldq < (long long)s->heads * s->d || s->ldkv < (long long)s->kv_heads * s->d)
    return ts_fail(e, NULL, "cp attention", "row strides %lld (q) and %lld (k, v) under %d and %d heads of %d",
                   s->ldq, s->ldkv, s->heads, s->kv_heads, s->d);
  return 0;
}

static int check_combine(int n, int heads, int d, ts_err *e) {
  if (n < 1 || heads < 1 || d < 1)
    return ts_fail(e, NULL, "cp attention", "combine of %d rows, %d heads, head_dim %d", n, heads, d);
  return 0;
}

static unsigned grid_of(long long threads) { return (unsigned)((threads + CP_ATTN_THREADS - 1) / CP_ATTN_THREADS); }

#define U16(p) ((const uint16_t *)(p))

/* ---- on the GPU ---- */

int cp_attn_block(const cp_attn_shape *s, const void *q, const void *k, const void *v, float *out, float *lse, int r,
                  int src, void *stream, ts_err *e) {
  if (check_block(s, r, src, e)) return -1;
  block_kernel<<<grid_of((long long)(s->seq / s->cp) * s->heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(
      *s, U16(q), U16(k), U16(v), out, lse, r, src);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

int cp_attn_combine(float *acc_out, float *acc_lse, const float *blk_out, const float *blk_lse, int first, int n,
                    int heads, int d, void *stream, ts_err *e) {
  if (check_combine(n, heads, d, e)) return -1;
  combine_kernel<<<grid_of((long long)n * heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(
      acc_out, acc_lse, blk_out, blk_lse, first, n, heads, d);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

int cp_attn_to_bf16(const float *in, void *out, long long count, void *stream, ts_err *e) {
  if (count < 1) return ts_fail(e, NULL, "cp attention", "conversion of %lld values", count);
  to_bf16_kernel<<<grid_of(count), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(in, (__nv_bfloat16 *)out, count);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

int cp_attn_bwd_delta(const void *dout, const float *out, float *delta, int n, int heads, int d, void *stream,
                      ts_err *e) {
  if (check_combine(n, heads, d, e)) return -1;
  delta_kernel<<<grid_of((long long)n * heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(U16(dout), out, delta, n,
                                                                                          heads, d);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

int cp_attn_block_bwd_q(const cp_attn_shape *s, const void *q, const void *k, const void *v, const void *dout,
                        const float *lse, const float *delta, float *dq, int r, int src, void *stream, ts_err *e) {
  if (check_block(s, r, src, e)) return -1;
  bwd_q_kernel<<<grid_of((long long)(s->seq / s->cp) * s->heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(
      *s, U16(q), U16(k), U16(v), U16(dout), lse, delta, dq, r, src);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

int cp_attn_block_bwd_kv(const cp_attn_shape *s, const void *q, const void *k, const void *v, const void *dout,
                         const float *lse, const float *delta, float *dk, float *dv, int r, int src, void *stream,
                         ts_err *e) {
  if (check_block(s, r, src, e)) return -1;
  bwd_kv_kernel<<<grid_of((long long)(s->seq / s->cp) * s->kv_heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(
      *s, U16(q), U16(k), U16(v), U16(dout), lse, delta, dk, dv, r, src);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

/* ---- on the CPU ---- */

int cp_attn_block_host(const cp_attn_shape *s, const void *q, const void *k, const void *v, float *out, float *lse,
                       int r, int src, ts_err *e) {
  if (check_block(s, r, src, e)) return -1;
  for (int h = 0; h < s->heads; h++)
    for (int t = 0; t < s->seq / s->cp; t++) block_row(*s, U16(q), U16(k), U16(v), out, lse, r, src, t, h);
  return 0;
}

int cp_attn_combine_host(float *acc_out, float *acc_lse, const float *blk_out, const float *blk_lse, int first,
                         int n, int heads, int d, ts_err *e) {
  if (check_combine(n, heads, d, e)) return -1;
  for (int h = 0; h < heads; h++)
    for (int t = 0; t < n; t++) combine_row(acc_out, acc_lse, blk_out, blk_lse, first, n, heads, d, t, h);
  return 0;
}

int cp_attn_bwd_delta_host(const void *dout, const float *out, float *delta, int n, int heads, int d, ts_err *e) {
  if (check_combine(n, heads, d, e)) return -1;
  for (int h = 0; h < heads; h++)
    for (int t = 0; t < n; t++) delta_row(U16(dout), out, delta, n, heads, d, t, h);
  return 0;
}

int cp_attn_block_bwd_q_host(const cp_attn_shape *s, const void *q, const void *k, const void *v, const void *dout,
                             const float *lse, const float *delta, float *dq, int r, int src, ts_err *e) {
  if (check_block(s, r, src, e)) return -1;
  for (int h = 0; h < s->heads; h++)
    for (int t = 0; t < s->seq / s->cp; t++)
      bwd_q_row(*s, U16(q), U16(k), U16(v), U16(dout), lse, delta, dq, r, src, t, h);
  return 0;
}

int cp_attn_block_bwd_kv_host(const cp_attn_shape *s, const void *q, const void *k, const void *v, const void *dout,
                              const float *lse, const float *delta, float *dk, float *dv, int r, int src, ts_err *e) {
  if (check_block(s, r, src, e)) return -1;
  for (int g = 0; g < s->kv_heads; g++)
    for (int j = 0; j < s->seq / s->cp; j++)
      bwd_kv_row(*s, U16(q), U16(k), U16(v), U16(dout), lse, delta, dk, dv, r, src, j, g);
  return 0;
}

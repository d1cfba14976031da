/* cp_attention.cu — one ring step of context parallelism's attention and the
 * log-sum-exp combine (see cp_attention.h). Each thread owns one (query row,
 * head); the per-row work is a __host__ __device__ function so that the CPU
 * versions run the same arithmetic. The backward gives each thread one
 * (query row, head) for dQ and one (key row, head) of the block in hand for
 * dK, dV: no two threads write the same row, no atomics. */
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

/* Query row t of rank r, head h, against rank src's n keys: two passes (the
 * largest visible score, then the weights), as the float64 reference. */
__host__ __device__ static void block_row(const uint16_t *q, const uint16_t *k, const uint16_t *v, float *out,
                                          float *lse, int seq, int cp, int r, int src, int heads, int d, int t,
                                          int h) {
  const int n = seq / cp;
  const long long ld = (long long)heads * d;
  const uint16_t *qr = q + t * ld + (long long)h * d;
  const float scale = 1.0f / sqrtf((float)d);
  const int qp = cp_pos(seq, cp, r, t);
  float mx = -INFINITY;
  for (int j = 0; j < n; j++) {
    if (cp_pos(seq, cp, src, j) > qp) continue;
    const uint16_t *kr = k + j * ld + (long long)h * d;
    float s = 0;
    for (int x = 0; x < d; x++) s += bf16_at(qr, x) * bf16_at(kr, x);
    if (s * scale > mx) mx = s * scale;
  }
  float *o = out + t * ld + (long long)h * d;
  if (mx == -INFINITY) { /* no visible key in this block */
    for (int x = 0; x < d; x++) o[x] = 0;
    lse[(long long)h * n + t] = -INFINITY;
    return;
  }
  float acc[CP_ATTN_MAX_D];
  for (int x = 0; x < d; x++) acc[x] = 0;
  float sum = 0;
  for (int j = 0; j < n; j++) {
    if (cp_pos(seq, cp, src, j) > qp) continue;
    const uint16_t *kr = k + j * ld + (long long)h * d, *vr = v + j * ld + (long long)h * d;
    float s = 0;
    for (int x = 0; x < d; x++) s += bf16_at(qr, x) * bf16_at(kr, x);
    float w = expf(s * scale - mx);
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

/* Backward, per (row, head). delta of rank r's row t, head h. */
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
  float s = 0, dp = 0;
  for (int x = 0; x < d; x++) s += bf16_at(qr, x) * bf16_at(kr, x), dp += bf16_at(dr, x) * bf16_at(vr, x);
  *p = expf(s * scale - lse);
  *ds = *p * (dp - delta);
}

/* dQ of rank r's row t, head h, from the keys of block src it sees (added to dq). */
__host__ __device__ static void bwd_q_row(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                          const uint16_t *dout, const float *lse, const float *delta, float *dq,
                                          int seq, int cp, int r, int src, int heads, int d, int t, int h) {
  const int n = seq / cp;
  const long long ld = (long long)heads * d, row = t * ld + (long long)h * d, li = (long long)h * n + t;
  const float scale = 1.0f / sqrtf((float)d);
  const int qp = cp_pos(seq, cp, r, t);
  for (int j = 0; j < n; j++) {
    if (cp_pos(seq, cp, src, j) > qp) continue;
    const long long kj = j * ld + (long long)h * d;
    float p, ds;
    bwd_weights(q + row, k + kj, v + kj, dout + row, lse[li], delta[li], scale, d, &p, &ds);
    for (int x = 0; x < d; x++) dq[row + x] += scale * ds * bf16_at(k, kj + x);
  }
}

/* dK, dV of block src's key j, head h, from rank r's rows that see it (added to dk, dv). */
__host__ __device__ static void bwd_kv_row(const uint16_t *q, const uint16_t *k, const uint16_t *v,
                                           const uint16_t *dout, const float *lse, const float *delta, float *dk,
                                           float *dv, int seq, int cp, int r, int src, int heads, int d, int j, int h) {
  const int n = seq / cp;
  const long long ld = (long long)heads * d, kj = j * ld + (long long)h * d;
  const float scale = 1.0f / sqrtf((float)d);
  const int kp = cp_pos(seq, cp, src, j);
  for (int t = 0; t < n; t++) {
    if (cp_pos(seq, cp, r, t) < kp) continue;
    const long long row = t * ld + (long long)h * d, li = (long long)h * n + t;
    float p, ds;
    bwd_weights(q + row, k + kj, v + kj, dout + row, lse[li], delta[li], scale, d, &p, &ds);
    for (int x = 0; x < d; x++) {
      dk[kj + x] += scale * ds * bf16_at(q, row + x);
      dv[kj + x] += p * bf16_at(dout, row + x);
    }
  }
}

__global__ static void delta_kernel(const uint16_t *dout, const float *out, float *delta, int n, int heads, int d) {
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * heads) return;
  delta_row(dout, out, delta, n, heads, d, (int)(i % n), (int)(i / n));
}

__global__ static void bwd_q_kernel(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout,
                                    const float *lse, const float *delta, float *dq, int seq, int cp, int r, int src,
                                    int heads, int d) {
  const int n = seq / cp;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * heads) return;
  bwd_q_row(q, k, v, dout, lse, delta, dq, seq, cp, r, src, heads, d, (int)(i % n), (int)(i / n));
}

__global__ static void bwd_kv_kernel(const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout,
                                     const float *lse, const float *delta, float *dk, float *dv, int seq, int cp,
                                     int r, int src, int heads, int d) {
  const int n = seq / cp;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * heads) return;
  bwd_kv_row(q, k, v, dout, lse, delta, dk, dv, seq, cp, r, src, heads, d, (int)(i % n), (int)(i / n));
}

__global__ static void block_kernel(const uint16_t *q, const uint16_t *k, const uint16_t *v, float *out, float *lse,
                                    int seq, int cp, int r, int src, int heads, int d) {
  const int n = seq / cp;
  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= (long long)n * heads) return;
  block_row(q, k, v, out, lse, seq, cp, r, src, heads, d, (int)(i % n), (int)(i / n));
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

static int check_block(int seq, int cp, int r, int src, int heads, int d, ts_err *e) {
  if (cp < 1 || seq < 2 * cp || seq % (2 * cp))
    return ts_fail(e, NULL, "cp attention", "seq %d is not a positive multiple of 2 cp = %d", seq, 2 * cp);
  if (r < 0 || r >= cp || src < 0 || src >= cp)
    return ts_fail(e, NULL, "cp attention", "rank %d or source %d outside 0..%d", r, src, cp - 1);
  if (heads < 1 || d < 1 || d > CP_ATTN_MAX_D)
    return ts_fail(e, NULL, "cp attention", "heads %d, head_dim %d (1..%d)", heads, d, CP_ATTN_MAX_D);
  return 0;
}

static int check_combine(int n, int heads, int d, ts_err *e) {
  if (n < 1 || heads < 1 || d < 1)
    return ts_fail(e, NULL, "cp attention", "combine of %d rows, %d heads, head_dim %d", n, heads, d);
  return 0;
}

static unsigned grid_of(long long threads) { return (unsigned)((threads + CP_ATTN_THREADS - 1) / CP_ATTN_THREADS); }

int cp_attn_block(const void *q, const void *k, const void *v, float *out, float *lse, int seq, int cp, int r,
                  int src, int heads, int d, void *stream, ts_err *e) {
  if (check_block(seq, cp, r, src, heads, d, e)) return -1;
  block_kernel<<<grid_of((long long)(seq / cp) * heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(
      (const uint16_t *)q, (const uint16_t *)k, (const uint16_t *)v, out, lse, seq, cp, r, src, heads, d);
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
  delta_kernel<<<grid_of((long long)n * heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(
      (const uint16_t *)dout, out, delta, n, heads, d);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

int cp_attn_block_bwd_q(const void *q, const void *k, const void *v, const void *dout, const float *lse,
                        const float *delta, float *dq, int seq, int cp, int r, int src, int heads, int d, void *stream,
                        ts_err *e) {
  if (check_block(seq, cp, r, src, heads, d, e)) return -1;
  bwd_q_kernel<<<grid_of((long long)(seq / cp) * heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(
      (const uint16_t *)q, (const uint16_t *)k, (const uint16_t *)v, (const uint16_t *)dout, lse, delta, dq, seq, cp,
      r, src, heads, d);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

int cp_attn_block_bwd_kv(const void *q, const void *k, const void *v, const void *dout, const float *lse,
                         const float *delta, float *dk, float *dv, int seq, int cp, int r, int src, int heads, int d,
                         void *stream, ts_err *e) {
  if (check_block(seq, cp, r, src, heads, d, e)) return -1;
  bwd_kv_kernel<<<grid_of((long long)(seq / cp) * heads), CP_ATTN_THREADS, 0, (cudaStream_t)stream>>>(
      (const uint16_t *)q, (const uint16_t *)k, (const uint16_t *)v, (const uint16_t *)dout, lse, delta, dk, dv, seq,
      cp, r, src, heads, d);
  CUDA_CHECK_LAUNCH(e);
  return 0;
}

int cp_attn_block_host(const void *q, const void *k, const void *v, float *out, float *lse, int seq, int cp, int r,
                       int src, int heads, int d, ts_err *e) {
  if (check_block(seq, cp, r, src, heads, d, e)) return -1;
  for (int h = 0; h < heads; h++)
    for (int t = 0; t < seq / cp; t++)
      block_row((const uint16_t *)q, (const uint16_t *)k, (const uint16_t *)v, out, lse, seq, cp, r, src, heads, d, t,
                h);
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
    for (int t = 0; t < n; t++) delta_row((const uint16_t *)dout, out, delta, n, heads, d, t, h);
  return 0;
}

int cp_attn_block_bwd_q_host(const void *q, const void *k, const void *v, const void *dout, const float *lse,
                             const float *delta, float *dq, int seq, int cp, int r, int src, int heads, int d,
                             ts_err *e) {
  if (check_block(seq, cp, r, src, heads, d, e)) return -1;
  for (int h = 0; h < heads; h++)
    for (int t = 0; t < seq / cp; t++)
      bwd_q_row((const uint16_t *)q, (const uint16_t *)k, (const uint16_t *)v, (const uint16_t *)dout, lse, delta, dq,
                seq, cp, r, src, heads, d, t, h);
  return 0;
}

int cp_attn_block_bwd_kv_host(const void *q, const void *k, const void *v, const void *dout, const float *lse,
                              const float *delta, float *dk, float *dv, int seq, int cp, int r, int src, int heads,
                              int d, ts_err *e) {
  if (check_block(seq, cp, r, src, heads, d, e)) return -1;
  for (int h = 0; h < heads; h++)
    for (int j = 0; j < seq / cp; j++)
      bwd_kv_row((const uint16_t *)q, (const uint16_t *)k, (const uint16_t *)v, (const uint16_t *)dout, lse, delta, dk,
                 dv, seq, cp, r, src, heads, d, j, h);
  return 0;
}

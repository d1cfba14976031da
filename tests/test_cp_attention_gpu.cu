/* test_cp_attention_gpu.cu — context parallelism's attention math on one GPU
 * (runtime/ops/cp_attention.cu): every CP rank's share of a causal attention,
 * computed ring step by ring step (its query rows against the KV block of
 * rank (r - s) mod cp, the causal mask of the global positions of the 2 cp
 * chunk split) and combined by log-sum-exp, against
 *   (a) the float64 reference's share, cp_ref_rank_attention (cp_attention_ref.c),
 *       on the same BF16-rounded inputs, and
 *   (b) full causal attention of the whole sequence by the executor's fused
 *       kernel, exec_flash_fwd, on the same BF16 inputs, its rows rearranged
 *       to the rank's local order.
 * Fresh random Q, K, V per case (its own seed; q, k in [-2, 2), v in [-1, 1)),
 * every output buffer poisoned with NaN before it is written; CP 2, 4, 8,
 * seq 256 .. 2048, head_dim 64 and 128, 2 or 3 heads.
 *
 * Tolerances, maximum absolute error relative to the largest |output| of the
 * case (inputs are identical BF16 values on both sides, so only the
 * arithmetic differs):
 *   FP32 combined output vs float64: 1e-3 (FP32 scores, exp and sums over at
 *     most 2048 keys err by ~1e-5; 100x margin, so a wrong mask, a wrong
 *     position or a wrong combine weight shows);
 *   BF16 output vs float64: 1e-2 (one rounding to BF16, at most 2^-9 = 2e-3
 *     of the value, plus the FP32 part; 5x margin);
 *   BF16 output vs exec_flash_fwd: 2e-2 (the fused kernel also rounds its
 *     probabilities to BF16 before P.V and its output to BF16, so each side
 *     is within ~5e-3 of the exact result).
 * Also checked at every step: no non-finite value in the block's output and
 * exactly the rows whose global position precedes every key of the block
 * marked "no visible key" (lse = -inf) — the rows the combine skips.
 * Backward (the ring's dQ, and dK, dV accumulators handed round with their
 * block): every rank's share against float64 full causal attention's
 * backward (cp_ref_full_attention_bwd) on the same BF16 inputs, dout in
 * [-1, 1); FP32 tolerance 1e-3 of the largest |gradient| (FP32 sums of at
 * most 1024 terms, as the forward); CP 2, 4, seq 256 .. 1024, 4 query heads
 * on 4 or 2 KV heads (grouped-query attention), on the executor's packed
 * [Q | K | V] rows (only the block's K and V columns travel: its Q columns
 * are poisoned).
 * And bad shapes (seq not a multiple of 2 cp, rank or source outside the ring,
 * KV heads not dividing the heads, a row stride shorter than its heads,
 * no heads, head_dim over 128, an empty combine) are refused with a message.
 *
 * --host runs the kernels' own per-row arithmetic on the CPU
 * (cp_attn_*_host) instead of the GPU, without (b): for a machine without a
 * GPU. --max-seq N leaves out the cases of longer sequences (default 2048).
 * No CUDA device (and no --host): prints SKIP, exit 77. Exit 1 on a failed
 * case or CUDA call, 2 on bad options. */
#include "cp_attention.h"
#include "cp_attention_ref.h"
#include "exec_flash.h"
#include "exec_gpu_test.h" /* CK, TRY, test_seed, urand, to_bf16, from_bf16 */

static const double TOL_FP32 = 1e-3, TOL_BF16 = 1e-2, TOL_FLASH = 2e-2;

static int host_mode; /* --host: the CPU versions of the kernels, host buffers */

/* Buffers: on the GPU, or on the host with --host. */
static void *buf_alloc(size_t bytes) {
  void *p = NULL;
  if (host_mode) {
    p = malloc(bytes);
    if (!p) fprintf(stderr, "out of memory (%zu bytes)\n", bytes), exit(1);
  } else
    CK(cudaMalloc(&p, bytes));
  return p;
}
static void buf_free(void *p) {
  if (host_mode)
    free(p);
  else
    CK(cudaFree(p));
}
static void buf_put(void *dst, const void *src, size_t bytes) {
  if (host_mode)
    memcpy(dst, src, bytes);
  else
    CK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
static void buf_get(void *dst, const void *src, size_t bytes) {
  if (host_mode)
    memcpy(dst, src, bytes);
  else
    CK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
static void buf_poison(void *p, size_t bytes) { /* all bits set: NaN as FP32 and as BF16 */
  if (host_mode)
    memset(p, 0xFF, bytes);
  else
    CK(cudaMemset(p, 0xFF, bytes));
}

typedef struct {
  int seq, cp, d, heads;
  uint64_t seed;
} cp_case;

typedef struct {
  double big;                  /* largest |output| (float64 reference) */
  double e32, e16, eflash;     /* max |error| / big: FP32 and BF16 output vs float64, BF16 vs exec_flash */
  long long nonfinite;         /* non-finite values in block outputs, the accumulator or the output */
  long long masked, masked_want; /* rows marked "no visible key" over all steps, and how many should be */
} cp_result;

/* Rows [t] of `rows` positions of rank r (local order) gathered from x [seq x hl] (global order). */
static void gather(const uint16_t *x, uint16_t *dst, int seq, int cp, int r, int hl) {
  for (int t = 0; t < seq / cp; t++)
    memcpy(dst + (size_t)t * hl, x + (size_t)cp_ref_position(seq, cp, r, t) * hl, sizeof(uint16_t) * hl);
}

/* Rank r's share on the GPU (or the host), step by step; FP32 and BF16 results in acc32, out16 [n x hl]. */
static void gpu_rank(const cp_case *c, int r, const uint16_t *q, const uint16_t *k, const uint16_t *v, float *acc32,
                     uint16_t *out16, cp_result *res) {
  const int n = c->seq / c->cp, hl = c->heads * c->d;
  const size_t rows16 = sizeof(uint16_t) * n * hl, rows32 = sizeof(float) * n * hl, lse32 = sizeof(float) * n * c->heads;
  uint16_t *h_q = (uint16_t *)malloc(rows16), *h_k = (uint16_t *)malloc(rows16), *h_v = (uint16_t *)malloc(rows16);
  float *h_blk = (float *)malloc(rows32), *h_lse = (float *)malloc(lse32);
  if (!h_q || !h_k || !h_v || !h_blk || !h_lse) fprintf(stderr, "out of memory\n"), exit(1);
  void *d_q = buf_alloc(rows16), *d_k = buf_alloc(rows16), *d_v = buf_alloc(rows16), *d_out16 = buf_alloc(rows16);
  float *d_blk = (float *)buf_alloc(rows32), *d_blk_lse = (float *)buf_alloc(lse32), *d_acc = (float *)buf_alloc(rows32),
        *d_acc_lse = (float *)buf_alloc(lse32);
  ts_err e;
  const cp_attn_shape sh = cp_attn_shape_mha(c->seq, c->cp, c->heads, c->d);
  gather(q, h_q, c->seq, c->cp, r, hl);
  buf_put(d_q, h_q, rows16);
  buf_poison(d_acc, rows32), buf_poison(d_acc_lse, lse32), buf_poison(d_out16, rows16);
  for (int s = 0; s < c->cp; s++) {
    const int src = ((r - s) % c->cp + c->cp) % c->cp; /* the KV block the ring brings at step s */
    gather(k, h_k, c->seq, c->cp, src, hl), gather(v, h_v, c->seq, c->cp, src, hl);
    buf_put(d_k, h_k, rows16), buf_put(d_v, h_v, rows16);
    buf_poison(d_blk, rows32), buf_poison(d_blk_lse, lse32);
    if (host_mode) {
      TRY(cp_attn_block_host(&sh, d_q, d_k, d_v, d_blk, d_blk_lse, r, src, &e));
      TRY(cp_attn_combine_host(d_acc, d_acc_lse, d_blk, d_blk_lse, s == 0, n, c->heads, c->d, &e));
    } else {
      TRY(cp_attn_block(&sh, d_q, d_k, d_v, d_blk, d_blk_lse, r, src, NULL, &e));
      TRY(cp_attn_combine(d_acc, d_acc_lse, d_blk, d_blk_lse, s == 0, n, c->heads, c->d, NULL, &e));
      CK(cudaDeviceSynchronize());
    }
    /* the block: finite everywhere; "no visible key" exactly where the row precedes every key of src */
    buf_get(h_blk, d_blk, rows32), buf_get(h_lse, d_blk_lse, lse32);
    for (int i = 0; i < n * hl; i++) res->nonfinite += !isfinite(h_blk[i]);
    int first_key = c->seq;
    for (int t = 0; t < n; t++)
      if (cp_ref_position(c->seq, c->cp, src, t) < first_key) first_key = cp_ref_position(c->seq, c->cp, src, t);
    for (int h = 0; h < c->heads; h++)
      for (int t = 0; t < n; t++) {
        float l = h_lse[h * n + t];
        if (isnan(l) || l == INFINITY) res->nonfinite++;
        res->masked += l == -INFINITY;
        res->masked_want += cp_ref_position(c->seq, c->cp, r, t) < first_key;
      }
  }
  if (host_mode) {
    for (int i = 0; i < n * hl; i++) h_q[i] = to_bf16(d_acc[i]); /* the host's rounding, as the GPU's */
    memcpy(d_out16, h_q, rows16);
  } else {
    TRY(cp_attn_to_bf16(d_acc, d_out16, (long long)n * hl, NULL, &e));
    CK(cudaDeviceSynchronize());
  }
  buf_get(acc32, d_acc, rows32), buf_get(out16, d_out16, rows16);
  buf_free(d_acc_lse), buf_free(d_acc), buf_free(d_blk_lse), buf_free(d_blk);
  buf_free(d_out16), buf_free(d_v), buf_free(d_k), buf_free(d_q);
  free(h_lse), free(h_blk), free(h_v), free(h_k), free(h_q);
}

/* exec_flash_fwd over the whole sequence (qkv [seq x 3 hl] = Q | K | V); out [seq x hl] BF16. */
static void flash_full(const cp_case *c, const uint16_t *q, const uint16_t *k, const uint16_t *v, uint16_t *out) {
  const int hl = c->heads * c->d;
  const size_t qkv_bytes = sizeof(uint16_t) * c->seq * 3 * hl, out_bytes = sizeof(uint16_t) * c->seq * hl;
  uint16_t *h_qkv = (uint16_t *)malloc(qkv_bytes);
  if (!h_qkv) fprintf(stderr, "out of memory\n"), exit(1);
  for (int i = 0; i < c->seq; i++) {
    memcpy(h_qkv + (size_t)i * 3 * hl, q + (size_t)i * hl, sizeof(uint16_t) * hl);
    memcpy(h_qkv + (size_t)i * 3 * hl + hl, k + (size_t)i * hl, sizeof(uint16_t) * hl);
    memcpy(h_qkv + (size_t)i * 3 * hl + 2 * hl, v + (size_t)i * hl, sizeof(uint16_t) * hl);
  }
  void *d_qkv = NULL, *d_out = NULL;
  float *d_lse = NULL;
  ts_err e;
  CK(cudaMalloc(&d_qkv, qkv_bytes));
  CK(cudaMalloc(&d_out, out_bytes));
  CK(cudaMalloc((void **)&d_lse, sizeof(float) * c->seq * c->heads));
  CK(cudaMemcpy(d_qkv, h_qkv, qkv_bytes, cudaMemcpyHostToDevice));
  CK(cudaMemset(d_out, 0xFF, out_bytes));
  TRY(exec_flash_fwd(d_qkv, d_out, d_lse, 1, c->seq, c->heads, c->d, NULL, &e));
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(out, d_out, out_bytes, cudaMemcpyDeviceToHost));
  CK(cudaFree(d_lse));
  CK(cudaFree(d_out));
  CK(cudaFree(d_qkv));
  free(h_qkv);
}

static int run_case(const cp_case *c) {
  const int seq = c->seq, cp = c->cp, d = c->d, H = c->heads, hl = H * d, n = seq / cp;
  uint16_t *q = (uint16_t *)malloc(sizeof(uint16_t) * seq * hl), *k = (uint16_t *)malloc(sizeof(uint16_t) * seq * hl),
           *v = (uint16_t *)malloc(sizeof(uint16_t) * seq * hl), *flash = (uint16_t *)malloc(sizeof(uint16_t) * seq * hl),
           *out16 = (uint16_t *)malloc(sizeof(uint16_t) * n * hl);
  float *acc32 = (float *)malloc(sizeof(float) * n * hl);
  double *kd = (double *)malloc(sizeof(double) * seq * d), *vd = (double *)malloc(sizeof(double) * seq * d),
         *ql = (double *)malloc(sizeof(double) * n * d), *ref = (double *)malloc(sizeof(double) * (size_t)cp * H * n * d);
  if (!q || !k || !v || !flash || !out16 || !acc32 || !kd || !vd || !ql || !ref)
    fprintf(stderr, "out of memory\n"), exit(1);
  test_seed(c->seed);
  for (int i = 0; i < seq * hl; i++) {
    q[i] = to_bf16((float)(4 * urand() - 2));
    k[i] = to_bf16((float)(4 * urand() - 2));
    v[i] = to_bf16((float)(2 * urand() - 1));
  }
  if (!host_mode) flash_full(c, q, k, v, flash);

  /* (a) the float64 shares, ref[r][h][t][x], on the BF16 values */
  cp_result res = {};
  for (int h = 0; h < H; h++) {
    for (int i = 0; i < seq; i++)
      for (int x = 0; x < d; x++)
        kd[i * d + x] = from_bf16(k[(size_t)i * hl + h * d + x]), vd[i * d + x] = from_bf16(v[(size_t)i * hl + h * d + x]);
    for (int r = 0; r < cp; r++) {
      for (int t = 0; t < n; t++)
        for (int x = 0; x < d; x++) ql[t * d + x] = from_bf16(q[(size_t)cp_ref_position(seq, cp, r, t) * hl + h * d + x]);
      double *o = ref + ((size_t)r * H + h) * n * d;
      for (int i = 0; i < n * d; i++) o[i] = NAN;
      if (cp_ref_rank_attention(seq, d, cp, r, 1.0 / sqrt((double)d), ql, kd, vd, o, NULL))
        fprintf(stderr, "cp_ref_rank_attention refused seq %d cp %d\n", seq, cp), exit(1);
      for (int i = 0; i < n * d; i++) res.big = fmax(res.big, fabs(o[i]));
    }
  }
  /* each rank's share on the GPU, against (a) and (b) */
  for (int r = 0; r < cp; r++) {
    gpu_rank(c, r, q, k, v, acc32, out16, &res);
    for (int t = 0; t < n; t++)
      for (int h = 0; h < H; h++)
        for (int x = 0; x < d; x++) {
          const size_t i = (size_t)t * hl + h * d + x;
          const double want = ref[(((size_t)r * H + h) * n + t) * d + x], g32 = acc32[i], g16 = from_bf16(out16[i]);
          if (!isfinite(g32) || !isfinite(g16) || !isfinite(want)) {
            res.nonfinite++;
            continue;
          }
          res.e32 = fmax(res.e32, fabs(g32 - want));
          res.e16 = fmax(res.e16, fabs(g16 - want));
          if (!host_mode) {
            const double f = from_bf16(flash[(size_t)cp_ref_position(seq, cp, r, t) * hl + h * d + x]);
            res.eflash = isfinite(f) ? fmax(res.eflash, fabs(g16 - f)) : INFINITY;
          }
        }
  }
  const double big = res.big > 0 ? res.big : 1;
  res.e32 /= big, res.e16 /= big, res.eflash /= big;
  const int ok = res.big > 0 && res.nonfinite == 0 && res.masked == res.masked_want && res.e32 <= TOL_FP32 &&
                 res.e16 <= TOL_BF16 && (host_mode || res.eflash <= TOL_FLASH);
  char fl[32];
  if (host_mode)
    snprintf(fl, sizeof fl, "%9s", "-");
  else
    snprintf(fl, sizeof fl, "%9.2e", res.eflash);
  printf("%-4s %5d %3d %4d %3d %#18llx %8.3f %9.2e %9.2e %s %6lld %7lld/%-7lld\n", ok ? "ok" : "FAIL", seq, cp, d, H,
         (unsigned long long)c->seed, res.big, res.e32, res.e16, fl, res.nonfinite, res.masked, res.masked_want);
  free(ref), free(ql), free(vd), free(kd), free(acc32), free(out16), free(flash), free(v), free(k), free(q);
  return ok;
}

/* ---- backward ---- */

/* Rank src's rows of the packed QKV rows [seq x cols] (global order), in its local order. */
static void gather_rows(const uint16_t *x, uint16_t *dst, int seq, int cp, int r, int cols) {
  gather(x, dst, seq, cp, r, cols);
}

/* Rank r's ring backward on the GPU (or the host), on the executor's packed rows [Q | K | V] of cols =
 * (heads + 2 kv_heads) d (grouped-query attention when kv_heads < heads): the forward ring again (the
 * combined output and log-sum-exp), delta, then at each step dQ of the rank's rows and the travelling dK, dV
 * of the block in hand, which dk, dv [cp blocks][n x kv_heads d] FP32 hold in each block's owner's local
 * order (uploaded and read back around each step, as the ring hands the accumulator on). dout
 * [seq x heads d] global order; dq [n x heads d] gets the rank's dQ. */
static void gpu_rank_bwd(const cp_case *c, int kv, int r, const uint16_t *qkv, const uint16_t *dout, float *dq,
                         float *dk, float *dv) {
  const int n = c->seq / c->cp, H = c->heads, D = c->d, hl = H * D, kl = kv * D, cols = hl + 2 * kl;
  const cp_attn_shape sh = {c->seq, c->cp, H, kv, D, cols, cols};
  const size_t rows = sizeof(uint16_t) * n * cols, do16 = sizeof(uint16_t) * n * hl, rows32 = sizeof(float) * n * hl,
               kv32 = sizeof(float) * n * kl, lse32 = sizeof(float) * n * H;
  uint16_t *h_mine = (uint16_t *)malloc(rows), *h_blk = (uint16_t *)malloc(rows), *h_do = (uint16_t *)malloc(do16);
  if (!h_mine || !h_blk || !h_do) fprintf(stderr, "out of memory\n"), exit(1);
  uint16_t *d_mine = (uint16_t *)buf_alloc(rows), *d_kvb = (uint16_t *)buf_alloc(rows), *d_do = (uint16_t *)buf_alloc(do16);
  float *d_blk = (float *)buf_alloc(rows32), *d_blk_lse = (float *)buf_alloc(lse32), *d_acc = (float *)buf_alloc(rows32),
        *d_lse = (float *)buf_alloc(lse32), *d_delta = (float *)buf_alloc(lse32), *d_dq = (float *)buf_alloc(rows32),
        *d_dk = (float *)buf_alloc(kv32), *d_dv = (float *)buf_alloc(kv32);
  ts_err e;
  gather_rows(qkv, h_mine, c->seq, c->cp, r, cols), gather(dout, h_do, c->seq, c->cp, r, hl);
  buf_put(d_mine, h_mine, rows), buf_put(d_do, h_do, do16);
  buf_poison(d_acc, rows32), buf_poison(d_lse, lse32), buf_poison(d_delta, lse32);
  const uint16_t *q = d_mine, *k = d_kvb + hl, *v = d_kvb + hl + kl; /* the block's K, V inside its packed rows */
  for (int pass = 0; pass < 2; pass++) /* 0: the forward ring; 1: the backward ring */
    for (int s = 0; s < c->cp; s++) {
      const int src = ((r - s) % c->cp + c->cp) % c->cp;
      gather_rows(qkv, h_blk, c->seq, c->cp, src, cols);
      buf_poison(d_kvb, rows);
      for (int t = 0; t < n; t++) /* only K and V travel: the block's Q columns stay poisoned */
        buf_put(d_kvb + (size_t)t * cols + hl, h_blk + (size_t)t * cols + hl, sizeof(uint16_t) * 2 * kl);
      if (pass == 0) {
        buf_poison(d_blk, rows32), buf_poison(d_blk_lse, lse32);
        if (host_mode) {
          TRY(cp_attn_block_host(&sh, q, k, v, d_blk, d_blk_lse, r, src, &e));
          TRY(cp_attn_combine_host(d_acc, d_lse, d_blk, d_blk_lse, s == 0, n, H, D, &e));
        } else {
          TRY(cp_attn_block(&sh, q, k, v, d_blk, d_blk_lse, r, src, NULL, &e));
          TRY(cp_attn_combine(d_acc, d_lse, d_blk, d_blk_lse, s == 0, n, H, D, NULL, &e));
        }
        continue;
      }
      if (s == 0) { /* delta from the combined output; dQ starts at 0 */
        if (host_mode) {
          TRY(cp_attn_bwd_delta_host(d_do, d_acc, d_delta, n, H, D, &e));
          memset(d_dq, 0, rows32);
        } else {
          TRY(cp_attn_bwd_delta(d_do, d_acc, d_delta, n, H, D, NULL, &e));
          CK(cudaMemset(d_dq, 0, rows32));
        }
      }
      buf_put(d_dk, dk + (size_t)src * n * kl, kv32), buf_put(d_dv, dv + (size_t)src * n * kl, kv32);
      if (host_mode) {
        TRY(cp_attn_block_bwd_q_host(&sh, q, k, v, d_do, d_lse, d_delta, d_dq, r, src, &e));
        TRY(cp_attn_block_bwd_kv_host(&sh, q, k, v, d_do, d_lse, d_delta, d_dk, d_dv, r, src, &e));
      } else {
        TRY(cp_attn_block_bwd_q(&sh, q, k, v, d_do, d_lse, d_delta, d_dq, r, src, NULL, &e));
        TRY(cp_attn_block_bwd_kv(&sh, q, k, v, d_do, d_lse, d_delta, d_dk, d_dv, r, src, NULL, &e));
        CK(cudaDeviceSynchronize());
      }
      buf_get(dk + (size_t)src * n * kl, d_dk, kv32), buf_get(dv + (size_t)src * n * kl, d_dv, kv32);
    }
  buf_get(dq, d_dq, rows32);
  buf_free(d_dv), buf_free(d_dk), buf_free(d_dq), buf_free(d_delta), buf_free(d_lse), buf_free(d_acc);
  buf_free(d_blk_lse), buf_free(d_blk), buf_free(d_do), buf_free(d_kvb), buf_free(d_mine);
  free(h_do), free(h_blk), free(h_mine);
}

/* The ring backward of every rank against float64 full causal attention's backward (cp_ref_full_attention_bwd,
 * per query head against its group's KV head; dK, dV summed over the group) on the same BF16 inputs: dQ, and
 * dK, dV once their accumulators have gone round the ring. Max |err| relative to the largest |gradient|,
 * tolerance TOL_FP32 (FP32 arithmetic on identical inputs). kv: the KV heads (kv < heads: GQA). */
static int run_case_bwd(const cp_case *c, int kv) {
  const int seq = c->seq, cp = c->cp, D = c->d, H = c->heads, hl = H * D, kl = kv * D, cols = hl + 2 * kl,
            n = seq / cp, group = H / kv;
  std::vector<uint16_t> qkv((size_t)seq * cols), dout((size_t)seq * hl);
  std::vector<float> dq((size_t)n * hl), dk((size_t)seq * kl, 0.0f), dv((size_t)seq * kl, 0.0f),
      gq((size_t)seq * hl, NAN);
  std::vector<double> qd((size_t)seq * D), kd((size_t)seq * D), vd((size_t)seq * D), dod((size_t)seq * D),
      rq((size_t)seq * D), rk((size_t)seq * D), rv((size_t)seq * D), wk((size_t)seq * D), wv((size_t)seq * D);
  test_seed(c->seed);
  for (int i = 0; i < seq; i++)
    for (int x = 0; x < cols; x++)
      qkv[(size_t)i * cols + x] = to_bf16((float)(x < hl + kl ? 4 * urand() - 2 : 2 * urand() - 1));
  for (size_t i = 0; i < dout.size(); i++) dout[i] = to_bf16((float)(2 * urand() - 1));
  /* dk, dv: block src's accumulator at dk[src * n * kl], its rows in src's local order; dq back to global order */
  for (int r = 0; r < cp; r++) {
    for (size_t i = 0; i < dq.size(); i++) dq[i] = NAN;
    gpu_rank_bwd(c, kv, r, qkv.data(), dout.data(), dq.data(), dk.data(), dv.data());
    for (int t = 0; t < n; t++)
      memcpy(&gq[(size_t)cp_ref_position(seq, cp, r, t) * hl], &dq[(size_t)t * hl], sizeof(float) * hl);
  }
  double big = 0, err = 0;
  long long nonfinite = 0;
  for (int g = 0; g < kv; g++) {
    for (size_t i = 0; i < wk.size(); i++) wk[i] = wv[i] = 0; /* dK, dV of KV head g: the group's sum */
    for (int h = g * group; h < (g + 1) * group; h++) {
      for (int i = 0; i < seq; i++)
        for (int x = 0; x < D; x++) {
          const size_t row = (size_t)i * cols;
          qd[i * D + x] = from_bf16(qkv[row + h * D + x]), kd[i * D + x] = from_bf16(qkv[row + hl + g * D + x]);
          vd[i * D + x] = from_bf16(qkv[row + hl + kl + g * D + x]), dod[i * D + x] = from_bf16(dout[(size_t)i * hl + h * D + x]);
        }
      cp_ref_full_attention_bwd(seq, D, 1.0 / sqrt((double)D), qd.data(), kd.data(), vd.data(), dod.data(),
                                rq.data(), rk.data(), rv.data());
      for (size_t i = 0; i < wk.size(); i++) wk[i] += rk[i], wv[i] += rv[i];
      for (int i = 0; i < seq; i++)
        for (int x = 0; x < D; x++) {
          const double got = gq[(size_t)i * hl + h * D + x], want = rq[i * D + x];
          if (!isfinite(got)) {
            nonfinite++;
            continue;
          }
          big = fmax(big, fabs(want)), err = fmax(err, fabs(got - want));
        }
    }
    for (int src = 0; src < cp; src++)
      for (int j = 0; j < n; j++)
        for (int x = 0; x < D; x++) {
          const size_t gi = (size_t)cp_ref_position(seq, cp, src, j), loc = ((size_t)src * n + j) * kl + g * D + x;
          const double want[2] = {wk[gi * D + x], wv[gi * D + x]}, got[2] = {dk[loc], dv[loc]};
          for (int w = 0; w < 2; w++) {
            if (!isfinite(got[w])) {
              nonfinite++;
              continue;
            }
            big = fmax(big, fabs(want[w])), err = fmax(err, fabs(got[w] - want[w]));
          }
        }
  }
  err /= big > 0 ? big : 1;
  const int ok = big > 0 && nonfinite == 0 && err <= TOL_FP32;
  printf("%-4s bwd %5d %3d %4d %3d kv %d %#18llx max|grad| %8.3f dq/dk/dv fp32-f64 %9.2e nonfinite %lld\n",
         ok ? "ok" : "FAIL", seq, cp, D, H, kv, (unsigned long long)c->seed, big, err, nonfinite);
  return ok;
}

/* Bad shapes are refused with a message (checked before any launch, so the CPU entry points show it). */
static int refusals_ok(void) {
  uint16_t x[4] = {0};
  float o[4], l[4];
  ts_err e;
  cp_attn_shape bad[] = {cp_attn_shape_mha(12, 4, 1, 1), cp_attn_shape_mha(16, 2, 1, 1), cp_attn_shape_mha(16, 2, 1, 1),
                         cp_attn_shape_mha(16, 2, 0, 1), cp_attn_shape_mha(16, 2, 1, 129), {16, 2, 4, 3, 8, 56, 24},
                         {16, 2, 4, 2, 8, 31, 16}};
  const int ranks[][2] = {{0, 0}, {2, 0}, {0, -1}, {0, 0}, {0, 0}, {0, 0}, {0, 0}};
  int ok = 1;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    e.msg[0] = 0;
    const int rc = cp_attn_block_host(&bad[i], x, x, x, o, l, ranks[i][0], ranks[i][1], &e);
    if (rc != -1 || !e.msg[0]) ok = 0;
    printf("  refused? seq %d cp %d rank %d src %d heads %d kv %d d %d ldq %lld: %s (%s)\n", bad[i].seq, bad[i].cp,
           ranks[i][0], ranks[i][1], bad[i].heads, bad[i].kv_heads, bad[i].d, bad[i].ldq, rc == -1 ? "yes" : "NO",
           e.msg);
  }
  e.msg[0] = 0;
  if (cp_attn_combine_host(o, l, o, l, 1, 0, 1, 1, &e) != -1 || !e.msg[0]) ok = 0;
  printf("  refused? combine of 0 rows: %s\n", e.msg[0] ? e.msg : "NO");
  return ok;
}

int main(int argc, char **argv) {
  int max_seq = 2048;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--host"))
      host_mode = 1;
    else if (!strcmp(argv[i], "--max-seq") && i + 1 < argc)
      max_seq = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--host] [--max-seq N]\n"
              "  --host       run the kernels' per-row arithmetic on the CPU, without the exec_flash comparison\n"
              "  --max-seq N  leave out the cases with seq > N (default 2048; cases are 256..2048)\n",
              argv[0]);
      return 2;
    }
  }
  if (max_seq < 256) fprintf(stderr, "--max-seq: %d leaves no case (the shortest is 256)\n", max_seq), exit(2);
  if (!host_mode) {
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
      printf("SKIP: no CUDA device (--host runs the kernels' arithmetic on the CPU)\n");
      return 77;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s\n", prop.name);
  }
  printf("CP attention, each rank's ring steps combined by log-sum-exp (%s), vs float64 and %s\n",
         host_mode ? "CPU run of the kernels' arithmetic" : "GPU kernels", host_mode ? "(no exec_flash)" : "exec_flash_fwd");
  printf("tolerances (max |err| / max |out|): FP32 vs float64 %.0e, BF16 vs float64 %.0e, BF16 vs exec_flash %.0e\n",
         TOL_FP32, TOL_BF16, TOL_FLASH);
  printf("%-4s %5s %3s %4s %3s %18s %8s %9s %9s %9s %6s %15s\n", "", "seq", "cp", "d", "H", "seed", "max|out|",
         "fp32-f64", "bf16-f64", "bf16-flsh", "nonfin", "masked/want");
  static const int seqs[] = {256, 512, 1024, 2048}, ds[] = {64, 128}, cps[] = {2, 4, 8};
  int cases = 0, passed = 0;
  for (int a = 0; a < 4; a++)
    for (int b = 0; b < 2; b++)
      for (int p = 0; p < 3; p++) {
        if (seqs[a] > max_seq) continue;
        cp_case c = {seqs[a], cps[p], ds[b], seqs[a] <= 512 ? 3 : 2, 0};
        c.seed = 0x9E3779B97F4A7C15ull ^ ((uint64_t)(cases + 1) * 0xD1B54A32D192ED03ull); /* fresh inputs per case */
        passed += run_case(&c);
        cases++;
        fflush(stdout);
      }
  printf("backward: each rank's ring (dQ; dK, dV travelling with their block) vs float64 full backward, "
         "tolerance %.0e\n", TOL_FP32);
  static const int bseqs[] = {256, 512, 1024}, bcps[] = {2, 4};
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 2; b++)
      for (int p = 0; p < 2; p++) {
        if (bseqs[a] > max_seq) continue;
        cp_case c = {bseqs[a], bcps[p], ds[b], 4, 0}; /* 4 query heads: 2 KV heads (GQA) or 4 alternately */
        c.seed = 0x5851F42D4C957F2Dull ^ ((uint64_t)(cases + 1) * 0xD1B54A32D192ED03ull);
        passed += run_case_bwd(&c, (a + b + p) % 2 ? 2 : 4);
        cases++;
        fflush(stdout);
      }
  const int refused = refusals_ok();
  printf("%s: %d of %d cases within tolerance; bad shapes %s\n", passed == cases && refused ? "PASS" : "FAIL",
         passed, cases, refused ? "refused" : "NOT all refused");
  return passed == cases && refused ? 0 : 1;
}

/* infer_check.c — correctness of the inference executor (`tacorun execute
 * --infer-check`, see infer_run.h). Tolerances are for BF16 storage with FP32
 * accumulation: relative L2 error per checked tensor. The FP8 KV cache's
 * quantizer is checked bit for bit (codes and scales equal to the C
 * reference's: tolerance 0 mismatches); kernels reading it against the
 * reference on the same codes; outputs poisoned (NaN bytes) before each run. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_world.h"
#include "infer_decode.h"
#include "infer_kernels.h"
#include "infer_kv8.h"
#include "infer_ref.h"
#include "infer_run.h"
#include "rt_ops.h"
#include "rt_ops_layer.h"
#include "rt_ops_ref.h"

#define CK_TRY(x)                                                                                            \
  do {                                                                                                       \
    if ((x) != 0) return -1;                                                                                 \
  } while (0)

typedef struct {
  int root, failed, total;
} check_log;

static void report(check_log *L, const char *name, double err, double tol) {
  int ok = isfinite(err) && err <= tol;
  L->total++;
  if (!ok) L->failed++;
  if (L->root) printf("%-4s %-58s rel.L2 %.3e (tolerance %.1e)\n", ok ? "ok" : "FAIL", name, err, tol);
  fflush(stdout);
}

/* Device BF16 -> host float. */
static int fetch(const void *d, long long n, float *h, ts_err *e) {
  uint16_t *tmp = malloc((size_t)n * 2);
  if (!tmp) return ts_fail_sys(e, "out of host memory");
  cudaError_t ce = cudaMemcpy(tmp, d, (size_t)n * 2, cudaMemcpyDeviceToHost);
  if (ce != cudaSuccess) {
    free(tmp);
    return ts_fail_sys(e, "cudaMemcpy: %s", cudaGetErrorString(ce));
  }
  for (long long i = 0; i < n; i++) h[i] = infer_ref_from_bf16(tmp[i]);
  free(tmp);
  return 0;
}

static double rel_l2(const float *a, const float *ref, long long n) {
  double num = 0, den = 0;
  for (long long i = 0; i < n; i++) {
    double d = (double)a[i] - ref[i];
    num += d * d, den += (double)ref[i] * ref[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int all_finite(const float *x, long long n) {
  for (long long i = 0; i < n; i++)
    if (!isfinite(x[i])) return 0;
  return 1;
}

/* ---- decode attention and RoPE against the plain-C reference ---- */

/* ver 1: infer_decode_attention, 3 / 4 / 5: infer_decode_attention3 / 4 / 5 (v2: bench-decode's checks and the FP8
 * ones) */
static int check_decode_attention(check_log *L, int ver, int batch, int hl, int kvl, int d, long long max_seq,
                                  long long len, ts_err *e) {
  infer_attn_dims a = {.batch = batch, .hl = hl, .kvl = kvl, .head_dim = d, .max_seq = max_seq};
  long long nq = (long long)batch * hl * d, nc = (long long)batch * kvl * max_seq * d;
  void *q, *k, *v, *o, *part;
  RT_CUDA(e, cudaMalloc(&q, (size_t)nq * 2));
  RT_CUDA(e, cudaMalloc(&o, (size_t)nq * 2));
  RT_CUDA(e, cudaMalloc(&k, (size_t)nc * 2));
  RT_CUDA(e, cudaMalloc(&v, (size_t)nc * 2));
  const size_t pb = ver >= 3 ? infer_decode3_partial_bytes(&a, len) : infer_decode_partial_bytes(&a, len);
  RT_CUDA(e, cudaMalloc(&part, pb));
  float *hq = malloc((size_t)nq * 4), *ho = malloc((size_t)nq * 4), *hr = malloc((size_t)nq * 4);
  float *hk = malloc((size_t)nc * 4), *hv = malloc((size_t)nc * 4);
  if (!hq || !ho || !hr || !hk || !hv) return ts_fail_sys(e, "out of host memory");
  /* q scaled up so that the softmax is peaked, not flat */
  CK_TRY(rt_fill_random_bf16(q, nq, 11, 3.0f, NULL, e));
  CK_TRY(rt_fill_random_bf16(k, nc, 12, 1.0f, NULL, e));
  CK_TRY(rt_fill_random_bf16(v, nc, 13, 1.0f, NULL, e));
  RT_CUDA(e, cudaMemset(o, 0xff, (size_t)nq * 2));
  RT_CUDA(e, cudaMemset(part, 0xff, pb));
  CK_TRY((ver == 5   ? infer_decode_attention5
          : ver == 4 ? infer_decode_attention4
          : ver == 3 ? infer_decode_attention3
                     : infer_decode_attention)(q, k, v, o, part, &a, len, NULL, e));
  RT_CUDA(e, cudaDeviceSynchronize());
  CK_TRY(fetch(q, nq, hq, e));
  CK_TRY(fetch(k, nc, hk, e));
  CK_TRY(fetch(v, nc, hv, e));
  CK_TRY(fetch(o, nq, ho, e));
  if (infer_ref_decode_attention(hq, hk, hv, hr, batch, hl, kvl, d, max_seq, len))
    return ts_fail_sys(e, "decode attention check: out of host memory");
  char name[128];
  snprintf(name, sizeof name, "decode attention v%d b%d h%d kv%d d%d len %lld vs C", ver, batch, hl, kvl, d, len);
  report(L, name, rel_l2(ho, hr, nq), 1e-2);
  free(hq), free(ho), free(hr), free(hk), free(hv);
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(part);
  return 0;
}

/* The shape of a RoPE + KV-scatter check: batch b, hl query and kvl key/value heads of d, seq tokens from
 * pos0 into caches of max_seq, RoPE base theta; qk_norm: Qwen3's QK norm first (weights around 1). */
typedef struct {
  int b, hl, kvl, d, seq;
  long long pos0, max_seq;
  double theta;
  bool qk_norm;
  uint64_t seed;
  float scale; /* the random input's spread */
} rope_case;

/* RoPE and the scatter, as infer_forward runs them (with qk_norm: rt_qk_norm_fwd without saved / rstd on
 * the query heads, then on the key heads, of the qkv rows, eps 1e-6; then infer_rope_scatter): Q (poisoned
 * first) and both caches against rt_ref_qk_norm_fwd and infer_ref_rope. */
static int check_rope_scatter(check_log *L, rope_case c, ts_err *e) {
  const int W = c.hl + 2 * c.kvl, d = c.d;
  const float eps = 1e-6f;
  infer_attn_dims a = {.batch = c.b, .hl = c.hl, .kvl = c.kvl, .head_dim = d, .max_seq = c.max_seq,
                       .rope_theta = c.theta};
  const long long T = (long long)c.b * c.seq, nqkv = T * W * d, nq = (long long)c.b * c.hl * c.seq * d,
                  nc = (long long)c.b * c.kvl * c.max_seq * d;
  void *qkv, *q, *k, *v, *gq, *gk;
  RT_CUDA(e, cudaMalloc(&qkv, (size_t)nqkv * 2));
  RT_CUDA(e, cudaMalloc(&q, (size_t)nq * 2));
  RT_CUDA(e, cudaMalloc(&k, (size_t)nc * 2));
  RT_CUDA(e, cudaMalloc(&v, (size_t)nc * 2));
  RT_CUDA(e, cudaMalloc(&gq, (size_t)d * 2));
  RT_CUDA(e, cudaMalloc(&gk, (size_t)d * 2));
  RT_CUDA(e, cudaMemset(k, 0, (size_t)nc * 2));
  RT_CUDA(e, cudaMemset(v, 0, (size_t)nc * 2));
  RT_CUDA(e, cudaMemset(q, 0xff, (size_t)nq * 2));
  CK_TRY(rt_fill_random_bf16(qkv, nqkv, c.seed, c.scale, NULL, e));
  float *hx = malloc((size_t)nqkv * 4), *hq = malloc((size_t)nq * 4), *hk = malloc((size_t)nc * 4),
        *hv = malloc((size_t)nc * 4), *rq = calloc((size_t)nq, 4), *rk = calloc((size_t)nc, 4),
        *rv = calloc((size_t)nc, 4), *hg = malloc((size_t)2 * d * 4);
  uint16_t *g16 = malloc((size_t)2 * d * 2);
  if (!hx || !hq || !hk || !hv || !rq || !rk || !rv || !hg || !g16) return ts_fail_sys(e, "out of host memory");
  CK_TRY(fetch(qkv, nqkv, hx, e)); /* the input, before the in-place norm */
  if (c.qk_norm) {
    for (int i = 0; i < 2 * d; i++) /* 1 + a spread of +-0.5, different for Q and K */
      g16[i] = infer_ref_to_bf16(1.0f + 0.5f * sinf(0.37f * (float)i + (i < d ? 0.f : 1.3f)));
    RT_CUDA(e, cudaMemcpy(gq, g16, (size_t)d * 2, cudaMemcpyHostToDevice));
    RT_CUDA(e, cudaMemcpy(gk, g16 + d, (size_t)d * 2, cudaMemcpyHostToDevice));
    for (int i = 0; i < 2 * d; i++) hg[i] = infer_ref_from_bf16(g16[i]);
    CK_TRY(rt_qk_norm_fwd(qkv, W * d, NULL, gq, NULL, T, c.hl, d, eps, NULL, e));
    CK_TRY(rt_qk_norm_fwd((char *)qkv + (size_t)c.hl * d * 2, W * d, NULL, gk, NULL, T, c.kvl, d, eps, NULL, e));
  }
  CK_TRY(infer_rope_scatter(qkv, q, k, v, &a, c.seq, c.pos0, NULL, e));
  RT_CUDA(e, cudaDeviceSynchronize());
  CK_TRY(fetch(q, nq, hq, e));
  CK_TRY(fetch(k, nc, hk, e));
  CK_TRY(fetch(v, nc, hv, e));
  /* the reference: the QK norm on the input (no copy kept), then RoPE into Q and the caches */
  if (c.qk_norm) {
    rt_ref_qk_norm_fwd(hx, W * d, NULL, hg, NULL, T, c.hl, d, eps);
    rt_ref_qk_norm_fwd(hx + (long long)c.hl * d, W * d, NULL, hg + d, NULL, T, c.kvl, d, eps);
  }
  for (int bi = 0; bi < c.b; bi++)
    for (int s = 0; s < c.seq; s++) {
      const float *row = hx + ((long long)bi * c.seq + s) * W * d;
      const long long pos = c.pos0 + s;
      for (int h = 0; h < W; h++) {
        float *dst;
        if (h < c.hl) dst = rq + (((long long)bi * c.hl + h) * c.seq + s) * d;
        else if (h < c.hl + c.kvl) dst = rk + (((long long)bi * c.kvl + h - c.hl) * c.max_seq + pos) * d;
        else dst = rv + (((long long)bi * c.kvl + h - c.hl - c.kvl) * c.max_seq + pos) * d;
        memcpy(dst, row + (long long)h * d, (size_t)d * 4);
        if (h < c.hl + c.kvl) infer_ref_rope(dst, d, pos, c.theta);
      }
    }
  char name[128];
  if (c.qk_norm)
    snprintf(name, sizeof name, "QK norm + RoPE + scatter d%d, %s vs C", d, c.seq > 1 ? "prefill" : "decode step");
  else
    snprintf(name, sizeof name, "RoPE + scatter into Q and the K/V caches vs C reference");
  const double err = fmax(rel_l2(hq, rq, nq), fmax(rel_l2(hk, rk, nc), rel_l2(hv, rv, nc)));
  report(L, name, all_finite(hq, nq) ? err : NAN, 1e-2);
  free(hx), free(hq), free(hk), free(hv), free(rq), free(rk), free(rv), free(hg), free(g16);
  cudaFree(qkv), cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(gq), cudaFree(gk);
  return 0;
}

/* ---- the FP8 KV cache (infer_kv8.h) ---- */

static int fetch_bytes(const void *d, size_t n, void *h, ts_err *e) {
  RT_CUDA(e, cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost));
  return 0;
}

/* Codes and scales of rows vectors of x (host floats, BF16 values) quantized
 * by the C reference against the GPU's: the number of differing codes or scales. */
static long long kv8_mismatches(const float *x, const unsigned char *codes, const float *scales, long long rows,
                                int d) {
  unsigned char *rc = malloc((size_t)d);
  if (!rc) abort();
  long long bad = 0;
  for (long long r = 0; r < rows; r++) {
    float sc;
    infer_ref_kv8_quantize(x + r * d, d, rc, &sc);
    bad += memcmp(&sc, scales + r, sizeof sc) != 0;
    for (int i = 0; i < d; i++) bad += rc[i] != codes[r * d + i];
  }
  free(rc);
  return bad;
}

static void report_exact(check_log *L, const char *name, long long bad, long long total) {
  L->total++;
  if (bad) L->failed++;
  if (L->root) printf("%-4s %-58s %lld of %lld differ (tolerance 0)\n", bad ? "FAIL" : "ok", name, bad, total);
  fflush(stdout);
}

/* Random BF16 caches (rows of random magnitudes, so that scales differ),
 * quantized on the GPU; the quantizer against the C one; decode attention v2, v3 and v5
 * over the FP8 cache against the reference on the dequantized codes (v4: v3's bits), and (not
 * a tolerance of the kernel: the format's error) against the BF16 cache. */
static int check_decode_fp8(check_log *L, int batch, int hl, int kvl, int d, long long max_seq, long long len,
                            uint64_t seed, ts_err *e) {
  infer_attn_dims a = {.batch = batch, .hl = hl, .kvl = kvl, .head_dim = d, .max_seq = max_seq};
  long long nq = (long long)batch * hl * d, rows = (long long)batch * kvl * max_seq, nc = rows * d;
  void *q, *kb, *vb, *o, *part, *k8, *v8;
  float *ks, *vs;
  RT_CUDA(e, cudaMalloc(&q, (size_t)nq * 2));
  RT_CUDA(e, cudaMalloc(&o, (size_t)nq * 2));
  RT_CUDA(e, cudaMalloc(&kb, (size_t)nc * 2));
  RT_CUDA(e, cudaMalloc(&vb, (size_t)nc * 2));
  RT_CUDA(e, cudaMalloc(&k8, (size_t)nc));
  RT_CUDA(e, cudaMalloc(&v8, (size_t)nc));
  RT_CUDA(e, cudaMalloc((void **)&ks, (size_t)rows * 4));
  RT_CUDA(e, cudaMalloc((void **)&vs, (size_t)rows * 4));
  size_t pb = infer_decode2_partial_bytes(&a, len), pb3 = infer_decode3_partial_bytes(&a, len);
  if (pb3 > pb) pb = pb3;
  RT_CUDA(e, cudaMalloc(&part, pb));
  float *hq = malloc((size_t)nq * 4), *ho = malloc((size_t)nq * 4), *hr = malloc((size_t)nq * 4),
        *ho3 = malloc((size_t)nq * 4), *ho5 = malloc((size_t)nq * 4), *hb = malloc((size_t)nq * 4), *hk = malloc((size_t)nc * 4), *hv = malloc((size_t)nc * 4),
        *dk = malloc((size_t)nc * 4), *dv = malloc((size_t)nc * 4), *hks = malloc((size_t)rows * 4),
        *hvs = malloc((size_t)rows * 4);
  unsigned char *ck = malloc((size_t)nc), *cv = malloc((size_t)nc);
  if (!hq || !ho || !ho3 || !ho5 || !hr || !hb || !hk || !hv || !dk || !dv || !hks || !hvs || !ck || !cv)
    return ts_fail_sys(e, "out of host memory");
  CK_TRY(rt_fill_random_bf16(q, nq, seed, 3.0f, NULL, e));
  CK_TRY(rt_fill_random_bf16(kb, nc, seed + 1, 1.0f, NULL, e));
  CK_TRY(rt_fill_random_bf16(vb, nc, seed + 2, 1.0f, NULL, e));
  CK_TRY(fetch(kb, nc, hk, e));
  CK_TRY(fetch(vb, nc, hv, e));
  /* row r scaled by 2^(r % 9 - 4): scales from 1/16 to 16 of each other */
  for (long long r = 0; r < rows; r++)
    for (int x = 0; x < d; x++) {
      float f = ldexpf(1.f, (int)(r % 9) - 4);
      hk[r * d + x] *= f, hv[r * d + x] *= (1.f / f);
    }
  {
    uint16_t *tmp = malloc((size_t)nc * 2);
    if (!tmp) return ts_fail_sys(e, "out of host memory");
    for (long long i = 0; i < nc; i++) tmp[i] = infer_ref_to_bf16(hk[i]);
    RT_CUDA(e, cudaMemcpy(kb, tmp, (size_t)nc * 2, cudaMemcpyHostToDevice));
    for (long long i = 0; i < nc; i++) tmp[i] = infer_ref_to_bf16(hv[i]);
    RT_CUDA(e, cudaMemcpy(vb, tmp, (size_t)nc * 2, cudaMemcpyHostToDevice));
    free(tmp);
  }
  RT_CUDA(e, cudaMemset(k8, 0xff, (size_t)nc));
  RT_CUDA(e, cudaMemset(v8, 0xff, (size_t)nc));
  RT_CUDA(e, cudaMemset(ks, 0xff, (size_t)rows * 4));
  RT_CUDA(e, cudaMemset(vs, 0xff, (size_t)rows * 4));
  RT_CUDA(e, cudaMemset(o, 0xff, (size_t)nq * 2));
  RT_CUDA(e, cudaMemset(part, 0xff, pb));
  CK_TRY(infer_kv8_quantize(kb, k8, ks, rows, d, NULL, e));
  CK_TRY(infer_kv8_quantize(vb, v8, vs, rows, d, NULL, e));
  infer_kv8 c = {k8, v8, ks, vs};
  /* v4 first (its output kept in ho), then v3 (kept), then v2, each on freshly poisoned buffers */
  CK_TRY(infer_decode_attention4_fp8(q, &c, o, part, &a, len, NULL, e));
  RT_CUDA(e, cudaDeviceSynchronize());
  CK_TRY(fetch(o, nq, ho, e));
  RT_CUDA(e, cudaMemset(o, 0xff, (size_t)nq * 2));
  RT_CUDA(e, cudaMemset(part, 0xff, pb));
  CK_TRY(infer_decode_attention3_fp8(q, &c, o, part, &a, len, NULL, e));
  RT_CUDA(e, cudaDeviceSynchronize());
  CK_TRY(fetch(o, nq, ho3, e));
  long long bits4 = 0; /* v4 is v3's arithmetic in v3's order: the same bits */
  for (long long i = 0; i < nq; i++) bits4 += memcmp(&ho[i], &ho3[i], sizeof *ho) != 0;
  RT_CUDA(e, cudaMemset(o, 0xff, (size_t)nq * 2));
  RT_CUDA(e, cudaMemset(part, 0xff, pb));
  CK_TRY(infer_decode_attention5_fp8(q, &c, o, part, &a, len, NULL, e));
  RT_CUDA(e, cudaDeviceSynchronize());
  CK_TRY(fetch(o, nq, ho5, e));
  RT_CUDA(e, cudaMemset(o, 0xff, (size_t)nq * 2));
  RT_CUDA(e, cudaMemset(part, 0xff, pb));
  CK_TRY(infer_decode_attention2_fp8(q, &c, o, part, &a, len, NULL, e));
  RT_CUDA(e, cudaDeviceSynchronize());
  CK_TRY(fetch(q, nq, hq, e));
  CK_TRY(fetch(kb, nc, hk, e));
  CK_TRY(fetch(vb, nc, hv, e));
  CK_TRY(fetch(o, nq, ho, e));
  CK_TRY(fetch_bytes(k8, (size_t)nc, ck, e));
  CK_TRY(fetch_bytes(v8, (size_t)nc, cv, e));
  CK_TRY(fetch_bytes(ks, (size_t)rows * 4, hks, e));
  CK_TRY(fetch_bytes(vs, (size_t)rows * 4, hvs, e));
  char name[128];
  long long bad = kv8_mismatches(hk, ck, hks, rows, d) + kv8_mismatches(hv, cv, hvs, rows, d);
  snprintf(name, sizeof name, "FP8 KV quantize %lld x d%d (K, V) codes+scales vs C", rows, d);
  report_exact(L, name, bad, 2 * rows * (d + 1));
  for (long long r = 0; r < rows; r++) {
    infer_ref_kv8_dequantize(ck + r * d, hks[r], d, dk + r * d);
    infer_ref_kv8_dequantize(cv + r * d, hvs[r], d, dv + r * d);
  }
  if (infer_ref_decode_attention(hq, dk, dv, hr, batch, hl, kvl, d, max_seq, len))
    return ts_fail_sys(e, "FP8 decode attention check: out of host memory");
  snprintf(name, sizeof name, "decode attention v2 FP8 b%d h%d kv%d d%d len %lld vs C", batch, hl, kvl, d, len);
  report(L, name, rel_l2(ho, hr, nq), 1e-2);
  snprintf(name, sizeof name, "decode attention v3 FP8 b%d h%d kv%d d%d len %lld vs C", batch, hl, kvl, d, len);
  report(L, name, rel_l2(ho3, hr, nq), 1e-2);
  snprintf(name, sizeof name, "decode attention v4 FP8 b%d h%d kv%d d%d len %lld = v3's bits", batch, hl, kvl, d, len);
  report_exact(L, name, bits4, nq);
  snprintf(name, sizeof name, "decode attention v5 FP8 b%d h%d kv%d d%d len %lld vs C", batch, hl, kvl, d, len);
  report(L, name, rel_l2(ho5, hr, nq), 1e-2);
  if (infer_ref_decode_attention(hq, hk, hv, hb, batch, hl, kvl, d, max_seq, len))
    return ts_fail_sys(e, "FP8 decode attention check: out of host memory");
  if (L->root)
    printf("     (the same output against attention over the BF16 cache: rel.L2 %.3e, the E4M3 format's error)\n",
           rel_l2(ho, hb, nq));
  free(hq), free(ho), free(ho3), free(ho5), free(hr), free(hb), free(hk), free(hv), free(dk), free(dv), free(hks), free(hvs), free(ck),
      free(cv);
  cudaFree(q), cudaFree(o), cudaFree(kb), cudaFree(vb), cudaFree(k8), cudaFree(v8), cudaFree(ks), cudaFree(vs),
      cudaFree(part);
  return 0;
}

/* The calibration's decode attention read once per query head (infer_decode_pqh.h) over a BF16
 * (fp8 0) or an FP8 cache (fp8 1): fresh random inputs (K rows scaled by 2^(r % 9 - 4), V by its
 * inverse, as check_decode_fp8; the FP8 cache their quantization on the GPU), output and partials
 * poisoned, against attention over the same values (infer_ref_decode_attention, double sums; the dequantized
 * codes for FP8), every output finite. */
static int check_decode_pqh(check_log *L, int fp8, int batch, int hl, int kvl, long long max_seq, long long len,
                            uint64_t seed, ts_err *e) {
  const int d = 128;
  infer_attn_dims a = {.batch = batch, .hl = hl, .kvl = kvl, .head_dim = d, .max_seq = max_seq};
  long long nq = (long long)batch * hl * d, rows = (long long)batch * kvl * max_seq, nc = rows * d;
  const size_t pb = infer_decode_pqh_partial_bytes(&a, len);
  void *q = NULL, *kb = NULL, *vb = NULL, *o = NULL, *part = NULL, *k8 = NULL, *v8 = NULL;
  float *ks = NULL, *vs = NULL;
  float *hq = malloc((size_t)nq * 4), *ho = malloc((size_t)nq * 4), *hk = malloc((size_t)nc * 4),
        *hv = malloc((size_t)nc * 4), *hks = malloc((size_t)rows * 4), *hvs = malloc((size_t)rows * 4);
  float *hr = malloc((size_t)nq * sizeof *hr);
  uint16_t *tmp = malloc((size_t)nc * 2);
  unsigned char *codes = malloc((size_t)nc);
  int rc = -1;
  if (!hq || !ho || !hk || !hv || !hks || !hvs || !hr || !tmp || !codes) {
    ts_fail_sys(e, "out of host memory");
    goto fail;
  }
  if (cudaMalloc(&q, (size_t)nq * 2) != cudaSuccess || cudaMalloc(&o, (size_t)nq * 2) != cudaSuccess ||
      cudaMalloc(&kb, (size_t)nc * 2) != cudaSuccess || cudaMalloc(&vb, (size_t)nc * 2) != cudaSuccess ||
      cudaMalloc(&k8, (size_t)nc) != cudaSuccess || cudaMalloc(&v8, (size_t)nc) != cudaSuccess ||
      cudaMalloc((void **)&ks, (size_t)rows * 4) != cudaSuccess ||
      cudaMalloc((void **)&vs, (size_t)rows * 4) != cudaSuccess || cudaMalloc(&part, pb) != cudaSuccess) {
    ts_fail_sys(e, "per-query-head check: cudaMalloc: %s", cudaGetErrorString(cudaGetLastError()));
    goto fail;
  }
  if (rt_fill_random_bf16(q, nq, seed, 3.0f, NULL, e) || rt_fill_random_bf16(kb, nc, seed + 1, 1.0f, NULL, e) ||
      rt_fill_random_bf16(vb, nc, seed + 2, 1.0f, NULL, e) || fetch(kb, nc, hk, e) || fetch(vb, nc, hv, e))
    goto fail;
  /* row r scaled by 2^(r % 9 - 4): keys from 1/16 to 16 of each other, values the inverse */
  for (long long r = 0; r < rows; r++)
    for (int x = 0; x < d; x++) {
      float f = ldexpf(1.f, (int)(r % 9) - 4);
      hk[r * d + x] *= f, hv[r * d + x] *= (1.f / f);
    }
  for (long long i = 0; i < nc; i++) tmp[i] = infer_ref_to_bf16(hk[i]);
  if (cudaMemcpy(kb, tmp, (size_t)nc * 2, cudaMemcpyHostToDevice) != cudaSuccess) goto cuda_fail;
  for (long long i = 0; i < nc; i++) tmp[i] = infer_ref_to_bf16(hv[i]);
  if (cudaMemcpy(vb, tmp, (size_t)nc * 2, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemset(o, 0xff, (size_t)nq * 2) != cudaSuccess || cudaMemset(part, 0xff, pb) != cudaSuccess)
    goto cuda_fail;
  if (fp8) {
    if (cudaMemset(k8, 0xff, (size_t)nc) != cudaSuccess || cudaMemset(v8, 0xff, (size_t)nc) != cudaSuccess ||
        cudaMemset(ks, 0xff, (size_t)rows * 4) != cudaSuccess || cudaMemset(vs, 0xff, (size_t)rows * 4) != cudaSuccess)
      goto cuda_fail;
    infer_kv8 c = {k8, v8, ks, vs};
    if (infer_kv8_quantize(kb, k8, ks, rows, d, NULL, e) || infer_kv8_quantize(vb, v8, vs, rows, d, NULL, e) ||
        infer_decode_pqh_fp8(q, &c, o, part, &a, len, NULL, e))
      goto fail;
  } else if (infer_decode_pqh(q, kb, vb, o, part, &a, len, NULL, e)) {
    goto fail;
  }
  if (cudaDeviceSynchronize() != cudaSuccess) goto cuda_fail;
  if (fetch(q, nq, hq, e) || fetch(o, nq, ho, e) || fetch(kb, nc, hk, e) || fetch(vb, nc, hv, e)) goto fail;
  if (fp8) { /* the reference reads the codes the kernel read, dequantized */
    if (fetch_bytes(ks, (size_t)rows * 4, hks, e) || fetch_bytes(vs, (size_t)rows * 4, hvs, e) ||
        fetch_bytes(k8, (size_t)nc, codes, e))
      goto fail;
    for (long long r = 0; r < rows; r++) infer_ref_kv8_dequantize(codes + r * d, hks[r], d, hk + r * d);
    if (fetch_bytes(v8, (size_t)nc, codes, e)) goto fail;
    for (long long r = 0; r < rows; r++) infer_ref_kv8_dequantize(codes + r * d, hvs[r], d, hv + r * d);
  }
  if (infer_ref_decode_attention(hq, hk, hv, hr, batch, hl, kvl, d, max_seq, len)) {
    ts_fail_sys(e, "out of host memory");
    goto fail;
  }
  double num = 0, den = 0;
  long long bad = 0;
  for (long long i = 0; i < nq; i++) {
    double df = (double)ho[i] - hr[i];
    num += df * df, den += hr[i] * hr[i];
    bad += !isfinite(ho[i]);
  }
  char name[128];
  snprintf(name, sizeof name, "decode attention per query head %s b%d h%d kv%d d%d len %lld vs C", fp8 ? "FP8" : "BF16",
           batch, hl, kvl, d, len);
  report(L, name, bad ? NAN : den > 0 ? sqrt(num / den) : sqrt(num), 1e-2);
  rc = 0;
  goto fail;
cuda_fail:
  ts_fail_sys(e, "per-query-head check: %s", cudaGetErrorString(cudaGetLastError()));
fail:
  cudaFree(part), cudaFree(vs), cudaFree(ks), cudaFree(v8), cudaFree(k8), cudaFree(vb), cudaFree(kb), cudaFree(o),
      cudaFree(q);
  free(codes), free(tmp), free(hr), free(hvs), free(hks), free(hv), free(hk), free(ho), free(hq);
  return rc;
}

/* RoPE + quantize on append: a prefill (seq tokens at 0, with the BF16 stage)
 * and a decode step (one token at position seq). */
static int check_rope_fp8(check_log *L, int d, ts_err *e) {
  const int b = 2, hl = 8, kvl = 2, seq = 9;
  const long long max_seq = 16;
  const double theta = 500000.0;
  infer_attn_dims a = {.batch = b, .hl = hl, .kvl = kvl, .head_dim = d, .max_seq = max_seq, .rope_theta = theta};
  const int W = hl + 2 * kvl;
  long long nqkv = (long long)b * seq * W * d, nq = (long long)b * hl * seq * d, rows = (long long)b * kvl * max_seq,
            nc = rows * d, ns = (long long)b * kvl * seq * d;
  void *qkv, *q, *k8, *v8, *kst, *vst;
  float *ks, *vs;
  RT_CUDA(e, cudaMalloc(&qkv, (size_t)nqkv * 2));
  RT_CUDA(e, cudaMalloc(&q, (size_t)nq * 2));
  RT_CUDA(e, cudaMalloc(&k8, (size_t)nc));
  RT_CUDA(e, cudaMalloc(&v8, (size_t)nc));
  RT_CUDA(e, cudaMalloc(&kst, (size_t)ns * 2));
  RT_CUDA(e, cudaMalloc(&vst, (size_t)ns * 2));
  RT_CUDA(e, cudaMalloc((void **)&ks, (size_t)rows * 4));
  RT_CUDA(e, cudaMalloc((void **)&vs, (size_t)rows * 4));
  RT_CUDA(e, cudaMemset(k8, 0xff, (size_t)nc));
  RT_CUDA(e, cudaMemset(v8, 0xff, (size_t)nc));
  RT_CUDA(e, cudaMemset(ks, 0xff, (size_t)rows * 4));
  RT_CUDA(e, cudaMemset(vs, 0xff, (size_t)rows * 4));
  RT_CUDA(e, cudaMemset(q, 0xff, (size_t)nq * 2));
  RT_CUDA(e, cudaMemset(kst, 0xff, (size_t)ns * 2));
  RT_CUDA(e, cudaMemset(vst, 0xff, (size_t)ns * 2));
  CK_TRY(rt_fill_random_bf16(qkv, nqkv, 31 + (uint64_t)d, 2.0f, NULL, e));
  infer_kv8 c = {k8, v8, ks, vs};
  CK_TRY(infer_rope_scatter_fp8(qkv, q, &c, kst, vst, &a, seq, 0, NULL, e));
  RT_CUDA(e, cudaDeviceSynchronize());
  float *hx = malloc((size_t)nqkv * 4), *hq = malloc((size_t)nq * 4), *rq = malloc((size_t)nq * 4),
        *hs = malloc((size_t)ns * 4 * 2), *rs = malloc((size_t)ns * 4 * 2), *hks = malloc((size_t)rows * 4),
        *hvs = malloc((size_t)rows * 4), *deq = malloc((size_t)nc * 4), *ref = calloc((size_t)nc, 4);
  unsigned char *ck = malloc((size_t)nc), *cv = malloc((size_t)nc);
  if (!hx || !hq || !rq || !hs || !rs || !hks || !hvs || !deq || !ref || !ck || !cv)
    return ts_fail_sys(e, "out of host memory");
  CK_TRY(fetch(qkv, nqkv, hx, e));
  CK_TRY(fetch(q, nq, hq, e));
  CK_TRY(fetch(kst, ns, hs, e));
  CK_TRY(fetch(vst, ns, hs + ns, e));
  CK_TRY(fetch_bytes(k8, (size_t)nc, ck, e));
  CK_TRY(fetch_bytes(v8, (size_t)nc, cv, e));
  CK_TRY(fetch_bytes(ks, (size_t)rows * 4, hks, e));
  CK_TRY(fetch_bytes(vs, (size_t)rows * 4, hvs, e));
  /* reference Q and stage (K | V), positions 0..seq-1 */
  for (int bi = 0; bi < b; bi++)
    for (int s = 0; s < seq; s++)
      for (int h = 0; h < W; h++) {
        const float *src = hx + (((long long)bi * seq + s) * W + h) * d;
        float *dst = h < hl ? rq + (((long long)bi * hl + h) * seq + s) * d
                            : rs + (h >= hl + kvl ? ns : 0) + (((long long)bi * kvl + (h - hl) % kvl) * seq + s) * d;
        memcpy(dst, src, (size_t)d * 4);
        if (h < hl + kvl) infer_ref_rope(dst, d, s, theta);
      }
  char name[128];
  snprintf(name, sizeof name, "FP8 append d%d prefill: Q and BF16 K/V stage vs C RoPE", d);
  report(L, name, fmax(rel_l2(hq, rq, nq), rel_l2(hs, rs, 2 * ns)), 1e-2);
  /* the cache's codes at 0..seq-1 against the C quantizer of the GPU's stage (same BF16 values) */
  long long bad = 0, total = 0;
  for (int kvsel = 0; kvsel < 2; kvsel++)
    for (long long pr = 0; pr < (long long)b * kvl; pr++) {
      const float *st = hs + kvsel * ns + pr * seq * d;
      const unsigned char *cc = (kvsel ? cv : ck) + pr * max_seq * d;
      const float *sc = (kvsel ? hvs : hks) + pr * max_seq;
      bad += kv8_mismatches(st, cc, sc, seq, d), total += (long long)seq * (d + 1);
    }
  snprintf(name, sizeof name, "FP8 append d%d prefill: codes+scales vs C quantizer", d);
  report_exact(L, name, bad, total);
  /* a decode step: token 0 of the same qkv at position seq, no stage; against C RoPE + quantizer */
  infer_attn_dims a1 = a;
  a1.batch = 1;
  CK_TRY(infer_rope_scatter_fp8(qkv, q, &c, NULL, NULL, &a1, 1, seq, NULL, e));
  RT_CUDA(e, cudaDeviceSynchronize());
  CK_TRY(fetch_bytes(k8, (size_t)nc, ck, e));
  CK_TRY(fetch_bytes(ks, (size_t)rows * 4, hks, e));
  double num = 0, den = 0;
  for (int j = 0; j < kvl; j++) {
    float x[256], y[256];
    memcpy(x, hx + (long long)(hl + j) * d, (size_t)d * 4);
    infer_ref_rope(x, d, seq, theta);
    long long r = (long long)j * max_seq + seq;
    infer_ref_kv8_dequantize(ck + r * d, hks[r], d, y);
    for (int i = 0; i < d; i++) num += (double)(y[i] - x[i]) * (y[i] - x[i]), den += (double)x[i] * x[i];
  }
  snprintf(name, sizeof name, "FP8 append d%d decode step: dequantized K vs C RoPE (E4M3: 2^-4)", d);
  report(L, name, sqrt(num / den), 4e-2);
  free(hx), free(hq), free(rq), free(hs), free(rs), free(hks), free(hvs), free(deq), free(ref), free(ck), free(cv);
  cudaFree(qkv), cudaFree(q), cudaFree(k8), cudaFree(v8), cudaFree(kst), cudaFree(vst), cudaFree(ks), cudaFree(vs);
  return 0;
}

/* ---- the model: TP = N vs TP = 1, prefill vs decode, codecs ---- */

static model_config tiny_llama(void) {
  model_config c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "infer-check-tiny");
  snprintf(c.family, sizeof c.family, "llama3");
  c.layers = 2, c.hidden = 1024, c.heads = 16, c.kv_heads = 4, c.ffn_hidden = 2048, c.vocab = 1000;
  c.max_seq = 256, c.activation = MODEL_ACT_SWIGLU, c.norm = MODEL_NORM_RMSNORM, c.position = MODEL_POS_ROPE;
  c.rope_theta = 10000.0, c.norm_eps = 1e-5;
  return c;
}

/* Qwen3's attention on the tiny model: 16 query heads over 4 KV heads of head_dim 128 where hidden / heads
 * is 64 (Q and the output projection's input 2,048 wide, hidden 1,024), the QK norm, no QKV bias, theta 1e6,
 * eps 1e-6 (models/qwen3-tiny.json's choices at the tiny model's width). */
static model_config tiny_qwen3(void) {
  model_config c = tiny_llama();
  snprintf(c.name, sizeof c.name, "infer-check-tiny-qwen3");
  snprintf(c.family, sizeof c.family, "qwen3");
  c.head_dim_override = 128, c.qk_norm = 1, c.rope_theta = 1e6, c.norm_eps = 1e-6;
  return c;
}

/* The gathered logits [tp][batch][vl] of the valid vocabulary as [batch][vocab]. */
static int logits_of(const infer_model *m, float *out, ts_err *e) {
  long long n = (long long)m->tp * m->batch * m->vl;
  float *all = malloc((size_t)n * 4);
  if (!all) return ts_fail_sys(e, "out of host memory");
  RT_CUDA(e, cudaStreamSynchronize(m->stream));
  if (fetch(m->logits_all, n, all, e)) {
    free(all);
    return -1;
  }
  for (int b = 0; b < m->batch; b++)
    for (long long g = 0; g < m->mc.vocab; g++) {
      long long r = g / m->vl, j = g % m->vl;
      out[(long long)b * m->mc.vocab + g] = all[(r * m->batch + b) * m->vl + j];
    }
  free(all);
  return 0;
}

/* Prefill of S tokens then `steps` decode steps with given tokens; logits after each into out[step]. */
static int run_seq(infer_model *m, const int32_t *prompt, const int32_t *dec, int S, int steps, float *out,
                   ts_err *e) {
  const long long nl = (long long)m->batch * m->mc.vocab;
  CK_TRY(infer_forward(m, prompt, S, 0, e));
  CK_TRY(logits_of(m, out, e));
  for (int j = 0; j < steps; j++) {
    CK_TRY(infer_forward(m, dec + (long long)j * m->batch, 1, S + j, e));
    CK_TRY(logits_of(m, out + (j + 1) * nl, e));
  }
  return 0;
}

/* tag: "" for the tiny Llama, else a prefix naming the configuration in each check's line. */
static int check_model(rt_nccl *w, check_log *L, const model_config *cfg, const char *tag, ts_err *e) {
  const model_config mc = *cfg;
  const int B = 2, S = 64, steps = 4, N = w->nranks;
  const long long nl = (long long)B * mc.vocab;
  coll_team team;
  if (N > 1 && coll_team_init(&team, 1, &w->comms[0], &w->devices[0], &w->streams[0]))
    return ts_fail_sys(e, "coll_team_init: %s", coll_last_error());
  infer_model_opts mo = {.batch = B, .max_prompt = S + 1, .max_seq = S + 1 + steps, .seed = 77};
  infer_model m1, mn;
  CK_TRY(infer_model_init(&m1, &mc, mc.layers, 1, 0, &mo, NULL, w->streams[0], e));
  CK_TRY(infer_model_init(&mn, &mc, mc.layers, N, w->ranks[0], &mo, N > 1 ? &team : NULL, w->streams[0], e));
  int32_t *tok, *tok_s, *dec;
  RT_CUDA(e, cudaMalloc((void **)&tok, (size_t)B * (S + 1) * 4));
  RT_CUDA(e, cudaMalloc((void **)&tok_s, (size_t)B * S * 4));
  RT_CUDA(e, cudaMalloc((void **)&dec, (size_t)B * steps * 4));
  CK_TRY(rt_fill_labels(tok, (long long)B * (S + 1), mc.vocab, 5, w->streams[0], e));
  CK_TRY(rt_fill_labels(dec, (long long)B * steps, mc.vocab, 6, w->streams[0], e));
  /* the first S tokens of each sequence, and token S of each as the first decode input */
  RT_CUDA(e, cudaMemcpy2DAsync(tok_s, (size_t)S * 4, tok, (size_t)(S + 1) * 4, (size_t)S * 4, B,
                               cudaMemcpyDeviceToDevice, w->streams[0]));
  RT_CUDA(e, cudaMemcpy2DAsync(dec, 4, tok + S, (size_t)(S + 1) * 4, 4, B, cudaMemcpyDeviceToDevice, w->streams[0]));
  float *l1 = malloc((size_t)(nl * (steps + 1)) * 4), *ln = malloc((size_t)(nl * (steps + 1)) * 4),
        *lc = malloc((size_t)(nl * (steps + 1)) * 4), *lp = malloc((size_t)nl * 4);
  if (!l1 || !ln || !lc || !lp) return ts_fail_sys(e, "out of host memory");
  CK_TRY(run_seq(&m1, tok_s, dec, S, steps, l1, e));
  CK_TRY(run_seq(&mn, tok_s, dec, S, steps, ln, e));
  char name[128];
  double worst = 0;
  for (int j = 0; j <= steps; j++) worst = fmax(worst, rel_l2(ln + j * nl, l1 + j * nl, nl));
  snprintf(name, sizeof name, "%sTP%d vs TP1 logits, prefill %d + %d decode steps", tag, N, S, steps);
  report(L, name, worst, 3e-2);
  /* prefill of S + 1 tokens against prefill of S then a decode step of token S */
  CK_TRY(infer_forward(&m1, tok, S + 1, 0, e));
  CK_TRY(logits_of(&m1, lp, e));
  snprintf(name, sizeof name, "%sprefill S+1 vs prefill S + 1 decode step (TP1 logits)", tag);
  report(L, name, all_finite(lp, nl) ? rel_l2(l1 + nl, lp, nl) : NAN, 3e-2);
  {
    /* the FP8 KV cache approximates the same model: logits within 0.1 of the BF16 cache's (the TACO
     * all-reduce's tolerance below; E4M3 keeps 3 mantissa bits of K and V) */
    infer_model_opts m8 = mo;
    m8.decode_attn = 2, m8.kv_fp8 = 1;
    infer_model mf;
    CK_TRY(infer_model_init(&mf, &mc, mc.layers, 1, 0, &m8, NULL, w->streams[0], e));
    CK_TRY(run_seq(&mf, tok_s, dec, S, steps, lc, e));
    double err = 0;
    for (int j = 0; j <= steps; j++) err = fmax(err, rel_l2(lc + j * nl, l1 + j * nl, nl));
    snprintf(name, sizeof name, "%sFP8 KV cache vs BF16 (TP1 logits, prefill %d + %d steps)", tag, S, steps);
    report(L, name, all_finite(lc, nl * (steps + 1)) ? err : NAN, 0.1);
    infer_model_free(&mf);
  }
  if (N > 1) {
    const plan_codec_kind kinds[] = {PLAN_CODEC_TACO, PLAN_CODEC_CAAT, PLAN_CODEC_TACO_CAAT};
    const infer_ar_mode modes[] = {INFER_AR_TACO, INFER_AR_CAAT, INFER_AR_TACO_CAAT};
    for (int i = 0; i < 3; i++) {
      mn.codec = (plan_codec){.kind = kinds[i], .group = 128, .fp8 = PLAN_FP8_E4M3, .p = 0.5};
      mn.ar_mode[0] = mn.ar_mode[1] = modes[i];
      CK_TRY(run_seq(&mn, tok_s, dec, S, steps, lc, e));
      double err = 0;
      for (int j = 0; j <= steps; j++) err = fmax(err, rel_l2(lc + j * nl, ln + j * nl, nl));
      int fin = all_finite(lc, nl * (steps + 1));
      /* TACO approximates the same model; CAAT-Net is another model (private channels), so only
       * finiteness is checked there and its distance is printed */
      snprintf(name, sizeof name, "%sTP%d %s all-reduces: logits %s", tag, N, infer_ar_mode_name(modes[i]),
               i == 0 ? "vs plain" : "finite (distance to plain shown)");
      if (i == 0)
        report(L, name, fin ? err : NAN, 0.1);
      else {
        L->total++;
        if (!fin) L->failed++;
        if (L->root) printf("%-4s %-58s rel.L2 %.3e (not a tolerance)\n", fin ? "ok" : "FAIL", name, err);
      }
    }
    /* the per-size rule on this group: times both ways and decides (any outcome is valid) */
    for (int i = 0; i < 3; i++) {
      plan_codec c = {.kind = kinds[i], .group = 128, .fp8 = PLAN_FP8_E4M3, .p = 0.5};
      double t[2][2];
      CK_TRY(infer_choose_modes(w, &mn, &c, true, 0, S, t, e));
      CK_TRY(run_seq(&mn, tok_s, dec, S, 1, lc, e));
      L->total++;
      int fin = all_finite(lc, 2 * nl);
      if (!fin) L->failed++;
      if (L->root)
        printf("%-4s rule for %-9s: prefill %s (codec %.1f us, fallback %.1f us), decode %s (%.1f us, %.1f us)\n",
               fin ? "ok" : "FAIL", plan_codec_kind_name(kinds[i]), infer_ar_mode_name(mn.ar_mode[0]),
               t[0][0] * 1e6, t[0][1] * 1e6, infer_ar_mode_name(mn.ar_mode[1]), t[1][0] * 1e6, t[1][1] * 1e6);
    }
  }
  free(l1), free(ln), free(lc), free(lp);
  cudaFree(tok), cudaFree(tok_s), cudaFree(dec);
  infer_model_free(&m1);
  infer_model_free(&mn);
  if (N > 1) coll_team_destroy(&team);
  return 0;
}

/* A tiny Qwen2-style model (QKV bias, theta 1e6, HEADS over KV heads of head_dim HIDDEN / HEADS; the group
 * need not be a power of 2) or, with head_dim > 0, a Qwen3-style one (no QKV bias, that head_dim, the QK
 * norm, eps 1e-6) on decode attention v3, TP 1: prefill S + 1 against prefill S and a decode step (the bias,
 * the QK norm reach the prefill and the decode path alike), and the FP8 cache against the BF16 one. */
static int check_model_qwen(check_log *L, int hidden, int heads, int kv_heads, int head_dim, cudaStream_t st,
                            ts_err *e) {
  model_config mc = tiny_llama();
  snprintf(mc.family, sizeof mc.family, head_dim > 0 ? "qwen3" : "qwen2");
  mc.hidden = hidden, mc.heads = heads, mc.kv_heads = kv_heads, mc.qkv_bias = head_dim <= 0, mc.rope_theta = 1e6;
  if (head_dim > 0) mc.head_dim_override = head_dim, mc.qk_norm = 1, mc.norm_eps = 1e-6;
  const char *style = head_dim > 0 ? "qwen3-style" : "qwen2-style";
  const int d = model_head_dim(&mc);
  const int B = 2, S = 64, steps = 1;
  const long long nl = (long long)B * mc.vocab;
  infer_model_opts mo = {.batch = B, .max_prompt = S + 1, .max_seq = S + 1 + steps, .seed = 79, .decode_attn = 3};
  infer_model_opts m8 = mo;
  m8.kv_fp8 = 1;
  infer_model m1, mf;
  CK_TRY(infer_model_init(&m1, &mc, mc.layers, 1, 0, &mo, NULL, st, e));
  CK_TRY(infer_model_init(&mf, &mc, mc.layers, 1, 0, &m8, NULL, st, e));
  int32_t *tok, *tok_s, *dec;
  RT_CUDA(e, cudaMalloc((void **)&tok, (size_t)B * (S + 1) * 4));
  RT_CUDA(e, cudaMalloc((void **)&tok_s, (size_t)B * S * 4));
  RT_CUDA(e, cudaMalloc((void **)&dec, (size_t)B * steps * 4));
  CK_TRY(rt_fill_labels(tok, (long long)B * (S + 1), mc.vocab, 7, st, e));
  RT_CUDA(e, cudaMemcpy2DAsync(tok_s, (size_t)S * 4, tok, (size_t)(S + 1) * 4, (size_t)S * 4, B,
                               cudaMemcpyDeviceToDevice, st));
  RT_CUDA(e, cudaMemcpy2DAsync(dec, 4, tok + S, (size_t)(S + 1) * 4, 4, B, cudaMemcpyDeviceToDevice, st));
  float *l1 = malloc((size_t)(nl * (steps + 1)) * 4), *lc = malloc((size_t)(nl * (steps + 1)) * 4),
        *lp = malloc((size_t)nl * 4);
  if (!l1 || !lc || !lp) return ts_fail_sys(e, "out of host memory");
  CK_TRY(run_seq(&m1, tok_s, dec, S, steps, l1, e));
  CK_TRY(infer_forward(&m1, tok, S + 1, 0, e));
  CK_TRY(logits_of(&m1, lp, e));
  char name[128];
  snprintf(name, sizeof name, "%s %d/%d d%d %s: prefill S+1 vs S + 1 step (v3)", style, heads, kv_heads, d,
           head_dim > 0 ? "QK norm" : "QKV bias");
  report(L, name, all_finite(lp, nl) ? rel_l2(l1 + nl, lp, nl) : NAN, 3e-2);
  CK_TRY(run_seq(&mf, tok_s, dec, S, steps, lc, e));
  double err = 0;
  for (int j = 0; j <= steps; j++) err = fmax(err, rel_l2(lc + j * nl, l1 + j * nl, nl));
  snprintf(name, sizeof name, "%s %d/%d: FP8 KV cache vs BF16 (v3 logits)", style, heads, kv_heads);
  report(L, name, all_finite(lc, nl * (steps + 1)) ? err : NAN, 0.1);
  free(l1), free(lc), free(lp);
  cudaFree(dec), cudaFree(tok_s), cudaFree(tok);
  infer_model_free(&mf);
  infer_model_free(&m1);
  return 0;
}

int infer_run_check(rt_nccl *w, ts_err *e) {
  check_log L = {.root = rt_nccl_is_root(w)};
  const model_config llama = tiny_llama(), qwen3 = tiny_qwen3();
  RT_CUDA(e, cudaSetDevice(w->devices[0]));
  for (int ver = 1; ver <= 5; ver += ver == 1 ? 2 : 1) {
    CK_TRY(check_decode_attention(&L, ver, 3, 8, 2, 128, 1100, 1000, e));
    CK_TRY(check_decode_attention(&L, ver, 2, 4, 4, 64, 64, 37, e));
    CK_TRY(check_decode_attention(&L, ver, 1, 16, 1, 128, 8192, 8192, e));
    CK_TRY(check_decode_attention(&L, ver, 4, 8, 1, 64, 16, 5, e));
    CK_TRY(check_decode_attention(&L, ver, 64, 16, 4, 128, 300, 257, e));
  }
  CK_TRY(check_rope_scatter(&L, (rope_case){.b = 2, .hl = 4, .kvl = 2, .d = 64, .seq = 7, .pos0 = 5, .max_seq = 16,
                                             .theta = 500000.0, .seed = 21, .scale = 1.0f}, e));
  /* Qwen3's attention (head_dim 128, the QK norm): a prefill, then a decode step */
  CK_TRY(check_rope_scatter(&L, (rope_case){.b = 3, .hl = 8, .kvl = 2, .d = 128, .seq = 11, .pos0 = 0, .max_seq = 24,
                                             .theta = 1e6, .qk_norm = true, .seed = 152, .scale = 3.0f}, e));
  CK_TRY(check_rope_scatter(&L, (rope_case){.b = 3, .hl = 8, .kvl = 2, .d = 128, .seq = 1, .pos0 = 13, .max_seq = 24,
                                             .theta = 1e6, .qk_norm = true, .seed = 142, .scale = 3.0f}, e));
  CK_TRY(check_decode_fp8(&L, 3, 8, 2, 128, 1100, 1000, 41, e));
  CK_TRY(check_decode_fp8(&L, 2, 4, 4, 64, 64, 37, 51, e));
  CK_TRY(check_decode_fp8(&L, 1, 32, 8, 128, 8192, 8192, 61, e));
  CK_TRY(check_decode_fp8(&L, 4, 28, 4, 128, 300, 257, 71, e));
  CK_TRY(check_decode_fp8(&L, 64, 32, 8, 128, 300, 1, 81, e));
  /* v5's FP8 kernel at 8 and 5 query heads per KV head, tails of a tile, several splits */
  CK_TRY(check_decode_fp8(&L, 2, 64, 8, 128, 2100, 2049, 91, e));
  CK_TRY(check_decode_fp8(&L, 3, 40, 8, 128, 800, 777, 101, e));
  CK_TRY(check_decode_fp8(&L, 5, 24, 4, 128, 40, 17, 111, e));
  /* the per-query-head calibration kernel (G 4 and 8; lengths off the 32-position tile, one slice and many) */
  for (int fp8 = 0; fp8 < 2; fp8++) {
    CK_TRY(check_decode_pqh(&L, fp8, 3, 32, 8, 1100, 1000, 91 + fp8, e)); /* G 4, several slices */
    CK_TRY(check_decode_pqh(&L, fp8, 2, 8, 1, 64, 37, 93 + fp8, e));      /* G 8, one slice */
    CK_TRY(check_decode_pqh(&L, fp8, 1, 64, 8, 8192, 8191, 95 + fp8, e)); /* G 8, Llama 2 70B at TP 1 */
    CK_TRY(check_decode_pqh(&L, fp8, 16, 16, 4, 300, 257, 97 + fp8, e));  /* G 4 */
    CK_TRY(check_decode_pqh(&L, fp8, 4, 16, 2, 40, 1, 99 + fp8, e));      /* G 8, one position */
  }
  CK_TRY(check_rope_fp8(&L, 128, e));
  CK_TRY(check_rope_fp8(&L, 64, e));
  CK_TRY(check_model(w, &L, &llama, "", e));
  CK_TRY(check_model(w, &L, &qwen3, "qwen3-like: ", e)); /* head_dim 128 over hidden / heads 64, the QK norm */
  CK_TRY(check_model_qwen(&L, 896, 14, 2, 0, w->streams[0], e));  /* 7 query heads per KV head, d 64 */
  CK_TRY(check_model_qwen(&L, 1280, 10, 2, 0, w->streams[0], e)); /* 5 per KV head, d 128 */
  /* Qwen3-style: qwen3-tiny's 4 query heads over 2 KV heads of 128 (hidden / heads 64), and Qwen3 32B's 64
   * query heads of 128 over 8 KV heads on a hidden of 640 (hidden / heads 10; 32B's is 80) */
  CK_TRY(check_model_qwen(&L, 256, 4, 2, 128, w->streams[0], e));
  CK_TRY(check_model_qwen(&L, 640, 64, 8, 128, w->streams[0], e));
  double f = L.failed;
  CK_TRY(rt_world_max(w, &f, 1, e));
  if (L.root) printf("infer-check: %d checks, %d failed (any rank: %s)\n", L.total, L.failed, f > 0 ? "FAIL" : "ok");
  if (f > 0) return ts_fail_sys(e, "inference checks failed");
  return 0;
}

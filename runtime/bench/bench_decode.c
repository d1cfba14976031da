/* bench_decode.c — `tacorun bench-decode`: the decode step's memory-bound
 * kernels against the read floor, beside what the executor runs today.
 *
 * 1. Checks (fresh random inputs per case, outputs poisoned with NaN before
 *    every run, plain-C float64 references, tolerance: relative L2 error
 *    <= 1e-2, every output finite): the decode attentions
 *    infer_decode_attention (infer_kernels.h) and infer_decode_attention2
 *    (infer_decode.h).
 * 2. Timing, per point: the model's decode projections (qkv, attn_out, fc1,
 *    fc2, logits) at each batch by cuBLASLt through exec_gemm (the
 *    executor's path; the GEMVs that lost to it: dev/decode_gemv,
 *    dev/decode_gemv_tc); the decode attention
 *    over KV lengths at each batch, both kernels, and v2 over the FP8 KV
 *    cache (v2fp8: the same head vectors quantized by infer_kv8_quantize;
 *    v3 and v3fp8: the tensor-core decode attention, infer_decode.h;
 *    its checks are `tacorun execute --infer-check`'s). Weights rotate through
 *    copies spanning >= 512 MiB, and KV caches through >= 512 MiB, so every
 *    launch reads from HBM, not from the 60 MB L2. Printed: us, achieved GB/s
 *    (bytes that must move: weights + inputs + outputs, or K, V, q, out) and
 *    % of the floor at the --peak-gbps figure and at the device-to-device copy
 *    rate measured in the same run. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ts_args.h"
#include "bench.h"
#include "calibrate_time.h"
#include "exec_gemm.h"
#include "infer_decode.h"
#include "infer_kernels.h"
#include "infer_kv8.h"
#include "model.h"
#include "rt_ops.h"
#include "rt_ops_check.h"

#define POOL_BYTES (512ULL << 20)
#define TOL 1e-2

static float bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* relative L2 error of got (bf16) against ref; -1 when some output is not finite */
static double rel_l2(const uint16_t *got, const double *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double g = bf16_to_float(got[i]);
    if (!isfinite(g)) return -1;
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int dev_random(void **p, size_t elems, uint64_t seed, ts_err *e) {
  RT_CHECK_CUDA(e, cudaMalloc(p, elems * 2));
  return rt_fill_random_bf16(*p, (long long)elems, seed, 1.0f, NULL, e);
}

static int to_host(uint16_t **h, const void *d, size_t elems, ts_err *e) {
  *h = malloc(elems * 2);
  if (!*h) return ts_fail_sys(e, "bench-decode: out of memory");
  RT_CHECK_CUDA(e, cudaMemcpy(*h, d, elems * 2, cudaMemcpyDeviceToHost));
  return 0;
}

/* ---- checks ---- */

typedef int (*decode_fn)(const void *, const void *, const void *, void *, void *, const infer_attn_dims *, long long,
                         void *, ts_err *);

/* version 1 to 5: infer_decode_attention, infer_decode_attention2, 3, 4, 5; v4 and v5 (v4's
 * kernel over BF16) are also run as v3 on the same inputs, and their output must be v3's to the
 * bit (the same arithmetic). */
static int check_decode(int ver, int batch, int hl, int kvl, int d, long long len, uint64_t seed, int *failed,
                        ts_err *e) {
  infer_attn_dims a = {.batch = batch, .hl = hl, .kvl = kvl, .head_dim = d, .max_seq = len + 5};
  size_t nq = (size_t)batch * hl * d, nc = (size_t)batch * kvl * a.max_seq * d;
  size_t pb = ver >= 3 ? infer_decode3_partial_bytes(&a, len)
              : ver == 2 ? infer_decode2_partial_bytes(&a, len)
                         : infer_decode_partial_bytes(&a, len);
  void *q = NULL, *kc = NULL, *vc = NULL, *out = NULL, *part = NULL;
  uint16_t *hq = NULL, *hk = NULL, *hv = NULL, *ho = NULL, *h3 = NULL;
  double *ref = NULL;
  int rc = -1, same = 1;
  if (dev_random(&q, nq, seed, e) || dev_random(&kc, nc, seed + 1, e) || dev_random(&vc, nc, seed + 2, e)) goto out;
  if (cudaMalloc(&out, nq * 2) != cudaSuccess || cudaMalloc(&part, pb) != cudaSuccess ||
      cudaMemset(out, 0xff, nq * 2) != cudaSuccess || cudaMemset(part, 0xff, pb) != cudaSuccess) {
    ts_fail_sys(e, "bench-decode: cudaMalloc/cudaMemset failed");
    goto out;
  }
  if ((ver == 5   ? infer_decode_attention5
       : ver == 4 ? infer_decode_attention4
       : ver == 3 ? infer_decode_attention3
       : ver == 2 ? infer_decode_attention2
                  : infer_decode_attention)(q, kc, vc, out, part, &a, len, NULL, e))
    goto out;
  if (cudaDeviceSynchronize() != cudaSuccess) {
    ts_fail_sys(e, "bench-decode: decode attention failed");
    goto out;
  }
  if (to_host(&hq, q, nq, e) || to_host(&hk, kc, nc, e) || to_host(&hv, vc, nc, e) || to_host(&ho, out, nq, e)) goto out;
  if (ver >= 4) { /* v3 on the same inputs, into the poisoned buffers */
    if (cudaMemset(out, 0xff, nq * 2) != cudaSuccess || cudaMemset(part, 0xff, pb) != cudaSuccess) {
      ts_fail_sys(e, "bench-decode: cudaMemset failed");
      goto out;
    }
    if (infer_decode_attention3(q, kc, vc, out, part, &a, len, NULL, e)) goto out;
    if (cudaDeviceSynchronize() != cudaSuccess) {
      ts_fail_sys(e, "bench-decode: decode attention v3 failed");
      goto out;
    }
    if (to_host(&h3, out, nq, e)) goto out;
    same = !memcmp(h3, ho, nq * 2);
  }
  ref = calloc(nq, sizeof *ref);
  double *s = malloc((size_t)len * sizeof *s);
  if (!ref || !s) {
    free(s);
    ts_fail_sys(e, "bench-decode: out of memory");
    goto out;
  }
  const int g = hl / kvl;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < hl; h++) {
      const uint16_t *qq = hq + ((size_t)b * hl + h) * d;
      size_t cb = ((size_t)b * kvl + h / g) * a.max_seq * d;
      double mx = -INFINITY, sum = 0;
      for (long long p = 0; p < len; p++) {
        double dot = 0;
        for (int x = 0; x < d; x++) dot += bf16_to_float(qq[x]) * bf16_to_float(hk[cb + p * d + x]);
        s[p] = dot / sqrt((double)d);
        if (s[p] > mx) mx = s[p];
      }
      for (long long p = 0; p < len; p++) sum += s[p] = exp(s[p] - mx);
      double *o = ref + ((size_t)b * hl + h) * d;
      for (long long p = 0; p < len; p++)
        for (int x = 0; x < d; x++) o[x] += s[p] / sum * bf16_to_float(hv[cb + p * d + x]);
    }
  free(s);
  double err = rel_l2(ho, ref, nq);
  int ok = err >= 0 && err <= TOL && same;
  *failed += !ok;
  printf("check decode_attention%s b=%d heads=%d/%d d=%d len=%lld: rel L2 %.2e (tol %.0e)%s %s\n",
         ver == 5 ? "5" : ver == 4 ? "4" : ver == 3 ? "3" : ver == 2 ? "2" : "", batch, hl, kvl, d, len, err, TOL,
         ver >= 4 ? (same ? ", bits = v3's" : ", bits differ from v3's") : "", ok ? "ok" : "FAILED");
  rc = 0;
out:
  cudaFree(q), cudaFree(kc), cudaFree(vc), cudaFree(out), cudaFree(part);
  free(hq), free(hk), free(hv), free(ho), free(h3), free(ref);
  return rc;
}

static int run_checks(int *failed, ts_err *e) {
  uint64_t seed = 1000 + 7 * 26; /* the seeds these cases had beside the first GEMV's (now dev/decode_gemv/) */
  static const struct { int b, hl, kvl, d; long long len; } a[] = {
      {1, 32, 8, 128, 4096}, {3, 8, 8, 128, 77}, {2, 16, 4, 128, 1000}, {1, 8, 2, 64, 33},
      {2, 32, 2, 64, 517},   {4, 28, 4, 128, 130}, {1, 4, 4, 64, 1}, {2, 12, 2, 128, 300},
      /* v3's tiles of 16 positions and 4 warps: lengths around 16 and 64, one split and several */
      {1, 32, 8, 128, 8192}, {5, 32, 8, 128, 15}, {3, 32, 8, 128, 65}, {64, 32, 8, 128, 1000},
      {2, 64, 4, 128, 333}, {2, 14, 2, 64, 200}};
  for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
    for (int ver = 1; ver <= 3; ver++) {
      int g = a[i].hl / a[i].kvl;
      if (ver == 1 && g != 1 && g != 2 && g != 4 && g != 8 && g != 16) continue; /* v1 is built for these only */
      if (ver == 2 && (a[i].d == 128 ? g > 8 : g == 3 || g == 5 || g == 6 || (g > 8 && g != 16)))
        continue; /* v2 is built for these only (infer_decode.h) */
      if (check_decode(ver, a[i].b, a[i].hl, a[i].kvl, a[i].d, a[i].len, seed += 7, failed, e)) return -1;
    }
  for (int ver = 4; ver <= 5; ver++) /* v4, v5 after, so that the cases above keep their seeds */
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++)
      if (check_decode(ver, a[i].b, a[i].hl, a[i].kvl, a[i].d, a[i].len, seed += 7, failed, e)) return -1;
  return 0;
}

/* ---- timing ---- */

typedef struct {
  exec_gemm *gemm;
  exec_gemm_shape s;
  int nt, m;
  long long n, k;
  void *X, *Y, *pool;
  size_t wbytes;
  int copies;
} gemm_ctx;

static int gemm_launch(void *p, long long iter, ts_err *e) {
  gemm_ctx *c = p;
  const char *W = (const char *)c->pool + (size_t)(iter % c->copies) * c->wbytes;
  return exec_gemm_run(c->gemm, &c->s, 1.f, c->X, W, 0.f, c->Y, NULL, e);
}

static const char *const dec_names[INFER_DEC_KERNELS] = {"v1", "v2", "v2fp8", "v3", "v3fp8", "v4", "v4fp8", "v5", "v5fp8"};

static int copy_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  void **b = p;
  RT_CHECK_CUDA(e, cudaMemcpyAsync(b[1], b[0], POOL_BYTES / 2, cudaMemcpyDeviceToDevice, NULL));
  return 0;
}

static void print_point(const char *what, double bytes, double us, double peak_gbps, double copy_gbps) {
  double gbps = bytes / us * 1e-3;
  printf("%-44s %10.2f us %8.0f GB/s %5.1f %% of %.0f %5.1f %% of copy\n", what, us, gbps, 100 * gbps / peak_gbps,
         peak_gbps, 100 * gbps / copy_gbps);
}

static int time_gemms(const model_config *mc, const long long *batches, int nb, double peak, double copy, ts_err *e) {
  const long long h = mc->hidden, d = model_head_dim(mc);
  const struct { const char *name; int nt; long long n, k; } proj[] = {
      {"qkv", 0, (mc->heads + 2LL * mc->kv_heads) * d, h}, {"attn_out", 0, h, (long long)mc->heads * d},
      {"fc1", 0, 2LL * mc->ffn_hidden, h},                  {"fc2", 0, h, mc->ffn_hidden},
      {"logits", 1, (long long)mc->vocab, h}};
  long long maxm = 1;
  for (int i = 0; i < nb; i++) maxm = batches[i] > maxm ? batches[i] : maxm;
  gemm_ctx c = {0};
  calib_budget bud = calib_budget_default(0);
  void *streams[1] = {NULL};
  int dev[1] = {0}, rc = -1;
  cudaGetDevice(&dev[0]);
  size_t wmax = 0;
  for (int p = 0; p < 5; p++) {
    size_t w = (size_t)proj[p].n * proj[p].k * 2;
    wmax = w > wmax ? w : wmax;
  }
  size_t pool = wmax > POOL_BYTES ? 2 * wmax : POOL_BYTES + wmax;
  if (exec_gemm_create(&c.gemm, e) || dev_random(&c.pool, pool / 2, 77, e) ||
      dev_random(&c.X, (size_t)maxm * 2 * mc->ffn_hidden, 78, e))
    goto out;
  if (cudaMalloc(&c.Y, (size_t)maxm * mc->vocab * 2 + (size_t)maxm * 2 * mc->ffn_hidden * 2) != cudaSuccess) {
    ts_fail_sys(e, "bench-decode: cudaMalloc failed");
    goto out;
  }
  double step[16] = {0}; /* the sum over one layer's projections and the logits, per batch */
  for (int p = 0; p < 5; p++)
    for (int bi = 0; bi < nb; bi++) {
      c.nt = proj[p].nt, c.m = (int)batches[bi], c.n = proj[p].n, c.k = proj[p].k;
      c.wbytes = (size_t)c.n * c.k * 2;
      c.copies = (int)(pool / c.wbytes);
      c.s = exec_gemm_packed(c.nt ? EXEC_GEMM_NT : EXEC_GEMM_NN, c.m, c.n, c.k);
      double bytes = (double)c.wbytes + 2.0 * c.m * (c.n + c.k), us = 0;
      if (calib_time_us(gemm_launch, &c, streams, dev, 1, &bud, &us, e)) goto out;
      char what[96];
      snprintf(what, sizeof what, "%s m=%d n=%lld k=%lld cublaslt", proj[p].name, c.m, c.n, c.k);
      print_point(what, bytes, us, peak, copy);
      double wgt = p == 4 ? 1.0 / mc->layers : 1.0; /* logits once per step: per layer share */
      if (bi < 16) step[bi] += wgt * us;
    }
  for (int bi = 0; bi < nb && bi < 16; bi++) {
    double wb = 0;
    for (int p = 0; p < 5; p++) wb += (double)proj[p].n * proj[p].k * 2 * (p == 4 ? 1.0 / mc->layers : 1.0);
    printf("layer projections + logits/layers, batch %lld: cublaslt %.1f us (%.1f %% of %.0f)\n", batches[bi], step[bi],
           100 * wb / step[bi] * 1e-3 / peak, peak);
  }
  rc = 0;
out:
  cudaFree(c.pool), cudaFree(c.X), cudaFree(c.Y);
  exec_gemm_destroy(c.gemm);
  return rc;
}

static int time_decode(const model_config *mc, const long long *batches, int nb, const long long *kv, int nkv,
                       int kernels, double peak, double copy, ts_err *e) {
  infer_decode_timing c = {0};
  calib_budget bud = calib_budget_default(0);
  void *streams[1] = {NULL};
  int dev[1] = {0}, rc = -1;
  cudaGetDevice(&dev[0]);
  long long maxb = 1, maxkv = 1;
  for (int i = 0; i < nb; i++) maxb = batches[i] > maxb ? batches[i] : maxb;
  for (int i = 0; i < nkv; i++) maxkv = kv[i] > maxkv ? kv[i] : maxkv;
  const int hl = mc->heads, kvl = mc->kv_heads, d = model_head_dim(mc);
  size_t cmax = (size_t)maxb * kvl * maxkv * d * 2, pool = cmax > POOL_BYTES ? 2 * cmax : POOL_BYTES + cmax;
  infer_attn_dims big = {.batch = (int)maxb, .hl = hl, .kvl = kvl, .head_dim = d, .max_seq = maxkv};
  size_t pb = 0;
  for (int i = 0; i < nkv; i++) {
    size_t a = infer_decode_partial_bytes(&big, kv[i]), b = infer_decode2_partial_bytes(&big, kv[i]),
           b3 = infer_decode3_partial_bytes(&big, kv[i]);
    pb = a > pb ? a : pb, pb = b > pb ? b : pb, pb = b3 > pb ? b3 : pb;
  }
  if (dev_random(&c.q, (size_t)maxb * hl * d, 90, e) || dev_random((void **)&c.k, pool / 2, 91, e) ||
      dev_random((void **)&c.v, pool / 2, 92, e))
    goto out;
  /* the FP8 pools hold the BF16 pools' values quantized: as many head vectors, 1 byte an element + a scale */
  const size_t prow = pool / 2 / ((size_t)d * 2);
  if (cudaMalloc(&c.out, (size_t)maxb * hl * d * 2) != cudaSuccess || cudaMalloc(&c.part, pb * 4) != cudaSuccess ||
      cudaMalloc((void **)&c.k8, prow * d) != cudaSuccess || cudaMalloc((void **)&c.v8, prow * d) != cudaSuccess ||
      cudaMalloc((void **)&c.ks, prow * 4) != cudaSuccess || cudaMalloc((void **)&c.vs, prow * 4) != cudaSuccess) {
    ts_fail_sys(e, "bench-decode: cudaMalloc failed");
    goto out;
  }
  if (infer_kv8_quantize(c.k, c.k8, c.ks, (long long)prow, d, NULL, e) ||
      infer_kv8_quantize(c.v, c.v8, c.vs, (long long)prow, d, NULL, e))
    goto out;
  for (int bi = 0; bi < nb; bi++)
    for (int ki = 0; ki < nkv; ki++) {
      c.a = (infer_attn_dims){.batch = (int)batches[bi], .hl = hl, .kvl = kvl, .head_dim = d, .max_seq = kv[ki]};
      c.len = kv[ki];
      c.set_bytes = (size_t)c.a.batch * kvl * kv[ki] * d * 2;
      c.sets = (int)(pool / 2 / c.set_bytes);
      if (c.sets < 1) c.sets = 1;
      const double rows = (double)c.a.batch * kvl * kv[ki];
      double us[INFER_DEC_KERNELS];
      for (c.kernel = 0; c.kernel < INFER_DEC_KERNELS; c.kernel++) {
        if (!(kernels & (1 << c.kernel))) continue;
        /* bytes that must move: K and V (FP8: codes and scales), q and out */
        const int fp8 = infer_dec_is_fp8(c.kernel);
        double bytes = (fp8 ? 2.0 * rows * (d + 4) : 2.0 * c.set_bytes) + 4.0 * c.a.batch * hl * d;
        if (calib_time_us(infer_decode_timing_launch, &c, streams, dev, 1, &bud, &us[c.kernel], e)) goto out;
        char what[96];
        snprintf(what, sizeof what, "decode attention b=%d kv=%lld %s", c.a.batch, c.len, dec_names[c.kernel]);
        print_point(what, bytes, us[c.kernel], peak, copy);
      }
      if ((kernels & 3) == 3) printf("  -> v2/v1 %.3f\n", us[INFER_DEC_V2] / us[INFER_DEC_V1]);
      if ((kernels & 6) == 6) printf("  -> v2fp8/v2 %.3f\n", us[INFER_DEC_V2_FP8] / us[INFER_DEC_V2]);
      if ((kernels & 10) == 10) printf("  -> v3/v2 %.3f\n", us[INFER_DEC_V3] / us[INFER_DEC_V2]);
      if ((kernels & 20) == 20) printf("  -> v3fp8/v2fp8 %.3f\n", us[INFER_DEC_V3_FP8] / us[INFER_DEC_V2_FP8]);
      if ((kernels & 24) == 24) printf("  -> v3fp8/v3 %.3f\n", us[INFER_DEC_V3_FP8] / us[INFER_DEC_V3]);
      if ((kernels & 40) == 40) printf("  -> v4/v3 %.3f\n", us[INFER_DEC_V4] / us[INFER_DEC_V3]);
      if ((kernels & 80) == 80) printf("  -> v4fp8/v3fp8 %.3f\n", us[INFER_DEC_V4_FP8] / us[INFER_DEC_V3_FP8]);
      if ((kernels & 96) == 96) printf("  -> v4fp8/v4 %.3f\n", us[INFER_DEC_V4_FP8] / us[INFER_DEC_V4]);
      const int b3f = 1 << INFER_DEC_V3_FP8, b4f = 1 << INFER_DEC_V4_FP8, b5f = 1 << INFER_DEC_V5_FP8;
      if ((kernels & (b3f | b5f)) == (b3f | b5f)) printf("  -> v5fp8/v3fp8 %.3f\n", us[INFER_DEC_V5_FP8] / us[INFER_DEC_V3_FP8]);
      if ((kernels & (b4f | b5f)) == (b4f | b5f)) printf("  -> v5fp8/v4fp8 %.3f\n", us[INFER_DEC_V5_FP8] / us[INFER_DEC_V4_FP8]);
    }
  rc = 0;
out:
  cudaFree(c.vs), cudaFree(c.ks), cudaFree(c.v8), cudaFree(c.k8);
  cudaFree(c.q), cudaFree(c.k), cudaFree(c.v), cudaFree(c.out), cudaFree(c.part);
  return rc;
}

/* "v2,v2fp8" -> bits of INFER_DEC_*; -1 on an unknown name or an empty list. */
static int parse_kernels(const char *s, int *bits) {
  *bits = 0;
  while (*s) {
    size_t n = strcspn(s, ",");
    int k = 0;
    while (k < INFER_DEC_KERNELS && !(strlen(dec_names[k]) == n && !strncmp(s, dec_names[k], n))) k++;
    if (k == INFER_DEC_KERNELS) return -1;
    *bits |= 1 << k;
    s += n + (s[n] == ',');
  }
  return *bits ? 0 : -1;
}

static void usage(FILE *out) {
  fprintf(out,
          "usage: tacorun bench-decode [--model NAME (llama3-8b)] [--batches LIST (1,2,4,8,16,32,64)]\n"
          "                            [--kv LIST (128,1024,4096,8192)] [--peak-gbps G (4800: H200 datasheet)]\n"
          "                            [--check (checks only)] [--attention-only (no GEMM timing)]\n"
          "                            [--gemm-only (no attention timing)]\n"
          "                            [--attention LIST of v1,v2,v2fp8,v3,v3fp8,v4,v4fp8,v5,v5fp8 (all nine)]\n"
          "Checks the decode attention kernels (v1 to v5) against a plain-C reference, then times the\n"
          "model's decode projections (cuBLASLt, what the executor runs) and decode attention (v1 to v5\n"
          "and v2 to v5 over the FP8 KV cache: v2fp8 to v5fp8, infer_kv8.h; bytes: codes + scales;\n"
          "their checks are `tacorun execute --infer-check`'s) per batch and KV length: us, GB/s, %% of\n"
          "the --peak-gbps floor and of the measured copy rate.\n"
          "(The weight-streaming GEMVs that lost to cuBLASLt are timed by dev/decode_gemv (CUDA cores)\n"
          "and dev/decode_gemv_tc (tensor cores).)\n"
          "reads:  the model zoo (the --model's shapes)\n"
          "writes: the checks and the table on standard output (runtime/RESULTS-decode.md keeps one run)\n");
}

int bench_decode_main(int argc, char **argv) {
  const char *model = "llama3-8b", *batches_s = "1,2,4,8,16,32,64", *kv_s = "128,1024,4096,8192";
  double peak = 4800;
  int check_only = 0, attention_only = 0, gemm_only = 0, kernels = (1 << INFER_DEC_KERNELS) - 1;
  for (int i = 1; i < argc; i++) {
    int has = i + 1 < argc;
    if (!strcmp(argv[i], "--check")) check_only = 1;
    else if (!strcmp(argv[i], "--attention-only")) attention_only = 1;
    else if (!strcmp(argv[i], "--gemm-only")) gemm_only = 1;
    else if (!strcmp(argv[i], "--attention") && has) {
      if (parse_kernels(argv[++i], &kernels)) {
        fprintf(stderr, "tacorun bench-decode: --attention: '%s' is not a comma-separated list of v1, v2, v2fp8, v3, v3fp8, v4, v4fp8, v5, v5fp8\n",
                argv[i]);
        return 2;
      }
    }
    else if (!strcmp(argv[i], "--model") && has) model = argv[++i];
    else if (!strcmp(argv[i], "--batches") && has) batches_s = argv[++i];
    else if (!strcmp(argv[i], "--kv") && has) kv_s = argv[++i];
    else if (!strcmp(argv[i], "--peak-gbps") && has) peak = atof(argv[++i]);
    else {
      const int help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
      if (!help) fprintf(stderr, "tacorun bench-decode: unknown option or missing value: %s\n", argv[i]);
      usage(help ? stdout : stderr);
      return help ? 0 : 2;
    }
  }
  long long batches[16], kv[16];
  int nb = ts_arg_ll_list(batches_s, 1, 1LL << 20, batches, 16), nkv = ts_arg_ll_list(kv_s, 1, 1LL << 20, kv, 16);
  if (nb < 1 || nkv < 1 || !(peak > 0)) {
    fprintf(stderr, "tacorun bench-decode: --batches, --kv: comma-separated integers in [1, 2^20]; --peak-gbps > 0\n");
    return 2;
  }
  ts_err e = {{0}, 0};
  model_config mc;
  if (model_load(model, NULL, &mc, &e)) {
    fprintf(stderr, "tacorun bench-decode: %s\n", e.msg);
    return e.bad_input ? 2 : 1;
  }
  int failed = 0;
  if (run_checks(&failed, &e)) goto fail;
  printf("checks: %d failed\n", failed);
  if (check_only) return failed ? 1 : 0;
  void *b[2] = {NULL, NULL};
  double copy_us = 0;
  calib_budget bud = calib_budget_default(0);
  void *streams[1] = {NULL};
  int dev[1] = {0};
  if (cudaMalloc(&b[0], POOL_BYTES / 2) != cudaSuccess || cudaMalloc(&b[1], POOL_BYTES / 2) != cudaSuccess) {
    ts_fail_sys(&e, "bench-decode: cudaMalloc failed");
    goto fail;
  }
  if (calib_time_us(copy_launch, b, streams, dev, 1, &bud, &copy_us, &e)) goto fail;
  double copy = 2.0 * (POOL_BYTES / 2) / copy_us * 1e-3; /* read + write */
  cudaFree(b[0]), cudaFree(b[1]);
  printf("device-to-device copy of %llu MiB: %.1f us, %.0f GB/s (read + write)\n", (unsigned long long)(POOL_BYTES >> 21),
         copy_us, copy);
  printf("model %s: hidden %d, heads %d / %d, ffn %d, vocab %d\n", mc.name, mc.hidden, mc.heads, mc.kv_heads,
         mc.ffn_hidden, mc.vocab);
  if ((!attention_only && time_gemms(&mc, batches, nb, peak, copy, &e)) ||
      (!gemm_only && time_decode(&mc, batches, nb, kv, nkv, kernels, peak, copy, &e)))
    goto fail;
  return failed ? 1 : 0;
fail:
  fprintf(stderr, "tacorun bench-decode: %s\n", e.msg);
  return 1;
}

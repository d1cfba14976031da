/* main.c — dev_decode_attn_fp8: decode attention over the FP8 KV cache with positions as
 * the mma's rows (attn_fp8.h, three forms: var, var-alu, var-b4) checked against a float64
 * reference and timed beside the library's v3 and v4 over the same cache
 * (infer_decode_attention3_fp8, infer_decode_attention4_fp8).
 *
 *   dev_decode_attn_fp8 [--check] [--peak-gbps 3350] [--reps 20] [--batches 1,8,32,64,128,256,512]
 *                       [--kv 1024,4096,16384] [--max-gib 40] [--help]
 *
 * --check: 14 shapes (batch 1..64, KV length 1..8,192, lengths that are not multiples of
 * 16, one split and many, 4 and 8 query heads per KV head, head_dim 128), each with fresh
 * random inputs: BF16 keys and values, rows scaled by 2^(r % 9 - 4) (K) and its inverse
 * (V) so that the scales differ, quantized by the library's C quantizer
 * (infer_ref_kv8_quantize, bit-equal to the GPU's); outputs and partials poisoned with
 * NaN before each run; v3, v4 and the three forms each against the library's reference
 * (infer_ref_decode_attention, double sums) over the dequantized codes, tolerance relative L2 error <= 1e-2 and every output finite (the
 * tolerance `tacorun execute --infer-check` holds v3 over the FP8 cache to). Exit 1 when
 * a check fails.
 * Timing: Llama 3 8B's layout (32 query heads over 8 KV heads of 128) and Llama 3 70B's
 * at TP 1 (64 over 8), every batch x KV length whose cache (codes + scales, K and V) fits
 * --max-gib; the caches rotate through sets spanning >= 512 MiB so each call reads HBM
 * (a set larger than that is read once a call); the five kernels take turns (rep i times
 * `inner` calls of each, the order rotated every rep), the median over
 * --reps reps after a warm-up. Then an L2-resident set (caches of 16.5 MiB, read again
 * and again without rotation): their GB/s tell what the SMs sustain, not HBM. Printed
 * per shape: us, GB/s of codes + scales read, % of --peak-gbps per kernel, and each
 * one's time over v3's. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_fp8.h"
#include "dev_attn_opts.h"
#include "gpu_check.h"
#include "infer_decode.h"
#include "infer_ref.h"
#include "rt_ops_ref.h"

#define TOL 1e-2
#define ROTATE_BYTES ((double)(512u << 20))
#define D 128
#define KVL 8

typedef dev_attn_opts opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: dev_decode_attn_fp8 [--check] [--peak-gbps X (3350)] [--reps N (20)]\n"
          "                           [--batches LIST (1,8,32,64,128,256,512)] [--kv LIST (1024,4096,16384)]\n"
          "                           [--max-gib X (40)] [--help]\n"
          "Decode attention over the FP8 KV cache with positions as the mma's rows (dev/decode_attn_fp8)\n"
          "and two other forms of it against the library's v3 and v4 over FP8 (infer_decode_attention3_fp8,\n"
          "_4_fp8). --check: 14 shapes against a float64\n"
          "reference, relative L2 error <= 1e-2, exit 1 on a failure. Otherwise timing: Llama 3 8B's and\n"
          "70B's layouts (32 / 64 query heads over 8 KV heads of 128) at each batch x KV length whose cache\n"
          "fits --max-gib GiB, then an L2-resident set; GB/s count codes + scales read.\n");
}

static int parse(int argc, char **argv, opts *o) {
  static const long long b0[] = {1, 8, 32, 64, 128, 256, 512}, k0[] = {1024, 4096, 16384};
  memset(o, 0, sizeof *o);
  o->reps = 20, o->peak_gbps = 3350, o->max_gib = 40;
  o->nb = 7, o->nkv = 3;
  memcpy(o->batches, b0, sizeof b0), memcpy(o->kv, k0, sizeof k0);
  if (dev_attn_parse(argc, argv, "dev_decode_attn_fp8", usage, o)) return -1;
  return 0;
}

/* ---- checks ---- */

typedef struct {
  void *q, *out, *part, *k8, *v8;
  float *ks, *vs;
} dev_bufs;

static void free_bufs(dev_bufs *b) {
  cudaFree(b->vs), cudaFree(b->ks), cudaFree(b->v8), cudaFree(b->k8), cudaFree(b->part), cudaFree(b->out), cudaFree(b->q);
  memset(b, 0, sizeof *b);
}

/* The kernels compared: the library's v3 and v4 (v3 with the next tile's loads in flight, never
 * timed on an H200) over the FP8 cache, and the variant's three forms (attn_fp8.h). */
typedef int (*attn_fn)(const void *, const infer_kv8 *, void *, void *, const infer_attn_dims *, long long, void *, ts_err *);
enum { NK = 5 };
static const attn_fn kernels[NK] = {infer_decode_attention3_fp8, infer_decode_attention4_fp8, dev_attn_fp8,
                                    dev_attn_fp8_alu, dev_attn_fp8_b4};
static const char *const names[NK] = {"v3fp8", "v4fp8", "var", "var-alu", "var-b4"};
static const char *const cols[NK] = {"v3", "v4", "var", "alu", "b4"};

/* One shape: fresh inputs, the variants and v3 each on poisoned outputs, against float64. */
static int check_shape(int batch, int hl, int kvl, long long len, uint64_t seed, int *passed, int *failed, ts_err *e) {
  const long long max_seq = len + 3, rows = (long long)batch * kvl * max_seq;
  const size_t nq = (size_t)batch * hl * D, nc = (size_t)rows * D;
  infer_attn_dims a = {.batch = batch, .hl = hl, .kvl = kvl, .head_dim = D, .max_seq = max_seq};
  size_t pb = dev_attn_fp8_partial_bytes(&a, len), pb3 = infer_decode3_partial_bytes(&a, len);
  if (pb3 > pb) pb = pb3;
  dev_bufs d = {0};
  float *hq = malloc(nq * sizeof *hq), *hks = malloc((size_t)rows * 4), *hvs = malloc((size_t)rows * 4), x[D];
  uint16_t *hqb = malloc(nq * 2), *ho = malloc(nq * 2);
  unsigned char *hk = malloc(nc), *hv = malloc(nc);
  float *ref = malloc(nq * sizeof *ref), *hkd = malloc(nc * sizeof *hkd), *hvd = malloc(nc * sizeof *hvd);
  int rc = -1;
  if (!hq || !hks || !hvs || !hqb || !ho || !hk || !hv || !ref || !hkd || !hvd) {
    ts_fail_sys(e, "dev_decode_attn_fp8: out of host memory");
    goto out;
  }
  uint64_t s = seed;
  for (size_t i = 0; i < nq; i++) hq[i] = dev_attn_rand_bf16(&s, 3.f), hqb[i] = infer_ref_to_bf16(hq[i]);
  for (long long r = 0; r < rows; r++) { /* row r scaled by 2^(r % 9 - 4) (K) and its inverse (V) */
    const float f = ldexpf(1.f, (int)(r % 9) - 4);
    for (int i = 0; i < D; i++) x[i] = dev_attn_rand_bf16(&s, f);
    infer_ref_kv8_quantize(x, D, hk + r * D, &hks[r]);
    for (int i = 0; i < D; i++) x[i] = dev_attn_rand_bf16(&s, 1.f / f);
    infer_ref_kv8_quantize(x, D, hv + r * D, &hvs[r]);
    infer_ref_kv8_dequantize(hk + r * D, hks[r], D, hkd + r * D);
    infer_ref_kv8_dequantize(hv + r * D, hvs[r], D, hvd + r * D);
  }
  CUDA_CHECK_GOTO(e, cudaMalloc(&d.q, nq * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&d.out, nq * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&d.part, pb), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&d.k8, nc), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&d.v8, nc), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d.ks, (size_t)rows * 4), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d.vs, (size_t)rows * 4), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(d.q, hqb, nq * 2, cudaMemcpyHostToDevice), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(d.k8, hk, nc, cudaMemcpyHostToDevice), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(d.v8, hv, nc, cudaMemcpyHostToDevice), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(d.ks, hks, (size_t)rows * 4, cudaMemcpyHostToDevice), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(d.vs, hvs, (size_t)rows * 4, cudaMemcpyHostToDevice), out);
  if (infer_ref_decode_attention(hq, hkd, hvd, ref, batch, hl, kvl, D, max_seq, len)) {
    ts_fail_sys(e, "dev_decode_attn_fp8: out of host memory");
    goto out;
  }
  infer_kv8 c = {d.k8, d.v8, d.ks, d.vs};
  for (int which = 0; which < NK; which++) {
    CUDA_CHECK_GOTO(e, cudaMemset(d.out, 0xff, nq * 2), out);
    CUDA_CHECK_GOTO(e, cudaMemset(d.part, 0xff, pb), out);
    if (kernels[which](d.q, &c, d.out, d.part, &a, len, NULL, e)) goto out;
    CUDA_CHECK_GOTO(e, cudaDeviceSynchronize(), out);
    CUDA_CHECK_GOTO(e, cudaMemcpy(ho, d.out, nq * 2, cudaMemcpyDeviceToHost), out);
    const double err = dev_attn_rel_error(ho, ref, nq);
    const int ok = err >= 0 && err <= TOL;
    *passed += ok, *failed += !ok;
    printf("check %-7s b=%-3d heads=%d/%d d=%d len=%-5lld splits=%-3lld max rel. L2 %.3e (tol %.0e) %s\n",
           names[which], batch, hl, kvl, D, len,
           (long long)(dev_attn_fp8_partial_bytes(&a, len) / ((size_t)batch * hl * (D + 2) * 4)), err,
           TOL, ok ? "ok" : "FAILED");
  }
  rc = 0;
out:
  free_bufs(&d);
  free(hvd), free(hkd), free(ref), free(hv), free(hk), free(ho), free(hqb), free(hvs), free(hks), free(hq);
  return rc;
}

static int run_checks(ts_err *e) {
  static const struct { int b, hl, kvl; long long len; } sh[] = {
      {1, 32, 8, 1},     {1, 32, 8, 15},   {2, 32, 8, 17},    {5, 32, 8, 65},    {3, 64, 8, 100},
      {1, 32, 8, 4096},  {1, 64, 8, 8192}, {64, 32, 8, 1000}, {64, 64, 8, 333},  {8, 64, 8, 1024},
      {2, 16, 4, 777},   {4, 32, 4, 2049}, {16, 32, 8, 4095}, {32, 64, 8, 257}};
  int passed = 0, failed = 0;
  uint64_t seed = 24000;
  for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
    if (check_shape(sh[i].b, sh[i].hl, sh[i].kvl, sh[i].len, seed += 101, &passed, &failed, e)) return -1;
  printf("checks: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

/* ---- timing ---- */

typedef struct {
  void *q, *out, *part;
  uint8_t *k8, *v8;
  float *ks, *vs;
  long long pool_rows;
} pool;

typedef struct {
  const pool *p;
  infer_attn_dims a;
  long long len, rows;
  int sets;
} shape;

static int launch(const shape *s, int which, long long iter, ts_err *e) {
  const long long off = (iter % s->sets) * s->rows;
  infer_kv8 c = {s->p->k8 + off * D, s->p->v8 + off * D, s->p->ks + off, s->p->vs + off};
  return kernels[which](s->p->q, &c, s->p->out, s->p->part, &s->a, s->len, NULL, e);
}

static int launch_cb(const void *ctx, int which, long long iter, ts_err *e) {
  return launch((const shape *)ctx, which, iter, e);
}

static int print_shape(const char *set, const char *model, const shape *s, int reps, double peak, ts_err *e) {
  double us[NK];
  if (dev_attn_time(NK, launch_cb, s, reps, us, "dev_decode_attn_fp8", e)) return -1;
  const double bytes = 2.0 * s->rows * (D + 4);
  printf("%-4s %-10s %5d %6lld %2d %9.1f %5d", set, model, s->a.batch, s->len, s->a.hl / s->a.kvl, bytes / 1048576.0, s->sets);
  for (int k = 0; k < NK; k++) {
    const double gb = bytes / us[k] * 1e-3;
    printf(" %10.2f %8.0f %6.1f", us[k], gb, 100 * gb / peak);
  }
  for (int k = 1; k < NK; k++) printf(" %8.3f", us[k] / us[0]);
  printf("\n");
  fflush(stdout);
  return 0;
}

static int run_timing(const opts *o, ts_err *e) {
  static const struct { const char *name; int hl; } models[] = {{"llama3-8b", 32}, {"llama3-70b", 64}};
  static const struct { int b; long long kv; } l2set[] = {{8, 1024}, {16, 512}, {2, 4096}};
  const double row_bytes = 2.0 * (D + 4);
  long long max_rows = 0, max_b = 16;
  for (int i = 0; i < o->nb; i++)
    for (int k = 0; k < o->nkv; k++) {
      const long long rows = o->batches[i] * KVL * o->kv[k];
      if (rows * row_bytes > o->max_gib * 1073741824.0) continue;
      if (rows > max_rows) max_rows = rows;
      if (o->batches[i] > max_b) max_b = o->batches[i];
    }
  const long long rot_rows = (long long)ceil(ROTATE_BYTES / row_bytes);
  pool p = {0};
  p.pool_rows = max_rows > rot_rows ? max_rows : rot_rows;
  size_t pb = 0;
  for (int m = 0; m < 2; m++) /* the partials of every shape timed (their split counts differ by batch) */
    for (int i = 0; i < o->nb + 3; i++)
      for (int k = 0; k < (i < o->nb ? o->nkv : 1); k++) {
        const long long bb = i < o->nb ? o->batches[i] : l2set[i - o->nb].b, kv = i < o->nb ? o->kv[k] : l2set[i - o->nb].kv;
        infer_attn_dims x = {.batch = (int)bb, .hl = models[m].hl, .kvl = KVL, .head_dim = D, .max_seq = kv};
        size_t a = dev_attn_fp8_partial_bytes(&x, kv), b = infer_decode3_partial_bytes(&x, kv);
        pb = a > pb ? a : pb, pb = b > pb ? b : pb;
      }
  int rc = -1;
  const size_t nq = (size_t)max_b * 64 * D;
  CUDA_CHECK_GOTO(e, cudaMalloc(&p.q, nq * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&p.out, nq * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&p.part, pb), out);
  CUDA_CHECK_GOTO(e, cudaMemset(p.q, 0x3c, nq * 2), out); /* BF16 0x3c3c: about 0.0115 */
  if (cudaMalloc((void **)&p.k8, (size_t)p.pool_rows * D) != cudaSuccess ||
      cudaMalloc((void **)&p.v8, (size_t)p.pool_rows * D) != cudaSuccess ||
      cudaMalloc((void **)&p.ks, (size_t)p.pool_rows * 4) != cudaSuccess ||
      cudaMalloc((void **)&p.vs, (size_t)p.pool_rows * 4) != cudaSuccess) {
    ts_fail_sys(e, "dev_decode_attn_fp8: cudaMalloc of %.1f GiB of cache failed (--max-gib)",
                p.pool_rows * row_bytes / 1073741824.0);
    goto out;
  }
  if (dev_attn_fp8_fill(p.k8, p.ks, p.pool_rows, D, 1, NULL, e) || dev_attn_fp8_fill(p.v8, p.vs, p.pool_rows, D, 2, NULL, e))
    goto out;
  CUDA_CHECK_GOTO(e, cudaDeviceSynchronize(), out);
  printf("# v3 = infer_decode_attention3_fp8, v4 = infer_decode_attention4_fp8 (the library), var = dev_attn_fp8,\n"
         "# alu = dev_attn_fp8_alu, b4 = dev_attn_fp8_b4;\n"
         "# head_dim 128, 8 KV heads;\n"
         "# GB/s: codes + scales of K and V read; %% of --peak-gbps %.0f; median of %d alternating reps;\n"
         "# sets: cache copies rotated (hbm: >= 512 MiB in all, or one larger set; l2: one set, re-read)\n",
         o->peak_gbps, o->reps);
  printf("%-4s %-10s %5s %6s %2s %9s %5s", "set", "model", "batch", "kv", "G", "cache_MiB", "sets");
  for (int k = 0; k < NK; k++) {
    char h[3][16];
    snprintf(h[0], sizeof h[0], "%s_us", cols[k]), snprintf(h[1], sizeof h[1], "%s_GB/s", cols[k]);
    snprintf(h[2], sizeof h[2], "%s_%%", cols[k]);
    printf(" %10s %8s %6s", h[0], h[1], h[2]);
  }
  for (int k = 1; k < NK; k++) {
    char h[16];
    snprintf(h, sizeof h, "%s/v3", cols[k]);
    printf(" %8s", h);
  }
  printf("\n");
  for (int m = 0; m < 2; m++)
    for (int i = 0; i < o->nb; i++)
      for (int k = 0; k < o->nkv; k++) {
        shape s = {&p, {.batch = (int)o->batches[i], .hl = models[m].hl, .kvl = KVL, .head_dim = D, .max_seq = o->kv[k]},
                   o->kv[k], o->batches[i] * KVL * o->kv[k], 1};
        if (s.rows * row_bytes > o->max_gib * 1073741824.0) {
          printf("%-4s %-10s %5d %6lld skipped: cache %.1f GiB > --max-gib %.0f\n", "hbm", models[m].name, s.a.batch, s.len,
                 s.rows * row_bytes / 1073741824.0, o->max_gib);
          continue;
        }
        s.sets = (int)(p.pool_rows / s.rows);
        if (print_shape("hbm", models[m].name, &s, o->reps, o->peak_gbps, e)) goto out;
      }
  for (int m = 0; m < 2; m++)
    for (int k = 0; k < 3; k++) {
      shape s = {&p, {.batch = l2set[k].b, .hl = models[m].hl, .kvl = KVL, .head_dim = D, .max_seq = l2set[k].kv},
                 l2set[k].kv, (long long)l2set[k].b * KVL * l2set[k].kv, 1};
      if (print_shape("l2", models[m].name, &s, o->reps, o->peak_gbps, e)) goto out;
    }
  rc = 0;
out:
  cudaFree(p.vs), cudaFree(p.ks), cudaFree(p.v8), cudaFree(p.k8), cudaFree(p.part), cudaFree(p.out), cudaFree(p.q);
  return rc;
}

int main(int argc, char **argv) {
  opts o;
  ts_err e = {0};
  if (parse(argc, argv, &o)) return 2;
  if (dev_attn_device("dev_decode_attn_fp8")) return 2;
  int rc = o.check ? run_checks(&e) : run_timing(&o, &e);
  if (rc < 0) {
    fprintf(stderr, "dev_decode_attn_fp8: %s\n", e.msg);
    return ts_exit_status(&e) ? ts_exit_status(&e) : 1;
  }
  return rc;
}

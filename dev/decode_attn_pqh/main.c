/* main.c — dev_decode_attn_pqh: decode attention read per query head (pqh.h) run two ways,
 * aliased (query head h reads KV head h / G: the per-query-head kernel) and copies (a
 * cache of G x the KV heads, head h reading its own copy: what a price of G x the cache
 * read assumes), checked against a float64 reference and timed beside the library's v3
 * over the aliased cache (infer_decode_attention3, _fp8: one block per KV head, the
 * per-KV-head reference), BF16 and FP8 caches. How much of the repeated read L2 serves:
 * aliased / copies (1 when L2 serves none of it, 1/G when it serves all and HBM binds).
 *
 *   dev_decode_attn_pqh [--check] [--peak-gbps 3350] [--reps 20] [--batches 1,8,32,64,192]
 *                       [--kv 512,2048,4096] [--max-gib 24] [--help]
 *
 * --check: 9 shapes (batch 1..16, 8 to 64 query heads, G 2 to 8, lengths 1..8,191, most of
 * them not multiples of the 32-position tile, one slice and many), each with fresh random
 * inputs (BF16 values, rows scaled by 2^(r % 9 - 4) for K and its inverse for V; the FP8
 * cache their quantization by the library's C quantizer infer_ref_kv8_quantize); outputs
 * and partials poisoned with NaN before each run; aliased, copies and v3, over BF16 and
 * FP8, each against float64 attention over the same values (dequantized codes for FP8),
 * tolerance relative L2 error <= 1e-2 and every output finite. Exit 1 when one fails.
 * Timing: Llama 2 70B's layout (64 query heads over 8 KV heads of 128) at TP 1, 2 and 4
 * (64 / 8, 32 / 4, 16 / 2), every batch x KV length whose copies' cache fits --max-gib;
 * caches rotate through sets spanning >= 512 MiB so each call reads HBM (not what the
 * previous call left in L2); the three kernels take turns (the order rotated every rep),
 * median over --reps reps after a warm-up. Printed per shape: us and GB/s of the UNIQUE
 * cache bytes (kvl heads: K and V, with the FP8 scales) of each kernel, aliased's % of
 * --peak-gbps, and aliased / copies, aliased / v3. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev_attn_opts.h"
#include "gpu_check.h"
#include "infer_decode.h"
#include "infer_ref.h"
#include "pqh.h"
#include "infer_decode_pqh.h"
#include "rt_ops_ref.h"

#define TOL 1e-2
#define ROTATE_BYTES ((double)(512u << 20))
#define D 128

typedef dev_attn_opts opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: dev_decode_attn_pqh [--check] [--peak-gbps X (3350)] [--reps N (20)]\n"
          "                           [--batches LIST (1,8,32,64,192)] [--kv LIST (512,2048,4096)]\n"
          "                           [--max-gib X (24)] [--help]\n"
          "Decode attention read per query head (dev/decode_attn_pqh): one block per query head on CUDA\n"
          "cores, run aliased (query head h reads KV head h / G) and on copies (each query head its own\n"
          "copy of its KV head: G x the bytes), beside the library's v3 (infer_decode_attention3, _fp8)\n"
          "over the aliased cache; BF16 and FP8 caches. --check: 9 shapes against a float64 reference,\n"
          "relative L2 error <= 1e-2, exit 1 on a failure. Otherwise timing: Llama 2 70B's layout at\n"
          "TP 1, 2, 4 (64/8, 32/4, 16/2 heads of 128) at each batch x KV length whose copies' cache fits\n"
          "--max-gib GiB; GB/s count the unique cache bytes (kvl heads) for every kernel.\n");
}

static int parse(int argc, char **argv, opts *o) {
  static const long long b0[] = {1, 8, 32, 64, 192}, k0[] = {512, 2048, 4096};
  memset(o, 0, sizeof *o);
  o->reps = 20, o->peak_gbps = 3350, o->max_gib = 24;
  o->nb = 5, o->nkv = 3;
  memcpy(o->batches, b0, sizeof b0), memcpy(o->kv, k0, sizeof k0);
  if (dev_attn_parse(argc, argv, "dev_decode_attn_pqh", usage, o)) return -1;
  for (int i = 0; i < o->nb; i++)
    if (o->batches[i] > 65535) return fprintf(stderr, "dev_decode_attn_pqh: --batches: %lld > 65535\n", o->batches[i]), -1;
  return 0;
}

/* ---- the kernels compared ---- */

enum { ALI, COP, V3, NK };
static const char *const names[NK] = {"aliased", "copies", "v3"};
static const char *const cols[NK] = {"ali", "cop", "v3"};

/* A cache: BF16 (k, v) or FP8 (k, v codes and ks, vs scales), of `heads` heads. */
typedef struct {
  char *k, *v;
  float *ks, *vs;
} cache_ptrs;

/* Runs kernel `which` of cache type fp8; c is the aliased cache (kvl heads) for ALI and V3,
 * the copies' cache (hl heads) for COP. */
static int run_kernel(int which, int fp8, const void *q, const cache_ptrs *c, void *out, void *part,
                      const infer_attn_dims *a, long long len, ts_err *e) {
  infer_kv8 c8 = {c->k, c->v, c->ks, c->vs};
  if (which == V3)
    return fp8 ? infer_decode_attention3_fp8(q, &c8, out, part, a, len, NULL, e)
               : infer_decode_attention3(q, c->k, c->v, out, part, a, len, NULL, e);
  infer_attn_dims x = *a;
  if (which == COP) x.kvl = a->hl; /* G = 1: head h reads its own copy */
  return fp8 ? infer_decode_pqh_fp8(q, &c8, out, part, &x, len, NULL, e)
             : infer_decode_pqh(q, c->k, c->v, out, part, &x, len, NULL, e);
}

/* ---- checks ---- */

/* dst (hl heads) = src (kvl heads) with KV head h / g copied to head h; rows of `bytes` bytes */
static void expand(const void *src, void *dst, size_t bytes, int batch, int hl, int kvl, long long max_seq) {
  const int g = hl / kvl;
  for (int b = 0; b < batch; b++)
    for (int h = 0; h < hl; h++)
      memcpy((char *)dst + ((size_t)b * hl + h) * (size_t)max_seq * bytes,
             (const char *)src + ((size_t)b * kvl + h / g) * (size_t)max_seq * bytes, (size_t)max_seq * bytes);
}

/* Host inputs of one check shape: the aliased caches (BF16 words, FP8 codes and scales) and
 * their copies, the values as floats for the references. */
typedef struct {
  float *q, *kf, *vf, *kd, *vd, *ks, *vs, *ksc, *vsc;
  uint16_t *qb, *kb, *vb, *kbc, *vbc, *ho;
  unsigned char *k8, *v8, *k8c, *v8c;
  float *ref16, *ref8;
} host_bufs;

static void free_host(host_bufs *h) {
  free(h->ref8), free(h->ref16), free(h->v8c), free(h->k8c), free(h->v8), free(h->k8), free(h->ho), free(h->vbc),
      free(h->kbc), free(h->vb), free(h->kb), free(h->qb), free(h->vsc), free(h->ksc), free(h->vs), free(h->ks),
      free(h->vd), free(h->kd), free(h->vf), free(h->kf), free(h->q);
  memset(h, 0, sizeof *h);
}

static int upload(cache_ptrs *d, int fp8, const void *k, const void *v, const float *ks, const float *vs, long long rows,
                  ts_err *e) {
  const size_t n = (size_t)rows * D * (fp8 ? 1 : 2);
  CUDA_CHECK(e, cudaMemcpy(d->k, k, n, cudaMemcpyHostToDevice));
  CUDA_CHECK(e, cudaMemcpy(d->v, v, n, cudaMemcpyHostToDevice));
  if (fp8) {
    CUDA_CHECK(e, cudaMemcpy(d->ks, ks, (size_t)rows * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(e, cudaMemcpy(d->vs, vs, (size_t)rows * 4, cudaMemcpyHostToDevice));
  }
  return 0;
}

/* One shape: fresh inputs; for BF16 and FP8, aliased and v3 on the aliased cache, copies on the
 * copies' cache, each on poisoned outputs and partials, against float64. */
static int check_shape(int batch, int hl, int kvl, long long len, uint64_t seed, int *passed, int *failed, ts_err *e) {
  const long long max_seq = len + 3, rows = (long long)batch * kvl * max_seq, rows_c = (long long)batch * hl * max_seq;
  const size_t nq = (size_t)batch * hl * D, nc = (size_t)rows * D, ncc = (size_t)rows_c * D;
  infer_attn_dims a = {.batch = batch, .hl = hl, .kvl = kvl, .head_dim = D, .max_seq = max_seq};
  size_t pb = infer_decode_pqh_partial_bytes(&a, len), pb3 = infer_decode3_partial_bytes(&a, len);
  if (pb3 > pb) pb = pb3;
  host_bufs h = {0};
  cache_ptrs d = {0};
  void *dq = NULL, *dout = NULL, *dpart = NULL;
  int rc = -1;
  h.q = malloc(nq * 4), h.qb = malloc(nq * 2), h.ho = malloc(nq * 2);
  h.kf = malloc(nc * 4), h.vf = malloc(nc * 4), h.kd = malloc(nc * 4), h.vd = malloc(nc * 4);
  h.kb = malloc(nc * 2), h.vb = malloc(nc * 2), h.kbc = malloc(ncc * 2), h.vbc = malloc(ncc * 2);
  h.k8 = malloc(nc), h.v8 = malloc(nc), h.k8c = malloc(ncc), h.v8c = malloc(ncc);
  h.ks = malloc((size_t)rows * 4), h.vs = malloc((size_t)rows * 4);
  h.ksc = malloc((size_t)rows_c * 4), h.vsc = malloc((size_t)rows_c * 4);
  h.ref16 = malloc(nq * sizeof(float)), h.ref8 = malloc(nq * sizeof(float));
  if (!h.q || !h.qb || !h.ho || !h.kf || !h.vf || !h.kd || !h.vd || !h.kb || !h.vb || !h.kbc || !h.vbc || !h.k8 ||
      !h.v8 || !h.k8c || !h.v8c || !h.ks || !h.vs || !h.ksc || !h.vsc || !h.ref16 || !h.ref8) {
    ts_fail_sys(e, "dev_decode_attn_pqh: out of host memory");
    goto out;
  }
  uint64_t s = seed;
  for (size_t i = 0; i < nq; i++) h.q[i] = dev_attn_rand_bf16(&s, 3.f), h.qb[i] = infer_ref_to_bf16(h.q[i]);
  for (long long r = 0; r < rows; r++) { /* row r scaled by 2^(r % 9 - 4) (K) and its inverse (V) */
    const float f = ldexpf(1.f, (int)(r % 9) - 4);
    float *kr = h.kf + r * D, *vr = h.vf + r * D;
    for (int i = 0; i < D; i++) kr[i] = dev_attn_rand_bf16(&s, f), h.kb[r * D + i] = infer_ref_to_bf16(kr[i]);
    for (int i = 0; i < D; i++) vr[i] = dev_attn_rand_bf16(&s, 1.f / f), h.vb[r * D + i] = infer_ref_to_bf16(vr[i]);
    infer_ref_kv8_quantize(kr, D, h.k8 + r * D, &h.ks[r]);
    infer_ref_kv8_quantize(vr, D, h.v8 + r * D, &h.vs[r]);
    infer_ref_kv8_dequantize(h.k8 + r * D, h.ks[r], D, h.kd + r * D);
    infer_ref_kv8_dequantize(h.v8 + r * D, h.vs[r], D, h.vd + r * D);
  }
  expand(h.kb, h.kbc, D * 2, batch, hl, kvl, max_seq), expand(h.vb, h.vbc, D * 2, batch, hl, kvl, max_seq);
  expand(h.k8, h.k8c, D, batch, hl, kvl, max_seq), expand(h.v8, h.v8c, D, batch, hl, kvl, max_seq);
  expand(h.ks, h.ksc, 4, batch, hl, kvl, max_seq), expand(h.vs, h.vsc, 4, batch, hl, kvl, max_seq);
  if (infer_ref_decode_attention(h.q, h.kf, h.vf, h.ref16, batch, hl, kvl, D, max_seq, len) ||
      infer_ref_decode_attention(h.q, h.kd, h.vd, h.ref8, batch, hl, kvl, D, max_seq, len)) {
    ts_fail_sys(e, "dev_decode_attn_pqh: out of host memory");
    goto out;
  }
  CUDA_CHECK_GOTO(e, cudaMalloc(&dq, nq * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&dout, nq * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&dpart, pb), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d.k, ncc * 2), out); /* room for the copies' BF16 cache */
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d.v, ncc * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d.ks, (size_t)rows_c * 4), out);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&d.vs, (size_t)rows_c * 4), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(dq, h.qb, nq * 2, cudaMemcpyHostToDevice), out);
  for (int fp8 = 0; fp8 < 2; fp8++)
    for (int which = 0; which < NK; which++) {
      const int k = which;
      if (k == COP ? upload(&d, fp8, fp8 ? (void *)h.k8c : (void *)h.kbc, fp8 ? (void *)h.v8c : (void *)h.vbc, h.ksc,
                            h.vsc, rows_c, e)
                   : upload(&d, fp8, fp8 ? (void *)h.k8 : (void *)h.kb, fp8 ? (void *)h.v8 : (void *)h.vb, h.ks, h.vs,
                            rows, e))
        goto out;
      CUDA_CHECK_GOTO(e, cudaMemset(dout, 0xff, nq * 2), out);
      CUDA_CHECK_GOTO(e, cudaMemset(dpart, 0xff, pb), out);
      if (run_kernel(k, fp8, dq, &d, dout, dpart, &a, len, e)) goto out;
      CUDA_CHECK_GOTO(e, cudaDeviceSynchronize(), out);
      CUDA_CHECK_GOTO(e, cudaMemcpy(h.ho, dout, nq * 2, cudaMemcpyDeviceToHost), out);
      const double err = dev_attn_rel_error(h.ho, fp8 ? h.ref8 : h.ref16, nq);
      const int ok = err >= 0 && err <= TOL;
      const long long slices = (long long)(infer_decode_pqh_partial_bytes(&a, len) / ((size_t)batch * hl * (D + 2) * sizeof(float)));
      *passed += ok, *failed += !ok;
      printf("check %-4s %-7s b=%-3d heads=%d/%d d=%d len=%-5lld slices=%-3lld rel. L2 %.3e (tol %.0e) %s\n",
             fp8 ? "fp8" : "bf16", names[k], batch, hl, kvl, D, len, slices, err, TOL,
             ok ? "ok" : "FAILED");
    }
  rc = 0;
out:
  cudaFree(d.vs), cudaFree(d.ks), cudaFree(d.v), cudaFree(d.k), cudaFree(dpart), cudaFree(dout), cudaFree(dq);
  free_host(&h);
  return rc;
}

static int run_checks(ts_err *e) {
  static const struct { int b, hl, kvl; long long len; } sh[] = {
      {1, 8, 1, 1},    {1, 16, 2, 33},   {2, 32, 4, 100},   {3, 64, 8, 1000}, {1, 64, 8, 4097},
      {8, 32, 4, 2049}, {5, 16, 2, 777}, {16, 64, 8, 513}, {1, 8, 2, 8191}};
  int passed = 0, failed = 0;
  uint64_t seed = 31000;
  for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++)
    if (check_shape(sh[i].b, sh[i].hl, sh[i].kvl, sh[i].len, seed += 101, &passed, &failed, e)) return -1;
  printf("checks: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

/* ---- timing ---- */

typedef struct {
  void *q, *out, *part;
  char *k, *v; /* pool_rows head vectors each: BF16, or E4M3 codes in the first half */
  float *ks, *vs;
  long long pool_rows;
} pool;

typedef struct {
  const pool *p;
  int fp8;
  infer_attn_dims a; /* the aliased cache: kvl heads */
  long long len, rows, rows_c;
  int sets, sets_c;
} shape;

static int launch(const shape *s, int which, long long iter, ts_err *e) {
  const long long off = which == COP ? (iter % s->sets_c) * s->rows_c : (iter % s->sets) * s->rows;
  const size_t eb = s->fp8 ? 1 : 2;
  cache_ptrs c = {s->p->k + off * D * eb, s->p->v + off * D * eb, s->p->ks + off, s->p->vs + off};
  return run_kernel(which, s->fp8, s->p->q, &c, s->p->out, s->p->part, &s->a, s->len, e);
}

static int launch_cb(const void *ctx, int which, long long iter, ts_err *e) {
  return launch((const shape *)ctx, which, iter, e);
}

/* bytes of K and V of one head vector (the FP8 scales included) */
static double row_bytes(int fp8) { return fp8 ? 2.0 * (D + 4) : 2.0 * D * 2; }

static const struct { const char *name; int hl, kvl; } models[] = {
    {"l2-70b-tp1", 64, 8}, {"l2-70b-tp2", 32, 4}, {"l2-70b-tp4", 16, 2}};
enum { NMODELS = 3 };

static int print_shape(const char *model, const shape *s, int reps, double peak, ts_err *e) {
  double us[NK];
  if (dev_attn_time(NK, launch_cb, s, reps, us, "dev_decode_attn_pqh", e)) return -1;
  const double bytes = s->rows * row_bytes(s->fp8);
  printf("%-4s %-10s %5d %5lld %2d %9.1f %6d %6d", s->fp8 ? "fp8" : "bf16", model, s->a.batch, s->len,
         s->a.hl / s->a.kvl, bytes / 1048576.0, s->sets, s->sets_c);
  for (int k = 0; k < NK; k++) printf(" %10.2f %8.0f", us[k], bytes / us[k] * 1e-3);
  printf(" %6.1f %8.3f %8.3f\n", 100 * bytes / us[ALI] * 1e-3 / peak, us[ALI] / us[COP], us[ALI] / us[V3]);
  fflush(stdout);
  return 0;
}

static int run_timing(const opts *o, ts_err *e) {
  const double limit = o->max_gib * 1073741824.0;
  long long max_rows = 0, max_b = 1;
  size_t pb = 0;
  for (int m = 0; m < NMODELS; m++)
    for (int i = 0; i < o->nb; i++)
      for (int k = 0; k < o->nkv; k++) {
        const long long rows_c = o->batches[i] * models[m].hl * o->kv[k];
        if (rows_c * row_bytes(0) > limit && rows_c * row_bytes(1) > limit) continue;
        if (rows_c > max_rows) max_rows = rows_c;
        if (o->batches[i] > max_b) max_b = o->batches[i];
        infer_attn_dims x = {.batch = (int)o->batches[i], .hl = models[m].hl, .kvl = models[m].kvl, .head_dim = D,
                             .max_seq = o->kv[k]};
        size_t a = infer_decode_pqh_partial_bytes(&x, o->kv[k]), b = infer_decode3_partial_bytes(&x, o->kv[k]);
        pb = a > pb ? a : pb, pb = b > pb ? b : pb;
      }
  const long long rot_rows = (long long)ceil(ROTATE_BYTES / row_bytes(1)); /* >= 512 MiB for FP8 and BF16 */
  pool p = {0};
  p.pool_rows = max_rows > rot_rows ? max_rows : rot_rows;
  int rc = -1;
  const size_t nq = (size_t)max_b * 64 * D, cb = (size_t)p.pool_rows * D * 2;
  CUDA_CHECK_GOTO(e, cudaMalloc(&p.q, nq * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&p.out, nq * 2), out);
  CUDA_CHECK_GOTO(e, cudaMalloc(&p.part, pb ? pb : 4), out);
  CUDA_CHECK_GOTO(e, cudaMemset(p.q, 0x3c, nq * 2), out); /* BF16 0x3c3c: about 0.0115 */
  if (cudaMalloc((void **)&p.k, cb) != cudaSuccess || cudaMalloc((void **)&p.v, cb) != cudaSuccess ||
      cudaMalloc((void **)&p.ks, (size_t)p.pool_rows * 4) != cudaSuccess ||
      cudaMalloc((void **)&p.vs, (size_t)p.pool_rows * 4) != cudaSuccess) {
    ts_fail_sys(e, "dev_decode_attn_pqh: cudaMalloc of %.1f GiB of cache failed (--max-gib)",
                (2.0 * cb + 8.0 * p.pool_rows) / 1073741824.0);
    goto out;
  }
  printf("# ali = infer_decode_pqh(_fp8) aliased (query head h reads KV head h / G), cop = the same kernel on\n"
         "# copies (hl heads, head h its own copy: G x the bytes), v3 = infer_decode_attention3(_fp8) on\n"
         "# the aliased cache; head_dim 128; GB/s: the UNIQUE cache bytes (kvl heads, K and V, FP8 scales\n"
         "# included) over each kernel's time; ali_%% of --peak-gbps %.0f; median of %d alternating reps;\n"
         "# sets: cache sets rotated (aliased, copies), >= 512 MiB in all or one larger set; pool %.1f GiB\n",
         o->peak_gbps, o->reps, 2.0 * cb / 1073741824.0);
  printf("%-4s %-10s %5s %5s %2s %9s %6s %6s", "type", "model", "batch", "kv", "G", "uniq_MiB", "sets", "sets_c");
  for (int k = 0; k < NK; k++) {
    char h[2][16];
    snprintf(h[0], sizeof h[0], "%s_us", cols[k]), snprintf(h[1], sizeof h[1], "%s_GB/s", cols[k]);
    printf(" %10s %8s", h[0], h[1]);
  }
  printf(" %6s %8s %8s\n", "ali_%", "ali/cop", "ali/v3");
  for (int fp8 = 0; fp8 < 2; fp8++) {
    if (dev_pqh_fill(p.k, cb, fp8, p.ks, p.pool_rows, NULL, e) || dev_pqh_fill(p.v, cb, fp8, p.vs, p.pool_rows, NULL, e))
      goto out;
    CUDA_CHECK_GOTO(e, cudaDeviceSynchronize(), out);
    for (int m = 0; m < NMODELS; m++)
      for (int i = 0; i < o->nb; i++)
        for (int k = 0; k < o->nkv; k++) {
          shape s = {&p, fp8,
                     {.batch = (int)o->batches[i], .hl = models[m].hl, .kvl = models[m].kvl, .head_dim = D,
                      .max_seq = o->kv[k]},
                     o->kv[k], o->batches[i] * models[m].kvl * o->kv[k], o->batches[i] * models[m].hl * o->kv[k], 1, 1};
          if (s.rows_c * row_bytes(fp8) > limit) {
            printf("%-4s %-10s %5d %5lld skipped: copies' cache %.1f GiB > --max-gib %.0f\n", fp8 ? "fp8" : "bf16",
                   models[m].name, s.a.batch, s.len, s.rows_c * row_bytes(fp8) / 1073741824.0, o->max_gib);
            continue;
          }
          s.sets = (int)(p.pool_rows / s.rows), s.sets_c = (int)(p.pool_rows / s.rows_c);
          if (print_shape(models[m].name, &s, o->reps, o->peak_gbps, e)) goto out;
        }
  }
  rc = 0;
out:
  cudaFree(p.vs), cudaFree(p.ks), cudaFree(p.v), cudaFree(p.k), cudaFree(p.part), cudaFree(p.out), cudaFree(p.q);
  return rc;
}

int main(int argc, char **argv) {
  opts o;
  ts_err e = {0};
  if (parse(argc, argv, &o)) return 2;
  if (dev_attn_device("dev_decode_attn_pqh")) return 2;
  int rc = o.check ? run_checks(&e) : run_timing(&o, &e);
  if (rc < 0) {
    fprintf(stderr, "dev_decode_attn_pqh: %s\n", e.msg);
    return ts_exit_status(&e) ? ts_exit_status(&e) : 1;
  }
  return rc;
}

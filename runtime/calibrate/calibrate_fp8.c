/* calibrate_fp8.c — the FP8 GEMM (runtime/ops/exec_gemm_fp8.h) in `tacorun calibrate`: its check against
 * the plain-C reference (calibrate_fp8.h) and the "gemm_fp8" table.
 *
 * The table is timed as the BF16 one (calibrate_compute.c, calibration/README.md): operands rotate
 * through copies spanning >= 256 MiB (more than 4x the L2), the largest GEMM runs 3 s first so the clocks
 * have settled, the algorithm is chosen once per key, and --gemm-passes interleaved passes over all keys,
 * alternating direction, each pass the median of its timed batches, the table holding their geometric
 * mean. Each key is run as Transformer Engine's default recipes run it: fast accumulation for a key that
 * only forward GEMMs use, partial sums promoted to FP32 (split accumulator) for one a data- or
 * weight-gradient GEMM uses (exec_gemm_fp8_shape.fast_accum). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "calibrate_fp8.h"
#include "calibrate_progress.h"
#include "exec_gemm_fp8.h"
#include "rt_ops_check.h"

/* ---- the check: fresh random E4M3 inputs per shape, D poisoned with NaN, both accumulations ---- */

/* The check's dequantization scales: not powers of two, and each far enough from 1 that leaving one out
 * is an error of order 1 (calibrate_fp8.h). */
#define CHECK_A_SCALE 0.0037f
#define CHECK_B_SCALE 1.9f

typedef struct {
  long long m, n, k;
} fp8_check_shape;

static int check_shape(exec_gemm_fp8 *g, const fp8_check_shape *s, uint64_t *rng, FILE *log, ts_err *e) {
  const size_t na = (size_t)(s->m * s->k), nb = (size_t)(s->n * s->k), nd = (size_t)(s->m * s->n);
  const float scales[2] = {CHECK_A_SCALE, CHECK_B_SCALE};
  uint8_t *A = malloc(na), *B = malloc(nb);
  uint16_t *D = malloc(nd * sizeof *D);
  double *ref = malloc(nd * sizeof *ref);
  void *dA = NULL, *dB = NULL, *dD = NULL;
  float *dS = NULL;
  int rc = -1;
  if (!A || !B || !D || !ref) {
    ts_fail_sys(e, "FP8 GEMM check: out of memory");
    goto fail;
  }
  /* A over E4M3's whole range, B small enough that its subnormals (below 2^-6) are drawn too */
  calib_fp8_random_e4m3(A, na, 448.f, rng);
  calib_fp8_random_e4m3(B, nb, 3.f, rng);
  calib_fp8_gemm_ref(A, scales[0], B, scales[1], s->m, s->n, s->k, ref);
  CUDA_CHECK_GOTO(e, cudaMalloc(&dA, na), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&dB, nb), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&dD, nd * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&dS, 2 * EXEC_GEMM_FP8_SCALE_STRIDE * sizeof(float)), fail);
  CUDA_CHECK_GOTO(e, cudaMemcpy(dA, A, na, cudaMemcpyHostToDevice), fail);
  CUDA_CHECK_GOTO(e, cudaMemcpy(dB, B, nb, cudaMemcpyHostToDevice), fail);
  CUDA_CHECK_GOTO(e, cudaMemcpy(dS, &scales[0], sizeof(float), cudaMemcpyHostToDevice), fail);
  CUDA_CHECK_GOTO(e, cudaMemcpy(dS + EXEC_GEMM_FP8_SCALE_STRIDE, &scales[1], sizeof(float), cudaMemcpyHostToDevice), fail);
  for (int fast = 0; fast < 2; fast++) {
    const exec_gemm_fp8_shape run = {.m = s->m, .n = s->n, .k = s->k, .fast_accum = fast};
    CUDA_CHECK_GOTO(e, cudaMemset(dD, 0xFF, nd * 2), fail); /* BF16 0xFFFF: NaN */
    if (exec_gemm_fp8_run(g, &run, dA, dS, dB, dS + EXEC_GEMM_FP8_SCALE_STRIDE, dD, NULL, e)) goto fail;
    CUDA_CHECK_GOTO(e, cudaDeviceSynchronize(), fail);
    CUDA_CHECK_GOTO(e, cudaMemcpy(D, dD, nd * 2, cudaMemcpyDeviceToHost), fail);
    long long bad;
    const double err = calib_fp8_rel_l2(D, ref, (long long)nd, &bad);
    const char *acc = fast ? "fast accumulation" : "split accumulation";
    const double tol = fast ? CALIB_FP8_REL_L2_TOL_FAST : CALIB_FP8_REL_L2_TOL_SPLIT;
    if (bad >= 0) {
      ts_fail_sys(e, "FP8 GEMM check: m=%lld n=%lld k=%lld, %s: element %lld (row %lld, column %lld) not written "
                  "or not finite", s->m, s->n, s->k, acc, bad, bad / s->n, bad % s->n);
      goto fail;
    }
    if (!(err <= tol)) {
      ts_fail_sys(e, "FP8 GEMM check: m=%lld n=%lld k=%lld, %s: relative L2 error %.3g against the reference "
                  "(tolerance %g)", s->m, s->n, s->k, acc, err, tol);
      goto fail;
    }
    if (log)
      fprintf(log, "  FP8 GEMM m=%-4lld n=%-5lld k=%-5lld %s: ok, relative L2 error %.2e (tolerance %g)\n", s->m,
              s->n, s->k, acc, err, tol);
  }
  rc = 0;
fail:
  cudaFree(dS), cudaFree(dD), cudaFree(dB), cudaFree(dA);
  free(ref), free(D), free(B), free(A);
  return rc;
}

int calib_gemm_fp8_check(FILE *log, ts_err *e) {
  /* odd m (cuBLASLt's FP8 kernels leave m free), n and k multiples of 16 that are no powers of two, and
   * long k where fast accumulation's unpromoted partial sums drift most */
  static const fp8_check_shape shapes[] = {
      {3, 16, 32}, {37, 48, 80}, {129, 208, 1040}, {257, 512, 4096}, {509, 1024, 2064}, {64, 96, 8192},
  };
  exec_gemm_fp8 *g = NULL;
  if (exec_gemm_fp8_create(&g, e)) return -1;
  uint64_t rng = 0x5eed0f8e4a3ULL;
  int rc = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes && !rc; i++) rc = check_shape(g, &shapes[i], &rng, log, e);
  exec_gemm_fp8_destroy(g);
  return rc;
}

/* ---- the table ---- */

#define FP8_ROTATE_BYTES ((size_t)256 << 20) /* as the BF16 GEMMs' (calibrate_compute.c) */
#define FP8_MAX_SETS 32
#define ALIGN256(x) (((x) + (size_t)255) & ~(size_t)255)
#define FILL_CHUNK ((size_t)16 << 20) /* random codes made on the host, copied over the input pool */

typedef struct {
  exec_gemm_fp8 *h;
  exec_gemm_fp8_shape run;
  char *in, *out; /* pools the sets rotate through */
  float *scales;  /* two dequantization scales on the device, EXEC_GEMM_FP8_SCALE_STRIDE floats apart */
  size_t a_bytes, in_stride, out_stride;
  int sets;
} fp8_ctx;

typedef struct {
  size_t a, b, d; /* aligned operand bytes */
  int sets;
} fp8_footprint;

static fp8_footprint footprint(const calib_gemm_fp8_shape *s) {
  fp8_footprint f;
  f.a = ALIGN256((size_t)(s->m * s->k));
  f.b = ALIGN256((size_t)(s->n * s->k));
  f.d = ALIGN256((size_t)(s->m * s->n) * 2);
  size_t all = f.a + f.b + f.d, sets = (FP8_ROTATE_BYTES + all - 1) / all;
  f.sets = sets < 1 ? 1 : (sets > FP8_MAX_SETS ? FP8_MAX_SETS : (int)sets);
  return f;
}

/* Transformer Engine's accumulation for the key: fast only where every use is a forward GEMM. */
static int fast_accum(const calib_gemm_fp8_shape *s) { return s->roles == 1u << CALIB_GEMM_FWD; }

static void select_key(fp8_ctx *c, const calib_gemm_fp8_shape *s) {
  fp8_footprint f = footprint(s);
  c->run = (exec_gemm_fp8_shape){.m = s->m, .n = s->n, .k = s->k, .fast_accum = fast_accum(s)};
  c->a_bytes = f.a, c->in_stride = f.a + f.b, c->out_stride = f.d, c->sets = f.sets;
}

static int fp8_launch(void *p, long long iter, ts_err *e) {
  fp8_ctx *c = p;
  int s = (int)(iter % c->sets);
  const char *a = c->in + (size_t)s * c->in_stride;
  return exec_gemm_fp8_run(c->h, &c->run, a, c->scales, a + c->a_bytes, c->scales + EXEC_GEMM_FP8_SCALE_STRIDE,
                           c->out + (size_t)s * c->out_stride, NULL, e);
}

/* The pools: inputs of random E4M3 codes over the whole range (per-tensor scaling maps a tensor's amax
 * to 448), outputs zeroed, scales 1 / 448 each. */
static int alloc_pools(fp8_ctx *c, size_t in_pool, size_t out_pool, ts_err *e) {
  const float scales[2] = {1.f / 448.f, 1.f / 448.f};
  const size_t chunk = in_pool < FILL_CHUNK ? in_pool : FILL_CHUNK;
  uint8_t *codes = malloc(chunk);
  if (!codes) return ts_fail_sys(e, "calibrate: out of memory");
  uint64_t rng = 0xf8f8f8f8ULL;
  calib_fp8_random_e4m3(codes, chunk, 448.f, &rng);
  int rc = -1;
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&c->in, in_pool), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&c->out, out_pool), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&c->scales, 2 * EXEC_GEMM_FP8_SCALE_STRIDE * sizeof(float)), fail);
  for (size_t off = 0; off < in_pool; off += chunk)
    CUDA_CHECK_GOTO(e, cudaMemcpy(c->in + off, codes, in_pool - off < chunk ? in_pool - off : chunk,
                                  cudaMemcpyHostToDevice), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(c->out, 0, out_pool), fail);
  CUDA_CHECK_GOTO(e, cudaMemcpy(c->scales, &scales[0], sizeof(float), cudaMemcpyHostToDevice), fail);
  CUDA_CHECK_GOTO(e, cudaMemcpy(c->scales + EXEC_GEMM_FP8_SCALE_STRIDE, &scales[1], sizeof(float),
                                cudaMemcpyHostToDevice), fail);
  rc = 0;
fail:
  free(codes);
  return rc;
}

/* Runs the largest key for `seconds` so the clocks settle before timing. */
static int warm_clocks(fp8_ctx *c, const calib_shapes *sh, double seconds, ts_err *e) {
  int big = 0;
  for (int i = 1; i < sh->n_gemm_fp8; i++)
    if ((double)sh->gemm_fp8[i].m * sh->gemm_fp8[i].n * sh->gemm_fp8[i].k >
        (double)sh->gemm_fp8[big].m * sh->gemm_fp8[big].n * sh->gemm_fp8[big].k)
      big = i;
  select_key(c, &sh->gemm_fp8[big]);
  double t0 = calib_elapsed_s();
  long long it = 0;
  while (calib_elapsed_s() - t0 < seconds) {
    for (int k = 0; k < 8; k++) RT_TRY(fp8_launch(c, it++, e));
    RT_CHECK_CUDA(e, cudaDeviceSynchronize());
  }
  fprintf(stderr, "[%6.1fs] gemm_fp8: %lld launches of m=%lld n=%lld k=%lld to settle the clocks\n", calib_elapsed_s(),
          it, sh->gemm_fp8[big].m, sh->gemm_fp8[big].n, sh->gemm_fp8[big].k);
  return 0;
}

static void roles_name(unsigned roles, char out[4]) {
  out[0] = roles & 1u << CALIB_GEMM_FWD ? 'f' : '-';
  out[1] = roles & 1u << CALIB_GEMM_DGRAD ? 'd' : '-';
  out[2] = roles & 1u << CALIB_GEMM_WGRAD ? 'w' : '-';
  out[3] = '\0';
}

static int write_tsv(const char *path, const calib_shapes *sh, const double *t, int passes, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot write", path);
  fprintf(f, "m\tn\tk\troles\tfast_accum");
  for (int p = 0; p < passes; p++) fprintf(f, "\tpass%d_us", p + 1);
  fprintf(f, "\n");
  for (int i = 0; i < sh->n_gemm_fp8; i++) {
    const calib_gemm_fp8_shape *s = &sh->gemm_fp8[i];
    char roles[4];
    roles_name(s->roles, roles);
    fprintf(f, "%lld\t%lld\t%lld\t%s\t%d", s->m, s->n, s->k, roles, fast_accum(s));
    for (int p = 0; p < passes; p++) fprintf(f, "\t%.3f", t[(size_t)i * passes + p]);
    fprintf(f, "\n");
  }
  return fclose(f) == 0 ? 0 : ts_fail_sys(e, "%s: write failed", path);
}

/* One line of the achieved 2mnk / time over the keys kept (those of >= min_us only, when given). */
static void report_speed(const calib_shapes *sh, const double *us, double min_us, const char *what) {
  double *v = malloc((size_t)(sh->n_gemm_fp8 > 0 ? sh->n_gemm_fp8 : 1) * sizeof *v);
  if (!v) return;
  int n = 0;
  for (int i = 0; i < sh->n_gemm_fp8; i++)
    if (us[i] > 0 && us[i] >= min_us)
      v[n++] = 2.0 * sh->gemm_fp8[i].m * sh->gemm_fp8[i].n * sh->gemm_fp8[i].k / us[i] * 1e-6;
  if (n) {
    double med = calib_median(v, n); /* sorts v */
    fprintf(stderr, "[%6.1fs] gemm_fp8: %s: %d keys, %.0f .. %.0f TFLOP/s, median %.0f\n", calib_elapsed_s(), what,
            n, v[0], v[n - 1], med);
  }
  free(v);
}

int calib_run_gemm_fp8(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e) {
  if (sh->n_gemm_fp8 == 0) return 0;
  size_t in_pool = 0, out_pool = 0;
  for (int i = 0; i < sh->n_gemm_fp8; i++) {
    fp8_footprint f = footprint(&sh->gemm_fp8[i]);
    if ((size_t)f.sets * (f.a + f.b) > in_pool) in_pool = (size_t)f.sets * (f.a + f.b);
    if ((size_t)f.sets * f.d > out_pool) out_pool = (size_t)f.sets * f.d;
  }
  int passes = cfg->gemm_passes > 0 ? cfg->gemm_passes : 1;
  if (passes > CALIB_MAX_GEMM_PASSES) passes = CALIB_MAX_GEMM_PASSES;
  calib_budget b = cfg->budget;
  if (passes > 1) b.warmup = 1, b.reps = 2; /* as the BF16 GEMMs: the passes make up the samples */
  RT_CHECK_CUDA(e, cudaSetDevice(cfg->devices[0]));
  fp8_ctx g = {0};
  int rc = -1, skipped = 0;
  double *t = calloc((size_t)sh->n_gemm_fp8 * passes, sizeof *t); /* 0: not measured */
  double *us = calloc((size_t)sh->n_gemm_fp8, sizeof *us);
  double pass_seconds[CALIB_MAX_GEMM_PASSES] = {0};
  if (!t || !us) {
    ts_fail_sys(e, "calibrate: out of memory");
    goto out;
  }
  if (exec_gemm_fp8_create(&g.h, e) || alloc_pools(&g, in_pool, out_pool, e)) goto out;
  if (warm_clocks(&g, sh, cfg->quick ? 0.5 : 3.0, e)) goto out;
  void *streams[1] = {NULL};
  calib_progress pr;
  calib_progress_begin(&pr, "gemm_fp8", sh->n_gemm_fp8 * passes);
  for (int p = 0; p < passes; p++) {
    double pass_t0 = calib_elapsed_s();
    if (p == 1) b.warmup = 0;
    for (int j = 0; j < sh->n_gemm_fp8; j++) {
      int i = calib_gemm_pass_shape(p, j, sh->n_gemm_fp8);
      const calib_gemm_fp8_shape *s = &sh->gemm_fp8[i];
      if (p > 0 && t[(size_t)i * passes] == 0) { /* skipped in the first pass */
        calib_progress_step(&pr, "skipped");
        continue;
      }
      select_key(&g, s);
      double x;
      if (calib_time_us(fp8_launch, &g, streams, cfg->devices, 1, &b, &x, e)) {
        /* a key cuBLASLt cannot run in FP8 is skipped (the simulator falls back to the BF16 time moved
         * to the FP8 peak, and says so); a broken device is not */
        if (cudaDeviceSynchronize() != cudaSuccess) goto out;
        fprintf(stderr, "\ncalibrate: warning: FP8 GEMM m=%lld n=%lld k=%lld skipped: %s\n", s->m, s->n, s->k, e->msg);
        calib_progress_step(&pr, "skipped");
        continue;
      }
      t[(size_t)i * passes + p] = x;
      calib_progress_step(&pr, "pass %d m=%lld n=%lld k=%lld %.1f us %.0f TFLOP/s", p + 1, s->m, s->n, s->k, x,
                          2.0 * s->m * s->n * s->k / x * 1e-6);
    }
    pass_seconds[p] = calib_elapsed_s() - pass_t0;
  }
  calib_progress_end(&pr);
  for (int p = 0; p < passes; p++)
    fprintf(stderr, "[%6.1fs] gemm_fp8: pass %d (%s) took %.1f s\n", calib_elapsed_s(), p + 1,
            p % 2 ? "reverse" : "forward", pass_seconds[p]);
  int fast = 0;
  for (int i = 0; i < sh->n_gemm_fp8; i++) {
    us[i] = calib_gemm_combine_passes(t + (size_t)i * passes, passes);
    fast += fast_accum(&sh->gemm_fp8[i]);
    skipped += us[i] <= 0;
    if (us[i] > 0 && schema_calibration_add_gemm_fp8(c, sh->gemm_fp8[i].m, sh->gemm_fp8[i].n, sh->gemm_fp8[i].k, us[i])) {
      ts_fail_sys(e, "calibrate: out of memory");
      goto out;
    }
  }
  fprintf(stderr, "[%6.1fs] gemm_fp8: %d keys timed, %d skipped; %d with fast accumulation (forward only), %d split\n",
          calib_elapsed_s(), sh->n_gemm_fp8 - skipped, skipped, fast, sh->n_gemm_fp8 - fast);
  report_speed(sh, us, 0, "achieved 2mnk/time, all keys");
  report_speed(sh, us, 1000, "keys of >= 1 ms");
  if (passes > 1) {
    int n_all, n_big;
    double all = calib_gemm_pass_difference(t, sh->n_gemm_fp8, passes, 0, &n_all),
           big = calib_gemm_pass_difference(t, sh->n_gemm_fp8, passes, 1000, &n_big);
    fprintf(stderr, "[%6.1fs] gemm_fp8: passes 1 and 2 differ by %.2f%% (median over %d keys), %.2f%% over the %d of >= 1 ms\n",
            calib_elapsed_s(), 100 * all, n_all, 100 * big, n_big);
  }
  if (cfg->gemm_fp8_tsv && write_tsv(cfg->gemm_fp8_tsv, sh, t, passes, e)) goto out;
  rc = 0;
out:
  free(us), free(t);
  cudaFree(g.scales), cudaFree(g.out), cudaFree(g.in);
  exec_gemm_fp8_destroy(g.h);
  return rc;
}

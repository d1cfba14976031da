/* main.c — dev_decode_addnorm: the fused residual add + RMSNorm (add_rmsnorm.h)
 * checked against rt_add + rt_rmsnorm_fwd (bit for bit) and its plain-C
 * reference, and timed beside those two kernels at the decode step's rows.
 *
 *   dev_decode_addnorm [--cols N (4096)] [--rows LIST (1,16,64)] [--check]
 *
 * Checks: fresh random x, p, gamma per case, outputs poisoned (NaN bytes);
 * tolerance 0 differing BF16 values of x and y against rt_add then
 * rt_rmsnorm_fwd, relative L2 <= 1e-2 of y against the float64 reference.
 * Timing: median of calib_time_us over back-to-back launches (the rows stay in
 * L2, as in the decode step). Exit 1 when a check fails. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "add_rmsnorm.h"
#include "calibrate_time.h"
#include "gpu_check.h"
#include "infer_ref.h"
#include "rt_ops.h"
#include "ts_args.h"

#define TOL 1e-2
#define EPS 1e-5f

typedef struct {
  void *x, *x2, *p, *g, *y, *y2;
  float *rs, *rs2;
  long long rows;
  int cols;
} bufs;

static void bufs_free(bufs *b) {
  cudaFree(b->rs2), cudaFree(b->rs), cudaFree(b->g), cudaFree(b->y2), cudaFree(b->y), cudaFree(b->p),
      cudaFree(b->x2), cudaFree(b->x);
  memset(b, 0, sizeof *b);
}

static int bufs_alloc(bufs *b, long long rows, int cols, unsigned long long seed, ts_err *e) {
  const size_t n = (size_t)rows * cols;
  memset(b, 0, sizeof *b);
  b->rows = rows, b->cols = cols;
  CUDA_CHECK_GOTO(e, cudaMalloc(&b->x, n * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&b->x2, n * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&b->p, n * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&b->y, n * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&b->y2, n * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&b->g, (size_t)cols * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&b->rs, (size_t)rows * 4), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&b->rs2, (size_t)rows * 4), fail);
  if (rt_fill_random_bf16(b->x, (long long)n, seed, 2.0f, NULL, e) ||
      rt_fill_random_bf16(b->p, (long long)n, seed + 1, 1.0f, NULL, e) ||
      rt_fill_random_bf16(b->g, cols, seed + 2, 1.0f, NULL, e))
    goto fail;
  CUDA_CHECK_GOTO(e, cudaMemcpy(b->x2, b->x, n * 2, cudaMemcpyDeviceToDevice), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(b->y, 0xff, n * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(b->y2, 0xff, n * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(b->rs, 0xff, (size_t)rows * 4), fail);
  return 0;
fail:
  bufs_free(b);
  return -1;
}

static int to_floats(const void *d, size_t n, float *h, uint16_t *tmp, ts_err *e) {
  CUDA_CHECK(e, cudaMemcpy(tmp, d, n * 2, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++) h[i] = infer_ref_from_bf16(tmp[i]);
  return 0;
}

static int check_case(long long rows, int cols, unsigned long long seed, int *bad_cases, ts_err *e) {
  const size_t n = (size_t)rows * cols;
  bufs b;
  float *hx = malloc(n * 4), *hp = malloc(n * 4), *hg = malloc((size_t)cols * 4), *hy = malloc(n * 4),
        *hr = malloc(n * 4);
  uint16_t *b1 = malloc(n * 2), *b2 = malloc(n * 2);
  int rc = -1;
  if (!hx || !hp || !hg || !hy || !hr || !b1 || !b2) {
    ts_fail_sys(e, "out of host memory");
    goto out_host;
  }
  if (bufs_alloc(&b, rows, cols, seed, e)) goto out_host;
  if (to_floats(b.x, n, hx, b1, e) || to_floats(b.p, n, hp, b1, e) || to_floats(b.g, (size_t)cols, hg, b1, e) ||
      dev_add_rmsnorm(b.x, b.p, b.g, b.y, b.rs, rows, cols, EPS, NULL, e) ||
      rt_add(b.x2, b.p, b.x2, (long long)n, NULL, e) ||
      rt_rmsnorm_fwd(b.x2, b.g, b.y2, b.rs2, rows, cols, EPS, NULL, e))
    goto out;
  CUDA_CHECK_GOTO(e, cudaDeviceSynchronize(), out);
  long long differ = 0;
  CUDA_CHECK_GOTO(e, cudaMemcpy(b1, b.x, n * 2, cudaMemcpyDeviceToHost), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(b2, b.x2, n * 2, cudaMemcpyDeviceToHost), out);
  for (size_t i = 0; i < n; i++) differ += b1[i] != b2[i];
  CUDA_CHECK_GOTO(e, cudaMemcpy(b1, b.y, n * 2, cudaMemcpyDeviceToHost), out);
  CUDA_CHECK_GOTO(e, cudaMemcpy(b2, b.y2, n * 2, cudaMemcpyDeviceToHost), out);
  for (size_t i = 0; i < n; i++) differ += b1[i] != b2[i];
  if (to_floats(b.y, n, hy, b1, e)) goto out;
  dev_ref_add_rmsnorm(hx, hp, hg, hr, rows, cols, EPS);
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)hy[i] - hr[i]) * ((double)hy[i] - hr[i]);
    den += (double)hr[i] * hr[i];
  }
  const double err = isfinite(num) ? sqrt(num / (den > 0 ? den : 1)) : INFINITY;
  const int ok = differ == 0 && err <= TOL;
  *bad_cases += !ok;
  printf("check %lld x %d: x, y vs rt_add + rt_rmsnorm_fwd: %lld of %zu differ (tolerance 0); y vs C: rel L2 %.2e "
         "(tolerance %.0e) %s\n", rows, cols, differ, 2 * n, err, TOL, ok ? "ok" : "FAILED");
  rc = 0;
out:
  bufs_free(&b);
out_host:
  free(hx), free(hp), free(hg), free(hy), free(hr), free(b1), free(b2);
  return rc;
}

static int launch_fused(void *ctx, long long iter, ts_err *e) {
  (void)iter;
  bufs *b = ctx;
  return dev_add_rmsnorm(b->x, b->p, b->g, b->y, b->rs, b->rows, b->cols, EPS, NULL, e);
}
static int launch_separate(void *ctx, long long iter, ts_err *e) {
  (void)iter;
  bufs *b = ctx;
  return rt_add(b->x2, b->p, b->x2, b->rows * b->cols, NULL, e) ||
         rt_rmsnorm_fwd(b->x2, b->g, b->y2, b->rs2, b->rows, b->cols, EPS, NULL, e);
}

int main(int argc, char **argv) {
  int cols = 4096, check_only = 0;
  const char *rows_s = "1,16,64";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--check")) check_only = 1;
    else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows_s = argv[++i];
    else {
      fprintf(stderr, "usage: dev_decode_addnorm [--cols N (4096)] [--rows LIST (1,16,64)] [--check]\n");
      return !strcmp(argv[i], "--help") ? 0 : 2;
    }
  }
  long long rows[16];
  const int nr = ts_arg_ll_list(rows_s, 1, 1 << 20, rows, 16);
  if (nr < 1 || !dev_add_rmsnorm_fits(cols)) {
    fprintf(stderr, "dev_decode_addnorm: --rows: integers in [1, 2^20]; --cols: a multiple of 8, at most 4096\n");
    return 2;
  }
  ts_err e = {{0}, 0};
  int bad = 0;
  static const struct { long long r; int c; } cases[] = {{1, 4096}, {64, 4096}, {3, 3584}, {5, 200}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    if (check_case(cases[i].r, cases[i].c, 31 + 7 * i, &bad, &e)) goto fail;
  printf("checks: %d failed\n", bad);
  if (check_only) return bad ? 1 : 0;
  calib_budget bud = calib_budget_default(0);
  void *streams[1] = {NULL};
  int dev[1] = {0};
  CUDA_CHECK_GOTO(&e, cudaGetDevice(&dev[0]), fail);
  for (int i = 0; i < nr; i++) {
    bufs b;
    double us_f = 0, us_s = 0;
    if (bufs_alloc(&b, rows[i], cols, 91 + i, &e)) goto fail;
    int rc = calib_time_us(launch_fused, &b, streams, dev, 1, &bud, &us_f, &e) ||
             calib_time_us(launch_separate, &b, streams, dev, 1, &bud, &us_s, &e);
    bufs_free(&b);
    if (rc) goto fail;
    printf("rows %lld x %d: fused %.2f us, rt_add + rt_rmsnorm_fwd %.2f us (fused/separate %.3f)\n", rows[i], cols,
           us_f, us_s, us_f / us_s);
  }
  return bad ? 1 : 0;
fail:
  fprintf(stderr, "dev_decode_addnorm: %s\n", e.msg);
  return 1;
}

/* main.c — dev_decode_gemv: the weight-streaming GEMV (gemv.h) checked
 * against its plain-C reference and timed beside cuBLASLt (the runtime's
 * exec_gemm) at a zoo model's decode projections.
 *
 *   dev_decode_gemv [--model NAME (llama3-8b)] [--batches LIST (1,2,4,8)] [--check]
 *
 * Checks: fresh random inputs per case, the output poisoned with NaN before
 * each call (two calls: the first must leave the NN workspace cleared),
 * tolerance relative L2 error <= 1e-2 against float64 sums, every output
 * finite. Timing: weights rotate through copies spanning >= 512 MiB so each
 * call reads HBM, not L2; printed: us per call for both, and their ratio.
 * Exit 1 when a check fails. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate_time.h"
#include "dev_proj_opts.h"
#include "exec_gemm.h"
#include "gemv.h"
#include "gpu_check.h"
#include "model.h"
#include "rt_ops.h"
#include "rt_ops_ref.h"

#define TOL 1e-2
#define ROTATE_BYTES ((size_t)512 << 20)

/* Relative L2 error of a BF16 result against the float64 reference; -1 when an output is not finite. */
static double l2_error(const unsigned short *y, const double *ref, size_t n) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < n; i++) {
    const double v = rt_ref_bf16_to_float(y[i]);
    if (!isfinite(v)) return -1;
    diff += (v - ref[i]) * (v - ref[i]), norm += ref[i] * ref[i];
  }
  return sqrt(diff / (norm > 0 ? norm : 1));
}

static int check_case(int nt, int m, long long n, long long k, unsigned long long seed, int *bad, ts_err *e) {
  const size_t nx = (size_t)m * k, nw = (size_t)n * k, ny = (size_t)m * n;
  void *X = NULL, *W = NULL, *Y = NULL;
  float *ws = NULL;
  unsigned short *h = malloc((nx + nw + ny) * 2);
  double *ref = malloc(ny * sizeof *ref);
  int rc = -1;
  if (!h || !ref) {
    ts_fail_sys(e, "out of memory");
    goto fail;
  }
  CUDA_CHECK_GOTO(e, cudaMalloc(&X, nx * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&W, nw * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&Y, ny * 2), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&ws, dev_gemv_ws_bytes(m, n)), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(ws, 0, dev_gemv_ws_bytes(m, n)), fail);
  if (rt_fill_random_bf16(X, (long long)nx, seed, 1.0f, NULL, e) ||
      rt_fill_random_bf16(W, (long long)nw, seed + 1, 1.0f, NULL, e))
    goto fail;
  for (int call = 0; call < 2; call++) {
    CUDA_CHECK_GOTO(e, cudaMemset(Y, 0xff, ny * 2), fail); /* NaN in BF16 */
    if (nt ? dev_gemv_nt(X, W, Y, m, n, k, NULL, e) : dev_gemv_nn(X, W, Y, ws, m, n, k, NULL, e)) goto fail;
  }
  CUDA_CHECK_GOTO(e, cudaMemcpy(h, X, nx * 2, cudaMemcpyDeviceToHost), fail);
  CUDA_CHECK_GOTO(e, cudaMemcpy(h + nx, W, nw * 2, cudaMemcpyDeviceToHost), fail);
  CUDA_CHECK_GOTO(e, cudaMemcpy(h + nx + nw, Y, ny * 2, cudaMemcpyDeviceToHost), fail);
  dev_gemv_ref(nt, m, n, k, h, h + nx, ref);
  const double err = l2_error(h + nx + nw, ref, ny);
  const int ok = err >= 0 && err <= TOL;
  *bad += !ok;
  printf("check gemv_%s m=%d n=%lld k=%lld: rel L2 %.2e (tol %.0e) %s\n", nt ? "nt" : "nn", m, n, k, err, TOL,
         ok ? "ok" : "FAILED");
  rc = 0;
fail:
  cudaFree(ws), cudaFree(Y), cudaFree(W), cudaFree(X);
  free(ref), free(h);
  return rc;
}

static int run_checks(int *bad, ts_err *e) {
  static const struct { int nt, m; long long n, k; } odd[] = {
      {0, 1, 4096, 4096}, {0, 3, 1000, 776}, {0, 5, 6144, 520},  {0, 8, 2056, 4104}, {0, 2, 8, 8},
      {1, 1, 4096, 4096}, {1, 4, 1000, 776}, {1, 7, 3000, 1032}, {1, 8, 520, 4096},  {1, 6, 8, 8}};
  unsigned long long seed = 4242;
  for (size_t i = 0; i < sizeof odd / sizeof *odd; i++)
    if (check_case(odd[i].nt, odd[i].m, odd[i].n, odd[i].k, seed += 11, bad, e)) return -1;
  for (int m = 1; m <= DEV_GEMV_MAX_M; m++)
    if (check_case(0, m, 1032, 264, seed += 11, bad, e) || check_case(1, m, 264, 1032, seed += 11, bad, e)) return -1;
  return 0;
}

typedef struct {
  exec_gemm *lt;
  exec_gemm_shape shape;
  int gemv, nt, m;
  long long n, k;
  const char *weights;
  size_t wbytes;
  int copies;
  void *X, *Y;
  float *ws;
} timing;

static int launch(void *ctx, long long iter, ts_err *e) {
  const timing *t = ctx;
  const void *W = t->weights + (size_t)(iter % t->copies) * t->wbytes;
  if (!t->gemv) return exec_gemm_run(t->lt, &t->shape, 1.f, t->X, W, 0.f, t->Y, NULL, e);
  return t->nt ? dev_gemv_nt(t->X, W, t->Y, t->m, t->n, t->k, NULL, e)
               : dev_gemv_nn(t->X, W, t->Y, t->ws, t->m, t->n, t->k, NULL, e);
}

static int time_projections(const model_config *mc, const long long *batches, int nb, ts_err *e) {
  const long long h = mc->hidden, d = model_head_dim(mc);
  const struct { const char *name; int nt; long long n, k; } proj[] = {
      {"qkv", 0, (mc->heads + 2LL * mc->kv_heads) * d, h}, {"attn_out", 0, h, (long long)mc->heads * d},
      {"fc1", 0, 2LL * mc->ffn_hidden, h},                  {"fc2", 0, h, mc->ffn_hidden},
      {"logits", 1, (long long)mc->vocab, h}};
  timing t;
  memset(&t, 0, sizeof t);
  size_t wmax = 0, io = (size_t)DEV_GEMV_MAX_M * (size_t)(mc->vocab + 2 * mc->ffn_hidden + h) * 2;
  for (int p = 0; p < 5; p++) wmax = (size_t)proj[p].n * proj[p].k * 2 > wmax ? (size_t)proj[p].n * proj[p].k * 2 : wmax;
  const size_t pool = ROTATE_BYTES + wmax;
  void *weights = NULL;
  calib_budget bud = calib_budget_default(0);
  void *streams[1] = {NULL};
  int dev[1] = {0}, rc = -1;
  CUDA_CHECK_GOTO(e, cudaGetDevice(&dev[0]), fail);
  if (exec_gemm_create(&t.lt, e)) goto fail;
  CUDA_CHECK_GOTO(e, cudaMalloc(&weights, pool), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&t.X, io), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc(&t.Y, io), fail);
  CUDA_CHECK_GOTO(e, cudaMalloc((void **)&t.ws, dev_gemv_ws_bytes(DEV_GEMV_MAX_M, mc->vocab)), fail);
  CUDA_CHECK_GOTO(e, cudaMemset(t.ws, 0, dev_gemv_ws_bytes(DEV_GEMV_MAX_M, mc->vocab)), fail);
  if (rt_fill_random_bf16(weights, (long long)(pool / 2), 7, 1.0f, NULL, e) ||
      rt_fill_random_bf16(t.X, (long long)(io / 2), 8, 1.0f, NULL, e))
    goto fail;
  t.weights = weights;
  printf("%-10s %3s %7s %7s %12s %12s %8s\n", "proj", "m", "n", "k", "cublaslt_us", "gemv_us", "gemv/lt");
  for (int p = 0; p < 5; p++)
    for (int b = 0; b < nb; b++) {
      t.nt = proj[p].nt, t.m = (int)batches[b], t.n = proj[p].n, t.k = proj[p].k;
      if (!dev_gemv_supported(t.m, t.n, t.k)) continue;
      t.wbytes = (size_t)t.n * t.k * 2, t.copies = (int)(pool / t.wbytes);
      t.shape = exec_gemm_packed(t.nt ? EXEC_GEMM_NT : EXEC_GEMM_NN, t.m, t.n, t.k);
      double us[2];
      for (t.gemv = 0; t.gemv < 2; t.gemv++)
        if (calib_time_us(launch, &t, streams, dev, 1, &bud, &us[t.gemv], e)) goto fail;
      printf("%-10s %3d %7lld %7lld %12.2f %12.2f %8.3f\n", proj[p].name, t.m, t.n, t.k, us[0], us[1], us[1] / us[0]);
    }
  rc = 0;
fail:
  cudaFree(t.ws), cudaFree(t.Y), cudaFree(t.X), cudaFree(weights);
  exec_gemm_destroy(t.lt);
  return rc;
}

int main(int argc, char **argv) {
  dev_proj_opts o;
  const int st = dev_proj_opts_parse(argc, argv, "dev_decode_gemv", "1,2,4,8", DEV_GEMV_MAX_M, &o);
  if (st >= 0) return st;
  ts_err e = {{0}, 0};
  int bad = 0;
  if (run_checks(&bad, &e) || (!o.check_only && time_projections(&o.mc, o.batches, o.nb, &e))) {
    fprintf(stderr, "dev_decode_gemv: %s\n", e.msg);
    return 1;
  }
  printf("checks: %d failed\n", bad);
  return bad ? 1 : 0;
}

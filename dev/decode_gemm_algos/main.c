/* main.c — dev_decode_gemm_algos: does cuBLASLt have a faster algorithm for the
 * decode projections than the one its heuristic ranks first (the one exec_gemm,
 * and so the executor and calibrate-infer, runs)?
 *
 *   dev_decode_gemm_algos [--model NAME (llama3-8b)] [--batches LIST (1,4,16)] [--check]
 *
 * For each of a zoo model's four layer projections (EXEC_GEMM_NN: y[m x n] =
 * x[m x k] . W[k x n], the weight [in x out] as the executor stores it) at each
 * batch m, the heuristic is asked for up to MAX_ALGOS algorithms with
 * exec_gemm's descriptors, workspace and alignments. Each candidate is checked
 * first: fresh random inputs, the output poisoned with NaN, relative L2 error
 * <= 1e-2 against float64 sums of the same BF16 inputs (rt_ops_ref), every
 * output finite. Then each candidate that passed is timed with the weights
 * rotating through copies spanning >= 512 MiB (each call reads HBM, as a decode
 * step does; calib_time_us, the calibration's timing). Printed: the first
 * candidate's us (what the library runs), the fastest candidate's us and
 * rank, their ratio and each one's share of the 4.8 TB/s read floor of its
 * weights; per batch the four projections' sums. Exit 1 when a check fails. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate_time.h"
#include "dev_proj_opts.h"
#include "gpu_check.h"
#include "model.h"
#include "rt_ops.h"
#include "rt_ops_ref.h"

#define TOL 1e-2
#define MAX_ALGOS 24
#define MAX_M 64
#define WORKSPACE ((size_t)32 << 20) /* exec_gemm's (EXEC_GEMM_WORKSPACE) */
#define ROTATE_BYTES ((size_t)512 << 20)
#define FLOOR_BYTES_PER_S 4.8e12

typedef struct {
  cublasLtHandle_t h;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo[MAX_ALGOS];
  int n_algo;
  void *ws;
  int m;
  long long n, k;
  const char *weights;
  size_t wbytes;
  int copies, pick;
  void *X, *Y;
} bench;

/* exec_gemm's packed NN descriptors (column-major views: the weight buffer first, n x k with ld n;
 * x as k x m with ld k; y n x m with ld n), and the heuristic's first MAX_ALGOS algorithms. */
static int describe(bench *b, ts_err *e) {
  const cublasOperation_t nop = CUBLAS_OP_N;
  CUBLAS_CHECK(e, cublasLtMatmulDescCreate(&b->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(b->op, CUBLASLT_MATMUL_DESC_TRANSA, &nop, sizeof nop));
  CUBLAS_CHECK(e, cublasLtMatmulDescSetAttribute(b->op, CUBLASLT_MATMUL_DESC_TRANSB, &nop, sizeof nop));
  CUBLAS_CHECK(e, cublasLtMatrixLayoutCreate(&b->la, CUDA_R_16BF, (uint64_t)b->n, (uint64_t)b->k, b->n));
  CUBLAS_CHECK(e, cublasLtMatrixLayoutCreate(&b->lb, CUDA_R_16BF, (uint64_t)b->k, (uint64_t)b->m, b->k));
  CUBLAS_CHECK(e, cublasLtMatrixLayoutCreate(&b->lc, CUDA_R_16BF, (uint64_t)b->n, (uint64_t)b->m, b->n));
  cublasLtMatmulPreference_t pref;
  CUBLAS_CHECK(e, cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = WORKSPACE;
  uint32_t al = 16;
  cublasLtMatmulHeuristicResult_t r[MAX_ALGOS];
  int found = 0, st = (int)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                                 sizeof ws);
  if (st == 0) st = (int)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
  if (st == 0) st = (int)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
  if (st == 0) st = (int)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
  if (st == 0) st = (int)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
  if (st == 0)
    st = (int)cublasLtMatmulAlgoGetHeuristic(b->h, b->op, b->la, b->lb, b->lc, b->lc, pref, MAX_ALGOS, r, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != 0 || found < 1)
    return ts_fail_sys(e, "no cuBLASLt algorithm for m=%d n=%lld k=%lld (status %d)", b->m, b->n, b->k, st);
  b->n_algo = 0;
  for (int i = 0; i < found; i++)
    if (r[i].state == CUBLAS_STATUS_SUCCESS && r[i].workspaceSize <= WORKSPACE) b->algo[b->n_algo++] = r[i].algo;
  return 0;
}

static void undescribe(bench *b) {
  if (b->lc) cublasLtMatrixLayoutDestroy(b->lc);
  if (b->lb) cublasLtMatrixLayoutDestroy(b->lb);
  if (b->la) cublasLtMatrixLayoutDestroy(b->la);
  if (b->op) cublasLtMatmulDescDestroy(b->op);
  b->lc = b->lb = b->la = NULL, b->op = NULL;
}

static int run_algo(const bench *b, int a, const void *W, ts_err *e) {
  const float one = 1.f, zero = 0.f;
  CUBLAS_CHECK(e, cublasLtMatmul(b->h, b->op, &one, W, b->la, b->X, b->lb, &zero, b->Y, b->lc, b->Y, b->lc,
                                 &b->algo[a], b->ws, WORKSPACE, NULL));
  return 0;
}

static int launch(void *ctx, long long iter, ts_err *e) {
  const bench *b = ctx;
  return run_algo(b, b->pick, b->weights + (size_t)(iter % b->copies) * b->wbytes, e);
}

/* Every candidate against float64 sums of the same inputs; ok[a] = 1 where it passed. */
static int check_algos(bench *b, int *ok, double *worst, ts_err *e) {
  const size_t nx = (size_t)b->m * b->k, nw = (size_t)b->k * b->n, ny = (size_t)b->m * b->n;
  unsigned short *tmp = malloc((nw > nx ? nw : nx) * 2);
  float *fx = malloc(nx * sizeof *fx), *fw = malloc(nw * sizeof *fw);
  double *ref = calloc(ny, sizeof *ref);
  int rc = -1;
  if (!tmp || !fx || !fw || !ref) {
    ts_fail_sys(e, "out of memory");
    goto fail;
  }
  CUDA_CHECK_GOTO(e, cudaMemcpy(tmp, b->X, nx * 2, cudaMemcpyDeviceToHost), fail);
  for (size_t i = 0; i < nx; i++) fx[i] = rt_ref_bf16_to_float(tmp[i]);
  CUDA_CHECK_GOTO(e, cudaMemcpy(tmp, b->weights, nw * 2, cudaMemcpyDeviceToHost), fail);
  for (size_t i = 0; i < nw; i++) fw[i] = rt_ref_bf16_to_float(tmp[i]);
  for (int r = 0; r < b->m; r++)
    for (long long kk = 0; kk < b->k; kk++) {
      const double x = fx[(size_t)r * b->k + kk];
      const float *w = fw + (size_t)kk * b->n;
      double *y = ref + (size_t)r * b->n;
      for (long long c = 0; c < b->n; c++) y[c] += x * w[c];
    }
  *worst = 0;
  for (int a = 0; a < b->n_algo; a++) {
    CUDA_CHECK_GOTO(e, cudaMemset(b->Y, 0xff, ny * 2), fail); /* NaN in BF16 */
    if (run_algo(b, a, b->weights, e)) goto fail;
    CUDA_CHECK_GOTO(e, cudaMemcpy(tmp, b->Y, ny * 2, cudaMemcpyDeviceToHost), fail);
    double num = 0, den = 0;
    int finite = 1;
    for (size_t i = 0; i < ny; i++) {
      const double y = rt_ref_bf16_to_float(tmp[i]);
      finite &= isfinite(y) != 0;
      num += (y - ref[i]) * (y - ref[i]), den += ref[i] * ref[i];
    }
    const double err = finite ? sqrt(num / (den > 0 ? den : 1)) : INFINITY;
    ok[a] = err <= TOL;
    if (err > *worst) *worst = err;
  }
  rc = 0;
fail:
  free(ref), free(fw), free(fx), free(tmp);
  return rc;
}

int main(int argc, char **argv) {
  dev_proj_opts o;
  const int st = dev_proj_opts_parse(argc, argv, "dev_decode_gemm_algos", "1,4,16", MAX_M, &o);
  if (st >= 0) return st;
  const model_config *mc = &o.mc;
  const long long h = mc->hidden;
  dev_proj proj[DEV_PROJ_LAYER];
  size_t wmax;
  dev_proj_layer(mc, proj, &wmax);
  enum { NP = DEV_PROJ_LAYER };
  ts_err e = {{0}, 0};
  bench b;
  memset(&b, 0, sizeof b);
  const size_t pool = ROTATE_BYTES + wmax, io = (size_t)MAX_M * (size_t)(2 * mc->ffn_hidden + h) * 2;
  void *weights = NULL;
  calib_budget bud = calib_budget_default(0);
  void *streams[1] = {NULL};
  int dev[1] = {0}, bad = 0, rc = 1;
  double sum_first[DEV_PROJ_MAX_BATCHES] = {0}, sum_best[DEV_PROJ_MAX_BATCHES] = {0};
  CUBLAS_CHECK_GOTO(&e, cublasLtCreate(&b.h), fail);
  CUDA_CHECK_GOTO(&e, cudaGetDevice(&dev[0]), fail);
  CUDA_CHECK_GOTO(&e, cudaMalloc(&b.ws, WORKSPACE), fail);
  CUDA_CHECK_GOTO(&e, cudaMalloc(&weights, pool), fail);
  CUDA_CHECK_GOTO(&e, cudaMalloc(&b.X, io), fail);
  CUDA_CHECK_GOTO(&e, cudaMalloc(&b.Y, io), fail);
  if (rt_fill_random_bf16(weights, (long long)(pool / 2), 7, 1.0f, NULL, &e) ||
      rt_fill_random_bf16(b.X, (long long)(io / 2), 8, 1.0f, NULL, &e))
    goto fail;
  b.weights = weights;
  printf("model %s: %-9s %3s %6s %6s %5s %8s %9s %6s %9s %6s %5s %7s %9s\n", mc->name, "proj", "m", "n", "k", "algos",
         "check", "first_us", "first%", "best_us", "best%", "rank", "best/1st", "worst_err");
  for (int p = 0; p < NP; p++)
    for (int bi = 0; bi < o.nb; bi++) {
      b.m = (int)o.batches[bi], b.n = proj[p].n, b.k = proj[p].k;
      b.wbytes = (size_t)b.n * b.k * 2, b.copies = (int)(pool / b.wbytes);
      if (describe(&b, &e)) goto fail;
      int ok[MAX_ALGOS], passed = 0, best = -1;
      double worst, us[MAX_ALGOS];
      if (check_algos(&b, ok, &worst, &e)) goto fail;
      for (int a = 0; a < b.n_algo; a++) {
        passed += ok[a];
        us[a] = INFINITY;
        if (!ok[a]) continue;
        b.pick = a;
        if (calib_time_us(launch, &b, streams, dev, 1, &bud, &us[a], &e)) goto fail;
        if (best < 0 || us[a] < us[best]) best = a;
      }
      bad += passed < b.n_algo;
      if (best < 0 || !ok[0]) {
        printf("model %s: %-9s %3d %6lld %6lld: the first algorithm FAILED its check (%d of %d passed)\n", mc->name,
               proj[p].name, b.m, b.n, b.k, passed, b.n_algo);
        undescribe(&b);
        continue;
      }
      const double floor_us = (double)b.wbytes / FLOOR_BYTES_PER_S * 1e6;
      sum_first[bi] += us[0], sum_best[bi] += us[best];
      printf("model %s: %-9s %3d %6lld %6lld %5d %4d/%-3d %9.2f %5.1f%% %9.2f %5.1f%% %5d %7.3f %9.2e\n", mc->name,
             proj[p].name, b.m, b.n, b.k, b.n_algo, passed, b.n_algo, us[0], 100 * floor_us / us[0], us[best],
             100 * floor_us / us[best], best, us[best] / us[0], worst);
      undescribe(&b);
    }
  for (int bi = 0; bi < o.nb; bi++)
    printf("model %s: four projections, batch %lld: first %.1f us, best %.1f us (%.3f)\n", mc->name, o.batches[bi],
           sum_first[bi], sum_best[bi], sum_best[bi] / (sum_first[bi] > 0 ? sum_first[bi] : 1));
  printf("checks: %d shapes with a failed candidate\n", bad);
  rc = bad ? 1 : 0;
fail:
  if (rc == 1 && e.msg[0]) fprintf(stderr, "dev_decode_gemm_algos: %s\n", e.msg);
  undescribe(&b);
  cudaFree(b.Y), cudaFree(b.X), cudaFree(weights), cudaFree(b.ws);
  if (b.h) cublasLtDestroy(b.h);
  return rc;
}

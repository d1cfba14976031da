/* calibrate_refk.c — the reference kernels (calibrate_refk.h). */
#include "calibrate_refk.h"

#include <string.h>

#include "rt_ops.h"
#include "rt_ops_check.h"

#define REFK_GEMM_SETS 4 /* 64 MiB each */
#define REFK_ADD_SETS 3
#define REFK_POOL_MIN ((size_t)256 << 20) /* over 4x the L2 of an H100 or H200 */

int calib_clock_spin(double us, void *stream, ts_err *e); /* calibrate_clock_spin.cu */

/* The GEMM's handle, stream and operand pool (random, non-zero: zeros would draw less power). */
static int open_gemm(calib_refk *x, long long m, long long n, long long k, int sets, ts_err *e) {
  x->shape = exec_gemm_packed(EXEC_GEMM_NN, m, n, k);
  x->beta = exec_gemm_packed_beta(EXEC_GEMM_NN);
  x->a_bytes = (size_t)(m * k * 2);
  x->b_bytes = (size_t)(k * n * 2);
  x->c_bytes = (size_t)(m * n * 2);
  x->gemm_set = (x->a_bytes + x->b_bytes + x->c_bytes + 255) / 256 * 256; /* aligned as cuBLASLt wants */
  x->gemm_sets = sets;
  RT_TRY(exec_gemm_create(&x->gemm, e));
  RT_CHECK_CUDA(e, cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
  RT_CHECK_CUDA(e, cudaMalloc((void **)&x->gemm_pool, (size_t)sets * x->gemm_set));
  RT_TRY(rt_fill_random_bf16(x->gemm_pool, (long long)((size_t)sets * x->gemm_set / 2), 71, 1.0f, x->stream, e));
  RT_CHECK_CUDA(e, cudaStreamSynchronize(x->stream));
  return 0;
}

int calib_refk_open(calib_refk *x, ts_err *e) {
  memset(x, 0, sizeof *x);
  RT_TRY(open_gemm(x, CALIB_REF_GEMM_M, CALIB_REF_GEMM_N, CALIB_REF_GEMM_K, REFK_GEMM_SETS, e));
  x->add_tensor = (size_t)CALIB_REF_ADD_ELEMS * 2;
  x->add_set = 3 * x->add_tensor;
  RT_CHECK_CUDA(e, cudaMalloc((void **)&x->add_pool, REFK_ADD_SETS * x->add_set));
  RT_TRY(rt_fill_random_bf16(x->add_pool, (long long)(REFK_ADD_SETS * x->add_set / 2), 72, 1.0f, x->stream, e));
  RT_CHECK_CUDA(e, cudaStreamSynchronize(x->stream));
  return 0;
}

int calib_refk_open_bare(calib_refk *x, ts_err *e) {
  memset(x, 0, sizeof *x);
  RT_TRY(exec_gemm_create(&x->gemm, e));
  RT_CHECK_CUDA(e, cudaStreamCreateWithFlags(&x->stream, cudaStreamNonBlocking));
  return 0;
}

int calib_refk_open_gemm(calib_refk *x, long long m, long long n, long long k, ts_err *e) {
  memset(x, 0, sizeof *x);
  if (m < 1 || n < 1 || k < 1 || m > 65536 || n > 262144 || k > 262144)
    return ts_fail(e, NULL, "--power-gemm", "%lldx%lldx%lld: each of M, N, K must be 1..65536 / 262144", m, n, k);
  size_t set = (size_t)(2 * (m * k + k * n + m * n));
  int sets = (int)((REFK_POOL_MIN + set - 1) / set);
  return open_gemm(x, m, n, k, sets < 2 ? 2 : sets, e);
}

void calib_refk_close(calib_refk *x) {
  cudaFree(x->add_pool);
  cudaFree(x->gemm_pool);
  if (x->stream) cudaStreamDestroy(x->stream);
  exec_gemm_destroy(x->gemm);
  memset(x, 0, sizeof *x);
}

int calib_refk_launch(calib_refk *x, calib_refk_kernel which, ts_err *e) {
  long long it = x->iter++;
  if (which == CALIB_REFK_GEMM && x->fn) return x->fn(x->fn_ctx, e);
  if (which == CALIB_REFK_GEMM) {
    if (!x->gemm_pool) return ts_fail_sys(e, "reference kernels: this set has no GEMM");
    char *s = x->gemm_pool + (size_t)(it % x->gemm_sets) * x->gemm_set;
    return exec_gemm_run(x->gemm, &x->shape, 1.0f, s, s + x->a_bytes, x->beta, s + x->a_bytes + x->b_bytes, x->stream,
                         e);
  }
  if (x->add_fn) return x->add_fn(x->add_ctx, e);
  if (!x->add_pool) return ts_fail_sys(e, "reference kernels: this set has no memory-bound kernel");
  char *s = x->add_pool + (size_t)(it % REFK_ADD_SETS) * x->add_set;
  return rt_add(s, s + x->add_tensor, s + 2 * x->add_tensor, CALIB_REF_ADD_ELEMS, x->stream, e);
}

int calib_refk_spin(calib_refk *x, double us, ts_err *e) { return calib_clock_spin(us, x->stream, e); }

/* The spin kernel must idle for what it is asked (globaltimer runs in ns on
 * every GPU we know, but a GPU where it does not would make every duty wrong). */
static int check_spin(calib_refk *x, cudaEvent_t t0, cudaEvent_t t1, ts_err *e) {
  const double want_us = 500;
  /* the first launch loads the kernel (lazy module loading: +140 us on the GPU machine) */
  RT_TRY(calib_refk_spin(x, 10, e));
  RT_CHECK_CUDA(e, cudaStreamSynchronize(x->stream));
  RT_CHECK_CUDA(e, cudaEventRecord(t0, x->stream));
  RT_TRY(calib_refk_spin(x, want_us, e));
  RT_CHECK_CUDA(e, cudaEventRecord(t1, x->stream));
  RT_CHECK_CUDA(e, cudaStreamSynchronize(x->stream));
  float ms = 0;
  RT_CHECK_CUDA(e, cudaEventElapsedTime(&ms, t0, t1));
  if (ms * 1e3 < 0.95 * want_us || ms * 1e3 > 1.2 * want_us)
    return ts_fail_sys(e, "spin kernel: a %.0f us spin took %.1f us (GPU timer not in ns?)", want_us, ms * 1e3);
  return 0;
}

int calib_refk_check_spin(calib_refk *x, ts_err *e) {
  cudaEvent_t t0 = NULL, t1 = NULL;
  int rc = -1;
  if (cudaEventCreate(&t0) != cudaSuccess || cudaEventCreate(&t1) != cudaSuccess)
    ts_fail_sys(e, "%s:%d: cudaEventCreate failed", __FILE__, __LINE__);
  else rc = check_spin(x, t0, t1, e);
  if (t1) cudaEventDestroy(t1);
  if (t0) cudaEventDestroy(t0);
  return rc;
}

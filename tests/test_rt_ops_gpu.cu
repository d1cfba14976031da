/* test_rt_ops_gpu.cu — the memory-bound kernels of runtime/ops/rt_ops.cu against
 * their plain-C references (rt_ops_selfcheck: fresh random inputs, outputs
 * poisoned with NaN first, |gpu - ref| <= 2^-7 |ref| + 1e-3 max|ref|; the
 * shapes and paths are listed in runtime/ops/rt_ops_selfcheck.c).
 * `--bench` also times, alone on the GPU, the norm forwards at the GPT h4096
 * TP2 shape (4096 x 4096 BF16) and one AdamW step over 910 M parameters (one
 * TP2 rank of that model), median of 5 rounds, as us and GB/s of the bytes
 * each must move (norm: read x, write y; AdamW: 30 bytes a parameter).
 * No CUDA device: SKIP, exit 77. */
extern "C" {
#include "ts_error.h"
}
#include "rt_ops.h"

#include <algorithm>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <vector>

#include "exec_gpu_test.h"

/* Median of 5 rounds of `reps` calls (after one warm-up round), us a call. */
template <typename F> static double time_us(F call, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int round = 0; round < 6; round++) {
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; i++) call();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (round > 0) t.push_back(1e3 * ms / reps);
  }
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static void bench_norms(void) {
  const long long rows = 4096;
  const int cols = 4096;
  const size_t n = (size_t)rows * cols;
  void *x, *y, *g, *b;
  float *mean, *rstd;
  CK(cudaMalloc(&x, n * 2));
  CK(cudaMalloc(&y, n * 2));
  CK(cudaMalloc(&g, cols * 2));
  CK(cudaMalloc(&b, cols * 2));
  CK(cudaMalloc(&mean, rows * 4));
  CK(cudaMalloc(&rstd, rows * 4));
  ts_err e = {};
  TRY(rt_fill_random_bf16(x, (long long)n, 1, 2.f, NULL, &e));
  TRY(rt_fill_random_bf16(g, cols, 2, 1.f, NULL, &e));
  TRY(rt_fill_random_bf16(b, cols, 3, 1.f, NULL, &e));
  const double bytes = 2.0 * n * 2;
  double us = time_us([&] { TRY(rt_layernorm_fwd(x, g, b, y, mean, rstd, rows, cols, 1e-5f, NULL, &e)); }, 50);
  printf("bench layernorm_fwd %lld x %d: %.1f us, %.0f GB/s (read x, write y)\n", rows, cols, us, bytes / us / 1e3);
  us = time_us([&] { TRY(rt_rmsnorm_fwd(x, g, y, rstd, rows, cols, 1e-5f, NULL, &e)); }, 50);
  printf("bench rmsnorm_fwd   %lld x %d: %.1f us, %.0f GB/s (read x, write y)\n", rows, cols, us, bytes / us / 1e3);
  cudaFree(x), cudaFree(y), cudaFree(g), cudaFree(b), cudaFree(mean), cudaFree(rstd);
}

static void bench_adamw(void) {
  const long long n = 910000000LL;
  float *master, *grad, *m, *v;
  void *w16;
  CK(cudaMalloc(&master, n * 4));
  CK(cudaMalloc(&grad, n * 4));
  CK(cudaMalloc(&m, n * 4));
  CK(cudaMalloc(&v, n * 4));
  CK(cudaMalloc(&w16, n * 2));
  ts_err e = {};
  TRY(rt_fill_random_f32(master, n, 4, 1.f, NULL, &e));
  TRY(rt_fill_random_f32(grad, n, 5, 0.1f, NULL, &e));
  TRY(rt_fill_random_f32(m, n, 6, 0.01f, NULL, &e));
  TRY(rt_fill_random_f32_range(v, n, 7, 1e-6f, 1e-4f, NULL, &e));
  rt_adamw_params p = {};
  p.lr = 1e-4f, p.beta1 = 0.9f, p.beta2 = 0.95f, p.eps = 1e-8f, p.weight_decay = 0.1f, p.step = 1;
  double us = time_us([&] { TRY(rt_adamw_step(master, w16, grad, m, v, n, p, NULL, &e)); }, 3);
  printf("bench adamw %lld parameters: %.1f us, %.0f GB/s (30 B a parameter)\n", n, us, 30.0 * n / us / 1e3);
  cudaFree(master), cudaFree(grad), cudaFree(m), cudaFree(v), cudaFree(w16);
}

int main(int argc, char **argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  ts_err e = {};
  const int rc = rt_ops_selfcheck(stdout, &e);
  if (rc) printf("FAIL: %s\n", e.msg);
  if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
    bench_norms();
    bench_adamw();
  }
  printf("%s\n", rc ? "FAILED" : "all passed");
  return rc ? 1 : 0;
}

/* test_reduce_ordered_gpu.cu — the executor's sums over rows and tokens with
 * --variant reduce=ordered (runtime/ops/exec_kernels.cu, rt_ops_layer.cu):
 * the embedding gradients (exec_embed_bwd: dwte rows of the local words,
 * dwpe), the norm weight gradients (exec_norm_wgrad) and the bias gradient
 * (rt_bias_grad), each against a plain float64 reference on the CPU, in both
 * modes (atomic, the default, and ordered), and in the ordered mode run twice
 * from the same accumulators: the two results must be the same bits.
 * Accumulators start random (the kernels add), inputs are BF16-exact random
 * values, tokens repeat (a word appears many times, some words not at all) and
 * a vocabulary slice starts past word 0 (TP: tokens outside it are skipped).
 * Tolerance: relative L2 <= 1e-5 (FP32 sums of BF16 values). The cross-entropy
 * loss and the attention backward in this mode are checked by
 * test_exec_ce_gpu and test_exec_flash_gpu ("ordered"). No CUDA device: SKIP,
 * exit 77. */
extern "C" {
#include "ts_error.h"
}
#include "exec_kernels.h"
#include "ops_variants.h"
#include "rt_ops_layer.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "exec_gpu_test.h"

static const double TOL = 1e-5;

static void set_reduce(const char *v) {
  ts_err e = {};
  char arg[32];
  snprintf(arg, sizeof arg, "reduce=%s", v);
  if (ops_variant_set(arg, &e)) {
    fprintf(stderr, "test_reduce_ordered_gpu: %s\n", e.msg);
    exit(1);
  }
}

static std::vector<uint16_t> rand_bf16(size_t n, double scale) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = to_bf16((float)(scale * (2 * urand() - 1)));
  return v;
}
static std::vector<float> rand_f32(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; i++) v[i] = (float)(urand() - 0.5);
  return v;
}
static void *to_dev(const void *h, size_t bytes) {
  void *d;
  CK(cudaMalloc(&d, bytes));
  CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}
static std::vector<double> from_dev_f32(const float *d, size_t n) {
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost));
  return std::vector<double>(h.begin(), h.end());
}

/* Compares got with ref (rel L2 <= TOL); in the ordered mode also with the
 * second run's bits. Prints one line; returns 1 on failure. */
static int verdict(const char *what, const char *mode, const std::vector<double> &ref, const std::vector<double> &got,
                   const std::vector<double> *again) {
  int bad = 0;
  double err = rel_l2(ref, got, &bad);
  int same = !again || memcmp(got.data(), again->data(), got.size() * sizeof(double)) == 0;
  int ok = bad == 0 && err <= TOL && same;
  printf("%s %-8s %-34s rel L2 %.2e (tol %.0e)%s\n", ok ? "ok  " : "FAIL", mode, what, err, TOL,
         again ? (same ? ", two runs the same bits" : ", TWO RUNS DIFFER") : "");
  return ok ? 0 : 1;
}

/* dwte rows [start, start + local) and dwpe for `seqs` sequences of `seq` tokens. */
static int embed_case(int vocab, long long start, long long local, int seqs, int seq, int hidden, int ordered) {
  const long long T = (long long)seqs * seq;
  std::vector<int32_t> tok(T);
  for (long long t = 0; t < T; t++) tok[t] = (int32_t)(urand() * urand() * vocab); /* skewed: repeats */
  std::vector<uint16_t> dx = rand_bf16((size_t)(T * hidden), 1.0);
  std::vector<float> wte0 = rand_f32((size_t)(local * hidden)), wpe0 = rand_f32((size_t)seq * hidden);
  std::vector<double> rw(wte0.begin(), wte0.end()), rp(wpe0.begin(), wpe0.end());
  for (long long t = 0; t < T; t++)
    for (int j = 0; j < hidden; j++) {
      double d = from_bf16(dx[t * hidden + j]);
      if (tok[t] >= start && tok[t] < start + local) rw[(tok[t] - start) * hidden + j] += d;
      rp[(t % seq) * hidden + j] += d;
    }
  void *d_tok = to_dev(tok.data(), T * 4), *d_dx = to_dev(dx.data(), dx.size() * 2);
  float *d_w = (float *)to_dev(wte0.data(), wte0.size() * 4), *d_p = (float *)to_dev(wpe0.data(), wpe0.size() * 4);
  ts_err e = {};
  std::vector<double> w[2], p[2];
  for (int run = 0; run < 1 + ordered; run++) {
    CK(cudaMemcpy(d_w, wte0.data(), wte0.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_p, wpe0.data(), wpe0.size() * 4, cudaMemcpyHostToDevice));
    TRY(exec_embed_bwd((const int32_t *)d_tok, d_dx, d_w, start, local, d_p, T, seq, hidden, 0, &e));
    CK(cudaDeviceSynchronize());
    w[run] = from_dev_f32(d_w, wte0.size());
    p[run] = from_dev_f32(d_p, wpe0.size());
  }
  cudaFree(d_p), cudaFree(d_w), cudaFree(d_dx), cudaFree(d_tok);
  char what[96];
  const char *mode = ordered ? "ordered" : "atomic";
  snprintf(what, sizeof what, "embed dwte v%d [%lld,+%lld) T%lld h%d", vocab, start, local, T, hidden);
  int f = verdict(what, mode, rw, w[0], ordered ? &w[1] : NULL);
  snprintf(what, sizeof what, "embed dwpe seq%d h%d", seq, hidden);
  return f + verdict(what, mode, rp, p[0], ordered ? &p[1] : NULL);
}

static int norm_case(long long rows, int cols, int rms, int ordered) {
  const size_t n = (size_t)rows * cols;
  std::vector<uint16_t> dy = rand_bf16(n, 1.0), x = rand_bf16(n, 2.0);
  std::vector<float> mean(rows), rstd(rows), g0 = rand_f32(cols), b0 = rand_f32(cols);
  for (long long r = 0; r < rows; r++) mean[r] = rms ? 0.f : (float)(urand() - 0.5), rstd[r] = (float)(0.5 + urand());
  std::vector<double> rg(g0.begin(), g0.end()), rb(b0.begin(), b0.end());
  for (long long r = 0; r < rows; r++)
    for (int j = 0; j < cols; j++) {
      double d = from_bf16(dy[r * cols + j]);
      rg[j] += d * (from_bf16(x[r * cols + j]) - mean[r]) * rstd[r];
      rb[j] += d;
    }
  void *d_dy = to_dev(dy.data(), n * 2), *d_x = to_dev(x.data(), n * 2);
  float *d_mean = (float *)to_dev(mean.data(), rows * 4), *d_rstd = (float *)to_dev(rstd.data(), rows * 4);
  float *d_g = (float *)to_dev(g0.data(), cols * 4), *d_b = (float *)to_dev(b0.data(), cols * 4);
  ts_err e = {};
  std::vector<double> g[2], b[2];
  for (int run = 0; run < 1 + ordered; run++) {
    CK(cudaMemcpy(d_g, g0.data(), cols * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_b, b0.data(), cols * 4, cudaMemcpyHostToDevice));
    TRY(exec_norm_wgrad(d_dy, d_x, rms ? NULL : d_mean, d_rstd, d_g, rms ? NULL : d_b, rows, cols, 0, &e));
    CK(cudaDeviceSynchronize());
    g[run] = from_dev_f32(d_g, cols);
    b[run] = from_dev_f32(d_b, cols);
  }
  cudaFree(d_b), cudaFree(d_g), cudaFree(d_rstd), cudaFree(d_mean), cudaFree(d_x), cudaFree(d_dy);
  char what[96];
  const char *mode = ordered ? "ordered" : "atomic";
  snprintf(what, sizeof what, "%s dgamma %lld x %d", rms ? "rmsnorm" : "layernorm", rows, cols);
  int f = verdict(what, mode, rg, g[0], ordered ? &g[1] : NULL);
  if (rms) return f;
  snprintf(what, sizeof what, "layernorm dbeta %lld x %d", rows, cols);
  return f + verdict(what, mode, rb, b[0], ordered ? &b[1] : NULL);
}

static int bias_case(long long rows, int cols, int ld, int ordered) {
  std::vector<uint16_t> dy = rand_bf16((size_t)rows * ld, 1.0);
  std::vector<float> b0 = rand_f32(cols);
  std::vector<double> rb(b0.begin(), b0.end());
  for (long long r = 0; r < rows; r++)
    for (int j = 0; j < cols; j++) rb[j] += from_bf16(dy[r * ld + j]);
  void *d_dy = to_dev(dy.data(), dy.size() * 2);
  float *d_b = (float *)to_dev(b0.data(), cols * 4);
  ts_err e = {};
  std::vector<double> b[2];
  for (int run = 0; run < 1 + ordered; run++) {
    CK(cudaMemcpy(d_b, b0.data(), cols * 4, cudaMemcpyHostToDevice));
    TRY(rt_bias_grad(d_dy, d_b, rows, cols, ld, 0, &e));
    CK(cudaDeviceSynchronize());
    b[run] = from_dev_f32(d_b, cols);
  }
  cudaFree(d_b), cudaFree(d_dy);
  char what[96];
  snprintf(what, sizeof what, "bias grad %lld x %d (ld %d)", rows, cols, ld);
  return verdict(what, ordered ? "ordered" : "atomic", rb, b[0], ordered ? &b[1] : NULL);
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("test_reduce_ordered_gpu: SKIP (no CUDA device)\n");
    return 77;
  }
  test_seed(0x5DEECE66Dull);
  int fails = 0;
  for (int ordered = 0; ordered < 2; ordered++) {
    set_reduce(ordered ? "ordered" : "atomic");
    fails += embed_case(256, 0, 256, 4, 256, 768, ordered);   /* the byte-level loss runs' shape */
    fails += embed_case(1000, 500, 500, 3, 320, 200, ordered); /* second TP slice, hidden not a multiple of 32 */
    fails += embed_case(32000, 0, 32000, 2, 128, 128, ordered); /* a large vocabulary: most words absent */
    fails += norm_case(4096, 768, 0, ordered);
    fails += norm_case(301, 72, 1, ordered);
    fails += norm_case(37, 4096, 0, ordered);
    fails += bias_case(4096, 768, 768, ordered);
    fails += bias_case(301, 100, 128, ordered);
  }
  ts_err e = {};
  set_reduce("ordered");
  if (exec_embed_bwd(NULL, NULL, NULL, 0, 16, NULL, 4, 4, 8193, 0, &e) == 0) {
    printf("FAIL: hidden 8193 accepted by the ordered embedding backward\n");
    fails++;
  } else {
    printf("ok   refused: %s\n", e.msg);
  }
  printf("test_reduce_ordered_gpu: %s (%d failure(s))\n", fails ? "FAILED" : "passed", fails);
  return fails ? 1 : 0;
}

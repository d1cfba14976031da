/* test_exec_ce_gpu.cu — the vocabulary-parallel cross-entropy of the executor
 * (runtime/ops/exec_kernels.cu) against a plain float64 reference on the CPU.
 * TP = 2 is played on one GPU: the vocabulary split in two slices, the two
 * all-reduces between the kernels done on the host (max, then sum), exactly
 * as exec_layer.c calls them. Both paths are checked: the one-pass default
 * (exec_ce_stats, exec_ce_rescale, exec_ce_finish8) and the three-pass one
 * (exec_ce_rowmax, exec_ce_sums, exec_ce_finish). The last slice has padding
 * columns (valid < vocab, not a multiple of 8), labels fall in both slices.
 * Outputs (the rowmax/sums buffers) are poisoned with NaN before each run.
 * Both sums of the loss over rows: atomic adds and --variant reduce=ordered.
 * Tolerance: loss relative error <= 1e-4 (FP32 sums of exp), gradient relative
 * L2 <= 1e-2 (one BF16 rounding), padding gradients exactly zero.
 * `--bench`: both paths at 4096 x 25,152 (GPT h4096 TP2's slice). No CUDA
 * device: SKIP, exit 77. */
extern "C" {
#include "ts_error.h"
}
#include "exec_kernels.h"
#include "ops_variants.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "exec_gpu_test.h"

/* One case: rows x (2 slices of vocab columns), the second slice holding
 * `valid1` real columns. Returns the number of failures. */
static int run_case(long long rows, int vocab, int valid1, int fused, double scale) {
  ts_err e;
  const int slices = 2, valid[2] = {vocab, valid1};
  const long long n = rows * vocab;
  std::vector<uint16_t> z[2];
  std::vector<int32_t> labels(rows);
  for (int s = 0; s < slices; s++) {
    z[s].resize(n);
    for (long long i = 0; i < n; i++) z[s][i] = to_bf16((float)(scale * (2 * urand() - 1)));
  }
  for (long long r = 0; r < rows; r++) labels[r] = (int32_t)(urand() * (vocab + valid1)); /* real words only */
  /* float64 reference: loss = mean over rows of logsumexp - z[label]; gradient (softmax - onehot) / rows */
  const double loss_scale = 1.0 / (double)rows;
  double ref_loss = 0;
  std::vector<double> ref_g[2] = {std::vector<double>(n, 0.0), std::vector<double>(n, 0.0)};
  for (long long r = 0; r < rows; r++) {
    double mx = -INFINITY, sum = 0;
    for (int s = 0; s < slices; s++)
      for (int j = 0; j < valid[s]; j++) mx = fmax(mx, from_bf16(z[s][r * vocab + j]));
    for (int s = 0; s < slices; s++)
      for (int j = 0; j < valid[s]; j++) sum += exp(from_bf16(z[s][r * vocab + j]) - mx);
    int ls = labels[r] >= vocab, lj = labels[r] - ls * vocab;
    ref_loss += loss_scale * (log(sum) + mx - from_bf16(z[ls][r * vocab + lj]));
    for (int s = 0; s < slices; s++)
      for (int j = 0; j < valid[s]; j++)
        ref_g[s][r * vocab + j] = loss_scale * (exp(from_bf16(z[s][r * vocab + j]) - mx) / sum - (s == ls && j == lj));
  }
  void *dz[2];
  float *rowmax[2], *sums[2], *loss;
  int32_t *dlab;
  for (int s = 0; s < slices; s++) {
    CK(cudaMalloc(&dz[s], (size_t)n * 2));
    CK(cudaMemcpy(dz[s], z[s].data(), (size_t)n * 2, cudaMemcpyHostToDevice));
    CK(cudaMalloc((void **)&rowmax[s], (size_t)rows * 4));
    CK(cudaMalloc((void **)&sums[s], (size_t)rows * 12));
    CK(cudaMemset(rowmax[s], 0xff, (size_t)rows * 4)); /* NaN: every entry must be written */
    CK(cudaMemset(sums[s], 0xff, (size_t)rows * 12));
  }
  CK(cudaMalloc((void **)&dlab, (size_t)rows * 4));
  CK(cudaMemcpy(dlab, labels.data(), (size_t)rows * 4, cudaMemcpyHostToDevice));
  CK(cudaMalloc((void **)&loss, 4));
  CK(cudaMemset(loss, 0, 4));
  std::vector<float> hmax(rows), hm(rows), hsum(2 * rows), hs(2 * rows);
  /* 1. statistics per slice, then the all-reduce MAX on the host */
  for (int s = 0; s < slices; s++) {
    if (fused) TRY(exec_ce_stats(dz[s], dlab, (long long)s * vocab, rowmax[s], sums[s], rows, vocab, valid[s], NULL, &e));
    else TRY(exec_ce_rowmax(dz[s], rowmax[s], rows, vocab, valid[s], NULL, &e));
  }
  for (int s = 0; s < slices; s++) {
    CK(cudaMemcpy(hm.data(), rowmax[s], (size_t)rows * 4, cudaMemcpyDeviceToHost));
    for (long long r = 0; r < rows; r++) hmax[r] = s ? fmaxf(hmax[r], hm[r]) : hm[r];
  }
  for (int s = 0; s < slices; s++) CK(cudaMemcpy(rowmax[s], hmax.data(), (size_t)rows * 4, cudaMemcpyHostToDevice));
  /* 2. sums relative to the global max, then the all-reduce SUM on the host */
  for (int s = 0; s < slices; s++) {
    if (fused) TRY(exec_ce_rescale(rowmax[s], sums[s], rows, NULL, &e));
    else TRY(exec_ce_sums(dz[s], dlab, (long long)s * vocab, rowmax[s], sums[s], rows, vocab, valid[s], NULL, &e));
  }
  for (int s = 0; s < slices; s++) {
    CK(cudaMemcpy(hs.data(), sums[s], (size_t)rows * 8, cudaMemcpyDeviceToHost));
    for (long long i = 0; i < 2 * rows; i++) hsum[i] = s ? hsum[i] + hs[i] : hs[i];
  }
  for (int s = 0; s < slices; s++) CK(cudaMemcpy(sums[s], hsum.data(), (size_t)rows * 8, cudaMemcpyHostToDevice));
  /* 3. loss (slice 0 adds it, as every TP rank would add the same) and the gradient in place */
  for (int s = 0; s < slices; s++) {
    float ls = s == 0 ? (float)loss_scale : 0.f;
    if (fused)
      TRY(exec_ce_finish8(dz[s], dlab, (long long)s * vocab, rowmax[s], sums[s], loss, ls, (float)loss_scale, rows,
                          vocab, valid[s], NULL, &e));
    else
      TRY(exec_ce_finish(dz[s], dlab, (long long)s * vocab, rowmax[s], sums[s], loss, ls, (float)loss_scale, rows,
                         vocab, valid[s], NULL, &e));
  }
  CK(cudaDeviceSynchronize());
  float got_loss;
  CK(cudaMemcpy(&got_loss, loss, 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  int pad_nonzero = 0, nonfinite = 0;
  for (int s = 0; s < slices; s++) {
    CK(cudaMemcpy(z[s].data(), dz[s], (size_t)n * 2, cudaMemcpyDeviceToHost));
    for (long long r = 0; r < rows; r++)
      for (int j = 0; j < vocab; j++) {
        double g = from_bf16(z[s][r * vocab + j]), d = g - ref_g[s][r * vocab + j];
        if (!isfinite(g)) nonfinite++;
        if (j >= valid[s] && g != 0.0) pad_nonzero++;
        num += d * d, den += ref_g[s][r * vocab + j] * ref_g[s][r * vocab + j];
      }
  }
  double loss_err = fabs(got_loss - ref_loss) / fabs(ref_loss), grad_err = sqrt(num / den);
  int bad = !(loss_err <= 1e-4) + !(grad_err <= 1e-2) + (pad_nonzero > 0) + (nonfinite > 0);
  printf("  %-9s rows %5lld, 2 x %6d columns (last slice %6d real), logits x%-4g: loss %.6f vs %.6f (rel %.1e), "
         "gradient rel L2 %.2e, padding nonzero %d, non-finite %d%s\n",
         fused ? "one-pass" : "3-pass", rows, vocab, valid1, scale, got_loss, ref_loss, loss_err, grad_err, pad_nonzero,
         nonfinite, bad ? "  FAILED" : "");
  for (int s = slices - 1; s >= 0; s--) {
    CK(cudaFree(sums[s]));
    CK(cudaFree(rowmax[s]));
    CK(cudaFree(dz[s]));
  }
  CK(cudaFree(loss));
  CK(cudaFree(dlab));
  return bad;
}

static void bench(void) {
  ts_err e;
  const long long rows = 4096;
  const int vocab = 25152;
  void *z;
  float *rowmax, *sums, *loss;
  int32_t *lab;
  CK(cudaMalloc(&z, (size_t)rows * vocab * 2));
  CK(cudaMemset(z, 0, (size_t)rows * vocab * 2));
  CK(cudaMalloc((void **)&rowmax, (size_t)rows * 4));
  CK(cudaMalloc((void **)&sums, (size_t)rows * 12));
  CK(cudaMalloc((void **)&loss, 4));
  CK(cudaMalloc((void **)&lab, (size_t)rows * 4));
  CK(cudaMemset(lab, 0, (size_t)rows * 4));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int fused = 0; fused < 2; fused++) {
    for (int it = 0; it < 23; it++) {
      if (it == 3) CK(cudaEventRecord(a));
      if (fused) {
        TRY(exec_ce_stats(z, lab, 0, rowmax, sums, rows, vocab, vocab, NULL, &e));
        TRY(exec_ce_rescale(rowmax, sums, rows, NULL, &e));
        TRY(exec_ce_finish8(z, lab, 0, rowmax, sums, loss, 1.f, 1.f, rows, vocab, vocab, NULL, &e));
      } else {
        TRY(exec_ce_rowmax(z, rowmax, rows, vocab, vocab, NULL, &e));
        TRY(exec_ce_sums(z, lab, 0, rowmax, sums, rows, vocab, vocab, NULL, &e));
        TRY(exec_ce_finish(z, lab, 0, rowmax, sums, loss, 1.f, 1.f, rows, vocab, vocab, NULL, &e));
      }
    }
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    double us = 1e3 * ms / 20, bytes = (fused ? 3.0 : 4.0) * rows * vocab * 2;
    printf("  bench %-9s %lld x %d: %.1f us per loss (%.0f GB/s over %.0f MB read + written)\n",
           fused ? "one-pass" : "3-pass", rows, vocab, us, bytes / us * 1e-3, bytes * 1e-6);
  }
  CK(cudaEventDestroy(b));
  CK(cudaEventDestroy(a));
  CK(cudaFree(lab));
  CK(cudaFree(loss));
  CK(cudaFree(sums));
  CK(cudaFree(rowmax));
  CK(cudaFree(z));
}

int main(int argc, char **argv) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("test_exec_ce_gpu: SKIP (no CUDA device)\n");
    return 77;
  }
  int failures = 0;
  printf("cross-entropy vs float64 (tolerance: loss 1e-4 relative, gradient 1e-2 relative L2):\n");
  const struct {
    long long rows;
    int vocab, valid1;
    double scale;
  } cases[] = {{7, 64, 61, 3.0}, {33, 1000, 997, 8.0}, {128, 4096, 4096, 1.0}, {64, 25152, 25105, 20.0}};
  for (int ordered = 0; ordered < 2; ordered++) { /* the loss's sum over rows: atomic, then --variant reduce=ordered */
    ts_err e = {};
    if (ops_variant_set(ordered ? "reduce=ordered" : "reduce=atomic", &e)) {
      fprintf(stderr, "%s\n", e.msg);
      return 1;
    }
    printf("reduce=%s:\n", ordered ? "ordered" : "atomic");
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
      for (int fused = 0; fused < 2; fused++)
        failures += run_case(cases[c].rows, cases[c].vocab, cases[c].valid1, fused, cases[c].scale);
  }
  if (argc > 1 && !strcmp(argv[1], "--bench")) bench();
  printf("test_exec_ce_gpu: %s (%d failure(s))\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}

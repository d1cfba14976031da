/* test_exec_flash_gpu.cu — the fused causal attention (runtime/ops/exec_flash.cu)
 * against a plain float64 reference on the CPU, forward and backward, for
 * head dims 32, 64, 128 on the executor's Q | K | V layout. Fresh random
 * inputs (BF16-exact), outputs poisoned with NaN before each launch so that an
 * element the kernels forget to write fails the test. Tolerance: relative L2
 * error <= 1e-2 per tensor (BF16 output rounding is 2^-9; P is rounded to
 * BF16 before P.V and dS before dS.K / dS^T.Q, as in every BF16 flash
 * kernel), lse absolute error <= 1e-3. Grouped-query cases (KV key/value
 * heads shared by H / KV query heads, qkv [T x H D + 2 KV D], exec_flash_*_gqa)
 * against the same reference, whose dK and dV sum over each group's query
 * heads; with the same tolerances.
 * Every kernel variant (modes) is checked; `--bench` also times each at
 * the GPT h4096 TP2 shape (batch 2, seq 2048, 16 heads of 128). No CUDA device: prints SKIP, exit 77. */
extern "C" {
#include "ts_error.h"
}
#include "exec_flash.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "exec_gpu_test.h"
#include "ops_variants.h"

/* The kernel variants (exec_flash.h): "default" the defaults (two-stage
 * 128-query forward, 128-key backward with exp2_ftz, longest tiles of every
 * head launched first, 16-byte row sums clearing the dQ accumulator); "fa128"
 * the defaults until 2026-11-30 05:15 UTC (one-stage forward, exp2f backward,
 * 4-byte row sums and a memset, one head's tiles launched together);
 * "fa128-lpt" those kernels in the new launch order and "new-head" the new
 * kernels in the old one (to tell the two changes apart); "v1" the 64-row
 * kernels, "v1-8w" with the 8-warp backward, "split" the two-pass backward,
 * "w8v4" the 8-warp forward with float4 dQ atomics. Each is "NAME VARIANT=VALUE..." (ops_variants.h). */
static const char *modes[][4] = {
    {"default", NULL},
    {"fa128", "flash-fwd=fa128", "flash-bwd=fa128", "flash-order=head"},
    {"fa128-lpt", "flash-fwd=fa128", "flash-bwd=fa128", NULL},
    {"new-head", "flash-order=head", NULL},
    {"v1", "flash-fwd=v1", "flash-bwd=v1", NULL},
    {"v1-8w", "flash-fwd=v1", "flash-bwd=v1", "flash-bwd-warps=8"},
    {"split", "flash-bwd=split", NULL},
    {"w8v4", "flash-fwd=w8", "flash-bwd=v4", NULL},
};
static const int n_modes = (int)(sizeof modes / sizeof modes[0]);
static int cur_mode;
static const char *mode_name(void) { return modes[cur_mode][0]; }
static void set_mode(int mode) {
  cur_mode = mode;
  ops_variant_reset();
  for (int i = 1; i < 4 && modes[mode][i]; i++) {
    ts_err e;
    if (ops_variant_set(modes[mode][i], &e)) {
      fprintf(stderr, "test_exec_flash_gpu: %s\n", e.msg);
      exit(1);
    }
  }
}
static int find_mode(const char *name) {
  for (int m = 0; m < n_modes; m++)
    if (strcmp(modes[m][0], name) == 0) return m;
  return -1;
}

static int run_case_kv(int B, int S, int H, int KV, int D) {
  const long long hl = (long long)H * D, kvl = (long long)KV * D, ld = hl + 2 * kvl, T = (long long)B * S;
  const int G = H / KV;
  std::vector<uint16_t> qkv(T * ld), dout(T * hl);
  for (long long i = 0; i < T; i++)
    for (long long c = 0; c < ld; c++) /* Q, K wider than V so that some rows have a sharp softmax */
      qkv[i * ld + c] = to_bf16((float)((urand() * 2 - 1) * (c < hl + kvl ? 2.0 : 1.0)));
  for (auto &x : dout) x = to_bf16((float)(urand() * 2 - 1));

  /* float64 reference */
  const double scale = 1.0 / sqrt((double)D);
  std::vector<double> O(T * hl), dQKV(T * ld, 0.0), LSE((size_t)B * H * S);
  std::vector<double> P((size_t)S * S), dP((size_t)S * S);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      auto q = [&](int s, int d) { return from_bf16(qkv[((long long)b * S + s) * ld + h * D + d]); };
      const long long kc = hl + (long long)(h / G) * D, vc = kc + kvl; /* the group's key/value head */
      auto k = [&](int s, int d) { return from_bf16(qkv[((long long)b * S + s) * ld + kc + d]); };
      auto v = [&](int s, int d) { return from_bf16(qkv[((long long)b * S + s) * ld + vc + d]); };
      auto dO = [&](int s, int d) { return from_bf16(dout[((long long)b * S + s) * hl + h * D + d]); };
      for (int i = 0; i < S; i++) {
        double mx = -INFINITY;
        for (int j = 0; j <= i; j++) {
          double acc = 0;
          for (int d = 0; d < D; d++) acc += q(i, d) * k(j, d);
          P[(size_t)i * S + j] = acc * scale;
          if (acc * scale > mx) mx = acc * scale;
        }
        double sum = 0;
        for (int j = 0; j <= i; j++) sum += exp(P[(size_t)i * S + j] - mx);
        for (int j = 0; j <= i; j++) P[(size_t)i * S + j] = exp(P[(size_t)i * S + j] - mx) / sum;
        LSE[((size_t)b * H + h) * S + i] = (mx + log(sum)) / log(2.0);
        for (int d = 0; d < D; d++) {
          double acc = 0;
          for (int j = 0; j <= i; j++) acc += P[(size_t)i * S + j] * v(j, d);
          O[((long long)b * S + i) * hl + h * D + d] = acc;
        }
      }
      for (int i = 0; i < S; i++) {
        double rs = 0;
        for (int j = 0; j <= i; j++) {
          double acc = 0;
          for (int d = 0; d < D; d++) acc += dO(i, d) * v(j, d);
          dP[(size_t)i * S + j] = acc;
          rs += acc * P[(size_t)i * S + j];
        }
        for (int j = 0; j <= i; j++) dP[(size_t)i * S + j] = scale * P[(size_t)i * S + j] * (dP[(size_t)i * S + j] - rs);
      }
      for (int i = 0; i < S; i++)
        for (int d = 0; d < D; d++) {
          double dq = 0, dk = 0, dv = 0;
          for (int j = 0; j <= i; j++) dq += dP[(size_t)i * S + j] * k(j, d);
          for (int j = i; j < S; j++) {
            dk += dP[(size_t)j * S + i] * q(j, d);
            dv += P[(size_t)j * S + i] * dO(j, d);
          }
          long long r = ((long long)b * S + i) * ld;
          dQKV[r + h * D + d] = dq;
          dQKV[r + kc + d] += dk; /* summed over the group's query heads */
          dQKV[r + vc + d] += dv;
        }
    }

  /* GPU */
  void *d_qkv, *d_out, *d_dout, *d_dqkv;
  float *d_lse, *d_dsum;
  CK(cudaMalloc(&d_qkv, qkv.size() * 2));
  CK(cudaMalloc(&d_out, T * hl * 2));
  CK(cudaMalloc(&d_dout, T * hl * 2));
  CK(cudaMalloc(&d_dqkv, T * ld * 2));
  CK(cudaMalloc(&d_lse, LSE.size() * 4));
  CK(cudaMalloc(&d_dsum, exec_flash_bwd_scratch_floats(B, S, H, D) * 4));
  CK(cudaMemcpy(d_qkv, qkv.data(), qkv.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_dout, dout.data(), dout.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(d_out, 0xff, T * hl * 2)); /* BF16 0xffff and FP32 0xffffffff are NaN */
  CK(cudaMemset(d_dqkv, 0xff, T * ld * 2));
  CK(cudaMemset(d_lse, 0xff, LSE.size() * 4));
  CK(cudaMemset(d_dsum, 0xff, exec_flash_bwd_scratch_floats(B, S, H, D) * 4));
  ts_err e = {};
  const int rc = KV == H ? exec_flash_fwd(d_qkv, d_out, d_lse, B, S, H, D, 0, &e) ||
                               exec_flash_bwd(d_qkv, d_out, d_dout, d_lse, d_dsum, d_dqkv, B, S, H, D, 0, &e)
                         : exec_flash_fwd_gqa(d_qkv, d_out, d_lse, B, S, H, KV, D, 0, &e) ||
                               exec_flash_bwd_gqa(d_qkv, d_out, d_dout, d_lse, d_dsum, d_dqkv, B, S, H, KV, D, 0, &e);
  if (rc) {
    fprintf(stderr, "FAIL: %s\n", e.msg);
    return 1;
  }
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> h_out(T * hl), h_dqkv(T * ld);
  std::vector<float> h_lse(LSE.size());
  CK(cudaMemcpy(h_out.data(), d_out, h_out.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h_dqkv.data(), d_dqkv, h_dqkv.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(h_lse.data(), d_lse, h_lse.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(d_qkv);
  cudaFree(d_out);
  cudaFree(d_dout);
  cudaFree(d_dqkv);
  cudaFree(d_lse);
  cudaFree(d_dsum);

  std::vector<double> gO(T * hl), rq, rk, rv, gq, gk, gv;
  for (size_t i = 0; i < gO.size(); i++) gO[i] = from_bf16(h_out[i]);
  for (long long r = 0; r < T; r++) {
    for (long long c = 0; c < hl; c++) {
      rq.push_back(dQKV[r * ld + c]);
      gq.push_back(from_bf16(h_dqkv[r * ld + c]));
    }
    for (long long c = 0; c < kvl; c++) {
      rk.push_back(dQKV[r * ld + hl + c]);
      rv.push_back(dQKV[r * ld + hl + kvl + c]);
      gk.push_back(from_bf16(h_dqkv[r * ld + hl + c]));
      gv.push_back(from_bf16(h_dqkv[r * ld + hl + kvl + c]));
    }
  }
  int bad = 0;
  double lse_err = 0;
  for (size_t i = 0; i < LSE.size(); i++) {
    if (!isfinite(h_lse[i])) bad++;
    double d = fabs(h_lse[i] - LSE[i]);
    if (!(d <= lse_err)) lse_err = d; /* NaN propagates */
  }
  double eo = rel_l2(O, gO, &bad), eq = rel_l2(rq, gq, &bad), ek = rel_l2(rk, gk, &bad), ev = rel_l2(rv, gv, &bad);
  const double tol = 1e-2, lse_tol = 1e-3;
  int ok = bad == 0 && eo <= tol && eq <= tol && ek <= tol && ev <= tol && lse_err <= lse_tol;
  printf("%s %-7s B=%d S=%d H=%d KV=%d D=%d: rel L2 O %.2e dQ %.2e dK %.2e dV %.2e, lse max abs %.2e, non-finite %d "
         "(tol %.0e, lse %.0e)\n",
         ok ? "ok  " : "FAIL", mode_name(), B, S, H, KV, D, eo, eq, ek, ev, lse_err, bad, tol, lse_tol);
  return ok ? 0 : 1;
}
static int run_case(int B, int S, int H, int D) { return run_case_kv(B, S, H, H, D); }

static void bench_kv(int B, int S, int H, int KV, int D) {
  const long long hl = (long long)H * D, ld = hl + 2LL * KV * D, T = (long long)B * S;
  void *qkv, *out, *dout, *dqkv;
  float *lse, *dsum;
  CK(cudaMalloc(&qkv, T * ld * 2));
  CK(cudaMalloc(&out, T * hl * 2));
  CK(cudaMalloc(&dout, T * hl * 2));
  CK(cudaMalloc(&dqkv, T * ld * 2));
  CK(cudaMalloc(&lse, (size_t)B * H * S * 4));
  CK(cudaMalloc(&dsum, exec_flash_bwd_scratch_floats(B, S, H, D) * 4));
  std::vector<uint16_t> h(T * ld);
  for (auto &x : h) x = to_bf16((float)(urand() * 2 - 1));
  CK(cudaMemcpy(qkv, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dout, h.data(), T * hl * 2, cudaMemcpyHostToDevice));
  cudaEvent_t a, b, c;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventCreate(&c));
  ts_err e = {};
  const int reps = 20;
  float fwd_ms = 0, bwd_ms = 0;
  for (int w = 0; w < 2; w++) { /* first round warms up */
    CK(cudaEventRecord(a));
    for (int i = 0; i < reps; i++)
      if (exec_flash_fwd_gqa(qkv, out, lse, B, S, H, KV, D, 0, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    CK(cudaEventRecord(b));
    for (int i = 0; i < reps; i++)
      if (exec_flash_bwd_gqa(qkv, out, dout, lse, dsum, dqkv, B, S, H, KV, D, 0, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    CK(cudaEventRecord(c));
    CK(cudaEventSynchronize(c));
    CK(cudaEventElapsedTime(&fwd_ms, a, b));
    CK(cudaEventElapsedTime(&bwd_ms, b, c));
  }
  /* causal FLOPs: half of 2 GEMMs (forward) and of 5 (backward's useful work) */
  double f = 2.0 * B * H * (double)S * S * D / 2;
  printf("bench %-7s B=%d S=%d H=%d KV=%d D=%d: forward %.1f us (%.0f TFLOP/s causal), backward %.1f us (%.0f TFLOP/s, "
         "5 GEMMs' worth)\n",
         mode_name(), B, S, H, KV, D, 1e3 * fwd_ms / reps, 2 * f / (fwd_ms / reps * 1e-3) / 1e12, 1e3 * bwd_ms / reps,
         5 * f / (bwd_ms / reps * 1e-3) / 1e12);
  cudaFree(qkv);
  cudaFree(out);
  cudaFree(dout);
  cudaFree(dqkv);
  cudaFree(lse);
  cudaFree(dsum);
}
static void bench(void) { bench_kv(2, 2048, 16, 16, 128); }

int main(int argc, char **argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  if (argc > 1 && strcmp(argv[1], "--bench-only") == 0) { /* timing alone (e.g. under a profiler) */
    if (argc < 3) {
      fprintf(stderr, "usage: test_exec_flash_gpu [--bench | --bench-gqa | --bench-only MODE...]\n");
      return 2;
    }
    for (int i = 2; i < argc; i++) {
      const int m = find_mode(argv[i]);
      if (m < 0) {
        fprintf(stderr, "test_exec_flash_gpu: unknown mode '%s'\n", argv[i]);
        return 2;
      }
      set_mode(m);
      bench();
    }
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "--bench-gqa") == 0) { /* default kernels: grouped against multi-head */
    set_mode(0);
    bench_kv(1, 4096, 32, 32, 128); /* Llama 3 8B at TP 1, as multi-head */
    bench_kv(1, 4096, 32, 8, 128);  /* its 8 key/value heads */
    bench_kv(2, 4096, 32, 8, 128);
    bench_kv(1, 4096, 64, 64, 128); /* Llama 3 70B at TP 1 */
    bench_kv(1, 4096, 64, 8, 128);
    bench_kv(2, 2048, 28, 4, 128); /* Qwen2.5 7B */
    bench_kv(2, 2048, 28, 28, 128);
    return 0;
  }
  int fails = 0;
  const int bench_on = argc > 1 && strcmp(argv[1], "--bench") == 0;
  for (int mode = 0; mode < n_modes; mode++) {
    set_mode(mode);
    fails += run_case(2, 128, 3, 32);
    fails += run_case(1, 192, 2, 64);
    fails += run_case(1, 128, 2, 64);
    fails += run_case(2, 256, 2, 64);
    fails += run_case(2, 256, 2, 128);
    fails += run_case(1, 384, 2, 128);
    fails += run_case(1, 64, 1, 128);
    /* grouped-query attention: groups of 2, 3 and 4, one key/value head for all (8) */
    fails += run_case_kv(2, 128, 4, 2, 32);
    fails += run_case_kv(1, 192, 6, 2, 64);
    fails += run_case_kv(2, 256, 4, 1, 64);
    fails += run_case_kv(1, 256, 8, 2, 128);
    fails += run_case_kv(1, 384, 8, 1, 128);
    if (bench_on) bench();
  }
  set_mode(0);
  ts_err e = {};
  if (exec_flash_fwd(NULL, NULL, NULL, 1, 100, 1, 128, 0, &e) == 0) {
    printf("FAIL: seq 100 accepted\n");
    fails++;
  } else {
    printf("ok   refused: %s\n", e.msg);
  }
  printf("%s\n", fails ? "FAILED" : "all passed");
  return fails ? 1 : 0;
}

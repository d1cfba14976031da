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
 * the GPT h4096 TP2 shape (batch 2, seq 2048, 16 heads of 128); `--bench-parts`
 * the grouped backward at P = 1 against the default P on zoo shapes.
 * The grouped backward with a group's query heads split over P CTAs
 * (exec_flash_bwd_parts; the small grouped cases above get P > 1 by default):
 * split_case runs P = 1, the automatic P, P = G forced and the minimum
 * scratch (P = 1) on shapes of one and a few key/value heads a rank, each
 * against the reference, the others against P = 1 (tolerance at
 * same_as_whole), and times P = 1 and the split side by side ("time" lines).
 * The reference runs on all CPU threads. No CUDA device: prints SKIP, exit 77. */
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
#include <atomic>
#include <thread>
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
 * "w8v4" the 8-warp forward with float4 dQ atomics, "ordered" --variant
 * reduce=ordered (the two-pass backward: no atomics). Each is "NAME VARIANT=VALUE..." (ops_variants.h). */
static const char *modes[][4] = {
    {"default", NULL},
    {"fa128", "flash-fwd=fa128", "flash-bwd=fa128", "flash-order=head"},
    {"fa128-lpt", "flash-fwd=fa128", "flash-bwd=fa128", NULL},
    {"new-head", "flash-order=head", NULL},
    {"v1", "flash-fwd=v1", "flash-bwd=v1", NULL},
    {"v1-8w", "flash-fwd=v1", "flash-bwd=v1", "flash-bwd-warps=8"},
    {"split", "flash-bwd=split", NULL},
    {"w8v4", "flash-fwd=w8", "flash-bwd=v4", NULL},
    {"ordered", "reduce=ordered", NULL},
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

/* One attention problem: BF16-exact random inputs and the float64 reference
 * (O, lse, and dQ | dK | dV in qkv's layout, dK and dV summed over each
 * group's query heads in head order). */
struct Case {
  int B, S, H, KV, D;
  long long hl, kvl, ld, T;
  std::vector<uint16_t> qkv, dout;
  std::vector<double> O, dQKV, LSE;
};

/* The reference of (batch b, head h) into c.O, c.LSE, c.dQKV's dQ columns,
 * and dk, dv ([S][D], this head's share of its group's dK, dV); P and dP are
 * S x S work arrays. */
static void reference_head(Case &c, int b, int h, std::vector<double> &P, std::vector<double> &dP, double *dk_h,
                           double *dv_h) {
  const int S = c.S, D = c.D, G = c.H / c.KV;
  const long long ld = c.ld, hl = c.hl;
  const double scale = 1.0 / sqrt((double)D);
  const long long kc = hl + (long long)(h / G) * D, vc = kc + c.kvl; /* the group's key/value head */
  auto q = [&](int s, int d) { return from_bf16(c.qkv[((long long)b * S + s) * ld + h * D + d]); };
  auto k = [&](int s, int d) { return from_bf16(c.qkv[((long long)b * S + s) * ld + kc + d]); };
  auto v = [&](int s, int d) { return from_bf16(c.qkv[((long long)b * S + s) * ld + vc + d]); };
  auto dO = [&](int s, int d) { return from_bf16(c.dout[((long long)b * S + s) * hl + h * D + d]); };
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
    c.LSE[((size_t)b * c.H + h) * S + i] = (mx + log(sum)) / log(2.0);
    for (int d = 0; d < D; d++) {
      double acc = 0;
      for (int j = 0; j <= i; j++) acc += P[(size_t)i * S + j] * v(j, d);
      c.O[((long long)b * S + i) * hl + h * D + d] = acc;
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
      c.dQKV[((long long)b * S + i) * ld + h * D + d] = dq;
      dk_h[(size_t)i * D + d] = dk;
      dv_h[(size_t)i * D + d] = dv;
    }
}

/* Fresh inputs and their reference; the (batch, head) pairs on all CPU
 * threads (each head's dK, dV share kept apart, then summed in head order). */
static void make_case(Case &c, int B, int S, int H, int KV, int D) {
  c.B = B, c.S = S, c.H = H, c.KV = KV, c.D = D;
  c.hl = (long long)H * D, c.kvl = (long long)KV * D, c.ld = c.hl + 2 * c.kvl, c.T = (long long)B * S;
  c.qkv.assign(c.T * c.ld, 0);
  c.dout.assign(c.T * c.hl, 0);
  for (long long i = 0; i < c.T; i++)
    for (long long col = 0; col < c.ld; col++) /* Q, K wider than V so that some rows have a sharp softmax */
      c.qkv[i * c.ld + col] = to_bf16((float)((urand() * 2 - 1) * (col < c.hl + c.kvl ? 2.0 : 1.0)));
  for (auto &x : c.dout) x = to_bf16((float)(urand() * 2 - 1));
  c.O.assign(c.T * c.hl, 0.0);
  c.dQKV.assign(c.T * c.ld, 0.0);
  c.LSE.assign((size_t)B * H * S, 0.0);
  const int tasks = B * H, G = H / KV;
  std::vector<double> dkh((size_t)tasks * S * D), dvh((size_t)tasks * S * D);
  std::atomic<int> next(0);
  int nthreads = (int)std::thread::hardware_concurrency();
  if (nthreads < 1) nthreads = 1;
  if (nthreads > tasks) nthreads = tasks;
  std::vector<std::thread> pool;
  for (int t = 0; t < nthreads; t++)
    pool.emplace_back([&]() {
      std::vector<double> P((size_t)S * S), dP((size_t)S * S);
      for (int task; (task = next++) < tasks;)
        reference_head(c, task / H, task % H, P, dP, &dkh[(size_t)task * S * D], &dvh[(size_t)task * S * D]);
    });
  for (auto &th : pool) th.join();
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const long long kc = c.hl + (long long)(h / G) * D, vc = kc + c.kvl;
      const double *dk = &dkh[((size_t)b * H + h) * S * D], *dv = &dvh[((size_t)b * H + h) * S * D];
      for (int i = 0; i < S; i++)
        for (int d = 0; d < D; d++) {
          const long long r = ((long long)b * S + i) * c.ld;
          c.dQKV[r + kc + d] += dk[(size_t)i * D + d]; /* summed over the group's query heads */
          c.dQKV[r + vc + d] += dv[(size_t)i * D + d];
        }
    }
}

/* What the kernels wrote, and the backward's P (exec_flash_bwd_parts). */
struct GpuOut {
  std::vector<uint16_t> out, dqkv;
  std::vector<float> lse;
  int parts;
};

/* Forward and backward on the GPU, outputs and scratch poisoned with NaN
 * first; the grouped backward gets exec_flash_bwd_gqa_scratch_floats() of
 * scratch (min_scratch: the minimum, exec_flash_bwd_scratch_floats(), P = 1). */
static int gpu_run(const Case &c, GpuOut &g, bool min_scratch = false) {
  const int B = c.B, S = c.S, H = c.H, KV = c.KV, D = c.D;
  const long long T = c.T, hl = c.hl, ld = c.ld;
  const long long sf = KV == H || min_scratch ? exec_flash_bwd_scratch_floats(B, S, H, D)
                                              : exec_flash_bwd_gqa_scratch_floats(B, S, H, KV, D);
  g.parts = exec_flash_bwd_parts(B, S, H, KV, D, sf);
  void *d_qkv, *d_out, *d_dout, *d_dqkv;
  float *d_lse, *d_scr;
  CK(cudaMalloc(&d_qkv, c.qkv.size() * 2));
  CK(cudaMalloc(&d_out, T * hl * 2));
  CK(cudaMalloc(&d_dout, T * hl * 2));
  CK(cudaMalloc(&d_dqkv, T * ld * 2));
  CK(cudaMalloc(&d_lse, c.LSE.size() * 4));
  CK(cudaMalloc(&d_scr, sf * 4));
  CK(cudaMemcpy(d_qkv, c.qkv.data(), c.qkv.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_dout, c.dout.data(), c.dout.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemset(d_out, 0xff, T * hl * 2)); /* BF16 0xffff and FP32 0xffffffff are NaN */
  CK(cudaMemset(d_dqkv, 0xff, T * ld * 2));
  CK(cudaMemset(d_lse, 0xff, c.LSE.size() * 4));
  CK(cudaMemset(d_scr, 0xff, sf * 4));
  ts_err e = {};
  const int rc = KV == H ? exec_flash_fwd(d_qkv, d_out, d_lse, B, S, H, D, 0, &e) ||
                               exec_flash_bwd(d_qkv, d_out, d_dout, d_lse, d_scr, d_dqkv, B, S, H, D, 0, &e)
                         : exec_flash_fwd_gqa(d_qkv, d_out, d_lse, B, S, H, KV, D, 0, &e) ||
                               exec_flash_bwd_gqa(d_qkv, d_out, d_dout, d_lse, d_scr, sf, d_dqkv, B, S, H, KV, D, 0, &e);
  if (rc) {
    fprintf(stderr, "FAIL: %s\n", e.msg);
    return 1;
  }
  CK(cudaDeviceSynchronize());
  g.out.resize(T * hl);
  g.dqkv.resize(T * ld);
  g.lse.resize(c.LSE.size());
  CK(cudaMemcpy(g.out.data(), d_out, g.out.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(g.dqkv.data(), d_dqkv, g.dqkv.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(g.lse.data(), d_lse, g.lse.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(d_qkv);
  cudaFree(d_out);
  cudaFree(d_dout);
  cudaFree(d_dqkv);
  cudaFree(d_lse);
  cudaFree(d_scr);
  return 0;
}

/* The GPU's results against the float64 reference (tolerances in the header comment). */
static int check_case(const Case &c, const GpuOut &g, const char *label) {
  const long long T = c.T, hl = c.hl, kvl = c.kvl, ld = c.ld;
  std::vector<double> gO(T * hl), rq, rk, rv, gq, gk, gv;
  for (size_t i = 0; i < gO.size(); i++) gO[i] = from_bf16(g.out[i]);
  for (long long r = 0; r < T; r++) {
    for (long long col = 0; col < hl; col++) {
      rq.push_back(c.dQKV[r * ld + col]);
      gq.push_back(from_bf16(g.dqkv[r * ld + col]));
    }
    for (long long col = 0; col < kvl; col++) {
      rk.push_back(c.dQKV[r * ld + hl + col]);
      rv.push_back(c.dQKV[r * ld + hl + kvl + col]);
      gk.push_back(from_bf16(g.dqkv[r * ld + hl + col]));
      gv.push_back(from_bf16(g.dqkv[r * ld + hl + kvl + col]));
    }
  }
  int bad = 0;
  double lse_err = 0;
  for (size_t i = 0; i < c.LSE.size(); i++) {
    if (!isfinite(g.lse[i])) bad++;
    double d = fabs(g.lse[i] - c.LSE[i]);
    if (!(d <= lse_err)) lse_err = d; /* NaN propagates */
  }
  double eo = rel_l2(c.O, gO, &bad), eq = rel_l2(rq, gq, &bad), ek = rel_l2(rk, gk, &bad), ev = rel_l2(rv, gv, &bad);
  const double tol = 1e-2, lse_tol = 1e-3;
  int ok = bad == 0 && eo <= tol && eq <= tol && ek <= tol && ev <= tol && lse_err <= lse_tol;
  printf("%s %-7s B=%d S=%d H=%d KV=%d D=%d P=%d: rel L2 O %.2e dQ %.2e dK %.2e dV %.2e, lse max abs %.2e, "
         "non-finite %d (tol %.0e, lse %.0e)\n",
         ok ? "ok  " : "FAIL", label, c.B, c.S, c.H, c.KV, c.D, g.parts, eo, eq, ek, ev, lse_err, bad, tol, lse_tol);
  return ok ? 0 : 1;
}

static int run_case_kv(int B, int S, int H, int KV, int D) {
  Case c;
  make_case(c, B, S, H, KV, D);
  GpuOut g;
  if (gpu_run(c, g)) return 1;
  return check_case(c, g, mode_name());
}
static int run_case(int B, int S, int H, int D) { return run_case_kv(B, S, H, H, D); }

/* Times forward and backward (20 launches each after a warm-up round, CUDA
 * events) with the grouped backward's full scratch; prints a line and
 * returns the backward's microseconds (the forward's in *fwd_us). */
static double bench_kv(int B, int S, int H, int KV, int D, double *fwd_us = NULL) {
  const long long hl = (long long)H * D, ld = hl + 2LL * KV * D, T = (long long)B * S;
  const long long sf = exec_flash_bwd_gqa_scratch_floats(B, S, H, KV, D);
  void *qkv, *out, *dout, *dqkv;
  float *lse, *dsum;
  CK(cudaMalloc(&qkv, T * ld * 2));
  CK(cudaMalloc(&out, T * hl * 2));
  CK(cudaMalloc(&dout, T * hl * 2));
  CK(cudaMalloc(&dqkv, T * ld * 2));
  CK(cudaMalloc(&lse, (size_t)B * H * S * 4));
  CK(cudaMalloc(&dsum, sf * 4));
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
      if (exec_flash_bwd_gqa(qkv, out, dout, lse, dsum, sf, dqkv, B, S, H, KV, D, 0, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    CK(cudaEventRecord(c));
    CK(cudaEventSynchronize(c));
    CK(cudaEventElapsedTime(&fwd_ms, a, b));
    CK(cudaEventElapsedTime(&bwd_ms, b, c));
  }
  /* causal FLOPs: half of 2 GEMMs (forward) and of 5 (backward's useful work) */
  double f = 2.0 * B * H * (double)S * S * D / 2;
  printf("bench %-7s B=%d S=%d H=%d KV=%d D=%d P=%d: forward %.1f us (%.0f TFLOP/s causal), backward %.1f us (%.0f "
         "TFLOP/s, 5 GEMMs' worth)\n",
         mode_name(), B, S, H, KV, D, exec_flash_bwd_parts(B, S, H, KV, D, sf), 1e3 * fwd_ms / reps,
         2 * f / (fwd_ms / reps * 1e-3) / 1e12, 1e3 * bwd_ms / reps, 5 * f / (bwd_ms / reps * 1e-3) / 1e12);
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  CK(cudaEventDestroy(c));
  cudaFree(qkv);
  cudaFree(out);
  cudaFree(dout);
  cudaFree(dqkv);
  cudaFree(lse);
  cudaFree(dsum);
  if (fwd_us) *fwd_us = 1e3 * fwd_ms / reps;
  return 1e3 * bwd_ms / reps;
}

/* Sets the default variants and one more ("NAME=VALUE"). */
static void set_variant(const char *v) {
  set_mode(0);
  ts_err e;
  if (ops_variant_set(v, &e)) {
    fprintf(stderr, "test_exec_flash_gpu: %s\n", e.msg);
    exit(1);
  }
}

/* P > 1 against P = 1 (the same inputs): the forward is untouched (O, lse
 * bitwise equal); dQ | dK | dV may differ by the FP32 summation order of the
 * parts (dK, dV) and of the dQ atomics (in any run) before their BF16
 * rounding: at most one BF16 unit in the last place, |x - y| <= 2^-7
 * max(|x|, |y|), plus 1e-5 of the largest reference gradient for sums that
 * cancel. */
static int same_as_whole(const Case &c, const GpuOut &g, const GpuOut &w, const char *label) {
  const bool fwd_same = g.out == w.out && memcmp(g.lse.data(), w.lse.data(), g.lse.size() * 4) == 0;
  double big = 0;
  for (double x : c.dQKV) big = fmax(big, fabs(x));
  long long differ = 0, over = 0;
  for (size_t i = 0; i < g.dqkv.size(); i++) {
    const double x = from_bf16(g.dqkv[i]), y = from_bf16(w.dqkv[i]);
    differ += g.dqkv[i] != w.dqkv[i];
    if (!(fabs(x - y) <= ldexp(fmax(fabs(x), fabs(y)), -7) + 1e-5 * big)) over++;
  }
  const int ok = fwd_same && over == 0;
  printf("%s %-7s B=%d S=%d H=%d KV=%d D=%d P=%d against P=%d: forward %s, dQKV elements differing %lld of %zu, "
         "beyond 1 BF16 ulp + 1e-5 max|ref| %lld\n",
         ok ? "ok  " : "FAIL", label, c.B, c.S, c.H, c.KV, c.D, g.parts, w.parts, fwd_same ? "identical" : "DIFFERS",
         differ, g.dqkv.size(), over);
  return ok;
}

/* The split backward (exec_flash_bwd_parts) on one shape: P = 1
 * (--variant flash-bwd-parts=1), the automatic P, P = G forced, and the
 * automatic P with the minimum scratch (P falls back to 1), each against the
 * float64 reference, the split ones against P = 1; then the timings of P = 1
 * and the split side by side. */
static int split_case(int B, int S, int H, int KV, int D) {
  Case c;
  make_case(c, B, S, H, KV, D);
  const int G = H / KV;
  char forced[40];
  snprintf(forced, sizeof forced, "flash-bwd-parts=%d", G);
  const char *cfg[3] = {"flash-bwd-parts=1", "flash-bwd-parts=0", forced}, *label[4] = {"P=1", "auto", "P=G", "min-scr"};
  GpuOut g[4];
  int fails = 0;
  for (int i = 0; i < 4; i++) {
    set_variant(cfg[i < 3 ? i : 1]);
    if (gpu_run(c, g[i], i == 3)) return fails + 1;
    fails += check_case(c, g[i], label[i]);
  }
  if (g[0].parts != 1 || g[3].parts != 1 || g[2].parts != G) {
    printf("FAIL split B=%d S=%d H=%d KV=%d D=%d: P %d (parts=1), %d (minimum scratch), %d (parts=%d) expected 1, 1, %d\n",
           B, S, H, KV, D, g[0].parts, g[3].parts, g[2].parts, G, G);
    fails++;
  }
  for (int i = 1; i < 4; i++) fails += !same_as_whole(c, g[i], g[0], label[i]);
  double f1, fs, t1, ts;
  set_variant(cfg[0]);
  t1 = bench_kv(B, S, H, KV, D, &f1);
  set_variant(g[1].parts > 1 ? cfg[1] : cfg[2]);
  ts = bench_kv(B, S, H, KV, D, &fs);
  printf("time B=%d S=%d H=%d KV=%d D=%d: backward P=1 %.1f us, P=%d (%s) %.1f us: %.2fx; forward %.1f / %.1f us\n",
         B, S, H, KV, D, t1, g[1].parts > 1 ? g[1].parts : G, g[1].parts > 1 ? "automatic" : "forced", ts, t1 / ts, f1, fs);
  set_mode(0);
  return fails;
}

static void bench(void) { bench_kv(2, 2048, 16, 16, 128); }

/* --bench-parts: the backward at P = 1 (--variant flash-bwd-parts=1) and at
 * the default rule's P, on grouped shapes of the zoo's attention sweep
 * (runtime/calibrate/calibrate_attn.c: Llama 3 8B / 70B, Qwen2.5 7B / 14B /
 * 32B / 72B at TP 1-8, micro-batch 1-4, seq 2048-8192); "parts" lines. */
static void bench_parts(void) {
  static const int shapes[][4] = {/* B, S, H, KV (head_dim 128) */
                                  {1, 4096, 32, 8}, {2, 4096, 28, 4}, {1, 4096, 64, 8}, {1, 4096, 40, 8},
                                  {4, 2048, 28, 4}, {1, 4096, 28, 4},  {1, 4096, 16, 4}, {1, 4096, 8, 2},
                                  {1, 4096, 8, 1},  {2, 4096, 8, 1},   {1, 8192, 8, 1},  {1, 2048, 8, 1},
                                  {4, 2048, 8, 1},  {1, 4096, 7, 1},   {1, 4096, 14, 2}, {1, 4096, 5, 1},
                                  {1, 4096, 10, 2}, {1, 4096, 6, 1},   {1, 4096, 16, 1}, {1, 8192, 16, 1},
                                  {1, 4096, 4, 1},  {2, 2048, 16, 2},  {1, 4096, 32, 2}, {1, 2048, 64, 8}};
  for (const auto &x : shapes) {
    double f1, fa;
    set_variant("flash-bwd-parts=1");
    const double t1 = bench_kv(x[0], x[1], x[2], x[3], 128, &f1);
    set_variant("flash-bwd-parts=0");
    const double ta = bench_kv(x[0], x[1], x[2], x[3], 128, &fa);
    const long long sf = exec_flash_bwd_gqa_scratch_floats(x[0], x[1], x[2], x[3], 128);
    printf("parts B=%d S=%d H=%d KV=%d D=128: P=%d; backward P=1 %.1f us, default %.1f us (%.2fx); forward %.1f us\n",
           x[0], x[1], x[2], x[3], exec_flash_bwd_parts(x[0], x[1], x[2], x[3], 128, sf), t1, ta, t1 / ta, fa);
  }
  set_mode(0);
}

int main(int argc, char **argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  if (argc > 1 && strcmp(argv[1], "--bench-only") == 0) { /* timing alone (e.g. under a profiler) */
    if (argc < 3) {
      fprintf(stderr, "usage: test_exec_flash_gpu [--bench | --bench-gqa | --bench-parts | --bench-only MODE...]\n");
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
  if (argc > 1 && strcmp(argv[1], "--bench-parts") == 0) {
    set_mode(0);
    bench_parts();
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
  /* grouped heads split over P CTAs in the backward: Llama 3 70B at TP 8 (one
   * key/value head a rank), Qwen2.5 7B (groups of 7; P = 1 automatic on a
   * full grid, P = 7 forced), head_dim 64 */
  fails += split_case(1, 4096, 8, 1, 128);
  fails += split_case(2, 2048, 28, 4, 128);
  fails += split_case(1, 1024, 8, 2, 64);
  set_mode(0);
  ts_err e = {};
  if (exec_flash_bwd_parts(1, 384, 8, 1, 128, 1LL * 8 * 384 * 384 / 2) != 1 ||
      exec_flash_bwd_parts(1, 384, 8, 1, 128, exec_flash_bwd_scratch_floats(1, 384, 8, 128)) != 1 ||
      exec_flash_bwd_parts(1, 384, 8, 1, 128, exec_flash_bwd_gqa_scratch_floats(1, 384, 8, 1, 128)) != 8) {
    printf("FAIL: P at seq 384 with the executor's lent scratch, the minimum and the full one: %d, %d, %d (expected 1, "
           "1, 8)\n",
           exec_flash_bwd_parts(1, 384, 8, 1, 128, 1LL * 8 * 384 * 384 / 2),
           exec_flash_bwd_parts(1, 384, 8, 1, 128, exec_flash_bwd_scratch_floats(1, 384, 8, 128)),
           exec_flash_bwd_parts(1, 384, 8, 1, 128, exec_flash_bwd_gqa_scratch_floats(1, 384, 8, 1, 128)));
    fails++;
  } else {
    printf("ok   P at seq 384 (H 8, KV 1, D 128): 1 in the executor's lent scratch and in the minimum, 8 in the full one\n");
  }
  if (exec_flash_fwd(NULL, NULL, NULL, 1, 100, 1, 128, 0, &e) == 0) {
    printf("FAIL: seq 100 accepted\n");
    fails++;
  } else {
    printf("ok   refused: %s\n", e.msg);
  }
  printf("%s\n", fails ? "FAILED" : "all passed");
  return fails ? 1 : 0;
}

/* test_kernels_gpu.cu — the CUDA kernels against the plain-C reference on
 * fresh random inputs (no CUnit: the GPU machine has none).
 *
 * Tolerance. The kernels follow the reference's order of operations (taco_ref.h),
 * so the expected result is bit-exact; the test still accepts, and reports,
 * FP8 codes that differ by at most 1 in at most 0.01% of the elements, scales
 * within 2^-22 relative, and decoded values within 2^-20 of the tensor's
 * largest magnitude, so that a harmless change of summation order shows up as
 * a counted difference rather than a failure. Outputs are poisoned before each
 * run (FP8 0x7F and NaN scales, NaN outputs: values the codec never writes)
 * and every element is checked written; bytes past the end are checked
 * untouched.
 *
 * Exit status: 0 pass, 1 fail, 77 no CUDA device (CTest's skip). */
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

#include "taco_codec.h"
#include "taco_fp8.h"
#include "taco_internal.h"
#include "taco_ref.h"
#include "taco_gpu_test.h"


static int failures = 0, checks = 0;
static unsigned long long total_elems = 0, total_code_diffs = 0, total_decode_diffs = 0;

static void expect(bool ok, const char *what, const char *ctx) {
  checks++;
  if (!ok) {
    failures++;
    printf("FAIL: %s [%s]\n", what, ctx);
  }
}

/* ---- FP8 conversion: hardware against the reference, every float ---- */

__global__ void fp8_all_floats(unsigned long long *bad, unsigned *first_bad) {
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32);
       i += (unsigned long long)gridDim.x * blockDim.x) {
    float f = __uint_as_float((unsigned)i);
    unsigned char hw4 = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
    unsigned char hw5 = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2);
    if (hw4 != taco_fp8_e4m3_from_float(f) || hw5 != taco_fp8_e5m2_from_float(f)) {
      if (atomicAdd(bad, 1ull) == 0) *first_bad = (unsigned)i;
    }
  }
}

static void test_fp8_exhaustive(void) {
  unsigned long long *bad;
  unsigned *first;
  CHECK_CUDA(cudaMalloc(&bad, 8));
  CHECK_CUDA(cudaMalloc(&first, 4));
  CHECK_CUDA(cudaMemset(bad, 0, 8));
  fp8_all_floats<<<132 * 16, 256>>>(bad, first);
  CHECK_CUDA(cudaGetLastError());
  unsigned long long h = 0;
  unsigned f = 0;
  CHECK_CUDA(cudaMemcpy(&h, bad, 8, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&f, first, 4, cudaMemcpyDeviceToHost));
  printf("fp8: hardware cvt.rn.satfinite vs reference over all 2^32 floats, E4M3 and E5M2: %llu mismatches%s\n", h,
         h ? "" : " (bit-exact)");
  if (h) printf("     first mismatch at float bits 0x%08x\n", f);
  expect(h == 0, "fp8 conversion matches the reference on every float", "exhaustive");
  CHECK_CUDA(cudaFree(bad));
  CHECK_CUDA(cudaFree(first));
}

/* ---- inputs ---- */

enum dist { D_NORMAL, D_OUTLIERS, D_ZERO_GROUPS, D_NONFINITE, D_DENORMAL, D_HUGE, D_COUNT };
static const char *dist_names[] = {"normal", "outliers", "zero-groups", "inf-nan", "denormal", "huge"};

static void make_input(std::vector<float> &x, size_t n, dist d, int g, uint64_t seed) {
  size_t cols = 1024, rows = (n + cols - 1) / cols;
  x.assign(rows * cols, 0.0f);
  taco_fill_dist(x.data(), rows, cols, d == D_OUTLIERS ? TACO_DIST_OUTLIERS : TACO_DIST_GAUSSIAN, seed);
  x.resize(n);
  taco_rng r = {seed ^ 0xABCDEFull};
  if (d == D_ZERO_GROUPS)
    for (size_t i = 0; i < n; i++)
      if ((i / (size_t)g) % 3 == 1) x[i] = 0.0f;
  if (d == D_NONFINITE) {
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    size_t count = n / 5000 + 2;
    for (size_t k = 0; k < count; k++) x[taco_rng_next(&r) % n] = bad[k % 3];
  }
  if (d == D_HUGE) /* every other group beyond TACO_PRESCALE_ABOVE (scaled before the transform) */
    for (size_t i = 0; i < n; i++)
      if ((i / (size_t)g) % 2 == 0) x[i] *= 1e17f;
  if (d == D_DENORMAL) /* every other group: float denormals; some single denormals elsewhere */
    for (size_t i = 0; i < n; i++)
      if ((i / (size_t)g) % 2 == 0)
        x[i] = (float)(taco_rng_normal(&r) * 1e-39);
      else if (i % 97 == 0)
        x[i] = 3e-40f;
}

struct host_input {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  const void *ptr(taco_dtype dt) const { return dt == TACO_DTYPE_BF16 ? (const void *)bf16.data() : f32.data(); }
};

static size_t esize(taco_dtype dt) { return dt == TACO_DTYPE_BF16 ? 2 : 4; }

static void *dev_upload(const void *h, size_t bytes) {
  void *d;
  CHECK_CUDA(cudaMalloc(&d, bytes + 64));
  CHECK_CUDA(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}

/* ---- comparisons ---- */

static int code_order(uint8_t c) { return (c & 0x80) ? -(int)(c & 0x7F) : (int)(c & 0x7F); }

/* blocks of n elements: codes, scales, and poison left behind */
static void compare_blocks(const uint8_t *got, const uint8_t *want, size_t n, int g, const char *ctx) {
  size_t ng = taco_groups(n, g), payload = ng * (size_t)g, diffs = 0, unwritten = 0;
  int maxd = 0;
  for (size_t i = 0; i < payload; i++) {
    if (got[i] == 0x7F) unwritten++;
    if (got[i] != want[i]) {
      diffs++;
      int d = abs(code_order(got[i]) - code_order(want[i]));
      maxd = d > maxd ? d : maxd;
    }
  }
  const float *gs = (const float *)(got + payload), *ws = (const float *)(want + payload);
  double max_rel = 0;
  size_t scale_unwritten = 0;
  for (size_t i = 0; i < 2 * ng; i++) {
    if (isnan(gs[i])) scale_unwritten++;
    double rel = ws[i] != 0.0f ? fabs((double)gs[i] - ws[i]) / fabs((double)ws[i]) : fabs((double)gs[i]);
    max_rel = rel > max_rel ? rel : max_rel;
  }
  total_elems += payload;
  total_code_diffs += diffs;
  char what[256];
  snprintf(what, sizeof what, "payload: %zu of %zu codes differ (max %d), %zu unwritten", diffs, payload, maxd,
           unwritten);
  expect(unwritten == 0 && maxd <= 1 && (double)diffs <= 1e-4 * (double)payload, what, ctx);
  snprintf(what, sizeof what, "scales: max rel diff %.3g, %zu unwritten", max_rel, scale_unwritten);
  expect(scale_unwritten == 0 && max_rel <= 2.4e-7, what, ctx);
}

/* decoded outputs (n elements of dt) plus 64 guard bytes */
static void compare_outputs(const uint8_t *got, const uint8_t *want, size_t n, taco_dtype dt, const char *ctx) {
  double maxref = 0, maxdiff = 0;
  size_t diffs = 0, unwritten = 0, guard = 0;
  for (size_t i = 0; i < n; i++) {
    float a, b;
    if (dt == TACO_DTYPE_BF16) {
      a = taco_bf16_to_float(((const uint16_t *)got)[i]);
      b = taco_bf16_to_float(((const uint16_t *)want)[i]);
    } else {
      a = ((const float *)got)[i];
      b = ((const float *)want)[i];
    }
    if (isnan(a)) unwritten++;
    if (memcmp(&a, &b, sizeof a)) diffs++;
    maxref = fmax(maxref, fabs((double)b));
    maxdiff = fmax(maxdiff, fabs((double)a - b));
  }
  for (size_t i = n * esize(dt); i < n * esize(dt) + 64; i++) guard += got[i] != 0xFF;
  total_decode_diffs += diffs;
  char what[256];
  snprintf(what, sizeof what, "decode: %zu of %zu differ (max abs %.3g, max |ref| %.3g), %zu unwritten, %zu guard bytes hit",
           diffs, n, maxdiff, maxref, unwritten, guard);
  expect(unwritten == 0 && guard == 0 && maxdiff <= maxref * 9.5e-7, what, ctx);
}

/* ---- one case: encode, decode, non-finite report ---- */

static void run_case(size_t n, int g, taco_fp8 f, taco_dtype dt, dist d, uint64_t seed) {
  char ctx[160];
  snprintf(ctx, sizeof ctx, "n=%zu G=%d %s %s %s seed=%llu", n, g, f == TACO_FP8_E4M3 ? "e4m3" : "e5m2",
           dt == TACO_DTYPE_BF16 ? "bf16" : "fp32", dist_names[d], (unsigned long long)seed);
  taco_params p = {g, f};
  host_input in;
  make_input(in.f32, n, d, g, seed);
  if (dt == TACO_DTYPE_BF16) {
    in.bf16.resize(n);
    for (size_t i = 0; i < n; i++) in.bf16[i] = taco_bf16_from_float(in.f32[i]);
  }
  size_t wire = taco_wire_bytes(n, g), payload = taco_groups(n, g) * (size_t)g;
  std::vector<uint8_t> want(wire), got(wire);
  taco_nonfinite nf_ref = {0, ~0ull};
  CHECK_TACO(taco_ref_encode(in.ptr(dt), dt, n, p, want.data(), &nf_ref));

  void *dx = dev_upload(in.ptr(dt), n * esize(dt));
  uint8_t *dblk;
  taco_nonfinite *dnf;
  CHECK_CUDA(cudaMalloc(&dblk, wire + 64));
  CHECK_CUDA(cudaMalloc(&dnf, sizeof *dnf));
  CHECK_CUDA(cudaMemset(dblk, 0x7F, payload));
  CHECK_CUDA(cudaMemset(dblk + payload, 0xFF, wire - payload));
  CHECK_TACO(taco_nonfinite_reset(dnf, NULL));
  CHECK_TACO(taco_encode(dx, dt, n, p, dblk, dnf, NULL));
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(got.data(), dblk, wire, cudaMemcpyDeviceToHost));
  compare_blocks(got.data(), want.data(), n, g, ctx);
  taco_nonfinite nf;
  CHECK_CUDA(cudaMemcpy(&nf, dnf, sizeof nf, cudaMemcpyDeviceToHost));
  char what[160];
  snprintf(what, sizeof what, "non-finite: gpu %llu first %llu, ref %llu first %llu", nf.count, nf.first_index,
           (unsigned long long)nf_ref.count, (unsigned long long)nf_ref.first_index);
  expect(nf.count == nf_ref.count && (nf.count == 0 || nf.first_index == nf_ref.first_index), what, ctx);

  /* decode the reference block (tests decode on its own), both output types */
  CHECK_CUDA(cudaMemcpy(dblk, want.data(), wire, cudaMemcpyHostToDevice));
  for (int o = 0; o < 2; o++) {
    taco_dtype odt = o ? TACO_DTYPE_FP32 : TACO_DTYPE_BF16;
    size_t ob = n * esize(odt);
    std::vector<uint8_t> yref(ob + 64, 0xFF), ygpu(ob + 64);
    CHECK_TACO(taco_ref_decode(want.data(), n, p, yref.data(), odt));
    void *dy;
    CHECK_CUDA(cudaMalloc(&dy, ob + 64));
    CHECK_CUDA(cudaMemset(dy, 0xFF, ob + 64));
    CHECK_TACO(taco_decode(dblk, n, p, dy, odt, NULL));
    CHECK_CUDA(cudaMemcpy(ygpu.data(), dy, ob + 64, cudaMemcpyDeviceToHost));
    compare_outputs(ygpu.data(), yref.data(), n, odt, ctx);
    CHECK_CUDA(cudaFree(dy));
  }
  /* unfused passes give the same block on finite input */
  if (d != D_NONFINITE) {
    void *work;
    CHECK_CUDA(cudaMalloc(&work, taco_unfused_workspace_bytes(n, g)));
    CHECK_CUDA(cudaMemset(dblk, 0x7F, payload));
    CHECK_CUDA(cudaMemset(dblk + payload, 0xFF, wire - payload));
    CHECK_TACO(taco_encode_unfused(dx, dt, n, p, dblk, work, NULL));
    CHECK_CUDA(cudaMemcpy(got.data(), dblk, wire, cudaMemcpyDeviceToHost));
    char c2[200];
    snprintf(c2, sizeof c2, "%s unfused", ctx);
    compare_blocks(got.data(), want.data(), n, g, c2);
    CHECK_CUDA(cudaFree(work));
  }
  CHECK_CUDA(cudaFree(dx));
  CHECK_CUDA(cudaFree(dblk));
  CHECK_CUDA(cudaFree(dnf));
}

/* ---- decode-sum and decode-sum-encode of k blocks ---- */

static void run_sum_case(size_t n, int g, taco_fp8 f, int k, uint64_t seed) {
  char ctx[160];
  snprintf(ctx, sizeof ctx, "decode-sum k=%d n=%zu G=%d %s seed=%llu", k, n, g, f == TACO_FP8_E4M3 ? "e4m3" : "e5m2",
           (unsigned long long)seed);
  taco_params p = {g, f};
  size_t wire = taco_wire_bytes(n, g), payload = taco_groups(n, g) * (size_t)g;
  std::vector<uint8_t> blocks(wire * (size_t)k);
  std::vector<float> x;
  for (int b = 0; b < k; b++) {
    make_input(x, n, b % 2 ? D_OUTLIERS : D_NORMAL, g, seed + (uint64_t)b);
    CHECK_TACO(taco_ref_encode(x.data(), TACO_DTYPE_FP32, n, p, blocks.data() + (size_t)b * wire, NULL));
  }
  void *din = dev_upload(blocks.data(), blocks.size());
  for (int o = 0; o < 2; o++) {
    taco_dtype odt = o ? TACO_DTYPE_FP32 : TACO_DTYPE_BF16;
    size_t ob = n * esize(odt);
    std::vector<uint8_t> yref(ob + 64, 0xFF), ygpu(ob + 64);
    CHECK_TACO(taco_ref_decode_sum(blocks.data(), k, n, p, yref.data(), odt));
    void *dy;
    CHECK_CUDA(cudaMalloc(&dy, ob + 64));
    CHECK_CUDA(cudaMemset(dy, 0xFF, ob + 64));
    CHECK_TACO(taco_decode_sum(din, k, n, p, dy, odt, NULL));
    CHECK_CUDA(cudaMemcpy(ygpu.data(), dy, ob + 64, cudaMemcpyDeviceToHost));
    compare_outputs(ygpu.data(), yref.data(), n, odt, ctx);
    CHECK_CUDA(cudaFree(dy));
  }
  /* both re-encodes, each against its own reference (taco_ref.h) */
  const taco_dse dses[] = {TACO_DSE_DIRECT, TACO_DSE_TRANSFORM};
  uint8_t *dout;
  CHECK_CUDA(cudaMalloc(&dout, wire + 64));
  for (int di = 0; di < 2; di++) {
    std::vector<uint8_t> want(wire), got(wire);
    if (dses[di] == TACO_DSE_DIRECT) CHECK_TACO(taco_ref_decode_sum_encode(blocks.data(), k, n, p, want.data()));
    else CHECK_TACO(taco_ref_decode_sum_encode_transform(blocks.data(), k, n, p, want.data()));
    CHECK_CUDA(cudaMemset(dout, 0x7F, payload));
    CHECK_CUDA(cudaMemset(dout + payload, 0xFF, wire - payload));
    CHECK_TACO(taco_set_dse(dses[di]));
    CHECK_TACO(taco_decode_sum_encode(din, k, n, p, dout, NULL));
    CHECK_CUDA(cudaMemcpy(got.data(), dout, wire, cudaMemcpyDeviceToHost));
    char c2[200];
    snprintf(c2, sizeof c2, "%s re-encode (%s)", ctx, dses[di] == TACO_DSE_DIRECT ? "direct" : "transform");
    compare_blocks(got.data(), want.data(), n, g, c2);
  }
  CHECK_TACO(taco_set_dse(TACO_DSE_DEFAULT));
  CHECK_CUDA(cudaFree(din));
  CHECK_CUDA(cudaFree(dout));
}

/* ---- CAAT-Net ---- */

static void run_caat_case(size_t rows, size_t cols, size_t shared, taco_dtype dt, uint64_t seed) {
  char ctx[160];
  snprintf(ctx, sizeof ctx, "caat rows=%zu cols=%zu shared=%zu %s", rows, cols, shared,
           dt == TACO_DTYPE_BF16 ? "bf16" : "fp32");
  size_t n = rows * cols, es = esize(dt);
  std::vector<float> xf;
  make_input(xf, n, D_NORMAL, 32, seed);
  std::vector<uint8_t> x(n * es), sh(rows * shared * es), ref(n * es), got(n * es), gsh(rows * shared * es);
  for (size_t i = 0; i < n; i++) {
    if (dt == TACO_DTYPE_BF16)
      ((uint16_t *)x.data())[i] = taco_bf16_from_float(xf[i]);
    else
      ((float *)x.data())[i] = xf[i];
  }
  void *dx = dev_upload(x.data(), x.size()), *dsh;
  CHECK_CUDA(cudaMalloc(&dsh, sh.size() + 64));
  CHECK_CUDA(cudaMemset(dsh, 0xFF, sh.size()));
  caat_ref_gather_shared(x.data(), dt, rows, cols, shared, sh.data());
  CHECK_TACO(caat_gather_shared(dx, dt, rows, cols, shared, dsh, NULL));
  CHECK_CUDA(cudaMemcpy(gsh.data(), dsh, gsh.size(), cudaMemcpyDeviceToHost));
  expect(gsh == sh, "gather equals the reference", ctx);
  /* scatter modified shared values back, then scale the private channels */
  for (size_t i = 0; i < sh.size(); i++) sh[i] ^= (uint8_t)(i % es == es - 1 ? 0x80 : 0); /* flip signs */
  CHECK_CUDA(cudaMemcpy(dsh, sh.data(), sh.size(), cudaMemcpyHostToDevice));
  ref = x;
  caat_ref_scatter_shared(sh.data(), dt, rows, cols, shared, ref.data());
  caat_ref_scale_private(ref.data(), dt, rows, cols, shared, sqrtf(8.0f));
  CHECK_TACO(caat_scatter_shared(dsh, dt, rows, cols, shared, dx, NULL));
  CHECK_TACO(caat_scale_private(dx, dt, rows, cols, shared, sqrtf(8.0f), NULL));
  CHECK_CUDA(cudaMemcpy(got.data(), dx, got.size(), cudaMemcpyDeviceToHost));
  expect(got == ref, "scatter + scale_private equal the reference", ctx);
  /* gather fused with encode, when shared is a multiple of G */
  int g = 128;
  if (shared % (size_t)g == 0 && (cols * es) % 16 == 0) {
    taco_params p = {g, TACO_FP8_E4M3};
    size_t m = rows * shared, wire = taco_wire_bytes(m, g);
    std::vector<uint8_t> want(wire), blk(wire), gathered(m * es);
    caat_ref_gather_shared(got.data(), dt, rows, cols, shared, gathered.data());
    CHECK_TACO(taco_ref_encode(gathered.data(), dt, m, p, want.data(), NULL));
    uint8_t *dblk;
    CHECK_CUDA(cudaMalloc(&dblk, wire));
    CHECK_CUDA(cudaMemset(dblk, 0x7F, m));
    CHECK_CUDA(cudaMemset(dblk + m, 0xFF, wire - m));
    CHECK_TACO(caat_gather_encode(dx, dt, rows, cols, shared, p, dblk, NULL, NULL));
    CHECK_CUDA(cudaMemcpy(blk.data(), dblk, wire, cudaMemcpyDeviceToHost));
    char c2[200];
    snprintf(c2, sizeof c2, "%s gather+encode", ctx);
    compare_blocks(blk.data(), want.data(), m, g, c2);
    CHECK_CUDA(cudaFree(dblk));
  }
  CHECK_CUDA(cudaFree(dx));
  CHECK_CUDA(cudaFree(dsh));
}

/* bad arguments fail with a message, never launch */
static void test_errors(void) {
  taco_params bad = {100, TACO_FP8_E4M3}, ok = {128, TACO_FP8_E4M3};
  void *d;
  CHECK_CUDA(cudaMalloc(&d, 4096));
  expect(taco_encode(d, TACO_DTYPE_BF16, 128, bad, d, NULL, NULL) == -1 && strstr(taco_last_error(), "group"),
         "bad group rejected", taco_last_error());
  expect(taco_encode((char *)d + 2, TACO_DTYPE_BF16, 128, ok, d, NULL, NULL) == -1, "misaligned input rejected",
         taco_last_error());
  expect(taco_decode_sum(d, 0, 128, ok, d, TACO_DTYPE_BF16, NULL) == -1, "k = 0 rejected", taco_last_error());
  expect(caat_gather_shared(d, TACO_DTYPE_FP32, 4, 8, 9, d, NULL) == -1, "shared > cols rejected", taco_last_error());
  expect(taco_encode(d, TACO_DTYPE_BF16, 0, ok, d, NULL, NULL) == 0, "n = 0 is a no-op", taco_last_error());
  CHECK_CUDA(cudaFree(d));
}

/* Every codec case, for the Hadamard variant currently set (taco_set_hadamard). */
static int run_codec_suite(int quick, uint64_t seed) {
  const int groups[] = {32, 64, 128, 256, 512};
  const size_t sizes_full[] = {77, 300007, 1 << 20}, sizes_quick[] = {77, 4099};
  const size_t *sizes = quick ? sizes_quick : sizes_full;
  int nsizes = quick ? 2 : 3, cases = 0;
  for (int si = 0; si < nsizes; si++)
    for (int gi = 0; gi < 5; gi++)
      for (int fi = 0; fi < 2; fi++)
        for (int di = 0; di < 2; di++)
          for (int d = 0; d < D_COUNT; d++) {
            if (sizes[si] >= (1 << 20) && (d != D_NORMAL || di != 0)) continue; /* the large size: one input kind */
            run_case(sizes[si], groups[gi], fi ? TACO_FP8_E5M2 : TACO_FP8_E4M3,
                     di ? TACO_DTYPE_FP32 : TACO_DTYPE_BF16, (dist)d, seed + (uint64_t)cases++);
          }
  for (int gi = 0; gi < 5; gi++)
    for (int k = 1; k <= 3; k += 2) run_sum_case(quick ? 4099 : 300007, groups[gi], gi % 2 ? TACO_FP8_E5M2 : TACO_FP8_E4M3, k, seed + 1000 + (uint64_t)gi);
  /* one block per SM: every thread walks several tiles of the persistent grid (prefetch path) */
  expect(taco_set_blocks_per_sm(-5) == -1, "bad blocks per SM rejected", taco_last_error());
  CHECK_TACO(taco_set_blocks_per_sm(1));
  run_case(quick ? (1u << 20) + 77 : (1u << 22) + 77, 128, TACO_FP8_E4M3, TACO_DTYPE_BF16, D_NORMAL, seed + 3000);
  run_case(quick ? (1u << 20) + 77 : (1u << 22) + 77, 256, TACO_FP8_E5M2, TACO_DTYPE_FP32, D_NONFINITE, seed + 3001);
  run_sum_case(quick ? (1u << 20) + 77 : (1u << 22) + 77, 128, TACO_FP8_E4M3, 3, seed + 3002);
  run_case(quick ? (1u << 20) + 77 : (1u << 22) + 77, 512, TACO_FP8_E4M3, TACO_DTYPE_BF16, D_NORMAL, seed + 3003);
  run_case(quick ? (1u << 20) + 77 : (1u << 22) + 77, 64, TACO_FP8_E4M3, TACO_DTYPE_FP32, D_NORMAL, seed + 3004);
  run_sum_case(quick ? (1u << 20) + 77 : (1u << 22) + 77, 512, TACO_FP8_E5M2, 2, seed + 3005);
  CHECK_TACO(taco_set_blocks_per_sm(-1));
  run_caat_case(37, 1024, 512, TACO_DTYPE_BF16, seed + 2000);
  run_caat_case(37, 1024, 512, TACO_DTYPE_FP32, seed + 2001);
  run_caat_case(13, 250, 101, TACO_DTYPE_BF16, seed + 2002); /* odd widths: element path */
  run_caat_case(64, 4096, 2048, TACO_DTYPE_BF16, seed + 2003);
  return cases;
}

/* The warp-tiled encode and decode (taco_set_tiling) for one setting, then
 * on one block per SM so that each warp walks many tiles (bulk rings refill
 * their slots); n + 77 leaves a partial tile (and group) to the checked path. */
static int run_tiled_suite(int quick, uint64_t seed) {
  int cases = run_codec_suite(quick, seed);
  CHECK_TACO(taco_set_blocks_per_sm(1));
  run_case((1u << 23) + 77, 128, TACO_FP8_E4M3, TACO_DTYPE_BF16, D_NORMAL, seed + 4000);
  run_case((1u << 22) + 77, 256, TACO_FP8_E5M2, TACO_DTYPE_FP32, D_NONFINITE, seed + 4001);
  run_case((1u << 22) + 77, 512, TACO_FP8_E4M3, TACO_DTYPE_BF16, D_ZERO_GROUPS, seed + 4002);
  run_case((1u << 22) + 64, 64, TACO_FP8_E5M2, TACO_DTYPE_BF16, D_NORMAL, seed + 4003); /* whole tiles only */
  CHECK_TACO(taco_set_blocks_per_sm(-1));
  return cases + 4;
}

/* The streaming kernels of bench-codec's ceiling rows (taco_stream_device):
 * copy, read-2/write-1 (xor of the two halves) and read-1/write-2 (the input
 * twice), with and without the round-5 options, on an odd unit count (the
 * unrolled loop and its remainder), checked word by word on the host. */
static void test_stream_kernels(void) {
  const size_t units = (1u << 18) + 37;
  std::vector<uint32_t> in(units * 8), out(units * 8);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto &w : in) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    w = (uint32_t)x;
  }
  uint32_t *d_in = NULL, *d_out = NULL;
  CHECK_CUDA(cudaMalloc((void **)&d_in, units * 32));
  CHECK_CUDA(cudaMalloc((void **)&d_out, units * 32));
  CHECK_CUDA(cudaMemcpy(d_in, in.data(), units * 32, cudaMemcpyHostToDevice));
  const int mixes[3][2] = {{1, 1}, {2, 1}, {1, 2}};
  const unsigned option_sets[] = {0u, TACO_TILED_DEPTH2 | TACO_TILED_EVICT | TACO_TILED_PDL};
  for (unsigned oi = 0; oi < 2; oi++)
    for (int m = 0; m < 3; m++) {
      const int r = mixes[m][0], w = mixes[m][1];
      CHECK_TACO(taco_set_tiled_options(option_sets[oi]));
      CHECK_CUDA(cudaMemset(d_out, 0xA5, units * 32));
      CHECK_TACO(taco_stream_device(d_out, d_in, r, w, units, NULL));
      CHECK_CUDA(cudaDeviceSynchronize());
      CHECK_CUDA(cudaMemcpy(out.data(), d_out, units * 32, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t u = 0; u < units * 4; u++) { /* 32-bit word u of the first output half */
        const uint32_t want = r == 2 ? in[u] ^ in[units * 4 + u] : in[u];
        for (int k = 0; k < w; k++) bad += out[k * units * 4 + u] != want;
      }
      for (size_t u = units * 4 * w; u < units * 8; u++) bad += out[u] != 0xA5A5A5A5u; /* past the end: untouched */
      char ctx[96];
      snprintf(ctx, sizeof ctx, "stream r%dw%d, options 0x%x: %zu words wrong", r, w, option_sets[oi], bad);
      expect(bad == 0, "streaming kernel writes what it reads", ctx);
    }
  CHECK_TACO(taco_set_tiled_options(TACO_TILED_OPTS_DEFAULT));
  expect(taco_stream_device(d_out, d_in, 2, 2, 16, NULL) == -1, "stream mix 2:2 rejected", taco_last_error());
  CHECK_CUDA(cudaFree(d_out));
  CHECK_CUDA(cudaFree(d_in));
}

int main(int argc, char **argv) {
  int quick = 0, tiled_only = 0, options_only = 0;
  uint64_t seed = (uint64_t)time(NULL);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--tiled-only"))
      tiled_only = 1;
    else if (!strcmp(argv[i], "--options-only"))
      options_only = 1;
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "usage: test_kernels_gpu [--quick] [--tiled-only | --options-only] [--seed N]\n"
                      "  --tiled-only: of the variants, only the warp-tiled ones (taco_set_tiling) and the defaults\n"
                      "  --options-only: only the streaming kernels and the warp tiles' round-5 options with\n"
                      "    programmatic dependent launch and the full grid (taco_set_tiled_options), no exhaustive FP8 check\n");
      return 2;
    }
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, seed %llu%s\n", prop.name, (unsigned long long)seed, quick ? " (quick)" : "");
  if (!options_only) test_fp8_exhaustive();
  test_errors();
  /* every kernel variant: Hadamard (smem, shuffle) x loads (stream, l2pf, deep) */
  const taco_hadamard variants[] = {TACO_HADAMARD_SMEM, TACO_HADAMARD_SHUFFLE};
  const char *variant_names[] = {"smem", "shuffle"};
  const taco_loads loads[] = {TACO_LOADS_STREAM, TACO_LOADS_L2PF, TACO_LOADS_DEEP};
  const char *load_names[] = {"stream", "l2pf", "deep"};
  expect(taco_set_hadamard((taco_hadamard)7) == -1, "bad hadamard variant rejected", taco_last_error());
  expect(taco_set_loads((taco_loads)7) == -1, "bad loads variant rejected", taco_last_error());
  expect(taco_set_dse((taco_dse)7) == -1, "bad decode-sum-encode variant rejected", taco_last_error());
  expect(taco_set_per_thread(48) == -1, "bad elements per thread rejected", taco_last_error());
  expect(taco_set_tiling((taco_tiling)7, 4) == -1, "bad tiling rejected", taco_last_error());
  expect(taco_set_tiling(TACO_TILING_BULK, 0) == -1, "bulk stages 0 rejected", taco_last_error());
  expect(taco_set_tiling(TACO_TILING_BULK, 17) == -1, "bulk stages 17 rejected", taco_last_error());
  int cases = 0;
  /* 32 elements per thread: both transforms x three loads; then 64 per thread
   * with two loads; then the library's defaults (AUTO: 32 or 64 per kernel and G) */
  for (int li = options_only ? 6 : tiled_only ? 5 : 0; li < 6; li++)
    for (int vi = 0; vi < (li < 3 ? 2 : 1); vi++) {
      CHECK_TACO(taco_set_per_thread(li < 3 ? 32 : li < 5 ? 64 : TACO_PER_THREAD_DEFAULT));
      CHECK_TACO(taco_set_hadamard(li < 5 ? variants[vi] : TACO_HADAMARD_DEFAULT));
      CHECK_TACO(taco_set_loads(li < 5 ? loads[li % 3] : TACO_LOADS_DEFAULT));
      const unsigned long long elems0 = total_elems, codes0 = total_code_diffs, dec0 = total_decode_diffs;
      const int failures0 = failures, checks0 = checks;
      cases += run_codec_suite(quick, seed);
      printf("%d per thread (0: auto), hadamard %s, loads %s: FP8 codes compared %llu, differing %llu; decoded values differing %llu; %d of %d "
             "checks failed\n",
             li < 3 ? 32 : li < 5 ? 64 : 0, li < 3 ? variant_names[vi] : li < 5 ? "shuffle" : "default",
             load_names[li < 5 ? li % 3 : TACO_LOADS_DEFAULT], total_elems - elems0, total_code_diffs - codes0,
             total_decode_diffs - dec0, failures - failures0, checks - checks0);
      fflush(stdout);
    }
  /* warp tiles: registers and bulk rings of 4 tiles, each with 32 per thread
   * and both transforms and with 64 (encode; the decode runs 32); bulk rings
   * of 1 and 2 tiles (other slot and phase sequences) with 32 and shuffles */
  const taco_tiling tilings[] = {TACO_TILING_WARP, TACO_TILING_BULK, TACO_TILING_BULK, TACO_TILING_BULK};
  const int tiling_stages[] = {0, 1, 2, 4};
  for (int ti = 0; ti < (options_only ? 0 : 4); ti++)
    for (int pi = 0; pi < (ti == 1 || ti == 2 ? 1 : 3); pi++) {
      CHECK_TACO(taco_set_tiling(tilings[ti], tiling_stages[ti]));
      CHECK_TACO(taco_set_per_thread(pi == 2 ? 64 : 32));
      CHECK_TACO(taco_set_hadamard(pi == 1 ? TACO_HADAMARD_SMEM : TACO_HADAMARD_SHUFFLE));
      CHECK_TACO(taco_set_loads(TACO_LOADS_STREAM));
      const unsigned long long elems0 = total_elems, codes0 = total_code_diffs, dec0 = total_decode_diffs;
      const int failures0 = failures, checks0 = checks;
      cases += run_tiled_suite(quick, seed);
      printf("tiling %s%s, %d per thread, hadamard %s: FP8 codes compared %llu, differing %llu; decoded values differing %llu; "
             "%d of %d checks failed\n",
             tilings[ti] == TACO_TILING_WARP ? "warp" : "bulk", ti ? (ti == 1 ? "1" : ti == 2 ? "2" : "4") : "",
             pi == 2 ? 64 : 32, pi == 1 ? "smem" : "shuffle", total_elems - elems0, total_code_diffs - codes0,
             total_decode_diffs - dec0, failures - failures0, checks - checks0);
      fflush(stdout);
    }
  /* round 5: the options of the warp tiles (taco_set_tiled_options), each with
   * the three tile variants above (32 per thread with shuffles and with the
   * shared-memory transform, 64 per thread): the kernels with DEPTH2 / EVICT
   * are built for the defaults' (G, transform, P), which these include */
  unsigned parsed = 0;
  expect(taco_set_tiled_options(0x100) == -1, "bad tiled options rejected", taco_last_error());
  expect(taco_parse_tiled_options("d2+bogus", &parsed) == -1, "bad options string rejected", taco_last_error());
  expect(taco_parse_tiled_options("pdl+d2", &parsed) == 0 && parsed == (TACO_TILED_PDL | TACO_TILED_DEPTH2),
         "options string parsed", taco_last_error());
  test_stream_kernels();
  const unsigned option_sets[] = {TACO_TILED_PDL | TACO_TILED_FULLGRID, TACO_TILED_ALL, TACO_TILED_PDL,
                                  TACO_TILED_DEPTH2, TACO_TILED_EVICT, TACO_TILED_DEPTH2 | TACO_TILED_EVICT};
  /* --options-only: the sets with PDL and the full grid (the others ran in round 5's first run) */
  const unsigned nsets = options_only ? 3 : (unsigned)(sizeof option_sets / sizeof option_sets[0]);
  for (unsigned oi = 0; oi < nsets; oi++)
    for (int pi = 0; pi < 3; pi++) {
      CHECK_TACO(taco_set_tiling(TACO_TILING_WARP, 0));
      CHECK_TACO(taco_set_per_thread(pi == 2 ? 64 : 32));
      CHECK_TACO(taco_set_hadamard(pi == 1 ? TACO_HADAMARD_SMEM : TACO_HADAMARD_SHUFFLE));
      CHECK_TACO(taco_set_loads(TACO_LOADS_STREAM));
      CHECK_TACO(taco_set_tiled_options(option_sets[oi]));
      const unsigned long long elems0 = total_elems, codes0 = total_code_diffs, dec0 = total_decode_diffs;
      const int failures0 = failures, checks0 = checks;
      cases += run_tiled_suite(quick, seed);
      char names[32];
      taco_format_tiled_options(option_sets[oi], names, sizeof names);
      printf("tiling warp, options %s, %d per thread, hadamard %s: FP8 codes compared %llu, differing %llu; decoded values "
             "differing %llu; %d of %d checks failed\n",
             names, pi == 2 ? 64 : 32, pi == 1 ? "smem" : "shuffle", total_elems - elems0, total_code_diffs - codes0,
             total_decode_diffs - dec0, failures - failures0, checks - checks0);
      fflush(stdout);
    }
  CHECK_TACO(taco_set_tiled_options(TACO_TILED_OPTS_DEFAULT));
  CHECK_TACO(taco_set_tiling(TACO_TILING_DEFAULT, TACO_BULK_STAGES_DEFAULT));
  CHECK_TACO(taco_set_per_thread(TACO_PER_THREAD_DEFAULT));
  CHECK_TACO(taco_set_hadamard(TACO_HADAMARD_DEFAULT));
  printf("encode cases %d; FP8 codes compared %llu, differing %llu; decoded values differing %llu\n", cases,
         total_elems, total_code_diffs, total_decode_diffs);
  printf("%s: %d of %d checks failed\n", failures ? "FAIL" : "PASS", failures, checks);
  return failures ? 1 : 0;
}

/* test_moe_codec_gpu.cu — the fused MoE codec kernels (kernels/moe_codec.h)
 * against their plain-C reference and against the unfused GPU sequence
 * (moe_permute + taco_encode; taco_decode + moe_combine), on fresh random
 * tokens and routings (seed printed; --seed N repeats a run).
 *
 * Tolerance: none. Every output byte must equal the reference's (outputs are
 * poisoned with 0xFF before each run, so an unwritten byte fails), and the
 * non-finite report must match. The one allowance: an output BF16 that is NaN
 * on both sides counts as equal (CUDA's and the reference's BF16 rounding give
 * NaN different payloads; only the inputs with NaN/Inf and values near FLT_MAX
 * can produce one), and the number of such elements is printed.
 *
 * Exit status: 0 pass, 1 fail, 77 no CUDA device (CTest's skip). */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vector>

#include "taco_gpu_test.h"
#include "moe_codec.h"
#include "moe_route.h"
#include "taco_fp8.h"
#include "taco_ref.h"


static int failures = 0, checks = 0;
static unsigned long long nan_pairs = 0;

static void expect(bool ok, const char *what, const char *ctx) {
  checks++;
  if (!ok) {
    failures++;
    printf("FAIL: %s [%s]\n", what, ctx);
  }
}

struct shape {
  int t, h, E, k, group;
  taco_fp8 fp8;
  int special; /* NaN/Inf, a zero token and a value near FLT_MAX in x */
};

/* BF16 arrays equal bit for bit, NaN == NaN (counted) */
static size_t bf16_mismatches(const uint16_t *a, const uint16_t *b, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    if (a[i] == b[i]) continue;
    if (isnan(taco_bf16_to_float(a[i])) && isnan(taco_bf16_to_float(b[i]))) {
      nan_pairs++;
      continue;
    }
    bad++;
  }
  return bad;
}

static void run_shape(const shape &s, taco_rng *rng) {
  char ctx[160];
  snprintf(ctx, sizeof ctx, "t %d h %d E %d k %d G %d %s%s", s.t, s.h, s.E, s.k, s.group,
           s.fp8 == TACO_FP8_E4M3 ? "e4m3" : "e5m2", s.special ? " special" : "");
  const taco_params p = {s.group, s.fp8};
  const size_t n = (size_t)s.t * s.k, xe = (size_t)s.t * s.h, elems = n * (size_t)s.h;
  const size_t wire = moe_codec_wire_bytes(s.t, s.k, s.h, s.group);
  /* routing: top-k of random logits, then the map */
  std::vector<float> logits((size_t)s.t * s.E), w(n);
  std::vector<int32_t> idx(n), pos(n), count(s.E);
  for (auto &l : logits) l = (float)taco_rng_normal(rng);
  moe_topk_ref(logits.data(), s.t, s.E, s.k, idx.data(), w.data());
  CHECK_TACO(moe_map_ref(idx.data(), s.t, s.E, s.k, pos.data(), count.data()));
  std::vector<uint16_t> x(xe);
  for (int r = 0; r < s.t; r++) {
    const float scale = (float)exp(3.0 * taco_rng_normal(rng));
    for (int c = 0; c < s.h; c++) x[(size_t)r * s.h + c] = taco_bf16_from_float(scale * (float)taco_rng_normal(rng));
  }
  if (s.special) {
    x[5] = taco_bf16_from_float(NAN);
    x[xe - 1] = taco_bf16_from_float(-INFINITY);
    if (s.t > 2) memset(&x[(size_t)s.h], 0, sizeof(uint16_t) * (size_t)s.h);
    x[(size_t)(s.t / 2) * s.h + s.group / 2] = taco_bf16_from_float(3e38f);
  }
  /* reference */
  std::vector<uint8_t> ref_block(wire, 0xFF);
  std::vector<uint16_t> ref_out(xe, 0xFFFF), ref_out_sum(xe, 0xFFFF);
  taco_nonfinite ref_nf = {0, ~0ull};
  CHECK_TACO(moe_permute_encode_ref(x.data(), pos.data(), s.t, s.k, s.h, p, ref_block.data(), &ref_nf));
  CHECK_TACO(moe_decode_combine_ref(ref_block.data(), pos.data(), w.data(), s.t, s.k, s.h, p, ref_out.data()));
  CHECK_TACO(moe_decode_combine_ref(ref_block.data(), pos.data(), NULL, s.t, s.k, s.h, p, ref_out_sum.data()));

  uint16_t *d_x, *d_perm, *d_dec, *d_out;
  int32_t *d_pos;
  float *d_w;
  uint8_t *d_block, *d_block2;
  taco_nonfinite *d_nf;
  CHECK_CUDA(cudaMalloc(&d_x, xe * 2));
  CHECK_CUDA(cudaMalloc(&d_perm, elems * 2));
  CHECK_CUDA(cudaMalloc(&d_dec, elems * 2));
  CHECK_CUDA(cudaMalloc(&d_out, xe * 2));
  CHECK_CUDA(cudaMalloc(&d_pos, n * 4));
  CHECK_CUDA(cudaMalloc(&d_w, n * 4));
  CHECK_CUDA(cudaMalloc(&d_block, wire));
  CHECK_CUDA(cudaMalloc(&d_block2, wire));
  CHECK_CUDA(cudaMalloc(&d_nf, sizeof(taco_nonfinite)));
  CHECK_CUDA(cudaMemcpy(d_x, x.data(), xe * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_pos, pos.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_w, w.data(), n * 4, cudaMemcpyHostToDevice));

  /* fused permute + encode against the reference */
  std::vector<uint8_t> got(wire);
  CHECK_CUDA(cudaMemset(d_block, 0xFF, wire));
  CHECK_TACO(taco_nonfinite_reset(d_nf, NULL));
  CHECK_TACO(moe_permute_encode(d_x, d_pos, s.t, s.k, s.h, p, d_block, d_nf, NULL));
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(got.data(), d_block, wire, cudaMemcpyDeviceToHost));
  taco_nonfinite nf;
  CHECK_CUDA(cudaMemcpy(&nf, d_nf, sizeof nf, cudaMemcpyDeviceToHost));
  expect(memcmp(got.data(), ref_block.data(), wire) == 0, "permute_encode == reference (bytes)", ctx);
  expect(nf.count == ref_nf.count && nf.first_index == ref_nf.first_index, "permute_encode nonfinite report", ctx);
  /* ... and against the unfused GPU sequence */
  CHECK_CUDA(cudaMemset(d_block2, 0xFF, wire));
  CHECK_CUDA((cudaError_t)moe_permute(d_x, d_pos, s.t, s.k, s.h, d_perm, NULL));
  CHECK_TACO(taco_encode(d_perm, TACO_DTYPE_BF16, elems, p, d_block2, NULL, NULL));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> got2(wire);
  CHECK_CUDA(cudaMemcpy(got2.data(), d_block2, wire, cudaMemcpyDeviceToHost));
  expect(memcmp(got2.data(), got.data(), wire) == 0, "permute_encode == moe_permute + taco_encode (GPU)", ctx);

  /* fused decode + combine, weighted and plain sums, against the reference */
  std::vector<uint16_t> out(xe);
  for (int wi = 0; wi < 2; wi++) {
    CHECK_CUDA(cudaMemset(d_out, 0xFF, xe * 2));
    CHECK_TACO(moe_decode_combine(d_block, d_pos, wi ? NULL : d_w, s.t, s.k, s.h, p, d_out, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(out.data(), d_out, xe * 2, cudaMemcpyDeviceToHost));
    size_t bad = bf16_mismatches(out.data(), wi ? ref_out_sum.data() : ref_out.data(), xe);
    if (bad) printf("  %zu of %zu outputs differ (%s)\n", bad, xe, wi ? "sums" : "weighted");
    expect(bad == 0, wi ? "decode_combine (w NULL) == reference" : "decode_combine == reference", ctx);
    /* the unfused GPU sequence */
    std::vector<uint16_t> out2(xe);
    CHECK_CUDA(cudaMemset(d_out, 0xFF, xe * 2));
    CHECK_TACO(taco_decode(d_block, elems, p, d_dec, TACO_DTYPE_BF16, NULL));
    CHECK_CUDA((cudaError_t)moe_combine(d_dec, d_pos, wi ? NULL : d_w, s.t, s.k, s.h, d_out, NULL));
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(out2.data(), d_out, xe * 2, cudaMemcpyDeviceToHost));
    expect(bf16_mismatches(out.data(), out2.data(), xe) == 0, "decode_combine == taco_decode + moe_combine (GPU)", ctx);
  }
  /* misaligned pointers and bad shapes are refused before any launch */
  expect(moe_permute_encode(d_x + 1, d_pos, s.t, s.k, s.h, p, d_block, NULL, NULL) == -1, "misaligned x refused", ctx);
  expect(moe_decode_combine(d_block, d_pos, d_w, s.t, s.k, s.h + 8, p, d_out, NULL) == -1, "h % G != 0 refused", ctx);

  CHECK_CUDA(cudaFree(d_nf));
  CHECK_CUDA(cudaFree(d_block2));
  CHECK_CUDA(cudaFree(d_block));
  CHECK_CUDA(cudaFree(d_w));
  CHECK_CUDA(cudaFree(d_pos));
  CHECK_CUDA(cudaFree(d_out));
  CHECK_CUDA(cudaFree(d_dec));
  CHECK_CUDA(cudaFree(d_perm));
  CHECK_CUDA(cudaFree(d_x));
  printf("%-48s %s\n", ctx, failures ? "(failures so far)" : "ok");
}

int main(int argc, char **argv) {
  uint64_t seed = (uint64_t)time(NULL);
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else {
      fprintf(stderr, "usage: test_moe_codec_gpu [--quick] [--seed N]\n"
                      "  --quick: the small shapes only\n");
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
  taco_rng rng = {seed};
  const shape small[] = {
      {1, 32, 1, 1, 32, TACO_FP8_E4M3, 0},     {7, 96, 3, 3, 32, TACO_FP8_E5M2, 1},
      {33, 512, 64, 8, 256, TACO_FP8_E4M3, 1}, {64, 1024, 16, 16, 512, TACO_FP8_E4M3, 1},
      {129, 2048, 64, 8, 64, TACO_FP8_E5M2, 0}, {5, 384, 4, 2, 128, TACO_FP8_E4M3, 1},
  };
  const shape large[] = {
      {1000, 4096, 8, 2, 128, TACO_FP8_E4M3, 0}, {257, 7168, 128, 8, 128, TACO_FP8_E4M3, 1},
      {600, 4096, 64, 8, 256, TACO_FP8_E5M2, 0}, {301, 7168, 64, 8, 512, TACO_FP8_E4M3, 0},
  };
  for (const shape &s : small) run_shape(s, &rng);
  if (!quick)
    for (const shape &s : large) run_shape(s, &rng);
  printf("%d checks, %d failures; %llu output pairs NaN on both sides (counted equal)\n", checks, failures, nan_pairs);
  printf("%s\n", failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}

/* test_coll_emu_ref.c — CPU tests of the emulated TP all-reduce (kernels/coll_emu.h)
 * and of the ablation codecs (kernels/fp8_ablate.h), plain C:
 *   - the emulation (whole message: k encodes, one decode-sum-encode, one
 *     decode) against a model of the real two-shot collective written here
 *     rank by rank and segment by segment as coll_direct.c cuts it
 *     (coll_direct_recv_elems, blocks padded to coll_block_elems), on random
 *     partials: bit for bit, TP 2, 4 and 8, E4M3 and E5M2, also CAAT-Net;
 *   - the plain sum at TP 2 is one rounded addition (NCCL's result);
 *   - the ablation codecs: error bounds, decode-sum = sum of decodes, and the
 *     Hadamard variant against TACO's round trip (they differ by rounding only). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_emu.h"
#include "coll_layout.h"
#include "fp8_ablate.h"
#include "taco_fp8.h"
#include "taco_ref.h"

static uint16_t *random_bf16(size_t n, uint64_t seed, int outliers) {
  uint16_t *x = malloc(n * 2);
  taco_rng r = {seed};
  for (size_t i = 0; i < n; i++) {
    double v = taco_rng_normal(&r);
    if (outliers && i % 97 == 5) v *= 60.0;
    x[i] = taco_bf16_from_float((float)v);
  }
  return x;
}

/* The real two-shot all-reduce, rank by rank: segment s (owner s) of every
 * rank's partial is encoded as a block of coll_block_elems (zero padding);
 * the owner decode-sum-encodes the k blocks; every rank decodes it. */
static void real_two_shot(uint16_t **x, int k, size_t n, taco_params p, uint16_t **out) {
  const size_t seg = coll_direct_recv_elems(COLL_OP_ALLREDUCE, 0, n, k, p.group, 0);
  for (int s = 0; s < k; s++) {
    size_t len = coll_direct_recv_elems(COLL_OP_ALLREDUCE, 0, n, k, p.group, s);
    if (!len) continue;
    size_t be = coll_block_elems(len, p.group), bw = taco_wire_bytes(be, p.group);
    unsigned char *blocks = calloc((size_t)k + 1, bw);
    uint16_t *tmp = calloc(be, 2);
    for (int r = 0; r < k; r++) {
      memset(tmp, 0, be * 2);
      memcpy(tmp, x[r] + (size_t)s * seg, len * 2);
      taco_ref_encode(tmp, TACO_DTYPE_BF16, be, p, blocks + (size_t)r * bw, NULL);
    }
    taco_ref_decode_sum_encode(blocks, k, be, p, blocks + (size_t)k * bw);
    taco_ref_decode(blocks + (size_t)k * bw, be, p, tmp, TACO_DTYPE_BF16);
    for (int r = 0; r < k; r++) memcpy(out[r] + (size_t)s * seg, tmp, len * 2);
    free(blocks), free(tmp);
  }
}

static void check_taco_two_shot(int k, size_t n, taco_fp8 f, int group) {
  taco_params p = {group, f};
  uint16_t *x[COLL_EMU_MAX_RANKS], *real[COLL_EMU_MAX_RANKS];
  void *emu[COLL_EMU_MAX_RANKS];
  for (int r = 0; r < k; r++) {
    x[r] = random_bf16(n, 100 + (uint64_t)r, r == 0);
    real[r] = calloc(n, 2);
    emu[r] = malloc(n * 2);
    memcpy(emu[r], x[r], n * 2);
  }
  real_two_shot(x, k, n, p, real);
  coll_emu_opts o = {COLL_EMU_TACO, p, 0};
  CU_ASSERT_EQUAL_FATAL(coll_emu_allreduce_ref(emu, k, n, TACO_DTYPE_BF16, &o), 0);
  size_t bad = 0;
  double err2 = 0, ref2 = 0;
  for (int r = 0; r < k; r++)
    for (size_t i = 0; i < n; i++) {
      bad += ((uint16_t *)emu[r])[i] != real[r][i];
      if (r == 0) {
        double exact = 0;
        for (int q = 0; q < k; q++) exact += taco_bf16_to_float(x[q][i]);
        double d = taco_bf16_to_float(real[0][i]) - exact;
        err2 += d * d, ref2 += exact * exact;
      }
    }
  CU_ASSERT_EQUAL(bad, 0);
  /* and it is an all-reduce: relative L2 error of a couple of FP8 roundings */
  CU_ASSERT(sqrt(err2 / ref2) < (f == TACO_FP8_E4M3 ? 0.08 : 0.15));
  for (int r = 0; r < k; r++) free(x[r]), free(real[r]), free(emu[r]);
}

static void test_taco_tp2(void) {
  check_taco_two_shot(2, 128 * 64, TACO_FP8_E4M3, 128);
  check_taco_two_shot(2, 128 * 10, TACO_FP8_E5M2, 128); /* 5 groups per segment: padded blocks */
}
static void test_taco_tp4_tp8(void) {
  check_taco_two_shot(4, 128 * 6, TACO_FP8_E4M3, 128); /* segments of 2, 2, 2, 0 groups */
  check_taco_two_shot(8, 64 * 48, TACO_FP8_E4M3, 64);
  check_taco_two_shot(8, 256 * 18, TACO_FP8_E5M2, 256);
}

static void test_caat(void) {
  const int k = 2;
  const size_t rows = 32, cols = 512, n = rows * cols;
  const double p = 0.5;
  const size_t shared = coll_emu_caat_shared(cols, p);
  CU_ASSERT_EQUAL(shared, 256);
  taco_params tp = {128, TACO_FP8_E4M3};
  uint16_t *x[2], *pack[2], *real[2];
  void *emu[2];
  for (int r = 0; r < k; r++) {
    x[r] = random_bf16(n, 7 + (uint64_t)r, 0);
    emu[r] = malloc(n * 2);
    memcpy(emu[r], x[r], n * 2);
    pack[r] = malloc(rows * shared * 2);
    real[r] = malloc(rows * shared * 2);
  }
  /* the real partial all-reduce: gather, scale the private channels, all-reduce the shared, scatter */
  for (int r = 0; r < k; r++) {
    caat_ref_gather_shared(x[r], TACO_DTYPE_BF16, rows, cols, shared, pack[r]);
    caat_ref_scale_private(x[r], TACO_DTYPE_BF16, rows, cols, shared, sqrtf(2.0f));
  }
  real_two_shot(pack, k, rows * shared, tp, real);
  for (int r = 0; r < k; r++) caat_ref_scatter_shared(real[r], TACO_DTYPE_BF16, rows, cols, shared, x[r]);
  coll_emu_opts o = {COLL_EMU_TACO, tp, 0};
  CU_ASSERT_EQUAL_FATAL(coll_emu_caat_ref(emu, k, rows, cols, p, TACO_DTYPE_BF16, &o), 0);
  for (int r = 0; r < k; r++) CU_ASSERT_EQUAL(memcmp(emu[r], x[r], n * 2), 0);
  /* private channels differ between the ranks, shared ones agree */
  CU_ASSERT_NOT_EQUAL(memcmp((uint16_t *)emu[0] + shared, (uint16_t *)emu[1] + shared, 2 * (cols - shared)), 0);
  CU_ASSERT_EQUAL(memcmp(emu[0], emu[1], 2 * shared), 0);
  for (int r = 0; r < k; r++) free(x[r]), free(emu[r]), free(pack[r]), free(real[r]);
}

static void test_plain_tp2_is_one_add(void) {
  const size_t n = 4096;
  uint16_t *a = random_bf16(n, 1, 1), *b = random_bf16(n, 2, 0);
  uint16_t *oa = malloc(n * 2), *ob = malloc(n * 2);
  const void *in[2] = {a, b};
  void *out[2] = {oa, ob};
  CU_ASSERT_EQUAL_FATAL(coll_emu_plain_ref(in, out, 2, n, TACO_DTYPE_BF16, COLL_EMU_SUM), 0);
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    uint16_t want = taco_bf16_from_float(taco_bf16_to_float(a[i]) + taco_bf16_to_float(b[i]));
    bad += oa[i] != want || ob[i] != want;
  }
  CU_ASSERT_EQUAL(bad, 0);
  float fa[3] = {1, -2, 3}, fb[3] = {4, 5, -6}, fo[3], fo2[3];
  const void *fin[2] = {fa, fb};
  void *fout[2] = {fo, fo2};
  coll_emu_plain_ref(fin, fout, 2, 3, TACO_DTYPE_FP32, COLL_EMU_MAX);
  CU_ASSERT(fo[0] == 4 && fo[1] == 5 && fo[2] == 3 && fo2[2] == 3);
  coll_emu_plain_ref(fin, fout, 2, 3, TACO_DTYPE_FP32, COLL_EMU_AVG);
  CU_ASSERT(fo[0] == 2.5f && fo[1] == 1.5f && fo[2] == -1.5f);
  free(a), free(b), free(oa), free(ob);
}

static void test_ablation_codecs(void) {
  const int G = 128;
  const size_t n = G * 40;
  taco_params p = {G, TACO_FP8_E4M3};
  float *x = malloc(n * 4), *y = malloc(n * 4), *y2 = malloc(n * 4), *yt = malloc(n * 4);
  taco_fill_dist(x, n / 512, 512, TACO_DIST_OUTLIERS, 3);
  unsigned char *blk = malloc(3 * fp8_ablate_block_bytes(n, G));
  const size_t bb = fp8_ablate_block_bytes(n, G);
  for (int kind = 0; kind < 2; kind++) {
    fp8_ablate_ref_encode((fp8_ablate_kind)kind, x, TACO_DTYPE_FP32, n, p, blk);
    fp8_ablate_ref_decode_sum((fp8_ablate_kind)kind, blk, 1, n, p, y, TACO_DTYPE_FP32);
    taco_error_stats st;
    taco_error_measure(x, y, n, &st);
    CU_ASSERT(st.rel_l2 < 0.04); /* E4M3: 3 mantissa bits */
    /* decode-sum of two blocks (the same twice) is twice the decode, exactly (a power of two) */
    memcpy(blk + bb, blk, bb);
    fp8_ablate_ref_decode_sum((fp8_ablate_kind)kind, blk, 2, n, p, y2, TACO_DTYPE_FP32);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += fabsf(y2[i] - 2 * y[i]) > 1e-6f * fabsf(y[i]) + 1e-30f;
    CU_ASSERT_EQUAL(bad, 0);
    /* decode-sum-encode of one block re-encodes what it decodes: the decode is the same again */
    fp8_ablate_ref_decode_sum_encode((fp8_ablate_kind)kind, blk, 1, n, p, blk + 2 * bb);
    fp8_ablate_ref_decode_sum((fp8_ablate_kind)kind, blk + 2 * bb, 1, n, p, y2, TACO_DTYPE_FP32);
    taco_error_measure(y, y2, n, &st);
    CU_ASSERT(st.rel_l2 < 1e-3);
    if (kind == FP8_ABLATE_HADAMARD) {
      /* TACO's adaptive scale cancels against the absmax scale: the same codes up to rounding */
      taco_ref_roundtrip(TACO_CODEC_TACO, x, n, p, yt);
      taco_error_measure(yt, y, n, &st);
      CU_ASSERT(st.rel_l2 < 0.01);
    }
  }
  /* the outlier channels hurt the per-group scale without the Hadamard more than with it */
  taco_error_stats sg, sh;
  fp8_ablate_ref_encode(FP8_ABLATE_GROUP, x, TACO_DTYPE_FP32, n, p, blk);
  fp8_ablate_ref_decode_sum(FP8_ABLATE_GROUP, blk, 1, n, p, y, TACO_DTYPE_FP32);
  taco_error_measure(x, y, n, &sg);
  fp8_ablate_ref_encode(FP8_ABLATE_HADAMARD, x, TACO_DTYPE_FP32, n, p, blk);
  fp8_ablate_ref_decode_sum(FP8_ABLATE_HADAMARD, blk, 1, n, p, y, TACO_DTYPE_FP32);
  taco_error_measure(x, y, n, &sh);
  CU_ASSERT(sg.rel_l2 > 0 && sh.rel_l2 > 0);
  free(x), free(y), free(y2), free(yt), free(blk);
}

static void test_bad_input(void) {
  void *b[2] = {NULL, NULL};
  coll_emu_opts o = {COLL_EMU_TACO, {128, TACO_FP8_E4M3}, 0};
  CU_ASSERT_EQUAL(coll_emu_allreduce_ref(b, 2, 100, TACO_DTYPE_BF16, &o), -1); /* not whole groups */
  CU_ASSERT_PTR_NOT_NULL(strstr(coll_emu_last_error(), "groups"));
  CU_ASSERT_EQUAL(coll_emu_allreduce_ref(b, 17, 256, TACO_DTYPE_BF16, &o), -1);
  o.codec = COLL_EMU_FP8_TENSOR;
  CU_ASSERT_EQUAL(coll_emu_allreduce_ref(b, 2, 256, TACO_DTYPE_FP32, &o), -1);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("coll_emu_ref", NULL, NULL);
  CU_add_test(s, "TACO two-shot, TP 2: emulation = the real collective rank by rank", test_taco_tp2);
  CU_add_test(s, "TACO two-shot, TP 4 and 8, uneven segments", test_taco_tp4_tp8);
  CU_add_test(s, "CAAT-Net p = 0.5 with TACO: emulation = real, private channels scaled", test_caat);
  CU_add_test(s, "plain sum at TP 2 is one rounded addition; max; average", test_plain_tp2_is_one_add);
  CU_add_test(s, "ablation codecs: error, decode-sum, Hadamard vs TACO", test_ablation_codecs);
  CU_add_test(s, "bad input is refused with a reason", test_bad_input);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

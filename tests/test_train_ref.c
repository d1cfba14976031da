/* test_train_ref.c — CPU tests of `tacorun train`'s plain-C parts: the
 * per-tensor FP8 codec's reference (kernels/fp8_plain.h) and the corpus
 * split and batches (runtime/train/train_data.h). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fp8_plain.h"
#include "taco_fp8.h"
#include "train_data.h"

static uint16_t bf(float v) { return taco_bf16_from_float(v); }
static float fl(uint16_t h) { return taco_bf16_to_float(h); }

/* the absmax element gets E4M3's largest code, the scale is absmax / 448, and
 * every element comes back within half an E4M3 step (relative 1/16) or, for
 * small ones, within half the smallest subnormal step times the scale */
static void test_fp8_encode_roundtrip(void) {
  enum { N = 1003 };
  uint16_t x[N], out[N];
  uint8_t *b = malloc(fp8_plain_block_bytes(N));
  for (int i = 0; i < N; i++) x[i] = bf(sinf(0.37f * (float)i) * (1.0f + (float)(i % 17)));
  x[500] = bf(-40.0f); /* the absmax, negative */
  fp8_plain_ref_encode(x, N, b);
  const float s = fp8_plain_block_scale(b, N);
  CU_ASSERT_EQUAL(fp8_plain_ref_absmax(x, N), 40.0f);
  CU_ASSERT_EQUAL(s, 40.0f / 448.0f);
  CU_ASSERT_EQUAL(b[500], 0x80 | 0x7E);
  fp8_plain_ref_decode_sum(b, 1, N, out);
  CU_ASSERT_EQUAL(fl(out[500]), -40.0f);
  for (int i = 0; i < N; i++) {
    float v = fl(x[i]), d = fl(out[i]);
    float tol = fmaxf(fabsf(v) / 16.0f, s * 0x1p-10f) + fabsf(v) / 256.0f; /* + the bf16 rounding of the output */
    if (!(fabsf(d - v) <= tol)) {
      CU_FAIL("an element is off by more than half an E4M3 step");
      break;
    }
  }
  /* the padding after the codes and the bytes after the scale are zero */
  const size_t pad = (N + 15) / 16 * 16;
  for (size_t i = N; i < pad; i++) CU_ASSERT_EQUAL(b[i], 0);
  for (size_t i = pad + 4; i < pad + 16; i++) CU_ASSERT_EQUAL(b[i], 0);
  CU_ASSERT_EQUAL(fp8_plain_block_bytes(N), pad + 16);
  free(b);
}

/* two ranks: the sum is the FP32 sum of the two decoded blocks, in rank order, rounded to bf16 once */
static void test_fp8_decode_sum(void) {
  enum { N = 64 };
  uint16_t x[2][N], one[N], two[N], sum[N];
  const size_t bb = fp8_plain_block_bytes(N);
  uint8_t *b = malloc(2 * bb);
  for (int i = 0; i < N; i++) x[0][i] = bf(0.01f * (float)(i - 30)), x[1][i] = bf(3.0f * cosf((float)i));
  fp8_plain_ref_encode(x[0], N, b);
  fp8_plain_ref_encode(x[1], N, b + bb);
  fp8_plain_ref_decode_sum(b, 2, N, sum);
  fp8_plain_ref_decode_sum(b, 1, N, one);
  fp8_plain_ref_decode_sum(b + bb, 1, N, two);
  const float s0 = fp8_plain_block_scale(b, N), s1 = fp8_plain_block_scale(b + bb, N);
  for (int i = 0; i < N; i++) {
    float want = taco_fp8_e4m3_to_float(b[i]) * s0 + taco_fp8_e4m3_to_float(b[bb + i]) * s1;
    CU_ASSERT_EQUAL(sum[i], bf(want));
    /* close to the exact sum: each part within its own E4M3 error */
    float exact = fl(x[0][i]) + fl(x[1][i]);
    CU_ASSERT(fabsf(fl(sum[i]) - exact) <= fabsf(fl(x[0][i])) / 16 + fabsf(fl(x[1][i])) / 16 + (s0 + s1) * 0x1p-9f +
                                               fabsf(exact) / 128);
  }
  free(b);
}

/* a zero tensor: zero codes, scale 0, decodes to +0; a tensor with a NaN:
 * the scale is NaN and every decoded element NaN (the NaN check sees it) */
static void test_fp8_zero_and_nan(void) {
  enum { N = 33 };
  uint16_t x[N], out[N];
  uint8_t b[64];
  CU_ASSERT_EQUAL(fp8_plain_block_bytes(N), 64);
  memset(x, 0, sizeof x);
  fp8_plain_ref_encode(x, N, b);
  CU_ASSERT_EQUAL(fp8_plain_block_scale(b, N), 0.0f);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(b[i], 0);
  fp8_plain_ref_decode_sum(b, 1, N, out);
  for (int i = 0; i < N; i++) CU_ASSERT_EQUAL(out[i], 0);
  for (int i = 0; i < N; i++) x[i] = bf((float)i);
  x[7] = 0x7FC0; /* NaN */
  fp8_plain_ref_encode(x, N, b);
  CU_ASSERT(isnan(fp8_plain_block_scale(b, N)));
  fp8_plain_ref_decode_sum(b, 1, N, out);
  for (int i = 0; i < N; i++) CU_ASSERT(isnan(fl(out[i])));
  x[7] = 0x7F80; /* +Inf: the sum is not finite either */
  fp8_plain_ref_encode(x, N, b);
  fp8_plain_ref_decode_sum(b, 1, N, out);
  for (int i = 0; i < N; i++) CU_ASSERT(!isfinite(fl(out[i])));
}

/* one outlier takes the whole range: the small elements lose their precision
 * (why TACO's groups and Hadamard transform matter) */
static void test_fp8_outlier_flushes_small_values(void) {
  enum { N = 256 };
  uint16_t x[N], out[N];
  uint8_t b[N + 16];
  for (int i = 0; i < N; i++) x[i] = bf(1e-3f * (float)(1 + i % 2));
  x[0] = bf(1000.0f);
  fp8_plain_ref_encode(x, N, b);
  fp8_plain_ref_decode_sum(b, 1, N, out);
  CU_ASSERT_EQUAL(fl(out[0]), 1000.0f);
  int zeros = 0;
  for (int i = 1; i < N; i++) zeros += out[i] == 0;
  CU_ASSERT_EQUAL(zeros, N - 1); /* 2e-3 / (1000/448) = 9.0e-4 is below half of E4M3's smallest subnormal, 2^-10 */
}

static unsigned char *corpus(size_t n) {
  unsigned char *c = malloc(n);
  for (size_t i = 0; i < n; i++) c[i] = (unsigned char)('a' + i % 26);
  return c;
}

/* the last val_frac of the bytes is held out; batches come from the rest only
 * and are the same for the same seed; targets are the next bytes */
static void test_data_split_and_batches(void) {
  const size_t n = 10000;
  unsigned char *c = corpus(n);
  for (size_t i = 9000; i < n; i++) c[i] = 'Z'; /* the held-out part */
  train_data d, d2;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(train_data_from_memory(&d, c, n, 0.1, 32, 7, &e), 0);
  CU_ASSERT_EQUAL_FATAL(train_data_from_memory(&d2, c, n, 0.1, 32, 7, &e), 0);
  CU_ASSERT_EQUAL(d.train_n, 9000);
  int32_t t[4 * 32], l[4 * 32], t2[4 * 32], l2[4 * 32];
  int differ_between_batches = 0;
  for (int rep = 0; rep < 50; rep++) {
    train_data_next_batch(&d, 4, 32, t, l);
    train_data_next_batch(&d2, 4, 32, t2, l2);
    CU_ASSERT_EQUAL(memcmp(t, t2, sizeof t), 0);
    CU_ASSERT_EQUAL(memcmp(l, l2, sizeof l), 0);
    for (int i = 0; i < 4 * 32; i++) {
      CU_ASSERT(t[i] != 'Z' && l[i] != 'Z');
      CU_ASSERT(t[i] >= 'a' && t[i] <= 'z');
      CU_ASSERT_EQUAL(l[i], 'a' + (t[i] - 'a' + 1) % 26); /* the next byte of the corpus */
    }
    differ_between_batches |= t[0] != t[32];
  }
  CU_ASSERT(differ_between_batches);
  train_data_free(&d), train_data_free(&d2);
  free(c);
}

/* validation windows: consecutive, non-overlapping, inside the held-out part */
static void test_data_validation_windows(void) {
  const size_t n = 10000;
  unsigned char *c = corpus(n);
  train_data d;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(train_data_from_memory(&d, c, n, 0.1, 32, 7, &e), 0);
  CU_ASSERT_EQUAL(train_data_val_windows(&d, 32), (1000 - 1) / 32);
  int32_t t[2 * 32], l[2 * 32];
  train_data_val_batch(&d, 2, 32, 3, t, l); /* windows 6 and 7 */
  CU_ASSERT_EQUAL(t[0], c[9000 + 6 * 32]);
  CU_ASSERT_EQUAL(t[32], c[9000 + 7 * 32]);
  CU_ASSERT_EQUAL(l[31], c[9000 + 7 * 32]); /* the last target of a window is the next window's first token */
  train_data_free(&d);
  free(c);
}

static void test_data_rejected(void) {
  unsigned char c[100] = {0};
  train_data d;
  ts_err e;
  CU_ASSERT_EQUAL(train_data_from_memory(&d, c, sizeof c, 0.05, 32, 1, &e), -1);
  CU_ASSERT(strstr(e.msg, "too few") != NULL);
  CU_ASSERT_EQUAL(train_data_from_memory(&d, c, sizeof c, 1.5, 2, 1, &e), -1);
  CU_ASSERT(strstr(e.msg, "val_frac") != NULL);
  CU_ASSERT_EQUAL(train_data_load(&d, "/nonexistent/corpus.txt", 0.05, 32, 1, &e), -1);
  CU_ASSERT(strstr(e.msg, "/nonexistent/corpus.txt") != NULL);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("train_ref", NULL, NULL);
  CU_add_test(s, "fp8 per-tensor: encode and round trip", test_fp8_encode_roundtrip);
  CU_add_test(s, "fp8 per-tensor: decode-sum of two ranks", test_fp8_decode_sum);
  CU_add_test(s, "fp8 per-tensor: zero tensor, NaN and Inf", test_fp8_zero_and_nan);
  CU_add_test(s, "fp8 per-tensor: an outlier flushes small values", test_fp8_outlier_flushes_small_values);
  CU_add_test(s, "corpus: split and training batches", test_data_split_and_batches);
  CU_add_test(s, "corpus: validation windows", test_data_validation_windows);
  CU_add_test(s, "corpus: bad input rejected", test_data_rejected);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

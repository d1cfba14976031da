/* test_cp_attention_ref.c — context parallelism's attention math on the CPU
 * (runtime/ops/cp_attention_ref.c): every CP rank's share of a causal attention,
 * computed block by block over the ring and combined by log-sum-exp, equals
 * full causal attention of those rows (fresh random inputs, poisoned outputs,
 * float64, tolerance 1e-12 relative to the largest output); the 2 cp chunk
 * split gives every ring step of every rank the same number of unmasked
 * pairs, seq^2 / (2 cp^2) (plus the own chunks' diagonals, seq / (2 cp), at
 * step 0: the load balancing the plan's equal pieces rest on), and the
 * ranks' pairs add up to the whole causal mask's. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cp_attention_ref.h"

static unsigned long long rng = 0x9E3779B97F4A7C15ull;
static double uniform(void) { /* xorshift64*, in [-1, 1) */
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) / 4503599627370496.0 - 1.0;
}

static void check(int seq, int d, int cp) {
  double *q = malloc(sizeof(double) * seq * d), *k = malloc(sizeof(double) * seq * d),
         *v = malloc(sizeof(double) * seq * d), *full = malloc(sizeof(double) * seq * d),
         *ql = malloc(sizeof(double) * seq * d), *ol = malloc(sizeof(double) * seq * d);
  long long *pairs = malloc(sizeof(long long) * cp);
  CU_ASSERT_FATAL(q && k && v && full && ql && ol && pairs);
  for (int i = 0; i < seq * d; i++) q[i] = 2 * uniform(), k[i] = 2 * uniform(), v[i] = uniform();
  for (int i = 0; i < seq * d; i++) full[i] = NAN;
  double scale = 1.0 / sqrt((double)d);
  cp_ref_full_attention(seq, d, scale, q, k, v, full, NULL);
  double big = 0;
  for (int i = 0; i < seq * d; i++) big = fmax(big, fabs(full[i]));
  const int n = seq / cp;
  long long total = 0;
  double worst = 0;
  for (int r = 0; r < cp; r++) {
    for (int t = 0; t < n; t++)
      for (int x = 0; x < d; x++) ql[t * d + x] = q[cp_ref_position(seq, cp, r, t) * d + x];
    for (int i = 0; i < n * d; i++) ol[i] = NAN; /* poisoned: every row must be written */
    CU_ASSERT_EQUAL_FATAL(cp_ref_rank_attention(seq, d, cp, r, scale, ql, k, v, ol, pairs), 0);
    for (int t = 0; t < n; t++)
      for (int x = 0; x < d; x++) {
        double want = full[cp_ref_position(seq, cp, r, t) * d + x], got = ol[t * d + x];
        CU_ASSERT_FATAL(!isnan(got));
        worst = fmax(worst, fabs(got - want));
      }
    for (int s = 0; s < cp; s++) {
      /* each step: (seq/cp)^2 / 2 pairs; the own block (step 0) also the diagonals of its two causal chunks,
       * 2 x c / 2 = c more (c = seq / (2 cp)) */
      long long want = (long long)seq * seq / (2LL * cp * cp) + (s == 0 ? seq / (2 * cp) : 0);
      if (cp == 1) want = (long long)seq * (seq + 1) / 2;
      if (pairs[s] != want) printf("\n  seq %d cp %d rank %d step %d: %lld pairs, want %lld", seq, cp, r, s, pairs[s], want);
      CU_ASSERT_EQUAL(pairs[s], want);
      total += pairs[s];
    }
  }
  CU_ASSERT_EQUAL(total, (long long)seq * (seq + 1) / 2);
  printf("\n  seq %d d %d cp %d: worst |ring - full| %.3g (largest output %.3g)", seq, d, cp, worst, big);
  CU_ASSERT(worst <= 1e-12 * big);
  free(q), free(k), free(v), free(full), free(ql), free(ol), free(pairs);
}

static void test_ring_equals_full(void) {
  check(64, 16, 1);
  check(64, 16, 2);
  check(96, 8, 3);
  check(128, 16, 4);
  check(256, 8, 8);
}

static void test_bad_split(void) {
  double x[8 * 2] = {0}, o[8 * 2];
  CU_ASSERT_EQUAL(cp_ref_rank_attention(12, 2, 4, 0, 1.0, x, x, x, o, NULL), -1); /* 12 % 8 */
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("cp_attention_ref", NULL, NULL);
  CU_add_test(s, "ring attention over 2 cp chunks, combined by log-sum-exp, equals full causal attention",
              test_ring_equals_full);
  CU_add_test(s, "a sequence not divisible by 2 cp is refused", test_bad_split);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_cp_attention_ref.c — context parallelism's attention math on the CPU
 * (runtime/ops/cp_attention_ref.c): every CP rank's share of a causal attention,
 * computed block by block over the ring and combined by log-sum-exp, equals
 * full causal attention of those rows (fresh random inputs, poisoned outputs,
 * float64, tolerance 1e-12 relative to the largest output); the 2 cp chunk
 * split gives every ring step of every rank the same number of unmasked
 * pairs, seq^2 / (2 cp^2) (plus the own chunks' diagonals, seq / (2 cp), at
 * step 0: the load balancing the plan's equal pieces rest on), and the
 * ranks' pairs add up to the whole causal mask's.
 * Backward: each rank's ring backward (its dQ; its dK, dV contributions, the
 * accumulators that travel the ring back to the block's owner) summed over
 * the ranks equals full causal attention's backward (tolerance 1e-12 relative
 * to the largest gradient), and that full backward equals central finite
 * differences of sum(out * dout) (step 1e-5, tolerance 1e-7 relative: the
 * difference's truncation error is ~h^2 = 1e-10, its rounding ~1e-16 / h). */
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

static double max_abs(const double *x, size_t count) {
  double m = 0;
  for (size_t i = 0; i < count; i++) m = fmax(m, fabs(x[i]));
  return m;
}

static void check_bwd(int seq, int d, int cp) {
  const size_t all = (size_t)seq * d, n = (size_t)seq / cp;
  double *q = malloc(sizeof(double) * all), *k = malloc(sizeof(double) * all), *v = malloc(sizeof(double) * all),
         *dout = malloc(sizeof(double) * all), *dq = malloc(sizeof(double) * all), *dk = malloc(sizeof(double) * all),
         *dv = malloc(sizeof(double) * all), *rq = malloc(sizeof(double) * all), *rk = malloc(sizeof(double) * all),
         *rv = malloc(sizeof(double) * all), *ql = malloc(sizeof(double) * n * d), *dol = malloc(sizeof(double) * n * d),
         *dql = malloc(sizeof(double) * n * d);
  CU_ASSERT_FATAL(q && k && v && dout && dq && dk && dv && rq && rk && rv && ql && dol && dql);
  for (size_t i = 0; i < all; i++) q[i] = 2 * uniform(), k[i] = 2 * uniform(), v[i] = uniform(), dout[i] = uniform();
  const double scale = 1.0 / sqrt((double)d);
  cp_ref_full_attention_bwd(seq, d, scale, q, k, v, dout, dq, dk, dv);
  for (size_t i = 0; i < all; i++) rq[i] = NAN, rk[i] = rv[i] = 0; /* dK, dV: the ring's accumulators start at 0 */
  for (int r = 0; r < cp; r++) {
    for (size_t t = 0; t < n; t++)
      for (int x = 0; x < d; x++) {
        const size_t g = (size_t)cp_ref_position(seq, cp, r, (int)t) * d + x;
        ql[t * d + x] = q[g], dol[t * d + x] = dout[g];
      }
    for (size_t i = 0; i < n * d; i++) dql[i] = NAN;
    CU_ASSERT_EQUAL_FATAL(cp_ref_rank_attention_bwd(seq, d, cp, r, scale, ql, k, v, dol, dql, rk, rv), 0);
    for (size_t t = 0; t < n; t++)
      for (int x = 0; x < d; x++) rq[(size_t)cp_ref_position(seq, cp, r, (int)t) * d + x] = dql[t * d + x];
  }
  double big = fmax(max_abs(dq, all), fmax(max_abs(dk, all), max_abs(dv, all))), worst = 0;
  for (size_t i = 0; i < all; i++) {
    CU_ASSERT_FATAL(!isnan(rq[i]));
    worst = fmax(worst, fmax(fabs(rq[i] - dq[i]), fmax(fabs(rk[i] - dk[i]), fabs(rv[i] - dv[i]))));
  }
  printf("\n  bwd seq %d d %d cp %d: worst |ring - full| %.3g (largest gradient %.3g)", seq, d, cp, worst, big);
  CU_ASSERT(big > 0 && worst <= 1e-12 * big);
  free(q), free(k), free(v), free(dout), free(dq), free(dk), free(dv), free(rq), free(rk), free(rv), free(ql);
  free(dol), free(dql);
}

/* sum(out * dout) of the full attention, for the finite differences */
static double objective(int seq, int d, const double *q, const double *k, const double *v, const double *dout,
                        double *out) {
  cp_ref_full_attention(seq, d, 1.0 / sqrt((double)d), q, k, v, out, NULL);
  double s = 0;
  for (int i = 0; i < seq * d; i++) s += out[i] * dout[i];
  return s;
}

static void test_full_bwd_finite_differences(void) {
  enum { SEQ = 12, D = 4 };
  double q[SEQ * D], k[SEQ * D], v[SEQ * D], dout[SEQ * D], out[SEQ * D], g[3][SEQ * D];
  for (int i = 0; i < SEQ * D; i++) q[i] = 2 * uniform(), k[i] = 2 * uniform(), v[i] = uniform(), dout[i] = uniform();
  cp_ref_full_attention_bwd(SEQ, D, 1.0 / sqrt((double)D), q, k, v, dout, g[0], g[1], g[2]);
  double *x[3] = {q, k, v}, worst = 0, big = 0;
  const double h = 1e-5;
  for (int w = 0; w < 3; w++)
    for (int i = 0; i < SEQ * D; i++) {
      const double keep = x[w][i];
      x[w][i] = keep + h;
      const double up = objective(SEQ, D, q, k, v, dout, out);
      x[w][i] = keep - h;
      const double down = objective(SEQ, D, q, k, v, dout, out);
      x[w][i] = keep;
      worst = fmax(worst, fabs((up - down) / (2 * h) - g[w][i]));
      big = fmax(big, fabs(g[w][i]));
    }
  printf("\n  full bwd vs finite differences: worst %.3g (largest gradient %.3g)", worst, big);
  CU_ASSERT(big > 0 && worst <= 1e-7 * big);
}

static void test_ring_bwd_equals_full(void) {
  check_bwd(64, 16, 1);
  check_bwd(64, 16, 2);
  check_bwd(96, 8, 3);
  check_bwd(128, 16, 4);
}

static void test_bad_split(void) {
  double x[8 * 2] = {0}, o[8 * 2];
  CU_ASSERT_EQUAL(cp_ref_rank_attention(12, 2, 4, 0, 1.0, x, x, x, o, NULL), -1); /* 12 % 8 */
  CU_ASSERT_EQUAL(cp_ref_rank_attention_bwd(12, 2, 4, 0, 1.0, x, x, x, x, o, o, o), -1);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("cp_attention_ref", NULL, NULL);
  CU_add_test(s, "ring attention over 2 cp chunks, combined by log-sum-exp, equals full causal attention",
              test_ring_equals_full);
  CU_add_test(s, "full causal attention's backward equals finite differences", test_full_bwd_finite_differences);
  CU_add_test(s, "the ring's backward (dK, dV travelling with their block) summed over ranks equals full backward",
              test_ring_bwd_equals_full);
  CU_add_test(s, "a sequence not divisible by 2 cp is refused", test_bad_split);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

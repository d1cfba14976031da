/* test_calibrate_clock.c — the arithmetic of the clock section of `tacorun
 * calibrate` (runtime/calibrate/calibrate_clock_plan.c): burst sizing and the power
 * controller's window. CPU only. */
#include <CUnit/Basic.h>
#include <math.h>

#include "calibrate_clock.h"

static void test_burst_sizing(void) {
  ts_err e = {{0}, 0};
  calib_clock_burst b;
  /* 90 us launches in 1 ms at duty 0.45: 5 launches, 550 us idle, exact period */
  CU_ASSERT_EQUAL(calib_clock_size_burst(90, 0.45, 1000, &b, &e), 0);
  CU_ASSERT_EQUAL(b.n, 5);
  CU_ASSERT_DOUBLE_EQUAL(b.idle_us, 550, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(b.duty, 0.45, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(b.period_us, 1000, 1e-12);
  /* duty 0.15: 1.67 launches rounds to 2, the duty recorded is what runs */
  CU_ASSERT_EQUAL(calib_clock_size_burst(90, 0.15, 1000, &b, &e), 0);
  CU_ASSERT_EQUAL(b.n, 2);
  CU_ASSERT_DOUBLE_EQUAL(b.duty, 0.18, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(b.n * 90 + b.idle_us, b.period_us, 1e-9);
  /* a period too short for one launch at that duty is stretched to t / duty */
  CU_ASSERT_EQUAL(calib_clock_size_burst(400, 0.15, 1000, &b, &e), 0);
  CU_ASSERT_EQUAL(b.n, 1);
  CU_ASSERT_DOUBLE_EQUAL(b.period_us, 400 / 0.15, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(b.duty, 0.15, 1e-12);
  /* a burst never overruns its period (duty 0.8 of 1000 us with 300 us launches: 2, not 3) */
  CU_ASSERT_EQUAL(calib_clock_size_burst(300, 0.8, 1000, &b, &e), 0);
  CU_ASSERT_TRUE(b.n * 300 <= b.period_us);
  CU_ASSERT_TRUE(b.idle_us >= 0);
  /* bad input */
  CU_ASSERT_NOT_EQUAL(calib_clock_size_burst(0, 0.5, 1000, &b, &e), 0);
  CU_ASSERT_NOT_EQUAL(calib_clock_size_burst(90, 1.0, 1000, &b, &e), 0);
  CU_ASSERT_NOT_EQUAL(calib_clock_size_burst(90, 0.0, 1000, &b, &e), 0);
  CU_ASSERT_NOT_EQUAL(calib_clock_size_burst(90, 0.5, -1, &b, &e), 0);
  CU_ASSERT_NOT_EQUAL(calib_clock_size_burst(NAN, 0.5, 1000, &b, &e), 0);
}

/* A speed-up g(d) that falls with the period like 1 / (1 + P / W): it has
 * fallen halfway exactly at P = W. */
static double model_speed(double duty, double period, double window) { return 1 + 0.3 * (1 - duty) / (1 + period / window); }

static void test_window_recovered(void) {
  const double periods[] = {1000, 4000, 20000, 100000};
  const double duties[] = {0.8, 0.6, 0.45, 0.3, 0.15};
  double speed[5 * 4];
  for (double w = 2000; w <= 50000; w *= 5) {
    for (int i = 0; i < 5; i++)
      for (int j = 0; j < 4; j++) speed[i * 4 + j] = model_speed(duties[i], periods[j], w);
    int status = 9;
    double got = calib_clock_window_us(periods, 4, speed, 5, 0.02, &status);
    CU_ASSERT_EQUAL(status, 0);
    /* the half point is taken from the shortest period's speed (not the limit at P -> 0): for
     * this model that is at W + 2 P0; interpolated in log(period) between grid points 4-5x
     * apart, within 2 % of it here */
    double want = w + 2 * periods[0];
    CU_ASSERT_DOUBLE_EQUAL(got / want, 1.0, 0.02);
  }
}

static void test_window_edges(void) {
  const double periods[] = {1000, 4000, 20000, 100000};
  /* no duty gains 2 %: no window, status -1 */
  double flat[2 * 4] = {1.01, 1.0, 1.0, 1.0, 1.015, 1.01, 1.0, 0.99};
  int status = 9;
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_window_us(periods, 4, flat, 2, 0.02, &status), 0, 0);
  CU_ASSERT_EQUAL(status, -1);
  /* the speed-up holds at every period: the largest period is a lower bound */
  double held[2 * 4] = {1.2, 1.19, 1.18, 1.17, 1.3, 1.3, 1.29, 1.28};
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_window_us(periods, 4, held, 2, 0.02, &status), 100000, 0);
  CU_ASSERT_EQUAL(status, 1);
  /* exact crossing at a grid point, one row only */
  double one[4] = {1.2, 1.1, 1.0, 1.0};
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_window_us(periods, 4, one, 1, 0.02, &status), 4000, 1e-6);
  CU_ASSERT_EQUAL(status, 0);
  /* the half point halfway (in speed) between 1 and 4 ms: 2 ms, halfway in log(period) */
  double mid[4] = {1.2, 1.0, 1.0, 1.0};
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_window_us(periods, 4, mid, 1, 0.02, &status), 2000, 1e-6);
  /* rows without gain do not vote; two rows: the geometric mean of their windows */
  double two[3 * 4] = {1.0, 1.0, 1.0, 1.0, 1.2, 1.1, 1.0, 1.0, 1.2, 1.2, 1.1, 1.0};
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_window_us(periods, 4, two, 3, 0.02, &status), sqrt(4000.0 * 20000.0), 1e-6);
}

static void test_reference_interpolation(void) {
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_reference(100, 110, 0, 5, 0), 100, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_reference(100, 110, 0, 5, 5), 110, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_reference(100, 110, 0, 5, 2), 104, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(calib_clock_reference(100, 110, 3, 3, 3), 105, 1e-12); /* degenerate: the mean */
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("calibrate clock section", NULL, NULL);
  CU_add_test(s, "burst sizing: exact period, recorded duty, stretch, bad input", test_burst_sizing);
  CU_add_test(s, "window: the period where the speed-up has halved", test_window_recovered);
  CU_add_test(s, "window: no speed-up, lower bound, grid points, rows", test_window_edges);
  CU_add_test(s, "reference between two baselines", test_reference_interpolation);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

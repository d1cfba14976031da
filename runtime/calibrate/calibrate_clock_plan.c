/* calibrate_clock_plan.c — burst sizing and the power controller's window
 * (calibrate_clock.h); plain C, tested on a CPU (tests/test_calibrate_clock.c). */
#include "calibrate_clock.h"

#include <math.h>
#include <stdlib.h>

int calib_clock_size_burst(double t_us, double duty_target, double period_us, calib_clock_burst *b, ts_err *e) {
  if (!(t_us > 0) || !isfinite(t_us)) return ts_fail(e, NULL, "clock", "launch time %g us must be > 0", t_us);
  if (!(duty_target > 0 && duty_target < 1))
    return ts_fail(e, NULL, "clock", "duty %g must be in (0, 1) (duty 1 is the back-to-back reference)", duty_target);
  if (!(period_us > 0) || !isfinite(period_us)) return ts_fail(e, NULL, "clock", "period %g us must be > 0", period_us);
  /* one launch at least: a period too short for it at this duty is stretched */
  if (period_us < t_us / duty_target) period_us = t_us / duty_target;
  long n = lround(duty_target * period_us / t_us);
  long n_max = (long)floor(period_us / t_us); /* the burst fits in the period */
  if (n > n_max) n = n_max;
  if (n < 1) n = 1;
  b->duty_target = duty_target;
  b->period_us = period_us;
  b->n = (int)n;
  b->idle_us = period_us - (double)n * t_us;
  if (b->idle_us < 0) b->idle_us = 0;
  b->duty = (double)n * t_us / period_us;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double calib_clock_window_us(const double *periods, int np, const double *speed, int nd, double min_gain, int *status) {
  *status = -1;
  if (np < 1 || nd < 1) return 0;
  double found[CALIB_CLOCK_MAX_DUTIES];
  int n_found = 0, n_rows = 0, n_never = 0;
  for (int i = 0; i < nd && i < CALIB_CLOCK_MAX_DUTIES; i++) {
    const double *s = speed + (size_t)i * np;
    double gain = s[0] - 1;
    if (!(gain >= min_gain)) continue;
    n_rows++;
    double half = 1 + 0.5 * gain;
    int j = 1;
    while (j < np && s[j] > half) j++;
    if (j == np) { /* never fell halfway inside the measured periods */
      n_never++;
      continue;
    }
    /* s[j-1] > half >= s[j]: linear in log(period) between them */
    double f = (s[j - 1] - half) / (s[j - 1] - s[j]);
    found[n_found++] = exp(log(periods[j - 1]) + f * (log(periods[j]) - log(periods[j - 1])));
  }
  if (n_rows == 0) return 0;
  if (2 * n_never >= n_rows) {
    *status = 1;
    return periods[np - 1];
  }
  qsort(found, (size_t)n_found, sizeof *found, cmp_double);
  *status = 0;
  return n_found % 2 ? found[n_found / 2] : sqrt(found[n_found / 2 - 1] * found[n_found / 2]);
}

double calib_clock_reference(double before, double after, double i0, double i1, double i) {
  if (!(i1 > i0)) return 0.5 * (before + after);
  return before + (after - before) * (i - i0) / (i1 - i0);
}

/* calibrate_time.h — timing GPU work with CUDA events.
 *
 * calib_time_us warms up, estimates one launch, then times batches of
 * launches between two events (batch sized so each timed span is well above
 * event resolution and launch jitter) and returns the median of the batches,
 * per launch. `iter` passed to the launch function counts up, so callers can
 * rotate through several buffers and keep memory-bound ops out of L2. */
#ifndef CALIBRATE_TIME_H
#define CALIBRATE_TIME_H

#include "ts_error.h"

typedef int (*calib_launch_fn)(void *ctx, long long iter, ts_err *e);

typedef struct {
  int warmup;        /* launches before timing */
  int reps;          /* timed batches (the median is kept) */
  double target_us;  /* a batch lasts at least this long */
  int max_batch;     /* launches per batch at most */
  double long_us;    /* launches longer than this get min(reps, 3) batches of 1 */
} calib_budget;

calib_budget calib_budget_default(int quick);

/* streams: one cudaStream_t per device taking part (events are recorded on
 * each; the time of a batch is the slowest device's). ndev >= 1. */
int calib_time_us(calib_launch_fn fn, void *ctx, void *const *streams, const int *devices, int ndev,
                  const calib_budget *b, double *median_us, ts_err *e);

/* Median of n values (sorts v). */
double calib_median(double *v, int n);

/* Seconds since the first call (for progress lines). */
double calib_elapsed_s(void);

#endif

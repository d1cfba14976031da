/* calibrate_clock.h — the clock section of `tacorun calibrate`.
 *
 * Under its 700 W cap an H200 running GEMMs back to back clocks down (run 8:
 * SM 1455 MHz while the calibration timed its GEMM table); the same GEMMs
 * interleaved with idle time (waiting for a slow collective) run at up to
 * 1980 MHz. The clock section says how much faster, as a function of the
 * compute duty cycle and of the period of the busy/idle pattern, so the
 * simulator can scale the (back-to-back) tables by the duty of the plan.
 *
 * Measurement (calibrate_clock.c, GPU): a reference GEMM and a memory-bound
 * kernel, each run in bursts of n launches followed by a GPU-side idle (a
 * one-thread spin kernel on %globaltimer, calibrate_clock_spin.cu), at every
 * (duty, period) of the grid; speed = back-to-back time per launch / time per
 * launch in the pattern. The pure arithmetic (burst sizing, the window) is
 * here and in calibrate_clock_plan.c, so it is tested on a CPU. */
#ifndef CALIBRATE_CLOCK_H
#define CALIBRATE_CLOCK_H

#include "ts_error.h"

/* The reference kernels (calibrate_refk.h), shared with the power phase. */
#define CALIB_REF_GEMM_M 4096
#define CALIB_REF_GEMM_N 4096
#define CALIB_REF_GEMM_K 2048
#define CALIB_REF_ADD_ELEMS (16LL << 20) /* bf16: 3 x 32 MiB moved per launch */

#define CALIB_CLOCK_MAX_DUTIES 8
#define CALIB_CLOCK_MAX_PERIODS 8

/* One point's pattern: n launches (back to back t_us each) then idle_us of
 * GPU-side idle, so that period_us = n t_us + idle_us exactly and the duty
 * (at back-to-back speed, the simulator's view of its own timeline) is
 * n t_us / period_us, the achievable value nearest the target. */
typedef struct {
  double duty_target, period_us; /* asked for */
  int n;                         /* launches per burst */
  double idle_us;                /* idle after each burst */
  double duty;                   /* n t_us / period_us */
} calib_clock_burst;

/* Sizes a burst; fails (-1, e filled) when t_us, duty or period are out of
 * range (t_us > 0, 0 < duty < 1, period >= t_us / duty would need less than
 * one launch per burst: the period is stretched to t_us / duty then, and
 * b->period_us says so). */
int calib_clock_size_burst(double t_us, double duty_target, double period_us, calib_clock_burst *b, ts_err *e);

/* The power controller's time scale from the measured speeds:
 * speed[i * np + j] at duty i (every duty < 1) and period periods[j]
 * (ascending). For each duty whose speed-up at the shortest period,
 * g = speed[i][0] - 1, is at least min_gain, the period where its speed has
 * fallen to 1 + g/2, interpolated linearly in log(period) between the two
 * measured periods around it; the window is the median of these over the
 * duties. *status: 0 found inside the measured range; 1 at least half of the
 * qualifying duties never fell halfway (returns the largest period: a lower
 * bound); -1 no duty gained min_gain (returns 0: no clock effect). */
double calib_clock_window_us(const double *periods, int np, const double *speed, int nd, double min_gain, int *status);

/* Linear interpolation of the back-to-back reference between the baselines
 * measured before (at index i0) and after (i1) a point measured at index i
 * (i0 <= i <= i1), so a drift of the GPU's speed over the section cancels. */
double calib_clock_reference(double before, double after, double i0, double i1, double i);

#endif

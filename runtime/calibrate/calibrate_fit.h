/* calibrate_fit.h — latency + bandwidth fits of collective tables (plain C).
 *
 * time_us = latency_us + bytes / (gbps * 1e3), fitted by least squares on
 * relative error (weights 1/us^2), so a sweep spanning six orders of
 * magnitude is fitted at both ends rather than only at the largest sizes.
 * A negative latency is clamped to 0 and the bandwidth refitted. */
#ifndef CALIBRATE_FIT_H
#define CALIBRATE_FIT_H

#include "calibration.h"

/* Returns 0, or -1 when fewer than 2 usable points or no positive slope. */
int calib_fit_linear(const double *bytes, const double *us, int n, double *latency_us, double *gbps);
/* Fits every collective table of c and adds "<name>.<nranks>" fits. */
int calib_add_fits(schema_calibration *c);

#endif

/* calibrate_progress.h — progress lines for `tacorun calibrate`.
 *
 * On a terminal one line is rewritten in place; otherwise (logs) a line is
 * printed at each tenth of a phase, so a log stays short but shows it moving. */
#ifndef CALIBRATE_PROGRESS_H
#define CALIBRATE_PROGRESS_H

typedef struct {
  const char *phase;
  int done, total, last_tenth, tty;
} calib_progress;

/* phase NULL: count silently. */
void calib_progress_begin(calib_progress *p, const char *phase, int total);
/* One item done; `what` describes it (shape and result). */
void calib_progress_step(calib_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void calib_progress_end(calib_progress *p);

#endif

/* calibrate_progress.c — progress lines (see calibrate_progress.h). */
#include "calibrate_progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "calibrate_time.h"

void calib_progress_begin(calib_progress *p, const char *phase, int total) {
  p->phase = phase;
  p->done = 0;
  p->total = total;
  p->last_tenth = -1;
  p->tty = isatty(fileno(stderr));
  if (!phase) return; /* silent (the ranks other than 0 of a multi-process run) */
  fprintf(stderr, "[%6.1fs] %s: %d to measure\n", calib_elapsed_s(), phase, total);
}

void calib_progress_step(calib_progress *p, const char *fmt, ...) {
  char what[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  p->done++;
  if (!p->phase) return;
  int tenth = p->total > 0 ? 10 * p->done / p->total : 10;
  if (p->tty) {
    fprintf(stderr, "\r[%6.1fs] %s %d/%d %-90s", calib_elapsed_s(), p->phase, p->done, p->total, what);
    fflush(stderr);
  } else if (tenth != p->last_tenth) {
    fprintf(stderr, "[%6.1fs] %s %d/%d %s\n", calib_elapsed_s(), p->phase, p->done, p->total, what);
  }
  p->last_tenth = tenth;
}

void calib_progress_end(calib_progress *p) {
  if (!p->phase) return;
  if (p->tty) fprintf(stderr, "\n");
  fprintf(stderr, "[%6.1fs] %s: done (%d)\n", calib_elapsed_s(), p->phase, p->done);
}

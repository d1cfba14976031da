#include "ts_error.h"

#include <stdio.h>
#include <string.h>

static void vformat(ts_err *e, const char *file, const char *field, const char *fmt, va_list ap) {
  size_t used = 0;
  e->msg[0] = '\0';
  if (file && *file) used += (size_t)snprintf(e->msg + used, sizeof e->msg - used, "%s: ", file);
  if (used < sizeof e->msg && field && *field)
    used += (size_t)snprintf(e->msg + used, sizeof e->msg - used, "%s: ", field);
  if (used < sizeof e->msg) vsnprintf(e->msg + used, sizeof e->msg - used, fmt, ap);
}

int ts_fail(ts_err *e, const char *file, const char *field, const char *fmt, ...) {
  if (!e) return -1;
  va_list ap;
  va_start(ap, fmt);
  vformat(e, file, field, fmt, ap);
  va_end(ap);
  e->bad_input = 1;
  return -1;
}

int ts_fail_sys(ts_err *e, const char *fmt, ...) {
  if (!e) return -1;
  va_list ap;
  va_start(ap, fmt);
  vformat(e, NULL, NULL, fmt, ap);
  va_end(ap);
  e->bad_input = 0;
  return -1;
}

int ts_fail_sim(ts_err *e, const char *fmt, ...) {
  if (!e) return -1;
  va_list ap;
  va_start(ap, fmt);
  size_t n = strlen(TS_SIM_FAILURE_PREFIX);
  snprintf(e->msg, sizeof e->msg, "%s", TS_SIM_FAILURE_PREFIX);
  vsnprintf(e->msg + n, sizeof e->msg - n, fmt, ap);
  va_end(ap);
  e->bad_input = 0;
  return -1;
}

int ts_exit_status(const ts_err *e) {
  if (e && strncmp(e->msg, TS_SIM_FAILURE_PREFIX, strlen(TS_SIM_FAILURE_PREFIX)) == 0) return TS_EXIT_SIM_FAILURE;
  return e && e->bad_input ? TS_EXIT_BAD_INPUT : TS_EXIT_FAILURE;
}

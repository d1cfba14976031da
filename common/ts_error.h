/* ts_error.h — one error record for every loader and checker in tacosim.
 *
 * Functions that can fail return 0 on success and -1 on failure, filling a
 * ts_err with "FILE: FIELD: REASON". Only main() prints it and exits with
 * TS_EXIT_BAD_INPUT (2) for bad input, TS_EXIT_SIM_FAILURE (3) when the
 * simulator itself failed (its ranks deadlock, a rank never finishes: a bug
 * in tacosim, not in the input), or TS_EXIT_FAILURE (1) otherwise. */
#ifndef TS_ERROR_H
#define TS_ERROR_H

#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TS_EXIT_FAILURE 1
#define TS_EXIT_BAD_INPUT 2
#define TS_EXIT_SIM_FAILURE 3

typedef struct {
  char msg[1024];
  int bad_input; /* 1 when the user's input is at fault (exit status 2) */
} ts_err;

/* Formats "file: field: reason" into e (file or field may be NULL), marks it as
 * bad input, and returns -1 so callers can write `return ts_fail(...)`. */
int ts_fail(ts_err *e, const char *file, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Same, but for failures that are not the user's input (I/O, out of memory). */
int ts_fail_sys(ts_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Same, for a failure of the simulator itself: the message starts with
 * TS_SIM_FAILURE_PREFIX, which is what gives exit status 3 (the message is all
 * that crosses the pipe of a forked simulation, so the class travels with it;
 * the struct keeps its two fields). */
#define TS_SIM_FAILURE_PREFIX "simulator failure: "
int ts_fail_sim(ts_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Exit status that main() should use for e. */
int ts_exit_status(const ts_err *e);

#ifdef __cplusplus
}
#endif

#endif

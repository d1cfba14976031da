/* ts_args.h — the values of command-line options, parsed one way for every
 * command (tacorun's and tacosim's): whole numbers and reals within a range,
 * byte sizes with a K/M/G suffix, comma lists, and the help flags. Each
 * returns 0 with the value stored, or -1 leaving it untouched; the caller
 * names the option in its error (exit 2). */
#ifndef TS_ARGS_H
#define TS_ARGS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "--help" or "-h". */
int ts_arg_is_help(const char *a);
/* Options that take no value and switch something on: when a names one of
 * the n flags, its int is set to 1 and 1 is returned; else 0. */
typedef struct {
  const char *name;
  int *on;
} ts_arg_flag;
int ts_arg_set_flag(const char *a, const ts_arg_flag *flags, int n);
/* A decimal integer in [lo, hi], nothing after it. */
int ts_arg_int(const char *s, long lo, long hi, int *out);
int ts_arg_ll(const char *s, long long lo, long long hi, long long *out);
/* A real number in [lo, hi] (not NaN), nothing after it. */
int ts_arg_double(const char *s, double lo, double hi, double *out);
/* A size in bytes: a non-negative number, optionally times K, M or G (1024,
 * 1024^2, 1024^3; either case) and an optional B: "4096", "1.5M", "64MB". */
int ts_arg_bytes(const char *s, size_t *out);
/* A comma list of integers in [lo, hi]: the count stored into v (at most cap),
 * or -1 for a bad element, an empty element or more than cap of them. */
int ts_arg_ll_list(const char *s, long long lo, long long hi, long long *v, int cap);

#ifdef __cplusplus
}
#endif
#endif

/* ts_args.c — option values (ts_args.h). */
#include "ts_args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int ts_arg_is_help(const char *a) { return a && (!strcmp(a, "--help") || !strcmp(a, "-h")); }

int ts_arg_set_flag(const char *a, const ts_arg_flag *flags, int n) {
  for (int i = 0; a && i < n; i++)
    if (!strcmp(a, flags[i].name)) {
      *flags[i].on = 1;
      return 1;
    }
  return 0;
}

int ts_arg_ll(const char *s, long long lo, long long hi, long long *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int ts_arg_int(const char *s, long lo, long hi, int *out) {
  long long v;
  if (ts_arg_ll(s, lo, hi, &v)) return -1;
  *out = (int)v;
  return 0;
}

int ts_arg_double(const char *s, double lo, double hi, double *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || isnan(v) || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int ts_arg_bytes(const char *s, size_t *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || !(v >= 0)) return -1;
  switch (*end) {
  case 'k': case 'K': v *= 1024.0, end++; break;
  case 'm': case 'M': v *= 1048576.0, end++; break;
  case 'g': case 'G': v *= 1073741824.0, end++; break;
  default: break;
  }
  if (*end == 'B' || *end == 'b') end++;
  if (*end || v > 1.8e19) return -1;
  *out = (size_t)v;
  return 0;
}

int ts_arg_ll_list(const char *s, long long lo, long long hi, long long *v, int cap) {
  if (!s || !*s) return -1;
  int n = 0;
  while (*s) {
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || x < lo || x > hi || (*end && *end != ',') || n >= cap) return -1;
    v[n++] = x;
    if (*end == ',' && !end[1]) return -1; /* a trailing comma: an empty element */
    s = *end ? end + 1 : end;
  }
  return n;
}

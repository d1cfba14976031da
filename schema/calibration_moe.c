/* calibration_moe.c — names of the grouped-GEMM kernel tables (calibration.h). */
#include <stdio.h>
#include <string.h>

#include "calibration.h"

int schema_grouped_gemm_name(char *out, size_t n, int groups, bool token_k, long long a, long long b) {
  int w = snprintf(out, n, token_k ? "gemm_grouped.g%d.m%lld.n%lld" : "gemm_grouped.g%d.n%lld.k%lld", groups, a, b);
  return w > 0 && (size_t)w < n && w < 48 ? 0 : -1;
}

const char *schema_name_field(const char *s, char tag, long long *v, char end) {
  if (*s != tag || s[1] < '1' || s[1] > '9') return NULL;
  long long x = 0;
  for (s++; *s >= '0' && *s <= '9'; s++) {
    if (x > 100000000) return NULL;
    x = 10 * x + (*s - '0');
  }
  if (*s != end) return NULL;
  *v = x;
  return end ? s + 1 : s;
}

int schema_grouped_gemm_parse(const char *name, int *groups, bool *token_k, long long *a, long long *b) {
  static const char prefix[] = "gemm_grouped.";
  if (strncmp(name, prefix, sizeof prefix - 1)) return -1;
  const char *s = name + sizeof prefix - 1;
  long long g, x, y;
  if (!(s = schema_name_field(s, 'g', &g, '.')) || g < 2 || g > 4096) return -1;
  bool k = *s == 'm';
  if (!(s = schema_name_field(s, k ? 'm' : 'n', &x, '.')) || !(s = schema_name_field(s, k ? 'n' : 'k', &y, '\0'))) return -1;
  *groups = (int)g, *token_k = k, *a = x, *b = y;
  return 0;
}

double schema_grouped_gemm_bytes(int groups, bool token_k, long long a, long long b, double flops) {
  const double g = groups, t = flops / (2.0 * g * (double)a * (double)b); /* the rows */
  if (token_k) return g * (2.0 * ((double)a * t + t * (double)b) + 8.0 * (double)a * (double)b); /* C[a x b] += */
  return g * (2.0 * (t * (double)b + (double)b * (double)a) + 2.0 * t * (double)a);           /* C[t x a] */
}

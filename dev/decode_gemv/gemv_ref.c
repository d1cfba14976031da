/* gemv_ref.c — the GEMV's plain-C reference (gemv.h): float64 sums of the
 * BF16 inputs, in index order. */
#include <string.h>

#include "gemv.h"

static double bf16(unsigned short h) {
  unsigned u = (unsigned)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

void dev_gemv_ref(int nt, int m, long long n, long long k, const unsigned short *X, const unsigned short *W, double *y) {
  memset(y, 0, (size_t)m * (size_t)n * sizeof *y);
  for (int r = 0; r < m; r++)
    for (long long kk = 0; kk < k; kk++) {
      const double x = bf16(X[r * k + kk]);
      for (long long j = 0; j < n; j++) y[r * n + j] += x * bf16(nt ? W[j * k + kk] : W[kk * n + j]);
    }
}

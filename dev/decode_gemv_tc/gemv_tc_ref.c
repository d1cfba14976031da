/* gemv_tc_ref.c — the tensor-core GEMV's plain-C reference (gemv_tc.h), moved
 * from runtime/ops/infer_ref.c (infer_ref_gemm_nn) with the kernel. */
#include <stddef.h>

#include "gemv_tc.h"

void dev_gemv_tc_ref(const float *x, const float *w, double *y, int m, long long n, long long k) {
  for (int r = 0; r < m; r++) {
    double *yr = y + (size_t)r * n;
    for (long long c = 0; c < n; c++) yr[c] = 0;
    for (long long i = 0; i < k; i++) {
      const double xv = x[(size_t)r * k + i];
      const float *wr = w + (size_t)i * n;
      for (long long c = 0; c < n; c++) yr[c] += xv * wr[c];
    }
  }
}

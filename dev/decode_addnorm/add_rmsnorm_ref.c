/* add_rmsnorm_ref.c — plain-C reference of dev_add_rmsnorm (add_rmsnorm.h). */
#include <math.h>

#include "add_rmsnorm.h"
#include "infer_ref.h"

void dev_ref_add_rmsnorm(float *x, const float *p, const float *gamma, float *y, long long rows, int cols,
                         double eps) {
  for (long long r = 0; r < rows; r++) {
    float *xr = x + r * cols, *yr = y + r * cols;
    const float *pr = p + r * cols;
    double ss = 0;
    for (int c = 0; c < cols; c++) {
      xr[c] = infer_ref_from_bf16(infer_ref_to_bf16(xr[c] + pr[c]));
      ss += (double)xr[c] * xr[c];
    }
    const double rs = 1.0 / sqrt(ss / cols + eps);
    for (int c = 0; c < cols; c++) yr[c] = (float)(xr[c] * rs * gamma[c]);
  }
}

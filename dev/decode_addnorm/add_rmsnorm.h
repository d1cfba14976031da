/* add_rmsnorm.h — the residual add and the next RMSNorm of the decode step in
 * one kernel: x = x + p (BF16, in place), y = x / rms(x) * gamma, rstd[row] =
 * 1 / rms(x) (rms with eps). One block of 64 threads a row, the row in
 * registers, the same threads, chunk order and two-warp sum as rt_rmsnorm_fwd's
 * row kernel, so x and y are bit-equal to rt_add then rt_rmsnorm_fwd. It lost:
 * the executor's TPOT did not move (README.md), so the runtime does not carry it.
 * Launches on `stream` (a cudaStream_t), returns 0 or -1 with e. */
#ifndef DEV_ADD_RMSNORM_H
#define DEV_ADD_RMSNORM_H

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Columns a multiple of 8, at most 4096. */
int dev_add_rmsnorm_fits(int cols);
int dev_add_rmsnorm(void *x, const void *p, const void *gamma, void *y, float *rstd, long long rows, int cols,
                    float eps, void *stream, ts_err *e);
/* Plain C on BF16 values held in floats: x = bf16(x + p) in place, y = x / sqrt(mean(x^2) + eps) * gamma
 * (double sums, y not rounded). */
void dev_ref_add_rmsnorm(float *x, const float *p, const float *gamma, float *y, long long rows, int cols,
                         double eps);

#ifdef __cplusplus
}
#endif
#endif

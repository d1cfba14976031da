/* calibrate_fp8.h — the FP8 GEMM table ("gemm_fp8") of `tacorun calibrate`.
 *
 * The plain-C reference of runtime/ops/exec_gemm_fp8.h and the error measure of its check
 * (calibrate_fp8_ref.c, built without CUDA too, so the CPU tests check them); the check and the timing
 * themselves run on the GPU (calibrate_fp8.c, declared in calibrate.h). E4M3 codes are encoded and
 * decoded by kernels/taco_fp8.h (round to nearest even, saturating; decode exact), the conversion the
 * TACO kernels' tests compare with the hardware's over all 2^32 floats. */
#ifndef CALIBRATE_FP8_H
#define CALIBRATE_FP8_H

#include <stddef.h>
#include <stdint.h>

/* The check's tolerances: relative L2 error ||D - ref|| / ||ref|| of the GPU's BF16 D against the
 * reference in double. BF16 rounding of D alone is 1.5e-3 to 1.7e-3 on the check's inputs (split
 * accumulation: partial sums promoted to FP32). Fast accumulation keeps them in the tensor cores' narrower
 * accumulator along k: DeepSeek-V3's report (arXiv 2412.19437, section 3.3.2) measured about 14 bits kept
 * on Hopper and a maximum relative error near 2 % at k = 4096; sums of 32 products added into a 13-bit
 * truncating accumulator, emulated on the CPU on the check's inputs, reach 6.6e-3 at k = 8192. So 1e-2
 * for split accumulation, 5e-2 for fast. A wrong layout, a scale left out (the
 * check's scales are 0.0037 and 1.9) or an element not written gives an error of order 1. */
#define CALIB_FP8_REL_L2_TOL_SPLIT 1e-2
#define CALIB_FP8_REL_L2_TOL_FAST 5e-2

/* n E4M3 codes of values drawn uniformly from [-amax, amax] (amax <= 448, E4M3's largest finite),
 * rounded to nearest even; *state is the generator's (xorshift64*, any non-zero start). */
void calib_fp8_random_e4m3(uint8_t *q, size_t n, float amax, uint64_t *state);

/* C[m x n] = a_scale b_scale sum_k A[i][k] B[j][k], A [m x k] and B [n x k] row-major E4M3 codes,
 * each decoded exactly and the sum accumulated in double: exec_gemm_fp8's function. */
void calib_fp8_gemm_ref(const uint8_t *A, float a_scale, const uint8_t *B, float b_scale, long long m, long long n,
                        long long k, double *C);

/* ||gpu - ref|| / ||ref|| over n elements, gpu as BF16 bits. A non-finite gpu element (one the GEMM did
 * not write over its NaN poison) gives INFINITY with *bad its index (else *bad = -1); ref all zero gives
 * NAN (a bad test input). */
double calib_fp8_rel_l2(const uint16_t *gpu, const double *ref, long long n, long long *bad);

#endif

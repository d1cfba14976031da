/* exec_gpu_test.h — what the executor's GPU kernel tests (test_exec_*_gpu.cu)
 * share: checked CUDA calls, a seeded uniform generator, BF16 rounding as the
 * GPU does it (round to nearest even), and the relative L2 error. */
#ifndef EXEC_GPU_TEST_H
#define EXEC_GPU_TEST_H

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#include "gpu_check.h"

/* A failed CUDA call ends the test naming the call. */
#define CK(x) CUDA_CHECK_EXIT(x)
/* A failed executor call (ts_err e in scope) ends the test with its message. */
#define TRY(x)                                                                                               \
  do {                                                                                                       \
    if ((x) != 0) {                                                                                          \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, e.msg);                                            \
      exit(1);                                                                                               \
    }                                                                                                        \
  } while (0)

static uint64_t test_rng = 0x9E3779B97F4A7C15ull;
static inline void test_seed(uint64_t s) { test_rng = s; }
static inline double urand(void) { /* xorshift64*, uniform in [0, 1) */
  test_rng ^= test_rng >> 12;
  test_rng ^= test_rng << 25;
  test_rng ^= test_rng >> 27;
  return (double)((test_rng * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}
static inline uint16_t to_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static inline double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* Relative L2 error of got against ref, counting non-finite values of got. */
static inline double rel_l2(const std::vector<double> &ref, const std::vector<double> &got, int *nonfinite) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); i++) {
    if (!isfinite(got[i])) (*nonfinite)++;
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

#endif

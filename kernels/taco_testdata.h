/* taco_testdata.h — random test tensors made on the GPU (benchmarks need
 * gigabytes of non-zero data; making it on the host would take longer than
 * the measurement). */
#ifndef TACO_TESTDATA_H
#define TACO_TESTDATA_H

#include <stddef.h>
#include <stdint.h>

#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x[i] = scale * (approximately N(0,1)), a hash of (seed, i); BF16 or FP32. */
int taco_fill_random(void *x, taco_dtype dt, size_t n, uint64_t seed, float scale, void *stream);

#ifdef __cplusplus
}
#endif
#endif

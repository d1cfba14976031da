/* argmax_one_pass.h — greedy sampling as one kernel: one block of 512 threads a
 * sequence walks its whole row (every shard), an element a thread per step,
 * then a block reduction. It lost to the library's two-pass infer_argmax
 * (chunks of 4,096 words, 16-byte loads, then a pick per sequence): README.md.
 * Same contract as infer_argmax (infer_kernels.h). Launches on `stream`. */
#ifndef DEV_ARGMAX_ONE_PASS_H
#define DEV_ARGMAX_ONE_PASS_H

#include <stdint.h>

#include "ts_error.h"

#ifdef __cplusplus
extern "C" {
#endif

int dev_argmax_one_pass(const void *logits, int32_t *token, int batch, int tp, long long vocab_local,
                        long long vocab_valid, void *stream, ts_err *e);

#ifdef __cplusplus
}
#endif
#endif

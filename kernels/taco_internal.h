/* taco_internal.h — shared by the codec's C and CUDA files, not part of the API. */
#ifndef TACO_INTERNAL_H
#define TACO_INTERNAL_H

#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records "file:line: message" for taco_last_error() and returns -1. */
int taco_fail_at(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define TACO_FAIL(...) taco_fail_at(__FILE__, __LINE__, __VA_ARGS__)

/* taco_codec.cu: the blocks-per-SM setting (taco_set_blocks_per_sm): -1 occupancy, 0 no persistence, n > 0 */
int taco_blocks_per_sm_setting(void);

/* taco_tiled.cu: encode / decode of a contiguous tensor with warp tiles
 * (taco_set_tiling): stages 0 = inputs through registers (WARP), > 0 = a
 * per-warp ring of that many bulk-copied tiles (BULK). xpose: the shared-memory
 * Hadamard (32 per thread); per_thread 32 or 64 (encode only). Arguments are
 * checked by the callers (taco_codec.cu). */
int taco_tiled_encode(const void *x, taco_dtype dt, size_t n, taco_params p, int xpose, int per_thread, int stages,
                      void *block, taco_nonfinite *nf, void *stream);
int taco_tiled_decode(const void *block, size_t n, taco_params p, void *y, taco_dtype dt, int xpose, int per_thread,
                      int stages, void *stream);

#ifdef __cplusplus
}
#endif
#endif

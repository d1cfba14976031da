/* taco_internal.h — shared by the codec's C and CUDA files, not part of the API. */
#ifndef TACO_INTERNAL_H
#define TACO_INTERNAL_H

#include <stddef.h>

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

/* taco_tiled.cu, round 5: options of the warp-tiled encode and decode and of
 * the streaming kernels (taco_stream_device), a set of TACO_TILED_* flags.
 * Process-wide, TACO_TILED_OPTS_DEFAULT until taco_set_tiled_options
 * (`tacorun bench-codec --variants`: "none" or flags joined by '+', e.g.
 * "d2+pdl", taco_parse_tiled_options). The kernel
 * templates with DEPTH2 / EVICT exist for the (G, transform, P) combinations
 * the library's defaults run (G = 128 and 256); others run without them. */
enum {
  TACO_TILED_DEPTH2 = 1u,  /* "d2": two tiles of loads in flight per lane, not one */
  TACO_TILED_EVICT = 2u,   /* "ef": loads and stores with an L2 evict-first policy (createpolicy) and no L1 allocation,
                              instead of ld/st.global.cs */
  TACO_TILED_PDL = 4u,     /* "pdl": programmatic dependent launch (the next kernel's blocks are placed while this
                              one drains; each kernel waits for its predecessor before touching memory) */
  TACO_TILED_FULLGRID = 8u /* "full": exactly blocks-per-SM x SMs blocks (warps get n or n+1 tiles, SMs the same
                              share), not the fewest that give every warp the same count */
};
#define TACO_TILED_ALL 15u
#define TACO_TILED_OPTS_DEFAULT 0u
unsigned taco_tiled_options(void);
int taco_set_tiled_options(unsigned flags);                  /* -1 for unknown bits */
int taco_parse_tiled_options(const char *s, unsigned *flags); /* "none" | "d2+ef+pdl+full" (any subset); -1 if bad */
void taco_format_tiled_options(unsigned flags, char *buf, size_t size); /* "none" or "d2+pdl" ... */

/* A streaming kernel of a fixed read/write mix (the ceiling for a codec's
 * traffic): each of `units` units reads `reads` 16-byte words (at src + r *
 * units * 16) and writes `writes` (at dst + w * units * 16); (reads, writes)
 * = (1, 1) copy, (2, 1) the encode's mix, (1, 2) the decode's. Honours the
 * EVICT, DEPTH2 (8 units in flight per thread, else 4) and PDL options. */
int taco_stream_device(void *dst, const void *src, int reads, int writes, size_t units, void *stream);

#ifdef __cplusplus
}
#endif
#endif

/* taco_codec.h — the TACO FP8 codec for tensor-parallel tensors (C API).
 *
 * One encoded block of n elements with group size G holds
 *     payload: ngroups * G bytes of FP8 (the last group zero-padded)
 *     scales:  ngroups * 2 floats {s_a, s_q} per group, right after the payload
 * with ngroups = ceil(n / G): taco_wire_bytes(n, G) = ngroups * (G + 8) bytes.
 * Blocks are self-contained, so a message cut into chunks of whole groups is
 * encoded chunk by chunk into consecutive blocks and each travels on its own.
 *
 * Per group: s_a = fp8_max * rsqrt(mean(x^2) + 1e-6) clamped to [1e-3, 1e3];
 * y = H_G (s_a x) / sqrt(G); s_q = absmax(y) / fp8_max clamped to
 * [1e-12, 1e6]; q = fp8_saturate(y / s_q). Decode: x = H_G (q s_q) / sqrt(G) / s_a.
 *
 * Host functions launch on the given stream and return 0, or -1 with a
 * message (file:line) in taco_last_error(). The plain-C references in
 * taco_ref.h compute the same functions on the CPU. */
#ifndef TACO_CODEC_H
#define TACO_CODEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TACO_FP8_E4M3, TACO_FP8_E5M2 } taco_fp8;
typedef enum { TACO_DTYPE_BF16, TACO_DTYPE_FP32 } taco_dtype;

typedef struct {
  int group;    /* G = Hadamard size: 32, 64, 128, 256 or 512 */
  taco_fp8 fp8;
} taco_params;

/* Non-finite inputs found by an encode: how many elements, and the first index.
 * Lives in device memory; groups containing them are encoded as zeros and
 * other groups are unaffected. Reset with taco_nonfinite_reset. */
typedef struct {
  unsigned long long count;
  unsigned long long first_index; /* ULLONG_MAX when count == 0 */
} taco_nonfinite;

static inline size_t taco_groups(size_t n, int group) { return (n + (size_t)group - 1) / (size_t)group; }
static inline size_t taco_wire_bytes(size_t n, int group) { return taco_groups(n, group) * ((size_t)group + 8); }

const char *taco_last_error(void);
int taco_params_valid(taco_params p);

/* stream arguments are cudaStream_t, passed as void* so C callers need no CUDA headers */
int taco_encode(const void *x, taco_dtype dt, size_t n, taco_params p, void *block, taco_nonfinite *nf,
                void *stream);
int taco_decode(const void *block, size_t n, taco_params p, void *y, taco_dtype dt, void *stream);
/* k encoded blocks of n elements each, block i at in + i * taco_wire_bytes(n, G):
 * y = sum_i decode(block i), accumulated in FP32. */
int taco_decode_sum(const void *in, int k, size_t n, taco_params p, void *y, taco_dtype dt, void *stream);
/* Same sum, re-encoded into one block (the reduce step of a two-shot all-reduce). */
int taco_decode_sum_encode(const void *in, int k, size_t n, taco_params p, void *block, void *stream);

/* Sets count = 0 and first_index = ULLONG_MAX (device memory). */
int taco_nonfinite_reset(taco_nonfinite *nf, void *stream);

/* Added by the kernels owner:
 * - x, y and block must be 16-byte aligned (cudaMalloc'ed buffers, and chunks
 *   cut at whole groups, are); otherwise the call fails.
 * - nf may be NULL (groups with NaN/Inf are still zeroed, just not reported).
 * - The same encode as three separate passes through an FP32 workspace of
 *   taco_unfused_workspace_bytes(n, G) (scale, Hadamard, cast), bit-identical
 *   to taco_encode on finite input; it exists to measure the fusion. */
size_t taco_unfused_workspace_bytes(size_t n, int group);
/* The codec kernels run persistent grids (as many blocks as fit, each walking
 * many tiles). A kernel meant to overlap an NCCL kernel on another stream can
 * leave it room: blocks per SM n > 0 caps the grid at n * SMs, 0 launches one
 * tile per thread (blocks retire as they finish), -1 restores the default.
 * Process-wide (the library reads no environment; `tacorun bench-codec --variants`).
 * Returns 0, or -1 for n outside [-1, 64]. */
int taco_set_blocks_per_sm(int n);
/* How the kernels do the cross-lane stages of the Hadamard transform: warp
 * shuffles (the first version), one shared-memory transpose each way, or AUTO:
 * the transpose for G >= 256, shuffles below (measured on the H200: the
 * transpose gains up to 4 points of bandwidth at G = 256/512 and loses 2-11 at
 * G = 64/128; kernels/RESULTS.md). All give bit-identical results. Process-wide,
 * TACO_HADAMARD_DEFAULT until set. Returns 0, or -1 for another value. */
typedef enum { TACO_HADAMARD_SHUFFLE = 0, TACO_HADAMARD_SMEM = 1, TACO_HADAMARD_AUTO = 2 } taco_hadamard;
#define TACO_HADAMARD_DEFAULT TACO_HADAMARD_AUTO
int taco_set_hadamard(taco_hadamard h);
/* How the kernels load the streamed input (encode: the tensor; decode and
 * decode-sum: the codes and scales of block 0), all bit-identical:
 * STREAM: ld.global.cs (evict-first), the next tile's loads issued before the
 * current tile is computed (the first version); L2PF: the same with
 * ld.global.nc.L1::no_allocate.L2::256B (read-only path, no L1 allocation,
 * the L2 fetches whole 256-byte blocks); DEEP: L2PF with two tiles of loads in
 * flight per thread. Process-wide, TACO_LOADS_DEFAULT until set (STREAM: on the H200 L2PF measured 0-4 points
 * slower and DEEP 4-10 slower for the encode; kernels/RESULTS.md round 3).
 * Returns 0, or -1 for another value. */
typedef enum { TACO_LOADS_STREAM = 0, TACO_LOADS_L2PF = 1, TACO_LOADS_DEEP = 2 } taco_loads;
#define TACO_LOADS_DEFAULT TACO_LOADS_STREAM
int taco_set_loads(taco_loads l);
/* How taco_decode_sum_encode re-encodes the sum. DIRECT (default): in the
 * Hadamard domain, no transform (the decoded sum is x = H acc, so the new
 * codes come from y = G acc and sum(x^2) = G sum(acc^2)); a zero-padded last
 * group is transformed back, its padding zeroed, and encoded as TRANSFORM
 * does. TRANSFORM: decode (one transform), then encode (a second one):
 * bit-identical to taco_encode(taco_decode_sum(...)) in FP32. The two differ by
 * float rounding only (taco_ref.h states both). TACO_DSE_DEFAULT until set.
 * Returns 0, or -1 for another value. */
typedef enum { TACO_DSE_DIRECT = 0, TACO_DSE_TRANSFORM = 1 } taco_dse;
#define TACO_DSE_DEFAULT TACO_DSE_DIRECT
int taco_set_dse(taco_dse d);
/* Elements each thread holds: 32, or 64 (G >= 64 only; G = 32 stays at 32):
 * a thread then holds two neighbouring 32-element lanes, so the transform has
 * one cross-lane stage fewer and the codes move in 16-byte pieces; results are
 * bit-identical (taco_device.cuh says why). With 64 the cross-lane stages use
 * shuffles whatever taco_set_hadamard says, and TACO_LOADS_DEEP runs as L2PF;
 * a decode-sum of k > 1 blocks whose wire size is not a multiple of 16 bytes
 * (an odd number of groups) runs with 32. 0 = AUTO (the default): 64 where it
 * measured faster on the H200 (encode at G >= 256, decode-sum-encode), 32
 * elsewhere (kernels/RESULTS.md round 3).
 * Returns 0, or -1 for another value. */
#define TACO_PER_THREAD_DEFAULT 0
int taco_set_per_thread(int p);
/* How taco_encode (contiguous tensors; not caat_gather_encode) and
 * taco_decode (k = 1) walk the tensor, all bit-identical:
 * GRID: a persistent grid whose threads stride over group slices with 64-bit
 * index arithmetic per tile (rounds 1-3); WARP: each warp owns whole tiles of
 * 32 x P contiguous elements, walks them with pointer increments and constant
 * offsets on a grid sized so every warp gets the same number of tiles, the
 * next tile's loads in registers; BULK: WARP with the inputs brought into a
 * per-warp ring of `stages` tiles in shared memory by 1-D bulk asynchronous
 * copies (cp.async.bulk + mbarrier). WARP and BULK run the loads variant
 * STREAM only (another loads setting runs GRID); the decode runs 32 per thread.
 * Process-wide, TACO_TILING_DEFAULT with TACO_BULK_STAGES_DEFAULT until set.
 * Returns 0, or -1 for another tiling or stages outside 1..16 (BULK). */
typedef enum { TACO_TILING_GRID = 0, TACO_TILING_WARP = 1, TACO_TILING_BULK = 2, TACO_TILING_AUTO = 3 } taco_tiling;
/* AUTO: WARP for the encode, GRID for the decode (measured on the H200,
 * kernels/RESULTS.md round 4: the tiled encode gains up to 3 points, the tiled
 * decode none, and to FP32 it is half as fast) */
#define TACO_TILING_DEFAULT TACO_TILING_AUTO
#define TACO_BULK_STAGES_DEFAULT 4
int taco_set_tiling(taco_tiling t, int stages);
/* A plain device copy (16-byte streaming loads and stores, persistent grid):
 * the same-size copy ceiling bench-codec prints next to cudaMemcpyAsync.
 * Pointers and bytes must be multiples of 16. */
int taco_copy_device(void *dst, const void *src, size_t bytes, void *stream);
int taco_encode_unfused(const void *x, taco_dtype dt, size_t n, taco_params p, void *block, void *workspace,
                        void *stream);

/* CAAT-Net: rows x cols (cols = hidden), the first `shared` columns are synchronized. */
int caat_gather_shared(const void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, void *out,
                       void *stream);
int caat_scatter_shared(const void *shared_in, taco_dtype dt, size_t rows, size_t cols, size_t shared,
                        void *x, void *stream);
/* Multiplies the private columns [shared, cols) by scale (sqrt(TP)). */
int caat_scale_private(void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, float scale,
                       void *stream);

/* Gather fused with encode: the shared columns of x encoded as one block of
 * rows * shared elements (equal to caat_gather_shared then taco_encode).
 * Needs shared % G == 0. */
int caat_gather_encode(const void *x, taco_dtype dt, size_t rows, size_t cols, size_t shared, taco_params p,
                       void *block, taco_nonfinite *nf, void *stream);

#ifdef __cplusplus
}
#endif
#endif

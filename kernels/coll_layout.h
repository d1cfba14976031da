/* coll_layout.h — the arithmetic of compressed collectives, in plain C.
 *
 * How a message is cut into per-rank segments and pipeline chunks of whole
 * codec groups, where each chunk's encoded block lives in the wire buffers,
 * which size thresholds apply, and the nccl-tests bus-bandwidth factors.
 * No CUDA here, so the CPU tests check every formula the GPU code uses. */
#ifndef COLL_LAYOUT_H
#define COLL_LAYOUT_H

#include <stddef.h>

#include "ts_coll.h"

/* The collectives are the rows of common/ts_coll.h's table (name, steps,
 * bus factor, how a count is cut), shared with plan, schema and sim. */
typedef ts_coll coll_op;
#define COLL_OP_ALLREDUCE TS_COLL_ALLREDUCE
#define COLL_OP_ALLGATHER TS_COLL_ALLGATHER
#define COLL_OP_REDUCESCATTER TS_COLL_REDUCESCATTER
#define COLL_OP_ALLTOALL TS_COLL_ALLTOALL
#define COLL_OP_SENDRECV TS_COLL_SENDRECV
#define COLL_OP_COUNT TS_COLL_COUNT

/* Defaults for callers that pass no measured values (0 in coll_opts): the
 * chunk and threshold of common/ts_coll.h, which the simulator uses too
 * (why these values: there). On NVLink the codec paid off only from 64 MiB
 * (all-gather, reduce-scatter, send/recv) or never (all-reduce); callers
 * pass their transport's own thresholds; the default fits the slow links. */
#define COLL_DEFAULT_CHUNK_BYTES TS_CODEC_CHUNK_BYTES
#define COLL_DEFAULT_MIN_BYTES TS_CODEC_MIN_BYTES

const char *coll_op_name(coll_op op);
/* Parses "allreduce", "allgather", ...; returns -1 when unknown. */
int coll_op_parse(const char *name, coll_op *op);

/* nccl-tests' bus-bandwidth factor: busbw = algbw * factor. */
double coll_busbw_factor(coll_op op, int nranks);

/* Total uncompressed elements an op moves for a per-op `count`:
 * all-reduce: count; all-gather, reduce-scatter: count per rank * nranks;
 * all-to-all: count per peer * nranks; send/recv: count. */
size_t coll_total_elems(coll_op op, size_t count, int nranks);

/* How a message is cut. The message is nranks segments of `seg` elements
 * (one segment for send/recv), each segment cut into `nchunks` chunks of
 * `m` elements (a multiple of two groups, except when m == seg);
 * segment r holds seg_len[r] <= seg elements (the last may be short or
 * empty for all-reduce of an odd size). Chunk j of segment r holds
 * coll_chunk_elems() elements, and its encoded block starts at
 * j * nranks * wire(m) bytes into a wire buffer (chunk-major layout). */
typedef struct {
  coll_op op;
  int nranks, group;
  size_t count;   /* as given */
  size_t seg;     /* segment length (elements) */
  size_t m;       /* chunk length within a segment (elements) */
  size_t nchunks; /* chunks per segment */
  size_t total;   /* total elements of the message */
} coll_layout;

/* chunk_bytes: uncompressed bytes of the whole message per pipeline step
 * (0: default); elem_bytes: 2 for BF16, 4 for FP32. Returns -1 on nonsense
 * (nranks < 1, bad group). */
int coll_layout_make(coll_layout *l, coll_op op, size_t count, int nranks, int group, size_t elem_bytes,
                     size_t chunk_bytes);
/* Elements of segment r (all-reduce: the last segments may be short or empty). */
size_t coll_seg_len(const coll_layout *l, int r);
/* Elements of chunk j of segment r (0 when the segment ends before it). */
size_t coll_chunk_elems(const coll_layout *l, int r, size_t j);
/* Encoded bytes of n elements: ceil(n / G) * (G + 8). */
size_t coll_wire_bytes(size_t n, int group);
/* Elements a block of n elements is encoded as: n rounded up to an even
 * number of groups (the tail zero-padded), so every block is a multiple of
 * 16 bytes and blocks laid back to back stay 16-byte aligned, as the codec
 * kernels require. */
size_t coll_block_elems(size_t n, int group);
/* Wire bytes of a block holding n elements: coll_wire_bytes(coll_block_elems(n)). */
size_t coll_block_wire(size_t n, int group);
/* Bytes of one wire buffer holding all chunks of all segments. */
size_t coll_wire_buffer_bytes(const coll_layout *l);
/* Byte offset of chunk j's region (nranks blocks) in a wire buffer. */
size_t coll_chunk_offset(const coll_layout *l, size_t j);

/* Staging of the direct path (coll_direct.h) for one call, whole message
 * (no chunks): region A holds one slot per source rank (the blocks a rank
 * receives), region B (two-shot all-reduce only) one slot per rank's reduced
 * segment. stride_a is receiver r's slot stride, so that its n blocks lie
 * back to back as taco_decode_sum wants them; region_a covers the largest.
 * half = both regions, each 256-byte aligned: one parity half of the
 * double-buffered staging. one_shot: the all-reduce sends the whole message. */
typedef struct {
  size_t region_a, stride_b, region_b, half;
} coll_direct_sizes;
void coll_direct_sizes_of(coll_op op, int one_shot, size_t count, int nranks, int group, coll_direct_sizes *s);
/* Elements rank r receives per source in region A (its segment of a two-shot
 * all-reduce; else the per-rank count). */
size_t coll_direct_recv_elems(coll_op op, int one_shot, size_t count, int nranks, int group, int r);
size_t coll_direct_stride_a(coll_op op, int one_shot, size_t count, int nranks, int group, int r);

/* True when a message of `bytes` uncompressed bytes should go through the
 * codec (bytes >= min_bytes). */
int coll_use_codec(size_t bytes, size_t min_bytes);

/* From a size sweep (sizes ascending, time without and with the codec),
 * the smallest size from which the codec is faster at this size and every
 * larger one; returns SIZE_MAX when it never is. */
size_t coll_threshold_from_sweep(const size_t *sizes, const double *t_plain, const double *t_codec, int n);

/* Error bound of the codec on one collective: the per-group relative L2
 * error of the result against the uncompressed collective, for inputs
 * drawn independently per rank. One encode/decode costs at most
 * 2^-(mantissa+1) per group (round to nearest in FP8, normal range; the
 * orthonormal Hadamard keeps norms). A sum of k encoded blocks costs that
 * times sum_i |x_i| / |sum_i x_i|, about sqrt(k) for independent inputs
 * (we allow 1.5 sqrt(k)); the two-shot all-reduce adds one re-encode.
 * Inputs that cancel across ranks (x_0 = -x_1 in a group) have no such
 * bound relative to the sum: the error stays relative to sum_i |x_i|.
 * Plus the BF16 rounding of the output (2^-8 with margin). */
double coll_error_bound(coll_op op, int nranks, int fp8_mantissa_bits);

#endif

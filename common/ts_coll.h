/* ts_coll.h — each collective and each codec described once.
 *
 * As nccl-tests describes each collective in one `struct testColl`, one row
 * of ts_colls[] holds what the planner, the calibration files, the simulator
 * and the compressed collectives (kernels/coll_layout.c) need to know about a
 * collective: its name (also its calibration key), its ring steps, its
 * nccl-tests bus-bandwidth factor, how many elements a per-rank count moves,
 * and how the compressed collectives cut it into blocks. ts_codecs[] does the
 * same for the codecs; the chunk size and the size thresholds shared by the
 * simulator and the executor are the constants below. Plain C, no allocation. */
#ifndef TS_COLL_H
#define TS_COLL_H

#include <stddef.h>

/* The order is the order of plan_coll (plan/plan.h), coll_op
 * (kernels/coll_layout.h) and sim_nccl_coll (sim/sim_nccl.h): they are these
 * values. Send/recv is not a plan collective (plan ops SEND/RECV). */
typedef enum {
  TS_COLL_ALLREDUCE,
  TS_COLL_ALLGATHER,
  TS_COLL_REDUCESCATTER,
  TS_COLL_ALLTOALL,
  TS_COLL_SENDRECV,
  TS_COLL_COUNT
} ts_coll;

typedef struct {
  const char *name; /* "allreduce", ...: printed, parsed, and the calibration table key */
  /* ring steps = steps_per_peer * (nranks - 1), or fixed_steps when > 0 */
  double steps_per_peer;
  int fixed_steps;
  /* nccl-tests bus-bandwidth factor: busbw = algbw * (bus_num * (n - 1) / n),
   * or bus_fixed when > 0 (send/recv: 1) */
  double bus_num, bus_fixed;
  int count_per_rank; /* the call's count is per rank: the message is count * nranks elements */
  int segmented;      /* compressed: the message is cut into nranks segments of whole groups (two-shot all-reduce) */
  int one_block;      /* compressed: one encoded block per chunk (send/recv), else one per rank */
} ts_coll_desc;

extern const ts_coll_desc ts_colls[TS_COLL_COUNT];

const char *ts_coll_name(ts_coll c);
/* "allreduce", ... -> 0; -1 when unknown. */
int ts_coll_parse(const char *name, ts_coll *c);
/* The collective a calibration key starts with ("allreduce.taco128.infer" ->
 * allreduce); -1 when none. */
int ts_coll_of_key(const char *key, ts_coll *c);
/* nccl-tests' factor; 0 for nranks < 1. */
double ts_coll_busbw_factor(ts_coll c, int nranks);
/* Latency steps of the ring algorithm. */
double ts_coll_steps(ts_coll c, int nranks);

/* ---- codecs ---- */

typedef enum { TS_CODEC_NONE, TS_CODEC_TACO, TS_CODEC_CAAT, TS_CODEC_TACO_CAAT, TS_CODEC_COUNT } ts_codec;

typedef struct {
  const char *name; /* as plans and result files spell it */
  int taco;         /* FP8 groups of G elements, each with two fp32 scales (8 bytes) */
  int caat;         /* CAAT-Net: only the shared channels travel */
} ts_codec_desc;

extern const ts_codec_desc ts_codecs[TS_CODEC_COUNT];
/* The names alone, NULL-terminated (for common/ts_json.h's tsj_enum). */
extern const char *const ts_codec_names[TS_CODEC_COUNT + 1];
extern const char *const ts_coll_names[TS_COLL_COUNT + 1];
const char *ts_codec_name(ts_codec k);
/* TACO's encoded bytes of n elements in groups of g: ceil(n / g) * (g + 8). */
double ts_taco_wire_elements(double n, int g);

/* Uncompressed bytes of a compressed collective per pipeline chunk, used by
 * the executor's compressed collectives (kernels/coll_layout.c, coll_opts
 * chunk_bytes 0) and by the simulator's codec pipeline (sim/sim_costs.c,
 * search_estimate.c). Measured on 2 x H200 (runtime/RESULTS-comm.md, rounds
 * 2-4): the whole message was the fastest chunk at every size up to 64 MiB on
 * NVLink, host shared memory and sockets, and 64 MiB chunks at 256 MiB; a
 * chunked pipeline hid none of the codec time. So a message of at most this
 * size is one chunk: encode, transfer and decode one after the other. */
#define TS_CODEC_CHUNK_BYTES ((size_t)64 << 20)
/* Messages under this size travel uncompressed when the caller of the
 * compressed collectives passes no threshold (coll_opts.min_bytes 0 with the
 * default options): where the codec paid off through host shared memory and
 * sockets. A plan's own threshold is its codec_min_bytes field (default
 * PLAN_DEFAULT_CODEC_MIN_BYTES, 8 MiB, plan/plan_internal.h), which the
 * simulator and `tacorun execute` both obey. */
#define TS_CODEC_MIN_BYTES ((size_t)4 << 20)

#endif

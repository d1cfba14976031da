/* coll_taco.h — TACO-compressed collectives over NCCL (C API).
 *
 * A coll_team is the set of ranks of one NCCL communicator that this
 * process drives: one under MPI (one process per GPU), or every local GPU
 * in single-process mode (ncclCommInitAll). Each call takes one buffer per
 * local rank and enqueues the whole collective asynchronously: the input
 * must be ready on each rank's `stream`, and the output is ready on that
 * stream when the work enqueued there completes. Nothing here blocks on the
 * GPU, so the caller's wait (rt_nccl_wait) can poll ncclCommGetAsyncError
 * and abort on a dead peer.
 *
 * Compressed path: the message is cut into chunks of whole codec groups;
 * the codec of chunk i+1 runs on a codec stream while chunk i travels on
 * the comm stream (events order them). Messages smaller than
 * opts.min_bytes (uncompressed) take plain NCCL in their own dtype.
 * Odd sizes (not multiples of the group nor of the rank count) and
 * in-place calls (all-gather: send == recv + rank*count; reduce-scatter:
 * send + rank*count == recv; all-reduce: send == recv) are supported.
 *
 * Direct path (coll_direct.h, coll_opts.direct): where the GPUs of the team
 * reach each other's memory over NVLink, all-gather, reduce-scatter and
 * all-reduce skip NCCL and the chunked pipeline: the codec kernels write
 * into the peers' staging buffers and flags in GPU memory order the steps.
 * Through host shared memory (--transport shm, or auto without peer access) the same
 * algorithms run with the staging and flags in pinned host memory that every
 * rank maps (coll_host.h, the "host" flavour of the direct path).
 *
 * Every function returns 0, or -1 with "file:line: call: reason" in
 * coll_last_error(). */
#ifndef COLL_TACO_H
#define COLL_TACO_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "coll_layout.h"
#include "taco_codec.h"

#define COLL_MAX_LOCAL 16
#define COLL_STAGES 5     /* encode, transfer, reduce, transfer, decode */
#define COLL_EVENT_SLOTS 4 /* chunks in flight per stage */

/* NONE_DIRECT: no codec, through the direct path (coll_direct.h; all-gather,
 * reduce-scatter, one-shot all-reduce): copies and sums instead of the codec,
 * so that bench-comm can separate what the direct transport gives from what
 * the codec gives. An error where the team has no direct path. */
typedef enum { COLL_CODEC_NONE, COLL_CODEC_TACO, COLL_CODEC_NONE_DIRECT } coll_codec;

/* How the all-to-all step of a compressed reduce-scatter, all-reduce or
 * all-to-all moves its blocks. P2P: grouped ncclSend/ncclRecv. ALLGATHER
 * (two ranks only, else P2P): each rank contributes the block for its peer
 * to an ncclAllGather, which is the same traffic but runs on NCCL's
 * collective channels; faster where NCCL's point-to-point path is narrow
 * (host shared memory, sockets). Chosen per transport by measuring. */
typedef enum { COLL_EXCHANGE_P2P, COLL_EXCHANGE_ALLGATHER } coll_exchange;

/* How a compressed all-reduce runs. TWO_SHOT: encode, all-to-all, decode-sum-
 * encode, all-gather, decode (each rank moves 2 (n-1)/n of the encoded message,
 * two quantizations). ONE_SHOT: encode the whole message, all-gather it,
 * decode-sum the n blocks (each rank moves (n-1) times the encoded message,
 * one quantization, one NCCL phase and two codec stages instead of two and
 * three). On two ranks both move the same bytes and ONE_SHOT measured faster
 * (runtime/RESULTS-comm.md), but the shipped calibration files time the
 * TWO_SHOT all-reduce, so AUTO (0, the default) stays TWO_SHOT until they are
 * re-measured: what runs is what the simulator predicts. ONE_SHOT is opt-in
 * (coll_opts.allreduce; `tacorun bench-comm --allreduce`). */
typedef enum { COLL_ALLREDUCE_AUTO = 0, COLL_ALLREDUCE_TWO_SHOT, COLL_ALLREDUCE_ONE_SHOT } coll_allreduce_algo;

/* Whether a compressed call may take the direct path (coll_direct.h: the
 * codec writes straight into the peer GPUs' memory over NVLink, no NCCL on
 * the data path). AUTO (0, the default): all-gather, reduce-scatter and
 * all-reduce take it wherever the team's GPUs reach each other's memory
 * over NVLink (CUDA reports peer access and coll_set_links allows it), at every size, else the NCCL path.
 * OFF: always NCCL. ON: the
 * direct path or an error, and also for a two-rank send/recv exchange. A
 * direct all-reduce with coll_opts.allreduce AUTO runs one-shot below
 * COLL_DIRECT_TWO_SHOT_MIN_BYTES (uncompressed) and two-shot from there
 * (measured on 2 x H200, runtime/RESULTS-comm.md round 4: one-shot 20 vs 34 us
 * at 1 MiB, two-shot 66 vs 68 us at 16 MiB and 670 vs 731 us at 256 MiB).
 * Host flavour (coll_host.h): AUTO takes it where coll_set_links says peer
 * access is off and shared host memory is on (NCCL's transport is host shared
 * memory), with all ranks on one host; coll_team_set_host(t, OFF) keeps the NCCL path there, ON
 * takes the host flavour wherever the ranks share a host (also instead of
 * NVLink: for tests). Its all-reduce with AUTO runs one-shot, chunked by
 * COLL_HOST_DEFAULT_CHUNK_BYTES. Codec COLL_CODEC_NONE_DIRECT runs the
 * same path uncompressed. */
typedef enum { COLL_DIRECT_AUTO = 0, COLL_DIRECT_OFF, COLL_DIRECT_ON } coll_direct_mode;
#define COLL_DIRECT_TWO_SHOT_MIN_BYTES ((size_t)16 << 20)
#define COLL_DIRECT_DEFAULT_CHUNK_BYTES ((size_t)64 << 20)
#define COLL_HOST_DEFAULT_CHUNK_BYTES ((size_t)16 << 20)
#define COLL_HOST_PUSH_COPY_DEFAULT 1 /* host flavour: blocks reach the peers' host staging by cudaMemcpyAsync */
#define COLL_DIRECT_PUSH_COPY_DEFAULT 0 /* 1: blocks reach the peers by cudaMemcpyAsync (coll_direct_steps.c) */

/* The direct path's two-shot all-reduce (coll_direct_pipe.c says how each runs and
 * what it measured): AUTO copy from COLL_DIRECT_AR_COPY_MIN_BYTES (bf16), else
 * WHOLE; PIPE: the message in direct_ar_pieces pieces whose decode-sum-encode
 * overlaps the next piece's transfer. */
typedef enum { COLL_DIRECT_AR_AUTO = 0, COLL_DIRECT_AR_WHOLE, COLL_DIRECT_AR_PIPE, COLL_DIRECT_AR_COPY } coll_direct_ar;
#define COLL_DIRECT_AR_PIECES_DEFAULT 2
/* How blocks reach the peers on the direct path: AUTO = by the copy engine
 * through host memory (COLL_HOST_PUSH_COPY_DEFAULT), by the encode's stores
 * over NVLink (COLL_DIRECT_PUSH_COPY_DEFAULT). */
typedef enum { COLL_PUSH_AUTO = 0, COLL_PUSH_ENCODE, COLL_PUSH_COPY } coll_push;

typedef struct {
  coll_codec codec;
  taco_params taco;  /* group, fp8 */
  taco_dtype dtype;  /* of the user's buffers: BF16 or FP32 */
  size_t chunk_bytes; /* uncompressed bytes of the message per pipeline step; 0: default */
  size_t min_bytes;   /* messages below this (uncompressed bytes) go plain; 0: always compress */
  coll_exchange exchange;
  coll_allreduce_algo allreduce; /* compressed all-reduce algorithm (0: AUTO) */
  coll_direct_mode direct;       /* direct path over NVLink (0: AUTO) */
  size_t direct_chunk_bytes;     /* direct path: uncompressed bytes of the message per chunk
                                    (0: COLL_DIRECT_DEFAULT_CHUNK_BYTES) */
  coll_direct_ar direct_ar;      /* direct two-shot all-reduce variant (0: AUTO) */
  int direct_ar_pieces;          /* PIPE: pieces, 1..COLL_EVENT_SLOTS (0: COLL_DIRECT_AR_PIECES_DEFAULT) */
  int direct_ar_own_copy;        /* PIPE: the own reduced block by the copy engine (0: a second encode, "dup") */
  coll_push push;                /* direct path: how blocks reach the peers (0: AUTO) */
  taco_nonfinite *nonfinite;     /* where this call's TACO encodes count NaN/Inf inputs (device memory
                                    of the team's GPU; they are encoded as zeros): lets the caller name
                                    the tensor. NULL, or a team of more than one local rank: the team's
                                    own counters (coll_team_nonfinite). */
} coll_opts;
/* Names of the variants above as `tacorun bench-comm` spells them and
 * result files record them; parse returns -1 for an unknown name. */
const char *coll_direct_ar_name(coll_direct_ar v);
int coll_direct_ar_parse(const char *s, coll_direct_ar *v);
const char *coll_push_name(coll_push v);
int coll_push_parse(const char *s, coll_push *v);

/* Defaults: TACO G=128 E4M3 on BF16, default chunk and threshold. */
coll_opts coll_opts_default(void);

typedef struct {
  int rank, device;
  ncclComm_t comm;
  cudaStream_t stream;        /* the caller's stream */
  cudaStream_t codec_stream;  /* owned: encode/decode kernels */
  cudaStream_t comm_stream;   /* owned: NCCL transfers of the compressed path (highest priority, so
                                 its kernels get SMs ahead of the codec of the next chunk) */
  cudaEvent_t ev_start, ev_codec_done, ev_comm_done;
  cudaEvent_t ev_stage[COLL_STAGES][COLL_EVENT_SLOTS];
  unsigned char *wire;        /* owned scratch for encoded blocks */
  size_t wire_bytes;
  void *pack;                 /* owned scratch for CAAT-Net shared channels */
  size_t pack_bytes;
  taco_nonfinite *nonfinite;  /* device memory, filled by encodes */
} coll_rank;

struct coll_direct; /* coll_direct_internal.h: peer mappings, flags, staging */

typedef struct {
  int nlocal, nranks;
  coll_rank r[COLL_MAX_LOCAL];
  struct coll_direct *direct; /* NULL until a call could use the direct path */
  double timeout_s;           /* bound on a direct wait for a peer (coll_team_set_timeout) */
  coll_direct_mode host_mode; /* host flavour of the direct path (coll_team_set_host) */
} coll_team;

const char *coll_last_error(void);

/* comms[i], devices[i], streams[i] for each local rank; streams are the
 * caller's (may be 0 for the legacy default stream only when nlocal == 1). */
int coll_team_init(coll_team *t, int nlocal, const ncclComm_t *comms, const int *devices,
                   const cudaStream_t *streams);
/* NaN/Inf inputs the team's TACO encodes met (and encoded as zeros) since the
 * last call, summed over the local ranks, in *count (*first: the first index
 * of the first local rank that had any, in its message); the counters are
 * reset. Call when the caller's streams are idle (after its wait): it
 * synchronizes them. */
int coll_team_nonfinite(coll_team *t, unsigned long long *count, unsigned long long *first);
/* Frees what the team owns (not the comms or the caller's streams), once each
 * rank's streams are idle; the wait is bounded by the team's timeout
 * (coll_team_set_timeout) and polls the rank's NCCL asynchronous error. A rank
 * whose streams do not come idle (a peer died under a direct wait, a kernel
 * stuck) keeps its buffers allocated rather than freeing them under a running
 * kernel: -1 with the reason in coll_last_error(); 0 when everything was freed. */
int coll_team_destroy(coll_team *t);
/* Allocates scratch for messages up to total_bytes (uncompressed) now, so
 * the timed calls never allocate. Synchronizes the team's streams. */
int coll_team_reserve(coll_team *t, coll_op op, size_t count, const coll_opts *o);

/* Bound on how long a direct-path wait spins for a peer before it records a
 * fault (default COLL_DIRECT_TIMEOUT_S_DEFAULT). */
#define COLL_DIRECT_TIMEOUT_S_DEFAULT 60.0
int coll_team_set_timeout(coll_team *t, double seconds);
/* Host flavour of the direct path, for the team's set-up (before its first
 * call): AUTO (default) where coll_set_links allows shared host memory but not
 * peer access, OFF never, ON wherever the ranks share a host. */
void coll_team_set_host(coll_team *t, coll_direct_mode mode);
/* Collective (every rank of the comm calls it at the same point): sets up the
 * direct path if it can be used; returns 1 when it can, 0 when not (why: a
 * short reason), -1 on a CUDA/NCCL error. */
int coll_direct_available(coll_team *t, const char **why);
/* What the caller's transport lets the direct paths use, for every team set
 * up after the call (process-wide; default: both). peer: GPU peer access
 * (NVLink), taken where CUDA reports it between the team's GPUs; host_shm:
 * pinned host memory shared by the processes of one host. The runtime sets it
 * from the run's transport (rt_nccl_init, coll_transport_links of
 * coll_transport.h: peer only for p2p, host_shm off for sockets), so the
 * library reads no NCCL_* variable. */
void coll_set_links(int peer, int host_shm);
/* What the direct path of the team runs over once set up: "nvlink", "host"
 * (pinned host memory, coll_host.h) or "none". */
const char *coll_direct_transport(const coll_team *t);

/* All-gather: count elements per rank; recv holds nranks * count. */
int coll_allgather(coll_team *t, const void *const *send, void *const *recv, size_t count, const coll_opts *o);
/* Reduce-scatter (sum): send holds nranks * count; recv holds count. */
int coll_reducescatter(coll_team *t, const void *const *send, void *const *recv, size_t count,
                       const coll_opts *o);
/* All-reduce (sum); compressed: one-shot or two-shot (coll_opts.allreduce). */
int coll_allreduce(coll_team *t, const void *const *send, void *const *recv, size_t count, const coll_opts *o);
/* All-to-all: count elements to and from each peer (block r of send goes to rank r). */
int coll_alltoall(coll_team *t, const void *const *send, void *const *recv, size_t count, const coll_opts *o);
/* Point-to-point for pipeline stages: local rank i sends count elements of
 * send[i] to send_peer[i] and receives count elements into recv[i] from
 * recv_peer[i]; a peer of -1 means none. */
int coll_sendrecv(coll_team *t, const void *const *send, const int *send_peer, void *const *recv,
                  const int *recv_peer, size_t count, const coll_opts *o);
/* CAAT-Net partial all-reduce of rows x cols (cols = hidden): the first
 * floor(p * cols) channels are all-reduced (TACO-encoded when o->codec is
 * TACO), the others stay private and are scaled by sqrt(nranks). x == y
 * is in place. */
int coll_caat_allreduce(coll_team *t, const void *const *x, void *const *y, size_t rows, size_t cols, double p,
                        const coll_opts *o);
/* Shared channels of a partial all-reduce: floor(p * cols), at least 0. */
size_t coll_caat_shared(size_t cols, double p);

/* Generic entry for benchmarks: dispatches on op (send/recv: ring shift,
 * rank r sends to r+1 and receives from r-1). */
int coll_run(coll_team *t, coll_op op, const void *const *send, void *const *recv, size_t count,
             const coll_opts *o);

size_t coll_dtype_bytes(taco_dtype dt);

#endif

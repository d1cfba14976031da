/* coll_direct.h — compressed collectives that write straight into the
 * peer GPUs' memory (NVLink), without NCCL on the data path.
 *
 * Within one node whose GPUs reach each other's memory (cudaDeviceCanAccessPeer,
 * NVLink; --transport p2p or auto), the codec kernels of coll_taco.h take a
 * pointer into a peer's staging buffer as their output: the encode writes
 * its FP8 block over NVLink while it reads the input from local HBM, so the
 * transfer costs no separate pass and no NCCL launch.
 *
 * Per team (collective, done at the first call that can use it):
 *   - single process (every rank local): peer access enabled between the GPUs;
 *   - one process per GPU: CUDA IPC handles of each rank's flag words and
 *     staging buffer, exchanged with an ncclAllGather of the handle bytes.
 * The staging buffer grows (collectively: every rank computes the same size
 * from the call) when a bigger message comes.
 *
 * Synchronisation: each rank owns one 64-bit "ready" word per source rank in
 * its memory. After its encodes have finished (kernel boundary, then a
 * system-scope fence) a rank stores the exchange's sequence number into every
 * peer's word (st.release.sys) and then waits until its own words reach that
 * number (ld.acquire.sys). The wait is bounded by %globaltimer: past the
 * team's timeout it records the stuck source in host-mapped memory and
 * returns, every later wait of the team returns at once, and
 * coll_direct_fault() (polled by rt_nccl_wait) reports it, so a dead or
 * silent peer ends in an error and ncclCommAbort, never a hang.
 * The staging is double-buffered by call parity: call k writes the peers'
 * half k % 2. A peer reads what call k wrote before its first signal of call
 * k + 1, and a rank writes that half again only in call k + 2, after it saw
 * that signal, so no block is overwritten while it is still being decoded.
 *
 * Algorithms (n ranks, rank `me`, S_p = rank p's staging half of this call):
 *   all-gather:      encode own shard into S_p slot me for every peer p (remote) and
 *                    into S_me slot me (local, second stream, then decoded there);
 *                    exchange flags; decode the peers' slots.
 *   reduce-scatter:  encode segment p into S_p slot me (remote), own segment
 *                    into S_me slot me; flags; decode-sum the n slots.
 *   all-reduce, one-shot: encode the whole message into every S_p slot me; flags;
 *                    decode-sum the n slots (one quantization).
 *   all-reduce, two-shot: reduce-scatter as above, but decode-sum-encode the
 *                    own segment into region B slot me of every rank; flags;
 *                    decode the n slots of region B.
 *   all-reduce, two-shot pipelined (coll_opts.direct_ar pipe, not the default): the
 *                    message cut into 2..4 pieces, each a two-shot as above with
 *                    its own sequence numbers, so that piece k's decode-sum-encode
 *                    overlaps piece k + 1's encodes (coll_direct_pipe.c says which calls);
 *                    direct_ar copy: one piece, the reduced own segment
 *                    encoded locally and pushed to the peers by the copy engine
 *                    (the default from COLL_DIRECT_AR_COPY_MIN_BYTES: auto).
 *   send/recv (only when asked for, COLL_DIRECT_ON, two ranks exchanging):
 *                    encode into the peer's slot me; flags; decode.
 * No chunking: the whole message is one block per slot. Odd sizes and
 * misaligned buffers go through zero-padded bounce copies (like coll_taco.c).
 * CUDA-graph capture is not supported (sequence numbers and parity are host
 * state): a call made while its stream is capturing takes the NCCL path.
 *
 * Host flavour (coll_host.h): through host shared memory (--transport shm)
 * the same algorithms and protocol run with every rank's receive staging and
 * flag words in pinned host memory mapped by all ranks; blocks are pushed
 * there by the copy engine (or the encode, coll_opts.push encode), and the
 * receiver pulls them into its GPU staging before it decodes. Chunked (16 MiB
 * default) so that pushes and pulls overlap. */
#ifndef COLL_DIRECT_H
#define COLL_DIRECT_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Ranks a direct team may have (one flag word per source rank). */
#define COLL_DIRECT_MAX 8

/* From this size (bytes of a bf16 message) the two-shot all-reduce over
 * NVLink pushes its reduced own segment with the copy engine
 * (coll_opts.direct_ar auto, coll_direct_pipe.c): measured on 2 x H200 (runtime/
 * RESULTS-comm.md round 6b) it wins at 64 and 256 MiB, loses at 16 MiB. */
#define COLL_DIRECT_AR_COPY_MIN_BYTES ((size_t)64 << 20)

/* What a bounded wait found, in host-mapped memory (written by the GPU). */
typedef struct {
  volatile unsigned int code;   /* 0: fine; 1: a peer's signal did not come in time */
  volatile unsigned int src;    /* the peer rank waited for */
  volatile unsigned long long seq; /* the sequence number it did not reach */
  volatile unsigned long long seen; /* what its word held at the timeout */
} coll_direct_fault_word;

typedef struct {
  unsigned long long *signal[COLL_DIRECT_MAX];     /* rank p's word for us (in p's memory), NULL: none */
  const unsigned long long *wait[COLL_DIRECT_MAX]; /* our word for rank p (in our memory), NULL: none */
  unsigned long long seq;
  unsigned long long timeout_ns;
  coll_direct_fault_word *fault; /* device pointer of the host-mapped word */
} coll_direct_flag_args;

/* One tiny kernel on `stream`: fence, signal every peer in a->signal, wait for
 * every word in a->wait to reach a->seq (bounded). Returns a cudaError_t. */
int coll_direct_flags_launch(const coll_direct_flag_args *a, cudaStream_t stream);

/* Calls of a team's direct path that ran the pipelined two-shot all-reduce
 * (coll_opts.direct_ar pipe or copy, coll_direct_pipe.c), so a test can tell that the variant
 * ran and did not fall back; 0 for NULL (a team never set up). */
struct coll_direct;
unsigned long long coll_direct_pipe_calls(const struct coll_direct *d);

/* The first fault any live team recorded ("rank r: peer p did not signal
 * ..."), or NULL. Cheap (reads host memory); rt_nccl_wait polls it. */
const char *coll_direct_fault(void);

#ifdef __cplusplus
}
#endif
#endif

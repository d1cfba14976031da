/* coll_direct_internal.h — what the files of the direct path share
 * (internal to kernels/coll_direct*.c): each local rank's mappings, flags and
 * staging, one call's view of them, and the functions one file calls in
 * another. The files: coll_direct.c (choosing and dispatching a call),
 * coll_direct_setup.c (the team's set-up and tear-down, NVLink and host
 * memory), coll_direct_staging.c (sizing and growing the staging),
 * coll_direct_steps.c (a call's steps: encode, decode, flags, streams),
 * coll_direct_phases.c (all-gather, reduce-scatter, all-reduce, send/recv)
 * and coll_direct_pipe.c (the pipelined two-shot all-reduce). */
#ifndef COLL_DIRECT_INTERNAL_H
#define COLL_DIRECT_INTERNAL_H

#include <stdint.h>

#include "coll_direct_team.h"
#include "coll_host.h"

/* Per local rank. Pointers indexed by rank: [me] is our own. */
typedef struct {
  unsigned long long *flags;            /* ours: ready word per source rank */
  unsigned long long *peer_flags[COLL_DIRECT_MAX];
  coll_direct_fault_word *fault_host, *fault_dev;
  unsigned char *stage;                 /* ours: two parity halves */
  unsigned char *peer_stage[COLL_DIRECT_MAX];
  unsigned char *bounce_in, *bounce_out; /* zero-padded copies for odd sizes / misaligned buffers */
  size_t bounce_in_bytes, bounce_out_bytes;
  unsigned char *xbuf;                  /* handle exchange (one process per GPU) */
  cudaEvent_t ev_fork, ev_join;
  cudaEvent_t ev_chunk[COLL_EVENT_SLOTS]; /* chunk j's remote encodes done (main stream) */
  cudaEvent_t ev_own[COLL_EVENT_SLOTS];   /* chunk j's own block encoded (main stream, copy mode) */
  /* host-memory flavour (coll_host.h): flags and what peers send us live in
   * pinned host memory; `stage` (GPU) is where the blocks are decoded from */
  coll_host_mem hflags, hstage;                 /* ours */
  coll_host_mem peer_hflags[COLL_DIRECT_MAX];   /* peers' (one process per GPU) */
  coll_host_mem peer_hstage[COLL_DIRECT_MAX];
} direct_rank;

struct coll_direct {
  int state; /* 0: not tried, 1: ready, -1: not possible */
  char why[200];
  int ipc;   /* peers live in other processes */
  int host;  /* 1: staging and flags in pinned host memory (coll_host.h), 0: GPU memory over NVLink */
  unsigned long long seq, calls;
  unsigned long long pipe_calls; /* calls that ran the pipelined two-shot all-reduce */
  size_t half; /* bytes of one parity half of every rank's staging */
  direct_rank d[COLL_MAX_LOCAL];
};

static inline double timeout_of(const coll_team *t) { return t->timeout_s > 0 ? t->timeout_s : 60.0; }

#define XCHG_BYTES 256

/* A block of e elements on the wire: TACO-encoded, or plain (the padded
 * elements themselves, coll_host.h); and where chunk j starts in a slot
 * area (n blocks of the layout's chunk length per chunk). */
static inline size_t wire_of(int plain, size_t es, size_t e, int group) {
  return plain ? coll_block_elems(e, group) * es : coll_block_wire(e, group);
}
static inline size_t chunk_offset_of(int plain, size_t es, const coll_layout *l, size_t j) {
  return plain ? j * (size_t)l->nranks * wire_of(1, es, l->m, l->group) : coll_chunk_offset(l, j);
}

typedef struct {
  coll_team *t;
  const coll_opts *o;
  size_t es;
  int group;
  unsigned char *half[COLL_MAX_LOCAL][COLL_DIRECT_MAX]; /* this call's parity half of rank p's staging */
  coll_direct_sizes sz;
  coll_layout l;                                        /* chunks (all-gather, reduce-scatter, one-shot) */
  const void *src[COLL_MAX_LOCAL][COLL_DIRECT_MAX];    /* encode inputs, set in phase 0 */
  unsigned long long seq0;                              /* the call's first sequence number */
  int plain;                                            /* uncompressed: copies and sums instead of the codec */
  unsigned char *in[COLL_MAX_LOCAL]; /* host flavour: this call's half of our host staging (peers write here) */
} call;

static inline int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The variant of the two-shot all-reduce (coll_direct_pipe.c). */
typedef struct {
  int pipe;   /* 0: whole, 1: pipe */
  int pieces; /* K */
  int copy;   /* own reduced block pushed by the copy engine */
} ar_variant;

/* coll_direct_setup.c. One process per GPU: all[p * sz ...] = rank p's `mine`
 * (sz <= XCHG_BYTES). */
int direct_exchange(coll_team *t, const void *mine, size_t sz, void *all);

/* coll_direct_staging.c */
int direct_grow_staging(coll_team *t, size_t half);
int direct_grow_local(const coll_team *t, coll_rank *r, unsigned char **buf, size_t *have, size_t need);
int direct_chunk_layout(const coll_team *t, coll_layout *l, coll_op op, size_t count, int n, const coll_opts *o);
int direct_staging_half(const coll_team *t, coll_op op, int one, size_t count, int n, const coll_opts *o,
                        size_t *half);

/* coll_direct_steps.c */
int direct_source(call *c, int i, const void *x, size_t e, int slot, const void **src);
int direct_encode(call *c, int i, const void *src, size_t e, void *block, cudaStream_t st);
int direct_decode(call *c, int i, const void *blocks, int k, size_t e, void *y, cudaStream_t st, int which);
int direct_pull(call *c, int i, size_t off, size_t stride, cudaStream_t st);
int direct_fork_side(call *c, int i);
int direct_join_side(call *c, int i);
int direct_flags_on(call *c, int i, int to, int from, unsigned long long seq, cudaStream_t st);
int direct_fault_check(void);
int direct_push_copy(const coll_opts *o, int host);
int direct_signal_all(call *c, int i, unsigned long long seq, cudaStream_t st, int also_wait);
int direct_wait_all(call *c, int i, unsigned long long seq, cudaStream_t st, int waited);

/* coll_direct_phases.c: phase ph of local rank i's part of the call */
int direct_chunked_phase(call *c, int i, coll_op op, const void *send, void *recv, size_t count, int ph);
int direct_two_shot_phase(call *c, int i, const void *send, void *recv, size_t count, int ph);
int direct_sendrecv_phase(call *c, int i, const void *send, void *recv, size_t e, int ph);

/* coll_direct_pipe.c */
int direct_ar_variant_of(ar_variant *v, const coll_opts *o, size_t bytes);
int direct_pipe_fits(const coll_team *t, const ar_variant *v, size_t count, int group, const void *const *send,
                     void *const *recv);
int direct_pipe_phase(call *c, int i, const ar_variant *v, const void *send, void *recv, size_t count, int ph);

#endif

/* coll_direct_steps.c — the steps of one direct call: encode and decode
 * (through bounce buffers where needed), the host flavour's pull, stream
 * forks and joins, and the flag signals and waits (coll_direct_internal.h). */
#include <string.h>

#include "coll_direct_internal.h"

/* The encode input of e elements at x: x itself, or a zero-padded copy in
 * bounce_in slot `slot` (enqueued on the main stream, before any fork). */
int direct_source(call *c, int i, const void *x, size_t e, int slot, const void **src) {
  size_t ne = coll_block_elems(e, c->group);
  if (aligned16(x) && ne == e) {
    *src = x;
    return 0;
  }
  coll_rank *r = &c->t->r[i];
  direct_rank *d = &c->t->direct->d[i];
  size_t pitch = d->bounce_in_bytes / (size_t)c->t->nranks; /* n slots of the call's largest piece */
  unsigned char *b = d->bounce_in + (size_t)slot * pitch;
  CK_CUDA(cudaMemcpyAsync(b, x, e * c->es, cudaMemcpyDeviceToDevice, r->stream));
  if (ne > e) CK_CUDA(cudaMemsetAsync(b + e * c->es, 0, (ne - e) * c->es, r->stream));
  *src = b;
  return 0;
}

int direct_encode(call *c, int i, const void *src, size_t e, void *block, cudaStream_t st) {
  if (c->plain) {
    CK_CUDA(cudaMemcpyAsync(block, src, coll_block_elems(e, c->group) * c->es, cudaMemcpyDefault, st));
    return 0;
  }
  CK_TACO(taco_encode(src, c->o->dtype, coll_block_elems(e, c->group), c->o->taco, block,
                      coll_nonfinite_of(c->t, i, c->o), (void *)st));
  return 0;
}

/* y (e elements) = sum of k blocks at `blocks` (stride: their wire size);
 * through bounce_out half `which` when y is misaligned or e is odd. */
int direct_decode(call *c, int i, const void *blocks, int k, size_t e, void *y, cudaStream_t st, int which) {
  size_t ne = coll_block_elems(e, c->group);
  direct_rank *d = &c->t->direct->d[i];
  int direct = aligned16(y) && ne == e;
  size_t pitch = d->bounce_out_bytes / 2;
  void *dst = direct ? y : (void *)(d->bounce_out + (size_t)which * pitch);
  if (c->plain) {
    int ce = coll_host_sum(blocks, k, wire_of(1, c->es, ne, c->group), ne, c->o->dtype, dst, (void *)st);
    if (ce) return coll_set_error(__FILE__, __LINE__, "coll_host_sum", cudaGetErrorString((cudaError_t)ce));
  } else {
    CK_TACO(taco_decode_sum(blocks, k, ne, c->o->taco, dst, c->o->dtype, (void *)st));
  }
  if (!direct) CK_CUDA(cudaMemcpyAsync(y, dst, e * c->es, cudaMemcpyDeviceToDevice, st));
  return 0;
}

/* Host flavour: copy the blocks the peers wrote into our host staging (slots
 * p != me of `stride` bytes from `off`) to the same place of our GPU staging,
 * on st after the wait for their signals (copy engine, host -> GPU). Over
 * NVLink the peers wrote into the GPU staging already: nothing to do. */
int direct_pull(call *c, int i, size_t off, size_t stride, cudaStream_t st) {
  if (!c->in[i]) return 0;
  int me = c->t->r[i].rank, n = c->t->nranks;
  unsigned char *gpu = c->half[i][me] + off, *host = c->in[i] + off;
  if (me > 0) CK_CUDA(cudaMemcpyAsync(gpu, host, (size_t)me * stride, cudaMemcpyDefault, st));
  if (me < n - 1)
    CK_CUDA(cudaMemcpyAsync(gpu + (size_t)(me + 1) * stride, host + (size_t)(me + 1) * stride,
                            (size_t)(n - 1 - me) * stride, cudaMemcpyDefault, st));
  return 0;
}

/* `later` runs what is enqueued on it next after all that `first` has so far. */
static int stream_after(cudaStream_t later, cudaStream_t first, cudaEvent_t ev) {
  CK_CUDA(cudaEventRecord(ev, first));
  CK_CUDA(cudaStreamWaitEvent(later, ev, 0));
  return 0;
}

/* The side (codec) stream after the main stream, and back. */
int direct_fork_side(call *c, int i) {
  coll_rank *r = &c->t->r[i];
  return stream_after(r->codec_stream, r->stream, c->t->direct->d[i].ev_fork);
}

int direct_join_side(call *c, int i) {
  coll_rank *r = &c->t->r[i];
  return stream_after(r->stream, r->codec_stream, c->t->direct->d[i].ev_join);
}

/* Signal `to` (or every peer when to < 0) and wait for `from` (or every peer). */
/* to / from: a rank, every peer (-1) or none (-2); seq and stream given. */
int direct_flags_on(call *c, int i, int to, int from, unsigned long long seq, cudaStream_t st) {
  coll_team *t = c->t;
  coll_rank *r = &t->r[i];
  direct_rank *d = &t->direct->d[i];
  coll_direct_flag_args a;
  memset(&a, 0, sizeof a);
  for (int p = 0; p < t->nranks; p++) {
    if (p == r->rank) continue;
    if (to == -1 || p == to) a.signal[p] = d->peer_flags[p] + r->rank;
    if (from == -1 || p == from) a.wait[p] = d->flags + p;
  }
  a.seq = seq;
  a.timeout_ns = (unsigned long long)(timeout_of(t) * 1e9);
  a.fault = d->fault_dev;
  int ce = coll_direct_flags_launch(&a, st);
  if (ce) return coll_set_error(__FILE__, __LINE__, "coll_direct_flags_launch", cudaGetErrorString((cudaError_t)ce));
  return 0;
}

int direct_fault_check(void) {
  const char *f = coll_direct_fault();
  if (f) return coll_set_error(__FILE__, __LINE__, "direct path", f);
  return 0;
}

/* How the blocks of all-gather and one-shot all-reduce reach the peers:
 * ENCODE: the encode kernel writes them into the peer's memory (SM stores over
 * NVLink or PCIe); COPY: encoded locally, then cudaMemcpyAsync (copy engines),
 * which leaves the SMs to the codec of the neighbouring chunks.
 * Over NVLink reduce-scatter and the two-shot all-reduce always encode into
 * the peer (their blocks differ per peer and have no local home); through
 * host memory reduce-scatter copies too (via our GPU slot p, see
 * direct_chunked_phase). coll_opts.push sets it; AUTO: COLL_DIRECT_PUSH_COPY_DEFAULT over
 * NVLink, COLL_HOST_PUSH_COPY_DEFAULT through host memory (SM stores into
 * host memory measured slower than the copy engine there: one-shot
 * all-reduce at 64 MiB 1517 vs 1062 us, runtime/RESULTS-comm.md round 5). */
int direct_push_copy(const coll_opts *o, int host) {
  if (o->push != COLL_PUSH_AUTO) return o->push == COLL_PUSH_COPY;
  return host ? COLL_HOST_PUSH_COPY_DEFAULT : COLL_DIRECT_PUSH_COPY_DEFAULT;
}

/* Enqueue order. In single-process mode one host thread drives every GPU,
 * and some host calls can block until a GPU is idle (lazy loading of a
 * kernel's module synchronizes the context; a full launch queue waits). A
 * GPU spinning on a flag whose signal the host has not enqueued yet would
 * then wait for ever. So every call is enqueued in phases, each phase for
 * every local rank before the next: a phase ends with the signals, and the
 * waits for them come in a later phase. With one rank per process the
 * phases run back to back (and a signal and its wait share one kernel where
 * they are on the same stream). */

/* Signal every peer with seq on st; with one local rank also wait there. */
int direct_signal_all(call *c, int i, unsigned long long seq, cudaStream_t st, int also_wait) {
  return direct_flags_on(c, i, -1, also_wait && c->t->nlocal == 1 ? -1 : -2, seq, st);
}
/* Wait for every peer's seq on st (unless signal_all already did). */
int direct_wait_all(call *c, int i, unsigned long long seq, cudaStream_t st, int waited) {
  if (waited && c->t->nlocal == 1) return 0;
  return direct_flags_on(c, i, -2, -1, seq, st);
}

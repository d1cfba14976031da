/* coll_direct_phases.c — the phases of the direct path's algorithms:
 * chunked all-gather, reduce-scatter and one-shot all-reduce, the two-shot
 * all-reduce and send/recv (coll_direct_internal.h). */
#include "coll_direct_internal.h"

/* All-gather, reduce-scatter and one-shot all-reduce, cut into chunks so that
 * the decode of chunk j (local HBM) overlaps the encode of chunk j + 1 into
 * the peers (NVLink). Phase 2j: main stream: encode the peers' blocks of
 * chunk j into their staging, record an event, signal seq0 + j; side stream:
 * encode our own block. Phase 2j + 1: side stream: wait for that event (so an
 * in-place output never overwrites input the remote encodes still read) and
 * for every peer's seq0 + j, then decode (all-gather: each slot; the others:
 * decode-sum the n slots). The last phase joins the side stream into the
 * main one, before the next call can signal (coll_direct.h: parity). */
int direct_chunked_phase(call *c, int i, coll_op op, const void *send, void *recv, size_t count, int ph) {
  coll_team *t = c->t;
  coll_rank *r = &t->r[i];
  direct_rank *d = &t->direct->d[i];
  int n = t->nranks, me = r->rank, rs = op == COLL_OP_REDUCESCATTER;
  const coll_layout *l = &c->l;
  if (ph == 0) {
    /* inputs: the whole message (all-gather, all-reduce) or segment p (reduce-scatter) */
    for (int p = 0; p < n; p++) {
      c->src[i][p] = NULL;
      if (rs) CK(direct_source(c, i, (const unsigned char *)send + (size_t)p * count * c->es, count, p, &c->src[i][p]));
      else if (p == 0) CK(direct_source(c, i, send, count, 0, &c->src[i][0]));
    }
    CK(direct_fork_side(c, i));
  }
  size_t j = (size_t)ph / 2;
  if (j >= l->nchunks) return direct_join_side(c, i);
  size_t e = coll_chunk_elems(l, 0, j), at = j * l->m * c->es, off = chunk_offset_of(c->plain, c->es, l, j);
  size_t stride = wire_of(c->plain, c->es, e, c->group);
  unsigned char *mine = c->half[i][me] + off;
  cudaEvent_t ev = d->ev_chunk[j % COLL_EVENT_SLOTS];
  /* reduce-scatter copies only through host memory: its block for peer p is
   * encoded into our GPU slot p, which the pull of this chunk overwrites only
   * after `ev` (over NVLink peer p writes into that slot itself) */
  int host = t->direct->host, ag = op == COLL_OP_ALLGATHER, copy = (!rs || host) && direct_push_copy(c->o, host);
  unsigned char *own_out = (unsigned char *)recv + ((size_t)me * count) * c->es + at;
  /* all-gather out of place: our own slot is decoded as soon as it is encoded
   * (in place it is the input the peers' encodes read: after them) */
  int own_early = ag && (const void *)((unsigned char *)recv + (size_t)me * count * c->es) != send;
  if (ph % 2 == 0) {
    if (copy && rs) {
      /* block p into our GPU slot p, then copied into peer p's slot me */
      for (int p = 0; p < n; p++) {
        if (p == me) continue;
        unsigned char *blk = mine + (size_t)p * stride;
        CK(direct_encode(c, i, (const unsigned char *)c->src[i][p] + at, e, blk, r->stream));
        CK_CUDA(cudaMemcpyAsync(c->half[i][p] + off + (size_t)me * stride, blk, stride, cudaMemcpyDefault, r->stream));
      }
      CK_CUDA(cudaEventRecord(ev, r->stream));
      CK(direct_signal_all(c, i, c->seq0 + j, r->stream, 0));
      return direct_encode(c, i, (const unsigned char *)c->src[i][me] + at, e, mine + (size_t)me * stride, r->codec_stream);
    }
    if (copy) {
      /* own block on the main stream, then copied into every peer's slot me */
      CK(direct_encode(c, i, (const unsigned char *)c->src[i][0] + at, e, mine + (size_t)me * stride, r->stream));
      CK_CUDA(cudaEventRecord(d->ev_own[j % COLL_EVENT_SLOTS], r->stream));
      for (int p = 0; p < n; p++)
        if (p != me)
          CK_CUDA(cudaMemcpyAsync(c->half[i][p] + off + (size_t)me * stride, mine + (size_t)me * stride, stride,
                                  cudaMemcpyDefault, r->stream));
      CK_CUDA(cudaEventRecord(ev, r->stream));
      CK(direct_signal_all(c, i, c->seq0 + j, r->stream, 0));
      CK_CUDA(cudaStreamWaitEvent(r->codec_stream, d->ev_own[j % COLL_EVENT_SLOTS], 0));
      if (own_early) CK(direct_decode(c, i, mine + (size_t)me * stride, 1, e, own_out, r->codec_stream, 1));
      return 0;
    }
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      const unsigned char *x = (const unsigned char *)c->src[i][rs ? p : 0] + at;
      CK(direct_encode(c, i, x, e, c->half[i][p] + off + (size_t)me * stride, r->stream));
    }
    CK_CUDA(cudaEventRecord(ev, r->stream));
    CK(direct_signal_all(c, i, c->seq0 + j, r->stream, 0));
    CK(direct_encode(c, i, (const unsigned char *)c->src[i][rs ? me : 0] + at, e, mine + (size_t)me * stride,
              r->codec_stream));
    if (own_early) CK(direct_decode(c, i, mine + (size_t)me * stride, 1, e, own_out, r->codec_stream, 1));
    return 0;
  }
  CK_CUDA(cudaStreamWaitEvent(r->codec_stream, ev, 0));
  CK(direct_wait_all(c, i, c->seq0 + j, r->codec_stream, 0));
  CK(direct_pull(c, i, off, stride, r->codec_stream));
  if (ag) {
    for (int p = 0; p < n; p++)
      if (p != me || !own_early)
        CK(direct_decode(c, i, mine + (size_t)p * stride, 1, e, (unsigned char *)recv + ((size_t)p * count) * c->es + at,
                  r->codec_stream, 1));
    return 0;
  }
  return direct_decode(c, i, mine, n, e, (unsigned char *)recv + at, r->codec_stream, 1);
}

/* Two-shot all-reduce. Phase 0: encode segment p into rank p's region A slot
 * me (ours on the side stream), signal seq0. Phase 1: wait seq0, decode-sum-
 * encode our segment into region B slot me of every rank (ours on the side
 * stream, then decoded there), signal seq0 + 1. Phase 2: wait, decode the
 * peers' region B slots. */
int direct_two_shot_phase(call *c, int i, const void *send, void *recv, size_t count, int ph) {
  coll_rank *r = &c->t->r[i];
  int n = c->t->nranks, me = r->rank, g = c->group;
  coll_op op = COLL_OP_ALLREDUCE;
  size_t seg = coll_direct_recv_elems(op, 0, count, n, g, 0); /* segment pitch in the input */
  size_t mine = coll_direct_recv_elems(op, 0, count, n, g, me), sb = c->sz.stride_b;
  if (ph == 0) {
    for (int p = 0; p < n; p++) {
      size_t e = coll_direct_recv_elems(op, 0, count, n, g, p);
      c->src[i][p] = NULL;
      if (e) CK(direct_source(c, i, (const unsigned char *)send + (size_t)p * seg * c->es, e, p, &c->src[i][p]));
    }
    CK(direct_fork_side(c, i));
    for (int p = 0; p < n; p++) {
      size_t e = coll_direct_recv_elems(op, 0, count, n, g, p);
      if (!e) continue;
      void *dst = c->half[i][p] + (size_t)me * coll_direct_stride_a(op, 0, count, n, g, p);
      CK(direct_encode(c, i, c->src[i][p], e, dst, p == me ? r->codec_stream : r->stream));
    }
    CK(direct_join_side(c, i));
    return direct_signal_all(c, i, c->seq0, r->stream, 1);
  }
  if (ph == 1) {
    CK(direct_wait_all(c, i, c->seq0, r->stream, 1));
    if (mine) CK(direct_pull(c, i, 0, coll_direct_stride_a(op, 0, count, n, g, me), r->stream));
    if (mine) {
      CK(direct_fork_side(c, i));
      for (int p = 0; p < n; p++) {
        unsigned char *dst = c->half[i][p] + c->sz.region_a + (size_t)me * sb;
        CK_TACO(taco_decode_sum_encode(c->half[i][me], n, coll_block_elems(mine, g), c->o->taco, dst,
                                       (void *)(p == me ? r->codec_stream : r->stream)));
      }
      CK(direct_decode(c, i, c->half[i][me] + c->sz.region_a + (size_t)me * sb, 1, mine,
                (unsigned char *)recv + (size_t)me * seg * c->es, r->codec_stream, 1));
    }
    return direct_signal_all(c, i, c->seq0 + 1, r->stream, 1);
  }
  CK(direct_wait_all(c, i, c->seq0 + 1, r->stream, 1));
  if (mine) CK(direct_join_side(c, i));
  CK(direct_pull(c, i, c->sz.region_a, sb, r->stream));
  for (int p = 0; p < n; p++) {
    size_t e = coll_direct_recv_elems(op, 0, count, n, g, p);
    if (p == me || !e) continue;
    CK(direct_decode(c, i, c->half[i][me] + c->sz.region_a + (size_t)p * sb, 1, e, (unsigned char *)recv + (size_t)p * seg * c->es,
              r->stream, 0));
  }
  return 0;
}

/* Send/recv between two ranks: encode into the peer's slot me, signal; then
 * wait and decode the peer's slot. */
int direct_sendrecv_phase(call *c, int i, const void *send, void *recv, size_t e, int ph) {
  coll_rank *r = &c->t->r[i];
  int me = r->rank, peer = 1 - me;
  size_t stride = coll_block_wire(e, c->group);
  if (ph == 0) {
    CK(direct_source(c, i, send, e, 0, &c->src[i][0]));
    CK(direct_encode(c, i, c->src[i][0], e, c->half[i][peer] + (size_t)me * stride, r->stream));
    return direct_signal_all(c, i, c->seq0, r->stream, 1);
  }
  CK(direct_wait_all(c, i, c->seq0, r->stream, 1));
  CK(direct_pull(c, i, 0, stride, r->stream));
  return direct_decode(c, i, c->half[i][me] + (size_t)peer * stride, 1, e, recv, r->stream, 0);
}

/* coll_direct.c — the direct path of the compressed collectives: codec
 * kernels writing into the peer GPUs' staging over NVLink, flags instead of
 * NCCL (protocol and algorithms in coll_direct.h); or, through host memory
 * (coll_host.h), into the peers' pinned host staging over PCIe. This file
 * chooses the path and the algorithm of a call and enqueues its phases; the
 * other coll_direct_*.c files hold the parts (coll_direct_internal.h). */
#include <string.h>

#include "coll_direct_internal.h"

/* ---- choosing ------------------------------------------------------------ */

/* AUTO: over NVLink one-shot below COLL_DIRECT_TWO_SHOT_MIN_BYTES of
 * all-reduce (count elements), two-shot from there; through host memory
 * always one-shot (chunked: its encodes into the peers overlap the pulls).
 * Uncompressed (plain) calls have only the one-shot. */
static int is_one_shot(const coll_team *t, const coll_opts *o, size_t count) {
  if (o->codec != COLL_CODEC_TACO) return 1;
  if (o->allreduce == COLL_ALLREDUCE_AUTO)
    return (t->direct && t->direct->host) || count * coll_dtype_bytes(o->dtype) < COLL_DIRECT_TWO_SHOT_MIN_BYTES;
  return o->allreduce == COLL_ALLREDUCE_ONE_SHOT;
}

int coll_direct_choose(coll_team *t, coll_op op, size_t bytes, const int *send_peer, const int *recv_peer,
                       const coll_opts *o) {
  coll_direct_mode m = o->direct;
  /* AUTO takes the direct path at every size: on 2 x H200 it was faster
   * than the NCCL path's defaults at every measured size from 256 KiB, or
   * within 1-2 us (all-gather below 4 MiB); runtime/RESULTS-comm.md round 4 */
  (void)bytes;
  if (m == COLL_DIRECT_OFF) return 0;
  int on = m == COLL_DIRECT_ON;
  if (op == COLL_OP_ALLTOALL) {
    if (on) return coll_set_error(__FILE__, __LINE__, "direct path", "all-to-all has no direct path");
    return 0;
  }
  if (op == COLL_OP_SENDRECV) {
    /* only an exchange between two ranks (the parity argument of
     * coll_direct.h needs signals both ways); AUTO keeps NCCL, as the
     * executor's one-way pipeline transfers do */
    if (!on) return 0;
    for (int i = 0; i < t->nlocal; i++) {
      int other = 1 - t->r[i].rank;
      if (t->nranks != 2 || send_peer[i] != other || recv_peer[i] != other)
        return coll_set_error(__FILE__, __LINE__, "direct path", "send/recv only as an exchange between two ranks");
    }
  }
  for (int i = 0; i < t->nlocal; i++) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CK_CUDA(cudaStreamIsCapturing(t->r[i].stream, &cs));
    if (cs != cudaStreamCaptureStatusNone) return 0; /* graphs: NCCL path (coll_direct.h) */
  }
  const char *why = "";
  int a = coll_direct_available(t, &why);
  if (a < 0) return -1;
  if (!a && on) return coll_set_error(__FILE__, __LINE__, "direct path not available", why);
  return a;
}

int coll_direct_reserve(coll_team *t, coll_op op, size_t count, const coll_opts *o) {
  int peers[COLL_MAX_LOCAL];
  for (int i = 0; i < t->nlocal; i++) peers[i] = 1 - t->r[i].rank;
  coll_opts q = *o;
  if (op == COLL_OP_SENDRECV && (q.direct != COLL_DIRECT_ON || t->nranks != 2)) return 0;
  size_t bytes = coll_total_elems(op, count, t->nranks) * coll_dtype_bytes(o->dtype);
  int c = coll_direct_choose(t, op, bytes, peers, peers, &q);
  if (c <= 0) return c;
  size_t half;
  CK(direct_staging_half(t, op, op == COLL_OP_ALLREDUCE && is_one_shot(t, o, count), count, t->nranks, o, &half));
  return direct_grow_staging(t, half);
}

int coll_direct_run(coll_team *t, coll_op op, const void *const *send, void *const *recv, const int *send_peer,
                    const int *recv_peer, size_t count, const coll_opts *o) {
  (void)send_peer;
  (void)recv_peer;
  CK(direct_fault_check());
  struct coll_direct *D = t->direct;
  call c;
  memset(&c, 0, sizeof c);
  c.t = t;
  c.o = o;
  c.es = coll_dtype_bytes(o->dtype);
  c.group = o->taco.group;
  c.plain = o->codec != COLL_CODEC_TACO;
  if (c.plain && op != COLL_OP_ALLGATHER && op != COLL_OP_REDUCESCATTER && op != COLL_OP_ALLREDUCE)
    return coll_set_error(__FILE__, __LINE__, "coll_direct_run", "uncompressed: all-gather, reduce-scatter, all-reduce only");
  int one = op == COLL_OP_ALLREDUCE && is_one_shot(t, o, count);
  int n = t->nranks;
  coll_direct_sizes_of(op, one, count, n, c.group, &c.sz);
  size_t half;
  CK(direct_staging_half(t, op, one, count, n, o, &half));
  CK(direct_grow_staging(t, half));
  /* bounce buffers: n padded pieces in, two padded pieces out */
  size_t piece = op == COLL_OP_ALLREDUCE && !one ? coll_direct_recv_elems(op, 0, count, n, c.group, 0) : count;
  size_t pitch = (coll_block_elems(piece, c.group) * c.es + 255) & ~(size_t)255;
  for (int i = 0; i < t->nlocal; i++) {
    direct_rank *d = &D->d[i];
    CK(direct_grow_local(t, &t->r[i], &d->bounce_in, &d->bounce_in_bytes, (size_t)n * pitch));
    CK(direct_grow_local(t, &t->r[i], &d->bounce_out, &d->bounce_out_bytes, 2 * pitch));
  }
  size_t parity = (size_t)(D->calls & 1);
  for (int i = 0; i < t->nlocal; i++) {
    for (int p = 0; p < n; p++) c.half[i][p] = D->d[i].peer_stage[p] + parity * D->half;
    c.in[i] = D->host ? (unsigned char *)D->d[i].hstage.dev + parity * D->half : NULL;
  }
  D->calls++;
  c.seq0 = D->seq + 1;
  int chunked = op == COLL_OP_ALLGATHER || op == COLL_OP_REDUCESCATTER || one;
  if (chunked) CK(direct_chunk_layout(t, &c.l, op, count, n, o));
  ar_variant v;
  /* auto takes copy for bf16 messages only: the variant has been checked on the GPUs with bf16 buffers,
   * not with FP32 ones (DP gradients keep the whole two-shot unless coll_opts.direct_ar asks for copy) */
  CK(direct_ar_variant_of(&v, o, c.es == 2 ? count * 2 : 0));
  int piped = op == COLL_OP_ALLREDUCE && !one && !c.plain && direct_pipe_fits(t, &v, count, c.group, send, recv);
  if (op != COLL_OP_ALLGATHER && op != COLL_OP_REDUCESCATTER && op != COLL_OP_ALLREDUCE && op != COLL_OP_SENDRECV)
    return coll_set_error(__FILE__, __LINE__, "coll_direct_run", "op has no direct path");
  /* phases and sequence numbers of this call */
  int phases = chunked ? 2 * (int)c.l.nchunks + 1 : op == COLL_OP_SENDRECV ? 2 : 3;
  unsigned long long used = chunked ? c.l.nchunks : op == COLL_OP_SENDRECV ? 1 : piped ? 2 * (unsigned)v.pieces : 2;
  for (int ph = 0; ph < phases; ph++)
    for (int i = 0; i < t->nlocal; i++) {
      CK_CUDA(cudaSetDevice(t->r[i].device));
      if (chunked) CK(direct_chunked_phase(&c, i, op, send[i], recv[i], count, ph));
      else if (piped) CK(direct_pipe_phase(&c, i, &v, send[i], recv[i], count, ph));
      else if (op == COLL_OP_SENDRECV) CK(direct_sendrecv_phase(&c, i, send[i], recv[i], count, ph));
      else CK(direct_two_shot_phase(&c, i, send[i], recv[i], count, ph));
    }
  D->seq = c.seq0 + used - 1;
  if (piped) D->pipe_calls++;
  return 0;
}

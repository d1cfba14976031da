/* coll_direct_pipe.c — the pipelined two-shot all-reduce of the direct path
 * (coll_opts.direct_ar pipe|copy) and the choice of the variant. */
#include <string.h>

#include "coll_direct_internal.h"

/* ---- the pipelined two-shot all-reduce (direct_ar pipe|copy) --------- */

/* coll_opts.direct_ar (auto|whole|pipe|copy) selects how the two-shot all-reduce over
 * NVLink runs (read at every call, so one process can compare them):
 *   auto (the default): copy (below) for bf16 messages of at least
 *     COLL_DIRECT_AR_COPY_MIN_BYTES, whole under it and for FP32 ones;
 *   whole: direct_two_shot_phase (coll_direct_phases.c), the message as one piece;
 *   pipe: the message cut into K pieces (coll_opts.direct_ar_pieces, 1..4, default
 *     COLL_DIRECT_AR_PIECES_DEFAULT), each a two-shot all-reduce of its own,
 *     enqueued so that piece k's decode-sum-encode into the peers runs while
 *     piece k + 1's encodes are still crossing NVLink, and piece k's final
 *     decode while piece k + 1's reduced block is pushed; signals and waits
 *     are separate kernels (a piece waits only for its own signal).
 * coll_opts.direct_ar_own_copy (dup = 0, copy = 1): how the own reduced segment reaches the peers
 * in pipe mode: dup (default) = decode-sum-encode once into every peer's
 * region B (main stream) and once more into our own (side stream, then
 * decoded there), as the whole variant does; copy = decode-sum-encode once
 * into our own region B, then the copy engine pushes that block into the
 * peers (side stream) while the SMs go on with the next piece.
 * direct_ar copy (round 6b) = pipe with one piece and own=copy (the
 * same as direct_ar_pieces = 1, direct_ar_own_copy = 1): no pipeline, the reduced own
 * segment is encoded locally once and the copy engine pushes it to the peers;
 * with one piece our own block is decoded on the main stream beside that push.
 * Pipe mode runs only where every piece splits into whole 16-group blocks
 * and the buffers are 16-byte aligned (no bounce copies); other calls run whole.
 * Not the default: measured on 2 x H200 (runtime/RESULTS-comm.md round 6) it
 * loses at 16 and 64 MiB (64 MiB: whole 183-185 us, pipe 2 pieces dup 217,
 * copy 193-194, 4 pieces dup 290: every piece adds host enqueue and flag
 * kernels) and wins only from 256 MiB with copy (587-594 vs 660-667 us).
 * copy (one piece, round 6b) wins from 64 MiB: 171-173 us vs whole 184-185,
 * 256 MiB 576-588 vs 660-667, but loses at 16 MiB (70-71 vs 65-67 us): hence
 * auto's threshold (the executor's TP2 messages of GPT h4096, 32 MiB, stay whole). */

/* bytes: the message's bf16 size (auto's choice; 0: whole). */
int direct_ar_variant_of(ar_variant *v, const coll_opts *o, size_t bytes) {
  memset(v, 0, sizeof *v);
  coll_direct_ar m = o->direct_ar;
  if ((unsigned)m > COLL_DIRECT_AR_COPY)
    return coll_set_error(__FILE__, __LINE__, "coll_opts.direct_ar", "must be auto, whole, pipe or copy");
  if (m == COLL_DIRECT_AR_AUTO) m = bytes >= COLL_DIRECT_AR_COPY_MIN_BYTES ? COLL_DIRECT_AR_COPY : COLL_DIRECT_AR_WHOLE;
  if (m == COLL_DIRECT_AR_COPY) { /* one piece, own block by the copy engine; pieces and own not read */
    v->pipe = 1;
    v->pieces = 1;
    v->copy = 1;
    return 0;
  }
  v->pipe = m == COLL_DIRECT_AR_PIPE;
  v->pieces = o->direct_ar_pieces ? o->direct_ar_pieces : COLL_DIRECT_AR_PIECES_DEFAULT;
  if (v->pieces < 1 || v->pieces > COLL_EVENT_SLOTS)
    return coll_set_error(__FILE__, __LINE__, "coll_opts.direct_ar_pieces", "must be 1..4 (event slots)");
  v->copy = o->direct_ar_own_copy != 0;
  return 0;
}

/* Pipe mode applies: every piece's segment is whole blocks of 16 groups
 * (wire offsets stay 16-byte aligned, no padding) and the buffers are aligned. */
int direct_pipe_fits(const coll_team *t, const ar_variant *v, size_t count, int group, const void *const *send,
                     void *const *recv) {
  size_t unit = (size_t)v->pieces * (size_t)t->nranks * 16u * (size_t)group;
  if (!v->pipe || t->direct->host || count % unit) return 0;
  for (int i = 0; i < t->nlocal; i++)
    if (!aligned16(send[i]) || !aligned16(recv[i])) return 0;
  return 1;
}

/* Piece k of K: elements [k P, (k + 1) P), P = count / K; rank p's segment of
 * it: S = P / n elements from k P + p S. Staging (same size as whole): region
 * A piece k at k n W (W = wire bytes of S), slot p at + p W; region B the same
 * from sz.region_a. Sequence numbers: seq0 + k (piece k's encodes arrived),
 * seq0 + K + k (piece k's reduced blocks arrived). Phases (coll_direct_steps.c,
 * "Enqueue order"): 0 encodes and signals, 1 waits, decode-sum-encodes and
 * signals, 2 waits and decodes. */
int direct_pipe_phase(call *c, int i, const ar_variant *v, const void *send, void *recv, size_t count, int ph) {
  coll_rank *r = &c->t->r[i];
  direct_rank *d = &c->t->direct->d[i];
  int n = c->t->nranks, me = r->rank, g = c->group, K = v->pieces;
  size_t P = count / (size_t)K, S = P / (size_t)n, W = coll_wire_bytes(S, g), es = c->es;
  const unsigned char *x = send;
  unsigned char *y = recv;
#define A_SLOT(rank, k, p) (c->half[i][rank] + ((size_t)(k) * n + (size_t)(p)) * W)
#define B_SLOT(rank, k, p) (c->half[i][rank] + c->sz.region_a + ((size_t)(k) * n + (size_t)(p)) * W)
#define ELEM(k, p) (((size_t)(k) * P + (size_t)(p) * S) * es)
  if (ph == 0) {
    CK(direct_fork_side(c, i));
    for (int k = 0; k < K; k++) {
      for (int p = 0; p < n; p++)
        if (p != me) CK(direct_encode(c, i, x + ELEM(k, p), S, A_SLOT(p, k, me), r->stream));
      CK(direct_encode(c, i, x + ELEM(k, me), S, A_SLOT(me, k, me), r->codec_stream));
      CK_CUDA(cudaEventRecord(d->ev_own[k], r->codec_stream));
      CK(direct_flags_on(c, i, -1, -2, c->seq0 + (unsigned long long)k, r->stream));
    }
    return 0;
  }
  if (ph == 1) {
    for (int k = 0; k < K; k++) {
      CK(direct_flags_on(c, i, -2, -1, c->seq0 + (unsigned long long)k, r->stream));
      CK_CUDA(cudaStreamWaitEvent(r->stream, d->ev_own[k], 0));
      if (v->copy) {
        CK_TACO(taco_decode_sum_encode(A_SLOT(me, k, 0), n, S, c->o->taco, B_SLOT(me, k, me), (void *)r->stream));
        CK_CUDA(cudaEventRecord(d->ev_chunk[k], r->stream));
        CK_CUDA(cudaStreamWaitEvent(r->codec_stream, d->ev_chunk[k], 0));
        for (int p = 0; p < n; p++)
          if (p != me)
            CK_CUDA(cudaMemcpyAsync(B_SLOT(p, k, me), B_SLOT(me, k, me), W, cudaMemcpyDefault, r->codec_stream));
        CK(direct_flags_on(c, i, -1, -2, c->seq0 + (unsigned long long)(K + k), r->codec_stream));
        if (K == 1) { /* one piece: the SMs decode our block while the copy engine pushes it */
          CK(direct_decode(c, i, B_SLOT(me, k, me), 1, S, y + ELEM(k, me), r->stream, 1));
          continue;
        }
      } else {
        CK_CUDA(cudaEventRecord(d->ev_chunk[k], r->stream));
        for (int p = 0; p < n; p++)
          if (p != me)
            CK_TACO(taco_decode_sum_encode(A_SLOT(me, k, 0), n, S, c->o->taco, B_SLOT(p, k, me), (void *)r->stream));
        CK(direct_flags_on(c, i, -1, -2, c->seq0 + (unsigned long long)(K + k), r->stream));
        CK_CUDA(cudaStreamWaitEvent(r->codec_stream, d->ev_chunk[k], 0));
        CK_TACO(taco_decode_sum_encode(A_SLOT(me, k, 0), n, S, c->o->taco, B_SLOT(me, k, me), (void *)r->codec_stream));
      }
      CK(direct_decode(c, i, B_SLOT(me, k, me), 1, S, y + ELEM(k, me), r->codec_stream, 1));
    }
    return 0;
  }
  for (int k = 0; k < K; k++) {
    CK(direct_flags_on(c, i, -2, -1, c->seq0 + (unsigned long long)(K + k), r->stream));
    for (int p = 0; p < n; p++)
      if (p != me) CK(direct_decode(c, i, B_SLOT(me, k, p), 1, S, y + ELEM(k, p), r->stream, 0));
  }
  return direct_join_side(c, i);
#undef A_SLOT
#undef B_SLOT
#undef ELEM
}

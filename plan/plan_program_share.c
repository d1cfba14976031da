/* plan_program_share.c — whether two ranks' programs are the same program up
 * to where their pipeline messages go.
 *
 * The ranks of one pipeline stage run the same ops (same kinds, streams,
 * sizes, dependencies, tags); only a send's or receive's peer differs, by the
 * distance between the two ranks (the peer is the rank at the same tp, dp, cp
 * position of the neighbouring stage). A consumer that holds many ranks'
 * programs (the simulator in full mode: 1,024 ranks x 33k ops = 3.5 GB) keeps
 * one and a shift per rank instead. */
#include <string.h>

#include "plan.h"

static bool same_codec(const plan_codec *a, const plan_codec *b) {
  return a->kind == b->kind && a->group == b->group && a->fp8 == b->fp8 && a->p == b->p &&
         a->group_auto == b->group_auto;
}

/* every field of plan_op but peer (compared by the caller) */
static bool same_op(const plan_op *a, const plan_op *b) {
  if (a->kind != b->kind || a->stream != b->stream || a->phase != b->phase || a->coll != b->coll ||
      a->group != b->group || a->traffic != b->traffic || a->part != b->part || a->row_chunk != b->row_chunk ||
      a->row_chunks != b->row_chunks || a->elem_bytes != b->elem_bytes || a->model_op != b->model_op ||
      a->layer != b->layer || a->micro != b->micro || a->chunk != b->chunk || a->tag != b->tag)
    return false;
  for (int k = 0; k < PLAN_MAX_DEPS; k++)
    if (a->dep[k] != b->dep[k]) return false;
  /* bit patterns: a NaN equals itself, -0 is not 0 (the consumer reads the stored op) */
  if (memcmp(&a->flops, &b->flops, sizeof a->flops) || memcmp(&a->bytes, &b->bytes, sizeof a->bytes) ||
      memcmp(&a->wire_bytes, &b->wire_bytes, sizeof a->wire_bytes))
    return false;
  return same_codec(&a->codec, &b->codec);
}

bool plan_program_same_shifted(const plan_program *a, const plan_program *b) {
  if (a->n != b->n) return false;
  int shift = b->rank - a->rank;
  for (int i = 0; i < a->n; i++) {
    const plan_op *x = &a->ops[i], *y = &b->ops[i];
    if (!same_op(x, y)) return false;
    if (x->peer < 0 || y->peer < 0 ? x->peer != y->peer : (long long)y->peer - x->peer != shift) return false;
  }
  return true;
}

/* plan_program_cp.c — context parallelism (Megatron-Core's
 * --context-parallel-size with --cp-comm-type p2p, Transformer Engine's
 * ring attention): the fields, their rules, the KV ring of each attention
 * in a rank's program, and the receive buffers it holds.
 *
 * The sequence of a micro-batch is cut into 2 cp chunks; CP rank i holds
 * chunks i and 2 cp - 1 - i (the load balancing of causal masks), seq / cp
 * tokens. Every op but the attention core works on those tokens alone (the
 * plan's shard has seq / cp: GEMMs, norms, TP collectives, PP messages,
 * activations). The attention runs as cp pieces: piece 0 on this rank's own
 * KV, piece s on the KV block of the rank s steps back on the ring. With the
 * 2 cp split every piece has the same work, 1/cp of the rank's causal
 * attention: cp x (S/cp)^2 / 2 = S^2 / (2 cp) in all, 1/cp of the full
 * S^2 / 2; so each piece costs the local (seq / cp) causal attention's
 * FLOPs and bytes (model_layer_ops of the shard).
 *
 * Forward (and a recomputed forward): cp - 1 ring steps on the CP stream,
 * the first issued with the attention (after the QKV projection), each
 * bringing the next KV block (K and V of seq / cp tokens, kv_heads / tp
 * heads, bf16) from the previous rank while the piece in hand runs; piece s
 * waits for step s. Backward: the KV blocks travel the ring again (cp - 1
 * steps: only the local KV is kept from the forward) and the dK, dV of each
 * block follow them one step behind: after piece s its block's dKV (bf16)
 * goes one hop on (cp hops in all, the last one home), and the attention's
 * input gradient waits for the last. A step is priced as one ring step of an
 * all-gather over the CP group: its nccl-tests size is cp / (cp - 1) x the
 * block, so the ring moves exactly one block per rank (the cp - 1 steps of a
 * pass add up to the all-gather of the KV that CP replaces).
 *
 * cp_comm_type "allgather" (Megatron-Core's --cp-comm-type allgather; the
 * all-gather method of Llama 3's CP, arXiv 2407.21783 section 3.3.2): the
 * same chunks and pieces, but the KV comes in one all-gather over the CP
 * group before the first piece (nccl-tests size cp blocks: one block from
 * each rank), exposed on the critical path, and leaves the same bytes per
 * rank as the ring. Backward: the KV is gathered again (only the local KV
 * is kept), the pieces run, and the dK, dV of every rank's block go home in
 * one reduce-scatter (cp blocks) that the input gradient waits for. */
#include <string.h>

#include "plan_internal.h"
#include "plan_program_moe.h"
#include "ts_json.h"

static const char *const comm_type_names[] = {"p2p", "a2a", "allgather", "a2a+p2p", NULL};

int plan_load_cp_fields(json_t *layout, const char *file, plan *p, ts_err *e) {
  long long v;
  if (tsj_int_opt(layout, "context_parallel_size", 1, 1 << 16, 1, &v, file, "layout", e)) return -1;
  p->cp = (int)v;
  int type;
  if (tsj_enum_opt(layout, "cp_comm_type", comm_type_names, 0, &type, file, "layout", e)) return -1;
  if (type != 0 && type != 2)
    return ts_fail(e, file, "layout.cp_comm_type",
                   "\"%s\" is not modelled; \"p2p\" (Megatron-Core's default ring of send/recv) and \"allgather\" are",
                   comm_type_names[type]);
  p->cp_allgather = type == 2;
  return 0;
}

int plan_validate_cp(const plan *p, ts_err *e) {
  const char *f = p->path, *field = "layout.context_parallel_size";
  const int cp = plan_cp(p);
  if (p->cp < 0 || p->cp > PLAN_CP_MAX) return ts_fail(e, f, field, "%d is not in 1..%d", p->cp, PLAN_CP_MAX);
  if (cp == 1) return 0;
  if (p->seq % (2 * cp))
    return ts_fail(e, f, field, "batch.seq %d is not divisible by 2 x cp = %d (the load-balanced split of causal "
                   "masks cuts each sequence into 2 cp chunks)", p->seq, 2 * cp);
  if (p->sequence_parallel && plan_local_seq(p) % p->tp)
    return ts_fail(e, f, field, "the %d tokens per CP rank (seq / cp) are not divisible by tp %d "
                   "(sequence_parallel splits them further)", plan_local_seq(p), p->tp);
  if (model_is_moe(&p->model))
    return ts_fail(e, f, field, "%d with the experts of %s is not modelled (the expert layers' parallel folding "
                   "here has no CP)", cp, p->model.name);
  if (p->attention_backend == PLAN_ATTENTION_UNFUSED)
    return ts_fail(e, f, field, "%d needs a flash-style \"attention_backend\" (fused, flash or executor; ring "
                   "attention runs on the fused kernels' log-sum-exp)", cp);
  return 0;
}

/* One KV block: K and V of this rank's seq / cp tokens, its TP share of the KV heads, bf16. */
double plan_cp_kv_bytes(const plan *p) {
  return 2.0 * 2.0 * p->micro_batch * (double)plan_local_seq(p) * (p->model.kv_heads / p->tp) *
         model_head_dim(&p->model);
}

/* Transformer Engine double-buffers the blocks in flight: two KV blocks in
 * the forward; in the backward two KV and two dKV blocks (the peak). The
 * all-gather holds the gathered KV (cp blocks) and in the backward the
 * gathered dKV too (2 cp blocks, the peak). One layer's attention at a time,
 * so once per GPU. */
double plan_cp_buffer_bytes(const plan *p) {
  if (plan_cp(p) <= 1) return 0.0;
  return (p->cp_allgather ? 2.0 * plan_cp(p) : 4.0) * plan_cp_kv_bytes(p);
}

/* One CP collective of `bytes` (nccl-tests size) on the CP stream, TACO on
 * codec.cp as the ring steps. */
static int32_t cp_collective(plan_builder *b, plan_coll coll, plan_phase phase, int i, int layer, int micro,
                             int chunk, int tag, double bytes, int32_t dep) {
  const plan *p = plan_b_plan(b);
  double wire = bytes;
  plan_codec codec = {.kind = PLAN_CODEC_NONE};
  const plan_codec *pc = &p->codec[PLAN_TRAFFIC_CP];
  if (plan_codec_has_taco(pc->kind) && bytes >= p->codec_min_bytes) {
    codec = (plan_codec){.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
    wire = plan_codec_wire_bytes(&codec, bytes, 2);
  }
  int32_t r = plan_b_collective(b, PLAN_STREAM_CP, PLAN_GROUP_CP, coll, PLAN_TRAFFIC_CP, phase, i, layer, micro,
                                chunk, bytes, wire, codec, dep);
  if (r >= 0) plan_b_op(b, r)->tag = tag;
  return r;
}

/* One ring step moving a KV (or dKV) block per rank; tag: s for the KV step
 * that brings piece s's block (1..cp - 1), cp + s for the dKV step after
 * piece s (0..cp - 1). */
static int32_t ring_step(plan_builder *b, plan_phase phase, int i, int layer, int micro, int chunk, int tag,
                         int32_t dep) {
  const plan *p = plan_b_plan(b);
  const int cp = plan_cp(p);
  return cp_collective(b, PLAN_COLL_ALLGATHER, phase, i, layer, micro, chunk, tag,
                       plan_cp_kv_bytes(p) * cp / (cp - 1.0), dep);
}

/* cp_comm_type allgather: the KV of every CP rank (all-gather, tag 1) or the
 * dKV of every rank's block home (reduce-scatter, tag cp); cp blocks. */
static int32_t gather_step(plan_builder *b, plan_coll coll, plan_phase phase, int i, int layer, int micro,
                           int chunk, int32_t dep) {
  const plan *p = plan_b_plan(b);
  const int cp = plan_cp(p);
  return cp_collective(b, coll, phase, i, layer, micro, chunk, coll == PLAN_COLL_ALLGATHER ? 1 : cp,
                       plan_cp_kv_bytes(p) * cp, dep);
}

/* Piece s of the attention (compute stream): 1/cp of its work, row_chunk s of cp. */
static int32_t piece(plan_builder *b, plan_phase phase, int i, int layer, int micro, int chunk, int s, double flops,
                     double bytes) {
  int32_t c = plan_b_compute(b, phase, i, PLAN_PART_WHOLE, layer, micro, chunk, flops, bytes);
  if (c >= 0) {
    plan_op *op = plan_b_op(b, c);
    op->row_chunk = (uint8_t)s;
    op->row_chunks = (uint8_t)plan_cp(plan_b_plan(b));
  }
  return c;
}

int plan_cp_attention_forward(plan_builder *b, int i, int layer, int micro, int chunk, plan_phase phase) {
  int n;
  const model_op *o = &plan_b_ops(b, &n)[i];
  const int cp = plan_cp(plan_b_plan(b));
  const int32_t issue = plan_b_last_op(b);
  if (plan_b_plan(b)->cp_allgather) {
    int32_t ag = gather_step(b, PLAN_COLL_ALLGATHER, phase, i, layer, micro, chunk, issue);
    if (ag < 0) return -1;
    plan_b_set_last_op(b, issue);
    plan_b_wait_for(b, ag);
    for (int s = 0; s < cp; s++)
      if (piece(b, phase, i, layer, micro, chunk, s, o->flops_fwd, o->bytes_fwd) < 0) return -1;
    return 0;
  }
  int32_t step[PLAN_CP_MAX + 1];
  for (int s = 1; s < cp; s++)
    if ((step[s] = ring_step(b, phase, i, layer, micro, chunk, s, issue)) < 0) return -1;
  plan_b_set_last_op(b, issue);
  for (int s = 0; s < cp; s++) {
    if (s > 0) plan_b_wait_for(b, step[s]);
    if (piece(b, phase, i, layer, micro, chunk, s, o->flops_fwd, o->bytes_fwd) < 0) return -1;
  }
  return 0;
}

/* Backward, as Transformer Engine's ring runs it: before piece s the KV
 * block of piece s + 1 is sent on; after piece s its block's dKV goes one hop
 * on. One stream (one NCCL communicator), so a KV step waits behind the dKV
 * step issued before it. */
int plan_cp_attention_backward(plan_builder *b, int i, int layer, int micro, int chunk) {
  int n;
  const model_op *o = &plan_b_ops(b, &n)[i];
  const int cp = plan_cp(plan_b_plan(b));
  const plan_phase ph = PLAN_PHASE_BWD;
  int32_t kv = -1, dkv = -1;
  if (plan_b_plan(b)->cp_allgather) {
    int32_t before = plan_b_last_op(b), ag = gather_step(b, PLAN_COLL_ALLGATHER, ph, i, layer, micro, chunk, before);
    if (ag < 0) return -1;
    plan_b_set_last_op(b, before);
    plan_b_wait_for(b, ag);
    int32_t c = -1;
    for (int s = 0; s < cp; s++)
      if ((c = piece(b, ph, i, layer, micro, chunk, s, o->flops_bwd, o->bytes_bwd)) < 0) return -1;
    if ((dkv = gather_step(b, PLAN_COLL_REDUCESCATTER, ph, i, layer, micro, chunk, c)) < 0) return -1;
    plan_b_set_last_op(b, c);
    plan_b_wait_for(b, dkv); /* the input gradient needs the dKV of its block */
    return 0;
  }
  for (int s = 0; s < cp; s++) {
    if (s > 0) plan_b_wait_for(b, kv);
    int32_t before = plan_b_last_op(b);
    if (s + 1 < cp && (kv = ring_step(b, ph, i, layer, micro, chunk, s + 1, before)) < 0) return -1;
    plan_b_set_last_op(b, before);
    int32_t c = piece(b, ph, i, layer, micro, chunk, s, o->flops_bwd, o->bytes_bwd);
    if (c < 0 || (dkv = ring_step(b, ph, i, layer, micro, chunk, cp + s, c)) < 0) return -1;
    plan_b_set_last_op(b, c);
  }
  plan_b_wait_for(b, dkv); /* the input gradient needs every dKV home */
  return 0;
}

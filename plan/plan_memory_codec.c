/* plan_memory_codec.c — what the compressed collectives hold on one GPU
 * (plan/README.md, "Codec buffers"): per traffic class with TACO, the
 * encoded form of its largest message, as many times as the collective's
 * algorithm keeps it at once; CAAT-Net's packed shared channels. */
#include <math.h>
#include <stdlib.h>

#include "plan.h"
#include "plan_internal.h"

/* Encoded copies of the whole message a TACO collective keeps (kernels/coll_taco.c, the stages of
 * dispatch): an all-reduce the blocks it sends (encoded per destination segment), the blocks it
 * receives (every rank's block of its own segment) and the all-gather slots its reduced segment is
 * re-encoded into, which the peers' segments fill; a reduce-scatter the first two; an all-gather the
 * slots alone (its own block encoded into its slot, gathered in place); a pipeline stage the chunk it
 * sends and the chunk it receives (a middle stage does both). Each is the message's encoded size,
 * one fp8 byte an element and 8 bytes of scales a group (ts_taco_wire_elements). */
static double encoded_copies(plan_coll c) {
  switch (c) {
  case PLAN_COLL_ALLREDUCE: return 3.0;
  case PLAN_COLL_REDUCESCATTER: return 2.0;
  default: return 1.0; /* all-gather */
  }
}
#define PP_COPIES 2.0 /* a pipeline stage's chunk sent and chunk received */

/* The TP team's buffers: one TP collective runs at a time (the TP stream is in order), so the class
 * and collective that hold the most decide. Without SP every TP message is an all-reduce of the
 * layer's [tokens x hidden] bf16 activation or gradient; CAAT-Net first packs its shared channels
 * into a contiguous buffer the all-reduce runs on (bf16 forward, fp32 backward: plan_tp_message's
 * rules), TACO then encodes that (TACO+CAAT) or the whole message (TACO). Under SP the messages are
 * the all-gathers and reduce-scatters of the same bytes (CAAT-Net is refused with SP). */
static double tp_bytes(const plan *p) {
  if (p->tp < 2) return 0.0;
  const double full = 2.0 * p->micro_batch * plan_local_seq(p) * p->model.hidden;
  double most = 0.0;
  for (int t = PLAN_TRAFFIC_TP_FWD; t <= PLAN_TRAFFIC_TP_BWD; t++) {
    const int rule = t == PLAN_TRAFFIC_TP_FWD ? 1 : 2; /* forward row-parallel output, backward input gradient */
    plan_codec c;
    double wire, held = 0.0;
    if (p->sequence_parallel) {
      plan_tp_message(p, t, 0, full, &c, &wire);
      if (plan_codec_has_taco(c.kind)) held = wire * encoded_copies(PLAN_COLL_REDUCESCATTER);
    } else {
      plan_tp_message(p, t, rule, full, &c, &wire);
      if (plan_codec_has_caat(c.kind)) { /* the packed shared channels, as plan_tp_message sizes them */
        const double frac = floor(p->codec[t].p * p->model.hidden) / p->model.hidden;
        held += rule == 1 ? full * frac : 2.0 * full * frac;
      }
      if (plan_codec_has_taco(c.kind)) held += wire * encoded_copies(PLAN_COLL_ALLREDUCE);
    }
    most = fmax(most, held);
  }
  return most;
}

/* The pipeline's: the activation (or its gradient) a stage sends and the one it receives, bf16, as the
 * program builder sizes them (plan_program.c: 1/tp of it under pp_scatter_gather). */
static double pp_bytes(const plan *p) {
  const plan_codec *pc = &p->codec[PLAN_TRAFFIC_PP];
  if (p->pp < 2 || !plan_codec_has_taco(pc->kind)) return 0.0;
  model_shard s = plan_shard(p);
  double msg = model_activation_tensor_bytes(&p->model, &s);
  if (p->pp_scatter_gather) msg /= p->tp;
  if (msg < p->codec_min_bytes) return 0.0;
  plan_codec c = {.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
  return PP_COPIES * plan_codec_wire_bytes(&c, msg, 2);
}

/* The DP gradient reduction's: the stage's largest bucket (plan_zero_stage_bucket_list, the program
 * builder's rule: Megatron-LM's bucket of dp_bucket_bytes closed at a unit's end), its gradients as
 * reduced (fp32, or bf16 with grad_reduce_in_fp32 false), all-reduced, or reduce-scattered under the
 * distributed optimizer. ZeRO-3's per-unit reduce-scatters are no larger than a bucket (an upper
 * bound there). Returns -1 when the model's ops cannot be listed. */
static double dp_bytes(const plan *p, int stage) {
  const plan_codec *pc = &p->codec[PLAN_TRAFFIC_DP];
  if (plan_dp_shards(p) < 2 || !plan_codec_has_taco(pc->kind)) return 0.0;
  const int n = plan_zero_stage_bucket_list(p, stage, NULL, 0);
  if (n < 0) return -1.0;
  if (n == 0) return 0.0;
  plan_zero_bucket *b = malloc((size_t)n * sizeof *b);
  if (!b) return -1.0;
  if (plan_zero_stage_bucket_list(p, stage, b, n) != n) {
    free(b);
    return -1.0;
  }
  double params = 0.0;
  for (int i = 0; i < n; i++) params = fmax(params, b[i].params);
  free(b);
  const int gb = plan_grad_bytes(p);
  const double msg = gb * params;
  if (msg < p->codec_min_bytes) return 0.0;
  plan_codec c = {.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
  const plan_coll coll = p->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE;
  return encoded_copies(coll) * plan_codec_wire_bytes(&c, msg, gb);
}

double plan_codec_buffer_bytes(const plan *p, int stage) {
  const double dp = dp_bytes(p, stage);
  if (dp < 0) return -1.0;
  return tp_bytes(p) + pp_bytes(p) + dp;
}

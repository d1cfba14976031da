/* plan_program.c — one rank's ordered program for one training iteration,
 * the way Megatron-LM runs it.
 *
 * Per layer, forward: ln1, [SP: all-gather], qkv (column-parallel), attention,
 * attn_out (row-parallel), TP all-reduce [SP: reduce-scatter], residual, ln2,
 * [SP: all-gather], fc1, activation, fc2, all-reduce [reduce-scatter],
 * residual. Compute after a TP collective waits for it. With
 * tp_overlap_chunks = k > 1, attn_out and fc2 run as k GEMMs over token rows,
 * each followed by its own all-reduce (overlapping the next chunk's GEMM).
 * Backward mirrors it: [SP: all-gather of the output gradient before each
 * row-parallel GEMM]; each GEMM's backward is a dgrad then a wgrad; after the
 * dgrad of a column-parallel GEMM (qkv, fc1) the input gradient is
 * all-reduced [reduce-scattered] while the wgrad runs; under SP the
 * column-parallel input is all-gathered again for the wgrad (Megatron-LM
 * does not keep the gathered copy). Recompute: "full" reruns each layer's
 * forward (with its collectives) right before its backward, "selective"
 * reruns the attention core before its backward.
 * CAAT-Net: the forward all-reduces after attn_out and fc2 carry
 * floor(p*h) of the h channels; the backward input-gradient all-reduces after
 * qkv and fc1 carry only those channels, in fp32; the norm-weight gradients
 * are all-reduced across TP once per iteration (as under SP).
 * Pipeline: the first virtual stage starts with the vocabulary-parallel
 * embedding (+ all-reduce), the last ends with the final norm, the logits
 * GEMM and the vocabulary-parallel cross-entropy (+ a small all-reduce of its
 * statistics); activations and their gradients travel by send/recv on the PP
 * stream, ordered by one global order so rendezvous cannot deadlock. With
 * pp_scatter_gather each TP rank sends its 1/tp slice and the consumer first
 * all-gathers the slices on the TP group.
 * Data parallel: the gradients of each model chunk are reduced in buckets of
 * dp_bucket_bytes on the DP stream, each as soon as the last micro-batch's
 * backward of its layers finishes (all-reduce, or reduce-scatter and, after
 * the optimizer, an all-gather of the parameters under ZeRO-1), in fp32 or,
 * with grad_reduce_in_fp32 false, bf16 (plan_grad_bytes). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"
#include "plan_program_moe.h"

typedef struct {
  int64_t key;   /* finish time of the message's producer in the ideal pipeline */
  int32_t tag;
  int32_t micro;
  int16_t chunk; /* this rank's chunk that produces (send) or consumes (recv) it */
  int8_t is_send;
  int8_t dir;    /* 0: activation (forward), 1: gradient (backward) */
  int32_t peer;
} pp_msg;

typedef struct builder {
  const plan *p;
  plan_program *prog;
  ts_err *e;
  int stage, V, m, lpc; /* lpc: layers per chunk */
  plan_coord coord;
  model_op ops[MODEL_MAX_LAYER_OPS], head[MODEL_MAX_LAYER_OPS], emb[MODEL_MAX_LAYER_OPS];
  int n_ops, n_head, n_emb;
  bool first_col[MODEL_MAX_LAYER_OPS], last_col[MODEL_MAX_LAYER_OPS];
  double tokens, full_bytes, send_bytes, layer_params;
  double layer_fp8_params; /* the layer's FP8 GEMM weights (layout.fp8: plan_fp8_gemm_weights; 0 without) */
  double msg_bytes; /* one PP message per rank: send_bytes, or its 1/tp slice under pp_scatter_gather */
  int32_t wait[PLAN_STREAM_COUNT]; /* deps the next compute op takes, one per stream */
  int32_t wait_first; /* a dep it takes before those: under pp_scatter_gather the PP recv whose all-gather it
                       * waits for, so that a consumer waiting in order waits for the data first (bubble and
                       * transfer), then for the gather; -1 = none */
  int32_t last_op;
  plan_ideal ideal;
  pp_msg *msgs;
  int n_msgs, next_msg;
  int32_t *recv_op, *step_last; /* indexed by (micro * V + v) * 2 + dir */
  /* DP buckets of the chunk being finished */
  double bucket_params;
  double bucket_fp8_params; /* of them, the FP8 GEMMs' (layout.fp8_param_gather: gathered in FP8) */
  int bucket_count;
  double *bucket_sizes; /* bytes each bucket's parameter all-gather moves */
  int bucket_cap;
  int bucket_layer;
  /* data-parallel sharding and overlaps (plan_program_zero.c) */
  bool record;             /* this backward's buckets are the chunk's (sizes kept for the param gathers) */
  plan_zero_chunk *zc;     /* per chunk: units and their buckets */
  int32_t *pg_op;          /* overlap_param_gather: all-gather of each bucket, forward order over the chunks */
  char *pg_waited;
  int *pg_base, pg_total;  /* first bucket of each chunk in that order; buckets in all */
  int32_t z3_op[PLAN_ZERO_MAX_UNITS]; /* ZeRO-3: this step's gather of each unit, -1 = not issued */
  plan_op *deferred;       /* overlap_grad_reduce false: bucket reductions held for after the backward */
  int n_deferred, cap_deferred;
} builder;


/* ---- op emission ---- */

static int32_t push(builder *b) {
  plan_program *g = b->prog;
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 1024;
    plan_op *ops = realloc(g->ops, (size_t)cap * sizeof *ops);
    if (!ops) return -1;
    g->ops = ops;
    g->cap = cap;
  }
  plan_op *op = &g->ops[g->n];
  memset(op, 0, sizeof *op);
  op->layer = op->micro = op->peer = op->tag = -1;
  for (int i = 0; i < PLAN_MAX_DEPS; i++) op->dep[i] = -1;
  return g->n++;
}

static plan_op *at(builder *b, int32_t i) { return &b->prog->ops[i]; }

static void add_dep(plan_op *op, int32_t d) {
  if (d < 0) return;
  for (int i = 0; i < PLAN_MAX_DEPS; i++) {
    if (op->dep[i] == d) return;
    if (op->dep[i] < 0) {
      op->dep[i] = d;
      return;
    }
  }
}

/* The next compute op waits for op i; per stream only the latest matters,
 * since a stream runs its ops in order. */
static void wait_for(builder *b, int32_t i) {
  if (i >= 0) b->wait[at(b, i)->stream] = i;
}

static int32_t compute(builder *b, plan_phase phase, int model_op, plan_part part, int layer, int micro,
                       int chunk, double flops, double bytes) {
  int32_t i = push(b);
  if (i < 0) return -1;
  plan_op *op = at(b, i);
  op->kind = PLAN_OP_COMPUTE;
  op->stream = PLAN_STREAM_COMPUTE;
  op->phase = (uint8_t)phase;
  op->part = (uint8_t)part;
  op->model_op = (int16_t)model_op;
  op->layer = layer;
  op->micro = micro;
  op->chunk = chunk;
  op->flops = flops;
  op->bytes = bytes;
  plan_op_set_launches(b->p, b->ops, b->n_ops, op);
  if (b->p->moe_pad_to_capacity) op->host_sync = 0; /* drop-and-pad: the split sizes are known on the host */
  add_dep(op, b->wait_first);
  b->wait_first = -1;
  for (int s = PLAN_STREAM_COMPUTE + 1; s < PLAN_STREAM_COUNT; s++) {
    add_dep(op, b->wait[s]);
    b->wait[s] = -1;
  }
  b->last_op = i;
  return i;
}

static int32_t collective(builder *b, plan_stream stream, plan_group_kind group, plan_coll coll, plan_traffic t,
                          plan_phase phase, int model_op, int layer, int micro, int chunk, double bytes,
                          double wire, plan_codec codec, int32_t dep) {
  int32_t i = push(b);
  if (i < 0) return -1;
  plan_op *op = at(b, i);
  op->kind = PLAN_OP_COLLECTIVE;
  op->stream = (uint8_t)stream;
  op->coll = (uint8_t)coll;
  op->group = (uint8_t)group;
  op->traffic = (uint8_t)t;
  op->phase = (uint8_t)phase;
  op->model_op = (int16_t)model_op;
  op->layer = layer;
  op->micro = micro;
  op->chunk = chunk;
  op->bytes = bytes;
  op->wire_bytes = wire;
  op->codec = codec;
  add_dep(op, dep);
  b->last_op = i;
  return i;
}

/* What a TP message costs on the wire. caat_rule: 0 = CAAT-Net does not
 * change this message, 1 = forward row-parallel output (first floor(p*h)
 * channels, bf16), 2 = backward column-parallel input gradient (those
 * channels, fp32). TACO then compresses what is left if it is large enough. */
void plan_tp_message(const plan *p, int t, int caat_rule, double bytes, plan_codec *codec, double *wire) {
  const plan_codec *pc = &p->codec[t];
  plan_codec c = {.kind = PLAN_CODEC_NONE};
  double sent = bytes;
  int elem = 2;
  if (caat_rule && plan_codec_has_caat(pc->kind)) {
    double frac = floor(pc->p * p->model.hidden) / p->model.hidden;
    sent = caat_rule == 1 ? bytes * frac : bytes * frac * 2.0;
    elem = caat_rule == 1 ? 2 : 4;
    c.kind = PLAN_CODEC_CAAT;
    c.p = pc->p;
  }
  if (plan_codec_has_taco(pc->kind) && sent >= p->codec_min_bytes) {
    c.kind = c.kind == PLAN_CODEC_CAAT ? PLAN_CODEC_TACO_CAAT : PLAN_CODEC_TACO;
    c.group = pc->group;
    c.fp8 = pc->fp8;
    sent = plan_codec_wire_bytes(&c, sent, elem);
  }
  *codec = c;
  *wire = sent;
}

static int32_t tp_coll(builder *b, plan_coll coll, plan_phase phase, int caat_rule, int model_op, int layer,
                       int micro, int chunk, double bytes, int32_t dep) {
  plan_traffic t = phase == PLAN_PHASE_BWD ? PLAN_TRAFFIC_TP_BWD : PLAN_TRAFFIC_TP_FWD;
  plan_codec codec;
  double wire;
  plan_tp_message(b->p, t, caat_rule, bytes, &codec, &wire);
  return collective(b, PLAN_STREAM_TP, PLAN_GROUP_TP, coll, t, phase, model_op, layer, micro, chunk, bytes, wire,
                    codec, dep);
}

/* An uncompressed collective (small fp32 reductions, parameters). */
static int32_t plain_coll(builder *b, plan_stream stream, plan_group_kind group, plan_coll coll, plan_traffic t,
                          plan_phase phase, int model_op, int chunk, double bytes, int32_t dep) {
  plan_codec none = {.kind = PLAN_CODEC_NONE};
  return collective(b, stream, group, coll, t, phase, model_op, -1, -1, chunk, bytes, bytes, none, dep);
}

#define CHECK(x)                                                                                             \
  do {                                                                                                       \
    if ((x) < 0) return -1;                                                                                  \
  } while (0)

/* ---- one layer ---- */

/* Share s of k of an op's FLOPs or bytes: equal shares, the last one the
 * remainder, so the shares add up to the whole exactly (the partial sum is at
 * least half the whole, so the subtraction is exact). */
double plan_row_share(double whole, int s, int k) {
  if (k <= 1) return whole;
  double piece = whole / k;
  if (s < k - 1) return piece;
  double before = 0;
  for (int j = 0; j < k - 1; j++) before += piece;
  return whole - before;
}

/* A GEMM (phase, part) as k GEMMs over consecutive token rows, each followed by the TP collective `coll`
 * of its rows on the TP stream; piece s + 1's GEMM does not wait for piece s's collective, so they overlap.
 * Returns the last collective (which runs after the others on the TP stream), or -1. */
static int32_t gemm_pieces_then_coll(builder *b, int i, int layer, int micro, int chunk, plan_phase phase,
                                     plan_part part, double flops, double bytes, int k, plan_coll coll, int rule) {
  int32_t r = -1;
  for (int s = 0; s < k; s++) {
    int32_t c = compute(b, phase, i, part, layer, micro, chunk, plan_row_share(flops, s, k), plan_row_share(bytes, s, k));
    if (c < 0) return -1;
    at(b, c)->row_chunk = (uint8_t)s;
    at(b, c)->row_chunks = (uint8_t)k;
    r = tp_coll(b, coll, phase, rule, i, layer, micro, chunk, plan_row_share(b->full_bytes, s, k), c);
    if (r < 0) return -1;
    at(b, r)->row_chunk = (uint8_t)s;
    at(b, r)->row_chunks = (uint8_t)k;
  }
  return r;
}

/* tp_overlap_chunks: a forward row-parallel GEMM as k GEMMs over consecutive
 * token rows, each followed by the TP all-reduce of its rows on the TP
 * stream; chunk s + 1's GEMM does not wait for chunk s's all-reduce, so they
 * overlap. The consumer (the residual) waits for the last all-reduce, which
 * runs after the others on the TP stream. */
static int row_parallel_chunked(builder *b, int i, int layer, int micro, int chunk, plan_phase phase) {
  const model_op *o = &b->ops[i];
  /* tp_comm_overlap (SP): Transformer Engine's pipelined reduce-scatter (proj_fprop / fc2_fprop's num_splits
   * pieces) or its ring-exchange reduce-scatter (tp pieces), plan_program_tpo.c */
  const bool rs = b->p->tp_comm_overlap;
  const int k = rs ? plan_tpo_splits(b->p, plan_tpo_ops_gemm(b->p, b->ops, b->n_ops, i, phase, PLAN_PART_WHOLE))
                   : b->p->tp_overlap_chunks;
  int32_t r = gemm_pieces_then_coll(b, i, layer, micro, chunk, phase, PLAN_PART_WHOLE, o->flops_fwd, o->bytes_fwd, k,
                                    rs ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, 1);
  CHECK(r);
  wait_for(b, r);
  return 0;
}

/* The bytes of the sequence-parallel all-gather feeding op i: its input (grad false) or, for a row-parallel
 * GEMM in the backward, its output gradient (grad true); BF16 unless op i is an FP8 GEMM, whose gathers
 * Transformer Engine runs in FP8 (plan_fp8_sp_gather_elem_bytes). */
static double sp_gather_bytes(const builder *b, int i, bool grad) {
  return b->full_bytes / 2.0 * plan_fp8_sp_gather_elem_bytes(b->p, &b->ops[i], grad);
}

/* A sequence-parallel all-gather (or a ring step of one) of `bytes` feeding op i: a TP collective as any
 * other, except that an FP8 one travels as it is: a codec does not compress data that is FP8 already. */
static int32_t sp_allgather(builder *b, int i, plan_phase phase, int layer, int micro, int chunk, double bytes,
                            int32_t dep) {
  if (!plan_fp8_gemm(b->p, &b->ops[i]))
    return tp_coll(b, PLAN_COLL_ALLGATHER, phase, 0, i, layer, micro, chunk, bytes, dep);
  plan_traffic t = phase == PLAN_PHASE_BWD ? PLAN_TRAFFIC_TP_BWD : PLAN_TRAFFIC_TP_FWD;
  return collective(b, PLAN_STREAM_TP, PLAN_GROUP_TP, PLAN_COLL_ALLGATHER, t, phase, i, layer, micro, chunk, bytes,
                    bytes, (plan_codec){.kind = PLAN_CODEC_NONE}, dep);
}

/* layout.fp8 "tensorwise" under SP: the amax all-reduce over the TP group before the quantize of op i's
 * gathered tensor (plan_fp8_amax_reduction), one fp32 value; the stream waits for it. */
static int fp8_amax_reduce(builder *b, int i, plan_phase phase, int layer, int micro, int chunk) {
  if (!plan_fp8_amax_reduction(b->p, &b->ops[i])) return 0;
  plan_traffic t = phase == PLAN_PHASE_BWD ? PLAN_TRAFFIC_TP_BWD : PLAN_TRAFFIC_TP_FWD;
  int32_t r = collective(b, PLAN_STREAM_TP, PLAN_GROUP_TP, PLAN_COLL_ALLREDUCE, t, phase, i, layer, micro, chunk,
                         PLAN_FP8_AMAX_BYTES, PLAN_FP8_AMAX_BYTES, (plan_codec){.kind = PLAN_CODEC_NONE}, b->last_op);
  CHECK(r);
  at(b, r)->elem_bytes = 4;
  wait_for(b, r);
  return 0;
}

/* tp_comm_overlap, ring exchange: the SP all-gather of a GEMM's input as
 * tp - 1 steps on the TP stream (each brings one more rank's 1/tp of the
 * rows; the step's size is the whole / (tp - 1), so the steps add up to the
 * gather: `gathered` bytes, sp_gather_bytes), and the GEMM (forward, or the backward dgrad) as tp pieces over
 * those rows: piece 0 on the rows this rank holds, piece s after step s. */
static int ring_gathered_gemm(builder *b, int i, int layer, int micro, int chunk, plan_phase phase, plan_part part,
                              double flops, double bytes, double gathered) {
  const int k = b->p->tp;
  const int32_t issue = b->last_op;
  int32_t first_step = -1;
  for (int s = 1; s < k; s++) {
    int32_t st = sp_allgather(b, i, phase, layer, micro, chunk, plan_row_share(gathered, s - 1, k - 1), issue);
    CHECK(st);
    at(b, st)->row_chunk = (uint8_t)s;
    at(b, st)->row_chunks = (uint8_t)k;
    if (s == 1) first_step = st;
  }
  b->last_op = issue;
  for (int s = 0; s < k; s++) {
    if (s > 0) wait_for(b, first_step + s - 1); /* the steps are consecutive ops */
    int32_t c = compute(b, phase, i, part, layer, micro, chunk, plan_row_share(flops, s, k), plan_row_share(bytes, s, k));
    CHECK(c);
    at(b, c)->row_chunk = (uint8_t)s;
    at(b, c)->row_chunks = (uint8_t)k;
  }
  wait_for(b, first_step + k - 2); /* later GEMMs of the block read the whole gathered input */
  return 0;
}

/* layout.fp8 (plan_fp8.c): Transformer Engine's quantize of one tensor of FP8 GEMM i (what: the input, the
 * output gradient or the weight, PLAN_FP8_CAST_*) to FP8, a memory-bound op of its own before the GEMM. */
static int fp8_cast_op(builder *b, plan_phase phase, int i, int what, int layer, int micro, int chunk, double bytes) {
  if (bytes <= 0.0) return 0;
  int32_t c = compute(b, phase, PLAN_MOP_FP8_CAST, PLAN_PART_WHOLE, layer, micro, chunk, 0.0, bytes);
  CHECK(c);
  at(b, c)->tag = plan_fp8_cast_tag(i, what);
  return 0;
}
static int fp8_cast(builder *b, plan_phase phase, int i, int what, int layer, int micro, int chunk, double elems) {
  return fp8_cast_op(b, phase, i, what, layer, micro, chunk, plan_fp8_cast_bytes(b->p, elems));
}

/* Sequence parallelism: the tensor of FP8 GEMM i that TE all-gathers in FP8 (the column-parallel input, the
 * row-parallel output gradient: `what`, of `gathered` elements) is quantized as the rank's own 1/tp of the
 * rows before the gather (sp_quantize), and its columnwise copy, where one is made, comes from the gathered
 * FP8 rows after it (sp_transpose; plan_fp8.c cites the source). */
static int fp8_sp_quantize(builder *b, plan_phase phase, int i, int what, int layer, int micro, int chunk,
                           double gathered) {
  if (!plan_fp8_gemm(b->p, &b->ops[i])) return 0;
  return fp8_cast_op(b, phase, i, what, layer, micro, chunk, plan_fp8_sp_quantize_bytes(b->p, gathered / b->p->tp));
}
static int fp8_sp_transpose(builder *b, plan_phase phase, int i, int what, int layer, int micro, int chunk,
                            double gathered) {
  if (!plan_fp8_gemm(b->p, &b->ops[i])) return 0;
  return fp8_cast_op(b, phase, i, what, layer, micro, chunk, plan_fp8_sp_transpose_bytes(b->p, gathered));
}

/* The casts before FP8 GEMM i's forward: its weight in the first micro-batch's forward only (TE caches the
 * FP8 weight for the iteration's other micro-batches, Megatron-Core's is_first_microbatch; none with
 * fp8_param_gather, whose parameters are FP8 already, except under MXFP8: Megatron-Core all-gathers MXFP8
 * parameters in BF16 through the gradient buffer and copies each into its MXFP8 tensor after the gather,
 * which quantizes it, every iteration (reuse_grad_buf_for_mxfp8_param_ag, which Megatron-Bridge's MXFP8
 * recipe sets: core_v0.15.0 param_and_grad_buffer.py, finish_param_sync)), its input every time (a
 * recomputation too). */
static int fp8_forward_casts(builder *b, int i, int layer, int micro, int chunk, plan_phase phase, bool gathered) {
  const model_op *o = &b->ops[i];
  if (!plan_fp8_gemm(b->p, o)) return 0;
  const bool weight_cast = !b->p->fp8_param_gather || b->p->fp8_recipe == PLAN_FP8_MXFP8;
  if (phase == PLAN_PHASE_FWD && micro == 0 && weight_cast)
    CHECK(fp8_cast(b, phase, i, PLAN_FP8_CAST_WEIGHT, layer, micro, chunk, (double)o->k * (double)o->n));
  if (gathered) return 0; /* quantized before the gather (fp8_sp_quantize) */
  return fp8_cast(b, phase, i, PLAN_FP8_CAST_INPUT, layer, micro, chunk, (double)o->m * (double)o->k);
}

/* MLA: kv_b's output into the key and value heads (forward, recomputation) or their gradients back
 * (backward, before kv_b's), a memory-bound op of its own (plan_mla.c). */
static int mla_kv_copy(builder *b, plan_phase phase, int layer, int micro, int chunk) {
  int32_t c = compute(b, phase, PLAN_MOP_MLA_KV_SCATTER, PLAN_PART_WHOLE, layer, micro, chunk, 0.0,
                      plan_mla_kv_scatter_bytes(b->p));
  CHECK(c);
  return 0;
}

/* One op of a layer's forward (or of its recomputation: phase), with the TP
 * collectives around it. */
static int op_forward(builder *b, int i, int layer, int micro, int chunk, plan_phase phase) {
  const bool sp = b->p->sequence_parallel, tp = b->p->tp > 1;
  const model_op *o = &b->ops[i];
  if (o->parallel == MODEL_PAR_EXPERT) return plan_moe_forward_op(b, i, layer, micro, chunk, phase);
  if (o->parallel == MODEL_PAR_COLUMN && b->first_col[i] && sp && tp && b->p->tp_comm_overlap) {
    CHECK(fp8_amax_reduce(b, i, phase, layer, micro, chunk));
    CHECK(fp8_sp_quantize(b, phase, i, PLAN_FP8_CAST_INPUT, layer, micro, chunk, (double)o->m * (double)o->k));
    CHECK(fp8_forward_casts(b, i, layer, micro, chunk, phase, true));
    return ring_gathered_gemm(b, i, layer, micro, chunk, phase, PLAN_PART_WHOLE, o->flops_fwd, o->bytes_fwd,
                              sp_gather_bytes(b, i, false));
  }
  const bool gathered = o->parallel == MODEL_PAR_COLUMN && b->first_col[i] && sp && tp;
  if (gathered) {
    CHECK(fp8_amax_reduce(b, i, phase, layer, micro, chunk));
    CHECK(fp8_sp_quantize(b, phase, i, PLAN_FP8_CAST_INPUT, layer, micro, chunk, (double)o->m * (double)o->k));
    int32_t ag = sp_allgather(b, i, phase, layer, micro, chunk, sp_gather_bytes(b, i, false), b->last_op);
    CHECK(ag);
    wait_for(b, ag);
  }
  CHECK(fp8_forward_casts(b, i, layer, micro, chunk, phase, gathered));
  if (o->kind == MODEL_OP_ATTENTION && plan_cp(b->p) > 1) return plan_cp_attention_forward(b, i, layer, micro, chunk, phase);
  if (o->parallel == MODEL_PAR_ROW && tp && (b->p->tp_overlap_chunks > 1 || b->p->tp_comm_overlap))
    return row_parallel_chunked(b, i, layer, micro, chunk, phase);
  int32_t c = compute(b, phase, i, PLAN_PART_WHOLE, layer, micro, chunk, o->flops_fwd, o->bytes_fwd);
  CHECK(c);
  if (plan_mla_kv_scatter_after(b->p, o)) CHECK(mla_kv_copy(b, phase, layer, micro, chunk));
  if (o->parallel == MODEL_PAR_ROW && tp) {
    int32_t r = tp_coll(b, sp ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, phase, 1, i, layer, micro, chunk,
                        b->full_bytes, c);
    CHECK(r);
    wait_for(b, r);
  }
  return 0;
}

static int layer_forward(builder *b, int layer, int micro, int chunk, plan_phase phase) {
  for (int i = 0; i < b->n_ops; i++)
    if (model_op_in_layer(&b->p->model, &b->ops[i], layer)) /* MoE models: dense or MoE layer */
      CHECK(op_forward(b, i, layer, micro, chunk, phase));
  return 0;
}

/* layout.recompute_modules "moe": before the backward reaches the MoE block
 * (its last op, i), the block's forward again, all-to-alls included, as
 * Megatron-Core's checkpointed MoE layer reruns it from its kept input. */
static int moe_block_recompute(builder *b, int i, int layer, int micro, int chunk) {
  int first = i;
  while (first > 0 && b->ops[first - 1].layers_kind == MODEL_LAYERS_MOE) first--;
  for (int j = first; j <= i; j++) CHECK(op_forward(b, j, layer, micro, chunk, PLAN_PHASE_RECOMPUTE));
  return 0;
}

static int layer_backward(builder *b, int layer, int micro, int chunk) {
  const plan *p = b->p;
  const bool sp = p->sequence_parallel, tp = p->tp > 1;
  if (plan_layer_full_recompute(p, layer - plan_chunk_first_layer(p, b->stage, chunk)))
    CHECK(layer_forward(b, layer, micro, chunk, PLAN_PHASE_RECOMPUTE));
  int32_t regather = -1;
  for (int i = b->n_ops - 1; i >= 0; i--) {
    const model_op *o = &b->ops[i];
    if (!model_op_in_layer(&p->model, o, layer)) continue; /* MoE models: dense or MoE layer */
    if (plan_mla_kv_scatter_after(p, o)) CHECK(mla_kv_copy(b, PLAN_PHASE_BWD, layer, micro, chunk));
    if (o->layers_kind == MODEL_LAYERS_MOE && plan_recomputes(p, PLAN_RECOMPUTE_MOE) &&
        (i + 1 == b->n_ops || b->ops[i + 1].layers_kind != MODEL_LAYERS_MOE))
      CHECK(moe_block_recompute(b, i, layer, micro, chunk));
    if (o->kind == MODEL_OP_NORM && plan_recomputes(p, PLAN_RECOMPUTE_LAYERNORM) && !plan_is_qk_norm(o))
      CHECK(compute(b, PLAN_PHASE_RECOMPUTE, i, PLAN_PART_WHOLE, layer, micro, chunk, o->flops_fwd, o->bytes_fwd));
    if (o->parallel == MODEL_PAR_EXPERT) {
      CHECK(plan_moe_backward_op(b, i, layer, micro, chunk));
      continue;
    }
    if (o->parallel == MODEL_PAR_ROW && sp && tp && p->tp_comm_overlap) { /* ring-exchanged output gradient */
      CHECK(fp8_amax_reduce(b, i, PLAN_PHASE_BWD, layer, micro, chunk));
      const double dy = (double)o->m * (double)o->n; /* the gathered output gradient's elements */
      CHECK(fp8_sp_quantize(b, PLAN_PHASE_BWD, i, PLAN_FP8_CAST_GRAD, layer, micro, chunk, dy));
      CHECK(ring_gathered_gemm(b, i, layer, micro, chunk, PLAN_PHASE_BWD, PLAN_PART_DGRAD, o->flops_bwd / 2,
                               o->bytes_bwd / 2, sp_gather_bytes(b, i, true)));
      CHECK(fp8_sp_transpose(b, PLAN_PHASE_BWD, i, PLAN_FP8_CAST_GRAD, layer, micro, chunk, dy)); /* for the wgrad */
      CHECK(compute(b, PLAN_PHASE_BWD, i, PLAN_PART_WGRAD, layer, micro, chunk, o->flops_bwd / 2, o->bytes_bwd / 2));
      continue;
    }
    if (o->parallel == MODEL_PAR_ROW && sp && tp) {
      const double dy = (double)o->m * (double)o->n; /* the gathered output gradient's elements */
      CHECK(fp8_amax_reduce(b, i, PLAN_PHASE_BWD, layer, micro, chunk));
      CHECK(fp8_sp_quantize(b, PLAN_PHASE_BWD, i, PLAN_FP8_CAST_GRAD, layer, micro, chunk, dy));
      int32_t ag = sp_allgather(b, i, PLAN_PHASE_BWD, layer, micro, chunk, sp_gather_bytes(b, i, true), b->last_op);
      CHECK(ag);
      wait_for(b, ag);
      CHECK(fp8_sp_transpose(b, PLAN_PHASE_BWD, i, PLAN_FP8_CAST_GRAD, layer, micro, chunk, dy));
    } else if (plan_fp8_gemm(p, o)) /* the output gradient's quantize (for the dgrad and the wgrad) */
      CHECK(fp8_cast(b, PLAN_PHASE_BWD, i, PLAN_FP8_CAST_GRAD, layer, micro, chunk, (double)o->m * (double)o->n));
    if (o->parallel == MODEL_PAR_COLUMN && b->last_col[i] && sp && tp) {
      regather = sp_allgather(b, i, PLAN_PHASE_BWD, layer, micro, chunk, sp_gather_bytes(b, i, false), b->last_op);
      CHECK(regather);
    }
    if (o->kind == MODEL_OP_ATTENTION && plan_cp(p) > 1) { /* the KV ring again (plan_program_cp.c) */
      if (plan_recomputes(p, PLAN_RECOMPUTE_CORE_ATTN))
        CHECK(plan_cp_attention_forward(b, i, layer, micro, chunk, PLAN_PHASE_RECOMPUTE));
      CHECK(plan_cp_attention_backward(b, i, layer, micro, chunk));
      continue;
    }
    if (o->kind == MODEL_OP_ATTENTION && plan_recomputes(p, PLAN_RECOMPUTE_CORE_ATTN))
      CHECK(compute(b, PLAN_PHASE_RECOMPUTE, i, PLAN_PART_WHOLE, layer, micro, chunk, o->flops_fwd, o->bytes_fwd));
    if (o->kind != MODEL_OP_GEMM) {
      CHECK(compute(b, PLAN_PHASE_BWD, i, PLAN_PART_WHOLE, layer, micro, chunk, o->flops_bwd, o->bytes_bwd));
      continue;
    }
    if (o->parallel == MODEL_PAR_COLUMN && b->first_col[i] && sp && tp && p->tp_comm_overlap &&
        plan_tpo_dgrad_scatters(p, plan_tpo_ops_gemm(p, b->ops, b->n_ops, i, PLAN_PHASE_BWD, PLAN_PART_DGRAD))) {
      /* tp_comm_overlap, qkv_dgrad / fc1_dgrad not bulk (TE's ub_overlap_rs_dgrad): the dgrad as pieces, each
       * reduce-scattered behind the next (pipeline: num_splits; ring exchange: tp), the re-gather (issued
       * above) beside them; the wgrad after it, beside nothing */
      int g = plan_tpo_ops_gemm(p, b->ops, b->n_ops, i, PLAN_PHASE_BWD, PLAN_PART_DGRAD);
      int32_t reduce = gemm_pieces_then_coll(b, i, layer, micro, chunk, PLAN_PHASE_BWD, PLAN_PART_DGRAD,
                                             o->flops_bwd / 2, o->bytes_bwd / 2, plan_tpo_splits(p, g),
                                             PLAN_COLL_REDUCESCATTER, 2);
      CHECK(reduce);
      wait_for(b, regather);
      CHECK(fp8_sp_transpose(b, PLAN_PHASE_BWD, i, PLAN_FP8_CAST_INPUT, layer, micro, chunk,
                             (double)o->m * (double)o->k)); /* the re-gathered input's, for the wgrad */
      CHECK(compute(b, PLAN_PHASE_BWD, i, PLAN_PART_WGRAD, layer, micro, chunk, o->flops_bwd / 2, o->bytes_bwd / 2));
      regather = -1;
      wait_for(b, reduce);
      continue;
    }
    int32_t d = compute(b, PLAN_PHASE_BWD, i, PLAN_PART_DGRAD, layer, micro, chunk, o->flops_bwd / 2,
                        o->bytes_bwd / 2);
    CHECK(d);
    int32_t reduce = -1;
    if (o->parallel == MODEL_PAR_COLUMN && b->first_col[i] && tp) {
      reduce = tp_coll(b, sp ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, PLAN_PHASE_BWD, 2, i, layer, micro,
                       chunk, b->full_bytes, d);
      CHECK(reduce);
    }
    if (o->parallel == MODEL_PAR_COLUMN) wait_for(b, regather);
    if (o->parallel == MODEL_PAR_COLUMN && b->first_col[i] && sp && tp) /* the re-gathered input's, for the wgrad */
      CHECK(fp8_sp_transpose(b, PLAN_PHASE_BWD, i, PLAN_FP8_CAST_INPUT, layer, micro, chunk,
                             (double)o->m * (double)o->k));
    int32_t w = compute(b, PLAN_PHASE_BWD, i, PLAN_PART_WGRAD, layer, micro, chunk, o->flops_bwd / 2,
                        o->bytes_bwd / 2);
    CHECK(w);
    if (o->parallel == MODEL_PAR_COLUMN && b->first_col[i]) regather = -1;
    wait_for(b, reduce);
  }
  return 0;
}

/* ---- embedding and output head ---- */

static double sum_flops(const model_op *o, int n, int bwd) {
  double s = 0;
  for (int i = 0; i < n; i++) s += bwd ? o[i].flops_bwd : o[i].flops_fwd;
  return s;
}
static double sum_bytes(const model_op *o, int n, int bwd) {
  double s = 0;
  for (int i = 0; i < n; i++) s += bwd ? o[i].bytes_bwd : o[i].bytes_fwd;
  return s;
}

static int embedding_forward(builder *b, int micro) {
  int32_t c = compute(b, PLAN_PHASE_FWD, PLAN_MOP_EMBEDDING, PLAN_PART_WHOLE, -1, micro, 0,
                      sum_flops(b->emb, b->n_emb, 0), sum_bytes(b->emb, b->n_emb, 0));
  CHECK(c);
  if (b->p->tp > 1) {
    int32_t r = tp_coll(b, b->p->sequence_parallel ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE,
                        PLAN_PHASE_FWD, 0, PLAN_MOP_EMBEDDING, -1, micro, 0, b->full_bytes, c);
    CHECK(r);
    wait_for(b, r);
  }
  return 0;
}

static int embedding_backward(builder *b, int micro) {
  if (b->p->tp > 1 && b->p->sequence_parallel) {
    int32_t ag = tp_coll(b, PLAN_COLL_ALLGATHER, PLAN_PHASE_BWD, 0, PLAN_MOP_EMBEDDING, -1, micro, 0, b->full_bytes,
                         b->last_op);
    CHECK(ag);
    wait_for(b, ag);
  }
  return compute(b, PLAN_PHASE_BWD, PLAN_MOP_EMBEDDING, PLAN_PART_WHOLE, -1, micro, 0, sum_flops(b->emb, b->n_emb, 1),
                 sum_bytes(b->emb, b->n_emb, 1)) < 0
             ? -1
             : 0;
}

/* head[0] = final_norm, head[1] = logits GEMM, head[2] = cross-entropy. */
static int loss_forward(builder *b, int micro, int chunk) {
  const plan *p = b->p;
  const model_op *h = b->head;
  CHECK(compute(b, PLAN_PHASE_FWD, PLAN_MOP_FINAL_NORM, PLAN_PART_WHOLE, -1, micro, chunk, h[0].flops_fwd,
                h[0].bytes_fwd));
  if (p->tp > 1 && p->sequence_parallel) {
    int32_t ag =
        tp_coll(b, PLAN_COLL_ALLGATHER, PLAN_PHASE_FWD, 0, PLAN_MOP_LOSS, -1, micro, chunk, b->full_bytes, b->last_op);
    CHECK(ag);
    wait_for(b, ag);
  }
  /* cross_entropy_loss_fusion false: Megatron's unfused fp32 kernels (plan_loss.c), launched one by one */
  const plan_ce_kernel *ce;
  int n_ce = plan_ce_kernels(p, PLAN_PHASE_FWD, &ce);
  int32_t c = compute(b, PLAN_PHASE_FWD, PLAN_MOP_LOSS, PLAN_PART_WHOLE, -1, micro, chunk,
                      h[1].flops_fwd + h[2].flops_fwd,
                      h[1].bytes_fwd + (n_ce ? plan_ce_unfused_bytes(p, PLAN_PHASE_FWD) : h[2].bytes_fwd));
  CHECK(c);
  if (n_ce) at(b, c)->launches = (uint16_t)n_ce;
  /* max, target logit and sum of exponentials per token, fp32: one all-reduce of the three, or
   * three of one each as the unfused path runs them (plan_loss.c), one after the other */
  int n_ar = n_ce ? 3 : 1;
  for (int i = 0; p->tp > 1 && i < n_ar; i++) {
    int32_t r = plain_coll(b, PLAN_STREAM_TP, PLAN_GROUP_TP, PLAN_COLL_ALLREDUCE, PLAN_TRAFFIC_TP_FWD,
                           PLAN_PHASE_FWD, PLAN_MOP_LOSS, chunk, 3.0 * 4.0 * b->tokens / n_ar, c);
    CHECK(r);
    at(b, r)->micro = micro;
    wait_for(b, r);
    c = r;
  }
  return 0;
}

static int loss_backward(builder *b, int micro, int chunk) {
  const plan *p = b->p;
  const model_op *h = b->head;
  const plan_ce_kernel *ce;
  int n_ce = plan_ce_kernels(p, PLAN_PHASE_BWD, &ce);
  int32_t d = compute(b, PLAN_PHASE_BWD, PLAN_MOP_LOSS, PLAN_PART_DGRAD, -1, micro, chunk,
                      h[2].flops_bwd + h[1].flops_bwd / 2,
                      (n_ce ? plan_ce_unfused_bytes(p, PLAN_PHASE_BWD) : h[2].bytes_bwd) + h[1].bytes_bwd / 2);
  CHECK(d);
  if (n_ce) at(b, d)->launches = (uint16_t)n_ce;
  int32_t reduce = -1;
  if (p->tp > 1)
    CHECK(reduce = tp_coll(b, p->sequence_parallel ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE, PLAN_PHASE_BWD,
                           0, PLAN_MOP_LOSS, -1, micro, chunk, b->full_bytes, d));
  CHECK(compute(b, PLAN_PHASE_BWD, PLAN_MOP_LOSS, PLAN_PART_WGRAD, -1, micro, chunk, h[1].flops_bwd / 2,
                h[1].bytes_bwd / 2));
  wait_for(b, reduce);
  return compute(b, PLAN_PHASE_BWD, PLAN_MOP_FINAL_NORM, PLAN_PART_WHOLE, -1, micro, chunk, h[0].flops_bwd,
                 h[0].bytes_bwd) < 0
             ? -1
             : 0;
}

/* ---- data-parallel sharding (plan_program_zero.c describes the units and buckets) ---- */

/* overlap_grad_reduce false: the op just pushed (the last one) is taken out
 * of the program and kept, to be issued after the whole backward. */
static int defer_op(builder *b, int32_t i) {
  if (b->n_deferred == b->cap_deferred) {
    int cap = b->cap_deferred ? 2 * b->cap_deferred : 64;
    plan_op *d = realloc(b->deferred, (size_t)cap * sizeof *d);
    if (!d) return -1;
    b->deferred = d, b->cap_deferred = cap;
  }
  b->deferred[b->n_deferred++] = *at(b, i);
  b->prog->n--;
  return 0;
}

/* A DP collective beside the compute: it does not become the step's last op. */
static int32_t dp_side(builder *b, plan_coll coll, plan_phase phase, int model_op, int chunk, double bytes,
                       int32_t dep) {
  int32_t keep = b->last_op;
  int32_t i = plain_coll(b, PLAN_STREAM_DP, PLAN_GROUP_DP, coll, PLAN_TRAFFIC_DP, phase, model_op, chunk, bytes, dep);
  b->last_op = keep;
  return i;
}

/* Bytes the distributed optimizer's all-gather of `params` parameters moves, `fp8` of them the FP8 GEMMs':
 * BF16, 2 bytes each, less 1 for each FP8 one gathered in FP8 (plan_fp8_param_gather_saved). */
static double param_gather_bytes(const plan *p, double params, double fp8) {
  return 2.0 * params - plan_fp8_param_gather_saved(p) * fp8;
}

/* overlap_param_gather: all-gather j of the forward order (bf16 parameters
 * of its bucket, FP8 for the FP8 GEMMs' under fp8_param_gather), dispatched
 * after the compute issued so far and after gather j - 1. */
static int32_t issue_param_gather(builder *b, int j) {
  int chunk = 0;
  while (chunk + 1 < b->p->vpp && b->pg_base[chunk + 1] <= j) chunk++;
  const plan_zero_chunk *z = &b->zc[chunk];
  int k = j - b->pg_base[chunk];
  double params = 0, fp8 = 0;
  for (int u = 0; u < z->n; u++)
    if (z->bucket[u] == k) {
      params += z->params[u];
      if (u >= z->emb && u < z->n - z->head) fp8 += b->layer_fp8_params; /* a layer */
    }
  int32_t g = dp_side(b, PLAN_COLL_ALLGATHER, PLAN_PHASE_FWD, PLAN_MOP_PARAM_GATHER, chunk,
                      param_gather_bytes(b->p, params, fp8), b->last_op);
  if (g < 0) return -1;
  if (j > 0) add_dep(at(b, g), b->pg_op[j - 1]);
  at(b, g)->tag = z->buckets - 1 - k; /* the bucket's index as the backward numbers it */
  b->pg_op[j] = g;
  return 0;
}

/* ZeRO-3: the gather of unit u's parameters for this step (bf16, the whole
 * unit as the gathered size). */
static int issue_unit_gather(builder *b, int chunk, int u, int micro, int bwd) {
  const plan_zero_chunk *z = &b->zc[chunk];
  int32_t g = dp_side(b, PLAN_COLL_ALLGATHER, bwd ? PLAN_PHASE_BWD : PLAN_PHASE_FWD, PLAN_MOP_PARAM_GATHER, chunk,
                      2.0 * z->params[u], b->last_op);
  if (g < 0) return -1;
  at(b, g)->micro = micro;
  at(b, g)->layer = u >= z->emb && u < z->n - z->head ? z->first_layer + u - z->emb : -1;
  at(b, g)->tag = u;
  b->z3_op[u] = g;
  return 0;
}

/* Before the compute of unit u of a step (forward: units in order; backward:
 * in reverse): ZeRO-3 issues the gathers up to prefetch units ahead and
 * waits for u's; overlap_param_gather waits, at the bucket's first forward,
 * for its gather and dispatches the next (Megatron-Core r0.8: the first
 * bucket's all-gather is dispatched by the optimizer's zero_grad before the
 * forward, each next one by the forward pre-hook of the bucket before it,
 * megatron/core/optimizer/distrib_optimizer.py). */
static int sharding_before_unit(builder *b, int chunk, int u, int micro, int bwd) {
  const plan *p = b->p;
  if (plan_dp_shards(p) < 2 || (p->zero_stage < 3 && (!p->overlap_param_gather || bwd))) return 0;
  const plan_zero_chunk *z = &b->zc[chunk];
  if (p->zero_stage == 3) {
    int q = bwd ? z->n - 1 - u : u; /* position in the step */
    if (q == 0)
      for (int x = 0; x < z->n; x++) b->z3_op[x] = -1;
    for (int ahead = q; ahead <= q + p->zero3_prefetch && ahead < z->n; ahead++) {
      int w = bwd ? z->n - 1 - ahead : ahead;
      if (b->z3_op[w] < 0) CHECK(issue_unit_gather(b, chunk, w, micro, bwd));
    }
    wait_for(b, b->z3_op[u]);
    return 0;
  }
  int j = b->pg_base[chunk] + z->bucket[u];
  if (b->pg_waited[j]) return 0;
  if (b->pg_op[j] < 0) CHECK(issue_param_gather(b, j));
  if (j + 1 < b->pg_total && b->pg_op[j + 1] < 0) CHECK(issue_param_gather(b, j + 1));
  wait_for(b, b->pg_op[j]);
  b->pg_waited[j] = 1;
  return 0;
}

/* ZeRO-3, after unit u's backward: the reduce-scatter of its gradients. */
static int sharding_after_unit(builder *b, int chunk, int u, int micro) {
  const plan *p = b->p;
  if (p->zero_stage != 3 || plan_dp_shards(p) < 2) return 0;
  const plan_zero_chunk *z = &b->zc[chunk];
  const int gb = plan_grad_bytes(p);
  double bytes = gb * z->params[u], wire = bytes;
  plan_codec codec = {.kind = PLAN_CODEC_NONE};
  const plan_codec *pc = &p->codec[PLAN_TRAFFIC_DP];
  if (plan_codec_has_taco(pc->kind) && bytes >= p->codec_min_bytes) {
    codec = (plan_codec){.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
    wire = plan_codec_wire_bytes(&codec, bytes, gb);
  }
  int32_t keep = b->last_op;
  int layer = u >= z->emb && u < z->n - z->head ? z->first_layer + u - z->emb : -1;
  int32_t i = collective(b, PLAN_STREAM_DP, PLAN_GROUP_DP, PLAN_COLL_REDUCESCATTER, PLAN_TRAFFIC_DP, PLAN_PHASE_BWD,
                         PLAN_MOP_GRAD_BUCKET, layer, micro, chunk, bytes, wire, codec, keep);
  CHECK(i);
  at(b, i)->tag = u;
  at(b, i)->elem_bytes = (uint8_t)(gb == 4 ? 0 : gb);
  b->last_op = keep;
  return 0;
}

/* ---- data-parallel gradient buckets ---- */

static int flush_bucket(builder *b, int chunk) {
  const plan *p = b->p;
  if (b->bucket_params <= 0 || plan_dp_shards(p) < 2) {
    b->bucket_params = b->bucket_fp8_params = 0;
    return 0;
  }
  if (b->bucket_count == b->bucket_cap) {
    int cap = b->bucket_cap ? 2 * b->bucket_cap : 64;
    double *s = realloc(b->bucket_sizes, (size_t)cap * sizeof *s);
    if (!s) return -1;
    b->bucket_sizes = s;
    b->bucket_cap = cap;
  }
  const int gb = plan_grad_bytes(p);
  double bytes = gb * b->bucket_params;
  plan_codec codec = {.kind = PLAN_CODEC_NONE};
  double wire = bytes;
  const plan_codec *pc = &p->codec[PLAN_TRAFFIC_DP];
  if (plan_codec_has_taco(pc->kind) && bytes >= p->codec_min_bytes) {
    codec = (plan_codec){.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
    wire = plan_codec_wire_bytes(&codec, bytes, gb);
  }
  int32_t last_compute = b->last_op;
  int32_t i = collective(b, PLAN_STREAM_DP, PLAN_GROUP_DP, p->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE,
                         PLAN_TRAFFIC_DP, PLAN_PHASE_BWD, PLAN_MOP_GRAD_BUCKET, b->bucket_layer, -1, chunk, bytes,
                         wire, codec, last_compute);
  CHECK(i);
  at(b, i)->tag = b->bucket_count;
  at(b, i)->elem_bytes = (uint8_t)(gb == 4 ? 0 : gb); /* 0: the DP class's fp32 */
  if (p->overlap_grad_reduce_off && defer_op(b, i)) return -1; /* issued after the backward instead */
  if (b->record) b->bucket_sizes[b->bucket_count++] = param_gather_bytes(p, b->bucket_params, b->bucket_fp8_params);
  b->bucket_params = b->bucket_fp8_params = 0;
  b->last_op = last_compute; /* a bucket does not end the step */
  return 0;
}

/* Parameters whose gradients just became final join the open bucket. */
static int bucket_add(builder *b, double params, int layer, int chunk) {
  b->bucket_params += params;
  b->bucket_layer = layer;
  if (plan_grad_bytes(b->p) * b->bucket_params >= b->p->dp_bucket_bytes) return flush_bucket(b, chunk);
  return 0;
}

/* ---- pipeline messages ---- */

static int msg_cmp(const void *x, const void *y) {
  const pp_msg *a = x, *c = y;
  if (a->key != c->key) return a->key < c->key ? -1 : 1;
  return (a->tag > c->tag) - (a->tag < c->tag);
}

static int32_t msg_tag(const builder *b, int micro, int lower_v, int dir) {
  return (int32_t)(((int64_t)micro * b->V + lower_v) * 2 + dir);
}

static int peer_of(const builder *b, int v) {
  plan_coord c = b->coord;
  c.pp = v % b->p->pp;
  return plan_rank_of(b->p, c);
}

static size_t cell(const builder *b, int micro, int v, int dir) { return ((size_t)micro * b->V + v) * 2 + dir; }

static int build_messages(builder *b, const plan_step *steps, int n) {
  b->msgs = malloc((size_t)2 * n * sizeof *b->msgs);
  if (!b->msgs) return -1;
  const int64_t *F = b->ideal.fwd_finish, *B = b->ideal.bwd_finish;
  for (int k = 0; k < n; k++) {
    int micro = steps[k].micro, chunk = steps[k].chunk, v = plan_virtual_stage(b->p, b->stage, chunk);
    size_t c = (size_t)micro * b->V + v;
    pp_msg *x;
    if (!steps[k].backward) {
      if (v > 0) {
        x = &b->msgs[b->n_msgs++];
        *x = (pp_msg){F[c - 1], msg_tag(b, micro, v - 1, 0), micro, (int16_t)chunk, 0, 0, peer_of(b, v - 1)};
      }
      if (v < b->V - 1) {
        x = &b->msgs[b->n_msgs++];
        *x = (pp_msg){F[c], msg_tag(b, micro, v, 0), micro, (int16_t)chunk, 1, 0, peer_of(b, v + 1)};
      }
    } else {
      if (v < b->V - 1) {
        x = &b->msgs[b->n_msgs++];
        *x = (pp_msg){B[c + 1], msg_tag(b, micro, v, 1), micro, (int16_t)chunk, 0, 1, peer_of(b, v + 1)};
      }
      if (v > 0) {
        x = &b->msgs[b->n_msgs++];
        *x = (pp_msg){B[c], msg_tag(b, micro, v - 1, 1), micro, (int16_t)chunk, 1, 1, peer_of(b, v - 1)};
      }
    }
  }
  qsort(b->msgs, (size_t)b->n_msgs, sizeof *b->msgs, msg_cmp);
  return 0;
}

/* Emits the PP ops whose key is at most `until` (INT64_MAX: all). */
static int flush_messages(builder *b, int64_t until) {
  const plan *p = b->p;
  while (b->next_msg < b->n_msgs && b->msgs[b->next_msg].key <= until) {
    const pp_msg *x = &b->msgs[b->next_msg++];
    int v = plan_virtual_stage(p, b->stage, x->chunk);
    int32_t i = push(b);
    CHECK(i);
    plan_op *op = at(b, i);
    op->kind = x->is_send ? PLAN_OP_SEND : PLAN_OP_RECV;
    op->stream = PLAN_STREAM_PP;
    op->phase = x->dir ? PLAN_PHASE_BWD : PLAN_PHASE_FWD;
    op->traffic = PLAN_TRAFFIC_PP;
    op->group = PLAN_GROUP_PP;
    op->model_op = PLAN_MOP_PP_ACTIVATION;
    op->micro = x->micro;
    op->chunk = x->chunk;
    op->peer = x->peer;
    op->tag = x->tag;
    op->bytes = op->wire_bytes = b->msg_bytes;
    const plan_codec *pc = &p->codec[PLAN_TRAFFIC_PP];
    if (plan_codec_has_taco(pc->kind) && b->msg_bytes >= p->codec_min_bytes) {
      op->codec = (plan_codec){.kind = PLAN_CODEC_TACO, .group = pc->group, .fp8 = pc->fp8};
      op->wire_bytes = plan_codec_wire_bytes(&op->codec, b->msg_bytes, 2);
    }
    if (x->is_send) {
      int32_t producer = b->step_last[cell(b, x->micro, v, x->dir)];
      if (producer < 0) return ts_fail_sys(b->e, "plan: send before its producer (internal error)");
      add_dep(op, producer);
    } else {
      b->recv_op[cell(b, x->micro, v, x->dir)] = i;
    }
  }
  return 0;
}

/* The consumer of a PP message waits for its recv. Under pp_scatter_gather
 * the recv holds this rank's 1/tp slice: the TP group all-gathers the whole
 * tensor first (nccl-tests size: the gathered output), issued after the recv
 * and the previous op, as Megatron-LM gathers right after the receive in the
 * step that uses it. The consumer waits for the recv, then for the gather (in
 * that order: a wait is charged to the op waited on, so the time until the
 * slice arrives stays bubble and PP transfer, only the gather is TP). It is uncompressed
 * NVLink traffic of the message's direction (tp_fwd: activations, tp_bwd:
 * gradients): codec.pp encodes the slice on the inter-stage link, and the
 * codec.tp_* policies describe the layers' own TP collectives, not this. */
static int wait_for_message(builder *b, int micro, int v, int dir, int chunk) {
  int32_t recv = b->recv_op[cell(b, micro, v, dir)];
  if (!b->p->pp_scatter_gather) {
    wait_for(b, recv);
    return 0;
  }
  int32_t prev = b->last_op;
  int32_t ag = plain_coll(b, PLAN_STREAM_TP, PLAN_GROUP_TP, PLAN_COLL_ALLGATHER,
                          dir ? PLAN_TRAFFIC_TP_BWD : PLAN_TRAFFIC_TP_FWD, dir ? PLAN_PHASE_BWD : PLAN_PHASE_FWD,
                          PLAN_MOP_PP_ACTIVATION, chunk, b->send_bytes, recv);
  CHECK(ag);
  at(b, ag)->micro = micro;
  add_dep(at(b, ag), prev);
  b->wait_first = recv;
  wait_for(b, ag);
  return 0;
}

/* ---- steps ---- */

static int run_step(builder *b, plan_step st, bool last_backward_of_chunk) {
  const plan *p = b->p;
  int micro = st.micro, chunk = st.chunk, v = plan_virtual_stage(p, b->stage, chunk);
  size_t c = (size_t)micro * b->V + v;
  int64_t finish = st.backward ? b->ideal.bwd_finish[c] : b->ideal.fwd_finish[c];
  CHECK(flush_messages(b, finish - plan_ideal_step_cost(st.backward)));
  int first_layer = plan_chunk_first_layer(p, b->stage, chunk), lpc = plan_vchunk_layers(p, b->stage, chunk);
  const int emb = v == 0, nu = emb + lpc + (v == b->V - 1); /* units (plan_zero_chunk) */
  /* buckets reduced in this backward: the last micro-batch's; every one's under ZeRO-2; none under ZeRO-3 */
  const bool reduce = p->zero_stage == 3 ? false : last_backward_of_chunk || p->zero_stage == 2;
  b->record = last_backward_of_chunk;
  if (!st.backward) {
    if (v > 0) CHECK(wait_for_message(b, micro, v, 0, chunk));
    if (v == 0) CHECK(sharding_before_unit(b, chunk, 0, micro, 0));
    if (v == 0) CHECK(embedding_forward(b, micro));
    for (int l = 0; l < lpc; l++) {
      CHECK(sharding_before_unit(b, chunk, emb + l, micro, 0));
      CHECK(layer_forward(b, first_layer + l, micro, chunk, PLAN_PHASE_FWD));
    }
    if (v == b->V - 1) CHECK(sharding_before_unit(b, chunk, nu - 1, micro, 0));
    if (v == b->V - 1) CHECK(loss_forward(b, micro, chunk));
  } else {
    if (v < b->V - 1) CHECK(wait_for_message(b, micro, v, 1, chunk));
    if (v == b->V - 1) {
      CHECK(sharding_before_unit(b, chunk, nu - 1, micro, 1));
      CHECK(loss_backward(b, micro, chunk));
      CHECK(sharding_after_unit(b, chunk, nu - 1, micro));
      if (reduce) {
        double head = 0;
        for (int i = 0; i < b->n_head; i++) head += b->head[i].params;
        if (p->model.tied_embeddings && p->pp > 1)
          head += (double)model_vocab_per_gpu(&p->model, p->tp) * p->model.hidden;
        CHECK(bucket_add(b, head, -1, chunk));
      }
    }
    for (int l = lpc - 1; l >= 0; l--) {
      CHECK(sharding_before_unit(b, chunk, emb + l, micro, 1));
      CHECK(layer_backward(b, first_layer + l, micro, chunk));
      CHECK(sharding_after_unit(b, chunk, emb + l, micro));
      /* MoE models (ZeRO-2/3 refused there): expert gradients over expert-DP */
      if (reduce && model_is_moe(&p->model)) CHECK(plan_moe_layer_grads(b, first_layer + l, chunk));
      else if (reduce) {
        b->bucket_fp8_params += b->layer_fp8_params;
        CHECK(bucket_add(b, b->layer_params, first_layer + l, chunk));
      }
    }
    if (v == 0) {
      CHECK(sharding_before_unit(b, chunk, 0, micro, 1));
      CHECK(embedding_backward(b, micro));
      CHECK(sharding_after_unit(b, chunk, 0, micro));
      if (reduce) {
        double emb_params = 0;
        for (int i = 0; i < b->n_emb; i++) emb_params += b->emb[i].params;
        CHECK(bucket_add(b, emb_params, -1, chunk));
      }
    }
    if (reduce) CHECK(flush_bucket(b, chunk));
  }
  b->step_last[cell(b, micro, v, st.backward)] = b->last_op;
  return 0;
}

/* After the last backward: norm-gradient all-reduces (SP, CAAT-Net), the
 * tied-embedding all-reduce, the optimizer, ZeRO-1's parameter all-gathers. */
static int finish_iteration(builder *b) {
  const plan *p = b->p;
  int32_t last_compute = b->last_op, last_tp = -1, last_dp = -1;
  /* overlap_grad_reduce false: every bucket now, after the whole backward */
  for (int k = 0; k < b->n_deferred; k++) {
    int32_t i = push(b);
    CHECK(i);
    *at(b, i) = b->deferred[k];
    for (int d = 0; d < PLAN_MAX_DEPS; d++) at(b, i)->dep[d] = -1;
    add_dep(at(b, i), last_compute);
  }
  for (int i = b->prog->n - 1; i >= 0; i--) {
    const plan_op *op = &b->prog->ops[i];
    if (op->stream == PLAN_STREAM_TP && last_tp < 0) last_tp = i;
    if (op->stream == PLAN_STREAM_DP && last_dp < 0) last_dp = i;
  }
  bool caat = plan_codec_has_caat(p->codec[PLAN_TRAFFIC_TP_FWD].kind);
  /* the norms' weight gradients, partial on each TP rank: the layers' and the final norm's under SP (or
   * CAAT-Net), and the QK norm's always (each rank normed its own heads), as Megatron-LM's
   * _allreduce_layernorm_grads reduces them (its sequence_parallel or qk_layernorm condition) */
  const bool layer_norms = p->sequence_parallel || caat;
  if (p->tp > 1 && (layer_norms || p->model.qk_norm)) {
    const double ln = layer_norms ? plan_norm_params_per_layer(p) : 0.0;
    for (int chunk = p->vpp - 1; chunk >= 0; chunk--) {
      double norms = (ln + plan_qk_norm_params_per_layer(p)) * plan_vchunk_layers(p, b->stage, chunk);
      if (plan_virtual_stage(p, b->stage, chunk) == b->V - 1) norms += ln / 2;
      CHECK(last_tp = plain_coll(b, PLAN_STREAM_TP, PLAN_GROUP_TP, PLAN_COLL_ALLREDUCE, PLAN_TRAFFIC_TP_BWD,
                                 PLAN_PHASE_BWD, PLAN_MOP_NORM_GRADS, chunk, plan_grad_bytes(p) * norms,
                                 last_compute));
    }
  }
  bool holds_embedding = b->stage == 0 || b->stage == p->pp - 1;
  if (p->pp > 1 && p->model.tied_embeddings && holds_embedding) {
    const int gb = plan_grad_bytes(p);
    double bytes = gb * (double)model_vocab_per_gpu(&p->model, p->tp) * p->model.hidden;
    int chunk = b->stage == 0 ? 0 : p->vpp - 1;
    CHECK(last_dp = plain_coll(b, PLAN_STREAM_DP, PLAN_GROUP_EMBEDDING, PLAN_COLL_ALLREDUCE, PLAN_TRAFFIC_DP,
                               PLAN_PHASE_BWD, PLAN_MOP_EMBEDDING_GRADS, chunk, bytes, last_compute));
    at(b, last_dp)->elem_bytes = (uint8_t)(gb == 4 ? 0 : gb);
  }
  double params = model_is_moe(&p->model) ? plan_optimizer_params_of_stage(p, b->stage)
                                           : plan_params_of_stage(p, b->stage) / (p->zero1 ? plan_dp_shards(p) : 1);
  b->wait[PLAN_STREAM_TP] = last_tp;
  b->wait[PLAN_STREAM_DP] = last_dp;
  /* AdamW: reads gradient, master weight, m, v (16 B), writes master, m, v
   * and the bf16 weight (14 B); about 10 FLOPs per parameter. */
  int32_t opt = compute(b, PLAN_PHASE_OPTIMIZER, PLAN_MOP_OPTIMIZER, PLAN_PART_WHOLE, -1, -1, 0, 10.0 * params,
                        30.0 * params);
  CHECK(opt);
  /* the parameter all-gathers after the step; with overlap_param_gather they run beside the next forward (at
   * this program's start), and ZeRO-3 gathers each layer where it is used */
  if (p->zero1 && plan_dp_shards(p) > 1 && !p->overlap_param_gather && p->zero_stage < 3)
    for (int k = 0; k < b->bucket_count; k++) {
      int32_t g = plain_coll(b, PLAN_STREAM_DP, PLAN_GROUP_DP, PLAN_COLL_ALLGATHER, PLAN_TRAFFIC_DP,
                             PLAN_PHASE_OPTIMIZER, PLAN_MOP_PARAM_GATHER, 0, b->bucket_sizes[k], opt);
      CHECK(g);
      at(b, g)->tag = k;
    }
  if (model_is_moe(&p->model)) CHECK(plan_moe_after_optimizer(b, opt));
  return 0;
}

/* ---- setup ---- */

static int setup(builder *b, const plan *p, int rank, plan_program *prog, ts_err *e) {
  memset(b, 0, sizeof *b);
  b->p = p;
  b->prog = prog;
  b->e = e;
  b->coord = plan_coord_of(p, rank);
  b->stage = b->coord.pp;
  b->V = p->pp * p->vpp;
  b->m = plan_micro_batches(p);
  b->lpc = plan_chunk_layers(p, b->stage);
  b->last_op = -1;
  for (int s = 0; s < PLAN_STREAM_COUNT; s++) b->wait[s] = -1;
  b->wait_first = -1;
  model_shard s = plan_shard(p);
  if ((b->n_ops = model_layer_ops(&p->model, &s, b->ops, MODEL_MAX_LAYER_OPS, e)) < 0) return -1;
  if ((b->n_emb = model_embedding_ops(&p->model, &s, b->emb, MODEL_MAX_LAYER_OPS, e)) < 0) return -1;
  if ((b->n_head = model_output_ops(&p->model, &s, b->head, MODEL_MAX_LAYER_OPS, e)) < 0) return -1;
  if (b->n_head != 3) return ts_fail_sys(e, "plan: model_output_ops returned %d ops, expected 3", b->n_head);
  /* A block is the ops between two row-parallel GEMMs; its column-parallel
   * GEMMs share one input (gathered once) and one input gradient (reduced once). */
  int block_first = -1;
  for (int i = 0; i < b->n_ops; i++) {
    if (b->ops[i].parallel == MODEL_PAR_COLUMN) {
      if (block_first < 0) b->first_col[i] = true, block_first = i;
      bool later = false;
      for (int j = i + 1; j < b->n_ops && b->ops[j].parallel != MODEL_PAR_ROW; j++)
        if (b->ops[j].parallel == MODEL_PAR_COLUMN) later = true;
      b->last_col[i] = !later;
    } else if (b->ops[i].parallel == MODEL_PAR_ROW) {
      block_first = -1;
    }
    b->layer_params += b->ops[i].params;
  }
  b->layer_fp8_params = plan_fp8_gemm_weights(p, b->ops, b->n_ops);
  b->tokens = (double)p->micro_batch * plan_local_seq(p); /* this CP rank's tokens */
  b->full_bytes = 2.0 * b->tokens * p->model.hidden;
  b->send_bytes = model_activation_tensor_bytes(&p->model, &s);
  b->msg_bytes = p->pp_scatter_gather ? b->send_bytes / p->tp : b->send_bytes;
  if (plan_ideal_build(p, &b->ideal, e)) return -1;
  if (p->zero1 && plan_dp_shards(p) > 1 && (p->zero_stage == 3 || p->overlap_param_gather)) {
    b->zc = malloc((size_t)p->vpp * sizeof *b->zc);
    b->pg_base = malloc((size_t)p->vpp * sizeof *b->pg_base);
    if (!b->zc || !b->pg_base) return ts_fail_sys(e, "plan: out of memory");
    for (int c = 0; c < p->vpp; c++) {
      if (plan_zero_chunk_units(p, b->stage, c, &b->zc[c], e)) return -1;
      b->pg_base[c] = b->pg_total;
      b->pg_total += b->zc[c].buckets;
    }
    b->pg_op = malloc((size_t)(b->pg_total + 1) * sizeof *b->pg_op);
    b->pg_waited = calloc((size_t)b->pg_total + 1, 1);
    if (!b->pg_op || !b->pg_waited) return ts_fail_sys(e, "plan: out of memory");
    for (int j = 0; j <= b->pg_total; j++) b->pg_op[j] = -1;
  }
  size_t cells = (size_t)b->m * b->V * 2;
  b->recv_op = malloc(cells * sizeof *b->recv_op);
  b->step_last = malloc(cells * sizeof *b->step_last);
  if (!b->recv_op || !b->step_last) return ts_fail_sys(e, "plan: out of memory");
  for (size_t i = 0; i < cells; i++) b->recv_op[i] = b->step_last[i] = -1;
  return 0;
}

static void teardown(builder *b) {
  plan_ideal_free(&b->ideal);
  free(b->msgs);
  free(b->recv_op);
  free(b->step_last);
  free(b->bucket_sizes);
  free(b->zc), free(b->pg_base), free(b->pg_op), free(b->pg_waited), free(b->deferred);
}

int plan_build_program(const plan *p, int rank, plan_program *prog, ts_err *e) {
  memset(prog, 0, sizeof *prog);
  prog->rank = rank;
  e->msg[0] = '\0';
  if (rank < 0 || rank >= plan_world_size(p))
    return ts_fail(e, p->path, "rank", "%d is outside 0..%d", rank, plan_world_size(p) - 1);
  builder b;
  plan_step *steps = NULL;
  int rc = -1;
  if (setup(&b, p, rank, prog, e)) goto out;
  int n = plan_schedule_length(p);
  steps = malloc((size_t)n * sizeof *steps);
  if (!steps || plan_pipeline_schedule(p, b.stage, steps, n) != n) {
    ts_fail_sys(e, "plan: cannot build the schedule of stage %d", b.stage);
    goto out;
  }
  if (build_messages(&b, steps, n)) {
    ts_fail_sys(e, "plan: out of memory");
    goto out;
  }
  /* Reserve roughly what the program needs, so it grows at most once or twice. */
  size_t guess = (size_t)n * (b.lpc * (2 * b.n_ops + 4) + 12) + 64;
  if (guess < (1u << 26)) {
    plan_op *ops = malloc(guess * sizeof *ops);
    if (ops) prog->ops = ops, prog->cap = (int)guess;
  }
  int last_b[1024];
  for (int c = 0; c < p->vpp && c < 1024; c++) last_b[c] = -1;
  for (int k = 0; k < n; k++)
    if (steps[k].backward) last_b[steps[k].chunk] = k;
  for (int k = 0; k < n; k++) {
    if (run_step(&b, steps[k], steps[k].backward && last_b[steps[k].chunk] == k)) {
      if (!e->msg[0]) ts_fail_sys(e, "plan: out of memory building the program of rank %d", rank);
      goto out;
    }
  }
  if (flush_messages(&b, INT64_MAX) || finish_iteration(&b)) {
    ts_fail_sys(e, "plan: out of memory building the program of rank %d", rank);
    goto out;
  }
  rc = 0;
out:
  free(steps);
  teardown(&b);
  if (rc) plan_program_free(prog);
  return rc;
}

void plan_program_free(plan_program *prog) {
  free(prog->ops);
  prog->ops = NULL;
  prog->n = prog->cap = 0;
}

/* ---- emitters for plan_program_moe.c (plan_program_moe.h) ---- */

const plan *plan_b_plan(const builder *b) { return b->p; }
const model_op *plan_b_ops(const builder *b, int *n) {
  *n = b->n_ops;
  return b->ops;
}
int plan_b_stage(const builder *b) { return b->stage; }
plan_op *plan_b_op(builder *b, int32_t i) { return at(b, i); }
int32_t plan_b_last_op(const builder *b) { return b->last_op; }
void plan_b_set_last_op(builder *b, int32_t i) { b->last_op = i; }
void plan_b_wait_for(builder *b, int32_t i) { wait_for(b, i); }
int plan_b_bucket_add(builder *b, double params, int layer, int chunk) { return bucket_add(b, params, layer, chunk); }
int32_t plan_b_compute(builder *b, plan_phase phase, int model_op, plan_part part, int layer, int micro, int chunk,
                       double flops, double bytes) {
  return compute(b, phase, model_op, part, layer, micro, chunk, flops, bytes);
}
int32_t plan_b_collective(builder *b, plan_stream stream, plan_group_kind group, plan_coll coll, plan_traffic t,
                          plan_phase phase, int model_op, int layer, int micro, int chunk, double bytes, double wire,
                          plan_codec codec, int32_t dep) {
  return collective(b, stream, group, coll, t, phase, model_op, layer, micro, chunk, bytes, wire, codec, dep);
}

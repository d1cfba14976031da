/* exec_step.c — running a program op: compute ops by model_op, phase and
 * part (exec_layer.c), TP and DP collectives by group and codec, the walker
 * mode for plan_build_program() programs (DP buckets by completed layer
 * groups), and the built-in single-stage program. */
#include "exec_model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_kernels.h"
#include "exec_mla.h"
#include "exec_moe.h"
#include "ops_variants.h"
#include "model.h"
#include "rt_ops.h"

/* ---- the walk ---- */

static int layer_op_of(const exec_model *m, int model_op) {
  if (model_op < 0) return -1; /* not a layer op (an absent one, such as rope, is indexed -1) */
  for (int i = 0; i < EXEC_OP_COUNT; i++)
    if (m->layer_op_index[i] == model_op) return i;
  return -1;
}

/* Gives a compressed call a NaN/Inf counter of its own, named by the op that
 * makes it (exec_model_check_finite reads them); past EXEC_NF_CALLS the
 * call counts in its team's counter. */
static coll_opts nf_attach(exec_model *m, coll_opts o) {
  if (!m->nf_calls || m->nf_used >= EXEC_NF_CALLS || o.codec != COLL_CODEC_TACO) return o;
  m->nf_ops[m->nf_used] = m->run_op;
  o.nonfinite = m->nf_calls + m->nf_used++;
  return o;
}

/* A TP all-reduce of `rows` rows of a [tokens x hidden] bf16 activation (or
 * its gradient) starting at buf, in place, with the op's codec. */
static int tp_allreduce_rows(exec_model *m, void *buf, size_t rows, const plan_codec *c, int backward, ts_err *e) {
  if (!m->tp_comm) return 0;
  const size_t cols = (size_t)m->cfg.hidden;
  /* the caller's codec (exec_model.h); the embedding's all-reduce stays plain */
  if (m->tp_allreduce_hook && buf != exec_acts(m, 0)->x_in)
    return m->tp_allreduce_hook(m->tp_allreduce_hook_ctx, buf, rows, cols, backward, m->tp_stream, e);
  if (c->kind == PLAN_CODEC_NONE) {
    EX_NCCL(ncclAllReduce(buf, buf, rows * cols, ncclBfloat16, ncclSum, m->tp_comm, m->tp_stream));
    return 0;
  }
  if (!m->team_ready) return ts_fail_sys(e, "exec: a compressed collective before exec_model_set_codecs");
  coll_opts o = nf_attach(m, exec_codec_opts(c));
  const void *in = buf;
  void *out = buf;
  if (c->kind != PLAN_CODEC_TACO && backward && m->caat_f32) {
    /* CAAT-Net backward: the shared channels of the input gradient travel in FP32 */
    const long long n = (long long)(rows * cols);
    EX_TRY(exec_bf16_to_f32(buf, m->caat_f32, n, m->tp_stream, e));
    o.dtype = TACO_DTYPE_FP32;
    in = m->caat_f32, out = m->caat_f32;
    if (coll_caat_allreduce(&m->team, &in, &out, rows, cols, c->p, &o))
      return ts_fail_sys(e, "exec: CAAT-Net FP32 all-reduce: %s", coll_last_error());
    return exec_f32_to_bf16(m->caat_f32, buf, n, m->tp_stream, e);
  }
  int rc = (c->kind == PLAN_CODEC_TACO) ? coll_allreduce(&m->team, &in, &out, rows * cols, &o)
                                        : coll_caat_allreduce(&m->team, &in, &out, rows, cols, c->p, &o);
  if (rc) return ts_fail_sys(e, "exec: compressed all-reduce: %s", coll_last_error());
  return 0;
}

static int tp_allreduce_coded(exec_model *m, void *buf, const plan_codec *c, int backward, ts_err *e) {
  return tp_allreduce_rows(m, buf, (size_t)m->tokens, c, backward, e);
}

/* tp_overlap_chunks: the token rows [*row0, *row0 + *rows) a split op covers. */
static int op_rows(const exec_model *m, const plan_op *op, long long *row0, long long *rows, ts_err *e) {
  const long long k = op->row_chunks;
  if (op->row_chunk >= k || m->tokens % k)
    return ts_fail(e, NULL, "layout.tp_overlap_chunks", "row chunk %d of %lld does not split %lld tokens evenly",
                   op->row_chunk, k, m->tokens);
  *rows = m->tokens / k;
  *row0 = op->row_chunk * *rows;
  return 0;
}

/* --variant tp-overlap-sm-margin=N (experimental, default 0): the chunk GEMMs that
 * run beside the previous chunk's all-reduce (every chunk but the first) are
 * planned for the GPU's SMs less N, so that NCCL's blocks find SMs free
 * (cuBLASLt's Hopper kernels are persistent: a GEMM on all SMs holds them
 * until it ends). Returns the SM count to ask for, 0 for all. */
static int chunk_sms(void) {
  static int cached = -1;
  if (cached >= 0) return cached;
  cached = 0;
  int margin = atoi(ops_variant(OPS_V_TP_OVERLAP_SM_MARGIN)), dev = 0, sms = 0;
  if (margin > 0 && cudaGetDevice(&dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess && sms > margin)
    cached = sms - margin;
  return cached;
}

/* ---- walking plan programs ---- */

enum { GROUP_HEAD_OFFSET = 0, GROUP_EMBED_OFFSET = 1 }; /* after the layers */

/* Byte offset of row `row` of a [T x cols] bf16 buffer. */
static void *rows_at(void *buf, long long row, long long cols) { return (char *)buf + (size_t)(row * cols) * 2; }

int exec_model_enter_walker_mode(exec_model *m, ts_err *e) {
  m->walker_mode = 1;
  m->overlap_wgrad = 0; /* the program orders dgrad, all-reduce and wgrad itself */
  m->group_done = calloc((size_t)m->cfg.layers + 2, 1);
  m->group_reduced = calloc((size_t)m->cfg.layers + 2, 1);
  if (!m->group_done || !m->group_reduced) return ts_fail_sys(e, "exec: out of memory");
  if ((m->dp_comm || m->emb_comm) && !m->dp_stream)
    EX_CUDA(cudaStreamCreateWithFlags(&m->dp_stream, cudaStreamNonBlocking));
  return 0;
}

cudaStream_t exec_model_op_stream(const exec_model *m, const plan_op *op) {
  if ((op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) && m->pp_stream) return m->pp_stream;
  if (op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_TP && m->tp_stream) return m->tp_stream;
  if (op->kind == PLAN_OP_COLLECTIVE &&
      (op->group == PLAN_GROUP_DP || op->group == PLAN_GROUP_EMBEDDING || op->group == PLAN_GROUP_EDP) && m->dp_stream)
    return m->dp_stream;
  return m->stream;
}

/* A pipeline send/recv of one micro-batch's boundary activation (forward) or
 * its gradient (backward), on the PP stream; the program orders them so that
 * the blocking pairs meet (plan.h). */
static int run_send_recv(exec_model *m, const plan_op *op, ts_err *e) {
  if (!m->pp_comm) return ts_fail(e, NULL, "program", "a pipeline send/recv with PP = 1");
  const int send = op->kind == PLAN_OP_SEND, fwd = op->phase == PLAN_PHASE_FWD;
  /* forward: to the next stage / from the previous; backward: the other way */
  const int peer = exec_walk_pp_peer_stage(m->pp_rank, m->pp, op);
  if (op->chunk < 0 || op->chunk >= m->vpp) return ts_fail(e, NULL, "program", "a pipeline message of chunk %d", op->chunk);
  const int lo = m->chunk_lo[op->chunk], hi = m->chunk_hi[op->chunk]; /* this chunk's layers */
  if ((fwd == send && hi >= m->cfg.layers) || (fwd != send && lo == 0))
    return ts_fail(e, NULL, "program", "a pipeline message past the first/last virtual stage");
  void *buf;
  if (fwd && !send && m->bnd_x) buf = m->bnd_x[m->bslot * m->vpp + op->chunk]; /* (the slot may be another's still) */
  else if (fwd) buf = exec_acts(m, send ? hi : lo)->x_in;
  else buf = send ? m->pp_grad_out[m->slot * m->vpp + op->chunk] : m->pp_grad_in[m->slot * m->vpp + op->chunk];
  if (!buf) return ts_fail_sys(e, "exec: no pipeline buffer for this message (internal error)");
  /* under SP a stage boundary carries this rank's rows only (the residual stream is sharded) */
  const size_t count = (size_t)(m->sp_rows * m->cfg.hidden);
  buf = rows_at(buf, m->sp_row0, m->cfg.hidden);
  if (op->codec.kind != PLAN_CODEC_NONE) {
    /* TACO: the sender encodes and sends FP8 + scales, the receiver decodes (kernels/coll_taco.h) */
    if (!m->pp_team_ready) return ts_fail_sys(e, "exec: a compressed pipeline message before exec_model_prepare_codecs");
    coll_opts o = nf_attach(m, exec_codec_opts(&op->codec));
    const void *s = send ? buf : NULL;
    void *r = send ? NULL : buf;
    const int to = send ? peer : -1, from = send ? -1 : peer;
    if (coll_sendrecv(&m->pp_team, &s, &to, &r, &from, count, &o))
      return ts_fail_sys(e, "exec: compressed pipeline %s: %s", send ? "send" : "recv", coll_last_error());
    return 0;
  }
  if (send) EX_NCCL(ncclSend(buf, count, ncclBfloat16, peer, m->pp_comm, m->pp_stream));
  else EX_NCCL(ncclRecv(buf, count, ncclBfloat16, peer, m->pp_comm, m->pp_stream));
  return 0;
}

/* Marks the gradient groups a last-micro-batch backward op completes. */
static void note_group_done(exec_model *m, const plan_op *op, int lop) {
  if (!m->walker_mode || op->phase != PLAN_PHASE_BWD || op->micro != m->micros - 1) return;
  if (op->model_op == PLAN_MOP_FINAL_NORM) {
    m->group_done[m->cfg.layers + GROUP_HEAD_OFFSET] = 1;
    /* a last stage's tied word embedding is final after the logits wgrad: it
     * joins the head's bucket, so both stages reduce it over DP before the
     * first/last-stage all-reduce of the embedding group */
    if (m->pp_rank > 0) m->group_done[m->cfg.layers + GROUP_EMBED_OFFSET] = 1;
  }
  else if (op->model_op == PLAN_MOP_EMBEDDING) m->group_done[m->cfg.layers + GROUP_EMBED_OFFSET] = 1;
  else if (lop == EXEC_OP_LN1 && op->layer >= 0) m->group_done[op->layer] = 1;
}

/* True when the stage holds a tensor of group g. */
static int holds_group(const exec_model *m, int g) {
  for (int t = 0; t < m->ntensors; t++)
    if (exec_model_group_of_tensor(m, t) == g && exec_model_holds_tensor(m, t)) return 1;
  return 0;
}

/* One reduction of `count` FP32 gradients over DP, on the DP stream: in place
 * (all-reduce) or NCCL's in-place reduce-scatter from grad + in_off into this
 * rank's shard at grad + out_off; through NCCL, or TACO-encoded through the
 * DP team (kernels/coll_taco.h) when taco is set. */
static int dp_reduce_one(exec_model *m, const coll_opts *taco, int scatter, size_t in_off, size_t out_off,
                         size_t count, ts_err *e) {
  float *in = m->grad + in_off, *out = m->grad + out_off;
  if (taco) {
    const void *src = in;
    void *dst = out;
    if (scatter ? coll_reducescatter(&m->dp_team, &src, &dst, count, taco)
                : coll_allreduce(&m->dp_team, &src, &dst, count, taco))
      return ts_fail_sys(e, "exec: compressed DP %s: %s", scatter ? "reduce-scatter" : "all-reduce", coll_last_error());
    return 0;
  }
  if (scatter) EX_NCCL(ncclReduceScatter(in, out, count, ncclFloat, ncclSum, m->dp_comm, m->dp_stream));
  else EX_NCCL(ncclAllReduce(in, out, count, ncclFloat, ncclSum, m->dp_comm, m->dp_stream));
  return 0;
}

/* A DP bucket: all-reduce (sum) the gradients of every completed, not yet
 * reduced group, on the DP stream after everything enqueued on the compute
 * stream so far; under ZeRO-1 reduce-scatter each group (one contiguous,
 * DP-divisible range) so that this rank keeps its shard. With `all`, every
 * group that is not reduced yet (the optimizer's safety net). c: the bucket's
 * codec (TACO on the FP32 gradients, the plan's codec.dp), or NULL. NCCL's
 * calls go in one group; the compressed ones, which enqueue kernels and NCCL
 * calls of their own, one after another. */
/* EP > 1: the expert tensors hold this rank's experts only; their gradients
 * are reduced over expert-DP by the program's own ops (exec_moe_expert_grads;
 * none when ep = dp), never in the DP buckets. */
static int ep_local(const exec_model *m, int t) {
  const exec_tensor_kind k = m->tensors[t].kind;
  return m->ep > 1 && (k == EXEC_T_EXPERT_FC1 || k == EXEC_T_EXPERT_FC2);
}

static int dp_reduce_groups(exec_model *m, int all, const plan_codec *c, ts_err *e) {
  if (!m->dp_comm) return 0;
  const int G = m->cfg.layers + 2;
  int any = 0;
  for (int g = 0; g < G; g++) any |= (all || m->group_done[g]) && !m->group_reduced[g];
  if (!any) return 0;
  coll_opts o, *taco = NULL;
  if (c && c->kind == PLAN_CODEC_TACO) {
    if (!m->dp_team_ready) return ts_fail_sys(e, "exec: a compressed DP bucket before exec_model_prepare_codecs");
    o = nf_attach(m, exec_codec_opts(c));
    o.dtype = TACO_DTYPE_FP32;
    taco = &o;
  }
  EX_CUDA(cudaEventRecord(m->ev_ready, m->stream));
  EX_CUDA(cudaStreamWaitEvent(m->dp_stream, m->ev_ready, 0));
  if (!taco) EX_NCCL(ncclGroupStart());
  if (m->zero1) {
    for (int g = 0; g < G; g++) {
      if (!(all || m->group_done[g]) || m->group_reduced[g] || !holds_group(m, g)) continue;
      size_t lo, hi;
      exec_model_zero1_shard(m, g, &lo, &hi);
      EX_TRY(dp_reduce_one(m, taco, 1, m->group_lo[g], lo, hi - lo, e));
      /* an all-gather after the optimizer: that of this bucket, or the last one for the safety net */
      m->group_bucket[g] = all && m->bucket_next > 0 ? m->bucket_next - 1 : m->bucket_next;
    }
  } else {
    for (int t = 0; t < m->ntensors; t++) {
      int g = exec_model_group_of_tensor(m, t);
      if ((all || m->group_done[g]) && !m->group_reduced[g] && exec_model_holds_tensor(m, t) && !ep_local(m, t))
        EX_TRY(dp_reduce_one(m, taco, 0, m->tensors[t].offset, m->tensors[t].offset,
                             m->tensors[t].rows * m->tensors[t].cols, e));
    }
  }
  if (!taco) EX_NCCL(ncclGroupEnd());
  for (int g = 0; g < G; g++)
    if (all || m->group_done[g]) m->group_reduced[g] = 1;
  return 0;
}

/* ZeRO-1: the all-gather of the updated BF16 weights of the groups bucket k
 * reduced (each rank contributes its shard), on the DP stream. */
static int zero1_gather(exec_model *m, int k, ts_err *e) {
  if (!m->dp_comm || !m->zero1) return 0;
  EX_NCCL(ncclGroupStart());
  for (int g = 0; g < m->cfg.layers + 2; g++) {
    if (m->group_bucket[g] != k || !holds_group(m, g)) continue;
    size_t lo, hi;
    exec_model_zero1_shard(m, g, &lo, &hi);
    EX_NCCL(ncclAllGather((uint16_t *)m->w16 + lo, (uint16_t *)m->w16 + m->group_lo[g], hi - lo, ncclBfloat16,
                          m->dp_comm, m->dp_stream));
  }
  EX_NCCL(ncclGroupEnd());
  return 0;
}

/* ZeRO-1 with overlap_param_gather: the program gathers the updated weights
 * before the next step's forward, so the last step's are gathered here (all
 * groups, on the DP stream; the compute stream waits for them). */
int exec_model_zero1_gather_all(exec_model *m, ts_err *e) {
  if (!m->dp_comm || !m->zero1) return 0;
  EX_CUDA(cudaEventRecord(m->ev_ready, m->stream));
  EX_CUDA(cudaStreamWaitEvent(m->dp_stream, m->ev_ready, 0));
  EX_NCCL(ncclGroupStart());
  for (int g = 0; g < m->cfg.layers + 2; g++) {
    if (!holds_group(m, g)) continue;
    size_t lo, hi;
    exec_model_zero1_shard(m, g, &lo, &hi);
    EX_NCCL(ncclAllGather((uint16_t *)m->w16 + lo, (uint16_t *)m->w16 + m->group_lo[g], hi - lo, ncclBfloat16,
                          m->dp_comm, m->dp_stream));
  }
  EX_NCCL(ncclGroupEnd());
  EX_CUDA(cudaEventRecord(m->ev_done, m->dp_stream));
  EX_CUDA(cudaStreamWaitEvent(m->stream, m->ev_done, 0));
  return 0;
}

int exec_model_walker_finish(exec_model *m, ts_err *e) {
  /* the optimizer waits for every stream (and reduces any group no bucket took) */
  EX_TRY(dp_reduce_groups(m, 1, NULL, e)); /* the safety net: plain */
  cudaStream_t side[3] = {m->tp_stream, m->dp_stream, m->pp_stream};
  for (int i = 0; i < 3; i++)
    if (side[i]) {
      EX_CUDA(cudaEventRecord(m->ev_done, side[i]));
      EX_CUDA(cudaStreamWaitEvent(m->stream, m->ev_done, 0));
    }
  memset(m->group_done, 0, (size_t)m->cfg.layers + 2);
  memset(m->group_reduced, 0, (size_t)m->cfg.layers + 2);
  m->bucket_next = 0;
  return 0;
}

/* Sequence parallelism: an in-place all-gather of this rank's rows of a
 * [T x hidden] bf16 buffer, or an in-place reduce-scatter leaving it its rows;
 * TACO-encoded when the plan's op carries the codec (the program applies the
 * plan's codec_min_bytes). */
static int sp_allgather(exec_model *m, void *buf, const plan_codec *c, ts_err *e) {
  const long long h = m->cfg.hidden;
  const size_t count = (size_t)(m->sp_rows * h);
  if (c->kind != PLAN_CODEC_NONE) {
    if (!m->team_ready) return ts_fail_sys(e, "exec: a compressed all-gather before exec_model_prepare_codecs");
    coll_opts o = nf_attach(m, exec_codec_opts(c));
    const void *in = rows_at(buf, m->sp_row0, h);
    if (coll_allgather(&m->team, &in, &buf, count, &o))
      return ts_fail_sys(e, "exec: compressed sequence-parallel all-gather: %s", coll_last_error());
    return 0;
  }
  EX_NCCL(ncclAllGather(rows_at(buf, m->sp_row0, h), buf, count, ncclBfloat16, m->tp_comm, m->tp_stream));
  return 0;
}
static int sp_reducescatter(exec_model *m, void *buf, const plan_codec *c, ts_err *e) {
  const long long h = m->cfg.hidden;
  const size_t count = (size_t)(m->sp_rows * h);
  if (c->kind != PLAN_CODEC_NONE) {
    if (!m->team_ready) return ts_fail_sys(e, "exec: a compressed reduce-scatter before exec_model_prepare_codecs");
    coll_opts o = nf_attach(m, exec_codec_opts(c));
    const void *in = buf;
    void *out = rows_at(buf, m->sp_row0, h);
    if (coll_reducescatter(&m->team, &in, &out, count, &o))
      return ts_fail_sys(e, "exec: compressed sequence-parallel reduce-scatter: %s", coll_last_error());
    return 0;
  }
  EX_NCCL(ncclReduceScatter(buf, rows_at(buf, m->sp_row0, h), count, ncclBfloat16, ncclSum, m->tp_comm,
                            m->tp_stream));
  return 0;
}

/* The SP collectives of the plan (plan_program.c's layer_forward/backward,
 * embedding, head): which buffer each all-gather / reduce-scatter works on. */
static int run_sp_collective(exec_model *m, const plan_op *op, int lop, ts_err *e) {
  if (op->codec.kind != PLAN_CODEC_NONE && op->codec.kind != PLAN_CODEC_TACO)
    return ts_fail(e, NULL, "codec.tp_fwd", "only TACO compresses sequence-parallel all-gathers/reduce-scatters");
  const plan_codec *c = &op->codec;
  if (!m->sp) return ts_fail(e, NULL, "layout.sequence_parallel", "an SP collective in a model without SP");
  const int fwd = op->phase != PLAN_PHASE_BWD; /* forward or its recomputation */
  exec_layer_acts *a = op->layer >= 0 ? exec_acts(m, op->layer) : NULL;
  if (op->coll == PLAN_COLL_ALLGATHER) {
    if (op->model_op == PLAN_MOP_EMBEDDING && !fwd) return sp_allgather(m, m->dx, c, e); /* the lookup's gradient */
    if (op->model_op == PLAN_MOP_LOSS && fwd) return sp_allgather(m, m->nf, c, e);       /* the logits' input */
    if (a && lop == EXEC_OP_QKV) return sp_allgather(m, a->n1, c, e);    /* forward, and again for the wgrad */
    if (a && lop == EXEC_OP_FC1) return sp_allgather(m, a->n2, c, e);
    if (a && !fwd && (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2)) return sp_allgather(m, m->dx, c, e);
  } else {
    if (op->model_op == PLAN_MOP_EMBEDDING && fwd) return sp_reducescatter(m, exec_acts(m, 0)->x_in, c, e);
    if (op->model_op == PLAN_MOP_LOSS && !fwd) return sp_reducescatter(m, m->dtmp, c, e);
    if (a && fwd && (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2)) return sp_reducescatter(m, m->proj, c, e);
    if (a && !fwd && (lop == EXEC_OP_QKV || lop == EXEC_OP_FC1)) return sp_reducescatter(m, m->dtmp, c, e);
  }
  return ts_fail(e, NULL, "program", "no sequence-parallel %s belongs to model op %d in phase %d",
                 op->coll == PLAN_COLL_ALLGATHER ? "all-gather" : "reduce-scatter", (int)op->model_op, (int)op->phase);
}

static int run_collective_walked(exec_model *m, const plan_op *op, ts_err *e) {
  if (op->kind != PLAN_OP_COLLECTIVE) return ts_fail(e, NULL, "program", "not a collective");
  if (op->group == PLAN_GROUP_EMBEDDING) {
    /* the tied word embedding: its gradient summed over the first and last stage */
    if (op->model_op != PLAN_MOP_EMBEDDING_GRADS || !m->emb_comm)
      return ts_fail(e, NULL, "program", "an embedding-group collective the executor does not know");
    EX_NCCL(ncclAllReduce(exec_grad_of(m, 0), exec_grad_of(m, 0), m->tensors[0].rows * m->tensors[0].cols, ncclFloat,
                          ncclSum, m->emb_comm, m->dp_stream));
    return 0;
  }
  if (op->group == PLAN_GROUP_DP) {
    if (op->model_op == PLAN_MOP_GRAD_BUCKET &&
        op->coll == (m->zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE)) {
      EX_TRY(dp_reduce_groups(m, 0, &op->codec, e));
      m->bucket_next++; /* bucket k of the program, whose all-gather has tag k */
      return 0;
    }
    if (op->model_op == PLAN_MOP_PARAM_GATHER && op->coll == PLAN_COLL_ALLGATHER && m->zero1)
      return zero1_gather(m, op->tag, e);
    return ts_fail(e, NULL, "layout.zero1", "a DP collective (model op %d, kind %d) that does not match the model's "
                   "ZeRO-1 setting (%d)", (int)op->model_op, (int)op->coll, m->zero1);
  }
  if (op->group != PLAN_GROUP_TP)
    return ts_fail(e, NULL, "program", "collective (group %d, kind %d) is not supported by the executor",
                   (int)op->group, (int)op->coll);
  if (!m->tp_comm) return 0;
  const size_t th = (size_t)(m->tokens * m->cfg.hidden);
  int lop = layer_op_of(m, op->model_op);
  if (op->coll == PLAN_COLL_ALLGATHER || op->coll == PLAN_COLL_REDUCESCATTER) return run_sp_collective(m, op, lop, e);
  if (op->coll != PLAN_COLL_ALLREDUCE)
    return ts_fail(e, NULL, "program", "collective kind %d is not supported by the executor", (int)op->coll);
  /* recomputation reruns the forward's collectives */
  const int fwd = op->phase == PLAN_PHASE_FWD || op->phase == PLAN_PHASE_RECOMPUTE;
  switch (op->model_op) {
  case PLAN_MOP_EMBEDDING:
    EX_NCCL(ncclAllReduce(exec_acts(m, 0)->x_in, exec_acts(m, 0)->x_in, th, ncclBfloat16, ncclSum, m->tp_comm, m->tp_stream));
    return 0;
  case PLAN_MOP_LOSS:
    if (fwd) return 0; /* the cross-entropy statistics were exchanged inside the loss op */
    EX_NCCL(ncclAllReduce(m->dtmp, m->dtmp, th, ncclBfloat16, ncclSum, m->tp_comm, m->tp_stream));
    return 0;
  case PLAN_MOP_NORM_GRADS:
    /* SP: each rank's norm-weight gradients cover its rows only (sum them);
     * CAAT-Net: the replicated tensors saw different activations (average; the
     * single-stage program's optimizer step does it itself); the QK norm's
     * cover each rank's heads (sum them, with or without SP) */
    if (m->sp) return exec_sp_sync_norms(m, m->tp_stream, e);
    if (m->walker_mode && exec_uses_caat(m)) EX_TRY(exec_caat_sync_replicated(m, m->tp_stream, e));
    return m->cfg.qk_norm ? exec_sp_sync_norms(m, m->tp_stream, e) : 0;
  default: break;
  }
  if (fwd && (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2) && op->row_chunks > 1) {
    long long row0 = 0, rows = 0; /* this chunk's rows of the row-parallel output */
    EX_TRY(op_rows(m, op, &row0, &rows, e));
    return tp_allreduce_rows(m, rows_at(m->proj, row0, m->cfg.hidden), (size_t)rows, &op->codec, 0, e);
  }
  if (fwd && (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2))
    return tp_allreduce_coded(m, m->proj, &op->codec, 0, e);
  if (op->phase == PLAN_PHASE_BWD && (lop == EXEC_OP_QKV || lop == EXEC_OP_FC1))
    return tp_allreduce_coded(m, m->dtmp, &op->codec, 1, e);
  return ts_fail(e, NULL, "program", "no TP all-reduce belongs after model op %d in phase %d", (int)op->model_op,
                 (int)op->phase);
}

static int run_collective(exec_model *m, const plan_op *op, ts_err *e) {
  if (op->group == PLAN_GROUP_EP && op->model_op == PLAN_MOP_MOE_TOKENS) return exec_moe_tokens(m, op, e);
  if (op->group == PLAN_GROUP_EDP && op->model_op == PLAN_MOP_EXPERT_GRADS) return exec_moe_expert_grads(m, op, e);
  if (m->walker_mode) return run_collective_walked(m, op, e);
  if (op->group == PLAN_GROUP_DP) {
    if (!m->dp_comm) return 0;
    EX_NCCL(ncclAllReduce(m->grad, m->grad, m->nparams, ncclFloat, ncclSum, m->dp_comm, m->stream));
    return 0;
  }
  if (op->group != PLAN_GROUP_TP || op->coll != PLAN_COLL_ALLREDUCE)
    return ts_fail(e, NULL, "program", "collective (group %d, kind %d) is not supported by the executor",
                   (int)op->group, (int)op->coll);
  if (!m->tp_comm) return 0;
  /* the QK norm's weight gradients (exec_program_build_single_stage), summed over TP in stream order */
  if (op->model_op == PLAN_MOP_NORM_GRADS) return m->cfg.qk_norm ? exec_sp_sync_norms(m, m->stream, e) : 0;
  int lop = layer_op_of(m, op->model_op);
  void *buf;
  plan_codec none = {.kind = PLAN_CODEC_NONE};
  const plan_codec *codec = &op->codec;
  if (op->model_op == PLAN_MOP_EMBEDDING) buf = exec_acts(m, 0)->x_in, codec = &none;
  else if (op->phase == PLAN_PHASE_FWD && (lop == EXEC_OP_ATTN_OUT || lop == EXEC_OP_FC2)) buf = m->proj;
  else if (op->phase == PLAN_PHASE_BWD && (lop == EXEC_OP_QKV || lop == EXEC_OP_FC1)) buf = m->dtmp;
  else
    return ts_fail(e, NULL, "program", "no TP all-reduce belongs after model op %d in phase %d", (int)op->model_op,
                   (int)op->phase);
  /* compute stream -> TP stream -> (deferred weight gradient on the compute stream) -> compute stream */
  EX_CUDA(cudaEventRecord(m->ev_ready, m->stream));
  EX_CUDA(cudaStreamWaitEvent(m->tp_stream, m->ev_ready, 0));
  if (m->prof_tp_start) EX_CUDA(cudaEventRecord(m->prof_tp_start[m->cur_op], m->tp_stream));
  EX_TRY(tp_allreduce_coded(m, buf, codec, op->phase == PLAN_PHASE_BWD, e));
  if (m->prof_tp_end) EX_CUDA(cudaEventRecord(m->prof_tp_end[m->cur_op], m->tp_stream));
  EX_CUDA(cudaEventRecord(m->ev_done, m->tp_stream));
  EX_TRY(exec_flush_wgrad(m, e));
  if (m->prof_wgrad_done) EX_CUDA(cudaEventRecord(m->prof_wgrad_done[m->cur_op], m->stream));
  EX_CUDA(cudaStreamWaitEvent(m->stream, m->ev_done, 0));
  return 0;
}

int exec_model_run_op(exec_model *m, const plan_op *op, ts_err *e) {
  m->run_op = op;
  /* A deferred weight-gradient GEMM waits only for the TP all-reduce that follows its op. */
  if (!(op->kind == PLAN_OP_COLLECTIVE && op->group == PLAN_GROUP_TP)) EX_TRY(exec_flush_wgrad(m, e));
  int micro = op->micro < 0 ? 0 : op->micro;
  if (micro >= m->micros) return ts_fail(e, NULL, "program", "micro-batch %d out of range", micro);
  m->slot = m->slot_of ? m->slot_of[micro] : micro % m->nslots;
  if (m->bnd_x) { /* this micro-batch's received activations: the chunks' first layers read them */
    m->bslot = m->bslot_of ? m->bslot_of[micro] : micro % m->nbslots;
    for (int c = 0; c < m->vpp; c++)
      if (m->chunk_lo[c] > 0)
        m->acts[(size_t)m->slot * (m->cfg.layers + 1) + m->chunk_lo[c]].x_in = m->bnd_x[m->bslot * m->vpp + c];
  }
  if (m->heads) { /* the output layer's state of this micro-batch (GPipe, interleaved) */
    const struct exec_head_acts *hd = &m->heads[m->slot];
    m->x_final = hd->x_final, m->nf = hd->nf, m->logits = hd->logits, m->meanf = hd->meanf, m->rstdf = hd->rstdf;
  }
  if (op->row_chunks > 1 && !m->walker_mode)
    return ts_fail(e, NULL, "layout.tp_overlap_chunks", "row-split ops run only from a plan's program (the walker)");
  if (op->kind == PLAN_OP_COLLECTIVE) return run_collective(m, op, e);
  if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) return run_send_recv(m, op, e);
  if (op->kind != PLAN_OP_COMPUTE) return ts_fail(e, NULL, "program", "op kind %d is unknown", (int)op->kind);
  switch (op->model_op) {
  case PLAN_MOP_EMBEDDING:
    if (op->phase == PLAN_PHASE_FWD) return exec_embedding_fwd(m, micro, e);
    EX_TRY(exec_embedding_bwd(m, micro, e));
    note_group_done(m, op, -1);
    return 0;
  case PLAN_MOP_FINAL_NORM:
    if (op->phase == PLAN_PHASE_FWD) return exec_final_norm_fwd(m, e);
    EX_TRY(exec_final_norm_bwd(m, e));
    note_group_done(m, op, -1);
    return 0;
  case PLAN_MOP_LOSS:
    if (op->phase == PLAN_PHASE_FWD) return m->walker_mode ? exec_logits_loss_fwd(m, micro, e) : exec_loss_fwd(m, micro, e);
    if (op->part == PLAN_PART_DGRAD) return exec_logits_dgrad(m, e);
    if (op->part == PLAN_PART_WGRAD) return exec_logits_wgrad(m, e);
    return exec_loss_bwd(m, e);
  case PLAN_MOP_OPTIMIZER:
    if (m->walker_mode) EX_TRY(exec_model_walker_finish(m, e));
    return exec_optimizer_step(m, e);
  case PLAN_MOP_MOE_IMBALANCE: return 0; /* the simulator's wait for the busiest EP rank; here the combine waits */
  case PLAN_MOP_MLA_KV_SCATTER: { /* kv_b's output into place (forward, recomputation) or its gradient back */
    if (op->layer < 0 || op->layer >= m->cfg.layers)
      return ts_fail(e, NULL, "program", "kv_scatter op of layer %d (of %d)", (int)op->layer, m->cfg.layers);
    m->recomputing = op->phase == PLAN_PHASE_RECOMPUTE;
    int rc = exec_mla_kv_copy(m, op->layer, op->phase == PLAN_PHASE_BWD, e);
    m->recomputing = 0;
    return rc;
  }
  default: break;
  }
  if (op->phase == PLAN_PHASE_RECOMPUTE && op->model_op < 0)
    return ts_fail(e, NULL, "layout.recompute", "recomputation of model op %d is not one the executor knows",
                   (int)op->model_op);

  int lop = layer_op_of(m, op->model_op);
  if (lop < 0 || op->layer < 0 || op->layer >= m->cfg.layers)
    return ts_fail(e, NULL, "program", "compute op (model op %d, layer %d) is not one the executor knows",
                   (int)op->model_op, (int)op->layer);
  if (op->row_chunks > 1 && op->phase != PLAN_PHASE_BWD) { /* tp_overlap_chunks: some rows of attn_out / fc2 */
    long long row0 = 0, rows = 0;
    EX_TRY(op_rows(m, op, &row0, &rows, e));
    m->recomputing = op->phase == PLAN_PHASE_RECOMPUTE;
    int rc = exec_layer_fwd_rows(m, (exec_layer_op)lop, op->layer, row0, rows, op->row_chunk > 0 ? chunk_sms() : 0, e);
    m->recomputing = 0;
    return rc;
  }
  if (op->phase == PLAN_PHASE_FWD) return exec_layer_fwd(m, (exec_layer_op)lop, op->layer, e);
  if (op->phase == PLAN_PHASE_BWD) {
    EX_TRY(exec_layer_bwd(m, (exec_layer_op)lop, op->layer, op->part, e));
    note_group_done(m, op, lop); /* ln1 is a layer's last backward op */
    return 0;
  }
  if (op->phase == PLAN_PHASE_RECOMPUTE) {
    /* the forward again, right before the backward that needs it (plan.h):
     * it rewrites the kept activations with the same values */
    m->recomputing = 1;
    int rc = exec_layer_fwd(m, (exec_layer_op)lop, op->layer, e);
    m->recomputing = 0;
    return rc;
  }
  return ts_fail(e, NULL, "program", "compute op of phase %d is not one the executor knows", (int)op->phase);
}

/* ---- the single-stage program ---- */

typedef struct {
  plan_op *ops;
  int n, cap;
} op_list;

static plan_op *push(op_list *l, plan_op_kind kind, plan_phase phase, int model_op, int layer, int micro) {
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 256;
    plan_op *np = realloc(l->ops, (size_t)cap * sizeof *np);
    if (!np) return NULL;
    l->ops = np, l->cap = cap;
  }
  plan_op *op = &l->ops[l->n++];
  memset(op, 0, sizeof *op);
  op->kind = (uint8_t)kind;
  op->stream = PLAN_STREAM_COMPUTE;
  op->phase = (uint8_t)phase;
  op->model_op = (int16_t)model_op;
  op->layer = layer;
  op->micro = micro;
  op->peer = -1;
  for (int i = 0; i < PLAN_MAX_DEPS; i++) op->dep[i] = -1;
  if (l->n > 1) op->dep[0] = l->n - 2; /* one stream: each op follows the previous */
  return op;
}

static plan_op *push_coll(op_list *l, plan_phase phase, int model_op, int layer, int micro, plan_group_kind g,
                          double bytes) {
  plan_op *op = push(l, PLAN_OP_COLLECTIVE, phase, model_op, layer, micro);
  if (!op) return NULL;
  op->stream = g == PLAN_GROUP_DP ? PLAN_STREAM_DP : PLAN_STREAM_TP;
  op->coll = PLAN_COLL_ALLREDUCE;
  op->group = (uint8_t)g;
  op->traffic = g == PLAN_GROUP_DP ? PLAN_TRAFFIC_DP : phase == PLAN_PHASE_FWD ? PLAN_TRAFFIC_TP_FWD : PLAN_TRAFFIC_TP_BWD;
  op->bytes = op->wire_bytes = bytes;
  return op;
}

static plan_op *push_coll_coded(op_list *l, plan_phase phase, int model_op, int layer, int micro, double bytes,
                                 const plan_codec *c) {
  plan_op *op = push_coll(l, phase, model_op, layer, micro, PLAN_GROUP_TP, bytes);
  if (!op) return NULL;
  op->codec = *c;
  double shared = c->kind == PLAN_CODEC_CAAT || c->kind == PLAN_CODEC_TACO_CAAT ? c->p : 1.0;
  int taco = c->kind == PLAN_CODEC_TACO || c->kind == PLAN_CODEC_TACO_CAAT;
  op->wire_bytes = taco ? (bytes * shared / 2.0) * (1.0 + 8.0 / c->group) : bytes * shared;
  return op;
}

int exec_program_build_single_stage(const exec_model *m, plan_op **ops, int *nops, ts_err *e) {
  op_list l = {0};
  const int L = m->cfg.layers, tp = m->tp > 1;
  const double act_bytes = 2.0 * (double)m->tokens * m->cfg.hidden;
  const int *ix = m->layer_op_index;
  int ok = 1;
#define CHECKED(x) ok = ok && (x) != NULL
  for (int mb = 0; mb < m->micros; mb++) {
    CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_FWD, PLAN_MOP_EMBEDDING, -1, mb));
    if (tp) CHECKED(push_coll(&l, PLAN_PHASE_FWD, PLAN_MOP_EMBEDDING, -1, mb, PLAN_GROUP_TP, act_bytes));
    for (int layer = 0; layer < L; layer++)
      for (int k = 0; k < EXEC_OP_COUNT; k++) {
        const exec_layer_op o = exec_layer_fwd_order[k];
        if (ix[o] < 0) continue; /* rope of a model with learned positions */
        CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_FWD, ix[o], layer, mb));
        if (o == EXEC_OP_KV_B) CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_FWD, PLAN_MOP_MLA_KV_SCATTER, layer, mb));
        if (tp && (o == EXEC_OP_ATTN_OUT || o == EXEC_OP_FC2))
          CHECKED(push_coll_coded(&l, PLAN_PHASE_FWD, ix[o], layer, mb, act_bytes, &m->tp_codec[0]));
      }
    CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_FWD, PLAN_MOP_LOSS, -1, mb));
    CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_BWD, PLAN_MOP_LOSS, -1, mb));
    for (int layer = L - 1; layer >= 0; layer--)
      for (int k = EXEC_OP_COUNT - 1; k >= 0; k--) {
        const exec_layer_op o = exec_layer_fwd_order[k];
        if (ix[o] < 0) continue;
        if (o == EXEC_OP_KV_B) CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_BWD, PLAN_MOP_MLA_KV_SCATTER, layer, mb));
        CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_BWD, ix[o], layer, mb));
        if (tp && (o == EXEC_OP_QKV || o == EXEC_OP_FC1))
          CHECKED(push_coll_coded(&l, PLAN_PHASE_BWD, ix[o], layer, mb, act_bytes, &m->tp_codec[1]));
      }
    CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_BWD, PLAN_MOP_EMBEDDING, -1, mb));
  }
  if (tp && m->cfg.qk_norm) /* the QK norm's weight gradients, partial on each rank (its heads), summed over TP */
    CHECKED(push_coll(&l, PLAN_PHASE_BWD, PLAN_MOP_NORM_GRADS, -1, -1, PLAN_GROUP_TP, 4.0 * 2 * m->head_dim * L));
  if (m->dp > 1) CHECKED(push_coll(&l, PLAN_PHASE_BWD, -1, -1, -1, PLAN_GROUP_DP, 4.0 * (double)m->nparams));
  CHECKED(push(&l, PLAN_OP_COMPUTE, PLAN_PHASE_OPTIMIZER, PLAN_MOP_OPTIMIZER, -1, -1));
#undef CHECKED
  if (!ok) {
    free(l.ops);
    return ts_fail_sys(e, "exec_program_build_single_stage: out of memory");
  }
  *ops = l.ops;
  *nops = l.n;
  return 0;
}

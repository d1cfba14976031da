/* exec_moe_ep.c — expert parallelism's token all-to-alls and expert-DP
 * reductions (see exec_moe.h), as Megatron-Core's all-to-all token dispatcher
 * runs them, for EP 2 .. 8 dividing DP (tp 1, pp 1; EP carved from DP: the EP
 * group is ep consecutive DP ranks, expert-DP the dp / ep ranks with the same
 * EP rank; exec_ep.h says which rank is which).
 *
 * EP rank r owns experts [r E/ep, (r + 1) E/ep) and holds only theirs
 * (weights, gradients, AdamW state: exec_model.c cuts the expert tensors).
 * After the permutation the rank's T k copies lie in expert order, so the
 * rows for rank p's experts are one contiguous run of xp. The forward's
 * dispatch first all-gathers every EP rank's rows per expert (E ints each,
 * copied to the host: the send and receive counts and the expert GEMMs'
 * shapes, exec_ep_route), then sends each run to its owner and receives the
 * rows for this rank's experts (ncclSend/ncclRecv in one group over the EP
 * communicator), source rank by source rank: the expert side holds, per
 * source, its rows of each local expert in expert order (the GEMM segments).
 * The combine sends the experts' output rows back the same way (into ey at
 * the sent rows), the backward's dispatch sends dy as the forward sent xp,
 * its combine returns the experts' input gradient into dxp. Un-permutation
 * and the weighted combine then run on this rank's own copies as at EP 1.
 *
 * Gradients: the dense ones are reduced over DP as without experts
 * (exec_step.c leaves the expert tensors out of the DP buckets); the expert
 * ones over expert-DP by the program's PLAN_MOP_EXPERT_GRADS ops
 * (exec_moe_expert_grads; with ep = dp expert-DP has one rank and the
 * program has none: each rank's experts' gradients are complete as they are).
 *
 * TACO (codec.ep taco, at least codec_min_bytes, as the program marks the op):
 * each run of rows bound for another rank is encoded (taco_encode: FP8
 * codes and the group scales of one self-contained block), the blocks go
 * as bytes in the same send/recv group, and the receiver decodes each into
 * its rows (BF16). The rank's own run is copied, never encoded (it crosses
 * no wire). Encode + all-to-all + decode: the fused permute+encode /
 * decode+combine kernels (moe_codec.h) encode the whole permuted buffer as
 * one block and combine on decode, which fits neither the per-destination
 * blocks nor the experts' side here (not used). */
#include "exec_model_internal.h"
#include "exec_moe.h"

#include "taco_codec.h"

static int ep_of(const exec_model *m) { return m->ep > 1 ? m->ep : 1; }

/* The all-gathered rows per expert; the send and receive counts and offsets; the expert side's segments. */
static int exchange_counts(exec_model *m, struct exec_moe_acts *a, ts_err *e) {
  struct exec_moe_scratch *s = m->moe;
  const int E = m->cfg.experts, ep = ep_of(m), me = m->epl.ep_rank;
  EX_NCCL(ncclAllGather(a->count, s->allcount, (size_t)E, ncclInt32, m->ep_comm, m->stream));
  EX_CUDA(cudaMemcpyAsync(s->hall, s->allcount, (size_t)E * ep * 4, cudaMemcpyDeviceToHost, m->stream));
  EX_TRY(exec_stream_wait(m, m->stream, e));
  if (exec_ep_route(&m->epl, E, s->hall, a->hcount, a->scnt, a->soff, a->rcnt, a->roff, a->seg_ex, a->seg_cnt,
                    &a->nseg, &a->erows))
    return ts_fail_sys(e, "exec: EP rank %d: the all-gathered expert row counts disagree with its own", me);
  const long long cap = (long long)m->tokens * m->cfg.top_k * ep;
  if (a->erows > cap) return ts_fail_sys(e, "exec: EP rank %d receives %lld rows, more than %lld", me, a->erows, cap);
  return 0;
}

/* The TACO all-to-all: encode each outgoing run, exchange the blocks, decode each incoming one. */
static int alltoall_taco(exec_model *m, const struct exec_moe_acts *a, void *mine, void *theirs, int combine,
                         const plan_codec *c, ts_err *e) {
  struct exec_moe_scratch *s = m->moe;
  const size_t h = (size_t)m->cfg.hidden;
  const int ep = ep_of(m), me = m->epl.ep_rank;
  const taco_params tp = {.group = c->group, .fp8 = c->fp8 == PLAN_FP8_E5M2 ? TACO_FP8_E5M2 : TACO_FP8_E4M3};
  /* one slot per peer, each as large as a block of every row the rank can hold (R h elements, G 32 at worst) */
  const size_t slot = (exec_ep_wire_bytes((long long)m->tokens * m->cfg.top_k * ep, (long long)h, 32) + 255) / 256 *
                      256; /* aligned */
  if (!s->enc_send) {
    EX_CUDA(cudaMalloc(&s->enc_send, slot * ep));
    EX_CUDA(cudaMalloc(&s->enc_recv, slot * ep));
  }
  /* out: what this rank sends to p (dispatch: its copies; combine: the expert rows back) */
  for (int p = 0; p < ep; p++) {
    const size_t rows = combine ? (size_t)a->rcnt[p] : (size_t)a->scnt[p];
    char *own = (char *)mine + (size_t)a->soff[p] * h * 2, *far = (char *)theirs + (size_t)a->roff[p] * h * 2;
    const char *src = combine ? far : own;
    char *dst = combine ? own : far;
    if (p == me) {
      if (rows) EX_CUDA(cudaMemcpyAsync(dst, src, rows * h * 2, cudaMemcpyDeviceToDevice, m->stream));
    } else if (rows && taco_encode(src, TACO_DTYPE_BF16, rows * h, tp, (char *)s->enc_send + p * slot, NULL,
                                   m->stream))
      return ts_fail_sys(e, "exec: EP all-to-all: taco_encode: %s", taco_last_error());
  }
  EX_NCCL(ncclGroupStart());
  for (int p = 0; p < ep; p++) {
    if (p == me) continue;
    const long long out = combine ? a->rcnt[p] : a->scnt[p], in = combine ? a->scnt[p] : a->rcnt[p];
    if (out) EX_NCCL(ncclSend((char *)s->enc_send + p * slot, exec_ep_wire_bytes(out, (long long)h, tp.group),
                              ncclUint8, p, m->ep_comm, m->stream));
    if (in) EX_NCCL(ncclRecv((char *)s->enc_recv + p * slot, exec_ep_wire_bytes(in, (long long)h, tp.group),
                             ncclUint8, p, m->ep_comm, m->stream));
  }
  EX_NCCL(ncclGroupEnd());
  for (int p = 0; p < ep; p++) {
    const size_t in = combine ? (size_t)a->scnt[p] : (size_t)a->rcnt[p];
    char *dst = combine ? (char *)mine + (size_t)a->soff[p] * h * 2 : (char *)theirs + (size_t)a->roff[p] * h * 2;
    if (p != me && in && taco_decode((char *)s->enc_recv + p * slot, in * h, tp, dst, TACO_DTYPE_BF16, m->stream))
      return ts_fail_sys(e, "exec: EP all-to-all: taco_decode: %s", taco_last_error());
  }
  return 0;
}

/* One all-to-all: `mine` holds this rank's copies in expert order (the runs
 * scnt from soff), `theirs` the expert side (the runs rcnt from roff, by
 * source). dispatch: mine -> theirs; combine: theirs -> mine. */
static int alltoall(exec_model *m, const struct exec_moe_acts *a, void *mine, void *theirs, int combine, ts_err *e) {
  const size_t h = (size_t)m->cfg.hidden;
  EX_NCCL(ncclGroupStart());
  for (int p = 0; p < ep_of(m); p++) {
    char *own = (char *)mine + (size_t)a->soff[p] * h * 2, *far = (char *)theirs + (size_t)a->roff[p] * h * 2;
    const size_t sn = (size_t)a->scnt[p] * h, rn = (size_t)a->rcnt[p] * h;
    if (!combine) {
      if (sn) EX_NCCL(ncclSend(own, sn, ncclBfloat16, p, m->ep_comm, m->stream));
      if (rn) EX_NCCL(ncclRecv(far, rn, ncclBfloat16, p, m->ep_comm, m->stream));
    } else {
      if (rn) EX_NCCL(ncclSend(far, rn, ncclBfloat16, p, m->ep_comm, m->stream));
      if (sn) EX_NCCL(ncclRecv(own, sn, ncclBfloat16, p, m->ep_comm, m->stream));
    }
  }
  EX_NCCL(ncclGroupEnd());
  return 0;
}

int exec_moe_tokens(exec_model *m, const plan_op *op, ts_err *e) {
  if (op->layer < 0 || op->layer >= m->cfg.layers || !exec_acts(m, op->layer)->moe || !m->moe)
    return ts_fail(e, NULL, "program", "a token all-to-all on layer %d, which is not an MoE layer", (int)op->layer);
  if (ep_of(m) < 2 || !m->ep_comm)
    return ts_fail(e, NULL, "layout.ep", "%d: a token all-to-all without expert parallelism (the model was made with "
                   "ep %d)", m->ep, m->epl.ep);
  if (op->codec.kind != PLAN_CODEC_NONE && op->codec.kind != PLAN_CODEC_TACO)
    return ts_fail(e, NULL, "codec.ep", "only TACO compresses the token all-to-alls");
  struct exec_moe_acts *a = exec_acts(m, op->layer)->moe;
  struct exec_moe_scratch *s = m->moe;
  const int bwd = op->phase == PLAN_PHASE_BWD;
  int *stage = bwd ? &a->ep_bwd : &a->ep_fwd;
  const int combine = *stage;
  *stage = !combine;
  if (!bwd && !combine) EX_TRY(exchange_counts(m, a, e));
  void *mine = bwd ? (combine ? s->dxp : s->dy) : (combine ? a->ey : a->xp);
  void *theirs = bwd ? (combine ? s->dxe : s->dye) : (combine ? a->ye : a->xe);
  if (op->codec.kind == PLAN_CODEC_TACO) return alltoall_taco(m, a, mine, theirs, combine, &op->codec, e);
  return alltoall(m, a, mine, theirs, combine, e);
}

int exec_moe_expert_grads(exec_model *m, const plan_op *op, ts_err *e) {
  const int l = op->tag;
  if (l < 0 || l >= m->cfg.layers || !exec_ref_layer_is_moe(&m->cfg, l))
    return ts_fail(e, NULL, "program", "an expert-DP reduction of layer %d, which is not an MoE layer", l);
  if (!m->edp_comm || !m->dp_stream)
    return ts_fail(e, NULL, "layout.ep", "an expert-DP reduction with ep %d = dp %d (expert-DP of one rank)", m->ep,
                   m->dp);
  if (op->codec.kind != PLAN_CODEC_NONE)
    return ts_fail(e, NULL, "codec.dp", "the executor reduces the expert gradients over expert-DP uncompressed only");
  EX_CUDA(cudaEventRecord(m->ev_ready, m->stream));
  EX_CUDA(cudaStreamWaitEvent(m->dp_stream, m->ev_ready, 0));
  EX_NCCL(ncclGroupStart());
  for (int k = 0; k < 2; k++) {
    const int t = exec_layer_tensor(m, l, k ? EXEC_T_EXPERT_FC2 : EXEC_T_EXPERT_FC1);
    float *g = exec_grad_of(m, t);
    EX_NCCL(ncclAllReduce(g, g, m->tensors[t].rows * m->tensors[t].cols, ncclFloat, ncclSum, m->edp_comm,
                          m->dp_stream));
  }
  EX_NCCL(ncclGroupEnd());
  return 0;
}

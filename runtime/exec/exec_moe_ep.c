/* exec_moe_ep.c — expert parallelism's token all-to-alls (see exec_moe.h),
 * as Megatron-Core's all-to-all token dispatcher runs them, for EP = DP
 * (tp 1, pp 1: the EP group is the DP group; expert-DP has one rank).
 *
 * EP rank r owns experts [r E/ep, (r + 1) E/ep). After the permutation the
 * rank's T k copies lie in expert order, so the rows for rank p's experts are
 * one contiguous run of xp. The forward's dispatch first all-gathers every
 * rank's rows per expert (E ints each, copied to the host: the receive
 * counts and the expert GEMMs' shapes), then sends each run to its owner and
 * receives the rows for this rank's experts (ncclSend/ncclRecv in one group),
 * source rank by source rank: the expert side holds, per source, its rows of
 * each local expert in expert order (the GEMM segments). The combine sends
 * the experts' output rows back the same way (into ey at the sent rows), the
 * backward's dispatch sends dy as the forward sent xp, its combine returns
 * the experts' input gradient into dxp. Un-permutation and the weighted
 * combine then run on this rank's own copies as at EP 1.
 *
 * Gradients: the dense ones are reduced over DP as without experts; the
 * expert ones over expert-DP, one rank here, so not at all (exec_step.c
 * skips them in the DP buckets): each rank's own experts' are complete.
 * The expert weights are held whole on every rank (not sharded in memory,
 * NOT IMPLEMENTED here): the others' experts are never read, their gradients
 * stay zero and the optimizer steps them all (AdamW over E / ep experts too
 * many: time the simulator does not charge).
 *
 * TACO (codec.ep taco, at least codec_min_bytes, as the program marks the op):
 * each run of rows bound for another rank is encoded (taco_encode: FP8
 * codes and the group scales of one self-contained block), the blocks go
 * as bytes in the same send/recv group, and the receiver decodes each into
 * its rows (BF16). The rank's own run is copied, never encoded (it crosses
 * no wire). Encode + all-to-all + decode: the fused permute+encode /
 * decode+combine kernels (moe_codec.h) encode the whole permuted buffer as
 * one block and combine on decode, which fits neither the per-destination
 * blocks nor the experts' side here (NOT used). */
#include "exec_model_internal.h"
#include "exec_moe.h"

#include "taco_codec.h"

static int ep_of(const exec_model *m) { return m->ep > 1 ? m->ep : 1; }

/* The all-gathered rows per expert; the send and receive counts; the expert side's segments. */
static int exchange_counts(exec_model *m, struct exec_moe_acts *a, ts_err *e) {
  struct exec_moe_scratch *s = m->moe;
  const int E = m->cfg.experts, ep = ep_of(m), me = m->dp_rank, El = E / ep;
  EX_NCCL(ncclAllGather(a->count, s->allcount, (size_t)E, ncclInt32, m->dp_comm, m->stream));
  EX_CUDA(cudaMemcpyAsync(s->hall, s->allcount, (size_t)E * ep * 4, cudaMemcpyDeviceToHost, m->stream));
  EX_TRY(exec_stream_wait(m, m->stream, e));
  a->nseg = 0, a->erows = 0;
  for (int p = 0; p < ep; p++) {
    a->scnt[p] = a->rcnt[p] = 0;
    for (int j = 0; j < El; j++) {
      const int32_t got = s->hall[(size_t)p * E + me * El + j];
      if (got < 0 || s->hall[(size_t)me * E + p * El + j] != a->hcount[p * El + j])
        return ts_fail_sys(e, "exec: EP rank %d: the all-gathered expert row counts disagree with its own", me);
      a->scnt[p] += a->hcount[p * El + j];
      a->rcnt[p] += got;
      a->seg_ex[a->nseg] = me * El + j, a->seg_cnt[a->nseg++] = got;
    }
    a->erows += a->rcnt[p];
  }
  const long long cap = (long long)m->tokens * m->cfg.top_k * ep;
  if (a->erows > cap) return ts_fail_sys(e, "exec: EP rank %d receives %lld rows, more than %lld", me, a->erows, cap);
  return 0;
}

/* The TACO all-to-all: encode each outgoing run, exchange the blocks, decode each incoming one. */
static int alltoall_taco(exec_model *m, const struct exec_moe_acts *a, void *mine, void *theirs, int combine,
                         const plan_codec *c, ts_err *e) {
  struct exec_moe_scratch *s = m->moe;
  const size_t h = (size_t)m->cfg.hidden;
  const int ep = ep_of(m), me = m->dp_rank;
  const taco_params tp = {.group = c->group, .fp8 = c->fp8 == PLAN_FP8_E5M2 ? TACO_FP8_E5M2 : TACO_FP8_E4M3};
  /* one slot per peer, each as large as a block of every row the rank can hold (R h elements, G 32 at worst) */
  const size_t slot = (taco_wire_bytes((size_t)m->tokens * m->cfg.top_k * ep * h, 32) + 255) / 256 * 256; /* aligned */
  if (!s->enc_send) {
    EX_CUDA(cudaMalloc(&s->enc_send, slot * ep));
    EX_CUDA(cudaMalloc(&s->enc_recv, slot * ep));
  }
  size_t so = 0, ro = 0;
  size_t off_own[8], off_far[8];
  for (int p = 0; p < ep; p++) off_own[p] = so, off_far[p] = ro, so += (size_t)a->scnt[p], ro += (size_t)a->rcnt[p];
  /* out: what this rank sends to p (dispatch: its copies; combine: the expert rows back) */
  for (int p = 0; p < ep; p++) {
    const size_t rows = combine ? (size_t)a->rcnt[p] : (size_t)a->scnt[p];
    const char *src = combine ? (char *)theirs + off_far[p] * h * 2 : (char *)mine + off_own[p] * h * 2;
    char *dst = combine ? (char *)mine + off_own[p] * h * 2 : (char *)theirs + off_far[p] * h * 2;
    if (p == me) {
      if (rows) EX_CUDA(cudaMemcpyAsync(dst, src, rows * h * 2, cudaMemcpyDeviceToDevice, m->stream));
    } else if (rows && taco_encode(src, TACO_DTYPE_BF16, rows * h, tp, (char *)s->enc_send + p * slot, NULL,
                                   m->stream))
      return ts_fail_sys(e, "exec: EP all-to-all: taco_encode: %s", taco_last_error());
  }
  EX_NCCL(ncclGroupStart());
  for (int p = 0; p < ep; p++) {
    if (p == me) continue;
    const size_t out = combine ? (size_t)a->rcnt[p] : (size_t)a->scnt[p];
    const size_t in = combine ? (size_t)a->scnt[p] : (size_t)a->rcnt[p];
    if (out) EX_NCCL(ncclSend((char *)s->enc_send + p * slot, taco_wire_bytes(out * h, tp.group), ncclUint8, p,
                              m->dp_comm, m->stream));
    if (in) EX_NCCL(ncclRecv((char *)s->enc_recv + p * slot, taco_wire_bytes(in * h, tp.group), ncclUint8, p,
                             m->dp_comm, m->stream));
  }
  EX_NCCL(ncclGroupEnd());
  for (int p = 0; p < ep; p++) {
    const size_t in = combine ? (size_t)a->scnt[p] : (size_t)a->rcnt[p];
    char *dst = combine ? (char *)mine + off_own[p] * h * 2 : (char *)theirs + off_far[p] * h * 2;
    if (p != me && in && taco_decode((char *)s->enc_recv + p * slot, in * h, tp, dst, TACO_DTYPE_BF16, m->stream))
      return ts_fail_sys(e, "exec: EP all-to-all: taco_decode: %s", taco_last_error());
  }
  return 0;
}

/* One all-to-all: `mine` holds this rank's copies in expert order (the runs
 * scnt), `theirs` the expert side (the runs rcnt, by source). dispatch:
 * mine -> theirs; combine: theirs -> mine. */
static int alltoall(exec_model *m, const struct exec_moe_acts *a, void *mine, void *theirs, int combine, ts_err *e) {
  const size_t h = (size_t)m->cfg.hidden;
  size_t so = 0, ro = 0;
  EX_NCCL(ncclGroupStart());
  for (int p = 0; p < ep_of(m); p++) {
    char *own = (char *)mine + so * h * 2, *far = (char *)theirs + ro * h * 2;
    const size_t sn = (size_t)a->scnt[p] * h, rn = (size_t)a->rcnt[p] * h;
    if (!combine) {
      if (sn) EX_NCCL(ncclSend(own, sn, ncclBfloat16, p, m->dp_comm, m->stream));
      if (rn) EX_NCCL(ncclRecv(far, rn, ncclBfloat16, p, m->dp_comm, m->stream));
    } else {
      if (rn) EX_NCCL(ncclSend(far, rn, ncclBfloat16, p, m->dp_comm, m->stream));
      if (sn) EX_NCCL(ncclRecv(own, sn, ncclBfloat16, p, m->dp_comm, m->stream));
    }
    so += (size_t)a->scnt[p], ro += (size_t)a->rcnt[p];
  }
  EX_NCCL(ncclGroupEnd());
  return 0;
}

int exec_moe_tokens(exec_model *m, const plan_op *op, ts_err *e) {
  if (op->layer < 0 || op->layer >= m->cfg.layers || !exec_acts(m, op->layer)->moe || !m->moe)
    return ts_fail(e, NULL, "program", "a token all-to-all on layer %d, which is not an MoE layer", (int)op->layer);
  if (ep_of(m) < 2 || m->ep != m->dp || !m->dp_comm)
    return ts_fail(e, NULL, "layout.ep", "%d: the executor's token all-to-alls run over the DP group (ep = dp %d)",
                   m->ep, m->dp);
  if (op->codec.kind != PLAN_CODEC_NONE && op->codec.kind != PLAN_CODEC_TACO)
    return ts_fail(e, NULL, "codec.ep", "only TACO compresses the token all-to-alls");
  if (m->ep > 8) return ts_fail(e, NULL, "layout.ep", "%d: at most 8", m->ep);
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

/* coll_taco.c — TACO-compressed collectives over NCCL (see coll_taco.h).
 *
 * Every compressed collective is a short list of stages that alternate
 * between the codec stream (encode, decode-sum-encode, decode) and the comm
 * stream (NCCL transfers of encoded blocks). The message is cut into chunks
 * (coll_layout.h) and the stages are enqueued skewed: at tick t, stages 0-1
 * handle chunk t, stages 2-3 chunk t-1 and stage 4 chunk t-2, so while
 * chunk t travels the codec works on the neighbouring chunks. An event per
 * (stage, chunk slot) orders a stage after the previous stage of the same
 * chunk; enough slots that an event is never re-recorded before its wait
 * was enqueued. All NCCL calls of a tick, for every local rank, go into one
 * ncclGroupStart/End, so single-process mode drives all GPUs from one thread
 * and the transfers of neighbouring chunks share one NCCL launch.
 * Scratch holds the encoded form of the whole message, so no chunk ever
 * waits for a buffer to be free. */
#include "coll_direct_team.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static __thread char last_error[1024];

const char *coll_last_error(void) { return last_error; }

int coll_set_error(const char *file, int line, const char *what, const char *why) {
  snprintf(last_error, sizeof last_error, "%s:%d: %s: %s", file, line, what, why);
  return -1;
}
#define coll_fail coll_set_error


size_t coll_dtype_bytes(taco_dtype dt) { return dt == TACO_DTYPE_FP32 ? 4 : 2; }

static ncclDataType_t nccl_dtype(taco_dtype dt) { return dt == TACO_DTYPE_FP32 ? ncclFloat32 : ncclBfloat16; }

coll_opts coll_opts_default(void) {
  coll_opts o;
  memset(&o, 0, sizeof o);
  o.codec = COLL_CODEC_TACO;
  o.taco.group = 128;
  o.taco.fp8 = TACO_FP8_E4M3;
  o.dtype = TACO_DTYPE_BF16;
  o.chunk_bytes = COLL_DEFAULT_CHUNK_BYTES;
  o.min_bytes = COLL_DEFAULT_MIN_BYTES;
  return o;
}

size_t coll_caat_shared(size_t cols, double p) {
  if (!(p > 0)) return 0;
  if (p >= 1) return cols;
  return (size_t)floor(p * (double)cols);
}

/* ---- team ---------------------------------------------------------------- */

int coll_team_init(coll_team *t, int nlocal, const ncclComm_t *comms, const int *devices,
                   const cudaStream_t *streams) {
  memset(t, 0, sizeof *t);
  if (nlocal < 1 || nlocal > COLL_MAX_LOCAL) return coll_fail(__FILE__, __LINE__, "coll_team_init", "bad nlocal");
  t->nlocal = nlocal;
  t->timeout_s = COLL_DIRECT_TIMEOUT_S_DEFAULT;
  t->host_mode = COLL_DIRECT_AUTO;
  for (int i = 0; i < nlocal; i++) {
    coll_rank *r = &t->r[i];
    r->comm = comms[i];
    r->device = devices[i];
    r->stream = streams[i];
    int n = 0;
    CK_NCCL(ncclCommCount(r->comm, &n));
    CK_NCCL(ncclCommUserRank(r->comm, &r->rank));
    if (i == 0) t->nranks = n;
    else if (n != t->nranks) return coll_fail(__FILE__, __LINE__, "coll_team_init", "comms differ in size");
    CK_CUDA(cudaSetDevice(r->device));
    CK_CUDA(cudaStreamCreateWithFlags(&r->codec_stream, cudaStreamNonBlocking));
    int lo = 0, hi = 0;
    CK_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
    CK_CUDA(cudaStreamCreateWithPriority(&r->comm_stream, cudaStreamNonBlocking, hi));
    CK_CUDA(cudaEventCreateWithFlags(&r->ev_start, cudaEventDisableTiming));
    CK_CUDA(cudaEventCreateWithFlags(&r->ev_codec_done, cudaEventDisableTiming));
    CK_CUDA(cudaEventCreateWithFlags(&r->ev_comm_done, cudaEventDisableTiming));
    for (int s = 0; s < COLL_STAGES; s++)
      for (int k = 0; k < COLL_EVENT_SLOTS; k++)
        CK_CUDA(cudaEventCreateWithFlags(&r->ev_stage[s][k], cudaEventDisableTiming));
    CK_CUDA(cudaMalloc((void **)&r->nonfinite, sizeof *r->nonfinite));
    CK_TACO(taco_nonfinite_reset(r->nonfinite, NULL));
  }
  return 0;
}

int coll_team_nonfinite(coll_team *t, unsigned long long *count, unsigned long long *first) {
  *count = 0, *first = ULLONG_MAX;
  for (int i = 0; i < t->nlocal; i++) {
    coll_rank *r = &t->r[i];
    taco_nonfinite h;
    CK_CUDA(cudaSetDevice(r->device));
    CK_CUDA(cudaMemcpyAsync(&h, r->nonfinite, sizeof h, cudaMemcpyDeviceToHost, r->stream));
    CK(coll_rank_idle(r, coll_team_timeout(t)));
    if (h.count && *count == 0) *first = h.first_index;
    *count += h.count;
    if (h.count) CK_TACO(taco_nonfinite_reset(r->nonfinite, (void *)r->stream));
  }
  return 0;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int coll_rank_idle(coll_rank *r, double timeout_s) {
  cudaStream_t s[3] = {r->stream, r->codec_stream, r->comm_stream};
  int n = r->codec_stream ? 3 : 1; /* the owned streams exist once coll_team_init got that far */
  CK_CUDA(cudaSetDevice(r->device));
  double until = mono_s() + timeout_s;
  long nap = 5;
  char why[160];
  for (;;) {
    int busy = 0;
    for (int k = 0; k < n; k++) {
      if (k > 0 && !s[k]) continue;
      cudaError_t q = cudaStreamQuery(s[k]);
      if (q == cudaErrorNotReady) busy = 1;
      else if (q != cudaSuccess) return coll_set_error(__FILE__, __LINE__, "cudaStreamQuery", cudaGetErrorString(q));
    }
    if (!busy) return 0;
    ncclResult_t async = ncclSuccess;
    if (r->comm && ncclCommGetAsyncError(r->comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      snprintf(why, sizeof why, "rank %d: %s", r->rank, ncclGetErrorString(async));
      return coll_set_error(__FILE__, __LINE__, "NCCL asynchronous error while waiting for the team's streams", why);
    }
    if (mono_s() > until) {
      snprintf(why, sizeof why, "rank %d: streams not idle after %.1f s (a peer dead or a kernel stuck?)", r->rank,
               timeout_s);
      return coll_set_error(__FILE__, __LINE__, "coll_rank_idle", why);
    }
    struct timespec ts = {0, nap * 1000};
    nanosleep(&ts, NULL);
    if (nap < 200) nap *= 2;
  }
}

int coll_team_destroy(coll_team *t) {
  int idle[COLL_MAX_LOCAL] = {0}, rc = 0;
  char first[512] = "";
  for (int i = 0; i < t->nlocal; i++) {
    idle[i] = coll_rank_idle(&t->r[i], coll_team_timeout(t)) == 0;
    if (!idle[i] && rc == 0) snprintf(first, sizeof first, "%s", coll_last_error());
    if (!idle[i]) rc = -1;
  }
  coll_direct_destroy(t, idle);
  for (int i = 0; i < t->nlocal; i++) {
    coll_rank *r = &t->r[i];
    if (!idle[i]) continue; /* its kernels may still run: buffers, events and streams stay */
    if (cudaSetDevice(r->device) != cudaSuccess) continue;
    cudaFree(r->wire);
    cudaFree(r->pack);
    cudaFree(r->nonfinite);
    for (int s = 0; s < COLL_STAGES; s++)
      for (int k = 0; k < COLL_EVENT_SLOTS; k++)
        if (r->ev_stage[s][k]) cudaEventDestroy(r->ev_stage[s][k]);
    if (r->ev_start) cudaEventDestroy(r->ev_start);
    if (r->ev_codec_done) cudaEventDestroy(r->ev_codec_done);
    if (r->ev_comm_done) cudaEventDestroy(r->ev_comm_done);
    if (r->codec_stream) cudaStreamDestroy(r->codec_stream);
    if (r->comm_stream) cudaStreamDestroy(r->comm_stream);
  }
  memset(t, 0, sizeof *t);
  if (rc) coll_set_error(__FILE__, __LINE__, "coll_team_destroy (that rank's buffers left allocated)", first);
  return rc;
}

/* Grows an owned device buffer; the old one may still be read by enqueued
 * work, so every stream that can touch it is drained first. */
static int grow(const coll_team *t, coll_rank *r, void **buf, size_t *have, size_t need) {
  if (need <= *have) return 0;
  CK(coll_rank_idle(r, coll_team_timeout(t)));
  CK_CUDA(cudaFree(*buf));
  *buf = NULL;
  *have = 0;
  CK_CUDA(cudaMalloc(buf, need));
  *have = need;
  return 0;
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

/* Four wire buffers (a: blocks to send, b: blocks received, c: all-gather,
 * d: all-gather exchange) and two staging buffers of one padded chunk (in, out). */
static size_t stage_bytes(const coll_layout *l, size_t es) { return align256(coll_block_elems(l->m, l->group) * es); }
static size_t wire_need(const coll_layout *l, size_t es) {
  return 4 * align256(coll_wire_buffer_bytes(l)) + 2 * stage_bytes(l, es);
}

/* One-shot all-reduce (coll_allreduce_algo): every rank's whole message is
 * all-gathered, so it is laid out as an all-gather of `count` per rank. */
static int one_shot(const coll_team *t, coll_op op, const coll_opts *o) {
  (void)t;
  if (op != COLL_OP_ALLREDUCE) return 0;
  /* AUTO: two-shot, what the calibration files measured */
  return o->allreduce == COLL_ALLREDUCE_ONE_SHOT;
}

static int make_layout(coll_layout *l, const coll_team *t, coll_op op, size_t count, const coll_opts *o) {
  if (one_shot(t, op, o)) op = COLL_OP_ALLGATHER;
  if (coll_layout_make(l, op, count, t->nranks, o->taco.group, coll_dtype_bytes(o->dtype), o->chunk_bytes))
    return coll_fail(__FILE__, __LINE__, "coll_layout_make", "bad group size or rank count");
  return 0;
}

int coll_team_reserve(coll_team *t, coll_op op, size_t count, const coll_opts *o) {
  if (o->codec == COLL_CODEC_NONE_DIRECT) {
    coll_opts on = *o;
    on.direct = COLL_DIRECT_ON;
    return coll_direct_reserve(t, op, count, &on) < 0 ? -1 : 0;
  }
  if (o->codec != COLL_CODEC_TACO) return 0;
  /* both paths: a call made while a CUDA graph is captured takes the NCCL
   * path, and must not allocate then */
  if (coll_direct_reserve(t, op, count, o) < 0) return -1;
  coll_layout l;
  CK(make_layout(&l, t, op, count, o));
  for (int i = 0; i < t->nlocal; i++) CK(grow(t, &t->r[i], (void **)&t->r[i].wire, &t->r[i].wire_bytes, wire_need(&l, coll_dtype_bytes(o->dtype))));
  return 0;
}

/* ---- plain NCCL path ----------------------------------------------------- */

static int plain(coll_team *t, coll_op op, const void *const *send, void *const *recv, const int *send_peer,
                 const int *recv_peer, size_t count, taco_dtype dt) {
  ncclDataType_t ty = nccl_dtype(dt);
  size_t es = coll_dtype_bytes(dt);
  CK_NCCL(ncclGroupStart());
  for (int i = 0; i < t->nlocal; i++) {
    coll_rank *r = &t->r[i];
    switch (op) {
    case COLL_OP_ALLREDUCE: CK_NCCL(ncclAllReduce(send[i], recv[i], count, ty, ncclSum, r->comm, r->stream)); break;
    case COLL_OP_ALLGATHER: CK_NCCL(ncclAllGather(send[i], recv[i], count, ty, r->comm, r->stream)); break;
    case COLL_OP_REDUCESCATTER:
      CK_NCCL(ncclReduceScatter(send[i], recv[i], count, ty, ncclSum, r->comm, r->stream));
      break;
    case COLL_OP_ALLTOALL:
      for (int p = 0; p < t->nranks; p++) {
        CK_NCCL(ncclSend((const char *)send[i] + (size_t)p * count * es, count, ty, p, r->comm, r->stream));
        CK_NCCL(ncclRecv((char *)recv[i] + (size_t)p * count * es, count, ty, p, r->comm, r->stream));
      }
      break;
    case COLL_OP_SENDRECV:
      if (send_peer[i] >= 0) CK_NCCL(ncclSend(send[i], count, ty, send_peer[i], r->comm, r->stream));
      if (recv_peer[i] >= 0) CK_NCCL(ncclRecv(recv[i], count, ty, recv_peer[i], r->comm, r->stream));
      break;
    default: return coll_fail(__FILE__, __LINE__, "plain", "unknown op");
    }
  }
  CK_NCCL(ncclGroupEnd());
  return 0;
}

/* ---- compressed path ----------------------------------------------------- */

typedef enum {
  ST_ENC_SEGS, /* codec: encode the block for each destination rank */
  ST_ENC_OWN,  /* codec: encode this rank's input into its all-gather slot */
  ST_ENC_P2P,  /* codec: encode the chunk to send */
  ST_A2A,      /* comm: block r to rank r, block from s into slot s */
  ST_AG,       /* comm: in-place all-gather of the slots */
  ST_P2P,      /* comm: send to send_peer, receive from recv_peer */
  ST_DSE,      /* codec: decode-sum-encode the received blocks into the all-gather slot */
  ST_DSUM,     /* codec: decode-sum the received blocks into the output */
  ST_DSUM_AG,  /* codec: decode-sum the all-gather slots into the output (one-shot all-reduce) */
  ST_DEC_SEGS, /* codec: decode the all-gather slots into the output */
  ST_DEC_A2A,  /* codec: decode the received blocks into the output */
  ST_DEC_P2P   /* codec: decode the received chunk */
} stage_kind;

static int stage_on_comm(stage_kind k) { return k == ST_A2A || k == ST_AG || k == ST_P2P; }

typedef struct {
  coll_team *t;
  coll_layout l;
  const coll_opts *o;
  size_t es;
  int nstages;
  stage_kind stages[COLL_STAGES];
  const unsigned char *send[COLL_MAX_LOCAL];
  unsigned char *recv[COLL_MAX_LOCAL];
  int send_peer[COLL_MAX_LOCAL], recv_peer[COLL_MAX_LOCAL];
  unsigned char *wa[COLL_MAX_LOCAL], *wb[COLL_MAX_LOCAL], *wc[COLL_MAX_LOCAL], *wd[COLL_MAX_LOCAL];
  unsigned char *stage_in[COLL_MAX_LOCAL], *stage_out[COLL_MAX_LOCAL];
} job;

/* Wire bytes of a block that carries n elements (padded to pairs of groups). */
static size_t bw(const job *jb, size_t n) { return coll_block_wire(n, jb->o->taco.group); }

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Encodes e user elements at x as one block (of coll_block_elems(e) elements).
 * The codec wants 16-byte aligned buffers and whole pairs of groups, so a
 * misaligned or short chunk goes through a zero-padded staging copy. */
static int encode_user(job *jb, int i, const void *x, size_t e, void *block) {
  coll_rank *r = &jb->t->r[i];
  size_t ne = coll_block_elems(e, jb->o->taco.group);
  const void *src = x;
  if (!aligned16(x) || ne != e) {
    CK_CUDA(cudaMemcpyAsync(jb->stage_in[i], x, e * jb->es, cudaMemcpyDeviceToDevice, r->codec_stream));
    if (ne > e) CK_CUDA(cudaMemsetAsync(jb->stage_in[i] + e * jb->es, 0, (ne - e) * jb->es, r->codec_stream));
    src = jb->stage_in[i];
  }
  CK_TACO(taco_encode(src, jb->o->dtype, ne, jb->o->taco, block, coll_nonfinite_of(jb->t, i, jb->o),
                      (void *)r->codec_stream));
  return 0;
}

/* y = sum of k blocks (back to back) holding e elements each, decoded;
 * staged like encode_user. */
static int decode_user(job *jb, int i, const void *blocks, int k, size_t e, void *y) {
  coll_rank *r = &jb->t->r[i];
  size_t ne = coll_block_elems(e, jb->o->taco.group);
  int direct = aligned16(y) && ne == e;
  void *dst = direct ? y : (void *)jb->stage_out[i];
  CK_TACO(taco_decode_sum(blocks, k, ne, jb->o->taco, dst, jb->o->dtype, (void *)r->codec_stream));
  if (!direct) CK_CUDA(cudaMemcpyAsync(y, dst, e * jb->es, cudaMemcpyDeviceToDevice, r->codec_stream));
  return 0;
}

/* Codec stage of chunk j for local rank i (enqueued on its codec stream). */
static int codec_stage(job *jb, stage_kind k, int i, size_t j) {
  coll_rank *r = &jb->t->r[i];
  const coll_layout *l = &jb->l;
  int n = l->nranks, me = r->rank;
  size_t off = coll_chunk_offset(l, j), wm = bw(jb, l->m), at = j * l->m * jb->es;
  size_t mine = coll_chunk_elems(l, me, j), slot_ag = bw(jb, coll_chunk_elems(l, 0, j));
  switch (k) {
  case ST_ENC_SEGS:
    for (int p = 0; p < n; p++) {
      size_t e = coll_chunk_elems(l, p, j);
      if (!e) continue;
      const unsigned char *x = jb->send[i] + (size_t)p * l->seg * jb->es + at;
      unsigned char *dst = p == me ? jb->wb[i] + off + (size_t)me * bw(jb, mine) : jb->wa[i] + off + (size_t)p * wm;
      CK(encode_user(jb, i, x, e, dst));
    }
    return 0;
  case ST_ENC_OWN:
    if (mine) CK(encode_user(jb, i, jb->send[i] + at, mine, jb->wc[i] + off + (size_t)me * slot_ag));
    return 0;
  case ST_ENC_P2P:
    if (jb->send_peer[i] >= 0) CK(encode_user(jb, i, jb->send[i] + at, coll_chunk_elems(l, 0, j), jb->wa[i] + off));
    return 0;
  case ST_DSE:
    if (mine)
      CK_TACO(taco_decode_sum_encode(jb->wb[i] + off, n, coll_block_elems(mine, jb->o->taco.group), jb->o->taco,
                                     jb->wc[i] + off + (size_t)me * slot_ag, (void *)r->codec_stream));
    return 0;
  case ST_DSUM:
    if (mine) CK(decode_user(jb, i, jb->wb[i] + off, n, mine, jb->recv[i] + at));
    return 0;
  case ST_DSUM_AG: /* the n slots are blocks of the same size back to back */
    if (mine) CK(decode_user(jb, i, jb->wc[i] + off, n, mine, jb->recv[i] + at));
    return 0;
  case ST_DEC_SEGS:
    for (int p = 0; p < n; p++) {
      size_t e = coll_chunk_elems(l, p, j);
      if (e) CK(decode_user(jb, i, jb->wc[i] + off + (size_t)p * slot_ag, 1, e, jb->recv[i] + (size_t)p * l->seg * jb->es + at));
    }
    return 0;
  case ST_DEC_A2A:
    for (int p = 0; p < n && mine; p++)
      CK(decode_user(jb, i, jb->wb[i] + off + (size_t)p * bw(jb, mine), 1, mine, jb->recv[i] + (size_t)p * l->seg * jb->es + at));
    return 0;
  case ST_DEC_P2P:
    if (jb->recv_peer[i] >= 0) CK(decode_user(jb, i, jb->wb[i] + off, 1, coll_chunk_elems(l, 0, j), jb->recv[i] + at));
    return 0;
  default: return coll_fail(__FILE__, __LINE__, "codec_stage", "not a codec stage");
  }
}

/* Comm stage of chunk j for local rank i (inside the caller's NCCL group). */
static int comm_stage(job *jb, stage_kind k, int i, size_t j) {
  coll_rank *r = &jb->t->r[i];
  const coll_layout *l = &jb->l;
  int n = l->nranks, me = r->rank;
  cudaStream_t st = r->comm_stream;
  size_t off = coll_chunk_offset(l, j), wm = bw(jb, l->m), mine = coll_chunk_elems(l, me, j);
  switch (k) {
  case ST_A2A:
    if (n == 2 && jb->o->exchange == COLL_EXCHANGE_ALLGATHER) {
      /* Each rank contributes the block for its peer; slots are as large as
       * the larger of the two blocks (segment 0's), the rest is ignored. */
      int peer = 1 - me;
      size_t slot = bw(jb, coll_chunk_elems(l, 0, j));
      CK_NCCL(ncclAllGather(jb->wa[i] + off + (size_t)peer * wm, jb->wd[i] + off, slot, ncclUint8, r->comm, st));
      return 0; /* the received block is moved next to ours in comm_stage_after */
    }
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      size_t to = coll_chunk_elems(l, p, j);
      if (to) CK_NCCL(ncclSend(jb->wa[i] + off + (size_t)p * wm, bw(jb, to), ncclUint8, p, r->comm, st));
      if (mine) CK_NCCL(ncclRecv(jb->wb[i] + off + (size_t)p * bw(jb, mine), bw(jb, mine), ncclUint8, p, r->comm, st));
    }
    return 0;
  case ST_AG: {
    size_t slot = bw(jb, coll_chunk_elems(l, 0, j));
    unsigned char *base = jb->wc[i] + off;
    CK_NCCL(ncclAllGather(base + (size_t)me * slot, base, slot, ncclUint8, r->comm, st));
    return 0;
  }
  case ST_P2P: {
    size_t bytes = bw(jb, coll_chunk_elems(l, 0, j));
    if (jb->send_peer[i] >= 0) CK_NCCL(ncclSend(jb->wa[i] + off, bytes, ncclUint8, jb->send_peer[i], r->comm, st));
    if (jb->recv_peer[i] >= 0) CK_NCCL(ncclRecv(jb->wb[i] + off, bytes, ncclUint8, jb->recv_peer[i], r->comm, st));
    return 0;
  }
  default: return coll_fail(__FILE__, __LINE__, "comm_stage", "not a comm stage");
  }
}

/* Work on the comm stream after the NCCL group of a stage was launched. */
static int comm_stage_after(job *jb, stage_kind k, int i, size_t j) {
  coll_rank *r = &jb->t->r[i];
  const coll_layout *l = &jb->l;
  int me = r->rank;
  size_t off = coll_chunk_offset(l, j), mine = coll_chunk_elems(l, me, j);
  if (k == ST_A2A && l->nranks == 2 && jb->o->exchange == COLL_EXCHANGE_ALLGATHER && mine) {
    /* decode_sum wants the blocks back to back: peer's block beside ours */
    int peer = 1 - me;
    size_t slot = bw(jb, coll_chunk_elems(l, 0, j));
    CK_CUDA(cudaMemcpyAsync(jb->wb[i] + off + (size_t)peer * bw(jb, mine), jb->wd[i] + off + (size_t)peer * slot,
                            bw(jb, mine), cudaMemcpyDeviceToDevice, r->comm_stream));
  }
  return 0;
}

/* Enqueues tick `tick`: first the codec stages (each after the previous
 * stage of its chunk), then every comm stage of the tick in one NCCL group,
 * so the all-to-all of one chunk and the all-gather of the previous one run
 * in the same NCCL launch. Stage s handles chunk tick - s/2. */
static int run_tick(job *jb, size_t tick) {
  coll_team *t = jb->t;
  size_t nc = jb->l.nchunks;
  int comm_stages[COLL_STAGES], ncomm = 0;
  for (int s = 0; s < jb->nstages; s++) {
    size_t lag = (size_t)s / 2;
    if (tick < lag || tick - lag >= nc) continue;
    if (stage_on_comm(jb->stages[s])) {
      comm_stages[ncomm++] = s;
      continue;
    }
    size_t j = tick - lag;
    int slot = (int)(j % COLL_EVENT_SLOTS);
    for (int i = 0; i < t->nlocal; i++) {
      coll_rank *r = &t->r[i];
      CK_CUDA(cudaSetDevice(r->device));
      if (s > 0) CK_CUDA(cudaStreamWaitEvent(r->codec_stream, r->ev_stage[s - 1][slot], 0));
      CK(codec_stage(jb, jb->stages[s], i, j));
      CK_CUDA(cudaEventRecord(r->ev_stage[s][slot], r->codec_stream));
    }
  }
  if (!ncomm) return 0;
  for (int c = 0; c < ncomm; c++) {
    int s = comm_stages[c], slot = (int)((tick - (size_t)s / 2) % COLL_EVENT_SLOTS);
    for (int i = 0; i < t->nlocal; i++) {
      CK_CUDA(cudaSetDevice(t->r[i].device));
      CK_CUDA(cudaStreamWaitEvent(t->r[i].comm_stream, t->r[i].ev_stage[s - 1][slot], 0));
    }
  }
  CK_NCCL(ncclGroupStart());
  for (int c = 0; c < ncomm; c++)
    for (int i = 0; i < t->nlocal; i++) CK(comm_stage(jb, jb->stages[comm_stages[c]], i, tick - (size_t)comm_stages[c] / 2));
  CK_NCCL(ncclGroupEnd());
  for (int c = 0; c < ncomm; c++) {
    int s = comm_stages[c];
    size_t j = tick - (size_t)s / 2;
    for (int i = 0; i < t->nlocal; i++) {
      coll_rank *r = &t->r[i];
      CK_CUDA(cudaSetDevice(r->device));
      CK(comm_stage_after(jb, jb->stages[s], i, j));
      CK_CUDA(cudaEventRecord(r->ev_stage[s][j % COLL_EVENT_SLOTS], r->comm_stream));
    }
  }
  return 0;
}

static int run_job(job *jb) {
  coll_team *t = jb->t;
  size_t need = wire_need(&jb->l, jb->es), part = align256(coll_wire_buffer_bytes(&jb->l));
  size_t stage = stage_bytes(&jb->l, jb->es);
  for (int i = 0; i < t->nlocal; i++) {
    coll_rank *r = &t->r[i];
    CK(grow(t, r, (void **)&r->wire, &r->wire_bytes, need));
    jb->wa[i] = r->wire;
    jb->wb[i] = r->wire + part;
    jb->wc[i] = r->wire + 2 * part;
    jb->wd[i] = r->wire + 3 * part;
    jb->stage_in[i] = r->wire + 4 * part;
    jb->stage_out[i] = r->wire + 4 * part + stage;
    CK_CUDA(cudaSetDevice(r->device));
    CK_CUDA(cudaEventRecord(r->ev_start, r->stream));
    CK_CUDA(cudaStreamWaitEvent(r->codec_stream, r->ev_start, 0));
    CK_CUDA(cudaStreamWaitEvent(r->comm_stream, r->ev_start, 0));
  }
  size_t nc = jb->l.nchunks, ticks = nc + (size_t)(jb->nstages - 1) / 2;
  for (size_t tick = 0; tick < ticks; tick++) CK(run_tick(jb, tick));
  for (int i = 0; i < t->nlocal; i++) {
    coll_rank *r = &t->r[i];
    CK_CUDA(cudaSetDevice(r->device));
    CK_CUDA(cudaEventRecord(r->ev_codec_done, r->codec_stream));
    CK_CUDA(cudaEventRecord(r->ev_comm_done, r->comm_stream));
    CK_CUDA(cudaStreamWaitEvent(r->stream, r->ev_codec_done, 0));
    CK_CUDA(cudaStreamWaitEvent(r->stream, r->ev_comm_done, 0));
  }
  return 0;
}

static int check_opts(const coll_team *t, const coll_opts *o) {
  if (!t || t->nlocal < 1) return coll_fail(__FILE__, __LINE__, "coll", "team not initialised");
  if (!o) return coll_fail(__FILE__, __LINE__, "coll", "no options");
  if (o->dtype != TACO_DTYPE_BF16 && o->dtype != TACO_DTYPE_FP32) return coll_fail(__FILE__, __LINE__, "coll", "dtype");
  if (o->codec != COLL_CODEC_NONE && o->codec != COLL_CODEC_TACO && o->codec != COLL_CODEC_NONE_DIRECT)
    return coll_fail(__FILE__, __LINE__, "coll", "codec must be NONE, TACO or NONE_DIRECT");
  if (o->codec != COLL_CODEC_NONE && !taco_params_valid(o->taco))
    return coll_fail(__FILE__, __LINE__, "coll", "TACO group must be 32, 64, 128, 256 or 512");
  if (o->allreduce != COLL_ALLREDUCE_AUTO && o->allreduce != COLL_ALLREDUCE_TWO_SHOT &&
      o->allreduce != COLL_ALLREDUCE_ONE_SHOT)
    return coll_fail(__FILE__, __LINE__, "coll", "allreduce algorithm must be AUTO, TWO_SHOT or ONE_SHOT");
  if (o->direct != COLL_DIRECT_AUTO && o->direct != COLL_DIRECT_OFF && o->direct != COLL_DIRECT_ON)
    return coll_fail(__FILE__, __LINE__, "coll", "direct mode must be AUTO, OFF or ON");
  return 0;
}

static int dispatch(coll_team *t, coll_op op, const void *const *send, void *const *recv, const int *send_peer,
                    const int *recv_peer, size_t count, const coll_opts *o) {
  CK(check_opts(t, o));
  size_t bytes = coll_total_elems(op, count, t->nranks) * coll_dtype_bytes(o->dtype);
  if (o->codec == COLL_CODEC_NONE_DIRECT && count > 0) {
    /* uncompressed through the direct path: the transport alone */
    if (op != COLL_OP_ALLGATHER && op != COLL_OP_REDUCESCATTER && op != COLL_OP_ALLREDUCE)
      return coll_fail(__FILE__, __LINE__, "COLL_CODEC_NONE_DIRECT", "all-gather, reduce-scatter, all-reduce only");
    coll_opts on = *o;
    on.direct = COLL_DIRECT_ON;
    if (coll_direct_choose(t, op, bytes, send_peer, recv_peer, &on) != 1) return -1;
    return coll_direct_run(t, op, send, recv, send_peer, recv_peer, count, &on);
  }
  if (o->codec != COLL_CODEC_TACO || !coll_use_codec(bytes, o->min_bytes) || count == 0)
    return plain(t, op, send, recv, send_peer, recv_peer, count, o->dtype);
  int direct = coll_direct_choose(t, op, bytes, send_peer, recv_peer, o);
  if (direct < 0) return -1;
  if (direct) return coll_direct_run(t, op, send, recv, send_peer, recv_peer, count, o);
  job jb;
  memset(&jb, 0, sizeof jb);
  jb.t = t;
  jb.o = o;
  jb.es = coll_dtype_bytes(o->dtype);
  CK(make_layout(&jb.l, t, op, count, o));
  for (int i = 0; i < t->nlocal; i++) {
    jb.send[i] = send[i];
    jb.recv[i] = recv[i];
    jb.send_peer[i] = send_peer ? send_peer[i] : -1;
    jb.recv_peer[i] = recv_peer ? recv_peer[i] : -1;
  }
  static const stage_kind plans[COLL_OP_COUNT][COLL_STAGES] = {
      [COLL_OP_ALLREDUCE] = {ST_ENC_SEGS, ST_A2A, ST_DSE, ST_AG, ST_DEC_SEGS},
      [COLL_OP_ALLGATHER] = {ST_ENC_OWN, ST_AG, ST_DEC_SEGS},
      [COLL_OP_REDUCESCATTER] = {ST_ENC_SEGS, ST_A2A, ST_DSUM},
      [COLL_OP_ALLTOALL] = {ST_ENC_SEGS, ST_A2A, ST_DEC_A2A},
      [COLL_OP_SENDRECV] = {ST_ENC_P2P, ST_P2P, ST_DEC_P2P},
  };
  jb.nstages = op == COLL_OP_ALLREDUCE ? 5 : 3;
  memcpy(jb.stages, plans[op], sizeof jb.stages);
  if (one_shot(t, op, o)) {
    static const stage_kind one[COLL_STAGES] = {ST_ENC_OWN, ST_AG, ST_DSUM_AG};
    jb.nstages = 3;
    memcpy(jb.stages, one, sizeof jb.stages);
  }
  return run_job(&jb);
}

int coll_allgather(coll_team *t, const void *const *send, void *const *recv, size_t count, const coll_opts *o) {
  return dispatch(t, COLL_OP_ALLGATHER, send, recv, NULL, NULL, count, o);
}
int coll_reducescatter(coll_team *t, const void *const *send, void *const *recv, size_t count,
                       const coll_opts *o) {
  return dispatch(t, COLL_OP_REDUCESCATTER, send, recv, NULL, NULL, count, o);
}
int coll_allreduce(coll_team *t, const void *const *send, void *const *recv, size_t count, const coll_opts *o) {
  return dispatch(t, COLL_OP_ALLREDUCE, send, recv, NULL, NULL, count, o);
}
int coll_alltoall(coll_team *t, const void *const *send, void *const *recv, size_t count, const coll_opts *o) {
  return dispatch(t, COLL_OP_ALLTOALL, send, recv, NULL, NULL, count, o);
}
int coll_sendrecv(coll_team *t, const void *const *send, const int *send_peer, void *const *recv,
                  const int *recv_peer, size_t count, const coll_opts *o) {
  return dispatch(t, COLL_OP_SENDRECV, send, recv, send_peer, recv_peer, count, o);
}

int coll_run(coll_team *t, coll_op op, const void *const *send, void *const *recv, size_t count,
             const coll_opts *o) {
  if (op != COLL_OP_SENDRECV) return dispatch(t, op, send, recv, NULL, NULL, count, o);
  int to[COLL_MAX_LOCAL], from[COLL_MAX_LOCAL];
  for (int i = 0; i < t->nlocal; i++) {
    int n = t->nranks, me = t->r[i].rank;
    to[i] = n > 1 ? (me + 1) % n : -1;
    from[i] = n > 1 ? (me + n - 1) % n : -1;
  }
  if (t->nranks == 1) { /* a ring of one: a copy, so the output is defined */
    for (int i = 0; i < t->nlocal; i++) {
      size_t bytes = count * coll_dtype_bytes(o->dtype);
      CK_CUDA(cudaSetDevice(t->r[i].device));
      if (send[i] != recv[i]) CK_CUDA(cudaMemcpyAsync(recv[i], send[i], bytes, cudaMemcpyDeviceToDevice, t->r[i].stream));
    }
    return 0;
  }
  return dispatch(t, op, send, recv, to, from, count, o);
}

/* ---- CAAT-Net partial all-reduce ---------------------------------------- */

int coll_caat_allreduce(coll_team *t, const void *const *x, void *const *y, size_t rows, size_t cols, double p,
                        const coll_opts *o) {
  CK(check_opts(t, o));
  size_t shared = coll_caat_shared(cols, p), es = coll_dtype_bytes(o->dtype);
  float scale = (float)sqrt((double)t->nranks);
  void *packed[COLL_MAX_LOCAL];
  for (int i = 0; i < t->nlocal; i++) {
    coll_rank *r = &t->r[i];
    CK(grow(t, r, &r->pack, &r->pack_bytes, rows * shared * es + 16));
    packed[i] = r->pack;
    CK_CUDA(cudaSetDevice(r->device));
    void *st = (void *)r->stream;
    if (x[i] != y[i]) CK_CUDA(cudaMemcpyAsync(y[i], x[i], rows * cols * es, cudaMemcpyDeviceToDevice, r->stream));
    if (shared) CK_TACO(caat_gather_shared(y[i], o->dtype, rows, cols, shared, packed[i], st));
    if (shared < cols) CK_TACO(caat_scale_private(y[i], o->dtype, rows, cols, shared, scale, st));
  }
  if (shared) {
    CK(dispatch(t, COLL_OP_ALLREDUCE, (const void *const *)packed, packed, NULL, NULL, rows * shared, o));
    for (int i = 0; i < t->nlocal; i++) {
      coll_rank *r = &t->r[i];
      CK_CUDA(cudaSetDevice(r->device));
      CK_TACO(caat_scatter_shared(packed[i], o->dtype, rows, cols, shared, y[i], (void *)r->stream));
    }
  }
  return 0;
}

/* ---- variant names ---- */

static const char *const direct_ar_names[] = {"auto", "whole", "pipe", "copy"};
static const char *const push_names[] = {"auto", "encode", "copy"};

const char *coll_direct_ar_name(coll_direct_ar v) { return (unsigned)v < 4 ? direct_ar_names[v] : "?"; }
const char *coll_push_name(coll_push v) { return (unsigned)v < 3 ? push_names[v] : "?"; }

static int parse_name(const char *s, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

int coll_direct_ar_parse(const char *s, coll_direct_ar *v) {
  int i = parse_name(s, direct_ar_names, 4);
  if (i < 0) return -1;
  *v = (coll_direct_ar)i;
  return 0;
}

int coll_push_parse(const char *s, coll_push *v) {
  int i = parse_name(s, push_names, 3);
  if (i < 0) return -1;
  *v = (coll_push)i;
  return 0;
}

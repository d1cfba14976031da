/* coll_direct_staging.c — the staging of the direct path: how many bytes a
 * call needs (its chunk layout), and growing every rank's staging and bounce
 * buffers to that, collectively (coll_direct_internal.h). */
#include <stdio.h>
#include <string.h>

#include "coll_direct_internal.h"

/* ---- staging ------------------------------------------------------------- */

/* Host-memory flavour: each rank's GPU staging (decoded from; peers never
 * touch it) and its host staging (the peers write into it). The streams are
 * idle: every peer's writes into our old host staging completed before the
 * signals we have waited for. */
static int grow_host_staging(coll_team *t, size_t half) {
  struct coll_direct *D = t->direct;
  int n = t->nranks;
  for (int i = 0; i < t->nlocal; i++) {
    direct_rank *d = &D->d[i];
    CK_CUDA(cudaSetDevice(t->r[i].device));
    for (int p = 0; p < COLL_DIRECT_MAX; p++) {
      coll_host_free(&d->peer_hstage[p]);
      d->peer_stage[p] = NULL;
    }
    coll_host_free(&d->hstage);
    CK_CUDA(cudaFree(d->stage));
    d->stage = NULL;
    CK_CUDA(cudaMalloc((void **)&d->stage, 2 * half));
  }
  D->half = 0;
  if (!D->ipc) {
    for (int i = 0; i < n; i++) {
      CK_CUDA(cudaSetDevice(t->r[i].device));
      CK(coll_host_alloc(&D->d[i].hstage, 2 * half));
    }
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        D->d[i].peer_stage[t->r[j].rank] = i == j ? D->d[i].stage : (unsigned char *)D->d[j].hstage.dev;
    D->half = half;
    return 0;
  }
  coll_rank *r = &t->r[0];
  direct_rank *d = &D->d[0];
  struct {
    char name[64];
    int ok;
  } mine, all[COLL_DIRECT_MAX];
  memset(&mine, 0, sizeof mine);
  mine.ok = coll_host_create_shared(&d->hstage, 2 * half) == 0;
  char err[200] = "";
  if (!mine.ok) snprintf(err, sizeof err, "%s", coll_last_error());
  else snprintf(mine.name, sizeof mine.name, "%s", d->hstage.name);
  CK(direct_exchange(t, &mine, sizeof mine, all));
  int ok = mine.ok;
  for (int p = 0; p < n && ok; p++) {
    if (p == r->rank) continue;
    if (!all[p].ok) {
      snprintf(err, sizeof err, "rank %d could not allocate its host staging", p);
      ok = 0;
    } else if (coll_host_open_shared(&d->peer_hstage[p], all[p].name, 2 * half)) {
      snprintf(err, sizeof err, "%s", coll_last_error());
      ok = 0;
    }
  }
  int oks[COLL_DIRECT_MAX];
  CK(direct_exchange(t, &ok, sizeof ok, oks)); /* every peer has mapped ours */
  CK(coll_host_unlink(&d->hstage));
  if (!ok) return coll_set_error(__FILE__, __LINE__, "host staging", err);
  for (int p = 0; p < n; p++)
    if (!oks[p]) return coll_set_error(__FILE__, __LINE__, "host staging", "a peer could not map the host staging");
  for (int p = 0; p < n; p++) d->peer_stage[p] = p == r->rank ? d->stage : (unsigned char *)d->peer_hstage[p].dev;
  D->half = half;
  return 0;
}

/* Collective: every rank computes the same `half` from the call. */
int direct_grow_staging(coll_team *t, size_t half) {
  struct coll_direct *D = t->direct;
  if (half <= D->half) return 0;
  int n = t->nranks;
  for (int i = 0; i < t->nlocal; i++) CK(coll_rank_idle(&t->r[i], coll_team_timeout(t)));
  if (D->host) return grow_host_staging(t, half);
  if (!D->ipc) {
    for (int i = 0; i < t->nlocal; i++) {
      direct_rank *d = &D->d[i];
      CK_CUDA(cudaSetDevice(t->r[i].device));
      CK_CUDA(cudaFree(d->stage));
      d->stage = NULL;
      CK_CUDA(cudaMalloc((void **)&d->stage, 2 * half));
    }
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) D->d[i].peer_stage[t->r[j].rank] = D->d[j].stage;
    D->half = half;
    return 0;
  }
  /* One process per GPU: close our mappings of the peers' old buffers, make
   * ours, exchange handles, map theirs; our old buffer is freed only after
   * the exchange, when every peer has closed its mapping of it. */
  coll_rank *r = &t->r[0];
  direct_rank *d = &D->d[0];
  for (int p = 0; p < n; p++)
    if (p != r->rank && d->peer_stage[p]) {
      CK_CUDA(cudaIpcCloseMemHandle(d->peer_stage[p]));
      d->peer_stage[p] = NULL;
    }
  unsigned char *old = d->stage;
  d->stage = NULL;
  struct {
    cudaIpcMemHandle_t handle;
    int ok;
  } mine, all[COLL_DIRECT_MAX];
  memset(&mine, 0, sizeof mine);
  cudaError_t ce = cudaMalloc((void **)&d->stage, 2 * half);
  if (ce == cudaSuccess) ce = cudaIpcGetMemHandle(&mine.handle, d->stage);
  mine.ok = ce == cudaSuccess;
  if (!mine.ok) cudaGetLastError();
  CK(direct_exchange(t, &mine, sizeof mine, all));
  CK_CUDA(cudaFree(old));
  if (!mine.ok) return coll_set_error(__FILE__, __LINE__, "direct staging", cudaGetErrorString(ce));
  for (int p = 0; p < n; p++)
    if (!all[p].ok) return coll_set_error(__FILE__, __LINE__, "direct staging", "a peer could not allocate its staging");
  for (int p = 0; p < n; p++) {
    if (p == r->rank) continue;
    CK_CUDA(cudaIpcOpenMemHandle((void **)&d->peer_stage[p], all[p].handle, cudaIpcMemLazyEnablePeerAccess));
  }
  d->peer_stage[r->rank] = d->stage;
  D->half = half;
  return 0;
}

int direct_grow_local(const coll_team *t, coll_rank *r, unsigned char **buf, size_t *have, size_t need) {
  if (need <= *have) return 0;
  CK(coll_rank_idle(r, coll_team_timeout(t)));
  CK_CUDA(cudaFree(*buf));
  *buf = NULL;
  *have = 0;
  CK_CUDA(cudaMalloc((void **)buf, need));
  *have = need;
  return 0;
}

static size_t chunk_bytes_of(const coll_team *t, const coll_opts *o) {
  if (o->direct_chunk_bytes) return o->direct_chunk_bytes;
  return t->direct && t->direct->host ? COLL_HOST_DEFAULT_CHUNK_BYTES : COLL_DIRECT_DEFAULT_CHUNK_BYTES;
}

/* The chunked calls (all-gather, reduce-scatter, one-shot all-reduce) cut the
 * message as coll_layout does; the one-shot all-reduce like an all-gather of
 * `count` per rank. Returns -1 on a bad layout. */
int direct_chunk_layout(const coll_team *t, coll_layout *l, coll_op op, size_t count, int n, const coll_opts *o) {
  if (op == COLL_OP_ALLREDUCE) op = COLL_OP_ALLGATHER;
  if (coll_layout_make(l, op, count, n, o->taco.group, coll_dtype_bytes(o->dtype), chunk_bytes_of(t, o)))
    return coll_set_error(__FILE__, __LINE__, "coll_layout_make", "bad group size or rank count");
  return 0;
}

/* Bytes of one parity half of the staging for a call (the same on every rank). */
int direct_staging_half(const coll_team *t, coll_op op, int one, size_t count, int n, const coll_opts *o,
                        size_t *half) {
  coll_direct_sizes s;
  int plain = o->codec != COLL_CODEC_TACO;
  coll_direct_sizes_of(op, one, count, n, o->taco.group, &s);
  *half = s.half;
  if (plain) *half = ((size_t)n * wire_of(1, coll_dtype_bytes(o->dtype), count, o->taco.group) + 255) & ~(size_t)255;
  if (op == COLL_OP_SENDRECV || (op == COLL_OP_ALLREDUCE && !one)) return 0;
  coll_layout l;
  CK(direct_chunk_layout(t, &l, op, count, n, o));
  size_t chunked = (chunk_offset_of(plain, coll_dtype_bytes(o->dtype), &l, l.nchunks) + 255) & ~(size_t)255;
  if (chunked > *half) *half = chunked;
  return 0;
}

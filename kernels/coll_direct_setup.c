/* coll_direct_setup.c — the direct path's set-up and tear-down for a team:
 * flags and events per local rank, peer access over NVLink (one process or
 * CUDA IPC) or the host-memory flavour's shared pinned memory, the handle
 * exchange, and the registry of fault words (coll_direct_internal.h). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_direct_internal.h"

/* ---- the registry of fault words (read by coll_direct_fault) ------------- */

#define MAX_TEAMS 64
static struct {
  const coll_direct_fault_word *word;
  int rank;
} registry[MAX_TEAMS];

static void registry_add(const coll_direct_fault_word *w, int rank) {
  for (int i = 0; i < MAX_TEAMS; i++)
    if (!registry[i].word) {
      registry[i].word = w;
      registry[i].rank = rank;
      return;
    }
}

static void registry_remove(const coll_direct_fault_word *w) {
  for (int i = 0; i < MAX_TEAMS; i++)
    if (registry[i].word == w) registry[i].word = NULL;
}

const char *coll_direct_fault(void) {
  static char msg[256];
  for (int i = 0; i < MAX_TEAMS; i++) {
    const coll_direct_fault_word *w = registry[i].word;
    if (w && w->code) {
      snprintf(msg, sizeof msg,
               "rank %d: direct exchange: peer rank %u did not signal sequence %llu in time (its word held %llu): "
               "peer dead or stopped answering",
               registry[i].rank, w->src, (unsigned long long)w->seq, (unsigned long long)w->seen);
      return msg;
    }
  }
  return NULL;
}

unsigned long long coll_direct_pipe_calls(const struct coll_direct *d) { return d ? d->pipe_calls : 0; }

int coll_team_set_timeout(coll_team *t, double seconds) {
  if (!(seconds > 0)) return coll_set_error(__FILE__, __LINE__, "coll_team_set_timeout", "must be > 0");
  t->timeout_s = seconds;
  return 0;
}

/* ---- set-up -------------------------------------------------------------- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits for the stream within the team's timeout (a dead peer must not hang
 * the set-up's NCCL all-gather). */
static int bounded_sync(const coll_team *t, cudaStream_t st) {
  double until = now_s() + timeout_of(t);
  for (;;) {
    cudaError_t q = cudaStreamQuery(st);
    if (q == cudaSuccess) return 0;
    if (q != cudaErrorNotReady) return coll_set_error(__FILE__, __LINE__, "cudaStreamQuery", cudaGetErrorString(q));
    if (now_s() > until)
      return coll_set_error(__FILE__, __LINE__, "direct set-up", "peers did not answer the handle exchange in time");
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
}

/* One process per GPU: all[p * sz ...] = rank p's `mine` (sz <= XCHG_BYTES). */
int direct_exchange(coll_team *t, const void *mine, size_t sz, void *all) {
  coll_rank *r = &t->r[0];
  direct_rank *d = &t->direct->d[0];
  CK_CUDA(cudaSetDevice(r->device));
  CK_CUDA(cudaMemcpyAsync(d->xbuf + (size_t)r->rank * XCHG_BYTES, mine, sz, cudaMemcpyHostToDevice, r->stream));
  CK_NCCL(ncclAllGather(d->xbuf + (size_t)r->rank * XCHG_BYTES, d->xbuf, XCHG_BYTES, ncclUint8, r->comm, r->stream));
  unsigned char *host = malloc((size_t)t->nranks * XCHG_BYTES);
  if (!host) return coll_set_error(__FILE__, __LINE__, "exchange", "out of memory");
  cudaError_t ce = cudaMemcpyAsync(host, d->xbuf, (size_t)t->nranks * XCHG_BYTES, cudaMemcpyDeviceToHost, r->stream);
  int rc = ce == cudaSuccess ? bounded_sync(t, r->stream)
                             : coll_set_error(__FILE__, __LINE__, "cudaMemcpyAsync", cudaGetErrorString(ce));
  for (int p = 0; p < t->nranks && !rc; p++) memcpy((char *)all + (size_t)p * sz, host + (size_t)p * XCHG_BYTES, sz);
  free(host);
  return rc;
}

typedef struct {
  unsigned long long host;
  char bus[32];
  cudaIpcMemHandle_t handle;
  int ok;
} setup_info;

static unsigned long long host_hash(void) {
  char name[256] = "";
  gethostname(name, sizeof name - 1);
  unsigned long long h = 1469598103934665603ull;
  for (const char *c = name; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
  return h;
}

/* What the caller's transport lets the direct paths use (coll_set_links);
 * whether peer access actually works is asked of CUDA at set-up. */
static int links_peer = 1, links_host_shm = 1;

void coll_set_links(int peer, int host_shm) {
  links_peer = peer != 0;
  links_host_shm = host_shm != 0;
}

void coll_team_set_host(coll_team *t, coll_direct_mode mode) { t->host_mode = mode; }

/* One process drives all n GPUs: every rank's flag words are reachable by
 * every other's pointer as they are; the team's direct state is ready. */
static int wire_local_flags(coll_team *t, int n) {
  struct coll_direct *D = t->direct;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) D->d[i].peer_flags[t->r[j].rank] = D->d[j].flags;
  D->state = 1;
  return 0;
}

/* The path is on only where every rank can use it: oks[] is each rank's
 * verdict (exchanged); the first rank that cannot is named in D->why. */
static void agree(struct coll_direct *D, int ok, const int *oks, int n, const char *path) {
  for (int p = 0; p < n && ok; p++)
    if (!oks[p]) {
      snprintf(D->why, sizeof D->why, "rank %d cannot use %s", p, path);
      ok = 0;
    }
  if (ok) D->state = 1;
}

/* Host-memory flavour: the flag words in pinned host memory every rank maps
 * (coll_host.h). One process per GPU: a shared-memory object per rank, names
 * exchanged, unlinked once every peer has mapped it. */
static int setup_host(coll_team *t) {
  struct coll_direct *D = t->direct;
  int n = t->nranks;
  size_t fbytes = COLL_DIRECT_MAX * sizeof(unsigned long long);
  if (!D->ipc) {
    for (int i = 0; i < n; i++) {
      CK_CUDA(cudaSetDevice(t->r[i].device));
      CK(coll_host_alloc(&D->d[i].hflags, fbytes));
      D->d[i].flags = D->d[i].hflags.dev;
    }
    return wire_local_flags(t, n);
  }
  coll_rank *r = &t->r[0];
  direct_rank *d = &D->d[0];
  CK_CUDA(cudaSetDevice(r->device));
  CK(coll_host_create_shared(&d->hflags, fbytes));
  d->flags = d->hflags.dev;
  struct {
    unsigned long long host;
    char name[64];
  } mine, all[COLL_DIRECT_MAX];
  memset(&mine, 0, sizeof mine);
  mine.host = host_hash();
  snprintf(mine.name, sizeof mine.name, "%s", d->hflags.name);
  CK(direct_exchange(t, &mine, sizeof mine, all));
  int ok = 1;
  for (int p = 0; p < n && ok; p++) {
    if (p == r->rank) continue;
    if (all[p].host != mine.host) {
      snprintf(D->why, sizeof D->why, "rank %d is on another host", p);
      ok = 0;
    } else if (coll_host_open_shared(&d->peer_hflags[p], all[p].name, fbytes)) {
      snprintf(D->why, sizeof D->why, "cannot map rank %d's flags: %.150s", p, coll_last_error());
      ok = 0;
    } else {
      d->peer_flags[p] = d->peer_hflags[p].dev;
    }
  }
  d->peer_flags[r->rank] = d->flags;
  int oks[COLL_DIRECT_MAX];
  CK(direct_exchange(t, &ok, sizeof ok, oks)); /* also: every peer has mapped ours (or given up) */
  CK(coll_host_unlink(&d->hflags));
  agree(D, ok, oks, n, "the host-memory path");
  return 0;
}

/* Sets d->state and d->why; returns -1 only on CUDA/NCCL errors. */
static int setup(coll_team *t) {
  struct coll_direct *D = t->direct;
  int n = t->nranks;
  D->state = -1;
  coll_direct_mode hm = t->host_mode;
  int host = hm == COLL_DIRECT_ON || (hm == COLL_DIRECT_AUTO && !links_peer && links_host_shm);
  if (!host && !links_peer)
    return snprintf(D->why, sizeof D->why, "the transport has no GPU peer access%s",
                    hm == COLL_DIRECT_OFF ? " (host flavour off)" : !links_host_shm ? " (nor shared host memory)" : ""), 0;
  if (n < 2 || n > COLL_DIRECT_MAX)
    return snprintf(D->why, sizeof D->why, "%d ranks (the direct path takes 2..%d)", n, COLL_DIRECT_MAX), 0;
  if (t->nlocal != 1 && t->nlocal != n)
    return snprintf(D->why, sizeof D->why, "some ranks local, some not (single process must hold all)"), 0;
  D->ipc = t->nlocal == 1;
  D->host = host;
  for (int i = 0; i < t->nlocal; i++) {
    coll_rank *r = &t->r[i];
    direct_rank *d = &D->d[i];
    CK_CUDA(cudaSetDevice(r->device));
    if (!host) {
      CK_CUDA(cudaMalloc((void **)&d->flags, COLL_DIRECT_MAX * sizeof *d->flags));
      CK_CUDA(cudaMemset(d->flags, 0, COLL_DIRECT_MAX * sizeof *d->flags));
    }
    CK_CUDA(cudaHostAlloc((void **)&d->fault_host, sizeof *d->fault_host, cudaHostAllocMapped | cudaHostAllocPortable));
    memset((void *)d->fault_host, 0, sizeof *d->fault_host);
    CK_CUDA(cudaHostGetDevicePointer((void **)&d->fault_dev, (void *)d->fault_host, 0));
    CK_CUDA(cudaEventCreateWithFlags(&d->ev_fork, cudaEventDisableTiming));
    CK_CUDA(cudaEventCreateWithFlags(&d->ev_join, cudaEventDisableTiming));
    for (int k = 0; k < COLL_EVENT_SLOTS; k++) {
      CK_CUDA(cudaEventCreateWithFlags(&d->ev_chunk[k], cudaEventDisableTiming));
      CK_CUDA(cudaEventCreateWithFlags(&d->ev_own[k], cudaEventDisableTiming));
    }
    if (D->ipc) CK_CUDA(cudaMalloc((void **)&d->xbuf, (size_t)n * XCHG_BYTES));
    registry_add(d->fault_host, r->rank);
  }
  if (host) return setup_host(t);
  if (!D->ipc) {
    /* single process: every pair must reach each other; enable it */
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        if (i == j) continue;
        int can = 0;
        CK_CUDA(cudaDeviceCanAccessPeer(&can, t->r[i].device, t->r[j].device));
        if (!can)
          return snprintf(D->why, sizeof D->why, "GPU %d cannot access GPU %d", t->r[i].device, t->r[j].device), 0;
      }
    for (int i = 0; i < n; i++) {
      CK_CUDA(cudaSetDevice(t->r[i].device));
      for (int j = 0; j < n; j++) {
        if (i == j) continue;
        cudaError_t ce = cudaDeviceEnablePeerAccess(t->r[j].device, 0);
        if (ce == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else if (ce != cudaSuccess) return coll_set_error(__FILE__, __LINE__, "cudaDeviceEnablePeerAccess", cudaGetErrorString(ce));
      }
    }
    return wire_local_flags(t, n);
  }
  /* one process per GPU: host, PCI bus id and the flags' IPC handle */
  coll_rank *r = &t->r[0];
  direct_rank *d = &D->d[0];
  setup_info mine, all[COLL_DIRECT_MAX];
  memset(&mine, 0, sizeof mine);
  mine.host = host_hash();
  CK_CUDA(cudaDeviceGetPCIBusId(mine.bus, sizeof mine.bus, r->device));
  CK_CUDA(cudaIpcGetMemHandle(&mine.handle, d->flags));
  CK(direct_exchange(t, &mine, sizeof mine, all));
  int ok = 1;
  for (int p = 0; p < n && ok; p++) {
    if (p == r->rank) continue;
    int dev = -1, can = 0;
    if (all[p].host != mine.host) {
      snprintf(D->why, sizeof D->why, "rank %d is on another host", p);
      ok = 0;
    } else if (cudaDeviceGetByPCIBusId(&dev, all[p].bus) != cudaSuccess) {
      cudaGetLastError();
      snprintf(D->why, sizeof D->why, "rank %d's GPU %s is not visible here", p, all[p].bus);
      ok = 0;
    } else if (cudaDeviceCanAccessPeer(&can, r->device, dev) != cudaSuccess || !can) {
      cudaGetLastError();
      snprintf(D->why, sizeof D->why, "GPU %d cannot access rank %d's GPU %d", r->device, p, dev);
      ok = 0;
    } else if (cudaIpcOpenMemHandle((void **)&d->peer_flags[p], all[p].handle, cudaIpcMemLazyEnablePeerAccess) !=
               cudaSuccess) {
      cudaGetLastError();
      d->peer_flags[p] = NULL;
      snprintf(D->why, sizeof D->why, "cudaIpcOpenMemHandle of rank %d's flags failed", p);
      ok = 0;
    }
  }
  d->peer_flags[r->rank] = d->flags;
  /* every rank must agree */
  int oks[COLL_DIRECT_MAX];
  CK(direct_exchange(t, &ok, sizeof ok, oks));
  agree(D, ok, oks, n, "the direct path");
  return 0;
}

int coll_direct_available(coll_team *t, const char **why) {
  if (why) *why = "";
  if (!t->direct) {
    t->direct = calloc(1, sizeof *t->direct);
    if (!t->direct) return coll_set_error(__FILE__, __LINE__, "coll_direct_available", "out of memory");
  }
  if (t->direct->state == 0 && setup(t)) return -1;
  if (why) *why = t->direct->why;
  return t->direct->state == 1;
}

const char *coll_direct_transport(const coll_team *t) {
  if (!t->direct || t->direct->state != 1) return "none";
  return t->direct->host ? "host" : "nvlink";
}

void coll_direct_destroy(coll_team *t, const int *idle) {
  struct coll_direct *D = t->direct;
  if (!D) return;
  for (int i = 0; i < t->nlocal; i++) {
    direct_rank *d = &D->d[i];
    /* a rank whose kernels may still run (a wait past the team's timeout) keeps
     * its staging, flags and fault word: freeing them under a kernel is worse
     * than the leak of a process that is failing anyway */
    if (!idle[i] || cudaSetDevice(t->r[i].device) != cudaSuccess) continue;
    for (int p = 0; p < COLL_DIRECT_MAX; p++) {
      coll_host_free(&d->peer_hstage[p]);
      coll_host_free(&d->peer_hflags[p]);
    }
    if (D->ipc && !D->host)
      for (int p = 0; p < COLL_DIRECT_MAX; p++) {
        if (p == t->r[i].rank) continue;
        if (d->peer_stage[p]) cudaIpcCloseMemHandle(d->peer_stage[p]);
        if (d->peer_flags[p]) cudaIpcCloseMemHandle(d->peer_flags[p]);
      }
    cudaFree(d->bounce_out);
    cudaFree(d->bounce_in);
    cudaFree(d->stage);
    coll_host_free(&d->hstage);
    cudaFree(d->xbuf);
    for (int k = 0; k < COLL_EVENT_SLOTS; k++) {
      if (d->ev_chunk[k]) cudaEventDestroy(d->ev_chunk[k]);
      if (d->ev_own[k]) cudaEventDestroy(d->ev_own[k]);
    }
    if (d->ev_join) cudaEventDestroy(d->ev_join);
    if (d->ev_fork) cudaEventDestroy(d->ev_fork);
    if (d->fault_host) {
      registry_remove(d->fault_host);
      cudaFreeHost((void *)d->fault_host);
    }
    if (D->host) coll_host_free(&d->hflags);
    else cudaFree(d->flags);
  }
  free(D);
  t->direct = NULL;
}

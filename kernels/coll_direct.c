/* coll_direct.c — the direct path of the compressed collectives: codec
 * kernels writing into the peer GPUs' staging over NVLink, flags instead of
 * NCCL (protocol and algorithms in coll_direct.h); or, through host memory
 * (coll_host.h), into the peers' pinned host staging over PCIe. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll_direct_team.h"
#include "coll_host.h"


/* Per local rank. Pointers indexed by rank: [me] is our own. */
typedef struct {
  unsigned long long *flags;            /* ours: ready word per source rank */
  unsigned long long *peer_flags[COLL_DIRECT_MAX];
  coll_direct_fault_word *fault_host, *fault_dev;
  unsigned char *stage;                 /* ours: two parity halves */
  unsigned char *peer_stage[COLL_DIRECT_MAX];
  unsigned char *bounce_in, *bounce_out; /* zero-padded copies for odd sizes / misaligned buffers */
  size_t bounce_in_bytes, bounce_out_bytes;
  unsigned char *xbuf;                  /* handle exchange (one process per GPU) */
  cudaEvent_t ev_fork, ev_join;
  cudaEvent_t ev_chunk[COLL_EVENT_SLOTS]; /* chunk j's remote encodes done (main stream) */
  cudaEvent_t ev_own[COLL_EVENT_SLOTS];   /* chunk j's own block encoded (main stream, copy mode) */
  /* host-memory flavour (coll_host.h): flags and what peers send us live in
   * pinned host memory; `stage` (GPU) is where the blocks are decoded from */
  coll_host_mem hflags, hstage;                 /* ours */
  coll_host_mem peer_hflags[COLL_DIRECT_MAX];   /* peers' (one process per GPU) */
  coll_host_mem peer_hstage[COLL_DIRECT_MAX];
} direct_rank;

struct coll_direct {
  int state; /* 0: not tried, 1: ready, -1: not possible */
  char why[200];
  int ipc;   /* peers live in other processes */
  int host;  /* 1: staging and flags in pinned host memory (coll_host.h), 0: GPU memory over NVLink */
  unsigned long long seq, calls;
  unsigned long long pipe_calls; /* calls that ran the pipelined two-shot all-reduce */
  size_t half; /* bytes of one parity half of every rank's staging */
  direct_rank d[COLL_MAX_LOCAL];
};

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

static double timeout_of(const coll_team *t) { return t->timeout_s > 0 ? t->timeout_s : 60.0; }

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

#define XCHG_BYTES 256

/* One process per GPU: all[p * sz ...] = rank p's `mine` (sz <= XCHG_BYTES). */
static int exchange(coll_team *t, const void *mine, size_t sz, void *all) {
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
  CK(exchange(t, &mine, sizeof mine, all));
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
  CK(exchange(t, &ok, sizeof ok, oks)); /* also: every peer has mapped ours (or given up) */
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
  CK(exchange(t, &mine, sizeof mine, all));
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
  CK(exchange(t, &ok, sizeof ok, oks));
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
  CK(exchange(t, &mine, sizeof mine, all));
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
  CK(exchange(t, &ok, sizeof ok, oks)); /* every peer has mapped ours */
  CK(coll_host_unlink(&d->hstage));
  if (!ok) return coll_set_error(__FILE__, __LINE__, "host staging", err);
  for (int p = 0; p < n; p++)
    if (!oks[p]) return coll_set_error(__FILE__, __LINE__, "host staging", "a peer could not map the host staging");
  for (int p = 0; p < n; p++) d->peer_stage[p] = p == r->rank ? d->stage : (unsigned char *)d->peer_hstage[p].dev;
  D->half = half;
  return 0;
}

/* Collective: every rank computes the same `half` from the call. */
static int grow_staging(coll_team *t, size_t half) {
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
  CK(exchange(t, &mine, sizeof mine, all));
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

static int grow_local(const coll_team *t, coll_rank *r, unsigned char **buf, size_t *have, size_t need) {
  if (need <= *have) return 0;
  CK(coll_rank_idle(r, coll_team_timeout(t)));
  CK_CUDA(cudaFree(*buf));
  *buf = NULL;
  *have = 0;
  CK_CUDA(cudaMalloc((void **)buf, need));
  *have = need;
  return 0;
}

/* ---- choosing ------------------------------------------------------------ */

/* AUTO: over NVLink one-shot below COLL_DIRECT_TWO_SHOT_MIN_BYTES of
 * all-reduce (count elements), two-shot from there; through host memory
 * always one-shot (chunked: its encodes into the peers overlap the pulls).
 * Uncompressed (plain) calls have only the one-shot. */
static int is_one_shot(const coll_team *t, const coll_opts *o, size_t count) {
  if (o->codec != COLL_CODEC_TACO) return 1;
  if (o->allreduce == COLL_ALLREDUCE_AUTO)
    return (t->direct && t->direct->host) || count * coll_dtype_bytes(o->dtype) < COLL_DIRECT_TWO_SHOT_MIN_BYTES;
  return o->allreduce == COLL_ALLREDUCE_ONE_SHOT;
}

int coll_direct_choose(coll_team *t, coll_op op, size_t bytes, const int *send_peer, const int *recv_peer,
                       const coll_opts *o) {
  coll_direct_mode m = o->direct;
  /* AUTO takes the direct path at every size: on 2 x H200 it was faster
   * than the NCCL path's defaults at every measured size from 256 KiB, or
   * within 1-2 us (all-gather below 4 MiB); runtime/RESULTS-comm.md round 4 */
  (void)bytes;
  if (m == COLL_DIRECT_OFF) return 0;
  int on = m == COLL_DIRECT_ON;
  if (op == COLL_OP_ALLTOALL) {
    if (on) return coll_set_error(__FILE__, __LINE__, "direct path", "all-to-all has no direct path");
    return 0;
  }
  if (op == COLL_OP_SENDRECV) {
    /* only an exchange between two ranks (the parity argument of
     * coll_direct.h needs signals both ways); AUTO keeps NCCL, as the
     * executor's one-way pipeline transfers do */
    if (!on) return 0;
    for (int i = 0; i < t->nlocal; i++) {
      int other = 1 - t->r[i].rank;
      if (t->nranks != 2 || send_peer[i] != other || recv_peer[i] != other)
        return coll_set_error(__FILE__, __LINE__, "direct path", "send/recv only as an exchange between two ranks");
    }
  }
  for (int i = 0; i < t->nlocal; i++) {
    enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    CK_CUDA(cudaStreamIsCapturing(t->r[i].stream, &cs));
    if (cs != cudaStreamCaptureStatusNone) return 0; /* graphs: NCCL path (coll_direct.h) */
  }
  const char *why = "";
  int a = coll_direct_available(t, &why);
  if (a < 0) return -1;
  if (!a && on) return coll_set_error(__FILE__, __LINE__, "direct path not available", why);
  return a;
}

static size_t chunk_bytes_of(const coll_team *t, const coll_opts *o) {
  if (o->direct_chunk_bytes) return o->direct_chunk_bytes;
  return t->direct && t->direct->host ? COLL_HOST_DEFAULT_CHUNK_BYTES : COLL_DIRECT_DEFAULT_CHUNK_BYTES;
}

/* The chunked calls (all-gather, reduce-scatter, one-shot all-reduce) cut the
 * message as coll_layout does; the one-shot all-reduce like an all-gather of
 * `count` per rank. Returns -1 on a bad layout. */
static int chunk_layout(const coll_team *t, coll_layout *l, coll_op op, size_t count, int n, const coll_opts *o) {
  if (op == COLL_OP_ALLREDUCE) op = COLL_OP_ALLGATHER;
  if (coll_layout_make(l, op, count, n, o->taco.group, coll_dtype_bytes(o->dtype), chunk_bytes_of(t, o)))
    return coll_set_error(__FILE__, __LINE__, "coll_layout_make", "bad group size or rank count");
  return 0;
}

/* A block of e elements on the wire: TACO-encoded, or plain (the padded
 * elements themselves, coll_host.h); and where chunk j starts in a slot
 * area (n blocks of the layout's chunk length per chunk). */
static size_t wire_of(int plain, size_t es, size_t e, int group) {
  return plain ? coll_block_elems(e, group) * es : coll_block_wire(e, group);
}
static size_t chunk_offset_of(int plain, size_t es, const coll_layout *l, size_t j) {
  return plain ? j * (size_t)l->nranks * wire_of(1, es, l->m, l->group) : coll_chunk_offset(l, j);
}

/* Bytes of one parity half of the staging for a call (the same on every rank). */
static int staging_half(const coll_team *t, coll_op op, int one, size_t count, int n, const coll_opts *o,
                        size_t *half) {
  coll_direct_sizes s;
  int plain = o->codec != COLL_CODEC_TACO;
  coll_direct_sizes_of(op, one, count, n, o->taco.group, &s);
  *half = s.half;
  if (plain) *half = ((size_t)n * wire_of(1, coll_dtype_bytes(o->dtype), count, o->taco.group) + 255) & ~(size_t)255;
  if (op == COLL_OP_SENDRECV || (op == COLL_OP_ALLREDUCE && !one)) return 0;
  coll_layout l;
  CK(chunk_layout(t, &l, op, count, n, o));
  size_t chunked = (chunk_offset_of(plain, coll_dtype_bytes(o->dtype), &l, l.nchunks) + 255) & ~(size_t)255;
  if (chunked > *half) *half = chunked;
  return 0;
}

int coll_direct_reserve(coll_team *t, coll_op op, size_t count, const coll_opts *o) {
  int peers[COLL_MAX_LOCAL];
  for (int i = 0; i < t->nlocal; i++) peers[i] = 1 - t->r[i].rank;
  coll_opts q = *o;
  if (op == COLL_OP_SENDRECV && (q.direct != COLL_DIRECT_ON || t->nranks != 2)) return 0;
  size_t bytes = coll_total_elems(op, count, t->nranks) * coll_dtype_bytes(o->dtype);
  int c = coll_direct_choose(t, op, bytes, peers, peers, &q);
  if (c <= 0) return c;
  size_t half;
  CK(staging_half(t, op, op == COLL_OP_ALLREDUCE && is_one_shot(t, o, count), count, t->nranks, o, &half));
  return grow_staging(t, half);
}

/* ---- one call ------------------------------------------------------------ */

typedef struct {
  coll_team *t;
  const coll_opts *o;
  size_t es;
  int group;
  unsigned char *half[COLL_MAX_LOCAL][COLL_DIRECT_MAX]; /* this call's parity half of rank p's staging */
  coll_direct_sizes sz;
  coll_layout l;                                        /* chunks (all-gather, reduce-scatter, one-shot) */
  const void *src[COLL_MAX_LOCAL][COLL_DIRECT_MAX];    /* encode inputs, set in phase 0 */
  unsigned long long seq0;                              /* the call's first sequence number */
  int plain;                                            /* uncompressed: copies and sums instead of the codec */
  unsigned char *in[COLL_MAX_LOCAL]; /* host flavour: this call's half of our host staging (peers write here) */
} call;

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The encode input of e elements at x: x itself, or a zero-padded copy in
 * bounce_in slot `slot` (enqueued on the main stream, before any fork). */
static int source(call *c, int i, const void *x, size_t e, int slot, const void **src) {
  size_t ne = coll_block_elems(e, c->group);
  if (aligned16(x) && ne == e) {
    *src = x;
    return 0;
  }
  coll_rank *r = &c->t->r[i];
  direct_rank *d = &c->t->direct->d[i];
  size_t pitch = d->bounce_in_bytes / (size_t)c->t->nranks; /* n slots of the call's largest piece */
  unsigned char *b = d->bounce_in + (size_t)slot * pitch;
  CK_CUDA(cudaMemcpyAsync(b, x, e * c->es, cudaMemcpyDeviceToDevice, r->stream));
  if (ne > e) CK_CUDA(cudaMemsetAsync(b + e * c->es, 0, (ne - e) * c->es, r->stream));
  *src = b;
  return 0;
}

static int encode(call *c, int i, const void *src, size_t e, void *block, cudaStream_t st) {
  if (c->plain) {
    CK_CUDA(cudaMemcpyAsync(block, src, coll_block_elems(e, c->group) * c->es, cudaMemcpyDefault, st));
    return 0;
  }
  CK_TACO(taco_encode(src, c->o->dtype, coll_block_elems(e, c->group), c->o->taco, block,
                      coll_nonfinite_of(c->t, i, c->o), (void *)st));
  return 0;
}

/* y (e elements) = sum of k blocks at `blocks` (stride: their wire size);
 * through bounce_out half `which` when y is misaligned or e is odd. */
static int decode(call *c, int i, const void *blocks, int k, size_t e, void *y, cudaStream_t st, int which) {
  size_t ne = coll_block_elems(e, c->group);
  direct_rank *d = &c->t->direct->d[i];
  int direct = aligned16(y) && ne == e;
  size_t pitch = d->bounce_out_bytes / 2;
  void *dst = direct ? y : (void *)(d->bounce_out + (size_t)which * pitch);
  if (c->plain) {
    int ce = coll_host_sum(blocks, k, wire_of(1, c->es, ne, c->group), ne, c->o->dtype, dst, (void *)st);
    if (ce) return coll_set_error(__FILE__, __LINE__, "coll_host_sum", cudaGetErrorString((cudaError_t)ce));
  } else {
    CK_TACO(taco_decode_sum(blocks, k, ne, c->o->taco, dst, c->o->dtype, (void *)st));
  }
  if (!direct) CK_CUDA(cudaMemcpyAsync(y, dst, e * c->es, cudaMemcpyDeviceToDevice, st));
  return 0;
}

/* Host flavour: copy the blocks the peers wrote into our host staging (slots
 * p != me of `stride` bytes from `off`) to the same place of our GPU staging,
 * on st after the wait for their signals (copy engine, host -> GPU). Over
 * NVLink the peers wrote into the GPU staging already: nothing to do. */
static int pull(call *c, int i, size_t off, size_t stride, cudaStream_t st) {
  if (!c->in[i]) return 0;
  int me = c->t->r[i].rank, n = c->t->nranks;
  unsigned char *gpu = c->half[i][me] + off, *host = c->in[i] + off;
  if (me > 0) CK_CUDA(cudaMemcpyAsync(gpu, host, (size_t)me * stride, cudaMemcpyDefault, st));
  if (me < n - 1)
    CK_CUDA(cudaMemcpyAsync(gpu + (size_t)(me + 1) * stride, host + (size_t)(me + 1) * stride,
                            (size_t)(n - 1 - me) * stride, cudaMemcpyDefault, st));
  return 0;
}

/* `later` runs what is enqueued on it next after all that `first` has so far. */
static int stream_after(cudaStream_t later, cudaStream_t first, cudaEvent_t ev) {
  CK_CUDA(cudaEventRecord(ev, first));
  CK_CUDA(cudaStreamWaitEvent(later, ev, 0));
  return 0;
}

/* The side (codec) stream after the main stream, and back. */
static int fork_side(call *c, int i) {
  coll_rank *r = &c->t->r[i];
  return stream_after(r->codec_stream, r->stream, c->t->direct->d[i].ev_fork);
}

static int join_side(call *c, int i) {
  coll_rank *r = &c->t->r[i];
  return stream_after(r->stream, r->codec_stream, c->t->direct->d[i].ev_join);
}

/* Signal `to` (or every peer when to < 0) and wait for `from` (or every peer). */
/* to / from: a rank, every peer (-1) or none (-2); seq and stream given. */
static int flags_on(call *c, int i, int to, int from, unsigned long long seq, cudaStream_t st) {
  coll_team *t = c->t;
  coll_rank *r = &t->r[i];
  direct_rank *d = &t->direct->d[i];
  coll_direct_flag_args a;
  memset(&a, 0, sizeof a);
  for (int p = 0; p < t->nranks; p++) {
    if (p == r->rank) continue;
    if (to == -1 || p == to) a.signal[p] = d->peer_flags[p] + r->rank;
    if (from == -1 || p == from) a.wait[p] = d->flags + p;
  }
  a.seq = seq;
  a.timeout_ns = (unsigned long long)(timeout_of(t) * 1e9);
  a.fault = d->fault_dev;
  int ce = coll_direct_flags_launch(&a, st);
  if (ce) return coll_set_error(__FILE__, __LINE__, "coll_direct_flags_launch", cudaGetErrorString((cudaError_t)ce));
  return 0;
}

static int fault_check(void) {
  const char *f = coll_direct_fault();
  if (f) return coll_set_error(__FILE__, __LINE__, "direct path", f);
  return 0;
}

/* How the blocks of all-gather and one-shot all-reduce reach the peers:
 * ENCODE: the encode kernel writes them into the peer's memory (SM stores over
 * NVLink or PCIe); COPY: encoded locally, then cudaMemcpyAsync (copy engines),
 * which leaves the SMs to the codec of the neighbouring chunks.
 * Over NVLink reduce-scatter and the two-shot all-reduce always encode into
 * the peer (their blocks differ per peer and have no local home); through
 * host memory reduce-scatter copies too (via our GPU slot p, see
 * chunked_phase). coll_opts.push sets it; AUTO: COLL_DIRECT_PUSH_COPY_DEFAULT over
 * NVLink, COLL_HOST_PUSH_COPY_DEFAULT through host memory (SM stores into
 * host memory measured slower than the copy engine there: one-shot
 * all-reduce at 64 MiB 1517 vs 1062 us, runtime/RESULTS-comm.md round 5). */
static int push_copy(const coll_opts *o, int host) {
  if (o->push != COLL_PUSH_AUTO) return o->push == COLL_PUSH_COPY;
  return host ? COLL_HOST_PUSH_COPY_DEFAULT : COLL_DIRECT_PUSH_COPY_DEFAULT;
}

/* Enqueue order. In single-process mode one host thread drives every GPU,
 * and some host calls can block until a GPU is idle (lazy loading of a
 * kernel's module synchronizes the context; a full launch queue waits). A
 * GPU spinning on a flag whose signal the host has not enqueued yet would
 * then wait for ever. So every call is enqueued in phases, each phase for
 * every local rank before the next: a phase ends with the signals, and the
 * waits for them come in a later phase. With one rank per process the
 * phases run back to back (and a signal and its wait share one kernel where
 * they are on the same stream). */

/* Signal every peer with seq on st; with one local rank also wait there. */
static int signal_all(call *c, int i, unsigned long long seq, cudaStream_t st, int also_wait) {
  return flags_on(c, i, -1, also_wait && c->t->nlocal == 1 ? -1 : -2, seq, st);
}
/* Wait for every peer's seq on st (unless signal_all already did). */
static int wait_all(call *c, int i, unsigned long long seq, cudaStream_t st, int waited) {
  if (waited && c->t->nlocal == 1) return 0;
  return flags_on(c, i, -2, -1, seq, st);
}

/* All-gather, reduce-scatter and one-shot all-reduce, cut into chunks so that
 * the decode of chunk j (local HBM) overlaps the encode of chunk j + 1 into
 * the peers (NVLink). Phase 2j: main stream: encode the peers' blocks of
 * chunk j into their staging, record an event, signal seq0 + j; side stream:
 * encode our own block. Phase 2j + 1: side stream: wait for that event (so an
 * in-place output never overwrites input the remote encodes still read) and
 * for every peer's seq0 + j, then decode (all-gather: each slot; the others:
 * decode-sum the n slots). The last phase joins the side stream into the
 * main one, before the next call can signal (coll_direct.h: parity). */
static int chunked_phase(call *c, int i, coll_op op, const void *send, void *recv, size_t count, int ph) {
  coll_team *t = c->t;
  coll_rank *r = &t->r[i];
  direct_rank *d = &t->direct->d[i];
  int n = t->nranks, me = r->rank, rs = op == COLL_OP_REDUCESCATTER;
  const coll_layout *l = &c->l;
  if (ph == 0) {
    /* inputs: the whole message (all-gather, all-reduce) or segment p (reduce-scatter) */
    for (int p = 0; p < n; p++) {
      c->src[i][p] = NULL;
      if (rs) CK(source(c, i, (const unsigned char *)send + (size_t)p * count * c->es, count, p, &c->src[i][p]));
      else if (p == 0) CK(source(c, i, send, count, 0, &c->src[i][0]));
    }
    CK(fork_side(c, i));
  }
  size_t j = (size_t)ph / 2;
  if (j >= l->nchunks) return join_side(c, i);
  size_t e = coll_chunk_elems(l, 0, j), at = j * l->m * c->es, off = chunk_offset_of(c->plain, c->es, l, j);
  size_t stride = wire_of(c->plain, c->es, e, c->group);
  unsigned char *mine = c->half[i][me] + off;
  cudaEvent_t ev = d->ev_chunk[j % COLL_EVENT_SLOTS];
  /* reduce-scatter copies only through host memory: its block for peer p is
   * encoded into our GPU slot p, which the pull of this chunk overwrites only
   * after `ev` (over NVLink peer p writes into that slot itself) */
  int host = t->direct->host, ag = op == COLL_OP_ALLGATHER, copy = (!rs || host) && push_copy(c->o, host);
  unsigned char *own_out = (unsigned char *)recv + ((size_t)me * count) * c->es + at;
  /* all-gather out of place: our own slot is decoded as soon as it is encoded
   * (in place it is the input the peers' encodes read: after them) */
  int own_early = ag && (const void *)((unsigned char *)recv + (size_t)me * count * c->es) != send;
  if (ph % 2 == 0) {
    if (copy && rs) {
      /* block p into our GPU slot p, then copied into peer p's slot me */
      for (int p = 0; p < n; p++) {
        if (p == me) continue;
        unsigned char *blk = mine + (size_t)p * stride;
        CK(encode(c, i, (const unsigned char *)c->src[i][p] + at, e, blk, r->stream));
        CK_CUDA(cudaMemcpyAsync(c->half[i][p] + off + (size_t)me * stride, blk, stride, cudaMemcpyDefault, r->stream));
      }
      CK_CUDA(cudaEventRecord(ev, r->stream));
      CK(signal_all(c, i, c->seq0 + j, r->stream, 0));
      return encode(c, i, (const unsigned char *)c->src[i][me] + at, e, mine + (size_t)me * stride, r->codec_stream);
    }
    if (copy) {
      /* own block on the main stream, then copied into every peer's slot me */
      CK(encode(c, i, (const unsigned char *)c->src[i][0] + at, e, mine + (size_t)me * stride, r->stream));
      CK_CUDA(cudaEventRecord(d->ev_own[j % COLL_EVENT_SLOTS], r->stream));
      for (int p = 0; p < n; p++)
        if (p != me)
          CK_CUDA(cudaMemcpyAsync(c->half[i][p] + off + (size_t)me * stride, mine + (size_t)me * stride, stride,
                                  cudaMemcpyDefault, r->stream));
      CK_CUDA(cudaEventRecord(ev, r->stream));
      CK(signal_all(c, i, c->seq0 + j, r->stream, 0));
      CK_CUDA(cudaStreamWaitEvent(r->codec_stream, d->ev_own[j % COLL_EVENT_SLOTS], 0));
      if (own_early) CK(decode(c, i, mine + (size_t)me * stride, 1, e, own_out, r->codec_stream, 1));
      return 0;
    }
    for (int p = 0; p < n; p++) {
      if (p == me) continue;
      const unsigned char *x = (const unsigned char *)c->src[i][rs ? p : 0] + at;
      CK(encode(c, i, x, e, c->half[i][p] + off + (size_t)me * stride, r->stream));
    }
    CK_CUDA(cudaEventRecord(ev, r->stream));
    CK(signal_all(c, i, c->seq0 + j, r->stream, 0));
    CK(encode(c, i, (const unsigned char *)c->src[i][rs ? me : 0] + at, e, mine + (size_t)me * stride,
              r->codec_stream));
    if (own_early) CK(decode(c, i, mine + (size_t)me * stride, 1, e, own_out, r->codec_stream, 1));
    return 0;
  }
  CK_CUDA(cudaStreamWaitEvent(r->codec_stream, ev, 0));
  CK(wait_all(c, i, c->seq0 + j, r->codec_stream, 0));
  CK(pull(c, i, off, stride, r->codec_stream));
  if (ag) {
    for (int p = 0; p < n; p++)
      if (p != me || !own_early)
        CK(decode(c, i, mine + (size_t)p * stride, 1, e, (unsigned char *)recv + ((size_t)p * count) * c->es + at,
                  r->codec_stream, 1));
    return 0;
  }
  return decode(c, i, mine, n, e, (unsigned char *)recv + at, r->codec_stream, 1);
}

/* Two-shot all-reduce. Phase 0: encode segment p into rank p's region A slot
 * me (ours on the side stream), signal seq0. Phase 1: wait seq0, decode-sum-
 * encode our segment into region B slot me of every rank (ours on the side
 * stream, then decoded there), signal seq0 + 1. Phase 2: wait, decode the
 * peers' region B slots. */
static int two_shot_phase(call *c, int i, const void *send, void *recv, size_t count, int ph) {
  coll_rank *r = &c->t->r[i];
  int n = c->t->nranks, me = r->rank, g = c->group;
  coll_op op = COLL_OP_ALLREDUCE;
  size_t seg = coll_direct_recv_elems(op, 0, count, n, g, 0); /* segment pitch in the input */
  size_t mine = coll_direct_recv_elems(op, 0, count, n, g, me), sb = c->sz.stride_b;
  if (ph == 0) {
    for (int p = 0; p < n; p++) {
      size_t e = coll_direct_recv_elems(op, 0, count, n, g, p);
      c->src[i][p] = NULL;
      if (e) CK(source(c, i, (const unsigned char *)send + (size_t)p * seg * c->es, e, p, &c->src[i][p]));
    }
    CK(fork_side(c, i));
    for (int p = 0; p < n; p++) {
      size_t e = coll_direct_recv_elems(op, 0, count, n, g, p);
      if (!e) continue;
      void *dst = c->half[i][p] + (size_t)me * coll_direct_stride_a(op, 0, count, n, g, p);
      CK(encode(c, i, c->src[i][p], e, dst, p == me ? r->codec_stream : r->stream));
    }
    CK(join_side(c, i));
    return signal_all(c, i, c->seq0, r->stream, 1);
  }
  if (ph == 1) {
    CK(wait_all(c, i, c->seq0, r->stream, 1));
    if (mine) CK(pull(c, i, 0, coll_direct_stride_a(op, 0, count, n, g, me), r->stream));
    if (mine) {
      CK(fork_side(c, i));
      for (int p = 0; p < n; p++) {
        unsigned char *dst = c->half[i][p] + c->sz.region_a + (size_t)me * sb;
        CK_TACO(taco_decode_sum_encode(c->half[i][me], n, coll_block_elems(mine, g), c->o->taco, dst,
                                       (void *)(p == me ? r->codec_stream : r->stream)));
      }
      CK(decode(c, i, c->half[i][me] + c->sz.region_a + (size_t)me * sb, 1, mine,
                (unsigned char *)recv + (size_t)me * seg * c->es, r->codec_stream, 1));
    }
    return signal_all(c, i, c->seq0 + 1, r->stream, 1);
  }
  CK(wait_all(c, i, c->seq0 + 1, r->stream, 1));
  if (mine) CK(join_side(c, i));
  CK(pull(c, i, c->sz.region_a, sb, r->stream));
  for (int p = 0; p < n; p++) {
    size_t e = coll_direct_recv_elems(op, 0, count, n, g, p);
    if (p == me || !e) continue;
    CK(decode(c, i, c->half[i][me] + c->sz.region_a + (size_t)p * sb, 1, e, (unsigned char *)recv + (size_t)p * seg * c->es,
              r->stream, 0));
  }
  return 0;
}

/* Send/recv between two ranks: encode into the peer's slot me, signal; then
 * wait and decode the peer's slot. */
static int sendrecv_phase(call *c, int i, const void *send, void *recv, size_t e, int ph) {
  coll_rank *r = &c->t->r[i];
  int me = r->rank, peer = 1 - me;
  size_t stride = coll_block_wire(e, c->group);
  if (ph == 0) {
    CK(source(c, i, send, e, 0, &c->src[i][0]));
    CK(encode(c, i, c->src[i][0], e, c->half[i][peer] + (size_t)me * stride, r->stream));
    return signal_all(c, i, c->seq0, r->stream, 1);
  }
  CK(wait_all(c, i, c->seq0, r->stream, 1));
  CK(pull(c, i, 0, stride, r->stream));
  return decode(c, i, c->half[i][me] + (size_t)peer * stride, 1, e, recv, r->stream, 0);
}

/* ---- the pipelined two-shot all-reduce (direct_ar pipe|copy) --------- */

/* coll_opts.direct_ar (auto|whole|pipe|copy) selects how the two-shot all-reduce over
 * NVLink runs (read at every call, so one process can compare them):
 *   auto (the default): copy (below) for bf16 messages of at least
 *     COLL_DIRECT_AR_COPY_MIN_BYTES, whole under it and for FP32 ones;
 *   whole: two_shot_phase above, the message as one piece;
 *   pipe: the message cut into K pieces (coll_opts.direct_ar_pieces, 1..4, default
 *     COLL_DIRECT_AR_PIECES_DEFAULT), each a two-shot all-reduce of its own,
 *     enqueued so that piece k's decode-sum-encode into the peers runs while
 *     piece k + 1's encodes are still crossing NVLink, and piece k's final
 *     decode while piece k + 1's reduced block is pushed; signals and waits
 *     are separate kernels (a piece waits only for its own signal).
 * coll_opts.direct_ar_own_copy (dup = 0, copy = 1): how the own reduced segment reaches the peers
 * in pipe mode: dup (default) = decode-sum-encode once into every peer's
 * region B (main stream) and once more into our own (side stream, then
 * decoded there), as the whole variant does; copy = decode-sum-encode once
 * into our own region B, then the copy engine pushes that block into the
 * peers (side stream) while the SMs go on with the next piece.
 * direct_ar copy (round 6b) = pipe with one piece and own=copy (the
 * same as direct_ar_pieces = 1, direct_ar_own_copy = 1): no pipeline, the reduced own
 * segment is encoded locally once and the copy engine pushes it to the peers;
 * with one piece our own block is decoded on the main stream beside that push.
 * Pipe mode runs only where every piece splits into whole 16-group blocks
 * and the buffers are 16-byte aligned (no bounce copies); other calls run whole.
 * Not the default: measured on 2 x H200 (runtime/RESULTS-comm.md round 6) it
 * loses at 16 and 64 MiB (64 MiB: whole 183-185 us, pipe 2 pieces dup 217,
 * copy 193-194, 4 pieces dup 290: every piece adds host enqueue and flag
 * kernels) and wins only from 256 MiB with copy (587-594 vs 660-667 us).
 * copy (one piece, round 6b) wins from 64 MiB: 171-173 us vs whole 184-185,
 * 256 MiB 576-588 vs 660-667, but loses at 16 MiB (70-71 vs 65-67 us): hence
 * auto's threshold (the executor's TP2 messages of GPT h4096, 32 MiB, stay whole). */

typedef struct {
  int pipe;   /* 0: whole, 1: pipe */
  int pieces; /* K */
  int copy;   /* own reduced block pushed by the copy engine */
} ar_variant;

/* bytes: the message's bf16 size (auto's choice; 0: whole). */
static int ar_variant_of(ar_variant *v, const coll_opts *o, size_t bytes) {
  memset(v, 0, sizeof *v);
  coll_direct_ar m = o->direct_ar;
  if ((unsigned)m > COLL_DIRECT_AR_COPY)
    return coll_set_error(__FILE__, __LINE__, "coll_opts.direct_ar", "must be auto, whole, pipe or copy");
  if (m == COLL_DIRECT_AR_AUTO) m = bytes >= COLL_DIRECT_AR_COPY_MIN_BYTES ? COLL_DIRECT_AR_COPY : COLL_DIRECT_AR_WHOLE;
  if (m == COLL_DIRECT_AR_COPY) { /* one piece, own block by the copy engine; pieces and own not read */
    v->pipe = 1;
    v->pieces = 1;
    v->copy = 1;
    return 0;
  }
  v->pipe = m == COLL_DIRECT_AR_PIPE;
  v->pieces = o->direct_ar_pieces ? o->direct_ar_pieces : COLL_DIRECT_AR_PIECES_DEFAULT;
  if (v->pieces < 1 || v->pieces > COLL_EVENT_SLOTS)
    return coll_set_error(__FILE__, __LINE__, "coll_opts.direct_ar_pieces", "must be 1..4 (event slots)");
  v->copy = o->direct_ar_own_copy != 0;
  return 0;
}

/* Pipe mode applies: every piece's segment is whole blocks of 16 groups
 * (wire offsets stay 16-byte aligned, no padding) and the buffers are aligned. */
static int pipe_fits(const coll_team *t, const ar_variant *v, size_t count, int group, const void *const *send,
                     void *const *recv) {
  size_t unit = (size_t)v->pieces * (size_t)t->nranks * 16u * (size_t)group;
  if (!v->pipe || t->direct->host || count % unit) return 0;
  for (int i = 0; i < t->nlocal; i++)
    if (!aligned16(send[i]) || !aligned16(recv[i])) return 0;
  return 1;
}

/* Piece k of K: elements [k P, (k + 1) P), P = count / K; rank p's segment of
 * it: S = P / n elements from k P + p S. Staging (same size as whole): region
 * A piece k at k n W (W = wire bytes of S), slot p at + p W; region B the same
 * from sz.region_a. Sequence numbers: seq0 + k (piece k's encodes arrived),
 * seq0 + K + k (piece k's reduced blocks arrived). Phases (coll_direct.c,
 * "Enqueue order"): 0 encodes and signals, 1 waits, decode-sum-encodes and
 * signals, 2 waits and decodes. */
static int pipe_phase(call *c, int i, const ar_variant *v, const void *send, void *recv, size_t count, int ph) {
  coll_rank *r = &c->t->r[i];
  direct_rank *d = &c->t->direct->d[i];
  int n = c->t->nranks, me = r->rank, g = c->group, K = v->pieces;
  size_t P = count / (size_t)K, S = P / (size_t)n, W = coll_wire_bytes(S, g), es = c->es;
  const unsigned char *x = send;
  unsigned char *y = recv;
#define A_SLOT(rank, k, p) (c->half[i][rank] + ((size_t)(k) * n + (size_t)(p)) * W)
#define B_SLOT(rank, k, p) (c->half[i][rank] + c->sz.region_a + ((size_t)(k) * n + (size_t)(p)) * W)
#define ELEM(k, p) (((size_t)(k) * P + (size_t)(p) * S) * es)
  if (ph == 0) {
    CK(fork_side(c, i));
    for (int k = 0; k < K; k++) {
      for (int p = 0; p < n; p++)
        if (p != me) CK(encode(c, i, x + ELEM(k, p), S, A_SLOT(p, k, me), r->stream));
      CK(encode(c, i, x + ELEM(k, me), S, A_SLOT(me, k, me), r->codec_stream));
      CK_CUDA(cudaEventRecord(d->ev_own[k], r->codec_stream));
      CK(flags_on(c, i, -1, -2, c->seq0 + (unsigned long long)k, r->stream));
    }
    return 0;
  }
  if (ph == 1) {
    for (int k = 0; k < K; k++) {
      CK(flags_on(c, i, -2, -1, c->seq0 + (unsigned long long)k, r->stream));
      CK_CUDA(cudaStreamWaitEvent(r->stream, d->ev_own[k], 0));
      if (v->copy) {
        CK_TACO(taco_decode_sum_encode(A_SLOT(me, k, 0), n, S, c->o->taco, B_SLOT(me, k, me), (void *)r->stream));
        CK_CUDA(cudaEventRecord(d->ev_chunk[k], r->stream));
        CK_CUDA(cudaStreamWaitEvent(r->codec_stream, d->ev_chunk[k], 0));
        for (int p = 0; p < n; p++)
          if (p != me)
            CK_CUDA(cudaMemcpyAsync(B_SLOT(p, k, me), B_SLOT(me, k, me), W, cudaMemcpyDefault, r->codec_stream));
        CK(flags_on(c, i, -1, -2, c->seq0 + (unsigned long long)(K + k), r->codec_stream));
        if (K == 1) { /* one piece: the SMs decode our block while the copy engine pushes it */
          CK(decode(c, i, B_SLOT(me, k, me), 1, S, y + ELEM(k, me), r->stream, 1));
          continue;
        }
      } else {
        CK_CUDA(cudaEventRecord(d->ev_chunk[k], r->stream));
        for (int p = 0; p < n; p++)
          if (p != me)
            CK_TACO(taco_decode_sum_encode(A_SLOT(me, k, 0), n, S, c->o->taco, B_SLOT(p, k, me), (void *)r->stream));
        CK(flags_on(c, i, -1, -2, c->seq0 + (unsigned long long)(K + k), r->stream));
        CK_CUDA(cudaStreamWaitEvent(r->codec_stream, d->ev_chunk[k], 0));
        CK_TACO(taco_decode_sum_encode(A_SLOT(me, k, 0), n, S, c->o->taco, B_SLOT(me, k, me), (void *)r->codec_stream));
      }
      CK(decode(c, i, B_SLOT(me, k, me), 1, S, y + ELEM(k, me), r->codec_stream, 1));
    }
    return 0;
  }
  for (int k = 0; k < K; k++) {
    CK(flags_on(c, i, -2, -1, c->seq0 + (unsigned long long)(K + k), r->stream));
    for (int p = 0; p < n; p++)
      if (p != me) CK(decode(c, i, B_SLOT(me, k, p), 1, S, y + ELEM(k, p), r->stream, 0));
  }
  return join_side(c, i);
#undef A_SLOT
#undef B_SLOT
#undef ELEM
}

int coll_direct_run(coll_team *t, coll_op op, const void *const *send, void *const *recv, const int *send_peer,
                    const int *recv_peer, size_t count, const coll_opts *o) {
  (void)send_peer;
  (void)recv_peer;
  CK(fault_check());
  struct coll_direct *D = t->direct;
  call c;
  memset(&c, 0, sizeof c);
  c.t = t;
  c.o = o;
  c.es = coll_dtype_bytes(o->dtype);
  c.group = o->taco.group;
  c.plain = o->codec != COLL_CODEC_TACO;
  if (c.plain && op != COLL_OP_ALLGATHER && op != COLL_OP_REDUCESCATTER && op != COLL_OP_ALLREDUCE)
    return coll_set_error(__FILE__, __LINE__, "coll_direct_run", "uncompressed: all-gather, reduce-scatter, all-reduce only");
  int one = op == COLL_OP_ALLREDUCE && is_one_shot(t, o, count);
  int n = t->nranks;
  coll_direct_sizes_of(op, one, count, n, c.group, &c.sz);
  size_t half;
  CK(staging_half(t, op, one, count, n, o, &half));
  CK(grow_staging(t, half));
  /* bounce buffers: n padded pieces in, two padded pieces out */
  size_t piece = op == COLL_OP_ALLREDUCE && !one ? coll_direct_recv_elems(op, 0, count, n, c.group, 0) : count;
  size_t pitch = (coll_block_elems(piece, c.group) * c.es + 255) & ~(size_t)255;
  for (int i = 0; i < t->nlocal; i++) {
    direct_rank *d = &D->d[i];
    CK(grow_local(t, &t->r[i], &d->bounce_in, &d->bounce_in_bytes, (size_t)n * pitch));
    CK(grow_local(t, &t->r[i], &d->bounce_out, &d->bounce_out_bytes, 2 * pitch));
  }
  size_t parity = (size_t)(D->calls & 1);
  for (int i = 0; i < t->nlocal; i++) {
    for (int p = 0; p < n; p++) c.half[i][p] = D->d[i].peer_stage[p] + parity * D->half;
    c.in[i] = D->host ? (unsigned char *)D->d[i].hstage.dev + parity * D->half : NULL;
  }
  D->calls++;
  c.seq0 = D->seq + 1;
  int chunked = op == COLL_OP_ALLGATHER || op == COLL_OP_REDUCESCATTER || one;
  if (chunked) CK(chunk_layout(t, &c.l, op, count, n, o));
  ar_variant v;
  /* auto takes copy for bf16 messages only: the variant has been checked on the GPUs with bf16 buffers,
   * not with FP32 ones (DP gradients keep the whole two-shot unless coll_opts.direct_ar asks for copy) */
  CK(ar_variant_of(&v, o, c.es == 2 ? count * 2 : 0));
  int piped = op == COLL_OP_ALLREDUCE && !one && !c.plain && pipe_fits(t, &v, count, c.group, send, recv);
  if (op != COLL_OP_ALLGATHER && op != COLL_OP_REDUCESCATTER && op != COLL_OP_ALLREDUCE && op != COLL_OP_SENDRECV)
    return coll_set_error(__FILE__, __LINE__, "coll_direct_run", "op has no direct path");
  /* phases and sequence numbers of this call */
  int phases = chunked ? 2 * (int)c.l.nchunks + 1 : op == COLL_OP_SENDRECV ? 2 : 3;
  unsigned long long used = chunked ? c.l.nchunks : op == COLL_OP_SENDRECV ? 1 : piped ? 2 * (unsigned)v.pieces : 2;
  for (int ph = 0; ph < phases; ph++)
    for (int i = 0; i < t->nlocal; i++) {
      CK_CUDA(cudaSetDevice(t->r[i].device));
      if (chunked) CK(chunked_phase(&c, i, op, send[i], recv[i], count, ph));
      else if (piped) CK(pipe_phase(&c, i, &v, send[i], recv[i], count, ph));
      else if (op == COLL_OP_SENDRECV) CK(sendrecv_phase(&c, i, send[i], recv[i], count, ph));
      else CK(two_shot_phase(&c, i, send[i], recv[i], count, ph));
    }
  D->seq = c.seq0 + used - 1;
  if (piped) D->pipe_calls++;
  return 0;
}

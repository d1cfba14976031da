/* rt_nccl.c — NCCL bootstrap (MPI, id file, single process), bounded waits,
 * aborts and the watchdog (see rt_nccl.h). */
#define _GNU_SOURCE
#include "rt_nccl.h"
#include "rt_idmsg.h"

#include "coll_direct.h"
#include "coll_taco.h"
#include "ts_env.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef TACOSIM_HAVE_MPI
#include <mpi.h>
#endif

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

int rt_cuda_device_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

/* ---- watchdog ------------------------------------------------------------ */

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int started, armed;
  double deadline;
  char what[128];
  rt_nccl *w;
} wd = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static void *watchdog_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&wd.mu);
  for (;;) {
    if (!wd.armed) {
      pthread_cond_wait(&wd.cv, &wd.mu);
      continue;
    }
    double left = wd.deadline - now_s();
    if (left > 0) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      double t = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + (left < 0.2 ? left : 0.2);
      ts.tv_sec = (time_t)t;
      ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
      pthread_cond_timedwait(&wd.cv, &wd.mu, &ts);
      continue;
    }
    fprintf(stderr, "tacorun: %s did not finish in time (peer dead or stuck?): aborting NCCL and exiting\n",
            wd.what);
    fflush(stderr);
    if (wd.w) {
      for (int i = 0; i < wd.w->nsubcomms; i++)
        if (wd.w->subcomms[i]) ncclCommAbort(wd.w->subcomms[i]);
      for (int i = 0; i < wd.w->nlocal; i++)
        if (wd.w->comms[i]) ncclCommAbort(wd.w->comms[i]);
    }
    _exit(1); /* the main thread is blocked inside NCCL; nothing else can end it */
  }
  return NULL;
}

/* Starts the watchdog thread once (called with wd.mu held); 0, or the errno of pthread_create. */
static int watchdog_start_locked(void) {
  if (wd.started) return 0;
  int err = pthread_create(&wd.thread, NULL, watchdog_main, NULL);
  if (err) return err;
  pthread_detach(wd.thread);
  wd.started = 1;
  return 0;
}

int rt_watchdog_start(ts_err *e) {
  pthread_mutex_lock(&wd.mu);
  int err = watchdog_start_locked();
  pthread_mutex_unlock(&wd.mu);
  if (err)
    return ts_fail_sys(e, "rt_nccl: the watchdog thread cannot start (pthread_create: %s); without it a call "
                          "blocked inside NCCL could hang the run, so it does not start",
                       strerror(err));
  return 0;
}

void rt_watchdog_arm(rt_nccl *w, double seconds, const char *what) {
  pthread_mutex_lock(&wd.mu);
  int err = watchdog_start_locked();
  if (err) { /* rt_nccl_init started it; a caller without rt_nccl_init stops here rather than run unguarded */
    fprintf(stderr, "tacorun: the watchdog thread cannot start (pthread_create: %s) before %s: stopping\n",
            strerror(err), what);
    exit(1);
  }
  wd.w = w;
  wd.armed = 1;
  wd.deadline = now_s() + seconds;
  snprintf(wd.what, sizeof wd.what, "%s", what);
  pthread_cond_signal(&wd.cv);
  pthread_mutex_unlock(&wd.mu);
}

void rt_watchdog_disarm(void) {
  pthread_mutex_lock(&wd.mu);
  wd.armed = 0;
  pthread_cond_signal(&wd.cv);
  pthread_mutex_unlock(&wd.mu);
}

/* ---- bootstrap ----------------------------------------------------------- */

static int env_int(const char *name, int dflt) {
  const char *s = getenv(name);
  if (!s || !*s) return dflt;
  char *end;
  long v = strtol(s, &end, 10);
  return *end ? dflt : (int)v;
}

#ifdef TACOSIM_HAVE_MPI
static int launched_by_mpi(void) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK");
}
#endif

static int local_device(int rank, ts_err *e, int *dev) {
  int ndev = rt_cuda_device_count();
  if (ndev < 1) return ts_fail_sys(e, "rt_nccl: no CUDA device");
  int local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("TACORUN_LOCAL_RANK", rank));
  *dev = local % ndev;
  return 0;
}

/* Rank 0's id, or its failure to make one, for this rank (rt_idmsg.h). */
static void make_id(rt_id_msg *msg) {
  ncclUniqueId id;
  ncclResult_t r = ncclGetUniqueId(&id);
  char why[240];
  if (r == ncclSuccess) return rt_id_msg_ok(msg, &id);
  snprintf(why, sizeof why, "ncclGetUniqueId: %s (%s)", ncclGetErrorString(r), ncclGetLastError(NULL));
  rt_id_msg_fail(msg, why);
}

static int init_multi(rt_nccl *w, ts_err *e) {
  ncclUniqueId id;
  rt_id_msg msg;
  int rank = 0, size = 1;
  memset(&msg, 0, sizeof msg);
  if (w->boot == RT_BOOT_MPI) {
#ifdef TACOSIM_HAVE_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && MPI_Init(NULL, NULL) != MPI_SUCCESS) return ts_fail_sys(e, "rt_nccl: MPI_Init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) make_id(&msg); /* a failure travels too: no rank is left in the broadcast */
    if (MPI_Bcast(&msg, (int)sizeof msg, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
      return ts_fail_sys(e, "rt_nccl: MPI_Bcast of the NCCL id failed");
#endif
  } else {
    const char *path = getenv("TACORUN_ID_FILE");
    rank = env_int("TACORUN_RANK", -1);
    size = env_int("TACORUN_NRANKS", -1);
    if (!path || rank < 0 || size < 1 || rank >= size)
      return ts_fail(e, "environment", "TACORUN_RANK/TACORUN_NRANKS/TACORUN_ID_FILE", "missing or out of range");
    if (rank == 0) {
      make_id(&msg);
      if (rt_id_file_write(path, &msg, e)) return -1;
    } else if (rt_id_file_read(path, w->timeout_s, &msg, e)) {
      return -1;
    }
  }
  if (sizeof id != RT_ID_BYTES) return ts_fail_sys(e, "rt_nccl: ncclUniqueId is %zu bytes, not %d", sizeof id, RT_ID_BYTES);
  if (rt_id_msg_take(&msg, &id, e)) return -1;
  w->nranks = size;
  w->nlocal = 1;
  w->ranks[0] = rank;
  if (local_device(rank, e, &w->devices[0])) return -1;
  RT_CUDA(e, cudaSetDevice(w->devices[0]));
  rt_watchdog_arm(w, w->timeout_s, "NCCL communicator init");
  ncclResult_t r = ncclCommInitRank(&w->comms[0], size, id, rank);
  rt_watchdog_disarm();
  RT_NCCL(e, r);
  return 0;
}

static int init_single(rt_nccl *w, int ngpus, ts_err *e) {
  int ndev = rt_cuda_device_count();
  if (ndev < 1) return ts_fail_sys(e, "rt_nccl: no CUDA device");
  if (ngpus <= 0 || ngpus > ndev) ngpus = ndev;
  if (ngpus > RT_MAX_LOCAL) ngpus = RT_MAX_LOCAL;
  w->nranks = w->nlocal = ngpus;
  for (int i = 0; i < ngpus; i++) w->devices[i] = w->ranks[i] = i;
  rt_watchdog_arm(w, w->timeout_s, "NCCL communicator init");
  ncclResult_t r = ncclCommInitAll(w->comms, ngpus, w->devices);
  rt_watchdog_disarm();
  RT_NCCL(e, r);
  return 0;
}

/* ---- transport (kernels/coll_transport.h) ------------------------------- */

/* FNV-1a of the host name and the kernel's boot id: equal on the ranks of one host. */
static unsigned long long host_hash(void) {
  char buf[512] = "";
  gethostname(buf, 255);
  buf[255] = 0;
  size_t n = strlen(buf);
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(buf + n, (int)(sizeof buf - n), f)) buf[n] = 0;
    fclose(f);
  }
  unsigned long long h = 1469598103934665603ULL;
  for (const unsigned char *c = (const unsigned char *)buf; *c; c++) h = (h ^ *c) * 1099511628211ULL;
  return h;
}

/* Peer access from device a to device b (and whether it goes over NVLink). */
static int peer_of(int a, int b, int *nvlink) {
  int can = 0, atomics = 0;
  *nvlink = 0;
  if (a == b) return *nvlink = 1, 1;
  if (cudaDeviceCanAccessPeer(&can, a, b) != cudaSuccess) return cudaGetLastError(), 0;
  if (can && cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, a, b) == cudaSuccess)
    *nvlink = atomics;
  cudaGetLastError();
  return can;
}

typedef struct {
  unsigned long long host;
  char bus[24]; /* PCI bus id of the rank's GPU */
} rank_place;

/* One process per GPU: every rank's host and GPU through NCCL; each rank
 * judges the pairs it is part of, the maximum over ranks of "something
 * missing" makes every rank see the same facts. */
static int facts_multi(rt_nccl *w, coll_transport_facts *f, ts_err *e) {
  rank_place me, *all = calloc((size_t)w->nranks, sizeof *all);
  void *dev = NULL;
  if (!all) return ts_fail_sys(e, "rt_nccl: out of memory");
  memset(&me, 0, sizeof me);
  me.host = host_hash();
  int rc = -1;
  if (cudaDeviceGetPCIBusId(me.bus, sizeof me.bus, w->devices[0]) != cudaSuccess) {
    ts_fail_sys(e, "%s:%d: cudaDeviceGetPCIBusId failed", __FILE__, __LINE__);
    goto out;
  }
  CUDA_CHECK_GOTO(e, cudaMalloc(&dev, (size_t)w->nranks * sizeof me), out);
  /* in place: this rank's record at its own slot */
  char *mine = (char *)dev + (size_t)w->ranks[0] * sizeof me;
  CUDA_CHECK_GOTO(e, cudaMemcpy(mine, &me, sizeof me, cudaMemcpyHostToDevice), out);
  NCCL_CHECK_GOTO(e, ncclAllGather(mine, dev, sizeof me, ncclChar, w->comms[0], w->streams[0]), out);
  if (rt_nccl_wait(w, e)) goto out;
  CUDA_CHECK_GOTO(e, cudaMemcpy(all, dev, (size_t)w->nranks * sizeof me, cudaMemcpyDeviceToHost), out);
  double v[3] = {0, 0, 0}; /* another host; a pair without peer access (encoded); a pair not over NVLink */
  for (int r = 0; r < w->nranks; r++) {
    int d = -1, nv = 0;
    if (all[r].host != me.host) {
      v[0] = 1;
      continue;
    }
    int can = cudaDeviceGetByPCIBusId(&d, all[r].bus) == cudaSuccess && peer_of(w->devices[0], d, &nv);
    cudaGetLastError();
    if (!can && v[1] == 0) v[1] = 1.0 + (double)w->ranks[0] * 65536.0 + r;
    if (!nv) v[2] = 1;
  }
  if (rt_nccl_max(w, v, 3, e)) goto out;
  f->same_host = v[0] == 0, f->peer_all = f->same_host && v[1] == 0, f->peer_nvlink = f->peer_all && v[2] == 0;
  if (v[1] > 0) f->no_peer_a = (int)((v[1] - 1) / 65536.0), f->no_peer_b = (int)(v[1] - 1) % 65536;
  rc = 0;
out:
  cudaFree(dev);
  free(all);
  return rc;
}

void rt_transport_local(const int *devices, int n, coll_transport_facts *f) {
  memset(f, 0, sizeof *f);
  f->nranks = n, f->no_peer_a = f->no_peer_b = -1;
  f->same_host = f->peer_all = f->peer_nvlink = 1; /* one process: one host; one GPU: nothing to reach */
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      int nv = 0;
      if (peer_of(devices[a], devices[b], &nv)) {
        f->peer_nvlink &= nv;
        continue;
      }
      if (f->peer_all) f->no_peer_a = a, f->no_peer_b = b;
      f->peer_all = f->peer_nvlink = 0;
    }
}

static int transport_facts(rt_nccl *w, coll_transport_facts *f, ts_err *e) {
  if (w->boot != RT_BOOT_SINGLE && w->nranks > 1) {
    memset(f, 0, sizeof *f);
    f->nranks = w->nranks, f->no_peer_a = f->no_peer_b = -1;
    return facts_multi(w, f, e);
  }
  rt_transport_local(w->devices, w->nlocal, f); /* single process: ranks are the local GPUs in order */
  return 0;
}

int rt_transport_arg(const char *s, coll_transport *t, ts_err *e) {
  if (coll_transport_parse(s, t)) return ts_fail(e, NULL, "--transport", "'%s' is not auto, p2p, shm or socket", s ? s : "");
  return 0;
}

const char *rt_nccl_transport(const rt_nccl *w) { return coll_transport_record(w->transport, &w->facts); }

/* NCCL chooses its own transport from what it finds; an explicit shm or
 * socket is passed on to it the only way NCCL takes one (its P2P/SHM switches,
 * set in this process before the communicator exists). */
static void restrict_nccl(coll_transport t) {
  if (t == COLL_TRANSPORT_SHM || t == COLL_TRANSPORT_SOCKET) setenv("NCCL_P2P_DISABLE", "1", 1);
  if (t == COLL_TRANSPORT_SOCKET) setenv("NCCL_SHM_DISABLE", "1", 1);
}

int rt_nccl_init(rt_nccl *w, const rt_nccl_opts *o, ts_err *e) {
  memset(w, 0, sizeof *w);
  if (rt_watchdog_start(e)) return -1; /* before anything that can block inside NCCL */
  w->timeout_s = o->timeout_s > 0 ? o->timeout_s : 300.0;
  w->transport_asked = o->transport;
  if (!coll_transport_name(o->transport)) return ts_fail(e, NULL, "--transport", "value %d out of range", (int)o->transport);
  if (o->single_process) w->boot = RT_BOOT_SINGLE;
  else if (getenv("TACORUN_ID_FILE")) w->boot = RT_BOOT_FILE;
#ifdef TACOSIM_HAVE_MPI
  else if (launched_by_mpi()) w->boot = RT_BOOT_MPI;
#endif
  else w->boot = RT_BOOT_SINGLE;
  restrict_nccl(o->transport);
  if (w->boot == RT_BOOT_SINGLE ? init_single(w, o->ngpus, e) : init_multi(w, e)) return -1;
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaStreamCreateWithFlags(&w->streams[i], cudaStreamNonBlocking));
    RT_CUDA(e, cudaMalloc((void **)&w->dscratch[i], 64 * sizeof(double)));
  }
  /* the transport: decided from what the ranks have (coll_transport.h) */
  char why[256];
  if (transport_facts(w, &w->facts, e)) return -1;
  if (coll_transport_decide(o->transport, &w->facts, &w->transport, why, sizeof why)) {
    rt_nccl_finalize(w, 0); /* every rank decided the same from the same facts: all leave here */
    w->boot = RT_BOOT_SINGLE; /* MPI is finalized: a later rt_nccl_finalize must not touch it */
    return ts_fail(e, NULL, "--transport", "%s", why);
  }
  /* the compressed collectives' direct paths use what the transport allows */
  int peer = 0, host_shm = 0;
  coll_transport_links(w->transport, &peer, &host_shm);
  coll_set_links(peer, host_shm);
  return 0;
}

/* ---- waits and aborts ---------------------------------------------------- */

void rt_nccl_abort(rt_nccl *w) {
  if (w->aborted) return;
  w->aborted = 1;
  /* sub-communicators first: they share the world's peers and proxies */
  for (int i = 0; i < w->nsubcomms; i++)
    if (w->subcomms[i]) ncclCommAbort(w->subcomms[i]);
  for (int i = 0; i < w->nlocal; i++)
    if (w->comms[i]) ncclCommAbort(w->comms[i]);
}

int rt_nccl_register(rt_nccl *w, ncclComm_t c, ts_err *e) {
  if (!c) return 0;
  if (w->nsubcomms >= RT_MAX_SUBCOMMS) {
    ncclCommAbort(c);
    return ts_fail_sys(e, "rt_nccl: more than %d sub-communicators", RT_MAX_SUBCOMMS);
  }
  w->subcomms[w->nsubcomms++] = c;
  return 0;
}

void rt_nccl_comm_destroy(rt_nccl *w, ncclComm_t c) {
  if (!c) return;
  int found = 0;
  for (int i = 0; i < w->nsubcomms; i++)
    if (w->subcomms[i] == c) {
      w->subcomms[i] = w->subcomms[--w->nsubcomms];
      w->subcomms[w->nsubcomms] = NULL;
      found = 1;
      break;
    }
  if (!found || w->aborted) return; /* not ours, or already freed by the abort */
  rt_watchdog_arm(w, w->timeout_s, "NCCL sub-communicator destroy");
  ncclCommDestroy(c);
  rt_watchdog_disarm();
}

/* Asynchronous error of c, or ncclSuccess (ncclInProgress counts as none). */
static ncclResult_t comm_error(ncclComm_t c) {
  ncclResult_t async = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(c, &async);
  if (r != ncclSuccess) return r;
  return async == ncclInProgress ? ncclSuccess : async;
}

int rt_nccl_poll(rt_nccl *w, ts_err *e) {
  if (w->aborted) return ts_fail_sys(e, "rt_nccl: communicators already aborted");
  for (int i = 0; i < w->nlocal + w->nsubcomms; i++) {
    int world = i < w->nlocal;
    ncclComm_t c = world ? w->comms[i] : w->subcomms[i - w->nlocal];
    if (!c) continue;
    ncclResult_t bad = comm_error(c);
    if (bad == ncclSuccess) continue;
    rt_nccl_abort(w);
    return ts_fail_sys(e, "rank %d: NCCL error on %s communicator %d: %s (%s); all %d communicators aborted",
                       w->ranks[0], world ? "world" : "sub-", world ? i : i - w->nlocal, ncclGetErrorString(bad),
                       ncclGetLastError(NULL), w->nlocal + w->nsubcomms);
  }
  return 0;
}

int rt_nccl_wait(rt_nccl *w, ts_err *e) {
  if (w->aborted) return ts_fail_sys(e, "rt_nccl: communicator already aborted");
  double start = now_s();
  long nap = 5;
  for (;;) {
    int pending = 0;
    if (rt_nccl_poll(w, e)) return -1;
    /* a direct-path wait (kernels/coll_direct.h) that timed out on a peer */
    const char *fault = coll_direct_fault();
    if (fault) {
      rt_nccl_abort(w);
      return ts_fail_sys(e, "%s; all %d NCCL communicators aborted", fault, w->nlocal + w->nsubcomms);
    }
    for (int i = 0; i < w->nlocal; i++) {
      RT_CUDA(e, cudaSetDevice(w->devices[i]));
      cudaError_t q = cudaStreamQuery(w->streams[i]);
      if (q == cudaErrorNotReady) pending = 1;
      else if (q != cudaSuccess) {
        rt_nccl_abort(w);
        return ts_fail_sys(e, "%s:%d: rank %d: cudaStreamQuery: %s; communicators aborted", __FILE__, __LINE__,
                           w->ranks[i], cudaGetErrorString(q));
      }
    }
    if (!pending) return 0;
    if (now_s() - start > w->timeout_s) {
      rt_nccl_abort(w);
      return ts_fail_sys(e,
                         "rt_nccl: rank %d: collective not finished after %.1f s (a peer died or stopped answering); "
                         "all %d NCCL communicators aborted",
                         w->ranks[0], w->timeout_s, w->nlocal + w->nsubcomms);
    }
    sleep_us(nap);
    if (nap < 200) nap *= 2;
  }
}

int rt_nccl_max(rt_nccl *w, double *vals, int k, ts_err *e) {
  if (k < 1 || k > 64) return ts_fail_sys(e, "rt_nccl_max: k=%d out of range", k);
  size_t bytes = (size_t)k * sizeof(double);
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaMemcpyAsync(w->dscratch[i], vals + (size_t)i * k, bytes, cudaMemcpyHostToDevice, w->streams[i]));
  }
  RT_NCCL(e, ncclGroupStart());
  for (int i = 0; i < w->nlocal; i++)
    RT_NCCL(e, ncclAllReduce(w->dscratch[i], w->dscratch[i], (size_t)k, ncclFloat64, ncclMax, w->comms[i], w->streams[i]));
  RT_NCCL(e, ncclGroupEnd());
  for (int i = 0; i < w->nlocal; i++) {
    RT_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CUDA(e, cudaMemcpyAsync(vals + (size_t)i * k, w->dscratch[i], bytes, cudaMemcpyDeviceToHost, w->streams[i]));
  }
  return rt_nccl_wait(w, e);
}

int rt_nccl_is_root(const rt_nccl *w) { return w->ranks[0] == 0; }

void rt_nccl_finalize(rt_nccl *w, int failed) {
  if (failed) {
    rt_nccl_abort(w);
  } else if (!w->aborted) {
    rt_watchdog_arm(w, w->timeout_s, "NCCL communicator destroy");
    for (int i = 0; i < w->nsubcomms; i++)
      if (w->subcomms[i]) ncclCommDestroy(w->subcomms[i]);
    for (int i = 0; i < w->nlocal; i++)
      if (w->comms[i]) ncclCommDestroy(w->comms[i]);
    rt_watchdog_disarm();
  }
  for (int i = 0; i < w->nlocal; i++) {
    if (cudaSetDevice(w->devices[i]) != cudaSuccess) continue;
    if (!failed) {
      cudaFree(w->dscratch[i]);
      if (w->streams[i]) cudaStreamDestroy(w->streams[i]);
    }
  }
#ifdef TACOSIM_HAVE_MPI
  if (w->boot == RT_BOOT_MPI) {
    if (failed) MPI_Abort(MPI_COMM_WORLD, 1);
    else MPI_Finalize();
  }
#endif
  memset(w->comms, 0, sizeof w->comms);
  memset(w->subcomms, 0, sizeof w->subcomms);
  w->nsubcomms = 0;
}

/* ---- description --------------------------------------------------------- */

void rt_nccl_describe(const rt_nccl *w, char *buf, size_t n) {
  struct cudaDeviceProp prop;
  memset(&prop, 0, sizeof prop);
  int drv = 0, rtv = 0, nccl = 0;
  cudaGetDeviceProperties(&prop, w->devices[0]);
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rtv);
  ncclGetVersion(&nccl);
  /* driver version: the first dotted number on the first line of
   * /proc/driver/nvidia/version ("... Kernel Module for x86_64  580.159.04 ...") */
  char drvstr[64] = "?";
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (f) {
    char line[512];
    if (fgets(line, sizeof line, f))
      for (char *tok = strtok(line, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
        if (tok[0] >= '0' && tok[0] <= '9' && strchr(tok, '.')) {
          snprintf(drvstr, sizeof drvstr, "%s", tok);
          break;
        }
    fclose(f);
  }
  char env[512]; /* every NCCL_*, EXEC_* variable set (common/ts_env.h) */
  ts_env_knobs(env, sizeof env);
  const char *boot = w->boot == RT_BOOT_MPI ? "mpi" : w->boot == RT_BOOT_FILE ? "id-file" : "single-process";
  snprintf(buf, n,
           "# gpu: %s x %d ranks (%s)\n# driver: %s (CUDA driver API %d.%d), CUDA runtime %d.%d, NCCL %d.%d.%d\n"
           "# transport: %s (--transport %s);%s\n",
           prop.name, w->nranks, boot, drvstr, drv / 1000, drv % 1000 / 10, rtv / 1000, rtv % 1000 / 10,
           nccl / 10000, nccl / 100 % 100, nccl % 100, rt_nccl_transport(w), coll_transport_name(w->transport_asked), env[0] ? env : " (no NCCL_*, EXEC_* variables)");
}

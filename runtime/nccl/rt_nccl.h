/* rt_nccl.h — NCCL bootstrap, bounded waits and aborts for tacorun commands.
 *
 * Three ways to build the communicator:
 *   - MPI: one process per GPU under mpirun (any number of nodes); rank 0's
 *     ncclUniqueId is broadcast over MPI. Chosen when mpirun's environment
 *     is present and tacorun was built with MPI.
 *   - id file: one process per GPU started by any launcher, with
 *     TACORUN_RANK, TACORUN_NRANKS and TACORUN_ID_FILE set (rank 0 writes the
 *     id there; the launcher removes a stale file first). Needs no MPI, so a
 *     killed rank is seen by NCCL alone (the fault test uses it).
 *   - single process: every local GPU (or the first ngpus) with
 *     ncclCommInitAll; collectives go through ncclGroupStart/End.
 *
 * Every CUDA and NCCL call is checked and reported with file:line. Waits
 * poll the streams and ncclCommGetAsyncError; an error or no completion
 * within timeout_s aborts every communicator (ncclCommAbort) and fails, so
 * a dead or stuck peer ends in an error, never a hang. A watchdog thread
 * covers the calls that can block inside NCCL (init, enqueue): past its
 * deadline it aborts the communicators and ends the process with status 1. */
#ifndef RT_NCCL_H
#define RT_NCCL_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stddef.h>

#include "coll_transport.h"
#include "ts_error.h"
#include "gpu_check.h"

#define RT_MAX_LOCAL 16
/* Sub-communicators (TP, DP, PP, ... splits) a process may hold besides its world ones. */
#define RT_MAX_SUBCOMMS 16

typedef enum { RT_BOOT_SINGLE, RT_BOOT_MPI, RT_BOOT_FILE } rt_boot;

typedef struct {
  int single_process; /* force single-process mode */
  int ngpus;          /* single process: GPUs to use (0: all) */
  double timeout_s;   /* bound on init and on every wait (0: 300 s) */
  coll_transport transport; /* --transport (0: auto); see kernels/coll_transport.h */
} rt_nccl_opts;

typedef struct {
  rt_boot boot;
  int nranks, nlocal;
  int ranks[RT_MAX_LOCAL], devices[RT_MAX_LOCAL];
  ncclComm_t comms[RT_MAX_LOCAL];
  cudaStream_t streams[RT_MAX_LOCAL];
  double *dscratch[RT_MAX_LOCAL]; /* small device buffers for rt_nccl_max */
  /* Every other communicator the process holds (rt_nccl_register): waits poll
   * their errors too, and a failure or timeout aborts them with the world ones,
   * so a dead peer in any group ends in an error, never a hang. */
  ncclComm_t subcomms[RT_MAX_SUBCOMMS];
  int nsubcomms;
  double timeout_s;
  int aborted;
  /* the transport (kernels/coll_transport.h): asked, what the ranks have, decided */
  coll_transport transport_asked, transport;
  coll_transport_facts facts;
} rt_nccl;

#define RT_CUDA(e, call) CUDA_CHECK(e, call)
#define RT_NCCL(e, call)                                                                                     \
  GPU_CHECK(ncclResult_t, ncclSuccess, call,                                                                 \
            return ts_fail_sys(e, "%s:%d: %s: %s (%s)", __FILE__, __LINE__, #call, ncclGetErrorString(gpu_s_), \
                               ncclGetLastError(NULL)))

/* Number of CUDA devices, 0 when there is none or no driver (never fails). */
int rt_cuda_device_count(void);

int rt_nccl_init(rt_nccl *w, const rt_nccl_opts *o, ts_err *e);
/* Waits for everything enqueued on the local streams; see above. Polls the
 * asynchronous errors of the world and every registered communicator. */
int rt_nccl_wait(rt_nccl *w, ts_err *e);
/* Registers a communicator made from the world one (ncclCommSplit, ...), so
 * that waits poll it and aborts/the watchdog abort it. */
int rt_nccl_register(rt_nccl *w, ncclComm_t c, ts_err *e);
/* Unregisters c and destroys it (bounded by the watchdog); after an abort it
 * only unregisters (aborted communicators are freed by ncclCommAbort). */
void rt_nccl_comm_destroy(rt_nccl *w, ncclComm_t c);
/* Checks every communicator's asynchronous error once (no wait); on an error
 * aborts all of them and fails. */
int rt_nccl_poll(rt_nccl *w, ts_err *e);
/* Aborts every communicator, world and registered (idempotent). */
void rt_nccl_abort(rt_nccl *w);
/* Destroys the communicators (or, after a failure, aborts them; under MPI a
 * failed rank calls MPI_Abort so that the job ends). */
void rt_nccl_finalize(rt_nccl *w, int failed);
/* vals holds nlocal rows of k doubles (k <= 64); on return every row holds
 * the element-wise maximum over all ranks. */
int rt_nccl_max(rt_nccl *w, double *vals, int k, ts_err *e);
/* True when this process holds rank 0 (the one that prints). */
int rt_nccl_is_root(const rt_nccl *w);

/* '#' comment lines: GPU, driver, CUDA runtime, NCCL version, transport. */
void rt_nccl_describe(const rt_nccl *w, char *buf, size_t n);
/* The transport the run decided, as result and calibration files record it
 * (machine.transport): "nvlink", "pcie" (GPU peer access), "shm" or "socket". */
const char *rt_nccl_transport(const rt_nccl *w);
/* "--transport auto|p2p|shm|socket [auto]" and what each means, for --help. */
#define RT_TRANSPORT_USAGE                                                                                    \
  "  --transport auto|p2p|shm|socket [auto]  how the ranks reach each other (NCCL and the compressed\n"       \
  "                     collectives' direct paths): auto = p2p where every pair of GPUs has peer access\n"   \
  "                     on one host (cudaDeviceCanAccessPeer), else shm where the ranks share a host,\n"    \
  "                     else socket; an explicit choice that the GPUs or hosts cannot do is refused\n"       \
  "                     (exit 2). Recorded as machine.transport.\n"
/* The facts of ranks that are the GPUs `devices` of this process's host, from
 * cudaDeviceCanAccessPeer (what rt_nccl_init uses in single-process mode). */
void rt_transport_local(const int *devices, int n, coll_transport_facts *f);
/* Parses the value of --transport; a bad value is a named error (exit 2). */
int rt_transport_arg(const char *s, coll_transport *t, ts_err *e);

/* Watchdog: past `seconds` without a disarm, abort the communicators and
 * exit(1) with a message naming `what`. Its thread starts in rt_nccl_init
 * (rt_watchdog_start: a named error when it cannot, and the run does not
 * start); arming without it ends the process with a message. */
int rt_watchdog_start(ts_err *e);
void rt_watchdog_arm(rt_nccl *w, double seconds, const char *what);
void rt_watchdog_disarm(void);

#endif

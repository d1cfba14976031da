/* exec_comm.c — sub-communicators and small host reductions for the executor. */
#include <stdlib.h>

#include "exec_run.h"
#ifdef TACOSIM_HAVE_MPI
#include <mpi.h>
#endif

int exec_comm_split(rt_nccl *w, int color, int key, ncclComm_t *out, ts_err *e) {
  *out = NULL;
  if (w->nranks == 1) return 0;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  rt_watchdog_arm(w, w->timeout_s, "NCCL communicator split");
  ncclResult_t r = ncclCommSplit(w->comms[0], color, key, out, &cfg);
  rt_watchdog_disarm();
  RT_NCCL(e, r);
  return rt_nccl_register(w, *out, e); /* waits poll it, failures abort it */
}

static int world_reduce(rt_nccl *w, double *vals, int n, int is_max, ts_err *e) {
  if (w->nranks == 1) return 0;
#ifdef TACOSIM_HAVE_MPI
  if (w->boot == RT_BOOT_MPI) {
    if (MPI_Allreduce(MPI_IN_PLACE, vals, n, MPI_DOUBLE, is_max ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
      return ts_fail_sys(e, "exec: MPI_Allreduce failed");
    return 0;
  }
#endif
  /* Without MPI: through NCCL on the world communicator. */
  double *d;
  RT_CUDA(e, cudaMalloc((void **)&d, (size_t)n * sizeof *d));
  RT_CUDA(e, cudaMemcpy(d, vals, (size_t)n * sizeof *d, cudaMemcpyHostToDevice));
  RT_NCCL(e, ncclAllReduce(d, d, (size_t)n, ncclFloat64, is_max ? ncclMax : ncclSum, w->comms[0], w->streams[0]));
  if (rt_nccl_wait(w, e)) return -1;
  RT_CUDA(e, cudaMemcpy(vals, d, (size_t)n * sizeof *d, cudaMemcpyDeviceToHost));
  RT_CUDA(e, cudaFree(d));
  return 0;
}

int exec_world_max(rt_nccl *w, double *vals, int n, ts_err *e) { return world_reduce(w, vals, n, 1, e); }
int exec_world_sum(rt_nccl *w, double *vals, int n, ts_err *e) { return world_reduce(w, vals, n, 0, e); }

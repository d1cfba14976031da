/* rt_world.c — sub-communicators, small host reductions and the machine record (rt_world.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_world.h"
#include "ts_env.h"
#ifdef TACOSIM_HAVE_MPI
#include <mpi.h>
#endif

int rt_world_start(rt_nccl *w, const char *cmd, double timeout_s, coll_transport transport) {
  ts_err e = {{0}, 0};
  rt_nccl_opts no = {.single_process = 0, .ngpus = 1, .timeout_s = timeout_s, .transport = transport};
  if (rt_nccl_init(w, &no, &e)) {
    fprintf(stderr, "tacorun %s: %s\n", cmd, e.msg);
    return e.bad_input ? TS_EXIT_BAD_INPUT : TS_EXIT_FAILURE;
  }
  if (w->nlocal != 1) {
    /* single-process mode took every local GPU: these commands drive one GPU per process */
    fprintf(stderr, "tacorun %s: run one process per GPU, e.g. mpirun -np 2 tacorun %s ...\n", cmd, cmd);
    rt_nccl_finalize(w, 0);
    return 2;
  }
  return 0;
}

int rt_world_split(rt_nccl *w, int color, int key, ncclComm_t *out, ts_err *e) {
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
      return ts_fail_sys(e, "world: MPI_Allreduce failed");
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

int rt_world_max(rt_nccl *w, double *vals, int n, ts_err *e) { return world_reduce(w, vals, n, 1, e); }
int rt_world_sum(rt_nccl *w, double *vals, int n, ts_err *e) { return world_reduce(w, vals, n, 0, e); }

void rt_machine_of(const rt_nccl *w, schema_machine *mc) {
  struct cudaDeviceProp prop;
  memset(mc, 0, sizeof *mc);
  if (cudaGetDeviceProperties(&prop, w->devices[0]) == cudaSuccess) snprintf(mc->gpu, sizeof mc->gpu, "%.63s", prop.name);
  int rtv = 0, nv = 0;
  cudaRuntimeGetVersion(&rtv);
  ncclGetVersion(&nv);
  snprintf(mc->cuda, sizeof mc->cuda, "%d.%d", rtv / 1000, rtv % 1000 / 10);
  snprintf(mc->nccl, sizeof mc->nccl, "%d.%d.%d", nv / 10000, nv / 100 % 100, nv % 100);
  snprintf(mc->driver, sizeof mc->driver, "?");
  FILE *f = fopen("/proc/driver/nvidia/version", "r");
  if (f) {
    char line[256];
    if (fgets(line, sizeof line, f)) {
      char *k = strstr(line, "Kernel Module");
      if (k && sscanf(k + strlen("Kernel Module"), "%31s", mc->driver) != 1) snprintf(mc->driver, sizeof mc->driver, "?");
    }
    fclose(f);
  }
  snprintf(mc->transport, sizeof mc->transport, "%s", rt_nccl_transport(w));
}

void rt_note_transport(schema_result *r, const rt_nccl *w) {
  char note[160];
  snprintf(note, sizeof note, "transport: asked %s, decided %s (%s; peer access between every pair: %s, one host: %s)",
           coll_transport_name(w->transport_asked), coll_transport_name(w->transport), rt_nccl_transport(w),
           w->facts.peer_all ? "yes" : "no", w->facts.same_host ? "yes" : "no");
  schema_result_add_note(r, note);
}

void rt_note_env(schema_result *r) {
  char env[224], note[256];
  ts_env_knobs(env, sizeof env);
  snprintf(note, sizeof note, "environment:%s", *env ? env : " no NCCL_*, EXEC_* variable set");
  schema_result_add_note(r, note);
}

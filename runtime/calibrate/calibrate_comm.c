/* calibrate_comm.c — NCCL BF16 and TACO-compressed collectives over a size sweep.
 *
 * Two ways to drive the GPUs:
 *   - single process (default): one NCCL rank per local GPU (rt_nccl's
 *     single-process mode), for every group size 2, 4, 8, ... up to the GPUs
 *     given;
 *   - one process per GPU (under mpirun, as the executor and bench-comm run):
 *     the world communicator only, opened once for both phases.
 * Sizes follow nccl-tests: the whole buffer in bytes (all-gather: the gathered
 * output; reduce-scatter: the input; all-to-all: what one rank sends;
 * send/recv: what one rank sends, in a ring shift). Compressed collectives
 * always compress (min_bytes = 0), so their table shows the compressed path
 * at every size and the simulator can choose the faster path per size. They
 * run with coll_opts_default(), as the executor's do: on NVLink that is the
 * direct path (kernels/coll_direct.h) for all-gather, reduce-scatter and
 * all-reduce (one-shot below 16 MiB, two-shot from there), the NCCL path for
 * all-to-all and send/recv and on the other transports, so the table times
 * what the executor runs.
 *
 * Timing: every rank agrees on the batch length (the maximum of the ranks'
 * estimates), every timed batch starts after a one-element all-reduce so the
 * GPUs start together, a batch's time is the slowest rank's, and the table
 * holds the median over the batches; the spread of the batches is kept
 * (calib_spread) for the file's notes and a TSV next to it. A watchdog bounds
 * every measurement: a stuck transport ends the run with an error, not a hang. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "calibrate_progress.h"
#include "coll_taco.h"
#include "rt_nccl.h"
#include "rt_ops.h"
#include "rt_ops_check.h"

typedef struct {
  rt_nccl *w;
  coll_team *team; /* NULL: plain NCCL */
  coll_opts opts;
  coll_op op;
  size_t bytes; /* nccl-tests size */
  int elem_bytes; /* of the payload: 2 (bf16), 4 (fp32: DP gradients under TACO) */
  void *send[RT_MAX_LOCAL], *recv[RT_MAX_LOCAL];
} comm_ctx;

/* Elements per call argument, from the nccl-tests size. */
static size_t op_count(coll_op op, size_t bytes, int nranks, int elem_bytes) {
  size_t elems = bytes / (size_t)elem_bytes;
  switch (op) {
  case COLL_OP_ALLGATHER:
  case COLL_OP_REDUCESCATTER:
  case COLL_OP_ALLTOALL: return elems / (size_t)nranks;
  default: return elems;
  }
}

static int plain_launch(comm_ctx *c, ts_err *e) {
  rt_nccl *w = c->w;
  int n = w->nranks;
  size_t count = op_count(c->op, c->bytes, n, 2);
  RT_CHECK_NCCL(e, ncclGroupStart());
  for (int i = 0; i < w->nlocal; i++) {
    ncclComm_t comm = w->comms[i];
    cudaStream_t st = w->streams[i];
    int r = w->ranks[i];
    ncclResult_t res = ncclSuccess;
    switch (c->op) {
    case COLL_OP_ALLREDUCE: res = ncclAllReduce(c->send[i], c->recv[i], count, ncclBfloat16, ncclSum, comm, st); break;
    case COLL_OP_ALLGATHER: res = ncclAllGather(c->send[i], c->recv[i], count, ncclBfloat16, comm, st); break;
    case COLL_OP_REDUCESCATTER:
      res = ncclReduceScatter(c->send[i], c->recv[i], count, ncclBfloat16, ncclSum, comm, st);
      break;
    case COLL_OP_ALLTOALL:
      for (int p = 0; p < n && res == ncclSuccess; p++) {
        res = ncclSend((char *)c->send[i] + (size_t)p * count * 2, count, ncclBfloat16, p, comm, st);
        if (res == ncclSuccess) res = ncclRecv((char *)c->recv[i] + (size_t)p * count * 2, count, ncclBfloat16, p, comm, st);
      }
      break;
    default: /* send/recv ring shift */
      res = ncclSend(c->send[i], count, ncclBfloat16, (r + 1) % n, comm, st);
      if (res == ncclSuccess) res = ncclRecv(c->recv[i], count, ncclBfloat16, (r + n - 1) % n, comm, st);
      break;
    }
    if (res != ncclSuccess) {
      ncclGroupEnd();
      return ts_fail_sys(e, "%s:%d: NCCL %s of %zu bytes: %s", __FILE__, __LINE__, coll_op_name(c->op), c->bytes,
                         ncclGetErrorString(res));
    }
  }
  RT_CHECK_NCCL(e, ncclGroupEnd());
  return 0;
}

static int comm_launch(void *p, long long iter, ts_err *e) {
  (void)iter;
  comm_ctx *c = p;
  if (!c->team) return plain_launch(c, e);
  size_t count = op_count(c->op, c->bytes, c->w->nranks, c->elem_bytes);
  if (coll_run(c->team, c->op, (const void *const *)c->send, c->recv, count, &c->opts))
    return ts_fail_sys(e, "compressed %s of %zu bytes: %s", coll_op_name(c->op), c->bytes, coll_last_error());
  return 0;
}

/* 1 KiB .. max in steps of sqrt(2): powers of two and 1.5 times them, so a
 * size between two measured ones is interpolated over at most 1.5x. Sizes
 * stay multiples of 512 bytes (whole elements for every rank count up to 256). */
#define MAX_SIZES 64
static int sweep_sizes(const calib_config *cfg, size_t *sizes) {
  int n = 0;
  for (size_t b = 1024; b <= cfg->comm_max_bytes && n < MAX_SIZES - 1; b *= 2) {
    sizes[n++] = b;
    if (b + b / 2 <= cfg->comm_max_bytes) sizes[n++] = b + b / 2;
  }
  return n;
}

/* Starts every local stream after a one-element all-reduce, so that a timed
 * batch begins at the same moment on every GPU of the group. */
static int align_ranks(rt_nccl *w, ts_err *e) {
  RT_CHECK_NCCL(e, ncclGroupStart());
  for (int i = 0; i < w->nlocal; i++) {
    ncclResult_t r = ncclAllReduce(w->dscratch[i], w->dscratch[i], 1, ncclFloat64, ncclMax, w->comms[i], w->streams[i]);
    if (r != ncclSuccess) {
      ncclGroupEnd();
      return ts_fail_sys(e, "%s:%d: ncclAllReduce (alignment): %s", __FILE__, __LINE__, ncclGetErrorString(r));
    }
  }
  RT_CHECK_NCCL(e, ncclGroupEnd());
  return 0;
}

#define COMM_MAX_REPS 15

/* One batch of `count` launches; *us: the slowest local GPU's time per launch. */
static int comm_batch(comm_ctx *c, cudaEvent_t *t0, cudaEvent_t *t1, int count, double *us, ts_err *e) {
  rt_nccl *w = c->w;
  RT_TRY(align_ranks(w, e));
  for (int i = 0; i < w->nlocal; i++) {
    RT_CHECK_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CHECK_CUDA(e, cudaEventRecord(t0[i], w->streams[i]));
  }
  for (int k = 0; k < count; k++) RT_TRY(comm_launch(c, k, e));
  for (int i = 0; i < w->nlocal; i++) {
    RT_CHECK_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CHECK_CUDA(e, cudaEventRecord(t1[i], w->streams[i]));
  }
  RT_TRY(rt_nccl_wait(w, e)); /* bounded: a dead peer is an error */
  double worst = 0;
  for (int i = 0; i < w->nlocal; i++) {
    float ms = 0;
    RT_CHECK_CUDA(e, cudaSetDevice(w->devices[i]));
    RT_CHECK_CUDA(e, cudaEventElapsedTime(&ms, t0[i], t1[i]));
    if (ms > worst) worst = ms;
  }
  *us = 1000.0 * worst / count;
  return 0;
}

/* Median time of one launch over the budget's batches, the slowest rank's in
 * each batch; row gets the spread. Every rank makes the same calls. */
static int comm_time(comm_ctx *c, const calib_budget *b, calib_spread_row *row, ts_err *e) {
  rt_nccl *w = c->w;
  cudaEvent_t t0[RT_MAX_LOCAL], t1[RT_MAX_LOCAL];
  int made = 0, rc = -1;
  for (; made < w->nlocal; made++) {
    if (cudaSetDevice(w->devices[made]) != cudaSuccess || cudaEventCreate(&t0[made]) != cudaSuccess) break;
    if (cudaEventCreate(&t1[made]) != cudaSuccess) {
      cudaEventDestroy(t0[made]);
      break;
    }
  }
  if (made < w->nlocal) {
    ts_fail_sys(e, "%s:%d: cudaEventCreate failed", __FILE__, __LINE__);
    goto out;
  }
  for (int i = 0; i < b->warmup; i++)
    if (comm_launch(c, i, e)) goto out;
  /* every rank's estimate, then the largest: all ranks run the same batches */
  double est[RT_MAX_LOCAL], t[RT_MAX_LOCAL][COMM_MAX_REPS];
  memset(t, 0, sizeof t);
  if (comm_batch(c, t0, t1, 1, &est[0], e)) goto out;
  for (int i = 1; i < w->nlocal; i++) est[i] = est[0];
  if (rt_nccl_max(w, est, 1, e)) goto out;
  int reps = b->reps < COMM_MAX_REPS ? b->reps : COMM_MAX_REPS, batch = 1, r0 = 0;
  if (est[0] >= b->long_us) {
    if (reps > 3) reps = 3;
    t[0][0] = est[0], r0 = 1; /* a long launch after warm-up is already a sample */
  } else {
    double want = b->target_us / (est[0] > 0.5 ? est[0] : 0.5);
    batch = want < 1 ? 1 : (want > b->max_batch ? b->max_batch : (int)(want + 0.999));
  }
  for (int r = r0; r < reps; r++)
    if (comm_batch(c, t0, t1, batch, &t[0][r], e)) goto out;
  for (int i = 1; i < w->nlocal; i++) memcpy(t[i], t[0], sizeof t[0]);
  if (reps - r0 > 0 && rt_nccl_max(w, &t[0][0], COMM_MAX_REPS, e)) goto out; /* rows of COMM_MAX_REPS */
  double v[COMM_MAX_REPS];
  memcpy(v, t[0], (size_t)reps * sizeof *v);
  row->reps = reps, row->batch = batch;
  row->median_us = calib_median(v, reps); /* sorts v */
  row->min_us = v[0], row->max_us = v[reps - 1];
  rc = 0;
out:
  for (int i = 0; i < made; i++) {
    cudaSetDevice(w->devices[i]);
    cudaEventDestroy(t0[i]);
    cudaEventDestroy(t1[i]);
  }
  return rc;
}

/* Times one op over the sweep and adds the table `name` for nranks. */
static int sweep(const calib_config *cfg, comm_ctx *c, const char *name, calib_progress *pr, schema_calibration *cal,
                 ts_err *e) {
  size_t sizes[MAX_SIZES];
  int ns = sweep_sizes(cfg, sizes);
  for (int s = 0; s < ns; s++) {
    c->bytes = sizes[s];
    char what[96];
    snprintf(what, sizeof what, "calibrate %s over %d ranks at %zu bytes", name, c->w->nranks, c->bytes);
    rt_watchdog_arm(c->w, 45.0, what); /* 1 GiB at socket speed takes under a second */
    int rc = 0;
    if (s == 0) /* the first calls of an op set up its connections: keep them out of the table */
      for (int i = 0; i < 5 && !rc; i++) rc = comm_launch(c, 0, e);
    if (!rc) rc = rt_nccl_wait(c->w, e);
    calib_spread_row row;
    memset(&row, 0, sizeof row);
    if (!rc) rc = comm_time(c, &cfg->comm_budget, &row, e);
    rt_watchdog_disarm();
    if (rc) return -1;
    snprintf(row.name, sizeof row.name, "%s", name);
    row.nranks = c->w->nranks, row.bytes = (double)c->bytes;
    double us = row.median_us;
    if (schema_calibration_add_coll(cal, name, c->w->nranks, (double)c->bytes, us) ||
        (cfg->spread && calib_spread_add(cfg->spread, &row)))
      return ts_fail_sys(e, "calibrate: out of memory");
    double busbw = (double)c->bytes / us * 1e-3 * coll_busbw_factor(c->op, c->w->nranks);
    calib_progress_step(pr, "%s n=%d %zu B %.1f us busbw %.1f GB/s spread %.1f%% (%d x %d)", name, c->w->nranks,
                        c->bytes, us, busbw, 100.0 * (row.max_us - row.min_us) / us, row.reps, row.batch);
  }
  return 0;
}

/* Times `ops` compressed by TACO for every configured group size, on bf16
 * payloads ("<op>.taco<G>") or, with c->elem_bytes 4, FP32 ones
 * ("<op>.taco<G>.fp32", keyed by FP32 bytes). max: the buffers' bytes. */
static int sweep_taco(const calib_config *cfg, comm_ctx *c, const coll_op *ops, int nops, size_t max,
                      calib_progress *pr, schema_calibration *cal, ts_err *e) {
  for (int gi = 0; gi < cfg->n_coll_groups; gi++) {
    c->opts = coll_opts_default();
    c->opts.taco.group = cfg->coll_groups[gi];
    c->opts.min_bytes = 0;
    if (c->elem_bytes == 4) c->opts.dtype = TACO_DTYPE_FP32;
    for (int k = 0; k < nops; k++) {
      c->op = ops[k];
      if (coll_team_reserve(c->team, c->op, op_count(c->op, max, c->w->nranks, c->elem_bytes), &c->opts))
        return ts_fail_sys(e, "coll_team_reserve: %s", coll_last_error());
      char name[56];
      snprintf(name, sizeof name, "%s.taco%d%s", coll_op_name(c->op), c->opts.taco.group,
               c->elem_bytes == 4 ? ".fp32" : "");
      if (sweep(cfg, c, name, pr, cal, e)) return -1;
    }
  }
  return 0;
}

/* compressed: 0 for NCCL BF16, 1 for the TACO collectives of every configured
 * group size. w: the communicator of the group (its own, or the world one). */
static int run_on(const calib_config *cfg, rt_nccl *wp, int compressed, schema_calibration *cal, ts_err *e) {
  rt_nccl *w = wp;
  int g = w->nranks;
  comm_ctx c;
  memset(&c, 0, sizeof c);
  c.w = w;
  c.elem_bytes = 2;
  coll_team team;
  int have_team = 0, rc = -1;
  size_t max = cfg->comm_max_bytes;
  for (int i = 0; i < w->nlocal; i++) {
    if (cudaSetDevice(w->devices[i]) != cudaSuccess || cudaMalloc(&c.send[i], max) != cudaSuccess ||
        cudaMalloc(&c.recv[i], max) != cudaSuccess) {
      ts_fail_sys(e, "%s:%d: cudaMalloc of 2 x %zu bytes on GPU %d failed", __FILE__, __LINE__, max, w->devices[i]);
      goto out;
    }
    if (rt_fill_random_bf16(c.send[i], (long long)(max / 2), 900 + (uint64_t)w->ranks[i], 1.0f, w->streams[i], e) ||
        rt_fill_random_bf16(c.recv[i], (long long)(max / 2), 950 + (uint64_t)w->ranks[i], 1.0f, w->streams[i], e))
      goto out;
  }
  if (rt_nccl_wait(w, e)) goto out;

  static const coll_op ops[] = {COLL_OP_ALLREDUCE, COLL_OP_ALLGATHER, COLL_OP_REDUCESCATTER, COLL_OP_ALLTOALL,
                                COLL_OP_SENDRECV};
  const int nops = 5;
  size_t sizes[MAX_SIZES];
  int ns = sweep_sizes(cfg, sizes);
  char phase[80];
  snprintf(phase, sizeof phase, "%s collectives over %d GPUs%s", compressed ? "TACO" : "NCCL BF16", g,
           cfg->multi ? " (one process per GPU)" : "");
  calib_progress pr;
  int root = !cfg->multi || cfg->rank == 0;
  /* TACO also compresses FP32 payloads (DP gradient buckets, ZeRO-1's
   * reduce-scatters): their all-reduce and reduce-scatter get tables of their
   * own, "<op>.taco<G>.fp32" keyed by FP32 bytes, since the codec's FP32
   * kernels and the chunking by bytes differ from the bf16 ones */
  static const coll_op fp32_ops[] = {COLL_OP_ALLREDUCE, COLL_OP_REDUCESCATTER};
  const int nfp32 = 2;
  calib_progress_begin(&pr, root ? phase : NULL, (nops + (compressed ? nfp32 : 0)) * ns * (compressed ? cfg->n_coll_groups : 1));
  if (!compressed) {
    for (int k = 0; k < nops; k++) {
      c.op = ops[k];
      if (sweep(cfg, &c, coll_op_name(c.op), &pr, cal, e)) goto out;
    }
  } else {
    if (coll_team_init(&team, w->nlocal, w->comms, w->devices, w->streams)) {
      ts_fail_sys(e, "coll_team_init: %s", coll_last_error());
      goto out;
    }
    have_team = 1;
    c.team = &team;
    if (sweep_taco(cfg, &c, ops, nops, max, &pr, cal, e)) goto out;
    for (int i = 0; i < w->nlocal; i++) {
      if (cudaSetDevice(w->devices[i]) != cudaSuccess) {
        ts_fail_sys(e, "%s:%d: cudaSetDevice(%d) failed", __FILE__, __LINE__, w->devices[i]);
        goto out;
      }
      if (rt_fill_random_f32(c.send[i], (long long)(max / 4), 980 + (uint64_t)w->ranks[i], 1.0f, w->streams[i], e))
        goto out;
    }
    if (rt_nccl_wait(w, e)) goto out;
    c.elem_bytes = 4;
    if (sweep_taco(cfg, &c, fp32_ops, nfp32, max, &pr, cal, e)) goto out;
  }
  calib_progress_end(&pr);
  rc = 0;
out:
  if (have_team) coll_team_destroy(&team);
  for (int i = 0; i < w->nlocal; i++) {
    cudaSetDevice(w->devices[i]);
    cudaFree(c.send[i]);
    cudaFree(c.recv[i]);
  }
  return rc;
}

static int run_group(const calib_config *cfg, int g, int compressed, schema_calibration *cal, ts_err *e) {
  rt_nccl w;
  rt_nccl_opts o = {.single_process = 1, .ngpus = g, .timeout_s = 120.0, .transport = (coll_transport)cfg->transport};
  if (rt_nccl_init(&w, &o, e)) return -1;
  int rc = run_on(cfg, &w, compressed, cal, e);
  rt_nccl_finalize(&w, rc != 0);
  return rc;
}

int calib_world_open(calib_config *cfg, ts_err *e) {
  static rt_nccl world;
#ifndef TACOSIM_HAVE_MPI
  if (!getenv("TACORUN_ID_FILE"))
    return ts_fail(e, NULL, "mpirun",
                   "this tacorun was built without MPI: run one process (it drives every GPU) or set "
                   "TACORUN_RANK/TACORUN_NRANKS/TACORUN_ID_FILE");
#endif
  rt_nccl_opts o = {.single_process = 0, .ngpus = 1, .timeout_s = 120.0, .transport = (coll_transport)cfg->transport};
  if (rt_nccl_init(&world, &o, e)) return -1;
  if (world.boot == RT_BOOT_SINGLE || world.nranks != cfg->nranks || world.ranks[0] != cfg->rank) {
    int boot = (int)world.boot, n = world.nranks;
    rt_nccl_finalize(&world, 0);
    return ts_fail(e, NULL, "mpirun",
                   "one process per GPU needs tacorun built with MPI (or TACORUN_ID_FILE); got boot mode %d with %d "
                   "ranks, expected %d",
                   boot, n, cfg->nranks);
  }
  cfg->world = &world;
  return 0;
}

void calib_world_close(calib_config *cfg, int failed) {
  if (!cfg->world) return;
  rt_nccl_finalize((rt_nccl *)cfg->world, failed);
  cfg->world = NULL;
}

static int run_comm_once(const calib_config *cfg, int compressed, schema_calibration *cal, ts_err *e) {
  if (cfg->multi) {
    if (!cfg->world) return ts_fail_sys(e, "calibrate: world communicator not open");
    return run_on(cfg, (rt_nccl *)cfg->world, compressed, cal, e);
  }
  /* one rank has nothing to communicate (and calibration files start at 2 ranks) */
  for (int g = 2; g <= cfg->ndev; g *= 2) RT_TRY(run_group(cfg, g, compressed, cal, e));
  return 0;
}

int calib_run_comm(const calib_config *cfg, int compressed, schema_calibration *cal, ts_err *e) {
  int n = cfg->comm_passes > 1 ? cfg->comm_passes : 1;
  if (n == 1) return run_comm_once(cfg, compressed, cal, e);
  /* every pass into a calibration of its own, then the median of each point */
  schema_calibration *pass = calloc((size_t)n, sizeof *pass);
  if (!pass) return ts_fail_sys(e, "calibrate: out of memory");
  int rc = 0;
  for (int p = 0; p < n && !rc; p++) rc = run_comm_once(cfg, compressed, &pass[p], e);
  if (!rc && calib_comm_combine_passes(pass, n, cal)) rc = ts_fail_sys(e, "calibrate: out of memory");
  for (int p = 0; p < n; p++) schema_calibration_free(&pass[p]);
  free(pass);
  return rc;
}


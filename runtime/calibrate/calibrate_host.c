/* calibrate_host.c — the "host" section of `tacorun calibrate` (calibrate.h,
 * schema/calibration.h): what the executor's host costs when the GPU waits
 * for it, measured with the GPU idle so that the host is the bottleneck.
 *
 *   launch_us       host time per launch of a small kernel issued back to
 *                   back: rt_add on 256 bf16 elements (the executor's
 *                   residual add), HOST_LAUNCHES launches after a
 *                   synchronisation, wall clock over the loop / launches;
 *                   median of HOST_REPS repetitions;
 *   gemm_launch_us  the same for a 64 x 64 x 64 bf16 GEMM through the
 *                   executor's cuBLASLt path (exec_gemm_run, algorithm cached
 *                   after a warm-up call);
 *   event_us        the same for cudaEventRecord (the executor's walker
 *                   records two events around every op, exec_walk.c);
 *   sync            the GPU's idle gap between the end of a 4-byte
 *                   device-to-host copy that the host waits for and the next
 *                   kernel it launches, against the GPU work queued ahead of
 *                   the copy (wait_us, a spin kernel of that length): the
 *                   host waits as the executor does after the dropless
 *                   router's count copy (exec_stream_wait: cudaStreamQuery,
 *                   naps of 5 us doubling to 200 us; replicated here, since
 *                   that function belongs to the executor's model). The gap
 *                   is timed on the GPU: an event after the copy, an event
 *                   recorded by the host once the wait returns, then the
 *                   kernel. Median of HOST_REPS.
 *   graph_gap_us    what a launch of a table-timed decode kernel (a GEMM,
 *                   either decode-attention kernel) costs the GPU more in a
 *                   stream the host keeps ahead of than inside a CUDA graph:
 *                   `tacorun bench-graph`'s measurement and rule
 *                   (calibrate_graph.h) at its defaults, Llama-3 8B's decode
 *                   layer from the model zoo (fewer layers when 32 do not fit
 *                   in 80 % of the free memory; named on stderr), batch 1 x
 *                   4,096, 16 x 1,024, 64 x 2,048: the median of "queued -
 *                   graph" over the 24 launches (16 GEMMs, 4 x 2 attention
 *                   kernels). Only `tacosim simulate --decode graph` reads it.
 * Every point is printed to stderr. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibrate.h"
#include "calibrate_graph.h"
#include "exec_gemm.h"
#include "gpu_check.h"
#include "model.h"
#include "rt_ops.h"

int calib_clock_spin(double us, void *stream, ts_err *e); /* calibrate_clock_spin.cu */

#define HOST_LAUNCHES 200
#define HOST_REPS 21
#define HOST_ELEMS 256
#define HOST_GEMM 64
#define GRAPH_MODEL "llama3-8b" /* the decode layer of the graph gap (bench-graph's default) */
static const double SYNC_WAITS_US[] = {0, 25, 50, 100, 200, 400, 800, 1600};
#define N_SYNC_WAITS ((int)(sizeof SYNC_WAITS_US / sizeof *SYNC_WAITS_US))

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The executor's wait for a stream (exec_stream_wait without its NCCL checks and timeout). */
static int poll_wait(cudaStream_t s, ts_err *e) {
  long nap = 5;
  for (;;) {
    cudaError_t q = cudaStreamQuery(s);
    if (q == cudaSuccess) return 0;
    if (q != cudaErrorNotReady) return ts_fail_sys(e, "calibrate host: cudaStreamQuery: %s", cudaGetErrorString(q));
    struct timespec ts = {0, nap * 1000};
    nanosleep(&ts, NULL);
    if (nap < 200) nap *= 2;
  }
}

typedef struct {
  cudaStream_t s;
  void *x, *y; /* HOST_ELEMS bf16 each */
  void *a, *b, *c; /* HOST_GEMM^2 bf16 each */
  exec_gemm *g;
  int *dcount, *hcount;
  cudaEvent_t ev[2], rec; /* rec: the event recorded back to back (event_us) */
} host_ctx;

enum { HOST_KERNEL, HOST_GEMM_CALL, HOST_EVENT };

static int launch_one(host_ctx *h, int what, ts_err *e) {
  if (what == HOST_KERNEL) return rt_add(h->x, h->x, h->y, HOST_ELEMS, h->s, e);
  if (what == HOST_EVENT) {
    CUDA_CHECK(e, cudaEventRecord(h->rec, h->s));
    return 0;
  }
  exec_gemm_shape sh = exec_gemm_packed(EXEC_GEMM_NN, HOST_GEMM, HOST_GEMM, HOST_GEMM);
  return exec_gemm_run(h->g, &sh, 1.f, h->a, h->b, 0.f, h->c, h->s, e);
}

/* Host time per launch (us), GPU idle at the start of every repetition; *gpu_us: the GPU's span per kernel. */
static int time_launches(host_ctx *h, int what, double *host_us, double *gpu_us, ts_err *e) {
  double th[HOST_REPS], tg[HOST_REPS];
  if (launch_one(h, what, e)) return -1; /* warm-up: the GEMM's plan is built here */
  for (int r = 0; r < HOST_REPS; r++) {
    CUDA_CHECK(e, cudaStreamSynchronize(h->s));
    CUDA_CHECK(e, cudaEventRecord(h->ev[0], h->s));
    double t0 = now_s();
    for (int i = 0; i < HOST_LAUNCHES; i++)
      if (launch_one(h, what, e)) return -1;
    double t1 = now_s();
    CUDA_CHECK(e, cudaEventRecord(h->ev[1], h->s));
    CUDA_CHECK(e, cudaEventSynchronize(h->ev[1]));
    float ms = 0;
    CUDA_CHECK(e, cudaEventElapsedTime(&ms, h->ev[0], h->ev[1]));
    th[r] = (t1 - t0) * 1e6 / HOST_LAUNCHES;
    tg[r] = ms * 1e3 / HOST_LAUNCHES;
  }
  *host_us = median(th, HOST_REPS);
  *gpu_us = median(tg, HOST_REPS);
  return 0;
}

/* The GPU's gap (us) after a waited-for copy behind wait_us of queued work. */
static int time_sync(host_ctx *h, double wait_us, double *gap_us, ts_err *e) {
  double t[HOST_REPS];
  for (int r = 0; r < HOST_REPS; r++) {
    CUDA_CHECK(e, cudaStreamSynchronize(h->s));
    if (wait_us > 0 && calib_clock_spin(wait_us, h->s, e)) return -1;
    CUDA_CHECK(e, cudaMemcpyAsync(h->hcount, h->dcount, 4, cudaMemcpyDeviceToHost, h->s));
    CUDA_CHECK(e, cudaEventRecord(h->ev[0], h->s));
    if (poll_wait(h->s, e)) return -1;
    CUDA_CHECK(e, cudaEventRecord(h->ev[1], h->s));
    if (launch_one(h, HOST_KERNEL, e)) return -1;
    CUDA_CHECK(e, cudaEventSynchronize(h->ev[1]));
    float ms = 0;
    CUDA_CHECK(e, cudaEventElapsedTime(&ms, h->ev[0], h->ev[1]));
    t[r] = ms * 1e3;
  }
  *gap_us = median(t, HOST_REPS);
  return 0;
}

/* host.graph_gap_us by bench-graph's method (calibrate_graph.h) on Llama-3 8B's decode layer. */
static int graph_gap(double *gap_us, ts_err *e) {
  model_config mc;
  if (model_load(GRAPH_MODEL, NULL, &mc, e)) return -1;
  calib_graph_opts o = calib_graph_defaults();
  o.mc = &mc;
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(e, cudaMemGetInfo(&free_b, &total_b));
  while (o.layers > 1 && calib_graph_bytes(&o) > 0.8 * (double)free_b) o.layers /= 2;
  if (calib_graph_bytes(&o) > 0.8 * (double)free_b)
    return ts_fail_sys(e, "calibrate host: graph gap: one layer of %s needs %.1f GB, %.1f GB free", GRAPH_MODEL,
                       calib_graph_bytes(&o) * 1e-9, free_b * 1e-9);
  int n = 0;
  if (calib_graph_run(&o, NULL, gap_us, &n, e)) return -1;
  fprintf(stderr, "[%6.1fs] host: graph gap %.3f us (median of queued - graph over %d GEMM and decode-attention "
                  "launches; %s, %d layers, batch 1 x 4096, 16 x 1024, 64 x 2048)\n",
          calib_elapsed_s(), *gap_us, n, GRAPH_MODEL, o.layers);
  return 0;
}

static int measure(host_ctx *h, schema_calibration *c, ts_err *e) {
  double k_host, k_gpu, g_host, g_gpu, ev_host, ev_gpu;
  if (time_launches(h, HOST_KERNEL, &k_host, &k_gpu, e) || time_launches(h, HOST_GEMM_CALL, &g_host, &g_gpu, e) ||
      time_launches(h, HOST_EVENT, &ev_host, &ev_gpu, e))
    return -1;
  fprintf(stderr, "[%6.1fs] host: kernel launch %.2f us host (GPU span %.2f us per kernel), GEMM launch %.2f us host "
                  "(GPU %.2f us per GEMM), %d launches x %d repetitions\n",
          calib_elapsed_s(), k_host, k_gpu, g_host, g_gpu, HOST_LAUNCHES, HOST_REPS);
  fprintf(stderr, "[%6.1fs] host: event record %.2f us host (GPU span %.2f us per record)\n", calib_elapsed_s(), ev_host,
          ev_gpu);
  for (int i = 0; i < N_SYNC_WAITS; i++) {
    double gap = 0;
    if (time_sync(h, SYNC_WAITS_US[i], &gap, e)) return -1;
    fprintf(stderr, "[%6.1fs] host: sync after %.0f us of queued work: GPU gap %.2f us\n", calib_elapsed_s(),
            SYNC_WAITS_US[i], gap);
    c->host_sync_wait_us[i] = SYNC_WAITS_US[i], c->host_sync_gap_us[i] = gap;
  }
  c->n_host_sync = N_SYNC_WAITS;
  double gap = 0;
  if (graph_gap(&gap, e)) return -1;
  if (gap > 0) c->host_graph_gap_us = gap; /* the file's field must be > 0: else left out, said on stderr */
  else fprintf(stderr, "[%6.1fs] host: graph gap %.3f us is not > 0: graph_gap_us not written\n", calib_elapsed_s(), gap);
  c->host_launch_us = k_host, c->host_gemm_launch_us = g_host, c->host_event_us = ev_host;
  c->has_host = true;
  return 0;
}

int calib_run_host(const calib_config *cfg, schema_calibration *c, ts_err *e) {
  (void)cfg;
  host_ctx h;
  memset(&h, 0, sizeof h);
  int rc = -1;
  CUDA_CHECK_RC(e, rc, cudaStreamCreateWithFlags(&h.s, cudaStreamNonBlocking), done);
  CUDA_CHECK_RC(e, rc, cudaEventCreate(&h.ev[0]), done);
  CUDA_CHECK_RC(e, rc, cudaEventCreate(&h.ev[1]), done);
  CUDA_CHECK_RC(e, rc, cudaEventCreate(&h.rec), done); /* with timing, as the walker's */
  CUDA_CHECK_RC(e, rc, cudaMalloc(&h.x, HOST_ELEMS * 2), done);
  CUDA_CHECK_RC(e, rc, cudaMalloc(&h.y, HOST_ELEMS * 2), done);
  CUDA_CHECK_RC(e, rc, cudaMalloc(&h.a, HOST_GEMM * HOST_GEMM * 2), done);
  CUDA_CHECK_RC(e, rc, cudaMalloc(&h.b, HOST_GEMM * HOST_GEMM * 2), done);
  CUDA_CHECK_RC(e, rc, cudaMalloc(&h.c, HOST_GEMM * HOST_GEMM * 2), done);
  CUDA_CHECK_RC(e, rc, cudaMalloc((void **)&h.dcount, 4), done);
  CUDA_CHECK_RC(e, rc, cudaMemset(h.x, 0, HOST_ELEMS * 2), done);
  CUDA_CHECK_RC(e, rc, cudaMemset(h.a, 0, HOST_GEMM * HOST_GEMM * 2), done);
  CUDA_CHECK_RC(e, rc, cudaMemset(h.b, 0, HOST_GEMM * HOST_GEMM * 2), done);
  CUDA_CHECK_RC(e, rc, cudaMemset(h.dcount, 0, 4), done);
  /* pageable, as the executor's row counts (exec_moe.c) */
  if (!(h.hcount = malloc(4))) {
    rc = ts_fail_sys(e, "calibrate host: out of memory");
    goto done;
  }
  if (exec_gemm_create(&h.g, e)) goto done;
  rc = measure(&h, c, e);
done:
  if (h.g) exec_gemm_destroy(h.g);
  free(h.hcount);
  void *bufs[] = {h.dcount, h.c, h.b, h.a, h.y, h.x};
  for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
    if (bufs[i]) cudaFree(bufs[i]);
  if (h.rec) cudaEventDestroy(h.rec);
  if (h.ev[1]) cudaEventDestroy(h.ev[1]);
  if (h.ev[0]) cudaEventDestroy(h.ev[0]);
  if (h.s) cudaStreamDestroy(h.s);
  return rc;
}

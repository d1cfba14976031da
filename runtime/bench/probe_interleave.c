/* probe_interleave.c — `tacorun probe-interleave`: how long NCCL's all-reduce
 * takes when it alternates or overlaps with GEMMs the way the executor runs
 * TP, against back to back as `tacorun calibrate` times it.
 *
 * Why: in run 8 the simulator under-predicted the exposed TP time of plain
 * NCCL over host memory (shm, sockets) by 11-14 % while the calibration's
 * back-to-back table held (experiments/validation/clock/RESULTS.md).
 *
 * One process per GPU (mpirun -np 2, or the TACORUN_* variables). Every rank
 * runs the same patterns, each for --rounds rounds, all of it --reps times
 * (interleaved, so a drift of the GPUs or of the transport moves every
 * pattern alike):
 *   b2b      the all-reduce back to back on the TP stream (as calibrate times it)
 *   gemm     two GEMMs back to back, nothing else (the GEMM's own time)
 *   fwd      forward TP: two GEMMs on the compute stream, then the all-reduce
 *            on the higher-priority TP stream after an event, the compute
 *            stream waiting for it (runtime/exec/exec_step.c's order), no overlap
 *   fwd-sync the same with a one-element all-reduce first on the TP stream, so
 *            the timed all-reduce starts with both ranks there (the
 *            difference to fwd is the ranks' skew)
 *   bwd      backward TP: one GEMM (dgrad), then the all-reduce on the TP
 *            stream overlapping the weight-gradient GEMM on the compute
 *            stream (FP32 accumulate, exec_gemm TN_ACC), which then waits
 *   bwd-short the same beside a short weight-gradient GEMM (TN_ACC 4096 x
 *            2048 x 4096, a quarter of the FLOPs)
 *   bwd2, bwd3 the same beside two or three weight-gradient GEMMs (how the
 *            all-reduce's delay grows with the time a GEMM runs beside it)
 *   full     the all-reduce under a GEMM load on the compute stream that
 *            lasts longer than it (its speed while a GEMM runs beside it)
 * GEMMs: exec_gemm NN 4096 x 8192 x 4096 (the validation model's FC1,
 * forward) and TN_ACC 4096 x 8192 x 4096 (its weight gradient). Every
 * all-reduce, GEMM burst and weight-gradient GEMM is timed with CUDA events;
 * each rank prints one line per pattern and repetition (median, p10, p90 per
 * call). Waits are bounded (rt_nccl): a stuck transport ends in an error. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ts_args.h"
#include "exec_gemm.h"
#include "rt_nccl.h"
#include "rt_ops.h"
#include "rt_ops_check.h"

#define PROBE_GEMM_M 4096
#define PROBE_GEMM_N 8192
#define PROBE_GEMM_K 4096
#define PROBE_MAX_ROUNDS 400
#define PROBE_MAX_FULL 64 /* GEMMs beside one all-reduce in "full" */

typedef enum { P_B2B, P_GEMM, P_FWD, P_FWD_SYNC, P_BWD, P_BWD_SHORT, P_BWD2, P_BWD3, P_FULL, P_COUNT } probe_pattern;
static const char *pattern_name[P_COUNT] = {"b2b", "gemm", "fwd", "fwd-sync", "bwd", "bwd-short", "bwd2", "bwd3", "full"};

typedef struct {
  rt_nccl w;
  exec_gemm *gemm;
  exec_gemm_shape fwd_shape, wgrad_shape, short_shape;
  void *a, *b, *c16, *c32; /* GEMM operands: A 32 MiB, B 64 MiB, C bf16 64 MiB, C fp32 128 MiB */
  void *buf;               /* the all-reduce's buffer (in place, as the executor's) */
  float *one;              /* the alignment all-reduce's element */
  size_t count;            /* bf16 elements */
  cudaStream_t compute, tp;
  cudaEvent_t ev_ready, ev_done;
  cudaEvent_t ev[PROBE_MAX_ROUNDS][6]; /* all-reduce start/end, GEMM burst start/end, wgrad start/end */
  int made;
  int full_gemms;
} probe;

static int gemm_fwd(probe *p, ts_err *e) {
  return exec_gemm_run(p->gemm, &p->fwd_shape, 1.0f, p->a, p->b, 0.0f, p->c16, p->compute, e);
}

static int gemm_wgrad(probe *p, ts_err *e) {
  return exec_gemm_run(p->gemm, &p->wgrad_shape, 1.0f, p->a, p->b, 1.0f, p->c32, p->compute, e);
}

static int gemm_wgrad_short(probe *p, ts_err *e) {
  return exec_gemm_run(p->gemm, &p->short_shape, 1.0f, p->a, p->b, 1.0f, p->c32, p->compute, e);
}

static int allreduce(probe *p, ts_err *e) {
  RT_CHECK_NCCL(e, ncclAllReduce(p->buf, p->buf, p->count, ncclBfloat16, ncclSum, p->w.comms[0], p->tp));
  return 0;
}

/* compute -> TP hand-over and back, as runtime/exec/exec_step.c does it */
static int tp_after_compute(probe *p, ts_err *e) {
  RT_CHECK_CUDA(e, cudaEventRecord(p->ev_ready, p->compute));
  RT_CHECK_CUDA(e, cudaStreamWaitEvent(p->tp, p->ev_ready, 0));
  return 0;
}

static int compute_after_tp(probe *p, ts_err *e) {
  RT_CHECK_CUDA(e, cudaEventRecord(p->ev_done, p->tp));
  RT_CHECK_CUDA(e, cudaStreamWaitEvent(p->compute, p->ev_done, 0));
  return 0;
}

static int one_round(probe *p, probe_pattern pat, cudaEvent_t *ev, ts_err *e) {
  switch (pat) {
  case P_B2B:
    RT_CHECK_CUDA(e, cudaEventRecord(ev[0], p->tp));
    RT_TRY(allreduce(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[1], p->tp));
    return 0;
  case P_GEMM:
    RT_CHECK_CUDA(e, cudaEventRecord(ev[2], p->compute));
    RT_TRY(gemm_fwd(p, e));
    RT_TRY(gemm_fwd(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[3], p->compute));
    return 0;
  case P_FWD:
  case P_FWD_SYNC:
    RT_CHECK_CUDA(e, cudaEventRecord(ev[2], p->compute));
    RT_TRY(gemm_fwd(p, e));
    RT_TRY(gemm_fwd(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[3], p->compute));
    RT_TRY(tp_after_compute(p, e));
    if (pat == P_FWD_SYNC)
      RT_CHECK_NCCL(e, ncclAllReduce(p->one, p->one, 1, ncclFloat32, ncclSum, p->w.comms[0], p->tp));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[0], p->tp));
    RT_TRY(allreduce(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[1], p->tp));
    return compute_after_tp(p, e);
  case P_BWD:
  case P_BWD_SHORT:
  case P_BWD2:
  case P_BWD3:
    RT_CHECK_CUDA(e, cudaEventRecord(ev[2], p->compute));
    RT_TRY(gemm_fwd(p, e)); /* the input-gradient GEMM whose output is reduced */
    RT_CHECK_CUDA(e, cudaEventRecord(ev[3], p->compute));
    RT_TRY(tp_after_compute(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[0], p->tp));
    RT_TRY(allreduce(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[1], p->tp));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[4], p->compute));
    if (pat == P_BWD_SHORT) RT_TRY(gemm_wgrad_short(p, e));
    else /* the deferred weight gradient(s), beside the transfer */
      for (int i = 0; i < (pat == P_BWD3 ? 3 : pat == P_BWD2 ? 2 : 1); i++) RT_TRY(gemm_wgrad(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[5], p->compute));
    return compute_after_tp(p, e);
  case P_FULL:
    RT_TRY(tp_after_compute(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[0], p->tp));
    RT_TRY(allreduce(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[1], p->tp));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[4], p->compute));
    for (int i = 0; i < p->full_gemms; i++) RT_TRY(gemm_fwd(p, e));
    RT_CHECK_CUDA(e, cudaEventRecord(ev[5], p->compute));
    return compute_after_tp(p, e);
  default: return ts_fail_sys(e, "probe: unknown pattern %d", (int)pat);
  }
}

/* Both streams joined into rt_nccl's stream, then its bounded wait. */
static int probe_wait(probe *p, ts_err *e) {
  RT_CHECK_CUDA(e, cudaEventRecord(p->ev_ready, p->compute));
  RT_CHECK_CUDA(e, cudaStreamWaitEvent(p->w.streams[0], p->ev_ready, 0));
  RT_CHECK_CUDA(e, cudaEventRecord(p->ev_done, p->tp));
  RT_CHECK_CUDA(e, cudaStreamWaitEvent(p->w.streams[0], p->ev_done, 0));
  return rt_nccl_wait(&p->w, e);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  double med, p10, p90, mean;
} probe_stat;

static probe_stat stat_of(double *v, int n) {
  probe_stat s = {0, 0, 0, 0};
  if (n <= 0) return s;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  for (int i = 0; i < n; i++) s.mean += v[i] / n;
  s.med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.p10 = v[(int)(0.1 * (n - 1))], s.p90 = v[(int)(0.9 * (n - 1) + 0.5)];
  return s;
}

static int elapsed_us(cudaEvent_t a, cudaEvent_t b, double *us, ts_err *e) {
  float ms = 0;
  RT_CHECK_CUDA(e, cudaEventElapsedTime(&ms, a, b));
  *us = 1e3 * ms;
  return 0;
}

/* One pattern: `rounds` timed after 3 untimed; prints this rank's line. */
static int run_pattern(probe *p, probe_pattern pat, int rounds, int rep, ts_err *e) {
  char what[80];
  snprintf(what, sizeof what, "probe-interleave %s (rep %d)", pattern_name[pat], rep);
  rt_watchdog_arm(&p->w, 120, what);
  int rc = 0;
  for (int r = 0; r < 3 && !rc; r++) rc = one_round(p, pat, p->ev[r], e);
  for (int r = 0; r < rounds && !rc; r++) rc = one_round(p, pat, p->ev[r], e);
  if (!rc) rc = probe_wait(p, e);
  rt_watchdog_disarm();
  if (rc) return -1;
  double ar[PROBE_MAX_ROUNDS], g[PROBE_MAX_ROUNDS], wg[PROBE_MAX_ROUNDS];
  int bwd = pat == P_BWD || pat == P_BWD_SHORT || pat == P_BWD2 || pat == P_BWD3;
  int has_ar = pat != P_GEMM, has_g = pat == P_GEMM || pat == P_FWD || pat == P_FWD_SYNC || bwd,
      has_wg = bwd || pat == P_FULL;
  for (int r = 0; r < rounds; r++) {
    if (has_ar) RT_TRY(elapsed_us(p->ev[r][0], p->ev[r][1], &ar[r], e));
    if (has_g) RT_TRY(elapsed_us(p->ev[r][2], p->ev[r][3], &g[r], e));
    if (has_wg) RT_TRY(elapsed_us(p->ev[r][4], p->ev[r][5], &wg[r], e));
  }
  probe_stat sa = stat_of(ar, has_ar ? rounds : 0), sg = stat_of(g, has_g ? rounds : 0),
             sw = stat_of(wg, has_wg ? rounds : 0);
  /* the whole pattern's span: from the first timed round's first event to the last's last */
  struct timespec wall; /* when the pattern ended: lines up with host-side probes of the same minutes */
  clock_gettime(CLOCK_REALTIME, &wall);
  printf("%d\t%d\t%-8s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.3f\n", p->w.ranks[0], rep, pattern_name[pat],
         rounds, sa.med, sa.p10, sa.p90, sa.mean, sg.med, sw.med, pat == P_FULL ? sw.med / p->full_gemms : 0.0,
         (double)wall.tv_sec + 1e-9 * (double)wall.tv_nsec);
  fflush(stdout);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: mpirun -np 2 tacorun probe-interleave [--bytes B] [--rounds N] [--reps R] [--transport T]\n\n"
             "Times NCCL's BF16 all-reduce of B bytes (default 33554432, the validation model's TP message)\n"
             "back to back and interleaved with GEMMs as the executor runs TP: b2b, gemm (the GEMMs alone),\n"
             "fwd, fwd-sync (ranks aligned first), bwd (beside the weight-gradient GEMM), bwd-short (a\n"
             "quarter-size one), bwd2, bwd3 (two, three of them), full (under a GEMM load). N rounds per\n"
             "pattern (default 100, at most %d), all patterns R times (default 2).\n"
             "Prints per rank and pattern: the all-reduce's median, p10, p90 and mean per call, the GEMM\n"
             "burst's median (two 4096x8192x4096 GEMMs; one in bwd*), the weight-gradient GEMMs' (bwd*) or\n"
             "the GEMM load's (full) median and, for full, its time per GEMM, and when the pattern ended\n"
             "(unix seconds).\n"
             "options (defaults in brackets):\n"
             RT_TRANSPORT_USAGE
             "  --bytes B    all-reduce size, even, 1024 .. 2^32 [33554432]\n"
             "  --rounds N   rounds per pattern, 5 .. %d [100]\n"
             "  --reps R     times every pattern runs, 1 .. 20 [2]\n"
             "reads:  nothing\n"
             "writes: one line per rank and pattern on standard output\n",
          PROBE_MAX_ROUNDS, PROBE_MAX_ROUNDS);
}

static int parse_ll(const char *opt, const char *s, long long lo, long long hi, long long *v, ts_err *e) {
  if (ts_arg_ll(s, lo, hi, v)) return ts_fail(e, NULL, opt, "'%s' must be an integer in [%lld, %lld]", s, lo, hi);
  return 0;
}

static void probe_free(probe *p) {
  for (int r = 0; r < p->made; r++)
    for (int k = 5; k >= 0; k--) cudaEventDestroy(p->ev[r][k]);
  if (p->ev_done) cudaEventDestroy(p->ev_done);
  if (p->ev_ready) cudaEventDestroy(p->ev_ready);
  if (p->tp) cudaStreamDestroy(p->tp);
  if (p->compute) cudaStreamDestroy(p->compute);
  cudaFree(p->one), cudaFree(p->buf), cudaFree(p->c32), cudaFree(p->c16), cudaFree(p->b), cudaFree(p->a);
  exec_gemm_destroy(p->gemm);
}

static int probe_setup(probe *p, size_t bytes, ts_err *e) {
  const size_t M = PROBE_GEMM_M, N = PROBE_GEMM_N, K = PROBE_GEMM_K;
  p->count = bytes / 2;
  p->fwd_shape = exec_gemm_packed(EXEC_GEMM_NN, M, N, K);
  p->wgrad_shape = exec_gemm_packed(EXEC_GEMM_TN_ACC, M, N, K); /* A stored [K x M]: same 32 MiB */
  p->short_shape = exec_gemm_packed(EXEC_GEMM_TN_ACC, M, N / 4, K);
  RT_TRY(exec_gemm_create(&p->gemm, e));
  RT_CHECK_CUDA(e, cudaMalloc(&p->a, M * K * 2));
  RT_CHECK_CUDA(e, cudaMalloc(&p->b, K * N * 2));
  RT_CHECK_CUDA(e, cudaMalloc(&p->c16, M * N * 2));
  RT_CHECK_CUDA(e, cudaMalloc(&p->c32, M * N * 4));
  RT_CHECK_CUDA(e, cudaMalloc(&p->buf, p->count * 2));
  RT_CHECK_CUDA(e, cudaMalloc((void **)&p->one, sizeof(float)));
  int lo, hi;
  RT_CHECK_CUDA(e, cudaDeviceGetStreamPriorityRange(&lo, &hi));
  RT_CHECK_CUDA(e, cudaStreamCreateWithPriority(&p->compute, cudaStreamNonBlocking, lo));
  RT_CHECK_CUDA(e, cudaStreamCreateWithPriority(&p->tp, cudaStreamNonBlocking, hi)); /* as exec_model.c */
  RT_CHECK_CUDA(e, cudaEventCreateWithFlags(&p->ev_ready, cudaEventDisableTiming));
  RT_CHECK_CUDA(e, cudaEventCreateWithFlags(&p->ev_done, cudaEventDisableTiming));
  for (; p->made < PROBE_MAX_ROUNDS; p->made++)
    for (int k = 0; k < 6; k++)
      if (cudaEventCreate(&p->ev[p->made][k]) != cudaSuccess) {
        for (int j = k - 1; j >= 0; j--) cudaEventDestroy(p->ev[p->made][j]);
        return ts_fail_sys(e, "%s:%d: cudaEventCreate failed", __FILE__, __LINE__);
      }
  uint64_t seed = 500 + (uint64_t)p->w.ranks[0];
  RT_TRY(rt_fill_random_bf16(p->a, (long long)(M * K), seed, 1.0f, p->compute, e));
  RT_TRY(rt_fill_random_bf16(p->b, (long long)(K * N), seed + 10, 1.0f, p->compute, e));
  /* zeros: the in-place sums (as the executor's) never grow to inf; NCCL's time does not depend on the values */
  RT_CHECK_CUDA(e, cudaMemsetAsync(p->buf, 0, p->count * 2, p->compute));
  RT_CHECK_CUDA(e, cudaMemsetAsync(p->c32, 0, M * N * 4, p->compute));
  RT_CHECK_CUDA(e, cudaMemsetAsync(p->one, 0, sizeof(float), p->compute));
  RT_CHECK_CUDA(e, cudaStreamSynchronize(p->compute));
  return 0;
}

static int probe_run(probe *p, long long bytes, int rounds, int reps, coll_transport transport, ts_err *e) {
  rt_nccl_opts o = {.single_process = 0, .ngpus = 1, .timeout_s = 120.0, .transport = transport};
  RT_TRY(rt_nccl_init(&p->w, &o, e));
  if (p->w.boot == RT_BOOT_SINGLE) return ts_fail(e, NULL, "launch", "one process per GPU: run under mpirun -np 2");
  RT_TRY(probe_setup(p, (size_t)bytes, e));
  /* sizing the GEMM load of "full" from this run's back-to-back times */
  p->full_gemms = 1;
  RT_TRY(run_pattern(p, P_B2B, 20, 0, e));
  RT_TRY(run_pattern(p, P_GEMM, 10, 0, e));
  double ar = 0, g = 0;
  for (int r = 0; r < 20; r++) {
    double us = 0;
    RT_TRY(elapsed_us(p->ev[r][0], p->ev[r][1], &us, e));
    ar += us / 20;
  }
  for (int r = 0; r < 10; r++) {
    double us = 0;
    RT_TRY(elapsed_us(p->ev[r][2], p->ev[r][3], &us, e));
    g += us / 20; /* two GEMMs per round */
  }
  double est[2] = {ar, g};
  RT_TRY(rt_nccl_max(&p->w, est, 2, e)); /* every rank the same count, so the calls match */
  int n = (int)ceil(1.3 * est[0] / est[1]);
  p->full_gemms = n < 1 ? 1 : (n > PROBE_MAX_FULL ? PROBE_MAX_FULL : n);
  if (rt_nccl_is_root(&p->w)) {
    char desc[512];
    rt_nccl_describe(&p->w, desc, sizeof desc);
    printf("%s# probe-interleave: %lld bytes bf16 all-reduce over %d ranks (%s); GEMM %dx%dx%d; warm-up estimates: "
           "all-reduce %.1f us, GEMM %.1f us; full: %d GEMMs per all-reduce\n",
           desc, bytes, p->w.nranks, rt_nccl_transport(&p->w), PROBE_GEMM_M, PROBE_GEMM_N, PROBE_GEMM_K, est[0], est[1],
           p->full_gemms);
    printf("# rank\trep\tpattern\trounds\tar_med_us\tar_p10_us\tar_p90_us\tar_mean_us\tgemm_burst_med_us\t"
           "beside_med_us\tfull_per_gemm_us\tend_unix_s\n");
    fflush(stdout);
  }
  for (int rep = 1; rep <= reps; rep++)
    for (int pat = 0; pat < P_COUNT; pat++) RT_TRY(run_pattern(p, (probe_pattern)pat, rounds, rep, e));
  return 0;
}

int cmd_probe_interleave(int argc, char **argv) {
  ts_err e = {{0}, 0};
  long long bytes = 33554432, rounds = 100, reps = 2;
  coll_transport transport = COLL_TRANSPORT_AUTO;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      usage(stdout);
      return 0;
    }
    int rc = 0;
    if (i + 1 >= argc) rc = ts_fail(&e, NULL, o, "unknown option or missing value");
    else if (!strcmp(o, "--bytes")) rc = parse_ll(o, argv[++i], 1024, 1LL << 32, &bytes, &e);
    else if (!strcmp(o, "--rounds")) rc = parse_ll(o, argv[++i], 5, PROBE_MAX_ROUNDS, &rounds, &e);
    else if (!strcmp(o, "--reps")) rc = parse_ll(o, argv[++i], 1, 20, &reps, &e);
    else if (!strcmp(o, "--transport")) rc = rt_transport_arg(argv[++i], &transport, &e);
    else rc = ts_fail(&e, NULL, o, "unknown option");
    if (!rc && bytes % 2) rc = ts_fail(&e, NULL, "--bytes", "must be even (bf16 elements)");
    if (rc) {
      fprintf(stderr, "tacorun probe-interleave: %s\n", e.msg);
      usage(stderr);
      return ts_exit_status(&e);
    }
  }
  probe *p = calloc(1, sizeof *p);
  if (!p) {
    fprintf(stderr, "tacorun probe-interleave: out of memory\n");
    return 1;
  }
  int rc = probe_run(p, bytes, (int)rounds, (int)reps, transport, &e);
  probe_free(p);
  rt_nccl_finalize(&p->w, rc != 0);
  free(p);
  if (rc) {
    fprintf(stderr, "tacorun probe-interleave: %s\n", e.msg);
    return ts_exit_status(&e);
  }
  return 0;
}

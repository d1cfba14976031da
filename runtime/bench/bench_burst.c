/* bench_burst.c — `tacorun bench-burst`: how fast one GEMM runs against the
 * time since the GPU left idle, launch by launch. The calibration's GEMM
 * tables are timed back to back at the power cap; the clock section
 * (calibrate_clock.c) times periodic bursts, each burst as a whole. This
 * bench gives the profile inside one burst from a long idle: the GPU idles
 * for --idle-ms (a host sleep: nothing resident, as between two plans of
 * `tacorun execute`), then the GEMM (exec_gemm NN, the executor's path,
 * operands rotating over >= 4 x L2 so every launch reads HBM) runs back to
 * back for --ms with a CUDA event after every launch. Each launch's time is
 * the span between its two events; its speed is the median launch time of the
 * burst's last quarter (the sustained state, the tables' state) over its own.
 * Printed: per repetition and per bin of time since the burst's first launch,
 * the mean speed; then the median over repetitions. Operands are random (as
 * the calibration's: zeros would draw less power). Timing only (the GEMM is
 * the executor's, checked by its tests). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "exec_gemm.h"
#include "gpu_check.h"
#include "rt_ops.h"
#include "ts_args.h"

#define MAX_LAUNCHES 20000
#define MAX_REPS 9
#define L2_ROTATE_BYTES (256.0 * 1024 * 1024)

static const double bin_edges_ms[] = {0, 5, 10, 20, 30, 40, 50, 60, 80, 100, 125, 150, 200, 250, 300, 400, 500, 750,
                                      1000, 1500, 2000, 3000, 5000};
#define N_EDGES ((int)(sizeof bin_edges_ms / sizeof *bin_edges_ms))

typedef struct {
  exec_gemm *g;
  cudaStream_t st;
  cudaEvent_t ev[MAX_LAUNCHES + 1];
  int n_ev;
  char *pool;
  size_t a_bytes, b_bytes, c_bytes, set_bytes;
  int sets;
  long long m, n, k;
} burst;

static int cmp_d(const void *a, const void *c) {
  double x = *(const double *)a, y = *(const double *)c;
  return (x > y) - (x < y);
}

static int gemm(burst *b, long long i, ts_err *e) {
  char *s = b->pool + (size_t)(i % b->sets) * b->set_bytes;
  exec_gemm_shape sh = exec_gemm_packed(EXEC_GEMM_NN, b->m, b->n, b->k);
  return exec_gemm_run(b->g, &sh, 1.f, s, s + b->a_bytes, 0.f, s + b->a_bytes + b->b_bytes, b->st, e);
}

/* One burst of n launches after idle_ms of host sleep; bins[j] = mean speed in bin j (0: no launch there). */
static int one_burst(burst *b, int n, double idle_ms, double *bins, double *ref_us, ts_err *e) {
  CUDA_CHECK(e, cudaStreamSynchronize(b->st));
  struct timespec ts = {(time_t)(idle_ms / 1000), (long)((idle_ms - 1000 * (long)(idle_ms / 1000)) * 1e6)};
  nanosleep(&ts, NULL);
  CUDA_CHECK(e, cudaEventRecord(b->ev[0], b->st));
  for (int i = 0; i < n; i++) {
    if (gemm(b, i, e)) return -1;
    CUDA_CHECK(e, cudaEventRecord(b->ev[i + 1], b->st));
  }
  CUDA_CHECK(e, cudaEventSynchronize(b->ev[n]));
  static double t0[MAX_LAUNCHES], d[MAX_LAUNCHES], tail[MAX_LAUNCHES];
  for (int i = 0; i < n; i++) {
    float a = 0, c = 0;
    CUDA_CHECK(e, cudaEventElapsedTime(&a, b->ev[0], b->ev[i]));
    CUDA_CHECK(e, cudaEventElapsedTime(&c, b->ev[i], b->ev[i + 1]));
    t0[i] = a, d[i] = 1e3 * c;
  }
  int nt = 0;
  for (int i = n - n / 4; i < n; i++) tail[nt++] = d[i];
  qsort(tail, (size_t)nt, sizeof *tail, cmp_d);
  *ref_us = tail[nt / 2];
  for (int j = 0; j + 1 < N_EDGES; j++) {
    double sum = 0;
    int cnt = 0;
    for (int i = 0; i < n; i++)
      if (t0[i] >= bin_edges_ms[j] && t0[i] < bin_edges_ms[j + 1]) sum += d[i], cnt++;
    bins[j] = cnt ? *ref_us / (sum / cnt) : 0;
  }
  return 0;
}

static void destroy(burst *b) {
  if (b->pool) cudaFree(b->pool);
  for (int i = b->n_ev - 1; i >= 0; i--) cudaEventDestroy(b->ev[i]);
  if (b->g) exec_gemm_destroy(b->g);
  if (b->st) cudaStreamDestroy(b->st);
}

int bench_burst_main(int argc, char **argv) {
  long long m = 2048, n = 28672, k = 4096;
  double idle_ms = 2000, ms = 1500;
  int reps = 3;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("usage: tacorun bench-burst [--m M (2048)] [--n N (28672)] [--k K (4096)] [--idle-ms MS (2000)]\n"
             "         [--ms MS (1500)] [--reps N (3)]\n"
             "One GEMM (exec_gemm NN M x N x K bf16, the executor's path; default Llama-3 8B's FC1 at 2,048\n"
             "tokens) run back to back for --ms after --idle-ms of GPU idle (host sleep), a CUDA event after\n"
             "every launch: the speed of each launch against the burst's last quarter (the sustained state,\n"
             "as the GEMM tables are timed), by time since the burst began (bins of 5 ms .. 2 s). Shows how\n"
             "long a burst from idle runs above the sustained clock. Timing only.\n"
             "reads:  nothing (operands: random bf16 in [-1, 1), as the calibration's GEMMs)\n"
             "writes: one table on standard output\n");
      return 0;
    }
    if (!v) {
      fprintf(stderr, "bench-burst: %s: missing value or unknown option (--help)\n", a);
      return 2;
    }
    int bad = 0;
    if (!strcmp(a, "--m")) bad = ts_arg_ll(v, 1, 1 << 20, &m);
    else if (!strcmp(a, "--n")) bad = ts_arg_ll(v, 1, 1 << 20, &n);
    else if (!strcmp(a, "--k")) bad = ts_arg_ll(v, 1, 1 << 20, &k);
    else if (!strcmp(a, "--idle-ms")) idle_ms = atof(v), bad = !(idle_ms >= 0 && idle_ms <= 60000);
    else if (!strcmp(a, "--ms")) ms = atof(v), bad = !(ms >= 10 && ms <= 5000);
    else if (!strcmp(a, "--reps")) bad = ts_arg_int(v, 1, MAX_REPS, &reps);
    else {
      fprintf(stderr, "bench-burst: unknown option %s (--help)\n", a);
      return 2;
    }
    if (bad) {
      fprintf(stderr, "bench-burst: %s '%s': out of range (--m/--n/--k 1..2^20, --idle-ms 0..60000, --ms 10..5000, "
                      "--reps 1..%d)\n", a, v, MAX_REPS);
      return 2;
    }
    i++;
  }
  static burst b;
  memset(&b, 0, sizeof b);
  b.m = m, b.n = n, b.k = k;
  b.a_bytes = (size_t)(m * k * 2), b.b_bytes = (size_t)(k * n * 2), b.c_bytes = (size_t)(m * n * 2);
  b.set_bytes = (b.a_bytes + b.b_bytes + b.c_bytes + 255) / 256 * 256;
  b.sets = (int)(L2_ROTATE_BYTES / (double)b.set_bytes) + 1;
  if (b.sets < 2) b.sets = 2;
  ts_err e = {{0}, 0};
  int rc = 1;
  double bins[MAX_REPS][N_EDGES], ref[MAX_REPS];
  CUDA_CHECK_GOTO(&e, cudaStreamCreateWithFlags(&b.st, cudaStreamNonBlocking), fail);
  if (exec_gemm_create(&b.g, &e)) goto fail;
  CUDA_CHECK_GOTO(&e, cudaMalloc((void **)&b.pool, (size_t)b.sets * b.set_bytes), fail);
  /* random non-zero operands, as the calibration's GEMMs (zeros draw less power: a higher clock at the cap) */
  if (rt_fill_random_bf16(b.pool, (long long)((size_t)b.sets * b.set_bytes / 2), 91, 1.0f, b.st, &e)) goto fail;
  for (; b.n_ev <= MAX_LAUNCHES; b.n_ev++) CUDA_CHECK_GOTO(&e, cudaEventCreate(&b.ev[b.n_ev]), fail);
  /* the launch count: --ms at the time of 20 warm launches, after a first one that is not timed (it chooses
   * the algorithm: ~70 ms on the H200, which made the 2026-12-04 bursts 1.5-40x shorter than --ms) */
  if (gemm(&b, 0, &e)) goto fail;
  CUDA_CHECK_GOTO(&e, cudaStreamSynchronize(b.st), fail);
  CUDA_CHECK_GOTO(&e, cudaEventRecord(b.ev[0], b.st), fail);
  for (int i = 1; i <= 20; i++)
    if (gemm(&b, i, &e)) goto fail;
  CUDA_CHECK_GOTO(&e, cudaEventRecord(b.ev[1], b.st), fail);
  CUDA_CHECK_GOTO(&e, cudaEventSynchronize(b.ev[1]), fail);
  float wms = 0;
  CUDA_CHECK_GOTO(&e, cudaEventElapsedTime(&wms, b.ev[0], b.ev[1]), fail);
  int launches = (int)(ms / (wms / 20));
  if (launches > MAX_LAUNCHES) launches = MAX_LAUNCHES;
  if (launches < 8) launches = 8;
  printf("GEMM %lld x %lld x %lld bf16 (exec_gemm NN, %d operand sets), %d launches a burst (~%.0f ms at the warm "
         "launches' %.1f us%s), after %.0f ms idle, %d repetitions\n", m, n, k, b.sets, launches, launches * wms / 20,
         1e3 * wms / 20, launches == MAX_LAUNCHES ? "; capped" : "", idle_ms, reps);
  for (int r = 0; r < reps; r++)
    if (one_burst(&b, launches, idle_ms, bins[r], &ref[r], &e)) goto fail;
  printf("| since the burst began (ms) |");
  for (int r = 0; r < reps; r++) printf(" rep %d |", r + 1);
  printf(" median |\n| --- |");
  for (int r = 0; r <= reps; r++) printf(" ---: |");
  printf("\n");
  for (int j = 0; j + 1 < N_EDGES; j++) {
    double v[MAX_REPS];
    int nv = 0;
    for (int r = 0; r < reps; r++)
      if (bins[r][j] > 0) v[nv++] = bins[r][j];
    if (!nv) continue;
    printf("| %.0f-%.0f |", bin_edges_ms[j], bin_edges_ms[j + 1]);
    for (int r = 0; r < reps; r++) printf(bins[r][j] > 0 ? " %.3f |" : " |", bins[r][j]);
    qsort(v, (size_t)nv, sizeof *v, cmp_d);
    printf(" %.3f |\n", nv % 2 ? v[nv / 2] : 0.5 * (v[nv / 2 - 1] + v[nv / 2]));
  }
  printf("sustained launch (last quarter, median):");
  for (int r = 0; r < reps; r++) printf(" %.2f us (%.0f TFLOP/s)", ref[r], 2.0 * m * n * k / ref[r] * 1e-6);
  printf("\n");
  rc = 0;
fail:
  if (rc) fprintf(stderr, "bench-burst: %s\n", e.msg);
  destroy(&b);
  return rc;
}

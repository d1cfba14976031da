/* calibrate_time.c — CUDA-event timing with warm-up, batches and medians. */
#include "calibrate_time.h"

#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <time.h>

#include "rt_ops_check.h"

#define CALIB_MAX_DEV 16
#define CALIB_MAX_REPS 15

calib_budget calib_budget_default(int quick) {
  calib_budget b = {.warmup = 2, .reps = 5, .target_us = 400.0, .max_batch = 100, .long_us = 5000.0};
  if (quick) b.reps = 3, b.target_us = 200.0, b.max_batch = 50, b.long_us = 2000.0;
  return b;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double calib_median(double *v, int n) {
  if (n <= 0) return 0.0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double calib_elapsed_s(void) {
  static struct timespec t0;
  static int started;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  if (!started) t0 = now, started = 1;
  return (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec);
}

typedef struct {
  cudaEvent_t start[CALIB_MAX_DEV], stop[CALIB_MAX_DEV];
  int ndev;
} event_set;

static int events_create(event_set *s, const int *devices, int ndev, ts_err *e) {
  s->ndev = 0;
  for (int d = 0; d < ndev; d++) {
    RT_CHECK_CUDA(e, cudaSetDevice(devices[d]));
    RT_CHECK_CUDA(e, cudaEventCreate(&s->start[d]));
    if (cudaEventCreate(&s->stop[d]) != cudaSuccess) {
      cudaEventDestroy(s->start[d]);
      return ts_fail_sys(e, "%s:%d: cudaEventCreate failed", __FILE__, __LINE__);
    }
    s->ndev++;
  }
  return 0;
}

static void events_destroy(event_set *s, const int *devices) {
  for (int d = 0; d < s->ndev; d++) {
    cudaSetDevice(devices[d]);
    cudaEventDestroy(s->start[d]);
    cudaEventDestroy(s->stop[d]);
  }
}

/* One batch of `count` launches; returns the slowest device's time per launch. */
static int time_batch(calib_launch_fn fn, void *ctx, void *const *streams, const int *devices, event_set *ev,
                      long long *iter, int count, double *us, ts_err *e) {
  for (int d = 0; d < ev->ndev; d++) {
    RT_CHECK_CUDA(e, cudaSetDevice(devices[d]));
    RT_CHECK_CUDA(e, cudaEventRecord(ev->start[d], (cudaStream_t)streams[d]));
  }
  for (int i = 0; i < count; i++) RT_TRY(fn(ctx, (*iter)++, e));
  for (int d = 0; d < ev->ndev; d++) {
    RT_CHECK_CUDA(e, cudaSetDevice(devices[d]));
    RT_CHECK_CUDA(e, cudaEventRecord(ev->stop[d], (cudaStream_t)streams[d]));
  }
  double worst = 0.0;
  for (int d = 0; d < ev->ndev; d++) {
    float ms = 0.f;
    RT_CHECK_CUDA(e, cudaSetDevice(devices[d]));
    RT_CHECK_CUDA(e, cudaEventSynchronize(ev->stop[d]));
    RT_CHECK_CUDA(e, cudaEventElapsedTime(&ms, ev->start[d], ev->stop[d]));
    if (ms > worst) worst = ms;
  }
  *us = 1000.0 * worst / count;
  return 0;
}

int calib_time_us(calib_launch_fn fn, void *ctx, void *const *streams, const int *devices, int ndev,
                  const calib_budget *b, double *median_us, ts_err *e) {
  if (ndev < 1 || ndev > CALIB_MAX_DEV) return ts_fail_sys(e, "calib_time_us: %d devices", ndev);
  event_set ev;
  RT_TRY(events_create(&ev, devices, ndev, e));
  long long iter = 0;
  double first = 0.0, t[CALIB_MAX_REPS];
  int rc = -1, reps = b->reps < CALIB_MAX_REPS ? b->reps : CALIB_MAX_REPS;
  for (int i = 0; i < b->warmup; i++)
    if (fn(ctx, iter++, e)) goto out;
  if (time_batch(fn, ctx, streams, devices, &ev, &iter, 1, &first, e)) goto out;
  int batch = 1;
  if (first >= b->long_us) {
    if (reps > 3) reps = 3;
    t[0] = first; /* a long launch after warm-up is already a sample */
  } else {
    double want = b->target_us / (first > 0.5 ? first : 0.5);
    batch = want < 1 ? 1 : (want > b->max_batch ? b->max_batch : (int)(want + 0.999));
  }
  for (int r = first >= b->long_us ? 1 : 0; r < reps; r++)
    if (time_batch(fn, ctx, streams, devices, &ev, &iter, batch, &t[r], e)) goto out;
  *median_us = calib_median(t, reps);
  rc = 0;
out:
  events_destroy(&ev, devices);
  return rc;
}

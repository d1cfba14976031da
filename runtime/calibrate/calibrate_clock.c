/* calibrate_clock.c — the clock section of `tacorun calibrate` (calibrate_clock.h).
 *
 * Reference kernels (calibrate_refk.h, shared with the power phase): the
 * GEMM 4096 x 4096 x 2048 bf16 through exec_gemm, short on purpose: a 1 ms
 * period at duty 0.15 needs a burst of at most ~150 us; the 4096 x 8192 x 4096
 * GEMM (~400 us) would stretch the 1 ms row to 2.7 ms; the 96 MiB rt_add; the
 * spin kernel for the idle time.
 *
 * Order, against drift: a back-to-back baseline of both kernels, then one row
 * per duty (every period: the GEMM pattern, then the memory-bound one), then
 * a baseline again, ...; a point's reference is the baselines before and
 * after its row interpolated to its place in the row. Each point runs its
 * pattern untimed first (settle_s) so the clocks have followed it, then
 * CUDA events time every burst (timed_s, 3 periods at least). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"
#include "calibrate_clock.h"
#include "calibrate_refk.h"
#include "rt_ops_check.h"

#define CLOCK_GEMM_M CALIB_REF_GEMM_M
#define CLOCK_GEMM_N CALIB_REF_GEMM_N
#define CLOCK_GEMM_K CALIB_REF_GEMM_K
#define CLOCK_ADD_ELEMS CALIB_REF_ADD_ELEMS
#define CLOCK_MAX_TIMED 400            /* timed periods of one point (event pairs) */
#define CLOCK_MIN_GAIN 0.02            /* a duty row counts for the window from a 2% speed-up */

static const double clock_duties[] = {0.8, 0.6, 0.45, 0.3, 0.15};
static const double clock_periods_us[] = {1000, 4000, 20000, 100000};
#define N_DUTIES ((int)(sizeof clock_duties / sizeof *clock_duties))
#define N_PERIODS ((int)(sizeof clock_periods_us / sizeof *clock_periods_us))

typedef calib_refk_kernel clock_kernel;
#define CLOCK_GEMM CALIB_REFK_GEMM
#define CLOCK_MEM CALIB_REFK_ADD

typedef struct {
  calib_refk k;
  cudaEvent_t t0[CLOCK_MAX_TIMED], t1[CLOCK_MAX_TIMED];
  int events;
  double settle_s, timed_s;
} clock_ctx;

typedef struct {
  double launch_us; /* busy time per launch over the timed bursts */
  double period_us; /* measured: from one burst's start to the next's */
  int periods;      /* timed */
} clock_result;

/* `settle` untimed then `timed` timed periods of n launches + idle_us. */
static int clock_pattern(clock_ctx *x, clock_kernel k, int n, double idle_us, int settle, int timed, clock_result *r,
                         ts_err *e) {
  if (timed < 2) timed = 2;
  if (timed > x->events) timed = x->events;
  for (int p = 0; p < settle; p++) {
    for (int i = 0; i < n; i++) RT_TRY(calib_refk_launch(&x->k, k, e));
    RT_TRY(calib_refk_spin(&x->k, idle_us, e));
  }
  for (int p = 0; p < timed; p++) {
    RT_CHECK_CUDA(e, cudaEventRecord(x->t0[p], x->k.stream));
    for (int i = 0; i < n; i++) RT_TRY(calib_refk_launch(&x->k, k, e));
    RT_CHECK_CUDA(e, cudaEventRecord(x->t1[p], x->k.stream));
    RT_TRY(calib_refk_spin(&x->k, idle_us, e));
  }
  RT_CHECK_CUDA(e, cudaStreamSynchronize(x->k.stream));
  double busy_ms = 0;
  for (int p = 0; p < timed; p++) {
    float ms = 0;
    RT_CHECK_CUDA(e, cudaEventElapsedTime(&ms, x->t0[p], x->t1[p]));
    busy_ms += ms;
  }
  float span = 0;
  RT_CHECK_CUDA(e, cudaEventElapsedTime(&span, x->t0[0], x->t0[timed - 1]));
  r->launch_us = 1e3 * busy_ms / ((double)timed * n);
  r->period_us = 1e3 * span / (timed - 1);
  r->periods = timed;
  return 0;
}

static int periods_for(double seconds, double period_us, int at_least) {
  double p = ceil(seconds * 1e6 / period_us);
  return p < at_least ? at_least : (p > 1e6 ? 1000000 : (int)p);
}

/* Back to back: bursts of ~2 ms so the events cost nothing. */
static int clock_baseline(clock_ctx *x, clock_kernel k, double guess_us, double *us, ts_err *e) {
  int n = (int)ceil(2000.0 / guess_us);
  if (n < 1) n = 1;
  double burst = n * guess_us;
  clock_result r = {0, 0, 0};
  RT_TRY(clock_pattern(x, k, n, 0, periods_for(0.75 * x->settle_s, burst, 1), periods_for(0.8 * x->timed_s, burst, 3),
                       &r, e));
  *us = r.launch_us;
  return 0;
}

static int clock_alloc(clock_ctx *x, ts_err *e) {
  RT_TRY(calib_refk_open(&x->k, e));
  for (; x->events < CLOCK_MAX_TIMED; x->events++) {
    RT_CHECK_CUDA(e, cudaEventCreate(&x->t0[x->events]));
    if (cudaEventCreate(&x->t1[x->events]) != cudaSuccess) {
      cudaEventDestroy(x->t0[x->events]);
      return ts_fail_sys(e, "%s:%d: cudaEventCreate failed", __FILE__, __LINE__);
    }
  }
  return 0;
}

static void clock_free(clock_ctx *x) {
  for (int i = x->events - 1; i >= 0; i--) cudaEventDestroy(x->t1[i]), cudaEventDestroy(x->t0[i]);
  calib_refk_close(&x->k);
}

typedef struct {
  calib_clock_burst gemm, mem;
  clock_result g, m;
  double gemm_speed, mem_speed;
} clock_point;

static int write_tsv(const char *path, const clock_point *pt, double window_us, int status, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot write", path);
  fprintf(f, "# clock section of tacorun calibrate: GEMM %dx%dx%d (exec_gemm NN), rt_add %lld elements; window_us %.0f "
             "(status %d: 0 found, 1 lower bound, -1 no speed-up)\n",
          CLOCK_GEMM_M, CLOCK_GEMM_N, CLOCK_GEMM_K, CLOCK_ADD_ELEMS, window_us, status);
  fprintf(f, "duty_target\tperiod_us\tgemm_n\tgemm_idle_us\tduty\tgemm_period_meas_us\tgemm_launch_us\tgemm_speed\t"
             "mem_n\tmem_idle_us\tmem_duty\tmem_period_meas_us\tmem_launch_us\tmem_speed\n");
  for (int i = 0; i < N_DUTIES * N_PERIODS; i++) {
    const clock_point *p = &pt[i];
    fprintf(f, "%.2f\t%.0f\t%d\t%.1f\t%.4f\t%.1f\t%.2f\t%.4f\t%d\t%.1f\t%.4f\t%.1f\t%.2f\t%.4f\n", p->gemm.duty_target,
            p->gemm.period_us, p->gemm.n, p->gemm.idle_us, p->gemm.duty, p->g.period_us, p->g.launch_us, p->gemm_speed,
            p->mem.n, p->mem.idle_us, p->mem.duty, p->m.period_us, p->m.launch_us, p->mem_speed);
  }
  return fclose(f) == 0 ? 0 : ts_fail_sys(e, "%s: write failed", path);
}

/* One point: the GEMM pattern, then the memory-bound one at the GEMM's duty and period. */
static int clock_point_run(clock_ctx *x, double duty, double period_us, double tg, double tm, clock_point *p, ts_err *e) {
  RT_TRY(calib_clock_size_burst(tg, duty, period_us, &p->gemm, e));
  RT_TRY(calib_clock_size_burst(tm, p->gemm.duty, p->gemm.period_us, &p->mem, e));
  double P = p->gemm.period_us;
  RT_TRY(clock_pattern(x, CLOCK_GEMM, p->gemm.n, p->gemm.idle_us, periods_for(x->settle_s, P, 3),
                       periods_for(x->timed_s, P, 3), &p->g, e));
  RT_TRY(clock_pattern(x, CLOCK_MEM, p->mem.n, p->mem.idle_us, periods_for(x->settle_s, P, 3),
                       periods_for(x->timed_s, P, 3), &p->m, e));
  /* a line per point as it is measured, so an outside clock log can be matched to it */
  fprintf(stderr, "[%6.1fs] clock: measured duty %.2f period %.0f us: GEMM x%d %.2f us, add x%d %.2f us\n",
          calib_elapsed_s(), p->gemm.duty, P, p->gemm.n, p->g.launch_us, p->mem.n, p->m.launch_us);
  return 0;
}

int calib_run_clock(const calib_config *cfg, schema_calibration *c, ts_err *e) {
  RT_CHECK_CUDA(e, cudaSetDevice(cfg->devices[0]));
  clock_ctx x;
  memset(&x, 0, sizeof x);
  x.settle_s = cfg->quick ? 0.25 : 0.4;
  x.timed_s = cfg->quick ? 0.15 : 0.25;
  clock_point pt[N_DUTIES * N_PERIODS];
  memset(pt, 0, sizeof pt);
  double base_g[N_DUTIES + 1], base_m[N_DUTIES + 1];
  int rc = -1;
  double t_start = calib_elapsed_s();
  if (clock_alloc(&x, e) || calib_refk_check_spin(&x.k, e)) goto out;
  /* warm: the clocks of a GEMM run back to back, as the GEMM phase had them */
  {
    clock_result r = {0, 0, 0};
    if (clock_pattern(&x, CLOCK_GEMM, 20, 0, periods_for(cfg->quick ? 0.5 : 1.0, 2000, 1), 3, &r, e)) goto out;
    base_g[0] = r.launch_us;
    if (clock_pattern(&x, CLOCK_MEM, 80, 0, 5, 3, &r, e)) goto out;
    base_m[0] = r.launch_us;
  }
  double tg = base_g[0], tm = base_m[0]; /* burst sizing: fixed for the section, so every row has the same periods */
  for (int d = 0; d <= N_DUTIES; d++) {
    if (clock_baseline(&x, CLOCK_GEMM, tg, &base_g[d], e) || clock_baseline(&x, CLOCK_MEM, tm, &base_m[d], e)) goto out;
    if (d == 0) tg = base_g[0], tm = base_m[0];
    fprintf(stderr, "[%6.1fs] clock: back to back: GEMM %.2f us (%.0f TFLOP/s), add %.2f us (%.0f GB/s)\n",
            calib_elapsed_s(), base_g[d], 2.0 * CLOCK_GEMM_M * CLOCK_GEMM_N * CLOCK_GEMM_K / base_g[d] * 1e-6, base_m[d],
            6.0 * CLOCK_ADD_ELEMS / base_m[d] * 1e-3);
    if (d == N_DUTIES) break;
    for (int j = 0; j < N_PERIODS; j++)
      if (clock_point_run(&x, clock_duties[d], clock_periods_us[j], tg, tm, &pt[d * N_PERIODS + j], e)) goto out;
  }
  /* speeds against the baselines around each row */
  double gs[N_DUTIES * N_PERIODS];
  for (int d = 0; d < N_DUTIES; d++)
    for (int j = 0; j < N_PERIODS; j++) {
      clock_point *p = &pt[d * N_PERIODS + j];
      double rg = calib_clock_reference(base_g[d], base_g[d + 1], 0, N_PERIODS + 1, j + 1);
      double rm = calib_clock_reference(base_m[d], base_m[d + 1], 0, N_PERIODS + 1, j + 1);
      p->gemm_speed = rg / p->g.launch_us;
      p->mem_speed = rm / p->m.launch_us;
      gs[d * N_PERIODS + j] = p->gemm_speed;
      fprintf(stderr, "[%6.1fs] clock: duty %.2f (asked %.2f) period %6.0f us: GEMM x%d %.2f us speed %.3f (period "
                      "measured %.0f us), add x%d %.2f us speed %.3f\n",
              calib_elapsed_s(), p->gemm.duty, p->gemm.duty_target, p->gemm.period_us, p->gemm.n, p->g.launch_us,
              p->gemm_speed, p->g.period_us, p->mem.n, p->m.launch_us, p->mem_speed);
    }
  double periods[N_PERIODS];
  for (int j = 0; j < N_PERIODS; j++) periods[j] = pt[j].gemm.period_us; /* as sized (stretched if need be) */
  int status;
  double window = calib_clock_window_us(periods, N_PERIODS, gs, N_DUTIES, CLOCK_MIN_GAIN, &status);
  if (status < 0) {
    /* no speed-up anywhere: the section says so with speeds ~1 (a window is required) */
    window = periods[0];
    fprintf(stderr, "calibrate: clock: no duty cycle ran %.0f%% faster than back to back; window set to the shortest "
                    "period\n", 100 * CLOCK_MIN_GAIN);
  } else if (status > 0) {
    fprintf(stderr, "calibrate: clock: the speed-up had not fallen halfway at %.0f us: window is a lower bound\n", window);
  }
  c->clock_window_us = window;
  for (int j = 0; j < N_PERIODS; j++) {
    /* duty 1 is the reference itself (speed 1 by definition), so lookups between it and 0.8 interpolate */
    if (schema_calibration_add_clock(c, 1.0, periods[j], 1.0, 1.0)) {
      ts_fail_sys(e, "calibrate: out of memory");
      goto out;
    }
    double last = 2;
    for (int d = 0; d < N_DUTIES; d++) {
      const clock_point *p = &pt[d * N_PERIODS + j];
      if (p->gemm.period_us != periods[j] || fabs(p->gemm.duty - last) < 1e-9) continue; /* same point twice */
      last = p->gemm.duty;
      if (schema_calibration_add_clock(c, p->gemm.duty, p->gemm.period_us, p->gemm_speed, p->mem_speed)) {
        ts_fail_sys(e, "calibrate: out of memory");
        goto out;
      }
    }
  }
  fprintf(stderr, "[%6.1fs] clock: window %.0f us (%s), section took %.1f s\n", calib_elapsed_s(), window,
          status == 0 ? "speed-up halved there" : status > 0 ? "lower bound" : "no speed-up", calib_elapsed_s() - t_start);
  if (cfg->clock_tsv && write_tsv(cfg->clock_tsv, pt, window, status, e)) goto out;
  rc = 0;
out:
  clock_free(&x);
  return rc;
}

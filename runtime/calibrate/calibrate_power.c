/* calibrate_power.c — the power phase of `tacorun calibrate` on the GPU
 * (calibrate_power.h says what and why).
 *
 * Each pattern runs untimed for settle_s (so the clocks and the power
 * controller have followed it), then for a timed window of timed_s (the
 * "idle" pattern: CALIB_POWER_IDLE_S with nothing running) on one stream:
 * the stream is synchronized at both edges of the window, NVML's energy
 * counter read there (the host time of each read is the midpoint of the
 * call), and power = energy / wall time. CUDA events around each kernel group
 * of every period give the busy time of the GEMMs and of the adds. A host
 * thread samples the SM clock and the driver's power reading every 10 ms
 * inside the window. */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibrate.h"
#include "calibrate_nvml.h"
#include "calibrate_power.h"
#include "calibrate_refk.h"
#include "infer_model.h"
#include "model.h"
#include "rt_ops.h"
#include "rt_ops_check.h"

/* Back-to-back launch times for sizing the first bursts only (an H100 under
 * its cap); the mixes and duties are planned from the measured ones. */
#define POWER_GUESS_GEMM_US 100.0
#define POWER_GUESS_ADD_US 35.0
#define POWER_SAMPLE_NS 10000000L /* 10 ms */
#define POWER_MAX_PERIODS 100000

typedef struct {
  calib_refk k;
  calib_nvml nv;
  cudaEvent_t *ev; /* 3 per timed period: before the GEMMs, between, after the adds */
  int n_ev;
  double settle_s, timed_s;
} power_ctx;

/* ---- the sampling thread ---- */

typedef struct {
  calib_nvml *nv;
  pthread_t th;
  atomic_int stop;
  int n;
  double mhz_sum, mhz_min, mhz_max, mw_sum;
  calib_nvml_ret err; /* first failed call, 0: none */
  const char *err_what;
} power_sampler;

static void *sampler_main(void *arg) {
  power_sampler *s = arg;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  while (!atomic_load(&s->stop)) {
    unsigned mhz = 0, mw = 0;
    calib_nvml_ret r = s->nv->clock(s->nv->dev, CALIB_NVML_CLOCK_SM, &mhz);
    if (r) {
      s->err = r, s->err_what = "nvmlDeviceGetClockInfo";
      break;
    }
    if ((r = s->nv->power(s->nv->dev, &mw)) != 0) {
      s->err = r, s->err_what = "nvmlDeviceGetPowerUsage";
      break;
    }
    if (s->n == 0 || mhz < s->mhz_min) s->mhz_min = mhz;
    if (s->n == 0 || mhz > s->mhz_max) s->mhz_max = mhz;
    s->mhz_sum += mhz;
    s->mw_sum += mw;
    s->n++;
    next.tv_nsec += POWER_SAMPLE_NS;
    if (next.tv_nsec >= 1000000000L) next.tv_sec++, next.tv_nsec -= 1000000000L;
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
  }
  return NULL;
}

static int sampler_start(power_sampler *s, calib_nvml *nv, ts_err *e) {
  memset(s, 0, sizeof *s);
  s->nv = nv;
  atomic_init(&s->stop, 0);
  if (pthread_create(&s->th, NULL, sampler_main, s)) return ts_fail_sys(e, "power: cannot start the sampling thread");
  return 0;
}

static void sampler_stop(power_sampler *s) {
  atomic_store(&s->stop, 1);
  pthread_join(s->th, NULL);
}

/* ---- one pattern ---- */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void sleep_s(double s) {
  struct timespec t = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&t, &t) != 0) {
  }
}

/* The energy counter in J and the host time of the read (midpoint of the call). */
static int read_energy(power_ctx *x, double *j, double *t, ts_err *e) {
  unsigned long long mj = 0;
  double a = now_s();
  RT_TRY(calib_nvml_energy_mj(&x->nv, &mj, e));
  *t = 0.5 * (a + now_s());
  *j = 1e-3 * (double)mj;
  return 0;
}

static int ensure_events(power_ctx *x, int n, ts_err *e) {
  if (n <= x->n_ev) return 0;
  cudaEvent_t *ev = realloc(x->ev, (size_t)n * sizeof *ev);
  if (!ev) return ts_fail_sys(e, "power: out of memory");
  x->ev = ev;
  for (; x->n_ev < n; x->n_ev++) RT_CHECK_CUDA(e, cudaEventCreate(&x->ev[x->n_ev]));
  return 0;
}

static void free_events(power_ctx *x) {
  for (int i = x->n_ev - 1; i >= 0; i--) cudaEventDestroy(x->ev[i]);
  free(x->ev);
  x->ev = NULL;
  x->n_ev = 0;
}

/* One period: GEMMs, adds, idle; ev3 (NULL: untimed) recorded around the groups. */
static int enqueue_period(power_ctx *x, const calib_power_pattern *p, const cudaEvent_t *ev3, ts_err *e) {
  if (ev3) RT_CHECK_CUDA(e, cudaEventRecord(ev3[0], x->k.stream));
  for (int i = 0; i < p->n_gemm; i++) RT_TRY(calib_refk_launch(&x->k, CALIB_REFK_GEMM, e));
  if (ev3) RT_CHECK_CUDA(e, cudaEventRecord(ev3[1], x->k.stream));
  for (int i = 0; i < p->n_add; i++) RT_TRY(calib_refk_launch(&x->k, CALIB_REFK_ADD, e));
  if (ev3) RT_CHECK_CUDA(e, cudaEventRecord(ev3[2], x->k.stream));
  return calib_refk_spin(&x->k, p->idle_us, e);
}

static int periods_for(double seconds, double period_us, int at_least) {
  double p = ceil(seconds * 1e6 / period_us);
  return p < at_least ? at_least : (p > POWER_MAX_PERIODS ? POWER_MAX_PERIODS : (int)p);
}

/* The timed part inside the window: the periods, or the idle wait. */
static int timed_part(power_ctx *x, const calib_power_pattern *p, int periods, ts_err *e) {
  if (periods == 0) {
    sleep_s(CALIB_POWER_IDLE_S);
    return 0;
  }
  for (int i = 0; i < periods; i++) RT_TRY(enqueue_period(x, p, &x->ev[3 * i], e));
  RT_CHECK_CUDA(e, cudaStreamSynchronize(x->k.stream));
  return 0;
}

static int busy_times(power_ctx *x, calib_power_row *row, ts_err *e) {
  double g = 0, a = 0;
  for (int i = 0; i < row->periods; i++) {
    float m1 = 0, m2 = 0;
    RT_CHECK_CUDA(e, cudaEventElapsedTime(&m1, x->ev[3 * i], x->ev[3 * i + 1]));
    RT_CHECK_CUDA(e, cudaEventElapsedTime(&m2, x->ev[3 * i + 1], x->ev[3 * i + 2]));
    g += 1e-3 * m1;
    a += 1e-3 * m2;
  }
  row->gemm_busy_s = row->plan.n_gemm ? g : 0;
  row->add_busy_s = row->plan.n_add ? a : 0;
  return 0;
}

static int run_pattern(power_ctx *x, calib_power_row *row, ts_err *e) {
  const calib_power_pattern *p = &row->plan;
  int idle = p->n_gemm == 0 && p->n_add == 0;
  row->periods = idle ? 0 : periods_for(x->timed_s, p->period_us, 3);
  RT_TRY(ensure_events(x, 3 * row->periods, e));
  if (idle) sleep_s(x->settle_s);
  else
    for (int i = periods_for(x->settle_s, p->period_us, 1); i > 0; i--) RT_TRY(enqueue_period(x, p, NULL, e));
  RT_CHECK_CUDA(e, cudaStreamSynchronize(x->k.stream));
  double j0, t0, j1 = 0, t1 = 0;
  RT_TRY(read_energy(x, &j0, &t0, e));
  power_sampler s;
  RT_TRY(sampler_start(&s, &x->nv, e));
  int rc = timed_part(x, p, row->periods, e);
  if (!rc) rc = read_energy(x, &j1, &t1, e);
  sampler_stop(&s);
  if (rc) return -1;
  if (s.err) return calib_nvml_fail(&x->nv, s.err_what, s.err, e);
  if (s.n == 0) return ts_fail_sys(e, "power: %s: no clock sample in the window", p->name);
  row->wall_s = t1 - t0;
  row->energy_j = j1 - j0;
  row->power_w = row->energy_j / row->wall_s;
  row->samples = s.n;
  row->sampled_w = 1e-3 * s.mw_sum / s.n;
  row->mhz_min = s.mhz_min, row->mhz_max = s.mhz_max, row->mhz_mean = s.mhz_sum / s.n;
  if (!idle) RT_TRY(busy_times(x, row, e));
  calib_power_fractions(row->gemm_busy_s, row->add_busy_s, row->wall_s, &row->gemm, &row->mem, &row->idle);
  row->period_us = 1e6 * row->wall_s / (idle ? 1 : row->periods);
  row->gemm_launch_us = p->n_gemm ? 1e6 * row->gemm_busy_s / ((double)row->periods * p->n_gemm) : 0;
  row->add_launch_us = p->n_add ? 1e6 * row->add_busy_s / ((double)row->periods * p->n_add) : 0;
  return 0;
}

static void progress(const calib_power_result *r, const calib_power_row *x) {
  if (x->flops > 0 && x->plan.n_add > 0) { /* an attention op mixed with the reference GEMM */
    fprintf(stderr, "[%6.1fs] power: %-24s %3d GEMMs + 1 attention: gemm %.3f; %5.1f W (sampled %5.1f), SM %4.0f MHz "
                    "(%4.0f-%4.0f, %d samples); GEMM %.2f us (x%.3f), attention %.2f us (x%.3f), %.1f TFLOP/s\n",
            calib_elapsed_s(), x->plan.name, x->plan.n_gemm, x->gemm, x->power_w, x->sampled_w, x->mhz_mean,
            x->mhz_min, x->mhz_max, x->samples, x->gemm_launch_us, x->gemm_speed, x->add_launch_us, x->mem_speed,
            x->add_launch_us > 0 ? x->flops / x->add_launch_us * 1e-6 : 0.0);
    return;
  }
  if (x->flops > 0) { /* a --power-gemm or --power-prefill-attn op: its own rate, not a speed against the reference GEMM */
    fprintf(stderr, "[%6.1fs] power: %-24s %3d GEMMs a burst: %5.1f W (sampled %5.1f), SM %4.0f MHz (%4.0f-%4.0f, %d "
                    "samples); GEMM %.2f us, %.1f TFLOP/s\n",
            calib_elapsed_s(), x->plan.name, x->plan.n_gemm, x->power_w, x->sampled_w, x->mhz_mean, x->mhz_min,
            x->mhz_max, x->samples, x->gemm_launch_us,
            x->gemm_launch_us > 0 ? x->flops / x->gemm_launch_us * 1e-6 : 0.0);
    return;
  }
  const calib_power_row *g = r->n > 1 ? &r->rows[1] : NULL, *m = r->n > 2 ? &r->rows[2] : NULL;
  double gs = g && x->gemm_launch_us > 0 ? g->gemm_launch_us / x->gemm_launch_us : 0;
  double ms = m && x->add_launch_us > 0 ? m->add_launch_us / x->add_launch_us : 0;
  fprintf(stderr, "[%6.1fs] power: %-15s %2d GEMM + %2d add + %6.0f us idle, period %7.0f us: gemm %.3f mem %.3f "
                  "idle %.3f; %5.1f W (sampled %5.1f), SM %4.0f MHz (%4.0f-%4.0f, %d samples); GEMM %.2f us (x%.3f), "
                  "add %.2f us (x%.3f)\n",
          calib_elapsed_s(), x->plan.name, x->plan.n_gemm, x->plan.n_add, x->plan.idle_us, x->period_us, x->gemm,
          x->mem, x->idle, x->power_w, x->sampled_w, x->mhz_mean, x->mhz_min, x->mhz_max, x->samples,
          x->gemm_launch_us, gs, x->add_launch_us, ms);
}

/* idle, gemm, mem as planned from the guesses; the rest planned from gemm's and mem's launch times. */
static int run_all(power_ctx *x, calib_power_result *r, ts_err *e) {
  calib_power_pattern plan[CALIB_POWER_MAX_PATTERNS];
  int n = calib_power_plan(POWER_GUESS_GEMM_US, POWER_GUESS_ADD_US, plan, CALIB_POWER_MAX_PATTERNS, e);
  if (n < 3) return -1;
  for (int i = 0; i < n; i++) {
    if (i == 3) { /* replanned from the back-to-back times */
      if (calib_power_plan(r->rows[1].gemm_launch_us, r->rows[2].add_launch_us, plan, CALIB_POWER_MAX_PATTERNS, e) != n)
        return ts_fail_sys(e, "power: the plan changed its number of patterns");
    }
    calib_power_row *row = &r->rows[i];
    memset(row, 0, sizeof *row);
    row->plan = plan[i];
    RT_TRY(run_pattern(x, row, e));
    r->n = i + 1;
    progress(r, row);
  }
  r->idle_w = r->rows[0].power_w;
  return calib_power_speeds(r, e);
}

/* The next op row of r (a --power-gemm shape or --power-prefill-attn op) of `flops` a launch, run back to back in
 * bursts of ~2 ms between event pairs, sized from a guess of `guess_flops_per_s`. */
static calib_power_row *op_row(calib_power_result *r, const char *name, double flops, double guess_flops_per_s) {
  calib_power_row *row = &r->gemms[r->n_gemms];
  memset(row, 0, sizeof *row);
  row->flops = flops;
  calib_power_pattern *p = &row->plan;
  snprintf(p->name, sizeof p->name, "%s", name);
  double guess_us = flops / guess_flops_per_s * 1e6;
  p->n_gemm = (int)fmax(1.0, round(CALIB_POWER_B2B_BURST_US / guess_us));
  p->period_us = p->n_gemm * guess_us;
  p->gemm_target = 1.0;
  return row;
}

/* --power-gemm: each shape back to back on its own operands and stream; x->k stands for the shape's kernels while
 * it runs. */
static int run_gemm_shapes(power_ctx *x, const calib_config *cfg, calib_power_result *r, ts_err *e) {
  calib_refk ref = x->k;
  int rc = 0;
  for (int i = 0; i < cfg->n_power_gemms && !rc; i++) {
    const long long *s = cfg->power_gemms[i];
    char name[CALIB_POWER_NAME_MAX];
    snprintf(name, sizeof name, "gemm-%lldx%lldx%lld", s[0], s[1], s[2]);
    calib_power_row *row = op_row(r, name, 2.0 * (double)s[0] * (double)s[1] * (double)s[2], 600e12);
    row->m = s[0], row->n = s[1], row->k = s[2];
    rc = calib_refk_open_gemm(&x->k, s[0], s[1], s[2], e);
    if (!rc) rc = run_pattern(x, row, e);
    calib_refk_close(&x->k);
    if (!rc) r->n_gemms++, progress(r, row);
  }
  x->k = ref;
  return rc;
}

/* --power-prefill-attn: the inference executor's unfused prefill attention (infer_prefill_attention, its 1 GiB
 * scores workspace as in the executor) of hl query and kvl KV heads of d, batch b, prompt s, back to back on
 * random inputs; CALIB_REFK_GEMM runs it (calib_refk_open_bare). */
static int attn_launch(void *ctx, ts_err *e) { return infer_prefill_attention((const infer_prefill_args *)ctx, e); }

static void attn_free(infer_prefill_args *a) {
  cudaFree(a->scores), cudaFree((void *)a->v_cache), cudaFree((void *)a->k_cache);
  cudaFree(a->out), cudaFree(a->o_heads), cudaFree((void *)a->q);
}

static int attn_open(infer_prefill_args *a, const calib_refk *k, const long long *v, ts_err *e) {
  memset(a, 0, sizeof *a);
  a->gemm = k->gemm, a->stream = k->stream, a->scores_bytes = (size_t)1 << 30;
  a->hl = (int)v[0], a->kvl = (int)v[1], a->head_dim = (int)v[2], a->batch = (int)v[3], a->seq = a->max_seq = v[4];
  if ((size_t)a->seq * a->seq * 2 > a->scores_bytes)
    return ts_fail(e, NULL, "--power-prefill-attn", "one head's %lld x %lld scores exceed the 1 GiB workspace", a->seq,
                   a->seq);
  const size_t qb = (size_t)a->batch * a->hl * a->seq * a->head_dim * 2,
               kb = (size_t)a->batch * a->kvl * a->seq * a->head_dim * 2;
  RT_CHECK_CUDA(e, cudaMalloc((void **)&a->q, qb));
  RT_CHECK_CUDA(e, cudaMalloc(&a->o_heads, qb));
  RT_CHECK_CUDA(e, cudaMalloc(&a->out, qb));
  RT_CHECK_CUDA(e, cudaMalloc((void **)&a->k_cache, kb));
  RT_CHECK_CUDA(e, cudaMalloc((void **)&a->v_cache, kb));
  RT_CHECK_CUDA(e, cudaMalloc(&a->scores, a->scores_bytes));
  RT_TRY(rt_fill_random_bf16((void *)a->q, (long long)(qb / 2), 6, 1.0f, k->stream, e));
  RT_TRY(rt_fill_random_bf16((void *)a->k_cache, (long long)(kb / 2), 7, 1.0f, k->stream, e));
  RT_TRY(rt_fill_random_bf16((void *)a->v_cache, (long long)(kb / 2), 8, 1.0f, k->stream, e));
  RT_CHECK_CUDA(e, cudaStreamSynchronize(k->stream));
  return 0;
}

/* The attention op of row b2b (just measured back to back) mixed with the reference GEMM: per period, as many
 * reference GEMMs as take the attention's back-to-back time, then one attention launch (ref's stream and GEMM
 * handle, t's buffers); its speed against b2b at the mix's clock is what says how the attention follows the clock
 * (calibration/merge_op_power.py). */
static int run_attn_mix(power_ctx *x, calib_refk *ref, const infer_prefill_args *t, const calib_power_row *b2b,
                        calib_power_result *r, ts_err *e) {
  const double t_gemm = r->rows[1].gemm_launch_us, t_attn = b2b->gemm_launch_us;
  if (!(t_gemm > 0 && t_attn > 0)) return ts_fail_sys(e, "power: %s: no back-to-back time to mix", b2b->plan.name);
  char name[CALIB_POWER_NAME_MAX];
  snprintf(name, sizeof name, "amix-%.26s", b2b->plan.name + 5); /* "attn-" off */
  calib_power_row *row = op_row(r, name, b2b->flops, 1.0); /* (its plan set below) */
  calib_power_pattern *p = &row->plan;
  p->n_gemm = (int)fmax(1.0, round(t_attn / t_gemm)), p->n_add = 1;
  p->period_us = p->n_gemm * t_gemm + t_attn;
  p->gemm_target = p->n_gemm * t_gemm / p->period_us;
  infer_prefill_args on_ref = *t;
  on_ref.gemm = ref->gemm, on_ref.stream = ref->stream;
  calib_refk bare = x->k;
  x->k = *ref;
  x->k.add_fn = attn_launch, x->k.add_ctx = &on_ref;
  int rc = run_pattern(x, row, e);
  *ref = x->k, ref->add_fn = NULL, ref->add_ctx = NULL; /* (its operand set counter moved on) */
  x->k = bare;
  if (rc) return -1;
  row->gemm_speed = row->gemm_launch_us > 0 ? t_gemm / row->gemm_launch_us : 0;
  row->mem_speed = row->add_launch_us > 0 ? t_attn / row->add_launch_us : 0;
  r->n_gemms++;
  progress(r, row);
  return 0;
}

static int run_attn_ops(power_ctx *x, const calib_config *cfg, calib_power_result *r, ts_err *e) {
  calib_refk ref = x->k;
  int rc = 0;
  for (int i = 0; i < cfg->n_power_attns && !rc; i++) {
    const long long *v = cfg->power_attns[i];
    char name[CALIB_POWER_NAME_MAX];
    snprintf(name, sizeof name, "attn-%lldx%lldx%lldx%lldx%lld", v[0], v[1], v[2], v[3], v[4]);
    calib_power_row *row = op_row(r, name, (double)v[3] * model_attention_fwd_flops(v[4], v[4], v[0] * v[2]), 300e12);
    infer_prefill_args t;
    memset(&t, 0, sizeof t);
    rc = calib_refk_open_bare(&x->k, e);
    if (!rc) rc = attn_open(&t, &x->k, v, e);
    if (!rc) {
      x->k.fn = attn_launch, x->k.fn_ctx = &t;
      rc = run_pattern(x, row, e);
    }
    if (!rc) r->n_gemms++, progress(r, row);
    if (!rc) rc = run_attn_mix(x, &ref, &t, row, r, e);
    if (x->k.stream) cudaStreamSynchronize(x->k.stream); /* before its buffers go */
    if (ref.stream) cudaStreamSynchronize(ref.stream);
    attn_free(&t);
    calib_refk_close(&x->k);
  }
  x->k = ref;
  return rc;
}

static int read_device(power_ctx *x, calib_power_result *r, ts_err *e) {
  unsigned mw = 0, mhz = 0;
  RT_TRY(calib_nvml_name(&x->nv, r->gpu, sizeof r->gpu, e));
  RT_TRY(calib_nvml_limit_mw(&x->nv, &mw, e));
  RT_TRY(calib_nvml_sm_max_mhz(&x->nv, &mhz, e));
  r->cap_w = 1e-3 * mw;
  r->f_max_mhz = mhz;
  return 0;
}

int calib_run_power(const calib_config *cfg, ts_err *e) {
  if (!cfg->power_json) return ts_fail(e, NULL, "--power-json", "required by the power phase");
  int dev = cfg->devices[0];
  RT_CHECK_CUDA(e, cudaSetDevice(dev));
  char pci[32];
  RT_CHECK_CUDA(e, cudaDeviceGetPCIBusId(pci, (int)sizeof pci, dev));
  power_ctx x;
  memset(&x, 0, sizeof x);
  x.settle_s = cfg->power_settle_s;
  x.timed_s = cfg->power_timed_s;
  calib_power_result *r = calloc(1, sizeof *r);
  if (!r) return ts_fail_sys(e, "power: out of memory");
  int rc = -1;
  double t_start = calib_elapsed_s();
  if (calib_nvml_open(&x.nv, CALIB_NVML_LIB, pci, e) || read_device(&x, r, e)) goto out;
  fprintf(stderr, "[%6.1fs] power: %s (PCI %s): cap %.0f W, max SM clock %.0f MHz; settle %.2f s, window %.2f s\n",
          calib_elapsed_s(), r->gpu, pci, r->cap_w, r->f_max_mhz, x.settle_s, x.timed_s);
  if (calib_refk_open(&x.k, e) || calib_refk_check_spin(&x.k, e) || run_all(&x, r, e) ||
      run_gemm_shapes(&x, cfg, r, e) || run_attn_ops(&x, cfg, r, e))
    goto out;
  /* the table first: every measured column survives a sample the JSON refuses */
  if (cfg->power_tsv && calib_power_write_tsv(cfg->power_tsv, r, e)) goto out;
  if (calib_power_write_json(cfg->power_json, r, e)) goto out;
  fprintf(stderr, "[%6.1fs] power: %d patterns in %.1f s, idle %.1f W -> %s\n", calib_elapsed_s(), r->n,
          calib_elapsed_s() - t_start, r->idle_w, cfg->power_json);
  rc = 0;
out:
  free_events(&x);
  calib_refk_close(&x.k);
  calib_nvml_close(&x.nv); /* nvmlShutdown whenever nvmlInit succeeded */
  free(r);
  return rc;
}

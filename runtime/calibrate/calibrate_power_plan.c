/* calibrate_power_plan.c — the power phase's plain C (calibrate_power.h): the
 * pattern planner, the fractions and speeds, the JSON and TSV writers; tested
 * on a CPU (tests/test_calibrate_power.c). */
#include "calibrate_power.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibrate_clock.h"
#include "ts_json.h"

static const double mix_targets[] = {0.1, 0.25, 0.5, 0.75, 0.9};
static const double mix_periods_us[] = {1000, 10000};
static const double gemm_duties[] = {0.25, 0.5, 0.75};
#define N_MIX ((int)(sizeof mix_targets / sizeof *mix_targets))
#define N_MIX_PERIODS ((int)(sizeof mix_periods_us / sizeof *mix_periods_us))
#define N_GEMM_DUTIES ((int)(sizeof gemm_duties / sizeof *gemm_duties))

static int add_pattern(calib_power_pattern *p, int cap, int *n, const char *name, int n_gemm, int n_add,
                       double idle_us, double t_gemm, double t_add, ts_err *e) {
  if (*n >= cap) return ts_fail(e, NULL, "power", "more than %d patterns", cap);
  calib_power_pattern *q = &p[(*n)++];
  memset(q, 0, sizeof *q);
  snprintf(q->name, sizeof q->name, "%s", name);
  q->n_gemm = n_gemm;
  q->n_add = n_add;
  q->idle_us = idle_us;
  q->period_us = n_gemm * t_gemm + n_add * t_add + idle_us;
  q->gemm_target = q->period_us > 0 ? n_gemm * t_gemm / q->period_us : 0;
  return 0;
}

static int duty_pattern(calib_power_pattern *p, int cap, int *n, const char *kind, int gemm, double t_gemm,
                        double t_add, double duty, ts_err *e) {
  calib_clock_burst b;
  if (calib_clock_size_burst(gemm ? t_gemm : t_add, duty, CALIB_POWER_DUTY_PERIOD_US, &b, e)) return -1;
  char name[CALIB_POWER_NAME_MAX];
  snprintf(name, sizeof name, "%s-d%02.0f", kind, 100 * duty);
  return add_pattern(p, cap, n, name, gemm ? b.n : 0, gemm ? 0 : b.n, b.idle_us, t_gemm, t_add, e);
}

int calib_power_plan(double t_gemm_us, double t_add_us, calib_power_pattern *p, int cap, ts_err *e) {
  if (!(t_gemm_us > 0) || !isfinite(t_gemm_us))
    return ts_fail(e, NULL, "power", "GEMM launch time %g us must be > 0", t_gemm_us);
  if (!(t_add_us > 0) || !isfinite(t_add_us))
    return ts_fail(e, NULL, "power", "add launch time %g us must be > 0", t_add_us);
  int n = 0;
  int bg = (int)ceil(CALIB_POWER_B2B_BURST_US / t_gemm_us), ba = (int)ceil(CALIB_POWER_B2B_BURST_US / t_add_us);
  if (add_pattern(p, cap, &n, "idle", 0, 0, 0, t_gemm_us, t_add_us, e) ||
      add_pattern(p, cap, &n, "gemm", bg, 0, 0, t_gemm_us, t_add_us, e) ||
      add_pattern(p, cap, &n, "mem", 0, ba, 0, t_gemm_us, t_add_us, e))
    return -1;
  for (int j = 0; j < N_MIX_PERIODS; j++)
    for (int i = 0; i < N_MIX; i++) {
      double f = mix_targets[i], P = mix_periods_us[j];
      long k = lround(f * P / t_gemm_us);
      if (k < 1) k = 1;
      long m = lround(k * t_gemm_us * (1 - f) / (f * t_add_us));
      if (m < 1) m = 1;
      char name[CALIB_POWER_NAME_MAX];
      snprintf(name, sizeof name, "mix-g%02.0f-p%.0fms", 100 * f, P / 1000);
      if (add_pattern(p, cap, &n, name, (int)k, (int)m, 0, t_gemm_us, t_add_us, e)) return -1;
    }
  for (int i = 0; i < N_GEMM_DUTIES; i++)
    if (duty_pattern(p, cap, &n, "gemm", 1, t_gemm_us, t_add_us, gemm_duties[i], e)) return -1;
  if (duty_pattern(p, cap, &n, "mem", 0, t_gemm_us, t_add_us, 0.5, e)) return -1;
  return n;
}

void calib_power_fractions(double gemm_busy_s, double add_busy_s, double wall_s, double *gemm, double *mem,
                           double *idle) {
  *gemm = *mem = 0;
  *idle = 1;
  if (!(wall_s > 0)) return;
  double g = gemm_busy_s > 0 ? gemm_busy_s / wall_s : 0, m = add_busy_s > 0 ? add_busy_s / wall_s : 0;
  if (g + m > 1) {
    double s = g + m;
    g /= s;
    m /= s;
  }
  *gemm = g;
  *mem = m;
  *idle = 1 - g - m;
  if (*idle < 0) *idle = 0; /* rounding */
}

static calib_power_row *find_row(calib_power_result *r, const char *name) {
  for (int i = 0; i < r->n; i++)
    if (!strcmp(r->rows[i].plan.name, name)) return &r->rows[i];
  return NULL;
}

int calib_power_speeds(calib_power_result *r, ts_err *e) {
  const calib_power_row *g = find_row(r, "gemm"), *m = find_row(r, "mem");
  if (!g || !(g->gemm_launch_us > 0)) return ts_fail(e, NULL, "power", "no measured \"gemm\" pattern (the reference)");
  if (!m || !(m->add_launch_us > 0)) return ts_fail(e, NULL, "power", "no measured \"mem\" pattern (the reference)");
  double tg = g->gemm_launch_us, tm = m->add_launch_us;
  for (int i = 0; i < r->n; i++) {
    calib_power_row *x = &r->rows[i];
    x->gemm_speed = x->gemm_launch_us > 0 ? tg / x->gemm_launch_us : 0;
    x->mem_speed = x->add_launch_us > 0 ? tm / x->add_launch_us : 0;
  }
  return 0;
}

static int finite_pos(double x) { return isfinite(x) && x > 0; }

int calib_power_check(const calib_power_result *r, ts_err *e) {
  if (!finite_pos(r->cap_w)) return ts_fail(e, NULL, "power.cap_w", "%g must be > 0", r->cap_w);
  if (!finite_pos(r->f_max_mhz)) return ts_fail(e, NULL, "power.f_max_mhz", "%g must be > 0", r->f_max_mhz);
  if (!finite_pos(r->idle_w)) return ts_fail(e, NULL, "power.idle_w", "%g must be > 0", r->idle_w);
  if (!*r->gpu) return ts_fail(e, NULL, "power.gpu", "empty");
  int have_gemm = 0, have_mem = 0;
  for (int i = 0; i < r->n; i++) {
    const calib_power_row *x = &r->rows[i];
    const char *nm = x->plan.name;
    size_t len = strnlen(nm, CALIB_POWER_NAME_MAX);
    if (len == 0 || len >= CALIB_POWER_NAME_MAX)
      return ts_fail(e, NULL, "power.samples", "pattern %d: name must be 1-%d characters", i, CALIB_POWER_NAME_MAX - 1);
    for (int j = 0; j < i; j++)
      if (!strcmp(r->rows[j].plan.name, nm)) return ts_fail(e, NULL, "power.samples", "%s: name given twice", nm);
    have_gemm |= !strcmp(nm, "gemm");
    have_mem |= !strcmp(nm, "mem");
    const double fr[] = {x->gemm, x->mem, x->idle};
    static const char *const fn[] = {"gemm", "mem", "idle"};
    for (int k = 0; k < 3; k++)
      if (!(fr[k] >= 0 && fr[k] <= 1)) return ts_fail(e, NULL, "power.samples", "%s: %s fraction %g not in [0, 1]", nm, fn[k], fr[k]);
    if (fabs(fr[0] + fr[1] + fr[2] - 1) > 0.02)
      return ts_fail(e, NULL, "power.samples", "%s: fractions sum to %g, not 1", nm, fr[0] + fr[1] + fr[2]);
    if (!finite_pos(x->power_w)) return ts_fail(e, NULL, "power.samples", "%s: power_w %g must be > 0", nm, x->power_w);
    if (!finite_pos(x->mhz_mean)) return ts_fail(e, NULL, "power.samples", "%s: sm_mhz %g must be > 0", nm, x->mhz_mean);
    if (!finite_pos(x->period_us)) return ts_fail(e, NULL, "power.samples", "%s: period_us %g must be > 0", nm, x->period_us);
    if (!(isfinite(x->gemm_speed) && x->gemm_speed >= 0 && isfinite(x->mem_speed) && x->mem_speed >= 0))
      return ts_fail(e, NULL, "power.samples", "%s: speeds %g, %g must be >= 0", nm, x->gemm_speed, x->mem_speed);
  }
  if (!have_gemm) return ts_fail(e, NULL, "power.samples", "no \"gemm\" sample");
  if (!have_mem) return ts_fail(e, NULL, "power.samples", "no \"mem\" sample");
  return 0;
}

static json_t *sample_json(const calib_power_row *x) {
  return json_pack("{s:s, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "name", x->plan.name, "gemm", x->gemm, "mem",
                   x->mem, "idle", x->idle, "period_us", x->period_us, "power_w", x->power_w, "sm_mhz", x->mhz_mean,
                   "gemm_speed", x->gemm_speed, "mem_speed", x->mem_speed);
}

int calib_power_write_json(const char *path, const calib_power_result *r, ts_err *e) {
  if (calib_power_check(r, e)) return -1;
  char gemm[64], mem[64];
  snprintf(gemm, sizeof gemm, "%dx%dx%d bf16", CALIB_REF_GEMM_M, CALIB_REF_GEMM_N, CALIB_REF_GEMM_K);
  snprintf(mem, sizeof mem, "rt_add %lld MiB", 3 * CALIB_REF_ADD_ELEMS * 2 >> 20);
  json_t *samples = json_array();
  json_t *o = json_pack("{s:f, s:f, s:f, s:s, s:s, s:s}", "cap_w", r->cap_w, "f_max_mhz", r->f_max_mhz, "idle_w",
                        r->idle_w, "gpu", r->gpu, "gemm", gemm, "mem", mem);
  int bad = !samples || !o;
  for (int i = 0; i < r->n && !bad; i++) {
    if (!strcmp(r->rows[i].plan.name, "idle")) continue;
    bad = json_array_append_new(samples, sample_json(&r->rows[i])) != 0;
  }
  if (bad || json_object_set_new(o, "samples", samples)) {
    json_decref(o);
    if (bad) json_decref(samples);
    return ts_fail_sys(e, "%s: cannot build the power JSON", path);
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    json_decref(o);
    return ts_fail_sys(e, "%s: cannot write", path);
  }
  int rc = tsj_dump_data(o, f, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
  json_decref(o);
  if (fclose(f) != 0 || rc) return ts_fail_sys(e, "%s: write failed", path);
  return 0;
}

/* One row's columns, no newline. */
static void tsv_row(FILE *f, const calib_power_row *x) {
  fprintf(f, "%s\t%d\t%d\t%.1f\t%.1f\t%.4f\t%d\t%.6f\t%.6f\t%.6f\t%.4f\t%.4f\t%.4f\t%.1f\t%.3f\t%.3f\t%.4f\t%.4f\t%.3f\t"
             "%.2f\t%.2f\t%.0f\t%.1f\t%.0f\t%d",
          x->plan.name, x->plan.n_gemm, x->plan.n_add, x->plan.idle_us, x->plan.period_us, x->plan.gemm_target,
          x->periods, x->wall_s, x->gemm_busy_s, x->add_busy_s, x->gemm, x->mem, x->idle, x->period_us,
          x->gemm_launch_us, x->add_launch_us, x->gemm_speed, x->mem_speed, x->energy_j, x->power_w, x->sampled_w,
          x->mhz_min, x->mhz_mean, x->mhz_max, x->samples);
}

int calib_power_write_tsv(const char *path, const calib_power_result *r, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot write", path);
  fprintf(f, "# power phase of tacorun calibrate on %s: cap %.0f W, max SM clock %.0f MHz, idle %.1f W; GEMM %dx%dx%d "
             "bf16 (exec_gemm NN), rt_add %lld elements\n",
          r->gpu, r->cap_w, r->f_max_mhz, r->idle_w, CALIB_REF_GEMM_M, CALIB_REF_GEMM_N, CALIB_REF_GEMM_K,
          CALIB_REF_ADD_ELEMS);
  fprintf(f, "name\tn_gemm\tn_add\tidle_us\tperiod_plan_us\tgemm_target\tperiods\twall_s\tgemm_busy_s\tadd_busy_s\t"
             "gemm\tmem\tidle\tperiod_us\tgemm_launch_us\tadd_launch_us\tgemm_speed\tmem_speed\tenergy_j\tpower_w\t"
             "sampled_w\tmhz_min\tmhz_mean\tmhz_max\tsamples\n");
  for (int i = 0; i < r->n; i++) {
    tsv_row(f, &r->rows[i]);
    fputc('\n', f);
  }
  if (r->n_gemms > 0) {
    fprintf(f, "# --power-gemm shapes (gemm-MxNxK: exec_gemm NN bf16) and --power-prefill-attn ops (attn-HLxKVLxDxBxS:\n"
               "# the inference executor's unfused prefill attention) back to back: the same columns, then tflops;\n"
               "# amix-HLxKVLxDxBxS: the reference GEMMs then one attention launch a period (about half the time each):\n"
               "# gemm_speed the GEMM's against \"gemm\", mem_speed the attention's against its attn- row, tflops the\n"
               "# attention's\n");
    for (int i = 0; i < r->n_gemms; i++) {
      const calib_power_row *x = &r->gemms[i];
      tsv_row(f, x);
      double us = x->plan.n_add > 0 ? x->add_launch_us : x->gemm_launch_us; /* an amix row: the attention's */
      fprintf(f, "\t%.1f\n", us > 0 ? x->flops / us * 1e-6 : 0.0);
    }
  }
  return fclose(f) == 0 ? 0 : ts_fail_sys(e, "%s: write failed", path);
}

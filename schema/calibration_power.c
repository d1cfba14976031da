/* calibration_power.c — the calibration's "power" section: the GPU's board power against its SM clock
 * for a few kernel mixes (a GEMM back to back, a memory-bound kernel back to back, mixes of the two
 * and idle), measured through NVML, and the fit the simulator's power-cap clock model reads
 * (calibration.h; sim/README.md "The power-cap clock"). Strict loader, writer, the fit, the clock
 * a mix runs at under the cap, and the speeds a clock gives.
 *
 * The fit (deterministic, at load): each class c of kernel (gemm, mem) draws
 *     P_c(f) = s + d_c (f / f_max)^a
 * and idle time idle_w; a sample's power is gemm P_gemm(f) + mem P_mem(f) + idle idle_w at its
 * measured clock f = sm_mhz. For each a of the grid 1, 1.05, .., 4, (s, d_gemm, d_mem) are the
 * linear least squares (QR by modified Gram-Schmidt) of the samples; the a of the smallest squared
 * residual wins (the first on a tie). The speed laws speed = (f / f_ref)^b are least squares in
 * log space through f_ref, the clock of the back-to-back sample of the class ("gemm", "mem"). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "ts_json.h"

#define POWER_MAX_W 1e4
#define POWER_MAX_MHZ 1e4
#define POWER_MAX_PERIOD_US 1e9
#define POWER_MAX_SPEED 10.0
#define POWER_SUM_TOL 0.02 /* gemm + mem + idle of a sample: 1 within this */
#define POWER_MIN_SAMPLES 4
#define POWER_A_STEPS 60 /* a = 1 + k / 20, k = 0 .. 60: 1 .. 4 by 0.05 */
/* A column of the least squares whose part independent of the columns before it is below this share
 * of its length: the system is singular. */
#define POWER_SINGULAR 1e-9

static const schema_power_sample *sample_named(const schema_power *p, const char *name) {
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->s[i].name, name) == 0) return &p->s[i];
  return NULL;
}

/* ---- the fit ---- */

/* A sample enters the power fit when it ran some kernel (gemm + mem > 0). */
static bool power_usable(const schema_power_sample *q) { return q->gemm + q->mem > 0; }

/* Least squares of y against the columns x[.][0..2] over n rows by modified Gram-Schmidt: 0 and the
 * coefficients and squared residual; -1 when singular. Columns and y are overwritten. */
static int lsq3(int n, double (*x)[3], double *y, double coef[3], double *sse) {
  double r[3][3] = {{0}};
  for (int j = 0; j < 3; j++) {
    double len0 = 0;
    for (int i = 0; i < n; i++) len0 += x[i][j] * x[i][j];
    for (int k = 0; k < j; k++) { /* against the orthonormal columns before */
      double dot = 0;
      for (int i = 0; i < n; i++) dot += x[i][k] * x[i][j];
      r[k][j] = dot;
      for (int i = 0; i < n; i++) x[i][j] -= dot * x[i][k];
    }
    double len = 0;
    for (int i = 0; i < n; i++) len += x[i][j] * x[i][j];
    if (!(len0 > 0) || !(sqrt(len) > POWER_SINGULAR * sqrt(len0))) return -1;
    r[j][j] = sqrt(len);
    for (int i = 0; i < n; i++) x[i][j] /= r[j][j];
  }
  double qy[3];
  for (int j = 0; j < 3; j++) { /* Q^T y, y left as the residual */
    double dot = 0;
    for (int i = 0; i < n; i++) dot += x[i][j] * y[i];
    qy[j] = dot;
    for (int i = 0; i < n; i++) y[i] -= dot * x[i][j];
  }
  for (int j = 2; j >= 0; j--) {
    double v = qy[j];
    for (int k = j + 1; k < 3; k++) v -= r[j][k] * coef[k];
    coef[j] = v / r[j][j];
  }
  *sse = 0;
  for (int i = 0; i < n; i++) *sse += y[i] * y[i];
  return 0;
}

/* The exponent b of speed = (f / f_ref)^b over the samples with a speed of the class (mem: that
 * class) at a clock other than f_ref: least squares of ln speed against ln (f / f_ref). *used: how
 * many; -1 when none. */
static int speed_law(const schema_power *p, bool mem, double f_ref, double *b, int *used) {
  double num = 0, den = 0;
  *used = 0;
  for (int i = 0; i < p->n; i++) {
    const schema_power_sample *q = &p->s[i];
    double sp = mem ? q->mem_speed : q->gemm_speed;
    if (!(sp > 0) || q->sm_mhz == f_ref) continue;
    double x = log(q->sm_mhz / f_ref);
    num += x * log(sp), den += x * x;
    (*used)++;
  }
  if (!(den > 0)) return -1;
  *b = num / den;
  return 0;
}

int schema_power_fit_run(schema_power *p, const char *file, ts_err *e) {
  const char *sec = "power";
  schema_power_fit *F = &p->fit;
  memset(F, 0, sizeof *F);
  const schema_power_sample *g0 = sample_named(p, "gemm"), *m0 = sample_named(p, "mem");
  if (!g0 || !m0)
    return ts_fail(e, file, "power.samples", "needs the samples named \"gemm\" (a GEMM back to back) and \"mem\" (a "
                   "memory-bound kernel back to back)");
  int n = 0;
  for (int i = 0; i < p->n; i++) n += power_usable(&p->s[i]);
  if (n < POWER_MIN_SAMPLES)
    return ts_fail(e, file, sec, "the fit needs at least %d samples that ran kernels (gemm + mem > 0); %d given",
                   POWER_MIN_SAMPLES, n);
  double best_sse = INFINITY, best[3] = {0}, best_a = 0;
  for (int k = 0; k <= POWER_A_STEPS; k++) {
    const double a = (20.0 + k) / 20.0;
    double x[SCHEMA_POWER_SAMPLES][3], y[SCHEMA_POWER_SAMPLES], coef[3], sse;
    int row = 0;
    for (int i = 0; i < p->n; i++) {
      const schema_power_sample *q = &p->s[i];
      if (!power_usable(q)) continue;
      const double u = pow(q->sm_mhz / p->f_max_mhz, a);
      x[row][0] = q->gemm + q->mem, x[row][1] = q->gemm * u, x[row][2] = q->mem * u;
      y[row++] = q->power_w - q->idle * p->idle_w;
    }
    if (lsq3(row, x, y, coef, &sse)) continue;
    if (sse < best_sse) best_sse = sse, best_a = a, memcpy(best, coef, sizeof best);
  }
  if (!isfinite(best_sse))
    return ts_fail(e, file, sec, "the fit is singular for every exponent: the samples do not tell the static power "
                   "and the two classes' dynamic power apart (vary the mix and the clock)");
  F->a = best_a, F->s_w = best[0], F->d_gemm_w = best[1], F->d_mem_w = best[2], F->used = n;
  F->rms_w = sqrt(best_sse / n);
  if (!(F->d_gemm_w > 0) || !(F->d_mem_w > 0))
    return ts_fail(e, file, sec, "the fit gives a negative dynamic power (d_gemm %.6g W, d_mem %.6g W at exponent "
                   "%.2f): the samples do not describe power rising with the clock", F->d_gemm_w, F->d_mem_w, F->a);
  if (!(F->s_w < p->cap_w))
    return ts_fail(e, file, sec, "the fit's static power %.6g W is not below cap_w %g W", F->s_w, p->cap_w);
  F->f_gemm_ref_mhz = g0->sm_mhz, F->f_mem_ref_mhz = m0->sm_mhz;
  if (speed_law(p, false, F->f_gemm_ref_mhz, &F->bg, &F->n_gemm_speed))
    return ts_fail(e, file, "power.samples", "no gemm_speed at a clock other than the \"gemm\" sample's %g MHz: the "
                   "GEMM speed law cannot be fitted", F->f_gemm_ref_mhz);
  if (speed_law(p, true, F->f_mem_ref_mhz, &F->bm, &F->n_mem_speed))
    return ts_fail(e, file, "power.samples", "no mem_speed at a clock other than the \"mem\" sample's %g MHz: the "
                   "memory-bound speed law cannot be fitted", F->f_mem_ref_mhz);
  F->f_gemm_model_mhz = schema_power_clock(p, 1, 0, 0);
  F->f_mem_model_mhz = schema_power_clock(p, 0, 1, 0);
  F->fitted = true;
  return 0;
}

/* ---- the model ---- */

double schema_power_w(const schema_power *p, double x_gemm, double x_mem, double x_idle, double f_mhz) {
  const schema_power_fit *F = &p->fit;
  const double u = pow(f_mhz / p->f_max_mhz, F->a);
  return x_gemm * (F->s_w + F->d_gemm_w * u) + x_mem * (F->s_w + F->d_mem_w * u) + x_idle * p->idle_w;
}

#define POWER_BISECTIONS 100

double schema_power_clock(const schema_power *p, double x_gemm, double x_mem, double x_idle) {
  return schema_power_clock_under(p, x_gemm, x_mem, x_idle, p->cap_w);
}

double schema_power_clock_under(const schema_power *p, double x_gemm, double x_mem, double x_idle, double limit_w) {
  if (schema_power_w(p, x_gemm, x_mem, x_idle, p->f_max_mhz) <= limit_w) return p->f_max_mhz;
  double lo = 0, hi = p->f_max_mhz; /* the power rises with f: P(hi) > limit; P(0) <= limit for the cap */
  for (int i = 0; i < POWER_BISECTIONS && hi - lo > 1e-12 * p->f_max_mhz; i++) {
    double mid = 0.5 * (lo + hi);
    if (schema_power_w(p, x_gemm, x_mem, x_idle, mid) <= limit_w)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

void schema_power_speeds(const schema_power *p, double f_mhz, double *gemm_speed, double *mem_speed) {
  const schema_power_fit *F = &p->fit;
  *gemm_speed = pow(f_mhz / F->f_gemm_model_mhz, F->bg);
  *mem_speed = pow(f_mhz / F->f_mem_model_mhz, F->bm);
}

void schema_power_print_fit(const schema_power *p, FILE *out) {
  const schema_power_fit *F = &p->fit;
  fprintf(out, "power section: %s; cap %g W, f_max %g MHz, idle %g W; %d samples\n", p->gpu, p->cap_w, p->f_max_mhz,
          p->idle_w, p->n);
  fprintf(out, "  gemm kernel: %s\n  mem kernel:  %s\n", p->gemm, p->mem);
  fprintf(out, "power fit: P_c(f) = s + d_c (f / %g MHz)^a, over %d samples\n", p->f_max_mhz, F->used);
  fprintf(out, "  a %.2f, s %.3f W, d_gemm %.3f W, d_mem %.3f W; rms residual %.3f W\n", F->a, F->s_w, F->d_gemm_w,
          F->d_mem_w, F->rms_w);
  fprintf(out, "speed laws: gemm (f / %g MHz)^%.4f over %d samples, mem (f / %g MHz)^%.4f over %d samples\n",
          F->f_gemm_ref_mhz, F->bg, F->n_gemm_speed, F->f_mem_ref_mhz, F->bm, F->n_mem_speed);
  fprintf(out, "the model's back-to-back clocks (speed 1): gemm %.1f MHz, mem %.1f MHz\n", F->f_gemm_model_mhz,
          F->f_mem_model_mhz);
  fprintf(out, "%-16s %5s %5s %5s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n", "sample", "gemm", "mem", "idle", "MHz", "W",
          "fit_W", "resid_W", "cap_MHz", "gemm_sp", "fit_sp", "mem_sp", "fit_sp");
  for (int i = 0; i < p->n; i++) {
    const schema_power_sample *q = &p->s[i];
    double fit_w = schema_power_w(p, q->gemm, q->mem, q->idle, q->sm_mhz);
    double fc = schema_power_clock(p, q->gemm, q->mem, q->idle);
    double gs = pow(q->sm_mhz / F->f_gemm_ref_mhz, F->bg), ms = pow(q->sm_mhz / F->f_mem_ref_mhz, F->bm);
    fprintf(out, "%-16s %5.3f %5.3f %5.3f %8.1f %8.1f %8.1f %+8.2f %8.1f %8.4f %8.4f %8.4f %8.4f\n", q->name, q->gemm,
            q->mem, q->idle, q->sm_mhz, q->power_w, fit_w, q->power_w - fit_w, fc, q->gemm_speed,
            q->gemm_speed > 0 ? gs : 0.0, q->mem_speed, q->mem_speed > 0 ? ms : 0.0);
  }
  fprintf(out, "(resid_W: measured - fitted power at the sample's own clock; cap_MHz: the clock the model gives the "
               "sample's mix under the cap; fit_sp: the speed law at the sample's clock, 0 where not measured)\n");
}

/* ---- loader and writer ---- */

/* A value as the writer keeps it (8 significant digits, calibration_io.c's WRITE_DIGITS): the loader fits the
 * numbers a rewritten file holds, so a file the writer wrote fits the same and always loads again. */
static double as_written(double v) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.8g", v);
  return strtod(buf, NULL);
}

static int load_sample(json_t *v, const char *file, const char *path, schema_power *p, schema_power_sample *q,
                       ts_err *e) {
  static const char *const keys[] = {"name", "gemm", "mem", "idle", "period_us", "power_w", "sm_mhz", "gemm_speed",
                                     "mem_speed", NULL};
  char f[96];
  if (!json_is_object(v)) return ts_fail(e, file, path, "must be an object");
  if (tsj_only_keys(v, keys, file, path, e) || tsj_string(v, "name", q->name, sizeof q->name, file, path, e) ||
      tsj_real(v, "gemm", -POWER_SUM_TOL, 1 + POWER_SUM_TOL, &q->gemm, file, path, e) ||
      tsj_real(v, "mem", -POWER_SUM_TOL, 1 + POWER_SUM_TOL, &q->mem, file, path, e) ||
      tsj_real(v, "idle", -POWER_SUM_TOL, 1 + POWER_SUM_TOL, &q->idle, file, path, e) ||
      tsj_real(v, "period_us", 0, POWER_MAX_PERIOD_US, &q->period_us, file, path, e) ||
      tsj_real(v, "power_w", 0, POWER_MAX_W, &q->power_w, file, path, e) ||
      tsj_real(v, "sm_mhz", 0, p->f_max_mhz, &q->sm_mhz, file, path, e) ||
      tsj_real_opt(v, "gemm_speed", 0, POWER_MAX_SPEED, 0, &q->gemm_speed, file, path, e) ||
      tsj_real_opt(v, "mem_speed", 0, POWER_MAX_SPEED, 0, &q->mem_speed, file, path, e))
    return -1;
  double *num[] = {&q->gemm, &q->mem, &q->idle, &q->period_us, &q->power_w, &q->sm_mhz, &q->gemm_speed, &q->mem_speed};
  for (size_t i = 0; i < sizeof num / sizeof num[0]; i++) *num[i] = as_written(*num[i]);
  const double sum = q->gemm + q->mem + q->idle;
  if (fabs(sum - 1) > POWER_SUM_TOL)
    return ts_fail(e, file, path, "gemm + mem + idle is %g: the time fractions must sum to 1 (within %g)", sum,
                   POWER_SUM_TOL);
  /* a fraction up to POWER_SUM_TOL outside [0, 1] is timing noise (idle = 1 - the kernels' event-timed busy
   * share, events and the host clock apart): taken as the bound */
  double *frac[] = {&q->gemm, &q->mem, &q->idle};
  for (int i = 0; i < 3; i++) *frac[i] = *frac[i] < 0 ? 0 : *frac[i] > 1 ? 1 : *frac[i];
  if (!(q->period_us > 0)) return ts_fail(e, file, (snprintf(f, sizeof f, "%s.period_us", path), f), "must be > 0");
  if (!(q->power_w > 0)) return ts_fail(e, file, (snprintf(f, sizeof f, "%s.power_w", path), f), "must be > 0");
  if (!(q->sm_mhz > 0)) return ts_fail(e, file, (snprintf(f, sizeof f, "%s.sm_mhz", path), f), "must be > 0");
  return 0;
}

static int load_section(json_t *obj, const char *file, schema_power *p, ts_err *e) {
  const char *sec = "power";
  if (!json_is_object(obj)) return ts_fail(e, file, sec, "must be an object");
  static const char *const keys[] = {"cap_w", "f_max_mhz", "idle_w", "gpu", "gemm", "mem", "samples", NULL};
  if (tsj_only_keys(obj, keys, file, sec, e) || tsj_real(obj, "cap_w", 0, POWER_MAX_W, &p->cap_w, file, sec, e) ||
      tsj_real(obj, "f_max_mhz", 0, POWER_MAX_MHZ, &p->f_max_mhz, file, sec, e) ||
      tsj_real(obj, "idle_w", 0, POWER_MAX_W, &p->idle_w, file, sec, e) ||
      tsj_string(obj, "gpu", p->gpu, sizeof p->gpu, file, sec, e) ||
      tsj_string(obj, "gemm", p->gemm, sizeof p->gemm, file, sec, e) ||
      tsj_string(obj, "mem", p->mem, sizeof p->mem, file, sec, e))
    return -1;
  p->cap_w = as_written(p->cap_w), p->f_max_mhz = as_written(p->f_max_mhz), p->idle_w = as_written(p->idle_w);
  if (!(p->cap_w > 0)) return ts_fail(e, file, "power.cap_w", "must be > 0 (watts)");
  if (!(p->f_max_mhz > 0)) return ts_fail(e, file, "power.f_max_mhz", "must be > 0 (MHz)");
  if (!(p->idle_w < p->cap_w)) return ts_fail(e, file, "power.idle_w", "must be below cap_w (%g W)", p->cap_w);
  json_t *arr = json_object_get(obj, "samples");
  if (!arr) return ts_fail(e, file, "power.samples", "missing (an array is required)");
  if (!json_is_array(arr)) return ts_fail(e, file, "power.samples", "must be an array");
  size_t n = json_array_size(arr);
  if (n < 1 || n > SCHEMA_POWER_SAMPLES)
    return ts_fail(e, file, "power.samples", "must hold 1 to %d samples (%zu given)", SCHEMA_POWER_SAMPLES, n);
  for (size_t i = 0; i < n; i++) {
    char path[48];
    snprintf(path, sizeof path, "power.samples[%zu]", i);
    schema_power_sample *q = &p->s[i];
    if (load_sample(json_array_get(arr, i), file, path, p, q, e)) return -1;
    for (size_t j = 0; j < i; j++)
      if (strcmp(p->s[j].name, q->name) == 0)
        return ts_fail(e, file, path, "name \"%s\" repeats samples[%zu]'s: names must be unique", q->name, j);
    p->n = (int)i + 1;
  }
  return schema_power_fit_run(p, file, e);
}

int schema_power_load(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  json_t *obj = json_object_get(root, "power");
  memset(&c->power, 0, sizeof c->power);
  if (!obj) return 0; /* optional: the duty-keyed clock model, or none */
  if (load_section(obj, file, &c->power, e)) {
    memset(&c->power, 0, sizeof c->power);
    return -1;
  }
  return 0;
}

int schema_power_load_file(const char *path, schema_power *p, ts_err *e) {
  memset(p, 0, sizeof *p);
  json_t *root = tsj_load_file(path, e);
  if (!root) return -1;
  if (json_is_object(root) && json_object_get(root, "schema")) { /* a calibration file: all of it checked */
    json_decref(root);
    schema_calibration c;
    if (schema_calibration_load(path, &c, e)) return -1;
    int rc = c.power.n ? 0 : ts_fail(e, path, "power", "missing: no power section (calibration/merge_power.py adds one)");
    if (rc == 0) *p = c.power;
    schema_calibration_free(&c);
    return rc;
  }
  json_t *obj = json_is_object(root) && json_object_get(root, "power") ? json_object_get(root, "power") : root;
  int rc = load_section(obj, path, p, e);
  if (rc) memset(p, 0, sizeof *p);
  json_decref(root);
  return rc;
}

json_t *schema_power_json(const schema_calibration *c) {
  const schema_power *p = &c->power;
  if (p->n < 1) return NULL;
  json_t *arr = json_array();
  for (int i = 0; i < p->n; i++) {
    const schema_power_sample *q = &p->s[i];
    json_array_append_new(arr, json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "name", q->name, "gemm",
                                         tsj_number(q->gemm), "mem", tsj_number(q->mem), "idle", tsj_number(q->idle),
                                         "period_us", tsj_number(q->period_us), "power_w", tsj_number(q->power_w),
                                         "sm_mhz", tsj_number(q->sm_mhz), "gemm_speed", tsj_number(q->gemm_speed),
                                         "mem_speed", tsj_number(q->mem_speed)));
  }
  return json_pack("{s:o,s:o,s:o,s:s,s:s,s:s,s:o}", "cap_w", tsj_number(p->cap_w), "f_max_mhz",
                   tsj_number(p->f_max_mhz), "idle_w", tsj_number(p->idle_w), "gpu", p->gpu, "gemm", p->gemm, "mem",
                   p->mem, "samples", arr);
}

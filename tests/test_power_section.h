/* test_power_section.h — a "power" calibration section generated from known parameters, for the tests of the
 * power-cap clock model (test_power_clock.c, test_sim_engine.c, test_infer.c).
 *
 * The hand section: P_c(f) = 100 + d_c (f / 2000)^2 W, d_gemm 800, d_mem 400, idle 50 W, cap 700 W; speed laws
 * GEMM (f / f_gemm)^1 and memory-bound (f / f_mem)^0.5. By hand:
 *   the GEMM back to back: 100 + 800 u^2 = 700, u^2 = 3/4, f_gemm = 2000 sqrt(3/4) = 1732.05 MHz;
 *   the memory-bound kernel back to back: 100 + 400 = 500 W at f_max, f_mem = 2000 MHz;
 *   a mix of GEMM share x (no idle): 100 + (400 + 400 x) u^2 = 700, u^2 = 600 / (400 + 400 x) (u <= 1).
 * Every sample's power is the model's at its clock, its speeds the laws' against the "gemm" and "mem" samples'
 * clocks, which are those two back-to-back clocks: the fit recovers the parameters and the model's own
 * back-to-back clocks equal the samples'. */
#ifndef TEST_POWER_SECTION_H
#define TEST_POWER_SECTION_H

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"

typedef struct {
  double a, s, dg, dm, idle_w, cap_w, f_max, bg, bm;
} test_power_params;

static const test_power_params TEST_POWER_HAND = {2.0, 100, 800, 400, 50, 700, 2000, 1.0, 0.5};

static double test_power_w(const test_power_params *q, double g, double m, double i, double f) {
  double u = pow(f / q->f_max, q->a);
  return g * (q->s + q->dg * u) + m * (q->s + q->dm * u) + i * q->idle_w;
}

/* The largest clock a mix may run at under the cap by the parameters' closed form (u^a = (cap - rest) / dyn). */
static double test_power_cap_clock(const test_power_params *q, double g, double m, double i) {
  double dyn = g * q->dg + m * q->dm, rest = (g + m) * q->s + i * q->idle_w;
  double u = pow((q->cap_w - rest) / dyn, 1.0 / q->a);
  return u >= 1 ? q->f_max : q->f_max * u;
}

/* The section of q: "gemm" and "mem" back to back at their cap clocks, and mixes at clocks of their own. */
static void test_power_section(schema_power *p, const test_power_params *q) {
  memset(p, 0, sizeof *p);
  p->cap_w = q->cap_w, p->f_max_mhz = q->f_max, p->idle_w = q->idle_w;
  snprintf(p->gpu, sizeof p->gpu, "test GPU");
  snprintf(p->gemm, sizeof p->gemm, "a GEMM");
  snprintf(p->mem, sizeof p->mem, "an add");
  const double fg = test_power_cap_clock(q, 1, 0, 0), fm = test_power_cap_clock(q, 0, 1, 0);
  const struct {
    const char *name;
    double g, m, i, f;
  } pat[] = {{"gemm", 1, 0, 0, fg},          {"mem", 0, 1, 0, fm},          {"mix50", 0.5, 0.5, 0, 1900},
             {"gemm_idle", 0.6, 0, 0.4, 1980}, {"mem_idle", 0, 0.5, 0.5, 1500}, {"mix_slow", 0.3, 0.6, 0.1, 1200}};
  for (size_t k = 0; k < sizeof pat / sizeof pat[0]; k++) {
    schema_power_sample *s = &p->s[p->n++];
    snprintf(s->name, sizeof s->name, "%s", pat[k].name);
    s->gemm = pat[k].g, s->mem = pat[k].m, s->idle = pat[k].i, s->sm_mhz = pat[k].f, s->period_us = 2000;
    s->power_w = test_power_w(q, pat[k].g, pat[k].m, pat[k].i, pat[k].f);
    s->gemm_speed = pat[k].g > 0 ? pow(pat[k].f / fg, q->bg) : 0;
    s->mem_speed = pat[k].m > 0 ? pow(pat[k].f / fm, q->bm) : 0;
  }
}

#endif

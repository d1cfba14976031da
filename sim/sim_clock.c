/* sim_clock.c — the clock model: a GPU whose compute stream idles often
 * (waiting on slow collectives) drops below its power cap, and its clocks,
 * and so its kernels, go up; the calibration's GEMMs were timed back to back,
 * at the cap. The calibration's clock section (schema/calibration.h) gives
 * the speed-up against the compute duty; the power controller reacts over a
 * window of clock_window_us, so an op's duty is the compute stream's busy
 * fraction in a window of that width around it, and a rank's duty the
 * compute-time-weighted mean over its ops.
 *
 * Faster compute changes the timeline, and so the duty: the simulation runs
 * again with each rank's compute ops divided by its speeds, until the
 * iteration time moves less than 0.1%, or the moves still to come, from the
 * ratio of the last two, add up to less (at most 4 simulations). SimGrid runs
 * once per process: the world is set up once (platform, actors), then each
 * simulation runs in a forked child and sends its result back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define CLOCK_MAX_PASSES 4
#define CLOCK_TOLERANCE 1e-3 /* relative change of the iteration time that ends the passes */

int sim_clock_setup(sim_world *w, ts_err *e) {
  (void)e;
  const plan *p = w->p;
  for (int r = 0; r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (!rs) continue;
    rs->gemm_speed = rs->mem_speed = 1.0;
    rs->clock_rep = rs;
    /* In full mode the ranks of one stage run the same program with the
     * same timeline up to small shifts: the stage's tp 0, dp 0 rank stands
     * for them (reduced mode simulates only those; programs built by the
     * caller may differ per rank, so there every rank has its own duty). */
    if (w->o->mode == SIM_MODE_FULL && !w->o->programs) {
      plan_coord c = plan_coord_of(p, r);
      c.tp = 0, c.dp = 0;
      int rep = plan_rank_of(p, c);
      if (rep >= 0 && rep < w->world && w->ranks[rep]) rs->clock_rep = w->ranks[rep];
    }
  }
  return 0;
}

double sim_clock_op(sim_rank *rs, double start, double d, double gemm_s) {
  double t = d;
  if (rs->gemm_speed != 1.0 || rs->mem_speed != 1.0) t = gemm_s / rs->gemm_speed + (d - gemm_s) / rs->mem_speed;
  if (rs->clock_rep != rs || t <= 0) return t;
  if (rs->n_clock_log == rs->cap_clock_log) {
    int cap = rs->cap_clock_log ? 2 * rs->cap_clock_log : 1024;
    double *bigger = realloc(rs->clock_log, sizeof *bigger * 2 * (size_t)cap);
    if (!bigger) return -1;
    rs->clock_log = bigger, rs->cap_clock_log = cap;
  }
  rs->clock_log[2 * rs->n_clock_log] = start;
  rs->clock_log[2 * rs->n_clock_log + 1] = t;
  rs->n_clock_log++;
  return t;
}

/* Busy time of the compute stream in [0, x] for x in [0, T]: the log is in
 * start order and its ops do not overlap (one stream); prefix[i] is the busy
 * time before op i. */
static double busy_until(const sim_rank *rs, const double *prefix, double x) {
  const double *log = rs->clock_log;
  int lo = 0, hi = rs->n_clock_log - 1;
  if (hi < 0 || x <= log[0]) return 0;
  while (lo < hi) { /* last op starting at or before x */
    int mid = (lo + hi + 1) / 2;
    if (log[2 * mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  double in = x - log[2 * lo];
  return prefix[lo] + (in < log[2 * lo + 1] ? in : log[2 * lo + 1]);
}

/* The iteration repeats: before 0 the previous one ends, after T the next
 * begins, so the busy time is extended periodically. */
static double busy_periodic(const sim_rank *rs, const double *prefix, double T, double x) {
  double k = floor(x / T);
  double in = x - k * T;
  if (in > T) in = T;
  if (in < 0) in = 0;
  return k * prefix[rs->n_clock_log] + busy_until(rs, prefix, in);
}

static double duty_of(const sim_rank *rs, double T, double window_s) {
  int n = rs->n_clock_log;
  if (n == 0 || T <= 0) return 1.0;
  double *prefix = malloc(sizeof *prefix * (size_t)(n + 1));
  if (!prefix) return 1.0; /* no memory: no speed-up (the conservative answer) */
  prefix[0] = 0;
  for (int i = 0; i < n; i++) prefix[i + 1] = prefix[i] + rs->clock_log[2 * i + 1];
  double W = window_s < T ? window_s : T;
  double weighted = 0, total = 0;
  for (int i = 0; i < n; i++) {
    double start = rs->clock_log[2 * i], d = rs->clock_log[2 * i + 1];
    double mid = start + 0.5 * d;
    double busy = busy_periodic(rs, prefix, T, mid + 0.5 * W) - busy_periodic(rs, prefix, T, mid - 0.5 * W);
    double f = busy / W;
    if (f > 1) f = 1;
    if (f < 0) f = 0;
    weighted += d * f;
    total += d;
  }
  free(prefix);
  return total > 0 ? weighted / total : 1.0;
}

void sim_clock_duties(sim_world *w) {
  double window_s = w->o->cal->clock_window_us * 1e-6;
  for (int r = 0; r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (rs && rs->clock_rep == rs) rs->clock_duty = duty_of(rs, w->end_s, window_s);
  }
}

/* Each rank's speeds from the duty of its clock_rep in the last simulation;
 * returns whether any changed (if none did, the next one would repeat it). */
static int set_speeds(sim_world *w, const schema_result *r) {
  int changed = 0;
  for (int i = 0; i < r->n_ranks; i++) {
    int rank = r->ranks[i].rank;
    sim_rank *rs = rank >= 0 && rank < w->world ? w->ranks[rank] : NULL;
    if (!rs) continue;
    double g, m;
    schema_clock_speed(w->o->cal, r->ranks[i].clock_duty, &g, &m);
    if (!(g > 0) || !(m > 0)) g = m = 1.0; /* a section built in memory without the loader's checks */
    if (g != rs->gemm_speed || m != rs->mem_speed) changed = 1;
    rs->gemm_speed = g, rs->mem_speed = m;
  }
  return changed;
}

static int pass_child(void *arg, schema_result *out, ts_err *e) { return sim_engine_pass(arg, out, e); }

int sim_clock_run(sim_world *w, schema_result *out, ts_err *e) {
  const schema_calibration *cal = w->o->cal;
  double previous = 0, change = 0; /* the last simulation's iteration time and how much it moved */
  char times[96] = "";
  for (int pass = 1;; pass++) {
    schema_result r;
    if (sim_fork_result(pass_child, w, &r, e)) return -1;
    double T = r.iteration_time_s;
    size_t used = strlen(times);
    snprintf(times + used, sizeof times - used, "%s%.4f", pass > 1 ? ", " : "", T);
    int settled = pass > 1 && fabs(T - previous) < CLOCK_TOLERANCE * previous;
    /* The passes contract: each change is about r times the one before. When
     * the changes still to come (|change| (r + r^2 + ...)) add up to less than
     * the tolerance, the next simulation would only confirm it. */
    if (!settled && pass > 2 && change != 0) {
      double r = fabs((T - previous) / change);
      settled = r < 1 && fabs(T - previous) * r / (1 - r) < CLOCK_TOLERANCE * T;
    }
    if (pass > 1) change = T - previous;
    if (!settled && pass < CLOCK_MAX_PASSES && !set_speeds(w, &r)) settled = 1;
    if (settled || pass == CLOCK_MAX_PASSES) {
      double period = cal->clock[0].period_us;
      for (int i = 1; i < cal->n_clock; i++)
        if (cal->clock[i].period_us < period) period = cal->clock[i].period_us;
      char note[256];
      snprintf(note, sizeof note,
               "clock model: compute at the speeds of its duty over %g us windows (points of the %g us period); "
               "%d simulations (%s s)%s; --clock off for calibrated times",
               cal->clock_window_us, period, pass, times, settled ? "" : ", not settled to 0.1%");
      if (schema_result_add_note(&r, note)) {
        schema_result_free(&r);
        return ts_fail_sys(e, "out of memory");
      }
      r.clock_passes = pass;
      *out = r;
      return 0;
    }
    previous = T;
    schema_result_free(&r);
  }
}

void sim_clock_free(sim_world *w) {
  for (int r = 0; w->ranks && r < w->world; r++)
    if (w->ranks[r]) {
      free(w->ranks[r]->clock_log);
      w->ranks[r]->clock_log = NULL;
    }
}

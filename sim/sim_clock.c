/* sim_clock.c — the clock model: a GPU whose compute stream idles often
 * (waiting on slow collectives) drops below its power cap, and its clocks,
 * and so its kernels, go up; the calibration's GEMMs were timed back to back,
 * at the cap. The calibration's clock section (schema/calibration.h) gives
 * the speed-up against the duty; the power controller reacts over a window
 * of clock_window_us, so an op's duty is the GPU's busy fraction in a window
 * of that width around it, and a rank's duty the compute-time-weighted mean
 * over its ops. Busy means a compute kernel, or a collective that moves its
 * data with the GPU's kernels at NVLink speed (sim_comm_draws_power): run 8's
 * clock log had the NVLink TP and DP plans at the 700 W cap, their compute
 * as calibrated, while through host memory NCCL's few blocks wait on PCIe
 * and the GPU boosts (sim/RESULTS.md). The speeds are those of the measured
 * period nearest the rank's busy/idle cycle (iteration over idle gaps longer
 * than CLOCK_MIN_GAP_S).
 *
 * With a "power" section in the calibration (and --clock-model power, its default then) the speeds come
 * from the power-cap model instead (below, power_of): an op's window of the same width holds GEMM time,
 * other busy time and idle time, its clock is the largest the section's fitted power allows under the cap,
 * and the clock gives the GEMM and memory-bound speeds. A GPU that never idles but runs memory-bound
 * kernels between its GEMMs sits below the cap at higher clocks, which the duty cannot see.
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
    rs->gemm_speed = rs->mem_speed = rs->prev_gemm_speed = rs->prev_mem_speed = 1.0;
    rs->clock_rep = rs;
    /* In full mode the ranks of one stage run the same program with the
     * same timeline up to small shifts: the stage's tp 0, dp 0 rank stands
     * for them (reduced mode simulates only those; programs built by the
     * caller may differ per rank, so there every rank has its own duty). */
    if (w->o->mode == SIM_MODE_FULL && !w->o->programs) {
      plan_coord c = plan_coord_of(p, r);
      c.tp = 0, c.dp = 0, c.cp = 0;
      int rep = plan_rank_of(p, c);
      if (rep >= 0 && rep < w->world && w->ranks[rep]) rs->clock_rep = w->ranks[rep];
    }
  }
  return 0;
}

static int grow_log(double **log, int *cap, int n, int stride) {
  if (n < *cap) return 0;
  int bigger_cap = *cap ? 2 * *cap : 1024;
  double *bigger = realloc(*log, sizeof *bigger * (size_t)stride * (size_t)bigger_cap);
  if (!bigger) return -1;
  *log = bigger, *cap = bigger_cap;
  return 0;
}

double sim_clock_op(sim_rank *rs, double start, double d, double gemm_s) {
  double t = d;
  if (rs->gemm_speed != 1.0 || rs->mem_speed != 1.0) t = gemm_s / rs->gemm_speed + (d - gemm_s) / rs->mem_speed;
  if (rs->clock_rep != rs || t <= 0) return t;
  if (grow_log(&rs->clock_log, &rs->cap_clock_log, rs->n_clock_log, SIM_CLOCK_LOG_STRIDE)) return -1;
  double *q = rs->clock_log + SIM_CLOCK_LOG_STRIDE * rs->n_clock_log;
  q[0] = start, q[1] = t;
  q[2] = rs->gemm_speed != 1.0 || rs->mem_speed != 1.0 ? gemm_s / rs->gemm_speed : gemm_s; /* its GEMM part */
  if (q[2] > t) q[2] = t;
  rs->n_clock_log++;
  return t;
}

int sim_clock_comm(sim_rank *rs, double start, double d) {
  if (rs->clock_rep != rs || d <= 0) return 0;
  if (grow_log(&rs->clock_comm_log, &rs->cap_clock_comm_log, rs->n_clock_comm_log, 2)) return -1;
  rs->clock_comm_log[2 * rs->n_clock_comm_log] = start;
  rs->clock_comm_log[2 * rs->n_clock_comm_log + 1] = d;
  rs->n_clock_comm_log++;
  return 0;
}

/* The GPU's busy intervals: compute ops (one stream, in start order, not
 * overlapping) and the collectives that draw power (other streams; they
 * overlap the compute ones), merged into disjoint intervals in start order. */
typedef struct {
  double *iv; /* (start, end) pairs */
  double *prefix; /* busy time before interval i; n + 1 entries */
  int n;
} busy_set;

static int by_start(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int busy_set_build(const sim_rank *rs, busy_set *b) {
  int n = rs->n_clock_log + rs->n_clock_comm_log;
  b->n = 0;
  b->iv = malloc(sizeof *b->iv * 2 * (size_t)(n > 0 ? n : 1));
  b->prefix = malloc(sizeof *b->prefix * (size_t)(n + 1));
  if (!b->iv || !b->prefix) return -1;
  for (int i = 0; i < rs->n_clock_log; i++) {
    const double *q = rs->clock_log + SIM_CLOCK_LOG_STRIDE * i;
    b->iv[2 * i] = q[0], b->iv[2 * i + 1] = q[0] + q[1];
  }
  for (int i = 0; i < rs->n_clock_comm_log; i++) {
    int k = rs->n_clock_log + i;
    b->iv[2 * k] = rs->clock_comm_log[2 * i];
    b->iv[2 * k + 1] = rs->clock_comm_log[2 * i] + rs->clock_comm_log[2 * i + 1];
  }
  if (rs->n_clock_comm_log) qsort(b->iv, (size_t)n, 2 * sizeof *b->iv, by_start);
  for (int i = 0; i < n; i++) { /* merge in place */
    if (b->n && b->iv[2 * i] <= b->iv[2 * (b->n - 1) + 1]) {
      if (b->iv[2 * i + 1] > b->iv[2 * (b->n - 1) + 1]) b->iv[2 * (b->n - 1) + 1] = b->iv[2 * i + 1];
      continue;
    }
    b->iv[2 * b->n] = b->iv[2 * i], b->iv[2 * b->n + 1] = b->iv[2 * i + 1];
    b->n++;
  }
  b->prefix[0] = 0;
  for (int i = 0; i < b->n; i++) b->prefix[i + 1] = b->prefix[i] + (b->iv[2 * i + 1] - b->iv[2 * i]);
  return 0;
}

static void busy_set_free(busy_set *b) {
  free(b->iv);
  free(b->prefix);
}

/* The last of n records (`stride` doubles each, sorted by their first, the start) that starts at or
 * before x; -1 if none does. */
static int last_start_at_or_before(const double *rec, int n, int stride, double x) {
  int lo = 0, hi = n - 1;
  if (hi < 0 || x <= rec[0]) return -1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (rec[(size_t)stride * mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

/* Busy time in [0, x] for x in [0, T]. */
static double busy_until(const busy_set *b, double x) {
  int lo = last_start_at_or_before(b->iv, b->n, 2, x);
  if (lo < 0) return 0;
  double in = x - b->iv[2 * lo], len = b->iv[2 * lo + 1] - b->iv[2 * lo];
  return b->prefix[lo] + (in < len ? in : len);
}

/* The iteration repeats: before 0 the previous one ends, after T the next
 * begins, so the busy time is extended periodically. */
static double busy_periodic(const busy_set *b, double T, double x) {
  double k = floor(x / T);
  double in = x - k * T;
  if (in > T) in = T;
  if (in < 0) in = 0;
  return k * b->prefix[b->n] + busy_until(b, in);
}

/* Idle gaps shorter than this are launch and dependency gaps: the clocks do
 * not move in them. They do not count as the ends of a busy/idle cycle. */
#define CLOCK_MIN_GAP_S 50e-6

/* The rank's duty (compute-time-weighted busy fraction of the GPU in a window
 * around each compute op) and its cycle (T over the idle gaps, the iteration's
 * wrap-around included; T when there is none). */
static void duty_of(const sim_rank *rs, double T, double window_s, double *duty, double *cycle_s) {
  *duty = 1.0, *cycle_s = T;
  int n = rs->n_clock_log;
  if (n == 0 || T <= 0) return;
  busy_set b;
  if (busy_set_build(rs, &b)) { /* no memory: no speed-up (the conservative answer) */
    busy_set_free(&b);
    return;
  }
  int gaps = 0;
  for (int i = 0; i < b.n; i++) {
    double next = i + 1 < b.n ? b.iv[2 * (i + 1)] : b.iv[0] + T;
    if (next - b.iv[2 * i + 1] > CLOCK_MIN_GAP_S) gaps++;
  }
  if (gaps) *cycle_s = T / gaps;
  double W = window_s < T ? window_s : T;
  double weighted = 0, total = 0;
  for (int i = 0; i < n; i++) {
    double start = rs->clock_log[SIM_CLOCK_LOG_STRIDE * i], d = rs->clock_log[SIM_CLOCK_LOG_STRIDE * i + 1];
    double mid = start + 0.5 * d;
    double busy = busy_periodic(&b, T, mid + 0.5 * W) - busy_periodic(&b, T, mid - 0.5 * W);
    double f = busy / W;
    if (f > 1) f = 1;
    if (f < 0) f = 0;
    weighted += d * f;
    total += d;
  }
  busy_set_free(&b);
  if (total > 0) *duty = weighted / total;
}

/* ---- the power-cap model (a "power" section; sim/README.md "The power-cap clock") ----
 * An op's window holds GEMM time (the GEMM part of the compute ops in it), other busy time (the rest of
 * the compute ops, the collectives that draw power) and idle time; the window runs at the clock its mix
 * allows under the cap (schema_power_clock), and the op's GEMM part at that clock's GEMM speed, the rest
 * at its memory-bound speed. */

/* The compute ops' GEMM time as weighted intervals in start order: gemm_until(x) is the GEMM time of the
 * ops before x, an op's GEMM part spread evenly over its duration. */
typedef struct {
  double *op; /* (start, duration, GEMM part) per op, sorted by start */
  double *prefix; /* GEMM time before op i; n + 1 entries */
  int n;
} gemm_set;

static int gemm_set_build(const sim_rank *rs, gemm_set *g) {
  int n = rs->n_clock_log;
  g->n = n;
  g->op = malloc(sizeof *g->op * SIM_CLOCK_LOG_STRIDE * (size_t)(n > 0 ? n : 1));
  g->prefix = malloc(sizeof *g->prefix * (size_t)(n + 1));
  if (!g->op || !g->prefix) return -1;
  memcpy(g->op, rs->clock_log, sizeof *g->op * SIM_CLOCK_LOG_STRIDE * (size_t)n);
  qsort(g->op, (size_t)n, SIM_CLOCK_LOG_STRIDE * sizeof *g->op, by_start);
  g->prefix[0] = 0;
  for (int i = 0; i < n; i++) g->prefix[i + 1] = g->prefix[i] + g->op[SIM_CLOCK_LOG_STRIDE * i + 2];
  return 0;
}

static void gemm_set_free(gemm_set *g) {
  free(g->op);
  free(g->prefix);
}

/* GEMM time in [0, x] for x in [0, T]. */
static double gemm_until(const gemm_set *g, double x) {
  int lo = last_start_at_or_before(g->op, g->n, SIM_CLOCK_LOG_STRIDE, x);
  if (lo < 0) return 0;
  const double *q = g->op + SIM_CLOCK_LOG_STRIDE * lo;
  double in = x - q[0];
  return g->prefix[lo] + (in < q[1] && q[1] > 0 ? q[2] * in / q[1] : q[2]);
}

/* GEMM time in [0, x] for any x, the iteration repeating (as busy_periodic). */
static double gemm_periodic(const gemm_set *g, double T, double x) {
  double k = floor(x / T);
  double in = x - k * T;
  if (in > T) in = T;
  if (in < 0) in = 0;
  return k * g->prefix[g->n] + gemm_until(g, in);
}

/* The rank's clock and next speeds under the power model: each compute op's window mix gives a clock; the
 * rank's GEMM speed is the one that keeps its GEMM time the sum of its ops' (their GEMM parts each at its
 * window's GEMM speed), its memory-bound speed likewise; *mhz is the compute-time-weighted mean clock.
 * Without ops: the back-to-back GEMM's clock and speeds 1. */
static void power_of(const sim_rank *rs, const schema_power *pw, double T, double window_s, double *mhz,
                     double *gemm_speed, double *mem_speed) {
  *mhz = pw->fit.f_gemm_model_mhz, *gemm_speed = *mem_speed = 1.0;
  int n = rs->n_clock_log;
  if (n == 0 || T <= 0) return;
  busy_set b;
  gemm_set g;
  int failed = busy_set_build(rs, &b);
  failed |= gemm_set_build(rs, &g);
  if (failed) { /* no memory: no change (the conservative answer) */
    busy_set_free(&b);
    gemm_set_free(&g);
    return;
  }
  double W = window_s < T ? window_s : T;
  double g_time = 0, g_at = 0, m_time = 0, m_at = 0, f_sum = 0, total = 0;
  for (int i = 0; i < n; i++) {
    const double *q = rs->clock_log + SIM_CLOCK_LOG_STRIDE * i;
    double mid = q[0] + 0.5 * q[1], lo = mid - 0.5 * W, hi = mid + 0.5 * W;
    double busy = (busy_periodic(&b, T, hi) - busy_periodic(&b, T, lo)) / W;
    double gemm = (gemm_periodic(&g, T, hi) - gemm_periodic(&g, T, lo)) / W;
    if (busy > 1) busy = 1;
    if (busy < 0) busy = 0;
    if (gemm > busy) gemm = busy;
    if (gemm < 0) gemm = 0;
    double f = schema_power_clock(pw, gemm, busy - gemm, 1 - busy), gs, ms;
    schema_power_speeds(pw, f, &gs, &ms);
    g_time += q[2], g_at += q[2] / gs;
    m_time += q[1] - q[2], m_at += (q[1] - q[2]) / ms;
    f_sum += q[1] * f, total += q[1];
  }
  busy_set_free(&b);
  gemm_set_free(&g);
  if (total > 0) *mhz = f_sum / total;
  double gs_mean, ms_mean; /* a class without time: the speed of the mean clock (no time runs at it) */
  schema_power_speeds(pw, *mhz, &gs_mean, &ms_mean);
  *gemm_speed = g_time > 0 && g_at > 0 ? g_time / g_at : gs_mean;
  *mem_speed = m_time > 0 && m_at > 0 ? m_time / m_at : ms_mean;
}

/* The window the clock model reads: the clock section's, else (the power model alone) SIM_POWER_WINDOW_US. */
static double window_s_of(const schema_calibration *cal) {
  return (cal->n_clock > 0 ? cal->clock_window_us : SIM_POWER_WINDOW_US) * 1e-6;
}

void sim_clock_duties(sim_world *w) {
  double window_s = window_s_of(w->o->cal);
  for (int r = 0; r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (rs && rs->clock_rep == rs) {
      double cycle_s;
      duty_of(rs, w->end_s, window_s, &rs->clock_duty, &cycle_s);
      rs->clock_cycle_us = cycle_s * 1e6;
      if (w->clock_power)
        power_of(rs, &w->o->cal->power, w->end_s, window_s, &rs->clock_mhz, &rs->clock_next_gemm_speed,
                 &rs->clock_next_mem_speed);
    }
  }
}

const char *sim_clock_model_name(sim_clock_model m) {
  switch (m) {
  case SIM_CLOCK_MODEL_POWER: return "power";
  case SIM_CLOCK_MODEL_DUTY: return "duty";
  case SIM_CLOCK_MODEL_OFF: return "off";
  default: return "auto";
  }
}

int sim_clock_model_parse(const char *name, sim_clock_model *m) {
  static const sim_clock_model all[] = {SIM_CLOCK_MODEL_POWER, SIM_CLOCK_MODEL_DUTY, SIM_CLOCK_MODEL_OFF};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(name, sim_clock_model_name(all[i])) == 0) {
      *m = all[i];
      return 0;
    }
  return -1;
}

int sim_clock_model_resolve(const sim_options *o, sim_clock_model *m, ts_err *e) {
  const schema_calibration *cal = o->cal;
  sim_clock_model asked = o->clock_off ? SIM_CLOCK_MODEL_OFF : o->clock_model;
  if (asked == SIM_CLOCK_MODEL_AUTO)
    asked = cal->power.n > 0 && cal->power.fit.fitted ? SIM_CLOCK_MODEL_POWER
            : cal->n_clock > 0                          ? SIM_CLOCK_MODEL_DUTY
                                                        : SIM_CLOCK_MODEL_OFF;
  if (asked == SIM_CLOCK_MODEL_POWER && !(cal->power.n > 0 && cal->power.fit.fitted))
    return ts_fail(e, cal->path[0] ? cal->path : "calibration", "power",
                   "--clock-model power: the calibration has no fitted power section (calibration/merge_power.py "
                   "adds one; a transfer to another GPU drops it)");
  if (asked == SIM_CLOCK_MODEL_DUTY && cal->n_clock == 0) asked = SIM_CLOCK_MODEL_OFF; /* nothing to read */
  *m = asked;
  return 0;
}

/* How much a speed moves now against how much it moved in the step before. */
static double step_ratio(double next, double now, double before) {
  double d_next = fabs(next - now), d_now = fabs(now - before);
  if (d_next == 0) return 0;
  return d_now > 0 ? d_next / d_now : INFINITY;
}

/* Each rank's speeds from the duty of its clock_rep in the last simulation;
 * returns whether any changed (if none did, the next one would repeat it).
 * *ratio: the largest step_ratio over the ranks' speeds. */
static int set_speeds(sim_world *w, const schema_result *r, double *ratio) {
  int changed = 0;
  *ratio = 0;
  for (int i = 0; i < r->n_ranks; i++) {
    int rank = r->ranks[i].rank;
    sim_rank *rs = rank >= 0 && rank < w->world ? w->ranks[rank] : NULL;
    if (!rs) continue;
    double g, m;
    if (w->clock_power)
      g = r->ranks[i].clock_next_gemm_speed, m = r->ranks[i].clock_next_mem_speed;
    else
      schema_clock_speed(w->o->cal, r->ranks[i].clock_duty, r->ranks[i].clock_cycle_us, &g, &m);
    if (!(g > 0) || !(m > 0)) g = m = 1.0; /* a section built in memory without the loader's checks */
    if (g != rs->gemm_speed || m != rs->mem_speed) changed = 1;
    double rg = step_ratio(g, rs->gemm_speed, rs->prev_gemm_speed), rm = step_ratio(m, rs->mem_speed, rs->prev_mem_speed);
    if (rg > *ratio) *ratio = rg;
    if (rm > *ratio) *ratio = rm;
    rs->prev_gemm_speed = rs->gemm_speed, rs->prev_mem_speed = rs->mem_speed;
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
    if (!settled && pass < CLOCK_MAX_PASSES) {
      double ratio;
      if (!set_speeds(w, &r, &ratio)) settled = 1;
      /* The same bound from the speeds, one simulation earlier: the iteration
       * time falls with every rank's speed, so (to first order) the next
       * simulation moves it by at most ratio x the last move, ratio the
       * largest step of any rank's speed over its step before. */
      else if (pass > 1 && ratio < 1 && fabs(change) * ratio / (1 - ratio) < CLOCK_TOLERANCE * T)
        settled = 1;
    }
    if (settled || pass == CLOCK_MAX_PASSES) {
      char note[384];
      if (w->clock_power)
        snprintf(note, sizeof note,
                 "clock model (power): compute at the clocks each %g us window's mix of GEMM, other and idle time "
                 "allows under the %g W cap (the calibration's power section, fitted); %d simulations (%s s)%s; "
                 "--clock-model duty or off for the others",
                 window_s_of(cal) * 1e6, cal->power.cap_w, pass, times, settled ? "" : ", not settled to 0.1%");
      else
        snprintf(note, sizeof note,
                 "clock model: compute at the speeds of the GPU's duty over %g us windows (the measured period "
                 "nearest each rank's busy/idle cycle); %d simulations (%s s)%s; --clock off for calibrated times",
                 cal->clock_window_us, pass, times, settled ? "" : ", not settled to 0.1%");
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
      free(w->ranks[r]->clock_comm_log);
      w->ranks[r]->clock_log = w->ranks[r]->clock_comm_log = NULL;
    }
}

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

static int grow_log(double **log, int *cap, int n) {
  if (n < *cap) return 0;
  int bigger_cap = *cap ? 2 * *cap : 1024;
  double *bigger = realloc(*log, sizeof *bigger * 2 * (size_t)bigger_cap);
  if (!bigger) return -1;
  *log = bigger, *cap = bigger_cap;
  return 0;
}

double sim_clock_op(sim_rank *rs, double start, double d, double gemm_s) {
  double t = d;
  if (rs->gemm_speed != 1.0 || rs->mem_speed != 1.0) t = gemm_s / rs->gemm_speed + (d - gemm_s) / rs->mem_speed;
  if (rs->clock_rep != rs || t <= 0) return t;
  if (grow_log(&rs->clock_log, &rs->cap_clock_log, rs->n_clock_log)) return -1;
  rs->clock_log[2 * rs->n_clock_log] = start;
  rs->clock_log[2 * rs->n_clock_log + 1] = t;
  rs->n_clock_log++;
  return t;
}

int sim_clock_comm(sim_rank *rs, double start, double d) {
  if (rs->clock_rep != rs || d <= 0) return 0;
  if (grow_log(&rs->clock_comm_log, &rs->cap_clock_comm_log, rs->n_clock_comm_log)) return -1;
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
  for (int i = 0; i < rs->n_clock_log; i++)
    b->iv[2 * i] = rs->clock_log[2 * i], b->iv[2 * i + 1] = rs->clock_log[2 * i] + rs->clock_log[2 * i + 1];
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

/* Busy time in [0, x] for x in [0, T]. */
static double busy_until(const busy_set *b, double x) {
  int lo = 0, hi = b->n - 1;
  if (hi < 0 || x <= b->iv[0]) return 0;
  while (lo < hi) { /* last interval starting at or before x */
    int mid = (lo + hi + 1) / 2;
    if (b->iv[2 * mid] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
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
    double start = rs->clock_log[2 * i], d = rs->clock_log[2 * i + 1];
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

void sim_clock_duties(sim_world *w) {
  double window_s = w->o->cal->clock_window_us * 1e-6;
  for (int r = 0; r < w->world; r++) {
    sim_rank *rs = w->ranks[r];
    if (rs && rs->clock_rep == rs) {
      double cycle_s;
      duty_of(rs, w->end_s, window_s, &rs->clock_duty, &cycle_s);
      rs->clock_cycle_us = cycle_s * 1e6;
    }
  }
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

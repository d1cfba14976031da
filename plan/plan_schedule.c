/* plan_schedule.c — the order in which a pipeline stage runs the forward and
 * backward steps of the micro-batches through its model chunks.
 *
 * GPipe: every forward, then every backward (micro-batch order).
 * 1F1B (PipeDream-Flush, Megatron-LM's default): stage s runs pp - s - 1
 * warm-up forwards, then alternates one forward and one backward, then
 * drains the remaining backwards.
 * Interleaved 1F1B (Narayanan et al., SC'21): each stage holds vpp chunks;
 * micro-batches advance through the chunks in groups of pp, with
 * (pp - s - 1) * 2 + (vpp - 1) * pp warm-up forwards (all of them when
 * micro-batches == pp), exactly as Megatron-LM's schedules.py orders them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

int plan_schedule_length(const plan *p) { return 2 * plan_micro_batches(p) * p->vpp; }

/* Interleaved: the k-th forward (or backward) step's micro-batch and chunk. */
static plan_step interleaved_step(const plan *p, int k, int backward) {
  int group = p->pp * p->vpp;
  int in_group = k % group;
  int chunk = in_group / p->pp;
  if (backward) chunk = p->vpp - 1 - chunk;
  plan_step s = {.micro = (k / group) * p->pp + in_group % p->pp, .chunk = (int16_t)chunk,
                 .backward = (int8_t)backward};
  return s;
}

int plan_warmup_steps(const plan *p, int stage) {
  int m = plan_micro_batches(p);
  int total = m * p->vpp;
  int w;
  switch (p->schedule) {
  case PLAN_SCHED_GPIPE: return total;
  case PLAN_SCHED_1F1B: w = p->pp - stage - 1; break;
  default:
    if (m == p->pp) return total;
    w = (p->pp - stage - 1) * 2 + (p->vpp - 1) * p->pp;
    break;
  }
  return w < total ? w : total;
}

int plan_pipeline_schedule(const plan *p, int stage, plan_step *steps, int cap) {
  int n = plan_schedule_length(p);
  if (stage < 0 || stage >= p->pp || cap < n || n <= 0) return -1;
  int total = n / 2, warm = plan_warmup_steps(p, stage), k = 0;
  bool interleaved = p->schedule == PLAN_SCHED_INTERLEAVED_1F1B;
  int next_f = 0, next_b = 0;
#define PUSH(KIND)                                                                               \
  do {                                                                                           \
    int idx_ = (KIND) ? next_b++ : next_f++;                                                     \
    steps[k++] = interleaved ? interleaved_step(p, idx_, (KIND))                                 \
                             : (plan_step){.micro = idx_, .chunk = 0, .backward = (int8_t)(KIND)}; \
  } while (0)
  for (int i = 0; i < warm; i++) PUSH(0);
  for (int i = 0; i < total - warm; i++) {
    PUSH(0);
    PUSH(1);
  }
  while (next_b < total) PUSH(1);
#undef PUSH
  return k;
}

int plan_inflight_peak(const plan *p, int stage) {
  int total = plan_micro_batches(p) * p->vpp;
  if (p->schedule == PLAN_SCHED_GPIPE) return total;
  int w = plan_warmup_steps(p, stage);
  return w + 1 < total ? w + 1 : total;
}

static int step_chunk(const plan *p, int k, int backward) {
  return p->schedule == PLAN_SCHED_INTERLEAVED_1F1B ? interleaved_step(p, k, backward).chunk : 0;
}

/* The order of plan_pipeline_schedule, without building it: the warm-up
 * forwards, forward-backward pairs, then the remaining backwards (which only
 * free). Held bytes peak right after a forward. */
double plan_held_peak(const plan *p, int stage, const double *held) {
  const int total = plan_micro_batches(p) * p->vpp, warm = plan_warmup_steps(p, stage);
  bool equal = true; /* equal chunks: the in-flight peak, without the walk (the layout search asks often) */
  for (int c = 1; c < p->vpp && equal; c++) equal = held[c] == held[0];
  if (equal) return held[0] * plan_inflight_peak(p, stage);
  double now = 0.0, peak = 0.0;
  int nf = 0, nb = 0;
  if (p->schedule != PLAN_SCHED_INTERLEAVED_1F1B) {
    while (nf < total) {
      now += held[step_chunk(p, nf++, 0)];
      if (now > peak) peak = now;
      if (nf > warm) now -= held[step_chunk(p, nb++, 1)];
    }
    return peak;
  }
  /* Interleaved: the same walk, the same sums in the same order, with each
   * step's chunk (interleaved_step: (k mod pp vpp) / pp, reversed for a
   * backward) kept by counters instead of divisions; the search asks for
   * this walk for every layout with unequal chunks (test_plan_program
   * compares it with the schedule's own steps).
   *
   * After the warm-up the walk repeats with period P = pp vpp forwards: the
   * value after the forward of count n + P adds P more forwards and takes P
   * more backwards, each chunk pp times in both, so it equals the value
   * after count n in exact arithmetic. When every chunk holds a whole number
   * of bytes and no sum can pass 2^53, every addition and subtraction below
   * is exact, so every period after the first repeats it to the bit and the
   * walk stops after it (the layout search's chunks hold whole bytes). */
  int end = total;
  double most = 0.0;
  bool whole = true;
  for (int c = 0; c < p->vpp && whole; c++) {
    whole = held[c] == floor(held[c]) && fabs(held[c]) <= 0x1p53;
    if (fabs(held[c]) > most) most = fabs(held[c]);
  }
  if (whole && most * total <= 0x1p53 && (long long)warm + (long long)p->pp * p->vpp < total)
    end = warm + p->pp * p->vpp;
  int f_in = 0, f_chunk = 0, b_in = 0, b_chunk = 0;
  while (nf < end) {
    now += held[f_chunk];
    nf++;
    if (++f_in == p->pp) f_in = 0, f_chunk = f_chunk + 1 == p->vpp ? 0 : f_chunk + 1;
    if (now > peak) peak = now;
    if (nf > warm) {
      now -= held[p->vpp - 1 - b_chunk];
      nb++;
      if (++b_in == p->pp) b_in = 0, b_chunk = b_chunk + 1 == p->vpp ? 0 : b_chunk + 1;
    }
  }
  return peak;
}

/* ---- the ideal pipeline, used to order PP messages ---- */

int64_t plan_ideal_step_cost(int backward) { return backward ? 2 : 1; }

void plan_ideal_free(plan_ideal *t) {
  free(t->fwd_finish);
  free(t->bwd_finish);
  memset(t, 0, sizeof *t);
}

/* List-schedules every stage's steps with unit costs: a forward of virtual
 * stage v waits for v - 1's forward of the same micro-batch, a backward for
 * v + 1's backward. The finish times give one global order of all pipeline
 * messages that each stage's own order respects. */
int plan_ideal_build(const plan *p, plan_ideal *t, ts_err *e) {
  memset(t, 0, sizeof *t);
  t->m = plan_micro_batches(p);
  t->V = p->pp * p->vpp;
  int len = plan_schedule_length(p);
  size_t cells = (size_t)t->m * t->V;
  t->fwd_finish = malloc(cells * sizeof *t->fwd_finish);
  t->bwd_finish = malloc(cells * sizeof *t->bwd_finish);
  plan_step *steps = malloc((size_t)p->pp * len * sizeof *steps);
  int *next = calloc((size_t)p->pp, sizeof *next);
  int64_t *free_at = calloc((size_t)p->pp, sizeof *free_at);
  if (!t->fwd_finish || !t->bwd_finish || !steps || !next || !free_at) {
    free(steps), free(next), free(free_at), plan_ideal_free(t);
    return ts_fail_sys(e, "plan: out of memory for the pipeline schedule");
  }
  for (size_t i = 0; i < cells; i++) t->fwd_finish[i] = t->bwd_finish[i] = -1;
  for (int s = 0; s < p->pp; s++) plan_pipeline_schedule(p, s, steps + (size_t)s * len, len);
  int done = 0, total = p->pp * len;
  while (done < total) {
    int progressed = 0;
    for (int s = 0; s < p->pp; s++) {
      while (next[s] < len) {
        plan_step st = steps[(size_t)s * len + next[s]];
        int v = plan_virtual_stage(p, s, st.chunk);
        size_t cell = (size_t)st.micro * t->V + v;
        int64_t ready;
        if (!st.backward)
          ready = v == 0 ? 0 : t->fwd_finish[cell - 1];
        else
          ready = v == t->V - 1 ? t->fwd_finish[cell] : t->bwd_finish[cell + 1];
        if (ready < 0) break;
        int64_t start = ready > free_at[s] ? ready : free_at[s];
        free_at[s] = start + plan_ideal_step_cost(st.backward);
        (st.backward ? t->bwd_finish : t->fwd_finish)[cell] = free_at[s];
        next[s]++;
        done++;
        progressed = 1;
      }
    }
    if (!progressed) {
      free(steps), free(next), free(free_at), plan_ideal_free(t);
      return ts_fail_sys(e, "plan: the pipeline schedule deadlocks (internal error)");
    }
  }
  free(steps), free(next), free(free_at);
  return 0;
}

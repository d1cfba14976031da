/* search_rounds.c — the search's simulations, in rounds, skipping those that
 * cannot reach the printed rows, spread over MPI processes when there are
 * several.
 *
 * Each candidate gets a bound (search_bound.c): its simulation cannot give
 * more tokens/s, computed when first needed. Candidates run best estimate
 * first: in one process each is
 * checked when a worker frees up; under MPI in rounds of o->jobs per process,
 * checked before each round. A candidate whose bound is below the top-th
 * best simulated figure so far is dropped: at least `top` candidates beat it
 * for certain, so it would not be printed. The printed rows are therefore
 * those of the exhaustive search (`--exhaustive` simulates everything). The
 * uncompressed run of a layout with a printed compressed row is simulated in
 * the end if it was dropped, for that row's speedup. With several FP8 recipes
 * (--fp8 search) a candidate is dropped only when `top` candidates beat it
 * and so does the best simulated one of its own recipe: the printed rows and
 * each recipe's best layout are the exhaustive search's (what FP8 buys is
 * measured between simulated bests). With one recipe that is the rule above. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "search.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* One simulation's headline figures, as the processes exchange them. */
typedef struct {
  int ok;
  double iteration_s, tokens_per_s, tflops_per_gpu, mfu, memory_bytes;
  double cpu_s;     /* the worker's CPU seconds */
  int clock_passes; /* the clock model's simulations */
  schema_breakdown breakdown;
  char error[200];
} sim_out;

enum { PENDING, DONE, PRUNED };

typedef struct {
  const plan *plans;
  sim_search_candidate *cands;
  const schema_calibration *cal;
  const sim_search_options *o;
  int n, done_count;
  void (*progress)(int done, int total, void *arg);
  void *arg;
  unsigned char *bounded; /* bound computed (or tried) */
  double bound_s;
} rounds;

/* Candidate i's bound, computed the first time it is needed (a second or so
 * for a long pipeline: only candidates reached once `top` results are in pay it). */
static double bound_of(rounds *R, int i) {
  sim_search_candidate *k = &R->cands[i];
  if (!R->bounded[i]) {
    double t0 = now_s(), lower;
    ts_err sub = {0};
    R->bounded[i] = 1;
    k->bound_tokens_per_s = 0; /* unknown: always simulated (its failure is then reported) */
    if (!k->sample && sim_search_bound_plan(&R->plans[i], R->cal, &lower, &sub) == 0 && lower > 0)
      /* (a millionth above: the replay sums the same times in another order than the simulation) */
      k->bound_tokens_per_s = (double)R->plans[i].global_batch * R->plans[i].seq / lower * (1 + 1e-6);
    R->bound_s += now_s() - t0;
  }
  return k->bound_tokens_per_s;
}

#define ANY_FP8 (-1)
static double threshold(const sim_search_candidate *c, int n, int top, int fp8);

/* Whether candidate i can reach neither the printed rows nor its FP8 recipe's best. */
static bool below(rounds *R, int i, int top) {
  double t = threshold(R->cands, R->n, top, ANY_FP8), own = threshold(R->cands, R->n, 1, R->cands[i].layout.fp8);
  if (R->cands[i].sample || t <= 0 || own <= 0) return false;
  double b = bound_of(R, i);
  return b > 0 && b < t && b < own;
}

static void store(sim_search_candidate *k, const sim_out *m) {
  k->simulated = m->ok;
  k->sim_failed = !m->ok;
  k->sim_cpu_s = m->cpu_s;
  k->sim_clock_passes = m->clock_passes;
  if (!m->ok) {
    snprintf(k->error, sizeof k->error, "%.199s", m->error);
    return;
  }
  k->sim_iteration_s = m->iteration_s;
  k->sim_tokens_per_s = m->tokens_per_s;
  k->sim_tflops_per_gpu = m->tflops_per_gpu;
  k->sim_mfu = m->mfu;
  k->sim_breakdown = m->breakdown;
  if (m->memory_bytes > 0) k->memory_bytes = m->memory_bytes;
}

static void pack(sim_out *m, const schema_result *r, bool ok, const char *error, double cpu_s) {
  memset(m, 0, sizeof *m);
  m->ok = ok;
  m->cpu_s = cpu_s;
  if (!ok) {
    snprintf(m->error, sizeof m->error, "%s", error);
    return;
  }
  m->iteration_s = r->iteration_time_s;
  m->tokens_per_s = r->tokens_per_s;
  m->tflops_per_gpu = r->tflops_per_gpu;
  m->mfu = r->mfu;
  m->memory_bytes = r->memory_per_gpu_bytes;
  m->breakdown = r->breakdown;
  m->clock_passes = r->clock_passes;
}

/* Simulates cands[batch[j]], j < m: process p takes j = p, p + size, ...;
 * then every process gets every result. */
static int run_batch(rounds *R, const int *batch, int m, ts_err *e) {
  int size = sim_search_mpi_size(), me = sim_search_mpi_rank();
  int per = (m + size - 1) / size, mine = 0;
  int *index = calloc((size_t)(per ? per : 1), sizeof *index);
  schema_result *res = calloc((size_t)(per ? per : 1), sizeof *res);
  bool *ok = calloc((size_t)(per ? per : 1), sizeof *ok);
  char(*errors)[200] = calloc((size_t)(per ? per : 1), sizeof *errors);
  sim_out *out = calloc((size_t)(per ? per : 1), sizeof *out), *all = calloc((size_t)per * size + 1, sizeof *all);
  double *cpu = calloc((size_t)(per ? per : 1), sizeof *cpu);
  int rc = -1;
  if (!index || !res || !ok || !errors || !out || !all || !cpu) {
    ts_fail_sys(e, "search: out of memory");
    goto done;
  }
  for (int j = me; j < m; j += size) index[mine++] = batch[j];
  /* A process that cannot run its share (fork, pipe) still takes part in the
   * gather, its candidates failed with the reason: the others would wait forever. */
  ts_err sub = {0};
  sim_search_hooks h = {.cpu_s = cpu};
  if (mine && sim_search_simulate_indexed(R->plans, index, mine, R->cal, R->o->jobs, res, ok, errors, &h, &sub))
    for (int x = 0; x < mine; x++) {
      ok[x] = false;
      snprintf(errors[x], sizeof errors[x], "%.199s", sub.msg);
    }
  for (int x = 0; x < mine; x++) pack(&out[x], &res[x], ok[x], errors[x], cpu[x]);
  if (sim_search_mpi_allgather(out, all, sizeof *out * (size_t)per, e)) goto done;
  for (int j = 0; j < m; j++) store(&R->cands[batch[j]], &all[(size_t)(j % size) * per + j / size]);
  R->done_count += m;
  if (R->progress) R->progress(R->done_count, R->n, R->arg);
  rc = 0;
done:
  free(index);
  free(res); /* headline results only: nothing inside to free */
  free(ok);
  free(errors);
  free(out);
  free(all);
  free(cpu);
  return rc;
}

/* The top-th best simulated tokens/s of the printed (non-sample) candidates under FP8 recipe fp8 (ANY_FP8:
 * all); 0 while fewer ran. */
static double threshold(const sim_search_candidate *c, int n, int top, int fp8) {
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  if (!v) return 0; /* no pruning: the exhaustive answer */
  int m = 0;
  for (int i = 0; i < n; i++)
    if (c[i].simulated && !c[i].sample && (fp8 == ANY_FP8 || c[i].layout.fp8 == fp8)) v[m++] = c[i].sim_tokens_per_s;
  double t = 0;
  if (m >= top) { /* partial selection of the top-th largest */
    for (int a = 0; a < top; a++)
      for (int b = a + 1; b < m; b++)
        if (v[b] > v[a]) {
          double x = v[a];
          v[a] = v[b];
          v[b] = x;
        }
    t = v[top - 1];
  }
  free(v);
  return t;
}

/* One process: the workers take the candidates in order as they free up,
 * each checked against the threshold of the results in so far. */
typedef struct {
  rounds *R;
  int *order; /* (promote_long_layout moves the entries not started yet) */
  unsigned char *state;
  int top;
  schema_result *res;
  bool *ok;
  char (*errors)[200];
  double *cpu;
} dynamic;

/* Whether candidate i is a layout whose simulation has shown itself long: a sibling (the same layout under
 * another codec policy) finished, having taken more than twice the mean CPU of the simulations finished. */
static bool long_layout(const rounds *R, int i) {
  const sim_search_candidate *c = R->cands;
  double sum = 0, longest = 0;
  int n = 0;
  for (int j = 0; j < R->n; j++) {
    if (c[j].sim_cpu_s <= 0) continue; /* not finished (or pruned) */
    sum += c[j].sim_cpu_s, n++;
    if (!c[j].sample && !c[i].sample && sim_search_same_layout(&c[j].layout, &c[i].layout) && c[j].sim_cpu_s > longest)
      longest = c[j].sim_cpu_s;
  }
  return n > 0 && longest > 2 * sum / n;
}

/* The candidates go in estimate order, except that the remaining siblings of a long layout go first, in
 * their own estimate order: started late, each would end the search on one worker while the others idle
 * (Llama-3 405B on 16,384 GPUs: a CP 4 layout's four simulations, each 4-5 times the others' CPU, were
 * 9th, 13th, 17th and 23rd of 24). The order changes only when they start: each is still checked against
 * the bound below, so the printed rows stay the exhaustive search's. */
static void promote_long_layout(dynamic *d, int pos) {
  int *order = d->order;
  for (int q = pos; q < d->R->n; q++) {
    if (d->state[order[q]] != PENDING || !long_layout(d->R, order[q])) continue;
    int i = order[q];
    memmove(order + pos + 1, order + pos, sizeof *order * (size_t)(q - pos));
    order[pos] = i;
    return;
  }
}

static bool dynamic_skip(int pos, void *arg) {
  dynamic *d = arg;
  promote_long_layout(d, pos);
  int i = d->order[pos];
  if (below(d->R, i, d->top)) {
    d->state[i] = PRUNED;
    return true;
  }
  d->state[i] = DONE;
  return false;
}

static void dynamic_finished(int pos, void *arg) {
  dynamic *d = arg;
  sim_out m;
  pack(&m, &d->res[pos], d->ok[pos], d->errors[pos], d->cpu[pos]);
  store(&d->R->cands[d->order[pos]], &m);
  d->R->done_count++;
  if (d->R->progress) d->R->progress(d->R->done_count, d->R->n, d->R->arg);
}

static int run_dynamic(rounds *R, int *order, unsigned char *state, int top, ts_err *e) {
  int n = R->n;
  schema_result *res = calloc((size_t)(n ? n : 1), sizeof *res);
  bool *ok = calloc((size_t)(n ? n : 1), sizeof *ok);
  char(*errors)[200] = calloc((size_t)(n ? n : 1), sizeof *errors);
  double *cpu = calloc((size_t)(n ? n : 1), sizeof *cpu);
  int rc = -1;
  if (!res || !ok || !errors || !cpu)
    ts_fail_sys(e, "search: out of memory");
  else {
    dynamic d = {R, order, state, top, res, ok, errors, cpu};
    sim_search_hooks h = {.skip = dynamic_skip, .finished = dynamic_finished, .arg = &d, .cpu_s = cpu};
    rc = sim_search_simulate_indexed(R->plans, order, n, R->cal, R->o->jobs, res, ok, errors, &h, e);
  }
  free(res);
  free(ok);
  free(errors);
  free(cpu);
  return rc;
}

static const sim_search_candidate *sort_base;
static int by_estimate(const void *a, const void *b) { /* best estimate first (samples too: never dropped) */
  double x = sort_base[*(const int *)a].est.tokens_per_s, y = sort_base[*(const int *)b].est.tokens_per_s;
  if (x != y) return x < y ? 1 : -1;
  return *(const int *)a - *(const int *)b;
}

int sim_search_run_candidates(const plan *plans, sim_search_candidate *cands, int n, const schema_calibration *cal,
                              const sim_search_options *o, sim_search_result *r,
                              void (*progress)(int done, int total, void *arg), void *arg, ts_err *e) {
  rounds R = {.plans = plans, .cands = cands, .cal = cal, .o = o, .n = n, .progress = progress, .arg = arg};
  int top = o->top > 0 ? o->top : 10, size = sim_search_mpi_size();
  int *order = malloc(sizeof(int) * (size_t)(n ? n : 1)), *batch = malloc(sizeof(int) * (size_t)(n ? n : 1));
  unsigned char *state = calloc((size_t)(n ? n : 1), 1), *state_bounded = calloc((size_t)(n ? n : 1), 1);
  int rc = -1;
  if (!order || !batch || !state || !state_bounded) {
    ts_fail_sys(e, "search: out of memory");
    goto done;
  }
  for (int i = 0; i < n; i++) order[i] = i;
  r->processes = size;
  R.bounded = state_bounded;
  if (o->bounds_all) /* (tests: every bound, to hold them against the simulations) */
    for (int i = 0; i < n; i++) bound_of(&R, i);
  if (o->exhaustive) { /* one round of everything, longest first as given */
    if (run_batch(&R, order, n, e)) goto done;
    r->simulations = n;
    r->bound_s = R.bound_s;
    rc = 0;
    goto totals;
  }
  /* the best estimates first: their figures raise the threshold soonest */
  sort_base = cands;
  qsort(order, (size_t)n, sizeof *order, by_estimate);
  int per_round = (o->jobs > 0 ? o->jobs : 1) * size;
  if (size == 1 && run_dynamic(&R, order, state, top, e)) goto done;
  for (; size > 1;) { /* several processes: rounds, each spread over them */
    int m = 0;
    for (int x = 0; x < n; x++) {
      int i = order[x];
      if (state[i] != PENDING) continue;
      if (below(&R, i, top)) {
        state[i] = PRUNED;
        continue;
      }
      if (m < per_round) batch[m++] = i;
    }
    if (m == 0) break;
    for (int j = 0; j < m; j++) state[batch[j]] = DONE;
    if (run_batch(&R, batch, m, e)) goto done;
  }
  /* the uncompressed run of each layout whose compressed row is printed, if dropped */
  int m = 0;
  for (int i = 0; i < n; i++) {
    if (!cands[i].simulated || cands[i].sample || cands[i].codec == SIM_SEARCH_CODEC_NONE ||
        (cands[i].sim_tokens_per_s < threshold(cands, n, top, ANY_FP8) &&
         cands[i].sim_tokens_per_s < threshold(cands, n, 1, cands[i].layout.fp8)))
      continue;
    for (int j = 0; j < n; j++)
      if (state[j] == PRUNED && cands[j].codec == SIM_SEARCH_CODEC_NONE && !cands[j].sample &&
          sim_search_same_layout(&cands[j].layout, &cands[i].layout)) {
        state[j] = DONE;
        batch[m++] = j;
      }
  }
  if (m && run_batch(&R, batch, m, e)) goto done;
  if (progress && R.done_count < n) progress(n, n, arg); /* the dropped ones count as done */
  r->bound_s = R.bound_s;
  r->simulations = r->pruned = 0;
  for (int i = 0; i < n; i++) {
    cands[i].pruned = state[i] == PRUNED;
    r->pruned += state[i] == PRUNED;
    r->simulations += state[i] == DONE;
  }
  rc = 0;
totals: /* what the simulations cost (each result, every process's, carries its worker's CPU) */
  r->sim_cpu_s = 0;
  r->clock_passes = 0;
  for (int i = 0; i < n; i++) {
    r->sim_cpu_s += cands[i].sim_cpu_s;
    r->clock_passes += cands[i].sim_clock_passes;
  }
done:
  free(order);
  free(batch);
  free(state);
  free(state_bounded);
  return rc;
}

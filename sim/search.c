/* search.c — the four passes of a layout search: enumerate, filter by
 * memory, rank by the closed-form estimate, simulate the best. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "search.h"
#include "sim.h"

#ifndef TACOSIM_CALIBRATION_DIR
#define TACOSIM_CALIBRATION_DIR "calibration"
#endif

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/* ---- pass 1: enumeration into an array ---- */

typedef struct {
  sim_search_layout *v;
  long n, cap;
  int oom;
} layout_list;

static void push_layout(const sim_search_layout *l, void *arg) {
  layout_list *ll = arg;
  if (ll->oom) return;
  if (ll->n == ll->cap) {
    long cap = ll->cap ? 2 * ll->cap : 1024;
    sim_search_layout *v = realloc(ll->v, (size_t)cap * sizeof *v);
    if (!v) {
      ll->oom = 1;
      return;
    }
    ll->v = v;
    ll->cap = cap;
  }
  ll->v[ll->n++] = *l;
}

/* The policies compress tensor-parallel traffic: without TP there is none
 * (the layout under "none" stands for them); CAAT-Net also excludes SP. */
static bool codec_applies(const sim_search_layout *l, sim_search_codec c) {
  if (c == SIM_SEARCH_CODEC_NONE) return true;
  if (c == SIM_SEARCH_CODEC_TACO && l->ep > 1) return true; /* MoE: TACO compresses the expert all-to-alls */
  if (l->tp < 2) return false;
  bool caat = c == SIM_SEARCH_CODEC_CAAT || c == SIM_SEARCH_CODEC_TACO_CAAT;
  return !caat || !l->sequence_parallel;
}

static int by_estimate(const void *a, const void *b) {
  const sim_search_candidate *x = a, *y = b;
  if (x->est.tokens_per_s != y->est.tokens_per_s) return x->est.tokens_per_s < y->est.tokens_per_s ? 1 : -1;
  return (int)x->codec - (int)y->codec;
}

static int by_simulation(const void *a, const void *b) {
  const sim_search_candidate *x = a, *y = b;
  double tx = x->simulated ? x->sim_tokens_per_s : -1, ty = y->simulated ? y->sim_tokens_per_s : -1;
  if (tx != ty) return tx < ty ? 1 : -1;
  return (int)x->codec - (int)y->codec;
}

bool sim_search_same_layout(const sim_search_layout *a, const sim_search_layout *b) {
  return a->tp == b->tp && a->pp == b->pp && a->vpp == b->vpp && a->dp == b->dp && a->micro == b->micro &&
         a->sequence_parallel == b->sequence_parallel && a->zero1 == b->zero1 && a->recompute == b->recompute &&
         (a->ep > 1 ? a->ep : 1) == (b->ep > 1 ? b->ep : 1) && (a->cp > 1 ? a->cp : 1) == (b->cp > 1 ? b->cp : 1) &&
         a->zero_stage == b->zero_stage && a->overlap_param_gather == b->overlap_param_gather &&
         a->tp_comm_overlap == b->tp_comm_overlap && a->account == b->account && a->fp8 == b->fp8;
}

/* Relative cost of simulating a plan (reduced mode: one rank per stage). */
static double sim_cost(const plan *p) {
  return (double)plan_micro_batches(p) * p->layers * (p->recompute == MODEL_RECOMPUTE_FULL ? 1.5 : 1.0);
}

/* ---- progress on a terminal ---- */

typedef struct {
  bool on;
  double t0;
} progress_state;

static void progress_bar(int done, int total, void *arg) {
  progress_state *ps = arg;
  if (!ps->on) return;
  int width = 30, fill = total ? done * width / total : width;
  fprintf(stderr, "\rsimulating [%.*s%*s] %d/%d  %.1f s", fill, "##############################", width - fill, "",
          done, total, now_s() - ps->t0);
  if (done == total) fputc('\n', stderr);
  fflush(stderr);
}

/* The settings a search runs with, checked against the model and cluster. */
static int resolve(const sim_search_options *o, const plan *base, sim_search_result *r, ts_err *e) {
  int total = topo_total_gpus(&base->cluster);
  r->gpus = o->gpus ? o->gpus : total;
  r->hbm_gib = base->cluster.gpu.hbm_gib;
  if (r->gpus < 1 || r->gpus > total)
    return ts_fail(e, "search", "--gpus", "%d is not between 1 and the %d GPUs of %s", o->gpus, total,
                   base->cluster.name);
  r->seq = o->seq ? o->seq : (base->model.max_seq < 2048 ? base->model.max_seq : 2048);
  if (r->seq < 1 || r->seq > base->model.max_seq)
    return ts_fail(e, "search", "--seq", "%d is not between 1 and the maximum sequence %d of %s", o->seq,
                   base->model.max_seq, base->model.name);
  r->global_batch = o->global_batch ? o->global_batch : 2LL * r->gpus; /* every dp divides it */
  if (r->global_batch < 1) return ts_fail(e, "search", "--global-batch", "must be at least 1");
  return 0;
}

/* What the passes of one search share. */
typedef struct {
  const sim_search_options *o;
  sim_search_result *r;
  const plan *base;
  const schema_calibration *cal;
  unsigned fp8;                /* the FP8 recipes tried (mask of 1 << plan_fp8_recipe; PLAN_FP8_OFF: BF16) */
  int n_fp8;                   /* how many */
  layout_list ll;              /* pass 1: every layout */
  sim_search_candidate *cands; /* passes 2, 3: the layouts that fit, under each policy, best estimate first */
  long n_cands;
  plan *plans; /* pass 4: the plans simulated, in the order of r->cands */
} search_state;

/* What the memory filter and the estimate counted over a range of layouts. */
typedef struct {
  long over_memory, invalid, fits, dominated, n; /* n: candidates written */
  double least_over_bytes;                       /* the least memory of the layouts over the HBM (0: none) */
  sim_search_layout least_over;
} estimate_tally;

/* Keeps in t the layout over the HBM that needs the least memory (what "no layout fits" names). */
static void note_over(estimate_tally *t, const sim_search_layout *l, double bytes) {
  if (!isfinite(bytes) || (t->least_over_bytes > 0 && bytes >= t->least_over_bytes)) return;
  t->least_over_bytes = bytes;
  t->least_over = *l;
}

/* One layout under its recipe (estimate_range): memory (the recipe's FP8 weight copies and saved inputs
 * are in plan_memory_per_gpu, plan_memory.c), validity, then each codec policy's estimate. *fits: whether
 * it fit and validated. */
static int estimate_layout(const search_state *s, const sim_search_layout *l, sim_search_candidate *out,
                           estimate_tally *t, bool *fits, ts_err *e) {
  const sim_search_options *o = s->o;
  const sim_search_result *r = s->r;
  static plan p;
  ts_err sub;
  if (sim_search_make_plan(s->base, l, r->seq, r->global_batch, &p, e)) return -1;
  double mem;
  double reserve = (o->headroom_gib + o->headroom_fraction * p.cluster.gpu.hbm_gib) * 1073741824.0;
  if (!sim_search_fits_memory_reserve(&p, reserve, &mem)) {
    t->over_memory++;
    note_over(t, l, mem);
    return 0;
  }
  if (plan_validate(&p, &sub)) {
    t->invalid++;
    return 0;
  }
  t->fits++;
  *fits = true;
  if (o->memory_only) return 0;
  for (int c = 0; c < SIM_SEARCH_CODEC_COUNT; c++) {
    if (!(o->codecs & (1u << c)) || !codec_applies(l, (sim_search_codec)c)) continue;
    sim_search_apply_codec(&p, (sim_search_codec)c);
    sim_search_candidate *k = &out[t->n];
    memset(k, 0, sizeof *k);
    k->layout = *l;
    k->codec = (sim_search_codec)c;
    k->memory_bytes = mem;
    if (plan_validate(&p, &sub) || sim_search_estimate_plan(&p, s->cal, &k->est, &sub)) {
      t->invalid++;
      continue;
    }
    t->n++;
  }
  return 0;
}

/* Passes 2 and 3 over layouts [lo, hi): each layout under each FP8 recipe tried (estimate_layout); the
 * candidates go to out[t->n], out[t->n + 1] ... (t counts on from what it holds), in layout, recipe, then
 * policy order; t counts layout x recipe pairs. lo must not be a ZeRO-2/3 layout (its stage below would
 * be in the range before). */
static int estimate_range(const search_state *s, long lo, long hi, sim_search_candidate *out, estimate_tally *t,
                          ts_err *e) {
  const layout_list *ll = &s->ll;
  bool below_fits[SIM_SEARCH_FP8_RECIPES] = {false}; /* per recipe: the layout just before (one sharding stage lower) fit */
  for (long i = lo; i < hi; i++)
    for (int f = 0; f < SIM_SEARCH_FP8_RECIPES; f++) {
      if (!(s->fp8 & (1u << f))) continue;
      /* ZeRO-2 and ZeRO-3 add communication to ZeRO-1's programs and save only memory: tried only where
       * the stage below does not fit under the same recipe (the enumeration lists a layout's stages
       * consecutively, lowest first) */
      sim_search_layout l = ll->v[i];
      l.fp8 = f;
      bool skip = l.zero_stage >= 2 && i > lo && below_fits[f] && ll->v[i - 1].zero_stage == l.zero_stage - 1;
      below_fits[f] = false;
      if (skip) {
        below_fits[f] = true;
        t->dominated++;
        continue;
      }
      if (estimate_layout(s, &l, out, t, &below_fits[f], e)) return -1;
    }
  return 0;
}

/* The layouts go to the parts in blocks, round robin (the costly layouts, long pipelines with many
 * micro-batches, sit together in the enumeration); each part (search_parts.c) writes its tally, each
 * block's count of candidates and the candidates into its shared memory. */
#define ESTIMATE_BLOCK 256       /* layouts a block */
#define ESTIMATE_MIN_LAYOUTS 4096 /* below this a fork costs more than it saves */

typedef struct {
  estimate_tally *tally; /* at the head of the part's memory: the tally, each block's count, the candidates */
  long *counts;
  sim_search_candidate *cands;
} estimate_part;

typedef struct {
  const search_state *s;
  long blocks, per; /* per: blocks a part at most */
} estimate_job;

static size_t part_bytes(long per, int n_fp8) {
  return sizeof(estimate_tally) + (size_t)per * sizeof(long) +
         (size_t)per * (ESTIMATE_BLOCK + 64) * SIM_SEARCH_CODEC_COUNT * (size_t)n_fp8 * sizeof(sim_search_candidate);
}

static estimate_part part_view(void *mem, long per) {
  estimate_part q = {.tally = mem};
  q.counts = (long *)(q.tally + 1);
  q.cands = (sim_search_candidate *)(q.counts + per);
  return q;
}

/* Block b's layouts [lo, hi): a block starts at a ZeRO-0/1 layout (its ZeRO-2/3 variants follow it). */
static void block_range(const layout_list *ll, long b, long *lo, long *hi) {
  long x = b * ESTIMATE_BLOCK, y = (b + 1) * ESTIMATE_BLOCK;
  while (x > 0 && x < ll->n && ll->v[x].zero_stage >= 2) x++;
  while (y < ll->n && ll->v[y].zero_stage >= 2) y++;
  *lo = x < ll->n ? x : ll->n;
  *hi = y < ll->n ? y : ll->n;
}

/* Part j's blocks (j, j + parts, ...): its candidates in block order, counts[k] those of its k-th block. */
static int estimate_part_run(int j, int parts, void *mem, void *arg, ts_err *e) {
  const estimate_job *job = arg;
  estimate_part q = part_view(mem, job->per);
  for (long b = j, k = 0; b < job->blocks; b += parts, k++) {
    long lo, hi, before = q.tally->n;
    block_range(&job->s->ll, b, &lo, &hi);
    if (estimate_range(job->s, lo, hi, q.cands, q.tally, e)) return -1; /* (written from q.cands[tally->n] on) */
    q.counts[k] = q.tally->n - before;
  }
  return 0;
}

/* Passes 2 and 3: memory, then the estimate of every codec policy; with o->jobs > 1 (one process, no
 * MPI) the blocks of layouts are spread over o->jobs processes and the candidates joined in the order
 * one process gives them: the same ranking. */
static int search_estimate(search_state *s, ts_err *e) {
  const sim_search_options *o = s->o;
  sim_search_result *r = s->r;
  const layout_list *ll = &s->ll;
  size_t cap = (size_t)(ll->n ? ll->n : 1) * SIM_SEARCH_CODEC_COUNT * (size_t)s->n_fp8;
  s->cands = calloc(cap, sizeof *s->cands);
  if (!s->cands) return ts_fail_sys(e, "search: out of memory");
  long blocks = (ll->n + ESTIMATE_BLOCK - 1) / ESTIMATE_BLOCK;
  int parts = o->jobs > 1 ? o->jobs : 1;
  if (parts > SIM_SEARCH_PARTS_MAX) parts = SIM_SEARCH_PARTS_MAX;
  if (ll->n < ESTIMATE_MIN_LAYOUTS || sim_search_mpi_size() > 1) parts = 1;
  if (parts == 1) { /* one range, here */
    estimate_tally all = {0};
    if (estimate_range(s, 0, ll->n, s->cands, &all, e)) return -1;
    r->over_memory = all.over_memory, r->invalid = all.invalid, r->fits = all.fits, r->dominated = all.dominated;
    r->least_over_bytes = all.least_over_bytes, r->least_over = all.least_over;
    s->n_cands = r->estimated = all.n;
    qsort(s->cands, (size_t)s->n_cands, sizeof *s->cands, by_estimate);
    return 0;
  }
  estimate_job job = {.s = s, .blocks = blocks, .per = (blocks + parts - 1) / parts};
  void *mem[SIM_SEARCH_PARTS_MAX];
  if (sim_search_parts_run(parts, part_bytes(job.per, s->n_fp8), estimate_part_run, &job, mem, e)) return -1;
  long at[SIM_SEARCH_PARTS_MAX] = {0}, n = 0;
  for (long b = 0; b < blocks; b++) { /* joined in block order */
    estimate_part q = part_view(mem[b % parts], job.per);
    long c = q.counts[b / parts];
    memcpy(s->cands + n, q.cands + at[b % parts], (size_t)c * sizeof *s->cands);
    at[b % parts] += c, n += c;
  }
  s->n_cands = r->estimated = n;
  for (int j = 0; j < parts; j++) {
    const estimate_tally *t = part_view(mem[j], job.per).tally;
    r->over_memory += t->over_memory, r->invalid += t->invalid, r->fits += t->fits, r->dominated += t->dominated;
    if (t->least_over_bytes > 0 && (r->least_over_bytes == 0 || t->least_over_bytes < r->least_over_bytes))
      r->least_over_bytes = t->least_over_bytes, r->least_over = t->least_over;
  }
  sim_search_parts_free(parts, part_bytes(job.per, s->n_fp8), mem);
  qsort(s->cands, (size_t)s->n_cands, sizeof *s->cands, by_estimate);
  return 0;
}

/* Round robin over the policies, each taking its best layout not chosen
 * yet: the best layout for CAAT-Net (no SP) is simulated even when SP
 * layouts lead the other policies. Only candidates under FP8 recipe fp8 are
 * looked at, `chosen` holding n_chosen layouts already (of other recipes).
 * Returns how many are chosen then (<= n_chosen + want). */
static int choose_layouts(const search_state *s, int fp8, int want, sim_search_layout *chosen, int n_chosen) {
  long cursor[SIM_SEARCH_CODEC_COUNT] = {0};
  int goal = n_chosen + want;
  for (bool progressed = true; progressed && n_chosen < goal;) {
    progressed = false;
    for (int c = 0; c < SIM_SEARCH_CODEC_COUNT && n_chosen < goal; c++) {
      for (long *i = &cursor[c]; *i < s->n_cands; (*i)++) {
        const sim_search_candidate *k = &s->cands[*i];
        if (k->codec != (sim_search_codec)c || k->layout.fp8 != fp8) continue;
        bool seen = false;
        for (int j = 0; j < n_chosen; j++) seen |= sim_search_same_layout(&chosen[j], &k->layout);
        if (seen) continue;
        chosen[n_chosen++] = k->layout;
        progressed = true;
        break;
      }
    }
  }
  return n_chosen;
}

/* Candidate i of the estimate ranking as simulation n_sim (its plan built). */
static int add_simulation(search_state *s, long i, int n_sim, ts_err *e) {
  sim_search_result *r = s->r;
  r->cands[n_sim] = s->cands[i];
  if (sim_search_make_plan(s->base, &s->cands[i].layout, r->seq, r->global_batch, &s->plans[n_sim], e)) return -1;
  sim_search_apply_codec(&s->plans[n_sim], s->cands[i].codec);
  return 0;
}

/* The simulations of pass 4: the chosen layouts under every policy, then
 * --sample candidates evenly spread over the ranking; longest first. */
static int prepare_simulations(search_state *s, ts_err *e) {
  const sim_search_options *o = s->o;
  sim_search_result *r = s->r;
  const long n_cands = s->n_cands;
  int want = o->simulate > 0 ? o->simulate : 8; /* layouts of each FP8 recipe */
  sim_search_layout *chosen = calloc((size_t)want * (size_t)s->n_fp8, sizeof *chosen);
  if (!chosen) return ts_fail_sys(e, "search: out of memory");
  int n_chosen = 0;
  for (int f = 0; f < SIM_SEARCH_FP8_RECIPES; f++)
    if (s->fp8 & (1u << f)) n_chosen = choose_layouts(s, f, want, chosen, n_chosen);
  int n_sim = 0;
  int n_sample = o->sample > 0 ? (int)(o->sample < n_cands ? o->sample : n_cands) : 0;
  size_t sim_cap = (size_t)(n_chosen ? n_chosen : 1) * SIM_SEARCH_CODEC_COUNT + (size_t)n_sample;
  r->cands = calloc(sim_cap, sizeof *r->cands);
  s->plans = calloc(sim_cap, sizeof *s->plans);
  if (!r->cands || !s->plans) {
    free(chosen);
    return ts_fail_sys(e, "search: out of memory");
  }
  for (long i = 0; i < n_cands; i++) {
    for (int j = 0; j < n_chosen; j++)
      if (sim_search_same_layout(&chosen[j], &s->cands[i].layout)) {
        if (add_simulation(s, i, n_sim, e)) {
          free(chosen);
          return -1;
        }
        n_sim++;
      }
  }
  free(chosen);
  for (int k = 0; k < n_sample; k++) { /* evenly spread over the ranking, best and worst included */
    long i = n_sample > 1 ? (long)((double)k * (double)(n_cands - 1) / (n_sample - 1) + 0.5) : 0;
    if (add_simulation(s, i, n_sim, e)) return -1;
    r->cands[n_sim].sample = true;
    n_sim++;
  }
  r->samples = n_sample;
  /* Longest first, so no slow simulation starts last on an otherwise idle
   * machine: a simulation walks every micro-batch of every layer. */
  plan *plans = s->plans;
  for (int i = 1; i < n_sim; i++)
    for (int j = i; j > 0 && sim_cost(&plans[j]) > sim_cost(&plans[j - 1]); j--) {
      plan tp = plans[j];
      plans[j] = plans[j - 1];
      plans[j - 1] = tp;
      sim_search_candidate tc = r->cands[j];
      r->cands[j] = r->cands[j - 1];
      r->cands[j - 1] = tc;
    }
  r->layouts_simulated = n_chosen;
  r->candidates = n_sim;
  return 0;
}

/* The largest expert-parallel group among the n plans whose members span nodes (0: none). Under
 * --alltoall flows a simulation runs each of its all-to-alls as ep (ep - 1) flows, which at ep in the
 * hundreds takes minutes a simulation. */
#define SIM_SEARCH_WIDE_EP 32 /* Qwen3-235B's EP 32 over 8 nodes: 147 s of CPU a simulation (RESULTS-search.md) */
static int widest_cross_node_ep(const plan *plans, int n) {
  int widest = 0;
  for (int i = 0; i < n; i++) {
    const plan *p = &plans[i];
    if (!model_is_moe(&p->model) || p->ep <= widest) continue;
    int *m = malloc(sizeof *m * (size_t)p->ep);
    if (!m) continue; /* only a note is lost */
    int k = plan_group_members(p, 0, PLAN_GROUP_EP, m, p->ep);
    for (int j = 1; j < k && j < p->ep; j++)
      if (topo_node_of(&p->cluster, m[j]) != topo_node_of(&p->cluster, m[0])) {
        widest = p->ep;
        break;
      }
    free(m);
  }
  return widest;
}

/* Pass 4: the simulations, then each one's speedup over the same layout
 * uncompressed; r->cands best simulated first. */
static int search_simulate(search_state *s, ts_err *e) {
  const sim_search_options *o = s->o;
  sim_search_result *r = s->r;
  double t2 = now_s();
  if (prepare_simulations(s, e)) return -1;
  const int n_sim = r->candidates;
  progress_state ps = {.on = o->progress && sim_search_mpi_rank() == 0, .t0 = t2};
  const int wide_ep = o->alltoall_analytic ? 0 : widest_cross_node_ep(s->plans, n_sim);
  if (wide_ep >= SIM_SEARCH_WIDE_EP && sim_search_mpi_rank() == 0)
    fprintf(stderr,
            "tacosim search: note: candidates with expert parallelism of up to %d ranks across nodes: each of their "
            "all-to-alls runs as %d flows, minutes a simulation; --alltoall analytic prices them without flows "
            "(approximate: sim/README.md)\n",
            wide_ep, wide_ep * (wide_ep - 1));
  if (sim_search_run_candidates(s->plans, r->cands, n_sim, s->cal, o, r, progress_bar, &ps, e)) return -1;
  for (int i = 0; i < n_sim; i++) r->failures += r->cands[i].sim_failed;
  for (int i = 0; i < n_sim; i++) { /* speedup over the same layout uncompressed */
    sim_search_candidate *k = &r->cands[i];
    for (int j = 0; j < n_sim; j++) {
      const sim_search_candidate *b = &r->cands[j];
      if (k->simulated && b->simulated && !b->sample && b->codec == SIM_SEARCH_CODEC_NONE &&
          sim_search_same_layout(&k->layout, &b->layout))
        k->speedup = k->sim_tokens_per_s / b->sim_tokens_per_s;
    }
  }
  qsort(r->cands, (size_t)n_sim, sizeof *r->cands, by_simulation);
  r->n = n_sim;
  r->simulate_s = now_s() - t2;
  return 0;
}

/* Keeps the head of the estimate ranking for the report. */
static int keep_best_estimates(search_state *s, ts_err *e) {
  sim_search_result *r = s->r;
  long keep = s->o->keep_estimates > 0 ? s->o->keep_estimates : 48;
  r->n_best_est = (int)(s->n_cands < keep ? s->n_cands : keep);
  r->best_est = calloc((size_t)(r->n_best_est ? r->n_best_est : 1), sizeof *r->best_est);
  if (!r->best_est) return ts_fail_sys(e, "search: out of memory");
  memcpy(r->best_est, s->cands, (size_t)r->n_best_est * sizeof *s->cands);
  return 0;
}

int sim_search_run(const sim_search_options *o, sim_search_result *r, ts_err *e) {
  memset(r, 0, sizeof *r);
  double t0 = now_s();
  static plan base;
  if (sim_search_base_plan(o->model, o->cluster, &base, e)) return -1;
  if (sim_search_apply_options(o, &base, e)) return -1;
  sim_search_set_alltoall_analytic(o->alltoall_analytic);
  sim_search_set_clock_model(o->clock_model);
  if (resolve(o, &base, r, e)) return -1;
  schema_calibration cal = {0};
  sim_cost_source src;
  if (!o->memory_only) {
    const char *cal_path = o->calibration ? o->calibration : sim_default_calibration(&base.cluster);
    snprintf(r->calibration, sizeof r->calibration, "%.511s", cal_path);
    if (sim_load_costs(cal_path, &base.cluster, SIM_TRANSFER_ROOFLINE, &cal, &src, e)) return -1;
    r->gemm_fp8_points = cal.n_gemm_fp8;
    sim_clock_model model;
    const sim_options so = {.cal = &cal, .clock_model = o->clock_model};
    if (sim_clock_model_resolve(&so, &model, e)) {
      schema_calibration_free(&cal);
      return -1;
    }
    r->clock_model = o->clock_model != SIM_CLOCK_MODEL_AUTO ? o->clock_model
                     : cal.power.n > 0                      ? SIM_CLOCK_MODEL_POWER
                                                            : SIM_CLOCK_MODEL_DUTY;
  }

  int rc = -1;
  search_state s = {.o = o, .r = r, .base = &base, .cal = &cal};
  if (sim_search_fp8_recipes(o, &base.cluster.gpu, &r->fp8_recipes, &r->fp8_skipped, e)) goto out;
  snprintf(r->gpu, sizeof r->gpu, "%s", base.cluster.gpu.name);
  s.fp8 = r->fp8_recipes;
  for (int f = 0; f < SIM_SEARCH_FP8_RECIPES; f++) s.n_fp8 += (s.fp8 >> f) & 1;

  /* pass 1: enumeration */
  sim_search_space space = {.model = &base.model, .cluster = &base.cluster, .gpus = r->gpus, .seq = r->seq,
                            .global_batch = r->global_batch, .max_micro = o->max_micro > 0 ? o->max_micro : 16};
  r->enumerated = sim_search_enumerate(&space, push_layout, &s.ll);
  if (s.ll.oom) {
    ts_fail_sys(e, "search: out of memory listing %ld layouts", r->enumerated);
    goto out;
  }
  r->enumerate_s = now_s() - t0;

  double t1 = now_s();
  if (search_estimate(&s, e)) goto out;
  r->estimate_s = now_s() - t1;
  if (o->memory_only) {
    rc = 0;
    goto out;
  }
  if (!o->estimate_only && search_simulate(&s, e)) goto out;
  if (keep_best_estimates(&s, e)) goto out;
  rc = 0;
out:
  r->total_s = now_s() - t0;
  free(s.ll.v);
  free(s.cands);
  free(s.plans);
  schema_calibration_free(&cal);
  if (rc) sim_search_result_free(r);
  return rc;
}

void sim_search_result_free(sim_search_result *r) {
  free(r->cands);
  free(r->best_est);
  r->cands = r->best_est = NULL;
  r->n = r->n_best_est = 0;
}

/* test_plan_program.c — placement, pipeline schedules and per-rank programs.
 *
 * Hand-worked op orders for 1F1B and interleaved 1F1B; the idle fraction of
 * every schedule with zero-cost communication, found by a small
 * list-scheduling evaluator that runs all ranks' programs (forward 1,
 * backward 2, blocking send/recv, collectives as barriers); programs are well
 * formed (deps point backward, every send has one matching recv, nothing
 * deadlocks); byte counts under TACO and CAAT-Net; SP, ZeRO-1, recompute and
 * memory. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"

#ifndef PLANS_DIR
#error "PLANS_DIR must point at experiments/plans"
#endif

typedef struct {
  const char *model, *cluster, *schedule, *recompute, *codec, *order;
  int dp, tp, pp, vpp, sp, zero1, micro, seq, layers;
  long long global;
  double codec_min_bytes; /* 0: the default */
  int tp_overlap;         /* layout.tp_overlap_chunks; 0: the key is absent */
  int pp_sg, grad_bf16;   /* layout.pp_scatter_gather true, layout.grad_reduce_in_fp32 false; 0: absent */
  const char *layout_extra; /* more layout members, ", \"key\": value" (NULL: none) */
} spec;

static spec base(void) {
  return (spec){.model = "gpt-tiny", .cluster = "h200x8-nvswitch", .schedule = "1f1b", .recompute = "none",
                .codec = "{}", .order = "tp-dp-pp", .dp = 1, .tp = 1, .pp = 1, .vpp = 1, .micro = 1, .seq = 256,
                .layers = 0, .global = 4};
}

static plan load(const spec *s) {
  char layers[32], extra[64] = "", buf[4096];
  if (s->layers)
    snprintf(layers, sizeof layers, "%d", s->layers);
  else
    snprintf(layers, sizeof layers, "null");
  if (s->codec_min_bytes > 0) snprintf(extra, sizeof extra, ", \"codec_min_bytes\": %.0f", s->codec_min_bytes);
  char overlap[512] = "";
  if (s->tp_overlap) snprintf(overlap, sizeof overlap, ", \"tp_overlap_chunks\": %d", s->tp_overlap);
  if (s->pp_sg) strcat(overlap, ", \"pp_scatter_gather\": true");
  if (s->grad_bf16) strcat(overlap, ", \"grad_reduce_in_fp32\": false");
  if (s->layout_extra) strncat(overlap, s->layout_extra, sizeof overlap - strlen(overlap) - 1);
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"%s\", \"cluster\": \"%s\",\n"
           "  \"layout\": { \"dp\": %d, \"tp\": %d, \"pp\": %d, \"vpp\": %d, \"sequence_parallel\": %s,\n"
           "              \"order\": \"%s\", \"zero1\": %s, \"recompute\": \"%s\"%s },\n"
           "  \"batch\": { \"micro\": %d, \"global\": %lld, \"seq\": %d },\n"
           "  \"schedule\": \"%s\", \"layers_override\": %s, \"codec\": %s %s }\n",
           s->model, s->cluster, s->dp, s->tp, s->pp, s->vpp, s->sp ? "true" : "false", s->order,
           s->zero1 ? "true" : "false", s->recompute, overlap, s->micro, s->global, s->seq, s->schedule, layers, s->codec,
           extra);
  plan p;
  ts_err e = {0};
  int rc = plan_from_json_text(buf, strlen(buf), "t.json", NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n%s", e.msg, buf);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return p;
}

static plan load_file(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.json", PLANS_DIR, name);
  plan p;
  ts_err e = {0};
  int rc = plan_load(path, NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return p;
}

static plan_program *build_all(const plan *p) {
  int world = plan_world_size(p);
  plan_program *progs = calloc((size_t)world, sizeof *progs);
  CU_ASSERT_PTR_NOT_NULL_FATAL(progs);
  for (int r = 0; r < world; r++) {
    ts_err e = {0};
    int rc = plan_build_program(p, r, &progs[r], &e);
    if (rc) printf("\n  rank %d: %s\n", r, e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
  }
  return progs;
}

static void free_all(const plan *p, plan_program *progs) {
  for (int r = 0; r < plan_world_size(p); r++) plan_program_free(&progs[r]);
  free(progs);
}

/* ---- the evaluator ---- */

typedef struct {
  double makespan;
  double *busy;  /* per rank, compute time */
  int completed; /* 1 when every op of every rank ran */
} eval_result;

/* per_layer_costs (uneven stages): the first compute op of each (micro,
 * layer) forward costs 1, of each backward 2, so a step costs its layers. */
static int per_layer_costs;
static double *layer_costs(const plan *p, const plan_program *g) {
  double *cost = calloc((size_t)g->n + 1, sizeof *cost);
  char *seen = calloc((size_t)plan_micro_batches(p) * p->layers * 2, 1);
  for (int i = 0; i < g->n; i++) {
    const plan_op *op = &g->ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->micro < 0 || op->layer < 0) continue;
    if (op->phase != PLAN_PHASE_FWD && op->phase != PLAN_PHASE_BWD) continue;
    size_t c = ((size_t)op->micro * p->layers + op->layer) * 2 + (op->phase == PLAN_PHASE_BWD);
    if (!seen[c]) cost[i] = op->phase == PLAN_PHASE_BWD ? 2.0 : 1.0;
    seen[c] = 1;
  }
  free(seen);
  return cost;
}

/* Unit costs: the first compute op of each (micro, chunk) forward costs 1, of
 * each backward 2, every other op 0 — so a forward step costs exactly 1. */
static double *unit_costs(const plan *p, const plan_program *g) {
  if (per_layer_costs) return layer_costs(p, g);
  double *cost = calloc((size_t)g->n + 1, sizeof *cost);
  int cells = plan_micro_batches(p) * p->vpp * 2;
  char *seen = calloc((size_t)cells, 1);
  for (int i = 0; i < g->n; i++) {
    const plan_op *op = &g->ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->micro < 0) continue;
    if (op->phase != PLAN_PHASE_FWD && op->phase != PLAN_PHASE_BWD) continue;
    int c = (op->micro * p->vpp + op->chunk) * 2 + (op->phase == PLAN_PHASE_BWD);
    if (!seen[c]) cost[i] = op->phase == PLAN_PHASE_BWD ? 2.0 : 1.0;
    seen[c] = 1;
  }
  free(seen);
  return cost;
}

typedef struct {
  const plan *p;
  const plan_program *g;
  double **cost, **fin, **sfree;
  int **list, **len, **pos; /* per rank: per stream op lists */
  int **occ;                /* per rank, per op: index among same-group collectives of its stream */
  int **send_tag, **recv_tag;
  int max_tag;
} evaluator;

static int head(evaluator *v, int r, int s) {
  return v->pos[r][s] < v->len[r][s] ? v->list[r][s * v->g[r].n + v->pos[r][s]] : -1;
}

static double ready(evaluator *v, int r, int i) {
  const plan_op *op = &v->g[r].ops[i];
  double t = v->sfree[r][op->stream];
  for (int d = 0; d < PLAN_MAX_DEPS; d++) {
    if (op->dep[d] < 0) continue;
    if (v->fin[r][op->dep[d]] < 0) return -1;
    if (v->fin[r][op->dep[d]] > t) t = v->fin[r][op->dep[d]];
  }
  return t;
}

static void finish(evaluator *v, int r, int i, double t) {
  v->fin[r][i] = t;
  v->sfree[r][v->g[r].ops[i].stream] = t;
  v->pos[r][v->g[r].ops[i].stream]++;
}

/* Tries to run the head op of (r, s); returns 1 on progress. */
static int step(evaluator *v, int r, int s) {
  int i = head(v, r, s);
  if (i < 0) return 0;
  const plan_op *op = &v->g[r].ops[i];
  double t = ready(v, r, i);
  if (t < 0) return 0;
  if (op->kind == PLAN_OP_COMPUTE) {
    finish(v, r, i, t + v->cost[r][i]);
    return 1;
  }
  if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
    int q = op->peer;
    if (op->tag < 0 || op->tag > v->max_tag) return 0;
    int j = op->kind == PLAN_OP_SEND ? v->recv_tag[q][op->tag] : v->send_tag[q][op->tag];
    if (j < 0 || head(v, q, PLAN_STREAM_PP) != j) return 0;
    double tq = ready(v, q, j);
    if (tq < 0) return 0;
    double when = t > tq ? t : tq;
    finish(v, r, i, when);
    finish(v, q, j, when);
    return 1;
  }
  int members[4096];
  int n = plan_group_members(v->p, r, (plan_group_kind)op->group, members, 4096);
  int idx[4096];
  double when = t;
  for (int k = 0; k < n; k++) {
    int q = members[k];
    int j = head(v, q, s);
    if (j < 0) return 0;
    const plan_op *o = &v->g[q].ops[j];
    if (o->kind != PLAN_OP_COLLECTIVE || o->group != op->group || v->occ[q][j] != v->occ[r][i]) return 0;
    double tq = ready(v, q, j);
    if (tq < 0) return 0;
    if (tq > when) when = tq;
    idx[k] = j;
  }
  for (int k = 0; k < n; k++) finish(v, members[k], idx[k], when);
  return 1;
}

static eval_result evaluate(const plan *p, const plan_program *g) {
  int world = plan_world_size(p);
  evaluator v = {.p = p, .g = g};
  v.max_tag = plan_micro_batches(p) * p->pp * p->vpp * 2;
  v.cost = calloc((size_t)world, sizeof *v.cost);
  v.fin = calloc((size_t)world, sizeof *v.fin);
  v.sfree = calloc((size_t)world, sizeof *v.sfree);
  v.list = calloc((size_t)world, sizeof *v.list);
  v.len = calloc((size_t)world, sizeof *v.len);
  v.pos = calloc((size_t)world, sizeof *v.pos);
  v.occ = calloc((size_t)world, sizeof *v.occ);
  v.send_tag = calloc((size_t)world, sizeof *v.send_tag);
  v.recv_tag = calloc((size_t)world, sizeof *v.recv_tag);
  long total = 0;
  for (int r = 0; r < world; r++) {
    int n = g[r].n;
    total += n;
    v.cost[r] = unit_costs(p, &g[r]);
    v.fin[r] = malloc((size_t)(n + 1) * sizeof(double));
    v.sfree[r] = calloc(PLAN_STREAM_COUNT, sizeof(double));
    v.list[r] = malloc((size_t)(n + 1) * PLAN_STREAM_COUNT * sizeof(int));
    v.len[r] = calloc(PLAN_STREAM_COUNT, sizeof(int));
    v.pos[r] = calloc(PLAN_STREAM_COUNT, sizeof(int));
    v.occ[r] = calloc((size_t)n + 1, sizeof(int));
    v.send_tag[r] = malloc((size_t)(v.max_tag + 1) * sizeof(int));
    v.recv_tag[r] = malloc((size_t)(v.max_tag + 1) * sizeof(int));
    for (int t = 0; t <= v.max_tag; t++) v.send_tag[r][t] = v.recv_tag[r][t] = -1;
    int count[PLAN_STREAM_COUNT][PLAN_GROUP_COUNT] = {{0}};
    for (int i = 0; i < n; i++) {
      const plan_op *op = &g[r].ops[i];
      v.fin[r][i] = -1;
      v.list[r][op->stream * n + v.len[r][op->stream]++] = i;
      if (op->kind == PLAN_OP_COLLECTIVE) v.occ[r][i] = count[op->stream][op->group]++;
      if (op->kind == PLAN_OP_SEND && op->tag >= 0 && op->tag <= v.max_tag) v.send_tag[r][op->tag] = i;
      if (op->kind == PLAN_OP_RECV && op->tag >= 0 && op->tag <= v.max_tag) v.recv_tag[r][op->tag] = i;
    }
  }
  long done = 0;
  for (;;) {
    int progress = 0;
    for (int r = 0; r < world; r++)
      for (int s = 0; s < PLAN_STREAM_COUNT; s++)
        while (step(&v, r, s)) progress = 1, done++;
    if (!progress) break;
  }
  /* a send/recv pair or a collective counts every member: recount */
  done = 0;
  eval_result res = {0};
  res.busy = calloc((size_t)world, sizeof *res.busy);
  for (int r = 0; r < world; r++)
    for (int i = 0; i < g[r].n; i++) {
      if (v.fin[r][i] >= 0) done++;
      if (v.fin[r][i] > res.makespan) res.makespan = v.fin[r][i];
      res.busy[r] += v.cost[r][i];
    }
  res.completed = done == total;
  for (int r = 0; r < world; r++) {
    free(v.cost[r]), free(v.fin[r]), free(v.sfree[r]), free(v.list[r]), free(v.len[r]), free(v.pos[r]);
    free(v.occ[r]), free(v.send_tag[r]), free(v.recv_tag[r]);
  }
  free(v.cost), free(v.fin), free(v.sfree), free(v.list), free(v.len), free(v.pos), free(v.occ);
  free(v.send_tag), free(v.recv_tag);
  return res;
}

/* ---- placement ---- */

static void test_placement_tp_innermost(void) {
  spec s = base();
  s.dp = 2, s.tp = 2, s.pp = 2, s.global = 4;
  plan p = load(&s);
  for (int r = 0; r < 8; r++) {
    plan_coord c = plan_coord_of(&p, r);
    CU_ASSERT_EQUAL(plan_rank_of(&p, c), r);
    CU_ASSERT_EQUAL(c.tp, r % 2);
    CU_ASSERT_EQUAL(c.dp, (r / 2) % 2); /* tp-dp-pp: DP next */
    CU_ASSERT_EQUAL(c.pp, r / 4);
  }
  int m[8];
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_TP, m, 8), 2);
  CU_ASSERT(m[0] == 4 && m[1] == 5);
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_DP, m, 8), 2);
  CU_ASSERT(m[0] == 5 && m[1] == 7);
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_PP, m, 8), 2);
  CU_ASSERT(m[0] == 1 && m[1] == 5);
  CU_ASSERT_EQUAL(plan_group_index(&p, 5, PLAN_GROUP_PP), 1);
  CU_ASSERT_EQUAL(plan_group_members(&p, 8, PLAN_GROUP_TP, m, 8), -1);

  s.order = "tp-pp-dp";
  p = load(&s);
  for (int r = 0; r < 8; r++) {
    plan_coord c = plan_coord_of(&p, r);
    CU_ASSERT_EQUAL(plan_rank_of(&p, c), r);
    CU_ASSERT_EQUAL(c.tp, r % 2);
    CU_ASSERT_EQUAL(c.pp, (r / 2) % 2); /* tp-pp-dp: PP next */
    CU_ASSERT_EQUAL(c.dp, r / 4);
  }
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_DP, m, 8), 2);
  CU_ASSERT(m[0] == 1 && m[1] == 5);
}

static void test_tp_groups_stay_in_a_node(void) {
  plan p = load_file("gpt3-175b-1024");
  int m[8];
  for (int r = 0; r < plan_world_size(&p); r += 37) {
    int n = plan_group_members(&p, r, PLAN_GROUP_TP, m, 8);
    CU_ASSERT_EQUAL(n, 8);
    for (int k = 0; k < n; k++) CU_ASSERT_EQUAL(topo_node_of(&p.cluster, m[k]), topo_node_of(&p.cluster, r));
  }
}

/* ---- schedules ---- */

typedef struct {
  int micro, chunk, backward;
} want_step;

static void expect_schedule(const plan *p, int stage, const want_step *want, int n) {
  plan_step got[256];
  CU_ASSERT_EQUAL_FATAL(plan_pipeline_schedule(p, stage, got, 256), n);
  for (int k = 0; k < n; k++) {
    int ok = got[k].micro == want[k].micro && got[k].chunk == want[k].chunk && got[k].backward == want[k].backward;
    if (!ok)
      printf("\n  stage %d step %d: got %c%d.%d, want %c%d.%d\n", stage, k, got[k].backward ? 'B' : 'F', got[k].micro,
             got[k].chunk, want[k].backward ? 'B' : 'F', want[k].micro, want[k].chunk);
    CU_ASSERT(ok);
  }
  /* the program runs its compute in the same order */
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, plan_rank_of(p, (plan_coord){0, 0, stage}), &g, &e), 0);
  int k = 0, last = -1;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->micro < 0 || op->phase == PLAN_PHASE_RECOMPUTE) continue;
    int key = (op->micro * p->vpp + op->chunk) * 2 + (op->phase == PLAN_PHASE_BWD);
    if (key == last) continue;
    last = key;
    CU_ASSERT_FATAL(k < n);
    CU_ASSERT(op->micro == want[k].micro && op->chunk == want[k].chunk &&
              (op->phase == PLAN_PHASE_BWD) == want[k].backward);
    k++;
  }
  CU_ASSERT_EQUAL(k, n);
  plan_program_free(&g);
}

#define F(m) {m, 0, 0}
#define B(m) {m, 0, 1}
static void test_1f1b_order(void) {
  spec s = base();
  s.pp = 4, s.layers = 4, s.global = 8;
  plan p = load(&s);
  const want_step stage0[] = {F(0), F(1), F(2), F(3), B(0), F(4), B(1), F(5),
                              B(2), F(6), B(3), F(7), B(4), B(5), B(6), B(7)};
  const want_step stage2[] = {F(0), F(1), B(0), F(2), B(1), F(3), B(2), F(4),
                              B(3), F(5), B(4), F(6), B(5), F(7), B(6), B(7)};
  const want_step stage3[] = {F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3),
                              F(4), B(4), F(5), B(5), F(6), B(6), F(7), B(7)};
  expect_schedule(&p, 0, stage0, 16);
  expect_schedule(&p, 2, stage2, 16);
  expect_schedule(&p, 3, stage3, 16);
  CU_ASSERT_EQUAL(plan_inflight_peak(&p, 0), 4);
  CU_ASSERT_EQUAL(plan_inflight_peak(&p, 3), 1);
}

static void test_gpipe_order(void) {
  spec s = base();
  s.pp = 2, s.layers = 2, s.global = 3, s.schedule = "gpipe";
  plan p = load(&s);
  const want_step all[] = {F(0), F(1), F(2), B(0), B(1), B(2)};
  expect_schedule(&p, 0, all, 6);
  expect_schedule(&p, 1, all, 6);
  CU_ASSERT_EQUAL(plan_inflight_peak(&p, 1), 3);
}
#undef F
#undef B

/* Narayanan et al.'s interleaved schedule as Megatron-LM orders it, worked by
 * hand for pp = 2, vpp = 2, m = 4 (Fm.c / Bm.c: micro-batch m, chunk c). */
static void test_interleaved_order(void) {
  spec s = base();
  s.pp = 2, s.vpp = 2, s.layers = 4, s.global = 4, s.schedule = "interleaved-1f1b";
  plan p = load(&s);
  const want_step stage0[] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}, /* warm-up: (2-0-1)*2 + (2-1)*2 = 4 */
                              {2, 0, 0}, {0, 1, 1}, {3, 0, 0}, {1, 1, 1}, {2, 1, 0}, {0, 0, 1},
                              {3, 1, 0}, {1, 0, 1}, {2, 1, 1}, {3, 1, 1}, {2, 0, 1}, {3, 0, 1}};
  const want_step stage1[] = {{0, 0, 0}, {1, 0, 0}, /* warm-up: 0 + 2 */
                              {0, 1, 0}, {0, 1, 1}, {1, 1, 0}, {1, 1, 1}, {2, 0, 0}, {0, 0, 1},
                              {3, 0, 0}, {1, 0, 1}, {2, 1, 0}, {2, 1, 1}, {3, 1, 0}, {3, 1, 1},
                              {2, 0, 1}, {3, 0, 1}};
  expect_schedule(&p, 0, stage0, 16);
  expect_schedule(&p, 1, stage1, 16);
  CU_ASSERT_EQUAL(plan_inflight_peak(&p, 0), 5);
}

/* plan_held_peak over the hand-worked schedule above, chunk 0 holding 1
 * byte a forward and chunk 1 holding 10: stage 0 peaks at 23 (F2.0 after
 * F0.0 F1.0 F0.1 F1.1, and again at F3.1), stage 1 at 12 (a chunk-1 forward
 * on top of two chunk-0 ones). */
static void test_held_peak(void) {
  spec s = base();
  s.pp = 2, s.vpp = 2, s.layers = 4, s.global = 4, s.schedule = "interleaved-1f1b";
  plan p = load(&s);
  const double held[2] = {1.0, 10.0};
  CU_ASSERT_DOUBLE_EQUAL(plan_held_peak(&p, 0, held), 23.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(plan_held_peak(&p, 1, held), 12.0, 1e-12);
  const double even[2] = {1.0, 1.0}; /* equal chunks: the in-flight peak */
  for (int st = 0; st < 2; st++) CU_ASSERT_DOUBLE_EQUAL(plan_held_peak(&p, st, even), plan_inflight_peak(&p, st), 1e-12);
}

/* plan_held_peak keeps each interleaved step's chunk by counters and, when
 * every chunk holds whole bytes, stops after the warm-up and one period of
 * pp x vpp forwards: the same peak, to the bit, as walking the schedule's own
 * steps (plan_pipeline_schedule) with the same sums in the same order, on
 * every stage of pp 2-8, vpp 2-4 and 1-16 micro-batch groups; chunks holding
 * fractions (the whole walk) and whole bytes rising, falling or peaked (the period). */
static void test_held_peak_walk(void) {
  static plan_step steps[2 * 16 * 8 * 4];
  int cut = 0;
  for (int pp = 2; pp <= 8; pp *= 2)
    for (int vpp = 2; vpp <= 4; vpp++)
      for (int groups = 1; groups <= 16; groups += groups < 4 ? 1 : 4) {
        spec s = base();
        s.pp = pp, s.vpp = vpp, s.layers = pp * vpp, s.global = (long long)groups * pp,
        s.schedule = "interleaved-1f1b";
        plan p = load(&s);
        for (int pattern = 0; pattern < 4; pattern++) {
          /* fractions rising; whole bytes rising, falling, and one chunk above the rest */
          const int whole = pattern > 0;
          double held[4];
          for (int c = 0; c < vpp; c++)
            held[c] = pattern == 0   ? 1.0 / (c + 3) + 0.7 * c + 1e-9 * (c * c + 1)
                      : pattern == 1 ? 637599744.0 + 1048573.0 * c * c - 4099.0 * c
                      : pattern == 2 ? 637599744.0 - 100000007.0 * c
                                     : (c == vpp / 2 ? 5e9 + 3.0 : 1e6 + 17.0 * c);
          for (int st = 0; st < pp; st++) {
            int n = plan_pipeline_schedule(&p, st, steps, (int)(sizeof steps / sizeof steps[0]));
            CU_ASSERT_FATAL(n > 0);
            double now = 0.0, peak = 0.0;
            for (int k = 0; k < n; k++) {
              if (steps[k].backward) {
                now -= held[steps[k].chunk];
                continue;
              }
              now += held[steps[k].chunk];
              if (now > peak) peak = now;
            }
            double got = plan_held_peak(&p, st, held);
            if (got != peak)
              printf("\n  pp %d vpp %d m %d stage %d: %.17g, the schedule's walk %.17g\n", pp, vpp, groups * pp, st, got,
                     peak);
            CU_ASSERT(got == peak);
            cut += whole && plan_warmup_steps(&p, st) + pp * vpp < n / 2;
          }
        }
      }
  CU_ASSERT(cut > 100); /* the period's shortcut was taken */
}

/* Embedding and loss accounted as layers (pp 2, vpp 2, 6 layers in 8 slots:
 * chunks of 1 + 2 layers on stage 0, 2 + 1 on stage 1): the memory holds the
 * layers each chunk really has and the logits only while the loss chunk's
 * forward waits for its backward. Worked by hand over the schedule above
 * with L a layer's activations of one micro-batch and g its output layer's
 * held bytes (fp32 softmax, final norm's tensors: plan_head_held_bytes):
 * stage 0 peaks at 7 L (not 5 chunk steps x 2 slots), stage 1 at
 * max(6 L, 5 L + g) (not 3 x 2 L + 2 g), each plus one layer's backward
 * gradients once (plan_bwd_transient_bytes). */
static void test_memory_accounted_chunks(void) {
  spec s = base();
  s.pp = 2, s.vpp = 2, s.layers = 4, s.global = 4, s.schedule = "interleaved-1f1b";
  plan even = load(&s);
  plan_memory e0;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&even, 0, &e0), 0);
  const double L = (e0.activations - plan_bwd_transient_bytes(&even)) / plan_inflight_peak(&even, 0); /* 1 layer a chunk */
  s.layers = 6;
  s.layout_extra = ", \"account_for_embedding_in_pipeline_split\": true, \"account_for_loss_in_pipeline_split\": true";
  plan p = load(&s);
  CU_ASSERT_EQUAL(plan_vchunk_layers(&p, 0, 0), 1);
  CU_ASSERT_EQUAL(plan_vchunk_layers(&p, 1, 1), 1);
  plan_memory m0, m1;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &m0), 0);
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 1, &m1), 0);
  const double g = plan_head_held_bytes(&p);
  const double bwd = plan_bwd_transient_bytes(&p); /* one layer's backward gradients, once a stage */
  CU_ASSERT_DOUBLE_EQUAL(m0.activations, 7.0 * L + bwd, 1e-6 * L);
  CU_ASSERT_DOUBLE_EQUAL(m1.activations, fmax(6.0 * L, 5.0 * L + g) + bwd, 1e-6 * L);
}

/* The compressed collectives' buffers (plan_memory_codec.c), worked by hand on gpt-tiny (hidden 256) with
 * micro-batch 1 of 256 tokens: a TP message is 256 x 256 = 65,536 bf16 elements; TACO (group 128) encodes
 * it in 65,536 fp8 bytes + 8 bytes for each of its 512 groups = 69,632 bytes. */
static double codec_overhead_delta(spec s, const char *codec, int stage, double *codec_bytes) {
  plan plain = load(&s);
  s.codec = codec;
  plan p = load(&s);
  plan_memory a, b;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&plain, stage, &a), 0);
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, stage, &b), 0);
  *codec_bytes = plan_codec_buffer_bytes(&p, stage);
  CU_ASSERT_DOUBLE_EQUAL(b.total - a.total, *codec_bytes, 1e-6); /* in the overhead, nothing else moves */
  CU_ASSERT_DOUBLE_EQUAL(b.overhead - a.overhead, *codec_bytes, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(plan_codec_buffer_bytes(&plain, stage), 0.0, 0.0);
  return *codec_bytes;
}

static void test_memory_codec_buffers(void) {
  const double W = 65536.0 + 8.0 * 512.0; /* one TP or pipeline message, encoded: 69,632 bytes */
  double got;
  spec s = base();
  s.tp = 2, s.codec_min_bytes = 1;
  /* TP all-reduce, TACO both ways: the blocks sent, the blocks received, the all-gather slots */
  codec_overhead_delta(s, "{\"tp_fwd\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"},"
                          "\"tp_bwd\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}}", 0, &got);
  CU_ASSERT_DOUBLE_EQUAL(got, 3.0 * W, 1e-9);
  /* SP: an all-gather keeps the slots (W), a reduce-scatter the blocks sent and received (2 W) */
  s.sp = 1;
  codec_overhead_delta(s, "{\"tp_fwd\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}}", 0, &got);
  CU_ASSERT_DOUBLE_EQUAL(got, 2.0 * W, 1e-9);
  s.sp = 0;
  /* CAAT-Net at p 0.5: 128 of 256 channels packed, bf16 forward (65,536 B), fp32 backward (131,072 B) */
  codec_overhead_delta(s, "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.5},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0.5}}", 0, &got);
  CU_ASSERT_DOUBLE_EQUAL(got, 256.0 * 128.0 * 4.0, 1e-9);
  /* pipeline: the activation sent and the one received, TACO (group 128) on each */
  s = base();
  s.pp = 2, s.codec_min_bytes = 1;
  for (int st = 0; st < 2; st++) {
    codec_overhead_delta(s, "{\"pp\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}}", st, &got);
    CU_ASSERT_DOUBLE_EQUAL(got, 2.0 * W, 1e-9);
  }
  /* DP: gpt-tiny's 14.5 M parameters fit one bucket of 40 M, so the bucket is the whole stage's fp32
   * gradient: P elements, P + 8 ceil(P / 128) bytes encoded, three copies all-reduced, two under ZeRO-1 */
  s = base();
  s.dp = 2, s.codec_min_bytes = 1;
  const char *dp = "{\"dp\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}}";
  plan p = load(&s);
  const double P = plan_params_of_stage(&p, 0), enc = P + 8.0 * ceil(P / 128.0);
  CU_ASSERT(P > 14e6 && P < 15e6);
  codec_overhead_delta(s, dp, 0, &got);
  CU_ASSERT_DOUBLE_EQUAL(got, 3.0 * enc, 1e-6);
  s.zero1 = 1;
  codec_overhead_delta(s, dp, 0, &got);
  CU_ASSERT_DOUBLE_EQUAL(got, 2.0 * enc, 1e-6);
  /* a bucket under codec_min_bytes travels uncompressed: nothing held */
  s.codec_min_bytes = 4.0 * P + 1.0;
  codec_overhead_delta(s, dp, 0, &got);
  CU_ASSERT_DOUBLE_EQUAL(got, 0.0, 0.0);
}

/* ---- idle fraction with zero-cost communication ---- */

static void check_idle(spec s, double v) {
  plan p = load(&s);
  plan_program *g = build_all(&p);
  eval_result res = evaluate(&p, g);
  CU_ASSERT_FATAL(res.completed);
  int m = plan_micro_batches(&p);
  double want = (p.pp - 1.0) / (v * m + p.pp - 1.0);
  for (int r = 0; r < plan_world_size(&p); r++) {
    double idle = 1.0 - res.busy[r] / res.makespan;
    if (fabs(idle - want) > 1e-12)
      printf("\n  %s pp %d vpp %d m %d rank %d: idle %.6f, want %.6f\n", s.schedule, p.pp, p.vpp, m, r, idle, want);
    CU_ASSERT_DOUBLE_EQUAL(idle, want, 1e-12);
  }
  free(res.busy);
  free_all(&p, g);
}

/* ---- uneven pipeline stages ---- */

/* With zero-cost communication and each step costing its layers (forward 1,
 * backward 2 per layer), stage s's forward takes L_s and its backward 2 L_s;
 * stage s is busy 3 m L_s. The makespan `want` of each case is worked by
 * hand below. */
static void check_uneven(spec s, int first, int last, double want) {
  char extra[160] = "";
  if (first) snprintf(extra, sizeof extra, ", \"decoder_first_pipeline_num_layers\": %d", first);
  if (last)
    snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"decoder_last_pipeline_num_layers\": %d", last);
  s.layout_extra = extra;
  plan p = load(&s);
  int sum = 0, m = plan_micro_batches(&p);
  for (int st = 0; st < p.pp; st++) sum += plan_stage_layers(&p, st);
  CU_ASSERT_EQUAL(sum, p.layers);
  per_layer_costs = 1;
  plan_program *g = build_all(&p);
  eval_result res = evaluate(&p, g);
  per_layer_costs = 0;
  CU_ASSERT_FATAL(res.completed);
  if (fabs(res.makespan - want) > 1e-9)
    printf("\n  %s pp %d first %d last %d m %d: makespan %.3f, want %.3f\n", s.schedule, p.pp, first, last, m,
           res.makespan, want);
  CU_ASSERT_DOUBLE_EQUAL(res.makespan, want, 1e-9);
  for (int r = 0; r < plan_world_size(&p); r++) {
    int st = plan_coord_of(&p, r).pp;
    CU_ASSERT_DOUBLE_EQUAL(res.busy[r], 3.0 * m * plan_stage_layers(&p, st), 1e-9);
    /* every layer once per micro-batch and direction, each on the stage that holds it */
    int lo = plan_chunk_first_layer(&p, st, 0), hi = lo + plan_stage_layers(&p, st);
    for (int i = 0; i < g[r].n; i++)
      if (g[r].ops[i].layer >= 0) CU_ASSERT(g[r].ops[i].layer >= lo && g[r].ops[i].layer < hi);
  }
  free(res.busy);
  free_all(&p, g);
}

static void test_uneven_stages(void) {
  spec s = base();
  s.pp = 2, s.layers = 4, s.global = 5; /* m = 5 */
  /* L = 1, 3. Stage 0: F0 [0,1]; stage 1: F0 [1,4], B0 [4,10], then F1 (ready at 2), B1, ... back to back, 9 per
   * micro-batch: ends 1 + 9 m; stage 0's last backward 2 more: 9 m + 3 = 48. */
  check_uneven(s, 1, 3, 48);
  /* L = 3, 1. Stage 0 never waits: F0 [0,3], F1 [3,6]; stage 1 F0 [3,4] B0 [4,6]; stage 0 B0 [6,12], F2, B1 (stage 1
   * B1 done at 9), ...: 9 m = 45. */
  check_uneven(s, 3, 0, 45);
  /* GPipe, L = 1, 3: the forward flow shop ends at sum L + (m - 1) max L = 4 + 12 = 16 on stage 1, then the
   * backward one: 2 (3 + 1) + 2 (m - 1) 3 = 32 more: 48. */
  s.schedule = "gpipe";
  check_uneven(s, 1, 3, 48);
  s.schedule = "1f1b";
  s.pp = 4, s.layers = 10, s.global = 6; /* m = 6 */
  /* L = 1, 4, 4, 1: stage 2 gets F0 at 1 + 4 = 5 and then runs back to back (72 = 3 m L), its last backward
   * returns through stages 1 and 0 in 8 + 2: 5 + 72 + 10 = 87. */
  check_uneven(s, 1, 1, 87);
  /* L = 4, 2, 2, 2: stage 0 runs its 4 forwards (warm-up 3 + 1) by 16, its first backward is ready after
   * F: 4 + 2 + 2 + 2, B: 4 + 4 + 4 = 22; then 6 backwards of 8 and 2 forwards of 4 back to back: 22 + 56 = 78. */
  check_uneven(s, 4, 0, 78);
  /* L = 3, 3, 3, 1: stage 2 gets F0 at 6, runs 3 m 3 = 54 back to back, its last backward returns in 6 + 6: 72. */
  check_uneven(s, 0, 1, 72);
  /* even stages through the same path: (m + pp - 1) 3 L = 9 x 6 = 54, the old bubble */
  s.layers = 8;
  check_uneven(s, 0, 0, 54);
}

/* Interleaved with uneven stages: each stage's layers split into its vpp
 * chunks, virtual stage c * pp + s follows c * pp + s - 1 in layer order. */
static void test_uneven_interleaved(void) {
  spec s = base();
  s.pp = 2, s.vpp = 2, s.layers = 8, s.global = 4, s.schedule = "interleaved-1f1b";
  s.layout_extra = ", \"decoder_first_pipeline_num_layers\": 2";
  plan p = load(&s);
  CU_ASSERT_EQUAL(plan_stage_layers(&p, 0), 2);
  CU_ASSERT_EQUAL(plan_stage_layers(&p, 1), 6);
  CU_ASSERT_EQUAL(plan_chunk_layers(&p, 0), 1);
  CU_ASSERT_EQUAL(plan_chunk_layers(&p, 1), 3);
  /* virtual stages 0..3 hold layers {0}, {1,2,3}, {4}, {5,6,7} */
  CU_ASSERT_EQUAL(plan_chunk_first_layer(&p, 0, 0), 0);
  CU_ASSERT_EQUAL(plan_chunk_first_layer(&p, 1, 0), 1);
  CU_ASSERT_EQUAL(plan_chunk_first_layer(&p, 0, 1), 4);
  CU_ASSERT_EQUAL(plan_chunk_first_layer(&p, 1, 1), 5);
  plan_program *g = build_all(&p);
  eval_result res = evaluate(&p, g);
  CU_ASSERT(res.completed);
  free(res.busy);
  free_all(&p, g);
}

/* Megatron-LM's account_for_embedding/loss_in_pipeline_split: layers + 2
 * slots split evenly over the pp x vpp virtual stages, the first and the
 * last holding one layer fewer (0 allowed: the embedding or the loss alone). */
static void test_accounted_split(void) {
  const char *both = ", \"account_for_embedding_in_pipeline_split\": true, \"account_for_loss_in_pipeline_split\": true";
  struct {
    int layers, first[4], count[4];
  } cases[] = {
      {6, {0, 1, 3, 5}, {1, 2, 2, 1}}, /* 8 slots: virtual stages hold {0}, {1,2}, {3,4}, {5} */
      {2, {0, 0, 1, 2}, {0, 1, 1, 0}}, /* 4 slots: the embedding alone, {0}, {1}, the loss alone */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    spec s = base();
    s.pp = 2, s.vpp = 2, s.layers = cases[k].layers, s.global = 4, s.schedule = "interleaved-1f1b";
    s.layout_extra = both;
    plan p = load(&s);
    for (int v = 0; v < 4; v++) {
      int st = v % 2, c = v / 2;
      CU_ASSERT_EQUAL(plan_chunk_first_layer(&p, st, c), cases[k].first[v]);
      CU_ASSERT_EQUAL(plan_vchunk_layers(&p, st, c), cases[k].count[v]);
    }
    CU_ASSERT_EQUAL(plan_stage_layers(&p, 0) + plan_stage_layers(&p, 1), cases[k].layers);
    /* every layer's forward once per micro-batch, on the stage that holds it; the embedding on stage 0, the loss on stage 1 */
    plan_program *g = build_all(&p);
    int m = plan_micro_batches(&p);
    for (int st = 0; st < 2; st++) {
      int fwd_layers = 0, emb = 0, loss = 0;
      for (int i = 0; i < g[st].n; i++) {
        const plan_op *o = &g[st].ops[i];
        if (o->kind != PLAN_OP_COMPUTE || o->phase != PLAN_PHASE_FWD) continue;
        emb += o->model_op == PLAN_MOP_EMBEDDING;
        loss += o->model_op == PLAN_MOP_LOSS;
        if (o->layer >= 0 && o->model_op == 0) { /* the layer's first op */
          int c = o->layer >= plan_chunk_first_layer(&p, st, 1) ? 1 : 0;
          CU_ASSERT(o->layer >= plan_chunk_first_layer(&p, st, c) &&
                    o->layer < plan_chunk_first_layer(&p, st, c) + plan_vchunk_layers(&p, st, c));
          fwd_layers++;
        }
      }
      CU_ASSERT_EQUAL(fwd_layers, plan_stage_layers(&p, st) * m);
      CU_ASSERT_EQUAL(emb, st == 0 ? m : 0);
      CU_ASSERT_EQUAL(loss, st == 1 ? m : 0);
    }
    eval_result res = evaluate(&p, g);
    CU_ASSERT(res.completed);
    free(res.busy);
    free_all(&p, g);
  }
  /* the rules: the slots must split evenly; not with decoder_first/last_pipeline_num_layers */
  struct {
    int layers;
    const char *extra, *field;
  } bad[] = {
      {5, ", \"account_for_embedding_in_pipeline_split\": true, \"account_for_loss_in_pipeline_split\": true",
       "layout.account_for_embedding_in_pipeline_split"},
      {7, ", \"account_for_loss_in_pipeline_split\": true, \"decoder_first_pipeline_num_layers\": 2",
       "layout.account_for_loss_in_pipeline_split"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"schema\":1,\"model\":\"gpt-tiny\",\"cluster\":\"h200x8-nvswitch\",\"layout\":{\"dp\":1,\"tp\":1,"
             "\"pp\":2,\"vpp\":2%s},\"batch\":{\"micro\":1,\"global\":4,\"seq\":256},"
             "\"schedule\":\"interleaved-1f1b\",\"layers_override\":%d}",
             bad[k].extra, bad[k].layers);
    plan p;
    ts_err e = {0};
    CU_ASSERT_EQUAL(plan_from_json_text(buf, strlen(buf), "t.json", NULL, NULL, &p, &e), -1);
    if (!strstr(e.msg, bad[k].field)) printf("\n  %s lacks %s\n", e.msg, bad[k].field);
    CU_ASSERT(strstr(e.msg, bad[k].field) != NULL);
  }
}

/* Memory follows the stage's layers: weights of stage s = its layers' params
 * (+ embedding / head), activations = its chunk's layers x in-flight peak. */
static void test_uneven_memory(void) {
  spec s = base();
  s.pp = 4, s.layers = 10, s.global = 8;
  plan even_p;
  {
    spec e = s;
    e.layers = 8;
    even_p = load(&e);
  }
  s.layout_extra = ", \"decoder_first_pipeline_num_layers\": 1, \"decoder_last_pipeline_num_layers\": 1";
  plan p = load(&s);
  /* a middle stage of the uneven plan holds 4 layers, one of the even one 2: the difference is 2 layers */
  double per_layer = (plan_params_of_stage(&p, 1) - plan_params_of_stage(&even_p, 1)) / 2.0;
  CU_ASSERT(per_layer > 0);
  CU_ASSERT_DOUBLE_EQUAL(plan_params_of_stage(&p, 2), 4 * per_layer, 1e-6 * per_layer);
  plan_memory m1, m2, all;
  CU_ASSERT_EQUAL(plan_memory_of_stage(&p, 1, &m1), 0);
  CU_ASSERT_EQUAL(plan_memory_of_stage(&p, 2, &m2), 0);
  /* same layers, peak pp - s: 3 vs 2 micro-batches in flight (one layer's backward gradients once each) */
  const double bwd = plan_bwd_transient_bytes(&p);
  CU_ASSERT_DOUBLE_EQUAL((m1.activations - bwd) / 3.0, (m2.activations - bwd) / 2.0, 1e-6 * m1.activations);
  CU_ASSERT_EQUAL(plan_memory_per_gpu(&p, &all), 0);
  for (int st = 0; st < p.pp; st++) {
    plan_memory here;
    CU_ASSERT_EQUAL(plan_memory_of_stage(&p, st, &here), 0);
    CU_ASSERT(here.total <= all.total);
  }
}

/* Llama-3 405B (126 layers) plans on PP 8 and PP 16 with uneven stages, and
 * not without them; each rule's failure names its field. */
static void test_uneven_rules(void) {
  static const struct {
    int pp, first, last;
    const char *field; /* NULL: loads */
  } cases[] = {
      {8, 15, 15, NULL},
      {16, 7, 7, NULL},
      {16, 0, 0, "layout.pp"},
      {8, 0, 0, "layout.pp"},
      {8, 14, 14, "decoder_first_pipeline_num_layers"},   /* 98 left over 6 stages */
      {8, 0, 14, "decoder_last_pipeline_num_layers"},     /* 112 over 7 stages: 16 each — loads */
      {1, 5, 0, "decoder_first_pipeline_num_layers"},     /* needs pp >= 2 */
      {2, 126, 0, "decoder_first_pipeline_num_layers"},   /* not less than the layers */
      {2, 100, 30, "decoder_first_pipeline_num_layers"},  /* more than the layers */
      {2, 100, 20, "decoder_first_pipeline_num_layers"},  /* 6 left, no middle stage */
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char buf[2048];
    char extra[160] = "";
    if (cases[k].first) snprintf(extra, sizeof extra, ", \"decoder_first_pipeline_num_layers\": %d", cases[k].first);
    if (cases[k].last)
      snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"decoder_last_pipeline_num_layers\": %d",
               cases[k].last);
    int dp = 128 / cases[k].pp;
    snprintf(buf, sizeof buf,
             "{ \"schema\": 1, \"model\": \"llama3-405b\", \"cluster\": \"h200-1024-rail\",\n"
             "  \"layout\": { \"dp\": %d, \"tp\": 8, \"pp\": %d, \"sequence_parallel\": true, \"zero1\": true,"
             " \"recompute\": \"full\"%s },\n"
             "  \"batch\": { \"micro\": 1, \"global\": %d, \"seq\": 4096 }, \"schedule\": \"1f1b\" }\n",
             dp, cases[k].pp, extra, dp * 16);
    plan p;
    ts_err e = {0};
    int rc = plan_from_json_text(buf, strlen(buf), "u.json", NULL, NULL, &p, &e);
    bool want_ok = !cases[k].field || (cases[k].pp == 8 && cases[k].first == 0 && cases[k].last == 14);
    if (want_ok != (rc == 0)) printf("\n  case %zu: rc %d: %s\n", k, rc, e.msg);
    CU_ASSERT_EQUAL(rc == 0, want_ok);
    if (!want_ok) CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[k].field));
    if (rc == 0 && !cases[k].field) {
      CU_ASSERT_EQUAL(plan_stage_layers(&p, 0), cases[k].first);
      CU_ASSERT_EQUAL(plan_stage_layers(&p, p.pp - 1), cases[k].last);
      CU_ASSERT_EQUAL(plan_stage_layers(&p, 1), cases[k].pp == 8 ? 16 : 8);
      plan_program g;
      CU_ASSERT_EQUAL(plan_build_program(&p, plan_world_size(&p) - 1, &g, &e), 0);
      plan_program_free(&g);
    }
  }
  /* vpp must divide every stage's count */
  spec s = base();
  s.pp = 2, s.vpp = 2, s.layers = 8, s.global = 4, s.schedule = "interleaved-1f1b";
  char buf[4096];
  (void)buf;
  s.layout_extra = ", \"decoder_first_pipeline_num_layers\": 3";
  {
    char text[2048];
    snprintf(text, sizeof text,
             "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\",\n"
             "  \"layout\": { \"dp\": 1, \"tp\": 1, \"pp\": 2, \"vpp\": 2%s },\n"
             "  \"batch\": { \"micro\": 1, \"global\": 4, \"seq\": 256 }, \"schedule\": \"interleaved-1f1b\","
             " \"layers_override\": 8 }\n",
             s.layout_extra);
    plan p;
    ts_err e = {0};
    CU_ASSERT_NOT_EQUAL(plan_from_json_text(text, strlen(text), "u.json", NULL, NULL, &p, &e), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "decoder_first_pipeline_num_layers"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "vpp"));
  }
}

static void test_idle_1f1b(void) {
  const int cases[][2] = {{2, 2}, {2, 8}, {4, 4}, {4, 8}, {4, 13}, {8, 16}, {4, 2}, {8, 3}, {3, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    spec s = base();
    s.pp = cases[k][0], s.layers = cases[k][0], s.global = cases[k][1];
    check_idle(s, 1);
  }
}

static void test_idle_gpipe(void) {
  spec s = base();
  s.pp = 4, s.layers = 4, s.global = 6, s.schedule = "gpipe";
  check_idle(s, 1);
}

static void test_idle_interleaved(void) {
  const int cases[][3] = {{2, 2, 4}, {2, 2, 8}, {4, 2, 8}, {4, 3, 12}, {2, 4, 4}, {4, 2, 4}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    spec s = base();
    s.schedule = "interleaved-1f1b";
    s.pp = cases[k][0], s.vpp = cases[k][1], s.global = cases[k][2];
    s.layers = s.pp * s.vpp;
    check_idle(s, s.vpp);
  }
}

/* ---- well-formed programs ---- */

static void check_well_formed(const plan *p) {
  plan_program *g = build_all(p);
  int world = plan_world_size(p);
  for (int r = 0; r < world; r++) {
    for (int i = 0; i < g[r].n; i++) {
      const plan_op *op = &g[r].ops[i];
      for (int d = 0; d < PLAN_MAX_DEPS; d++) CU_ASSERT(op->dep[d] >= -1 && op->dep[d] < i);
      CU_ASSERT(op->stream < PLAN_STREAM_COUNT);
      CU_ASSERT(isfinite(op->flops) && isfinite(op->bytes) && op->flops >= 0 && op->bytes >= 0);
      if (op->kind == PLAN_OP_COMPUTE) CU_ASSERT_EQUAL(op->stream, PLAN_STREAM_COMPUTE);
      if (op->kind != PLAN_OP_COMPUTE) CU_ASSERT(op->wire_bytes > 0 && op->wire_bytes <= op->bytes * 1.0001);
      if (op->kind != PLAN_OP_SEND) continue;
      /* exactly one matching recv, same size */
      CU_ASSERT_FATAL(op->peer >= 0 && op->peer < world && op->peer != r);
      int matches = 0;
      const plan_program *q = &g[op->peer];
      for (int j = 0; j < q->n; j++)
        if (q->ops[j].kind == PLAN_OP_RECV && q->ops[j].peer == r && q->ops[j].tag == op->tag) {
          matches++;
          CU_ASSERT_EQUAL(q->ops[j].bytes, op->bytes);
          CU_ASSERT_EQUAL(q->ops[j].wire_bytes, op->wire_bytes);
        }
      CU_ASSERT_EQUAL(matches, 1);
    }
    /* and every recv has its send */
    int sends = 0, recvs = 0;
    for (int i = 0; i < g[r].n; i++) {
      sends += g[r].ops[i].kind == PLAN_OP_SEND;
      recvs += g[r].ops[i].kind == PLAN_OP_RECV;
    }
    CU_ASSERT_EQUAL(sends, recvs); /* each stage sends as many messages as it receives */
  }
  /* the ranks of a stage run one program up to their peers (plan_program_same_shifted: what the simulator keeps
   * once per stage); another stage's differs */
  for (int r = 0; r < world; r++) {
    plan_coord c = plan_coord_of(p, r);
    c.dp = c.tp = c.cp = 0;
    int rep = plan_rank_of(p, c);
    CU_ASSERT(plan_program_same_shifted(&g[rep], &g[r]));
    c.pp = (c.pp + 1) % p->pp;
    if (p->pp > 1) CU_ASSERT(!plan_program_same_shifted(&g[plan_rank_of(p, c)], &g[r]));
  }
  eval_result res = evaluate(p, g);
  if (!res.completed) printf("\n  %s: the programs deadlock\n", p->name);
  CU_ASSERT(res.completed);
  free(res.busy);
  free_all(p, g);
}

static void test_program_variants(void) {
  spec variants[12];
  int n = 0;
  spec s = base();
  s.dp = 2, s.tp = 2, s.pp = 2, s.global = 8, s.layers = 4;
  variants[n++] = s;
  s.sp = 1, s.zero1 = 1, s.recompute = "full";
  variants[n++] = s;
  s.sp = 0, s.zero1 = 0, s.recompute = "selective", s.schedule = "interleaved-1f1b", s.vpp = 2;
  variants[n++] = s;
  s = base();
  s.tp = 2, s.pp = 4, s.layers = 8, s.global = 8, s.schedule = "gpipe";
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.5},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0.5}}";
  variants[n++] = s;
  s = base();
  s.dp = 4, s.pp = 2, s.layers = 4, s.global = 16, s.zero1 = 1, s.order = "tp-pp-dp", s.codec_min_bytes = 1;
  s.codec = "{\"pp\":{\"kind\":\"taco\",\"group\":64,\"fp8\":\"e5m2\"},\"dp\":{\"kind\":\"taco\",\"group\":256,"
            "\"fp8\":\"e4m3\"}}";
  variants[n++] = s;
  s = base(); /* GQA, SwiGLU, RMSNorm, RoPE, untied embeddings */
  s.model = "llama3-8b", s.layers = 4, s.tp = 2, s.pp = 2, s.dp = 2, s.global = 8, s.sp = 1;
  variants[n++] = s;
  s = base(); /* pp_scatter_gather (1F1B, interleaved with PP TACO) and bf16 gradients with ZeRO-1 */
  s.dp = 2, s.tp = 2, s.pp = 2, s.global = 8, s.layers = 4, s.pp_sg = 1, s.grad_bf16 = 1, s.zero1 = 1;
  variants[n++] = s;
  s.schedule = "interleaved-1f1b", s.vpp = 2, s.recompute = "full", s.codec_min_bytes = 1;
  s.codec = "{\"pp\":{\"kind\":\"taco\",\"group\":64,\"fp8\":\"e4m3\"},\"dp\":{\"kind\":\"taco\",\"group\":128,"
            "\"fp8\":\"e4m3\"}}";
  variants[n++] = s;
  s = base();
  s.tp = 4, s.pp = 2, s.layers = 4, s.global = 8, s.schedule = "gpipe", s.pp_sg = 1;
  variants[n++] = s;
  for (int k = 0; k < n; k++) {
    plan p = load(&variants[k]);
    check_well_formed(&p);
  }
}

/* plan_program_same_shifted: equal up to the peers moved by the ranks' distance, and nothing else. */
static void test_same_shifted(void) {
  spec s = base();
  s.dp = 2, s.tp = 2, s.pp = 2, s.global = 8, s.layers = 4;
  plan p = load(&s);
  plan_program *g = build_all(&p);
  plan_coord c = {.dp = 1, .tp = 1, .pp = 1};
  int a = plan_rank_of(&p, (plan_coord){.pp = 1}), b = plan_rank_of(&p, c);
  CU_ASSERT(plan_program_same_shifted(&g[a], &g[b]));
  CU_ASSERT(plan_program_same_shifted(&g[b], &g[a]));
  int send = -1, comp = -1;
  for (int i = 0; i < g[b].n; i++) {
    if (send < 0 && g[b].ops[i].kind == PLAN_OP_SEND) send = i;
    if (comp < 0 && g[b].ops[i].kind == PLAN_OP_COMPUTE) comp = i;
  }
  CU_ASSERT_FATAL(send >= 0 && comp >= 0);
  g[b].ops[send].peer++; /* a peer off by one */
  CU_ASSERT(!plan_program_same_shifted(&g[a], &g[b]));
  g[b].ops[send].peer--;
  g[b].ops[comp].bytes *= 1.5; /* another op's size */
  CU_ASSERT(!plan_program_same_shifted(&g[a], &g[b]));
  g[b].ops[comp].bytes /= 1.5;
  CU_ASSERT(plan_program_same_shifted(&g[a], &g[b]));
  g[b].n--; /* a shorter program */
  CU_ASSERT(!plan_program_same_shifted(&g[a], &g[b]));
  g[b].n++;
  free_all(&p, g);
}

/* tp_overlap_chunks: 1 builds today's program bit for bit; k > 1 splits each
 * forward row-parallel GEMM and its all-reduce into k row chunks whose FLOPs,
 * memory bytes and payload bytes add up to the unsplit op's exactly, each
 * all-reduce depends on its chunk's GEMM only, the next GEMM chunk does not
 * wait for it, and the residual waits for the last one; the backward and
 * the model FLOPs do not change. Combinations it does not support are refused. */
static void test_tp_overlap_chunks(void) {
  spec s = base(); /* gpt-tiny: 256 tokens per micro-batch */
  s.tp = 2, s.pp = 2, s.global = 8, s.layers = 4;
  plan p0 = load(&s);
  s.tp_overlap = 1;
  plan p1 = load(&s);
  CU_ASSERT_EQUAL(p1.tp_overlap_chunks, 1);
  for (int r = 0; r < plan_world_size(&p0); r++) {
    plan_program a, b;
    ts_err e = {0};
    CU_ASSERT_FATAL(plan_build_program(&p0, r, &a, &e) == 0 && plan_build_program(&p1, r, &b, &e) == 0);
    CU_ASSERT_EQUAL(a.n, b.n);
    CU_ASSERT(a.n == b.n && memcmp(a.ops, b.ops, (size_t)a.n * sizeof *a.ops) == 0);
    plan_program_free(&a), plan_program_free(&b);
  }
  const int ks[] = {2, 4};
  for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
    const int k = ks[t];
    s.tp_overlap = k;
    plan pk = load(&s);
    check_well_formed(&pk);
    CU_ASSERT_DOUBLE_EQUAL(plan_model_flops(&pk), plan_model_flops(&p0), 0);
    for (int r = 0; r < plan_world_size(&pk); r++) {
      plan_program a, g;
      ts_err e = {0};
      CU_ASSERT_FATAL(plan_build_program(&p0, r, &a, &e) == 0 && plan_build_program(&pk, r, &g, &e) == 0);
      /* per forward row-parallel op of the unsplit program: its k chunks in the split one */
      int split_ops = 0, j = 0, bwd_a = 0, bwd_g = 0;
      for (int i = 0; i < a.n; i++) bwd_a += a.ops[i].phase == PLAN_PHASE_BWD;
      for (int i = 0; i < g.n; i++) bwd_g += g.ops[i].phase == PLAN_PHASE_BWD;
      CU_ASSERT_EQUAL(bwd_a, bwd_g);
      for (int i = 0; i < a.n; i++, j++) {
        CU_ASSERT_FATAL(j < g.n);
        const plan_op *o = &a.ops[i];
        const bool row = o->kind == PLAN_OP_COMPUTE && o->phase == PLAN_PHASE_FWD && i + 1 < a.n &&
                         a.ops[i + 1].kind == PLAN_OP_COLLECTIVE && a.ops[i + 1].coll == PLAN_COLL_ALLREDUCE &&
                         a.ops[i + 1].model_op == o->model_op && o->model_op >= 0;
        if (!row) {
          CU_ASSERT_EQUAL(g.ops[j].kind, o->kind);
          CU_ASSERT_EQUAL(g.ops[j].model_op, o->model_op);
          CU_ASSERT_EQUAL(g.ops[j].row_chunks, 0);
          CU_ASSERT_EQUAL(g.ops[j].flops, o->flops);
          CU_ASSERT_EQUAL(g.ops[j].bytes, o->bytes);
          continue;
        }
        const plan_op *ar = &a.ops[i + 1];
        double flops = 0, bytes = 0, comm = 0, wire = 0;
        for (int c = 0; c < k; c++) {
          const plan_op *gc = &g.ops[j + 2 * c], *gr = &g.ops[j + 2 * c + 1];
          CU_ASSERT_EQUAL(gc->kind, PLAN_OP_COMPUTE);
          CU_ASSERT_EQUAL(gr->kind, PLAN_OP_COLLECTIVE);
          CU_ASSERT_EQUAL(gr->stream, PLAN_STREAM_TP);
          CU_ASSERT(gc->model_op == o->model_op && gr->model_op == o->model_op);
          CU_ASSERT(gc->row_chunk == c && gr->row_chunk == c && gc->row_chunks == k && gr->row_chunks == k);
          CU_ASSERT_EQUAL(gr->dep[0], j + 2 * c); /* its own chunk's GEMM, nothing else */
          CU_ASSERT_EQUAL(gr->dep[1], -1);
          for (int d = 0; d < PLAN_MAX_DEPS && c > 0; d++) CU_ASSERT(gc->dep[d] != j + 2 * c - 1);
          flops += gc->flops, bytes += gc->bytes, comm += gr->bytes, wire += gr->wire_bytes;
        }
        CU_ASSERT_EQUAL(flops, o->flops);
        CU_ASSERT_EQUAL(bytes, o->bytes);
        CU_ASSERT_EQUAL(comm, ar->bytes);
        CU_ASSERT_EQUAL(wire, ar->wire_bytes);
        /* the consumer (the residual, next compute op) waits for the last chunk's all-reduce */
        const int last_ar = j + 2 * k - 1, next = j + 2 * k;
        CU_ASSERT_FATAL(next < g.n);
        int found = 0;
        for (int d = 0; d < PLAN_MAX_DEPS; d++) found |= g.ops[next].dep[d] == last_ar;
        CU_ASSERT(found);
        split_ops++;
        i += 1;         /* past the unsplit all-reduce */
        j += 2 * k - 1; /* past the chunks (the loop adds 1) */
      }
      CU_ASSERT_EQUAL(j, g.n);
      /* 2 row-parallel GEMMs per layer and micro-batch on this stage (2 layers) */
      CU_ASSERT_EQUAL(split_ops, 2 * (s.layers / s.pp) * plan_micro_batches(&pk));
      char name[128];
      for (int i = 0; i < g.n; i++)
        if (g.ops[i].row_chunks > 1 && g.ops[i].row_chunk == 1) {
          plan_op_name(&pk, &g.ops[i], name, sizeof name);
          CU_ASSERT_PTR_NOT_NULL(strstr(name, ".rows2of"));
          break;
        }
      plan_program_free(&a), plan_program_free(&g);
    }
  }
  /* refused: SP, a compressed tp_fwd, TP 1, tokens not divisible */
  const char *bad[][2] = {{"sp", "sequence_parallel"}, {"caat", "caat"}, {"taco", "taco"}, {"tp1", "tp >= 2"},
                          {"k3", "does not divide"}};
  for (size_t t = 0; t < sizeof bad / sizeof *bad; t++) {
    spec b = base();
    b.tp = 2, b.global = 4, b.tp_overlap = 2;
    if (!strcmp(bad[t][0], "sp")) b.sp = 1;
    if (!strcmp(bad[t][0], "caat"))
      b.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.5},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0.5}}";
    if (!strcmp(bad[t][0], "taco")) b.codec = "{\"tp_fwd\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}}";
    if (!strcmp(bad[t][0], "tp1")) b.tp = 1;
    if (!strcmp(bad[t][0], "k3")) b.tp_overlap = 3;
    char buf[2048];
    snprintf(buf, sizeof buf,
             "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\",\n"
             "  \"layout\": { \"dp\": 1, \"tp\": %d, \"pp\": 1, \"sequence_parallel\": %s, "
             "\"tp_overlap_chunks\": %d },\n"
             "  \"batch\": { \"micro\": 1, \"global\": 4, \"seq\": 256 }, \"schedule\": \"1f1b\", \"codec\": %s }\n",
             b.tp, b.sp ? "true" : "false", b.tp_overlap, b.codec);
    plan q;
    ts_err e = {0};
    CU_ASSERT_NOT_EQUAL(plan_from_json_text(buf, strlen(buf), "t.json", NULL, NULL, &q, &e), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "tp_overlap_chunks"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[t][1]));
    if (!strstr(e.msg, bad[t][1])) printf("\n  %s: %s\n", bad[t][0], e.msg);
  }
}

/* ---- bytes ---- */

static void test_taco_wire_bytes(void) {
  const int groups[] = {32, 64, 128, 256, 512};
  for (int k = 0; k < 5; k++) {
    double bf16 = 2.0 * 1024 * 1024 * 8; /* a multiple of every group */
    double ratio = plan_taco_wire_bytes(bf16, groups[k]) / bf16;
    CU_ASSERT_DOUBLE_EQUAL(ratio, (1.0 + 8.0 / groups[k]) / 2.0, 1e-12);
  }
  plan_codec c = {.kind = PLAN_CODEC_TACO, .group = 128};
  CU_ASSERT_DOUBLE_EQUAL(plan_codec_wire_bytes(&c, 4.0 * 1280, 4), 1280 + 8.0 * 10, 1e-9);
  c.kind = PLAN_CODEC_NONE;
  CU_ASSERT_DOUBLE_EQUAL(plan_codec_wire_bytes(&c, 1000, 2), 1000, 0);

  /* in a program: every TACO-coded TP message shrinks by (1 + 8/G)/2 */
  plan p = load_file("gpt-h4096-tp2-taco");
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int coded = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind != PLAN_OP_COLLECTIVE || op->group != PLAN_GROUP_TP) continue;
    if (op->codec.kind == PLAN_CODEC_TACO) {
      CU_ASSERT_DOUBLE_EQUAL(op->wire_bytes / op->bytes, (1.0 + 8.0 / op->codec.group) / 2.0, 1e-12);
      CU_ASSERT(op->bytes >= p.codec_min_bytes);
      coded++;
    } else {
      CU_ASSERT(op->bytes < p.codec_min_bytes); /* only small ones travel raw */
      CU_ASSERT_EQUAL(op->wire_bytes, op->bytes);
    }
  }
  CU_ASSERT(coded > 0);
  plan_program_free(&g);
}

static void test_caat_halves_forward_allreduce(void) {
  plan none = load_file("gpt-h4096-tp2-none"), caat = load_file("gpt-h4096-tp2-caat"),
       both = load_file("gpt-h4096-tp2-taco-caat");
  plan_program gn, gc, gb;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&none, 0, &gn, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&caat, 0, &gc, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&both, 0, &gb, &e), 0);
  double layer_n = 0, layer_c = 0, layer_b = 0, bwd_n = 0, bwd_c = 0;
  int norm_grads = 0;
  for (int i = 0; i < gc.n; i++) {
    const plan_op *op = &gc.ops[i];
    if (op->kind == PLAN_OP_COLLECTIVE && op->model_op == PLAN_MOP_NORM_GRADS) norm_grads++;
    if (op->kind != PLAN_OP_COLLECTIVE || op->layer < 0) continue;
    if (op->phase == PLAN_PHASE_FWD) {
      CU_ASSERT_EQUAL(op->codec.kind, PLAN_CODEC_CAAT);
      CU_ASSERT_DOUBLE_EQUAL(op->wire_bytes, op->bytes / 2, 0);
      layer_c += op->wire_bytes;
    } else { /* input gradient: the p-fraction of channels in fp32 */
      CU_ASSERT_DOUBLE_EQUAL(op->wire_bytes, op->bytes * 0.5 * 2, 0);
      bwd_c += op->wire_bytes;
    }
  }
  for (int i = 0; i < gn.n; i++) {
    const plan_op *op = &gn.ops[i];
    if (op->kind != PLAN_OP_COLLECTIVE || op->layer < 0) continue;
    if (op->phase == PLAN_PHASE_FWD) layer_n += op->wire_bytes;
    else bwd_n += op->wire_bytes;
  }
  for (int i = 0; i < gb.n; i++) {
    const plan_op *op = &gb.ops[i];
    if (op->kind == PLAN_OP_COLLECTIVE && op->layer >= 0 && op->phase == PLAN_PHASE_FWD) {
      CU_ASSERT_EQUAL(op->codec.kind, PLAN_CODEC_TACO_CAAT);
      layer_b += op->wire_bytes;
    }
  }
  CU_ASSERT(layer_n > 0);
  CU_ASSERT_DOUBLE_EQUAL(layer_c, layer_n / 2, 1e-6 * layer_n);
  CU_ASSERT_DOUBLE_EQUAL(layer_b, layer_n / 2 * (1 + 8.0 / 128) / 2, 1e-6 * layer_n);
  CU_ASSERT_DOUBLE_EQUAL(bwd_c, bwd_n, 1e-6 * bwd_n); /* p = 0.5 in fp32: as many bytes as bf16 */
  CU_ASSERT_EQUAL(norm_grads, 1);
  /* the same ops, only sizes differ */
  CU_ASSERT_EQUAL(gn.n + 1, gc.n);
  plan_program_free(&gn);
  plan_program_free(&gc);
  plan_program_free(&gb);
}

static void test_codec_min_bytes(void) {
  spec s = base();
  s.tp = 2, s.global = 2, s.codec_min_bytes = 1e12;
  s.codec = "{\"tp_fwd\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}}";
  plan p = load(&s);
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  for (int i = 0; i < g.n; i++) {
    CU_ASSERT_EQUAL(g.ops[i].codec.kind, PLAN_CODEC_NONE);
    if (g.ops[i].kind != PLAN_OP_COMPUTE) CU_ASSERT_EQUAL(g.ops[i].wire_bytes, g.ops[i].bytes);
  }
  plan_program_free(&g);
}

/* ---- structure ---- */

static int count(const plan_program *g, int kind, int coll, int phase) {
  int n = 0;
  for (int i = 0; i < g->n; i++)
    if (g->ops[i].kind == kind && (coll < 0 || g->ops[i].coll == coll) && (phase < 0 || g->ops[i].phase == phase))
      n++;
  return n;
}

static void test_tp_collectives_and_sp(void) {
  spec s = base(); /* gpt-tiny, 2 layers */
  s.tp = 2, s.pp = 2, s.global = 4;
  plan p = load(&s);
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0); /* stage 0: layer 0 + embedding */
  int m = plan_micro_batches(&p);
  /* forward: 2 per layer + embedding; backward: 2 per layer (qkv, fc1 input grads) */
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COLLECTIVE, PLAN_COLL_ALLREDUCE, PLAN_PHASE_FWD), m * 3);
  /* + the tied embedding's gradient all-reduce with the last stage */
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COLLECTIVE, PLAN_COLL_ALLREDUCE, PLAN_PHASE_BWD), m * 2 + 1);
  /* a forward TP collective blocks the next compute op */
  for (int i = 0; i < g.n; i++) {
    if (g.ops[i].kind != PLAN_OP_COLLECTIVE || g.ops[i].phase != PLAN_PHASE_FWD) continue;
    int j = i + 1;
    while (j < g.n && g.ops[j].kind != PLAN_OP_COMPUTE) j++;
    CU_ASSERT_FATAL(j < g.n);
    int found = 0;
    for (int d = 0; d < PLAN_MAX_DEPS; d++) found |= g.ops[j].dep[d] == i;
    CU_ASSERT(found);
  }
  /* sends carry the whole activation */
  for (int i = 0; i < g.n; i++)
    if (g.ops[i].kind == PLAN_OP_SEND) CU_ASSERT_DOUBLE_EQUAL(g.ops[i].bytes, 2.0 * 256 * 256, 0);
  plan_program_free(&g);

  s.sp = 1;
  p = load(&s);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COLLECTIVE, PLAN_COLL_ALLREDUCE, PLAN_PHASE_FWD), 0);
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COLLECTIVE, PLAN_COLL_ALLGATHER, PLAN_PHASE_FWD), m * 2);
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COLLECTIVE, PLAN_COLL_REDUCESCATTER, PLAN_PHASE_FWD), m * 3);
  /* backward: AG of the gradient before each row GEMM, AG of the input for
   * each column GEMM's wgrad, AG of the embedding's gradient; RS of input grads */
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COLLECTIVE, PLAN_COLL_ALLGATHER, PLAN_PHASE_BWD), m * 5);
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COLLECTIVE, PLAN_COLL_REDUCESCATTER, PLAN_PHASE_BWD), m * 2);
  for (int i = 0; i < g.n; i++)
    if (g.ops[i].kind == PLAN_OP_SEND) CU_ASSERT_DOUBLE_EQUAL(g.ops[i].bytes, 2.0 * 256 * 256 / 2, 0);
  plan_program_free(&g);
}

static void test_dp_buckets_and_zero1(void) {
  spec s = base();
  s.model = "gpt3-125m";
  s.dp = 2, s.pp = 2, s.global = 8, s.seq = 128;
  plan p = load(&s);
  p.dp_bucket_bytes = 4.0 * 20e6; /* force a few buckets */
  for (int zero1 = 0; zero1 <= 1; zero1++) {
    p.zero1 = zero1;
    for (int stage = 0; stage < 2; stage++) {
      plan_program g;
      ts_err e = {0};
      CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, plan_rank_of(&p, (plan_coord){0, 0, stage}), &g, &e), 0);
      double grads = 0;
      int buckets = 0, gathers = 0;
      for (int i = 0; i < g.n; i++) {
        const plan_op *op = &g.ops[i];
        if (op->model_op == PLAN_MOP_GRAD_BUCKET) {
          buckets++;
          grads += op->bytes;
          CU_ASSERT_EQUAL(op->coll, zero1 ? PLAN_COLL_REDUCESCATTER : PLAN_COLL_ALLREDUCE);
          CU_ASSERT_EQUAL(op->stream, PLAN_STREAM_DP);
          /* starts right after the last micro-batch's backward of its layers */
          const plan_op *d = &g.ops[op->dep[0]];
          CU_ASSERT(d->kind == PLAN_OP_COMPUTE && d->phase == PLAN_PHASE_BWD && d->micro == plan_micro_batches(&p) - 1);
        }
        if (op->model_op == PLAN_MOP_PARAM_GATHER) gathers++;
      }
      CU_ASSERT(buckets >= 2);
      CU_ASSERT_EQUAL(gathers, zero1 ? buckets : 0);
      CU_ASSERT_DOUBLE_EQUAL(grads, 4.0 * plan_params_of_stage(&p, stage), 1e-6 * grads);
      /* overlap: the first bucket goes before the last backward compute op */
      int first_bucket = -1, last_bwd = -1;
      for (int i = 0; i < g.n; i++) {
        if (g.ops[i].model_op == PLAN_MOP_GRAD_BUCKET && first_bucket < 0) first_bucket = i;
        if (g.ops[i].kind == PLAN_OP_COMPUTE && g.ops[i].phase == PLAN_PHASE_BWD) last_bwd = i;
      }
      CU_ASSERT(first_bucket >= 0 && first_bucket < last_bwd);
      plan_program_free(&g);
    }
  }
}

static void test_recompute(void) {
  spec s = base();
  s.tp = 2, s.global = 2;
  plan p = load(&s);
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int layer_fwd = 0, fwd_tp = 0;
  for (int i = 0; i < g.n; i++) {
    layer_fwd += g.ops[i].kind == PLAN_OP_COMPUTE && g.ops[i].phase == PLAN_PHASE_FWD && g.ops[i].layer >= 0;
    fwd_tp += g.ops[i].kind == PLAN_OP_COLLECTIVE && g.ops[i].phase == PLAN_PHASE_FWD && g.ops[i].layer >= 0;
  }
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COMPUTE, -1, PLAN_PHASE_RECOMPUTE), 0);
  plan_program_free(&g);
  p.recompute = MODEL_RECOMPUTE_FULL;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COMPUTE, -1, PLAN_PHASE_RECOMPUTE), layer_fwd);
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COLLECTIVE, -1, PLAN_PHASE_RECOMPUTE), fwd_tp);
  /* each layer's recompute comes right before its backward */
  for (int i = 1; i < g.n; i++)
    if (g.ops[i].kind == PLAN_OP_COMPUTE && g.ops[i].phase == PLAN_PHASE_BWD && g.ops[i].layer >= 0) {
      int j = i - 1;
      while (j >= 0 && g.ops[j].layer == g.ops[i].layer && g.ops[j].phase == PLAN_PHASE_BWD) j--;
      CU_ASSERT(j >= 0 && g.ops[j].layer == g.ops[i].layer && g.ops[j].phase == PLAN_PHASE_RECOMPUTE);
    }
  plan_program_free(&g);
  p.recompute = MODEL_RECOMPUTE_SELECTIVE;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_COMPUTE, -1, PLAN_PHASE_RECOMPUTE), p.layers * plan_micro_batches(&p));
  plan_program_free(&g);
}

/* Qwen3's QK norm in the program (models/qwen3-tiny: 2 layers, head_dim 128, qk_norm) at TP 2 without SP, one
 * micro-batch: q_norm and k_norm run forward and backward in each layer, their weight gradients (2 x 128 per
 * layer, fp32) are summed over TP in one norm-gradient all-reduce of 2 layers x 256 x 4 = 2,048 bytes (none
 * without the QK norm); full recomputation reruns them, recompute_modules "layernorm" does not (ln1 and ln2
 * only, as Megatron-Core's module). */
static void test_qk_norm_program(void) {
  spec s = base();
  s.model = "qwen3-tiny", s.tp = 2, s.global = 1, s.seq = 512;
  plan p = load(&s);
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  char name[128];
  int qk_fwd = 0, qk_bwd = 0, norm_grads = 0;
  double norm_bytes = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind == PLAN_OP_COLLECTIVE && op->model_op == PLAN_MOP_NORM_GRADS) norm_grads++, norm_bytes += op->bytes;
    if (op->kind != PLAN_OP_COMPUTE || op->layer < 0) continue;
    plan_op_name(&p, op, name, sizeof name);
    if (strstr(name, "q_norm") || strstr(name, "k_norm")) *(op->phase == PLAN_PHASE_FWD ? &qk_fwd : &qk_bwd) += 1;
  }
  CU_ASSERT_EQUAL(qk_fwd, 2 * 2);
  CU_ASSERT_EQUAL(qk_bwd, 2 * 2);
  CU_ASSERT_EQUAL(norm_grads, 1);
  CU_ASSERT_EQUAL(norm_bytes, 2048.0);
  plan_program_free(&g);
  p.recompute = MODEL_RECOMPUTE_FULL;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int rc_qk = 0;
  for (int i = 0; i < g.n; i++) {
    if (g.ops[i].kind != PLAN_OP_COMPUTE || g.ops[i].phase != PLAN_PHASE_RECOMPUTE) continue;
    plan_op_name(&p, &g.ops[i], name, sizeof name);
    rc_qk += strstr(name, "q_norm") || strstr(name, "k_norm");
  }
  CU_ASSERT_EQUAL(rc_qk, 2 * 2);
  plan_program_free(&g);
  s.recompute = "selective";
  s.layout_extra = ", \"recompute_modules\": [\"layernorm\"]";
  p = load(&s);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int rc_norms = 0;
  rc_qk = 0;
  for (int i = 0; i < g.n; i++) {
    if (g.ops[i].kind != PLAN_OP_COMPUTE || g.ops[i].phase != PLAN_PHASE_RECOMPUTE) continue;
    plan_op_name(&p, &g.ops[i], name, sizeof name);
    rc_qk += strstr(name, "q_norm") || strstr(name, "k_norm");
    rc_norms += strstr(name, "ln1") || strstr(name, "ln2");
  }
  CU_ASSERT_EQUAL(rc_qk, 0);
  CU_ASSERT_EQUAL(rc_norms, 2 * 2);
  plan_program_free(&g);
  s = base(); /* the same layout without the QK norm: no norm-gradient all-reduce (no SP, no CAAT-Net) */
  s.tp = 2, s.global = 1;
  p = load(&s);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  norm_grads = 0;
  for (int i = 0; i < g.n; i++) norm_grads += g.ops[i].kind == PLAN_OP_COLLECTIVE && g.ops[i].model_op == PLAN_MOP_NORM_GRADS;
  CU_ASSERT_EQUAL(norm_grads, 0);
  plan_program_free(&g);
}

static void test_memory(void) {
  plan p = load_file("gpt3-175b-1024");
  plan_memory with, without;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &with), 0);
  p.zero1 = false;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &without), 0);
  CU_ASSERT_DOUBLE_EQUAL(without.optimizer / with.optimizer, p.dp, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(with.weights, 2.0 * plan_params_of_stage(&p, 0), 1);
  CU_ASSERT_DOUBLE_EQUAL(with.gradients, 4.0 * plan_params_of_stage(&p, 0), 1);
  /* 1F1B: the first stage keeps pp micro-batches of its layers in flight */
  model_shard sh = {p.tp, p.sequence_parallel, p.micro_batch, p.seq};
  /* fused attention (the default): no s x s scores, the fp32 row log-sum-exp instead */
  double layer = model_activation_bytes_per_layer(&p.model, &sh, MODEL_RECOMPUTE_SELECTIVE) +
                 4.0 * p.micro_batch * p.seq * p.model.heads / p.tp;
  /* plus one layer's backward gradients, once (plan_bwd_transient_bytes) */
  CU_ASSERT_DOUBLE_EQUAL(with.activations, layer * plan_layers_per_chunk(&p) * p.pp + plan_bwd_transient_bytes(&p), 1);
  CU_ASSERT(with.overhead > 1.0 * 1073741824.0 && with.overhead < 3.0 * 1073741824.0);
  CU_ASSERT_DOUBLE_EQUAL(with.total, with.weights + with.gradients + with.optimizer + with.activations + with.overhead, 1);
  p.attention_backend = PLAN_ATTENTION_UNFUSED; /* unfused keeps the scores: Megatron-LM's 5 a s per token */
  plan_memory unfused;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &unfused), 0);
  CU_ASSERT_DOUBLE_EQUAL(unfused.activations,
                         model_activation_bytes_per_layer(&p.model, &sh, MODEL_RECOMPUTE_NONE) *
                                 plan_layers_per_chunk(&p) * p.pp +
                             plan_bwd_transient_bytes(&p),
                         1);
  p.attention_backend = PLAN_ATTENTION_FUSED;
  /* the largest stage decides; the whole model's weights are all there */
  double total = 0;
  for (int s = 0; s < p.pp; s++) total += plan_params_of_stage(&p, s) * p.tp;
  double vocab_copy = (double)p.vocab_padded * p.model.hidden; /* the last stage's tied copy */
  double padding = (double)(p.vocab_padded - p.model.vocab) * p.model.hidden;
  /* norms, row-parallel biases and the position embedding are replicated on
   * each TP rank: (tp - 1) extra copies of those few parameters */
  const model_config *mc = &p.model;
  double replicated = (p.tp - 1.0) * (mc->layers * 6.0 * mc->hidden + (double)mc->max_seq * mc->hidden + 2.0 * mc->hidden);
  CU_ASSERT_DOUBLE_EQUAL(total - vocab_copy - padding - replicated, model_params_total(mc), 1e-6 * total);
  plan_memory worst;
  CU_ASSERT_EQUAL(plan_memory_per_gpu(&p, &worst), 0);
  CU_ASSERT(worst.total >= without.total - 1);
  CU_ASSERT(worst.total < p.cluster.gpu.hbm_gib * 1073741824.0);
  p.recompute = MODEL_RECOMPUTE_FULL;
  plan_memory full;
  CU_ASSERT_EQUAL(plan_memory_of_stage(&p, 0, &full), 0);
  CU_ASSERT(full.activations < without.activations / 5);
}

/* One layer's backward gradients at their peak (plan_bwd_transient_bytes), by hand on gpt-tiny (h 256,
 * ffn 1024, GELU; micro 1 x seq 256 = T 256 tokens; 2 B each), per token of the walk through the MLP:
 * fc2's backward (dy h_s + hidden dropout's masked gradient h_s + SP's gathered dy h + the activation's
 * gradient f_t), the activation's (dy h_s + g f_t), fc1's (dy h_s + its input gradient h, under SP
 * + gathered input h + scattered h / tp, less the released f_t):
 *   TP 1, dropout 0.1: fc2 256 + 256 + 1024 = 1536, act 1280, fc1 -512: 2 x 256 x 1536 = 786432.
 *   TP 2 + SP: fc2 128 + 128 + 256 + 512 = 1024, act 640, fc1 128 + 512 + 128 - 512 = 256: 524288.
 *   TP 1, no dropout, SwiGLU (g 2): fc2 1280, act 256 + 2048 = 2304, fc1 -512: 1179648.
 * The stage's activations carry it once (test_memory_head_gpipe: GPipe and 1F1B at PP 1 differ by the
 * held tensors only). */
static void test_memory_bwd_transient(void) {
  spec s = base();
  plan p = load(&s);
  CU_ASSERT_DOUBLE_EQUAL(plan_bwd_transient_bytes(&p), 786432.0, 1e-6);
  plan_memory m;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &m), 0);
  CU_ASSERT(m.activations > plan_bwd_transient_bytes(&p));
  plan q = p;
  q.hidden_dropout = 0.0, q.model.activation = MODEL_ACT_SWIGLU;
  CU_ASSERT_DOUBLE_EQUAL(plan_bwd_transient_bytes(&q), 1179648.0, 1e-6);
  s.tp = 2, s.sp = 1;
  p = load(&s);
  CU_ASSERT_DOUBLE_EQUAL(plan_bwd_transient_bytes(&p), 524288.0, 1e-6);
}

/* The output layer's held bytes, by hand (gpt-tiny: h 256, vocab 50257 padded to 50304 per 128 x tp,
 * LayerNorm; micro 1 x seq 256 = 256 tokens): the fp32 softmax, 4 B x 256 x 50304 = 51511296, and the
 * final norm's input and output (2 x 2 B x 256 x 256 = 262144) with its mean and rstd (8 B x 256 = 2048).
 * At PP 1 GPipe holds all 4 micro-batches' of them and their layers' inputs (recompute full: 2 B x 256 x
 * 256 per layer, 2 layers), 1F1B one: 3 more of each. Under SP (tp 2) a rank has 50432 / 2 = 25216 of the
 * vocabulary (padded per 128 x 2) and the norm's tensors are its 128 tokens. */
static void test_memory_head_gpipe(void) {
  spec s = base();
  s.recompute = "full";
  plan p = load(&s);
  CU_ASSERT_DOUBLE_EQUAL(plan_head_held_bytes(&p), 51511296.0 + 262144.0 + 2048.0, 1e-6);
  plan_memory f1b, gpipe;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &f1b), 0);
  s.schedule = "gpipe";
  p = load(&s);
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &gpipe), 0);
  CU_ASSERT_DOUBLE_EQUAL(gpipe.activations - f1b.activations, 3.0 * (51511296.0 + 262144.0 + 2048.0 + 2 * 131072.0), 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(gpipe.total - f1b.total, gpipe.activations - f1b.activations, 1e-6);
  s = base();
  s.tp = 2, s.sp = 1;
  p = load(&s);
  CU_ASSERT_DOUBLE_EQUAL(plan_head_held_bytes(&p), 4.0 * 256 * 25216 + (4.0 * 256 + 8.0) * 128, 1e-6);
}

/* A caching allocator's reserve (alloc_reserve, plan_memory.c): f x the activations, in the overhead and the
 * total, nothing else moved; not given, the default (the same number as --help's text); the loader takes
 * [0, 1) and names the field otherwise; plan_load_opts sets it over the file's. */
static void test_memory_alloc_reserve(void) {
  CU_ASSERT_DOUBLE_EQUAL(strtod(PLAN_DEFAULT_ALLOC_RESERVE_TEXT, NULL), PLAN_DEFAULT_ALLOC_RESERVE, 0.0);
  spec s = base();
  plan p = load(&s);
  CU_ASSERT_FALSE(p.alloc_reserve_given);
  CU_ASSERT_EQUAL(plan_alloc_reserve(&p), PLAN_DEFAULT_ALLOC_RESERVE);
  plan_memory m0, m1;
  p.alloc_reserve = 0.0, p.alloc_reserve_given = true;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &m0), 0);
  CU_ASSERT_EQUAL(m0.allocator, 0.0);
  p.alloc_reserve = 0.25;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&p, 0, &m1), 0);
  CU_ASSERT(m0.activations > 0);
  CU_ASSERT_EQUAL(m1.activations, m0.activations);
  CU_ASSERT_EQUAL(m1.weights + m1.gradients + m1.optimizer, m0.weights + m0.gradients + m0.optimizer);
  CU_ASSERT_DOUBLE_EQUAL(m1.allocator, 0.25 * m0.activations, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(m1.overhead - m0.overhead, 0.25 * m0.activations, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(m1.total - m0.total, 0.25 * m0.activations, 1e-6);
  /* the file's field, in range and out */
  const char *vals[] = {"0.1", "1", "-0.1", "\"a\""};
  for (int i = 0; i < 4; i++) {
    char buf[1024];
    snprintf(buf, sizeof buf,
             "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\", \"layout\": { \"dp\": 1, "
             "\"tp\": 1, \"pp\": 1 }, \"batch\": { \"micro\": 1, \"global\": 1, \"seq\": 256 }, \"schedule\": "
             "\"1f1b\", \"alloc_reserve\": %s }",
             vals[i]);
    plan q;
    ts_err e = {0};
    int rc = plan_from_json_text(buf, strlen(buf), "a.json", NULL, NULL, &q, &e);
    CU_ASSERT_EQUAL(rc == 0, i == 0);
    if (i == 0) CU_ASSERT(q.alloc_reserve_given && q.alloc_reserve == 0.1);
    if (i > 0) CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "a.json: alloc_reserve"));
  }
  /* --alloc-reserve's parse, and plan_load_opts over a file */
  double v = -1;
  ts_err e = {0};
  CU_ASSERT_EQUAL(plan_parse_alloc_reserve("plan", "0.05", &v, &e), 0);
  CU_ASSERT_EQUAL(v, 0.05);
  const char *bad[] = {"1", "-0.01", "x", "0.1x", ""};
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_EQUAL(plan_parse_alloc_reserve("plan", bad[i], &v, &e), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--alloc-reserve"));
  }
  char path[1024];
  snprintf(path, sizeof path, "%s/gpt-h4096-1gpu.json", PLANS_DIR);
  plan_load_options lo = {.alloc_reserve_set = true, .alloc_reserve = 0.2};
  plan a, b;
  CU_ASSERT_EQUAL_FATAL(plan_load(path, NULL, NULL, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_load_opts(path, NULL, NULL, &lo, &b, &e), 0);
  CU_ASSERT(b.alloc_reserve_given && b.alloc_reserve == 0.2);
  plan_memory ma, mb;
  CU_ASSERT_EQUAL_FATAL(plan_memory_per_gpu(&a, &ma), 0);
  CU_ASSERT_EQUAL_FATAL(plan_memory_per_gpu(&b, &mb), 0);
  CU_ASSERT_DOUBLE_EQUAL(mb.total - ma.total, (0.2 - plan_alloc_reserve(&a)) * ma.activations, 1e-3);
  /* a reserve the HBM cannot hold: refused, the reserve named (Llama 3 405B on 8,192 H100, 79.66 of 80 GiB
   * with 70.48 GiB of activations at alloc_reserve 0: 5 % more does not fit) */
  lo.alloc_reserve = 0.05;
  plan c;
  char cwd[1024];
  CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(cwd, sizeof cwd));
  CU_ASSERT_EQUAL_FATAL(chdir(PLANS_DIR "/../.."), 0); /* the plan names its model and cluster from the root */
  CU_ASSERT_EQUAL(plan_load_opts("experiments/published/llama3/plans/llama3-8192.json", NULL, NULL, &lo, &c, &e), -1);
  CU_ASSERT_EQUAL_FATAL(chdir(cwd), 0);
  if (!strstr(e.msg, "allocator reserve 3.5 (alloc_reserve 0.05)")) printf("\n  %s\n", e.msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "allocator reserve 3.5 (alloc_reserve 0.05)"));
}

static void test_op_names(void) {
  spec s = base();
  s.tp = 2, s.pp = 2, s.global = 2;
  plan p = load(&s);
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  char buf[128];
  int found = 0;
  for (int i = 0; i < g.n; i++) {
    plan_op_name(&p, &g.ops[i], buf, sizeof buf);
    CU_ASSERT(strlen(buf) > 0);
    if (strcmp(buf, "layer0.mb1.fwd.attn_out.allreduce") == 0) found++;
    if (strcmp(buf, "layer0.mb0.bwd.qkv.dgrad") == 0) found++;
    if (strcmp(buf, "optimizer") == 0) found++;
  }
  CU_ASSERT_EQUAL(found, 3);
  plan_op_name(&p, &g.ops[0], buf, 4); /* truncates safely */
  CU_ASSERT_EQUAL(strlen(buf), 3);
  plan_program_free(&g);
}

static void test_reference_plan_size(void) {
  plan p = load_file("gpt3-175b-1024");
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  /* 96 micro-batches x 12 layers: tens of thousands of ops, each compact */
  CU_ASSERT(g.n > 10000 && g.n < 100000);
  CU_ASSERT(sizeof(plan_op) <= 128);
  CU_ASSERT_EQUAL(count(&g, PLAN_OP_SEND, -1, -1), plan_micro_batches(&p));
  /* FLOPs on this GPU add up to its share of the model's (within the
   * attention's fused-backward recompute and the memory-bound ops) */
  double flops = 0;
  for (int i = 0; i < g.n; i++) flops += g.ops[i].flops;
  double share = plan_model_flops(&p) / plan_world_size(&p);
  CU_ASSERT(flops > 0.95 * share && flops < 1.15 * share);
  plan_program_free(&g);
  ts_err bad = {0};
  CU_ASSERT_EQUAL(plan_build_program(&p, plan_world_size(&p), &g, &bad), -1);
}

static void test_summary_and_validate(void) {
  plan p = load_file("gpt3-175b-1024-taco");
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  ts_err e = {0};
  CU_ASSERT_EQUAL(plan_print_summary(&p, out, &e), 0);
  fclose(out);
  const char *want[] = {"gpt3-175b-1024-taco", "h200-1024-rail", "dp 16 x tp 8 x pp 8", "1f1b",
                        "memory per GPU", "stage 7", "programs", "traffic per GPU", "taco (group 128, e4m3)",
                        "(1.88x)"};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    if (!strstr(buf, want[k])) printf("\n  summary lacks \"%s\"\n", want[k]);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, want[k]));
  }
  free(buf);
  /* plan_validate on an edited plan (as a layout search would do) */
  CU_ASSERT_EQUAL(plan_validate(&p, &e), 0);
  p.tp = 3;
  CU_ASSERT_EQUAL(plan_validate(&p, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "layout.tp"));
  p.tp = 8;
  p.dp = 32;
  CU_ASSERT_EQUAL(plan_validate(&p, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "batch.global") || strstr(e.msg, "layout"));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite layout = CU_add_suite("plan.layout", NULL, NULL);
  CU_add_test(layout, "TP innermost, order setting", test_placement_tp_innermost);
  CU_add_test(layout, "TP groups stay in a node", test_tp_groups_stay_in_a_node);
  CU_pSuite sched = CU_add_suite("plan.schedule", NULL, NULL);
  CU_add_test(sched, "1F1B order (pp 4, m 8)", test_1f1b_order);
  CU_add_test(sched, "GPipe order", test_gpipe_order);
  CU_add_test(sched, "interleaved 1F1B order (pp 2, vpp 2, m 4)", test_interleaved_order);
  CU_add_test(sched, "1F1B idle = (p-1)/(m+p-1)", test_idle_1f1b);
  CU_add_test(sched, "GPipe idle = (p-1)/(m+p-1)", test_idle_gpipe);
  CU_add_test(sched, "interleaved idle = (p-1)/(vm+p-1)", test_idle_interleaved);
  CU_pSuite prog = CU_add_suite("plan.program", NULL, NULL);
  CU_add_test(prog, "well formed across variants", test_program_variants);
  CU_add_test(prog, "same program up to shifted peers", test_same_shifted);
  CU_add_test(prog, "TACO wire bytes", test_taco_wire_bytes);
  CU_add_test(prog, "CAAT-Net halves forward TP bytes", test_caat_halves_forward_allreduce);
  CU_add_test(prog, "codec_min_bytes", test_codec_min_bytes);
  CU_add_test(prog, "TP collectives and SP", test_tp_collectives_and_sp);
  CU_add_test(prog, "DP buckets and ZeRO-1", test_dp_buckets_and_zero1);
  CU_add_test(prog, "uneven stages: makespan and busy time hand-worked", test_uneven_stages);
  CU_add_test(prog, "uneven stages with interleaving: chunk layers", test_uneven_interleaved);
  CU_add_test(prog, "embedding and loss accounted as layers (virtual stages)", test_accounted_split);
  CU_add_test(prog, "uneven stages: memory per stage", test_uneven_memory);
  CU_add_test(prog, "uneven stages: Llama-3 405B on PP 8/16, rules", test_uneven_rules);
  CU_add_test(prog, "recompute", test_recompute);
  CU_add_test(prog, "Qwen3's QK norm: ops, norm-gradient all-reduce, recomputation", test_qk_norm_program);
  CU_add_test(prog, "tp_overlap_chunks splits forward row-parallel GEMMs exactly", test_tp_overlap_chunks);
  CU_add_test(prog, "memory", test_memory);
  CU_add_test(prog, "memory: the output layer's held bytes, GPipe at PP 1", test_memory_head_gpipe);
  CU_add_test(prog, "memory: one layer's backward gradients at their peak", test_memory_bwd_transient);
  CU_add_test(prog, "memory: a caching allocator's reserve (alloc_reserve)", test_memory_alloc_reserve);
  CU_add_test(prog, "plan_held_peak walks the interleaved schedule", test_held_peak);
  CU_add_test(prog, "plan_held_peak: the schedule's walk to the bit", test_held_peak_walk);
  CU_add_test(prog, "memory of accounted embedding/loss chunks", test_memory_accounted_chunks);
  CU_add_test(prog, "memory: the compressed collectives' buffers by hand", test_memory_codec_buffers);
  CU_add_test(prog, "op names", test_op_names);
  CU_add_test(prog, "reference plan size", test_reference_plan_size);
  CU_add_test(prog, "summary and plan_validate", test_summary_and_validate);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

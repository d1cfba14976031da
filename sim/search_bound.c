/* search_bound.c — a lower bound on a plan's simulated iteration time, so the
 * search can skip simulations whose layout cannot enter the printed top.
 *
 * The simulator (reduced mode) runs the programs of the ranks tp 0, dp 0,
 * cp 0 of each pipeline stage, one actor per stream, each stream's ops in
 * program order, an op not before the ops it depends on (sim_engine.c). The
 * bound replays those programs without contention, each op for no longer than
 * the simulator can make it last:
 *   - compute: its calibrated time divided by the largest speeds the
 *     calibration's clock section can give (sim_clock.c; 1 without one);
 *   - a collective inside one node: the calibrated time with its codec, as
 *     sim_comm.c prices it (the simulator sleeps that long after the members
 *     meet); across nodes only its codec kernels (pre + mid + post: the flows
 *     take at least no time);
 *   - send: the same, over the pair; a receive ends no earlier than its
 *     matching send (the simulated peer stage moves the data).
 * Waits for SMs, members and links only add to it, so the longest finish
 * over the ranks' streams is a lower bound on the simulated iteration. */
#include <stdlib.h>
#include <string.h>

#include "search.h"
#include "sim_costs.h"

/* The largest GEMM and memory-bound speeds the clock model can set (it
 * interpolates between the section's points and clamps to them). */
static void max_speeds(const schema_calibration *cal, double *g, double *m) {
  *g = *m = 1.0; /* the first simulation runs at the calibrated times */
  for (int i = 0; i < cal->n_clock; i++) {
    if (cal->clock[i].gemm_speed > *g) *g = cal->clock[i].gemm_speed;
    if (cal->clock[i].mem_speed > *m) *m = cal->clock[i].mem_speed;
  }
  /* the power-cap model's (whichever model runs: a bound over both is still one): its clocks lie between the
   * lower of the two back-to-back kernels' (a mix's power is linear in its shares, idle lowers it) and f_max */
  const schema_power *pw = &cal->power;
  if (pw->n > 0 && pw->fit.fitted) {
    const double f[3] = {pw->f_max_mhz, pw->fit.f_gemm_model_mhz, pw->fit.f_mem_model_mhz};
    for (int i = 0; i < 3; i++) {
      double gs, ms;
      schema_power_speeds(pw, f[i], &gs, &ms);
      if (gs > *g) *g = gs;
      if (ms > *m) *m = ms;
    }
  }
}

typedef struct {
  int rank;
  plan_program prog;
  double *fin;                         /* finish of each op (< 0: not yet known) */
  int *order[PLAN_STREAM_COUNT], n_order[PLAN_STREAM_COUNT], at[PLAN_STREAM_COUNT];
  double stream_end[PLAN_STREAM_COUNT];
  int n_members[PLAN_GROUP_COUNT];
  bool one_node[PLAN_GROUP_COUNT];
} bound_rank;

/* Finished sends by (src, dst, tag), open addressing. */
typedef struct {
  long long *key;
  double *fin;
  size_t cap;
} send_table;

static long long send_key(int src, int dst, int tag) {
  return ((long long)(unsigned)src << 40) ^ ((long long)(unsigned)dst << 20) ^ (long long)(unsigned)tag;
}
static size_t slot_of(const send_table *t, long long k) {
  unsigned long long h = (unsigned long long)k * 0x9E3779B97F4A7C15ull;
  size_t i = (size_t)(h >> 17) & (t->cap - 1);
  while (t->key[i] != -1 && t->key[i] != k) i = (i + 1) & (t->cap - 1);
  return i;
}

/* How long op i lasts at least (comm: on the simulator's own price list). */
static int op_floor(sim_costs *c, sim_cost_memo *memo, const plan *p, bound_rank *b, const plan_op *op, double gmax,
                    double mmax, double *d, ts_err *e) {
  *d = 0;
  if (op->kind == PLAN_OP_COMPUTE) { /* (memoised: the same few dozen ops repeat for every layer and micro-batch) */
    double s, gemm;
    if (sim_cost_memo_get(memo, c, op, &s, &gemm, e)) return -1;
    *d = gemm / gmax + (s - gemm) / mmax;
    return 0;
  }
  bool coll = op->kind == PLAN_OP_COLLECTIVE;
  int g = op->group < PLAN_GROUP_COUNT ? op->group : PLAN_GROUP_TP;
  int n = coll ? b->n_members[g] : 2;
  if (coll && n <= 1) return 0;
  if (op->kind == PLAN_OP_RECV) return 0; /* its peer stage moves the data: the send's finish bounds it */
  bool one_node = coll ? b->one_node[g] : topo_node_of(&p->cluster, b->rank) == topo_node_of(&p->cluster, op->peer);
  sim_codec_cost cc;
  if (sim_codec_cost_of(c, op, n, &cc, e)) return -1;
  double pre = cc.pre_us * 1e-6, mid = cc.mid_us * 1e-6, post = cc.post_us * 1e-6;
  if (!one_node) { /* flows: pre + max(transfer, mid) + post, the transfer at least nothing */
    *d = pre + mid + post;
    return 0;
  }
  double t;
  int included;
  if (sim_coll_calibrated_s(c, op, n, &t, &included, e)) return -1;
  if (!coll) /* send: pre + transfer + what of mid is left + post */
    *d = pre + (t > mid ? t : mid) + post;
  else if (included) /* a measured compressed collective, plus CAAT-Net's packing */
    *d = t + cc.caat_us * 1e-6;
  else if (cc.total_us > 0)
    *d = pre + (t > mid ? t : mid) + post;
  else
    *d = t;
  return 0;
}

static void free_ranks(bound_rank *b, int n) {
  for (int i = 0; b && i < n; i++) {
    plan_program_free(&b[i].prog);
    free(b[i].fin);
    for (int s = 0; s < PLAN_STREAM_COUNT; s++) free(b[i].order[s]);
  }
  free(b);
}

int sim_search_bound_plan(const plan *p, const schema_calibration *cal, double *lower_s, ts_err *e) {
  static sim_costs costs; /* large (its caches): not on the stack */
  sim_cost_memo memo = {0};
  *lower_s = 0;
  if (sim_costs_init(&costs, p, cal, NULL, e)) return -1;
  double gmax, mmax;
  max_speeds(cal, &gmax, &mmax);
  int n = p->pp, rc = -1;
  bound_rank *b = calloc((size_t)n, sizeof *b);
  int *members = malloc(sizeof(int) * (size_t)plan_world_size(p));
  send_table sends = {0};
  if (!b || !members) {
    ts_fail_sys(e, "search: out of memory");
    goto done;
  }
  size_t n_sends = 0;
  for (int k = 0; k < n; k++) {
    bound_rank *r = &b[k];
    r->rank = plan_rank_of(p, (plan_coord){.dp = 0, .tp = 0, .pp = k, .cp = 0});
    if (plan_build_program(p, r->rank, &r->prog, e)) goto done;
    for (int g = 0; g < PLAN_GROUP_COUNT; g++) {
      r->n_members[g] = plan_group_members(p, r->rank, (plan_group_kind)g, members, plan_world_size(p));
      r->one_node[g] = true;
      for (int x = 1; x < r->n_members[g]; x++)
        r->one_node[g] &= topo_node_of(&p->cluster, members[x]) == topo_node_of(&p->cluster, members[0]);
    }
    r->fin = malloc(sizeof(double) * (size_t)(r->prog.n ? r->prog.n : 1));
    if (!r->fin) {
      ts_fail_sys(e, "search: out of memory");
      goto done;
    }
    for (int i = 0; i < r->prog.n; i++) {
      r->fin[i] = -1;
      if (r->prog.ops[i].stream >= PLAN_STREAM_COUNT) {
        ts_fail(e, p->path, "program", "op %d: stream out of range", i);
        goto done;
      }
      r->n_order[r->prog.ops[i].stream]++;
      n_sends += r->prog.ops[i].kind == PLAN_OP_SEND;
    }
    for (int s = 0; s < PLAN_STREAM_COUNT; s++) {
      r->order[s] = malloc(sizeof(int) * (size_t)(r->n_order[s] ? r->n_order[s] : 1));
      if (!r->order[s]) {
        ts_fail_sys(e, "search: out of memory");
        goto done;
      }
      r->n_order[s] = 0;
    }
    for (int i = 0; i < r->prog.n; i++) {
      int s = r->prog.ops[i].stream;
      r->order[s][r->n_order[s]++] = i;
    }
  }
  sends.cap = 16;
  while (sends.cap < 2 * n_sends + 2) sends.cap *= 2;
  sends.key = malloc(sizeof(long long) * sends.cap);
  sends.fin = malloc(sizeof(double) * sends.cap);
  if (!sends.key || !sends.fin) {
    ts_fail_sys(e, "search: out of memory");
    goto done;
  }
  for (size_t i = 0; i < sends.cap; i++) sends.key[i] = -1;
  /* advance every stream as far as its next op's predecessors are known, until none moves */
  for (bool moved = true; moved;) {
    moved = false;
    for (int k = 0; k < n; k++) {
      bound_rank *r = &b[k];
      for (int s = 0; s < PLAN_STREAM_COUNT; s++)
        while (r->at[s] < r->n_order[s]) {
          int i = r->order[s][r->at[s]];
          const plan_op *op = &r->prog.ops[i];
          double start = r->stream_end[s];
          bool ready = true;
          for (int d = 0; d < PLAN_MAX_DEPS && ready; d++) {
            int j = op->dep[d];
            if (j < 0) continue;
            if (j >= i || r->fin[j] < 0) ready = false;
            else if (r->fin[j] > start) start = r->fin[j];
          }
          double sent = 0;
          if (ready && op->kind == PLAN_OP_RECV) {
            size_t x = slot_of(&sends, send_key(op->peer, r->rank, op->tag));
            if (sends.key[x] == -1) ready = false; /* the peer's send is not placed yet */
            else sent = sends.fin[x];
          }
          if (!ready) break;
          double d;
          if (op_floor(&costs, &memo, p, r, op, gmax, mmax, &d, e)) goto done;
          double f = start + d;
          if (f < sent) f = sent;
          r->fin[i] = f;
          r->stream_end[s] = f;
          if (op->kind == PLAN_OP_SEND) {
            size_t x = slot_of(&sends, send_key(r->rank, op->peer, op->tag));
            sends.key[x] = send_key(r->rank, op->peer, op->tag);
            sends.fin[x] = f;
          }
          r->at[s]++;
          moved = true;
        }
    }
  }
  double T = 0;
  for (int k = 0; k < n; k++)
    for (int s = 0; s < PLAN_STREAM_COUNT; s++) {
      if (b[k].at[s] < b[k].n_order[s]) { /* a receive whose send is not among these ranks: no bound */
        ts_fail(e, p->path, "program", "rank %d: the bound's replay could not place every op", b[k].rank);
        goto done;
      }
      if (b[k].stream_end[s] > T) T = b[k].stream_end[s];
    }
  *lower_s = T;
  rc = 0;
done:
  sim_cost_memo_free(&memo);
  free(sends.key);
  free(sends.fin);
  free(members);
  free_ranks(b, n);
  return rc;
}

/* test_sim_cp.c — context parallelism in the simulator, against figures
 * worked out by hand from the simulator's own prices: on 2 x H200 over
 * NVLink (cp 2, nothing else parallel) each rank's communication is the KV
 * ring's, 4 steps per layer and micro-batch (1 KV forward; 1 KV and 2 dKV
 * backward), plus the gradient buckets reduced over dp x cp = 2 ranks, and
 * the attention waits for exactly what the ring's
 * overlap with the attention pieces leaves exposed. Then reduced mode against
 * full mode on a CP ring across nodes, and TACO on the KV exchanges. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "plan_internal.h"
#include "sim.h"
#include "sim_costs.h"

static schema_calibration cal;

static int load(const char *cluster, const char *layout, const char *top, int layers, plan *p, ts_err *e) {
  char buf[2048];
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"gpt-h4096\", \"cluster\": \"%s\", \"layout\": { %s },\n"
           "  \"batch\": { \"micro\": 1, \"global\": 2, \"seq\": 2048 }, \"schedule\": \"1f1b\",\n"
           "  \"layers_override\": %d%s }\n",
           cluster, layout, layers, top);
  return plan_from_json_text(buf, strlen(buf), "cp.json", NULL, NULL, p, e);
}

static double max2(double a, double b) { return a > b ? a : b; }

static void test_ring_exposure(void) {
  static plan p;
  ts_err e = {0};
  const int L = 2, m = 2;
  int rc = load("h200x2-nvlink", "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2", "", L, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  static sim_costs c;
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, &p, &cal, NULL, &e), 0);
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  /* the prices: a ring step (every step moves one KV block), a forward and a backward attention piece */
  double T = -1, Pf = -1, Pb = -1, dp = 0;
  int steps = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->stream == PLAN_STREAM_CP) {
      int inc;
      double s;
      CU_ASSERT_EQUAL_FATAL(sim_coll_calibrated_s(&c, op, 2, &s, &inc, &e), 0);
      if (T < 0) T = s;
      CU_ASSERT_DOUBLE_EQUAL(s, T, 1e-12);
      steps++;
    } else if (op->stream == PLAN_STREAM_DP) { /* gradients are reduced over dp x cp = 2 ranks */
      int inc;
      double s;
      CU_ASSERT_EQUAL_FATAL(sim_coll_calibrated_s(&c, op, 2, &s, &inc, &e), 0);
      dp += s;
    } else if (op->kind == PLAN_OP_COMPUTE && op->row_chunks == 2) {
      double s;
      CU_ASSERT_EQUAL_FATAL(sim_compute_s(&c, op, &s, &e), 0);
      double *slot = op->phase == PLAN_PHASE_BWD ? &Pb : &Pf;
      if (*slot < 0) *slot = s;
      CU_ASSERT_DOUBLE_EQUAL(s, *slot, 1e-12);
    }
  }
  plan_program_free(&g);
  CU_ASSERT_EQUAL(steps, L * m * 4);
  CU_ASSERT_FATAL(T > 0 && Pf > 0 && Pb > 0);
  /* forward: step 1 beside piece 0, piece 1 waits for it. Backward: KV step 1 beside piece 0; the dKV of
   * piece 0 after both (one stream); piece 1 at X = max(T, Pb); the last dKV after piece 1 and the first dKV,
   * which the next op waits for. */
  double X = max2(T, Pb);
  double fwd = max2(0, T - Pf), bwd = (X - Pb) + (max2(X + T, X + Pb) + T - (X + Pb));
  double want_exposed = L * m * (fwd + bwd), want_comm = L * m * 4 * T + dp;
  CU_ASSERT(dp > 0);
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .clock_off = true};
  schema_result r;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &r, &e), 0);
  CU_ASSERT_EQUAL_FATAL(r.n_ranks, 2);
  printf("\n  step %.1f us, attention piece %.1f us fwd / %.1f us bwd", 1e6 * T, 1e6 * Pf, 1e6 * Pb);
  for (int k = 0; k < 2; k++) {
    printf("\n  rank %d: communication %.6f s (worked out %.6f)", k, r.ranks[k].comm_s, want_comm);
    CU_ASSERT_DOUBLE_EQUAL(r.ranks[k].comm_s, want_comm, 1e-6 * want_comm + 1e-9);
  }
  printf("\n  CP exposed %.6f s (worked out %.6f), iteration %.6f s", r.breakdown.cp_exposed_s, want_exposed,
         r.iteration_time_s);
  CU_ASSERT_DOUBLE_EQUAL(r.breakdown.cp_exposed_s, want_exposed, 1e-6 * want_exposed + 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r.breakdown.tp_exposed_s + r.breakdown.pp_exposed_s, 0, 1e-12);
  schema_result_free(&r);
}

/* cp_comm_type allgather on the same 2 x H200 plan: nothing of the CP exchanges overlaps the attention (the
 * pieces wait for the KV gather; the op after the backward for the dKV reduce-scatter), so per layer and
 * micro-batch the forward exposes one gather, the backward a gather and a reduce-scatter, at the
 * simulator's own prices; the same bytes as the ring, more of them exposed. */
static void test_allgather_exposure(void) {
  static plan p, q;
  ts_err e = {0};
  const int L = 2, m = 2;
  int rc = load("h200x2-nvlink",
                "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2, \"cp_comm_type\": \"allgather\"", "", L,
                &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL_FATAL(load("h200x2-nvlink", "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2", "", L,
                             &q, &e),
                        0);
  static sim_costs c;
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, &p, &cal, NULL, &e), 0);
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  double A = -1, R = -1, dp = 0;
  int gathers = 0, scatters = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->stream != PLAN_STREAM_CP && op->stream != PLAN_STREAM_DP) continue;
    int inc;
    double t;
    CU_ASSERT_EQUAL_FATAL(sim_coll_calibrated_s(&c, op, 2, &t, &inc, &e), 0);
    if (op->stream == PLAN_STREAM_DP) {
      dp += t;
      continue;
    }
    double *slot = op->coll == PLAN_COLL_ALLGATHER ? &A : &R;
    if (*slot < 0) *slot = t;
    CU_ASSERT_DOUBLE_EQUAL(t, *slot, 1e-12);
    gathers += op->coll == PLAN_COLL_ALLGATHER;
    scatters += op->coll == PLAN_COLL_REDUCESCATTER;
  }
  plan_program_free(&g);
  CU_ASSERT_EQUAL(gathers, L * m * 2);
  CU_ASSERT_EQUAL(scatters, L * m);
  CU_ASSERT_FATAL(A > 0 && R > 0);
  double want = L * m * (2 * A + R);
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .clock_off = true};
  schema_result r, rr;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &r, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&q, &o, &rr, &e), 0);
  printf("\n  KV gather %.1f us, dKV reduce-scatter %.1f us; CP exposed %.6f s (worked out %.6f; the ring's %.6f)",
         1e6 * A, 1e6 * R, r.breakdown.cp_exposed_s, want, rr.breakdown.cp_exposed_s);
  for (int k = 0; k < 2; k++)
    CU_ASSERT_DOUBLE_EQUAL(r.ranks[k].comm_s, want + dp, 1e-6 * (want + dp) + 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(r.breakdown.cp_exposed_s, want, 1e-6 * want + 1e-9);
  CU_ASSERT(r.breakdown.cp_exposed_s > rr.breakdown.cp_exposed_s);
  schema_result_free(&r);
  schema_result_free(&rr);
}

/* A CP ring across nodes (tp 8 fills a node, so the 2 CP ranks sit on two nodes): reduced mode (one
 * representative per stage, the other CP rank's flows started for it) agrees with full mode. */
static void test_reduced_across_nodes(void) {
  static plan p;
  ts_err e = {0};
  int rc = load("h200-1024-rail",
                "\"dp\": 2, \"tp\": 8, \"pp\": 2, \"sequence_parallel\": true, \"context_parallel_size\": 2", "", 4,
                &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(plan_world_size(&p), 64);
  sim_options full = {.mode = SIM_MODE_FULL, .cal = &cal, .clock_off = true};
  sim_options red = {.mode = SIM_MODE_REDUCED, .cal = &cal, .clock_off = true};
  schema_result a, b;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &full, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &red, &b, &e), 0);
  printf("\n  full %.6f s (CP exposed %.6f), reduced %.6f s (%.6f)", a.iteration_time_s, a.breakdown.cp_exposed_s,
         b.iteration_time_s, b.breakdown.cp_exposed_s);
  CU_ASSERT(a.breakdown.cp_exposed_s > 0);
  CU_ASSERT(fabs(a.iteration_time_s - b.iteration_time_s) <= 0.01 * a.iteration_time_s);
  schema_result_free(&a);
  schema_result_free(&b);
}

/* TACO on the KV exchanges (codec.cp): fewer bytes on the wire, codec kernels priced; whether it pays is the
 * simulator's answer, printed. */
static void test_taco_kv(void) {
  static plan a, b;
  ts_err e = {0};
  const char *lay = "\"dp\": 1, \"tp\": 8, \"pp\": 1, \"sequence_parallel\": true, \"context_parallel_size\": 2";
  CU_ASSERT_EQUAL_FATAL(load("h200-1024-rail", lay, "", 2, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load("h200-1024-rail", lay,
                             ", \"codec\": { \"cp\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" } }, "
                             "\"codec_min_bytes\": 0",
                             2, &b, &e),
                        0);
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .clock_off = true};
  schema_result ra, rb;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&a, &o, &ra, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&b, &o, &rb, &e), 0);
  printf("\n  KV ring plain: iteration %.6f s, CP exposed %.6f s; TACO: %.6f s, CP exposed %.6f s, codec %.6f s",
         ra.iteration_time_s, ra.breakdown.cp_exposed_s, rb.iteration_time_s, rb.breakdown.cp_exposed_s,
         rb.breakdown.codec_s);
  CU_ASSERT(rb.breakdown.codec_s > 0);
  CU_ASSERT_EQUAL(ra.breakdown.codec_s, 0);
  schema_result_free(&ra);
  schema_result_free(&rb);
}

/* A piece of the ring is the local causal attention of seq / cp tokens (plan_program_cp.c), priced
 * from the section of the plan's attention_backend (fused, the default) at that shape, as a plan
 * without CP prices its whole attention; the executor's tables only where the calibration has no
 * point of that backend. */
static void test_piece_priced_by_backend(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load("h200x2-nvlink", "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2", "", 1, &p, &e), 0);
  schema_attn_backend be;
  schema_attn_shape q;
  int fell_back;
  CU_ASSERT_EQUAL_FATAL(sim_attention_shape_of(&cal, &p, &be, &q, &fell_back), 0);
  CU_ASSERT_EQUAL(fell_back, 0);
  CU_ASSERT_EQUAL(be, SCHEMA_ATTN_FUSED);
  CU_ASSERT_EQUAL(q.seq, 1024); /* 2048 / cp 2 */
  CU_ASSERT(q.causal);
  static sim_costs c;
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, &p, &cal, NULL, &e), 0);
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int pieces = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->row_chunks != 2) continue;
    double s, us;
    CU_ASSERT_EQUAL_FATAL(sim_compute_s(&c, op, &s, &e), 0);
    CU_ASSERT_EQUAL_FATAL(schema_lookup_attn_backend(&c.lk, be, &q, op->phase == PLAN_PHASE_BWD, &us), 0);
    CU_ASSERT_DOUBLE_EQUAL(s, us * 1e-6, 1e-9 * s);
    pieces++;
  }
  plan_program_free(&g);
  CU_ASSERT_EQUAL(pieces, 2 * 2 * 2); /* 2 micro-batches x 2 pieces x forward and backward */
}

/* Compute prices memoised (sim_cost_memo_get, the simulator's and the search bound's): every compute op of
 * a CP plan's program (its ring pieces differ by row chunk at equal FLOPs) gets, from the memo, first and
 * again, the values the costs give when priced afresh, to the bit; and one entry per distinct key. */
static void test_memo_prices_as_priced(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load("h200x2-nvlink", "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2", "", 2, &p, &e), 0);
  static sim_costs c, fresh;
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, &p, &cal, NULL, &e), 0);
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  sim_cost_memo memo = {0};
  int distinct = 0, compute = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < g.n; i++) {
      const plan_op *op = &g.ops[i];
      if (op->kind != PLAN_OP_COMPUTE) continue;
      double s, gemm, s0, gemm0;
      CU_ASSERT_EQUAL_FATAL(sim_cost_memo_get(&memo, &c, op, &s, &gemm, &e), 0);
      CU_ASSERT_EQUAL_FATAL(sim_costs_init(&fresh, &p, &cal, NULL, &e), 0); /* nothing cached */
      CU_ASSERT_EQUAL_FATAL(sim_compute_parts_s(&fresh, op, &s0, &gemm0, &e), 0);
      CU_ASSERT(s == s0 && gemm == gemm0);
      if (pass) continue;
      compute++;
      bool seen = false;
      for (int j = 0; j < i && !seen; j++) {
        const plan_op *o = &g.ops[j];
        seen = o->kind == PLAN_OP_COMPUTE && o->model_op == op->model_op && o->phase == op->phase &&
               o->part == op->part && o->row_chunk == op->row_chunk && o->row_chunks == op->row_chunks &&
               o->flops == op->flops && o->bytes == op->bytes;
      }
      distinct += !seen;
    }
  CU_ASSERT_EQUAL((int)memo.n, distinct);
  CU_ASSERT(distinct < compute); /* the layers' ops repeat: the memo answers them */
  sim_cost_memo_free(&memo);
  plan_program_free(&g);
}

int main(void) {
  ts_err e = {0};
  if (schema_calibration_load(MEASURED_CALIBRATION, &cal, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return 1;
  }
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_cp", NULL, NULL);
  CU_add_test(s, "CP ring: exchange time and overlap worked out from the prices", test_ring_exposure);
  CU_add_test(s, "cp_comm_type allgather: the gathers and reduce-scatters exposed, worked out", test_allgather_exposure);
  CU_add_test(s, "CP ring across nodes: reduced mode agrees with full mode", test_reduced_across_nodes);
  CU_add_test(s, "TACO on the KV exchanges", test_taco_kv);
  CU_add_test(s, "a ring piece priced by the plan's attention backend at seq / cp", test_piece_priced_by_backend);
  CU_add_test(s, "compute prices memoised: as priced afresh, one entry per distinct op", test_memo_prices_as_priced);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  schema_calibration_free(&cal);
  return failed ? 1 : 0;
}

/* test_sim_dp_scale.c — large data-parallel groups in both simulation modes.
 *
 * Issue 20: without ZeRO-1, plans with DP >= 32 ended in reduced mode with
 * SimGrid's "Deadlock detected" (the DP all-reduce ran as a tree, and the
 * helper actor that sends a non-simulated leader's flows lost its second job).
 * Each case here is a real plan (zoo model, few layers, shipped cluster),
 * built in memory, simulated in reduced mode and, where the world is small
 * enough to be cheap, in full mode; the two must agree within 1 %. Plain DP
 * (one all-reduce per bucket: trees at these sizes) and ZeRO-1 (reduce-scatter
 * and all-gather rings) at DP 32, 64, 128 and 256.
 *
 * A failure of the simulator itself (ranks that never finish) is reported as
 * such: exit status 3 and a message that names the op. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define FULL_MAX_WORLD 512 /* full mode beyond this costs tens of seconds per case */

static schema_calibration cal;

/* A plan: model with `layers` layers, tp x dp x pp on cluster, ZeRO-1 or not,
 * 2 micro-batches of 1 per replica. */
static int make_plan(plan *p, const char *model, int layers, const char *cluster, int tp, int dp, int pp, bool zero1,
                     int seq) {
  char text[2048];
  int micro = 2 * pp; /* enough micro-batches to fill the pipeline */
  snprintf(text, sizeof text,
           "{ \"schema\": 1, \"name\": \"%s-tp%d-dp%d-pp%d%s\", \"model\": \"%s\", \"cluster\": \"%s\",\n"
           "  \"layout\": { \"dp\": %d, \"tp\": %d, \"pp\": %d, \"vpp\": 1, \"sequence_parallel\": false,\n"
           "              \"order\": \"tp-dp-pp\", \"zero1\": %s, \"recompute\": \"none\" },\n"
           "  \"batch\": { \"micro\": 1, \"global\": %d, \"seq\": %d }, \"schedule\": \"1f1b\",\n"
           "  \"layers_override\": %d,\n"
           "  \"codec\": { \"tp_fwd\": { \"kind\": \"none\" }, \"tp_bwd\": { \"kind\": \"none\" },\n"
           "             \"pp\": { \"kind\": \"none\" }, \"dp\": { \"kind\": \"none\" } } }\n",
           model, tp, dp, pp, zero1 ? "-zero1" : "", model, cluster, dp, tp, pp, zero1 ? "true" : "false", dp * micro,
           seq, layers);
  ts_err e = {0};
  if (plan_from_json_text(text, strlen(text), "in-memory plan", NULL, NULL, p, &e)) {
    fprintf(stderr, "\n  %s\n", e.msg);
    return -1;
  }
  return 0;
}

static bool has_note(const schema_result *r, const char *part) {
  for (int i = 0; i < r->n_notes; i++)
    if (strstr(r->notes[i], part)) return true;
  return false;
}

/* Runs one plan in both modes (full only up to FULL_MAX_WORLD ranks). */
static void both_modes(const char *model, int layers, const char *cluster, int tp, int dp, int pp, bool zero1,
                       int seq) {
  static plan p;
  CU_ASSERT_EQUAL_FATAL(make_plan(&p, model, layers, cluster, tp, dp, pp, zero1, seq), 0);
  sim_options o = {.mode = SIM_MODE_REDUCED, .cal = &cal};
  schema_result red, full;
  ts_err e = {0};
  int rc = sim_run_isolated(&p, &o, &red, &e);
  if (rc) fprintf(stderr, "\n  %s reduced: %s\n", p.name, e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(red.n_ranks, pp);
  CU_ASSERT(red.iteration_time_s > 0 && isfinite(red.iteration_time_s));
  /* plain DP's bucket all-reduces across DP >= 32 nodes are trees here: the case that deadlocked */
  bool tree = has_note(&red, "trees");
  if (!zero1 && tp == 8) CU_ASSERT(tree);
  printf("\n  %-32s %5d GPUs  reduced %.6f s%s", p.name, plan_world_size(&p), red.iteration_time_s,
         tree ? " (trees)" : "");
  if (plan_world_size(&p) <= FULL_MAX_WORLD) {
    o.mode = SIM_MODE_FULL;
    rc = sim_run_isolated(&p, &o, &full, &e);
    if (rc) fprintf(stderr, "\n  %s full: %s\n", p.name, e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(full.n_ranks, plan_world_size(&p));
    double rel = (red.iteration_time_s - full.iteration_time_s) / full.iteration_time_s;
    printf("  full %.6f s (%+.3f%%)", full.iteration_time_s, 100 * rel);
    CU_ASSERT(fabs(rel) <= 0.01);
    schema_result_free(&full);
  }
  schema_result_free(&red);
}

/* Llama-3 8B (2 layers) at TP 8: one DP member per node, as in the issue. */
static void llama_tp8(bool zero1) {
  for (int dp = 32; dp <= 256; dp *= 2)
    both_modes("llama3-8b", 2, dp * 8 <= 1024 ? "h200-1024-rail" : "h200-16384-rail", 8, dp, 1, zero1, 2048);
}
static void test_llama_tp8_plain_dp(void) { llama_tp8(false); }
static void test_llama_tp8_zero1(void) { llama_tp8(true); }

/* gpt-tiny at TP 1, PP 2: eight DP members per node (chains inside the node,
 * node leaders in the tree), two representatives. */
static void tiny_pp2(bool zero1) {
  for (int dp = 32; dp <= 256; dp *= 2) both_modes("gpt-tiny", 2, "h200-1024-rail", 1, dp, 2, zero1, 512);
}
static void test_tiny_pp2_plain_dp(void) { tiny_pp2(false); }
static void test_tiny_pp2_zero1(void) { tiny_pp2(true); }

/* Programs whose ranks cannot finish (rank 1 never joins rank 0's DP
 * all-reduce): a simulator failure, exit status 3, naming the rank and op. */
static void test_never_finished_is_simulator_failure(void) {
  static plan p;
  CU_ASSERT_EQUAL_FATAL(make_plan(&p, "gpt-tiny", 2, "h200x8-nvswitch", 1, 2, 1, false, 512), 0);
  plan_program progs[2];
  ts_err e = {0};
  for (int r = 0; r < 2; r++) CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, r, &progs[r], &e), 0);
  int n1 = progs[1].n;
  progs[1].n = 0; /* rank 1 does nothing */
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .programs = progs};
  schema_result r;
  CU_ASSERT_EQUAL(sim_run_isolated(&p, &o, &r, &e), -1);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_SIM_FAILURE);
  CU_ASSERT_EQUAL(strncmp(e.msg, TS_SIM_FAILURE_PREFIX, strlen(TS_SIM_FAILURE_PREFIX)), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0 never finished op"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "allreduce.dp"));
  printf("\n  %s", e.msg);
  progs[1].n = n1;
  for (int k = 0; k < 2; k++) plan_program_free(&progs[k]);
  /* bad input keeps its status, and a plain failure its own */
  ts_fail(&e, "f.json", "layout", "x");
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  ts_fail_sys(&e, "out of memory");
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_FAILURE);
  ts_fail_sim(&e, "rank %d", 3);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_SIM_FAILURE);
  CU_ASSERT_STRING_EQUAL(e.msg, TS_SIM_FAILURE_PREFIX "rank 3");
}

static int setup(void) {
  ts_err e = {0};
  if (schema_calibration_load(CALIBRATION_FILE, &cal, &e)) {
    fprintf(stderr, "%s\n", e.msg);
    return -1;
  }
  return 0;
}

static int teardown(void) {
  schema_calibration_free(&cal);
  return 0;
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_dp_scale", setup, teardown);
  CU_add_test(s, "ranks that never finish: simulator failure, exit status 3", test_never_finished_is_simulator_failure);
  CU_add_test(s, "Llama-3 8B TP8, plain DP 32-256: reduced = full within 1%", test_llama_tp8_plain_dp);
  CU_add_test(s, "Llama-3 8B TP8, ZeRO-1 DP 32-256: reduced = full within 1%", test_llama_tp8_zero1);
  CU_add_test(s, "gpt-tiny TP1 PP2, plain DP 32-256: reduced = full within 1%", test_tiny_pp2_plain_dp);
  CU_add_test(s, "gpt-tiny TP1 PP2, ZeRO-1 DP 32-256: reduced = full within 1%", test_tiny_pp2_zero1);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_sim_collapse.c — `--collapse on` predicts what `--collapse off` does.
 *
 * The flows of a cross-node ring or tree phase that only their own class uses
 * run as one group of flows per kind of component (sim/sim_collapse.c): the simulation must be the
 * same, not close. Each case is a real plan (zoo model, few layers, shipped
 * cluster) simulated with collapse on and off; the iteration time, the
 * breakdown, every rank's busy and communication time and the start and
 * duration of every op of every simulated rank must be equal (to the digits the
 * result file carries, which is how the forked simulation returns them). Cases:
 * one node (nothing to collapse), rings with one member per node (TP 8) and
 * with several (TP 1, 2: NCCL's k rings through k NICs), plain DP (trees),
 * DP + TP + PP with interleaving (send/recv beside the rings on the same
 * NICs), an oversubscribed fat tree (edges that share spine links), in
 * reduced and, where cheap, full mode. Each collapsing case also checks that
 * flows were saved (the note's counts). */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static schema_calibration cal;

static int make_plan(plan *p, const char *model, int layers, const char *cluster, int tp, int dp, int pp, int vpp,
                     bool zero1, int seq) {
  char text[2048];
  int micro = 2 * pp;
  snprintf(text, sizeof text,
           "{ \"schema\": 1, \"name\": \"%s-tp%d-dp%d-pp%d-vpp%d%s\", \"model\": \"%s\", \"cluster\": \"%s\",\n"
           "  \"layout\": { \"dp\": %d, \"tp\": %d, \"pp\": %d, \"vpp\": %d, \"sequence_parallel\": false,\n"
           "              \"order\": \"tp-dp-pp\", \"zero1\": %s, \"recompute\": \"none\" },\n"
           "  \"batch\": { \"micro\": 1, \"global\": %d, \"seq\": %d }, \"schedule\": \"%s\",\n"
           "  \"layers_override\": %d,\n"
           "  \"codec\": { \"tp_fwd\": { \"kind\": \"none\" }, \"tp_bwd\": { \"kind\": \"none\" },\n"
           "             \"pp\": { \"kind\": \"none\" }, \"dp\": { \"kind\": \"none\" } } }\n",
           model, tp, dp, pp, vpp, zero1 ? "-zero1" : "", model, cluster, dp, tp, pp, vpp, zero1 ? "true" : "false",
           dp * micro, seq, vpp > 1 ? "interleaved-1f1b" : "1f1b", layers);
  ts_err e = {0};
  if (plan_from_json_text(text, strlen(text), "in-memory plan", NULL, NULL, p, &e)) {
    fprintf(stderr, "\n  %s\n", e.msg);
    return -1;
  }
  return 0;
}

/* the counts of the collapse note: flows run and edges asked for (-1 when there is no note) */
static void collapse_counts(const schema_result *r, long long *run, long long *asked) {
  *run = *asked = -1;
  for (int i = 0; i < r->n_notes; i++)
    if (sscanf(r->notes[i], "collapse on: the cross-node ring and tree phases ran %lld flows for %lld edges", run,
               asked) == 2)
      return;
}

/* Simulates p with collapse on and off in one mode; everything must be equal. expect_saving: 1 fewer flows
 * must run, 0 none fewer, -1 either (printed). */
static void same(plan *p, sim_mode mode, int expect_saving) {
  schema_result on, off;
  ts_err e = {0};
  sim_options o = {.mode = mode, .cal = &cal, .record_ops = true};
  int rc = sim_run_isolated(p, &o, &on, &e);
  if (rc) fprintf(stderr, "\n  %s on: %s\n", p->name, e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  o.collapse_off = true;
  rc = sim_run_isolated(p, &o, &off, &e);
  if (rc) fprintf(stderr, "\n  %s off: %s\n", p->name, e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  long long run, asked;
  collapse_counts(&on, &run, &asked);
  printf("\n  %-36s %-7s %5d GPUs  on %.17g  off %.17g  flows %lld of %lld", p->name,
         mode == SIM_MODE_FULL ? "full" : "reduced", plan_world_size(p), on.iteration_time_s, off.iteration_time_s, run,
         asked);
  CU_ASSERT(on.iteration_time_s > 0 && isfinite(on.iteration_time_s));
  CU_ASSERT(on.iteration_time_s == off.iteration_time_s);
  CU_ASSERT(on.breakdown.compute_s == off.breakdown.compute_s);
  CU_ASSERT(on.breakdown.dp_exposed_s == off.breakdown.dp_exposed_s);
  CU_ASSERT(on.breakdown.pp_exposed_s == off.breakdown.pp_exposed_s);
  CU_ASSERT(on.breakdown.bubble_s == off.breakdown.bubble_s);
  CU_ASSERT_EQUAL_FATAL(on.n_ranks, off.n_ranks);
  for (int i = 0; i < on.n_ranks; i++)
    CU_ASSERT(on.ranks[i].busy_s == off.ranks[i].busy_s && on.ranks[i].comm_s == off.ranks[i].comm_s);
  /* every op of every simulated rank starts and lasts the same (the result's precision: 10 digits) */
  CU_ASSERT_EQUAL_FATAL(on.n_ops, off.n_ops);
  int ops_differ = 0;
  for (int i = 0; i < on.n_ops; i++)
    ops_differ += on.ops[i].rank != off.ops[i].rank || on.ops[i].start_s != off.ops[i].start_s ||
                  on.ops[i].dur_s != off.ops[i].dur_s || strcmp(on.ops[i].name, off.ops[i].name) != 0;
  printf("  ops %d, %d differ", on.n_ops, ops_differ);
  CU_ASSERT(on.n_ops > 0 && ops_differ == 0);
  if (expect_saving > 0) {
    CU_ASSERT(asked > 0 && run >= 0 && run < asked);
  } else if (expect_saving == 0) {
    CU_ASSERT(run == asked); /* nothing to collapse (or no cross-node collective: both -1) */
  }
  schema_result_free(&on);
  schema_result_free(&off);
}

static void check(const char *model, int layers, const char *cluster, int tp, int dp, int pp, int vpp, bool zero1,
                  int seq, bool full, int saving) {
  static plan p;
  CU_ASSERT_EQUAL_FATAL(make_plan(&p, model, layers, cluster, tp, dp, pp, vpp, zero1, seq), 0);
  same(&p, SIM_MODE_REDUCED, saving);
  /* full mode: every group's rings are on the platform, most share links (what collapses is printed) */
  if (full) same(&p, SIM_MODE_FULL, saving > 0 ? -1 : saving);
}

/* saving: 1 fewer flows must run in reduced mode, 0 none may be saved, -1 either (printed) */
static void test_one_node(void) { check("gpt3-1.3b", 4, "h200x8-nvswitch", 2, 4, 1, 1, true, 2048, true, 0); }

static void test_rings_one_member_per_node(void) {
  check("llama3-8b", 2, "h200-1024-rail", 8, 32, 1, 1, true, 2048, true, 1);
  check("llama3-8b", 2, "h200-16384-rail", 8, 256, 1, 1, true, 2048, false, 1);
}

static void test_rings_several_members_per_node(void) {
  /* the k rings of a node share its node-up link: one component a node, the same on every node */
  check("gpt-tiny", 2, "h200-1024-rail", 1, 32, 2, 1, true, 512, true, 1);
  check("gpt3-1.3b", 4, "h200-1024-rail", 2, 64, 1, 1, true, 2048, true, -1);
}

/* a tree's parent receives from two children on one link: components of a parent and its children */
static void test_trees(void) { check("llama3-8b", 2, "h200-1024-rail", 8, 64, 1, 1, false, 2048, true, 1); }

static void test_dp_tp_pp(void) {
  check("gpt3-1.3b", 8, "h200-1024-rail", 8, 16, 4, 2, true, 2048, false, 1);
  check("gpt3-1.3b", 8, "h200-1024-rail", 4, 16, 4, 2, true, 2048, true, -1);
  check("gpt3-1.3b", 8, "h200-1024-rail", 2, 16, 2, 1, false, 2048, true, -1);
}

static void test_oversubscribed(void) {
  check("gpt3-1.3b", 4, "h200-512-fattree-2to1", 8, 32, 2, 1, true, 2048, true, -1);
  check("gpt3-1.3b", 4, "h200-512-fattree-2to1", 2, 64, 2, 1, true, 2048, true, -1);
  check("gpt3-1.3b", 4, "h200-1024-dragonfly", 8, 32, 2, 1, true, 2048, false, -1);
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
  CU_pSuite s = CU_add_suite("sim_collapse", setup, teardown);
  CU_add_test(s, "one node: nothing collapses, same result", test_one_node);
  CU_add_test(s, "rings, one member per node (TP 8): collapse on = off", test_rings_one_member_per_node);
  CU_add_test(s, "rings, several members per node (k rings): on = off", test_rings_several_members_per_node);
  CU_add_test(s, "plain DP all-reduce as trees: on = off", test_trees);
  CU_add_test(s, "DP + TP + PP (interleaved, send/recv on the NICs): on = off", test_dp_tp_pp);
  CU_add_test(s, "oversubscribed fat tree and dragonfly: on = off", test_oversubscribed);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

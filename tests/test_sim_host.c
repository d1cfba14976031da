/* test_sim_host.c — the host clock (sim/sim_host.h), by hand: a host-bound
 * phase after a synchronisation, a GPU-bound phase where the host runs ahead
 * and costs nothing, the calibration's "host" section (loader, writer, sync
 * gap interpolation), the plan's launch counts, and one whole simulation
 * (moe-tiny on one GPU: each dropless routing sync adds its gap). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "sim_host.h"
#include "test_check.h"
#include "test_hand_moe.h"
#include "test_hand_sim.h"

#define US 1e-6

/* launch 4 us, GEMM 6 us, a fixed 50 us gap after a sync (the plan's figures) */
static sim_host hand_host(void) {
  plan p;
  memset(&p, 0, sizeof p);
  p.host_launch_us = 4, p.host_sync_us = 50;
  sim_host h;
  CU_ASSERT_EQUAL(sim_host_setup(&h, &p, NULL, NULL), 0);
  h.gemm_s = 6 * US; /* the plan's figure covers both; a calibration has its own GEMM cost */
  return h;
}

/* A sync op, then ten 2 us kernels and a GEMM:
 *   A: 1 kernel of 10 us, sync; host 0, GPU free 0: ends at 10, the host issued it by 4, waits 6, then the
 *      50 us gap: the host resumes at 60;
 *   B: 10 kernels, 20 us in all: the first starts at 60, the last is issued at 60 + 9 x 4 = 96 and runs
 *      2 us: ends at 98 (the GPU idle 50 us before it and 2 us between its kernels), host at 100;
 *   C: 1 GEMM of 100 us, GPU free 98, issued at 100: ends at 200, host at 106. */
static void test_host_bound_after_sync(void) {
  sim_host h = hand_host();
  double host = 0, start;
  double a = sim_host_op(&h, &host, 1, 0, 0, 1, 0, 10 * US, &start);
  NEAR_ABS(a, 10 * US, 1e-12);
  NEAR_ABS(start, 0, 1e-12);
  NEAR_ABS(host, 60 * US, 1e-12);
  double b = sim_host_op(&h, &host, 10, 0, 0, 0, a, 20 * US, &start);
  NEAR_ABS(start, 60 * US, 1e-12);
  NEAR_ABS(b, 98 * US, 1e-12);
  NEAR_ABS(host, 100 * US, 1e-12);
  double c = sim_host_op(&h, &host, 0, 1, 0, 0, b, 100 * US, &start);
  NEAR_ABS(c, 200 * US, 1e-12);
  NEAR_ABS(host, 106 * US, 1e-12);
  /* D: 1 kernel and 2 event records at 1 us each (6 us of host: 3 entries 2 us apart on average), 3 us on
   * the GPU. Host at 106, GPU free at 200: the host is ahead, D ends at 203, host at 112. E, the same from a
   * host at 300 (after a wait) and a GPU free at 203: the last entry is issued at 304 and runs 1 us: 305. */
  h.event_s = 1 * US;
  double dd = sim_host_op(&h, &host, 1, 0, 2, 0, c, 3 * US, &start);
  NEAR_ABS(dd, 203 * US, 1e-12);
  NEAR_ABS(host, 112 * US, 1e-12);
  host = 300 * US;
  double ee = sim_host_op(&h, &host, 1, 0, 2, 0, dd, 3 * US, &start);
  NEAR_ABS(start, 300 * US, 1e-12);
  NEAR_ABS(ee, 305 * US, 1e-12);
  NEAR_ABS(host, 306 * US, 1e-12);
}

/* The host ahead: 2 kernels of 50 us each issued by 8 us, then a GEMM of 100 us issued at 8 to 14 while the
 * GPU is busy until 100: every op ends when the GPU alone would end it, to the bit. */
static void test_gpu_bound_host_ahead(void) {
  sim_host h = hand_host();
  double host = 0;
  double a = sim_host_op(&h, &host, 2, 0, 0, 0, 0, 100 * US, NULL);
  CU_ASSERT_EQUAL(a, 0 + 100 * US);
  NEAR_ABS(host, 8 * US, 1e-12);
  double gpu_free = a, d = 100 * US;
  double b = sim_host_op(&h, &host, 0, 1, 0, 0, gpu_free, d, NULL);
  CU_ASSERT_EQUAL(b, gpu_free + d);
  NEAR_ABS(host, 14 * US, 1e-12);
  /* off (no plan figure, no calibration section): the GPU alone */
  plan p;
  memset(&p, 0, sizeof p);
  sim_host off;
  CU_ASSERT_EQUAL(sim_host_setup(&off, &p, NULL, NULL), 0);
  CU_ASSERT_FALSE(off.on);
  host = 1; /* a host far behind changes nothing when off */
  CU_ASSERT_EQUAL(sim_host_op(&off, &host, 5, 5, 2, 1, 3 * US, 7 * US, NULL), 3 * US + 7 * US);
  CU_ASSERT_EQUAL(host, 1);
}

/* Before an op marked host_syncs_before 3, host_calls_before 4 (Megatron-Core's DeepEP index conversion),
 * with the plan's launch 4 us and gap 50 us:
 *   host at 10, GPU reaches the op at 200: 200 + 3 x 50 + 4 x 4 = 366;
 *   host ahead at 400 (GPU at 200): 400 + 150 + 16 = 566;
 *   no syncs, or the host off: the host as it was. */
static void test_wait_before(void) {
  sim_host h = hand_host();
  double host = 10 * US;
  sim_host_wait_before(&h, &host, 200 * US, 3, 4);
  NEAR_ABS(host, 366 * US, 1e-12);
  host = 400 * US;
  sim_host_wait_before(&h, &host, 200 * US, 3, 4);
  NEAR_ABS(host, 566 * US, 1e-12);
  host = 10 * US;
  sim_host_wait_before(&h, &host, 200 * US, 0, 4);
  CU_ASSERT_EQUAL(host, 10 * US);
  plan p;
  memset(&p, 0, sizeof p);
  sim_host off;
  CU_ASSERT_EQUAL(sim_host_setup(&off, &p, NULL, NULL), 0);
  sim_host_wait_before(&off, &host, 200 * US, 3, 4);
  CU_ASSERT_EQUAL(host, 10 * US);
}

static const char *HOST_CAL =
    "{\"schema\": 1, \"gpu\": \"X\", \"driver\": \"1\", \"cuda\": \"1\", \"nccl\": \"1\", \"transport\": \"nvlink\","
    " \"measured_at\": \"now\", \"host\": {\"launch_us\": 4, \"gemm_launch_us\": 7, \"event_us\": 1.5,"
    " \"sync\": [{\"wait_us\": 0, \"gap_us\": 60}, {\"wait_us\": 100, \"gap_us\": 80}]}}";

static void test_calibration_host_section(void) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(HOST_CAL, strlen(HOST_CAL), "h.json", &c, &e), 0);
  CU_ASSERT(c.has_host);
  NEAR_ABS(c.host_launch_us, 4, 0);
  NEAR_ABS(c.host_gemm_launch_us, 7, 0);
  NEAR_ABS(schema_host_sync_gap(&c, 50), 70, 1e-12);  /* halfway between the points */
  NEAR_ABS(schema_host_sync_gap(&c, 1000), 80, 0);    /* clamped to the last */
  NEAR_ABS(schema_host_sync_gap(&c, 0), 60, 0);
  /* the simulator's setup takes the calibration's figures unless the plan gives its own */
  plan p;
  memset(&p, 0, sizeof p);
  sim_host h;
  CU_ASSERT_EQUAL(sim_host_setup(&h, &p, &c, NULL), 0);
  CU_ASSERT(h.on);
  NEAR_ABS(h.launch_s, 4 * US, 1e-15);
  NEAR_ABS(h.gemm_s, 7 * US, 1e-15);
  NEAR_ABS(h.event_s, 1.5 * US, 1e-15);
  NEAR_ABS(sim_host_sync_gap_s(&h, 50 * US), 70 * US, 1e-15);
  c.host_event_us = 0; /* not measured (files before it): an event record costs a kernel launch */
  CU_ASSERT_EQUAL(sim_host_setup(&h, &p, &c, NULL), 0);
  NEAR_ABS(h.event_s, 4 * US, 1e-15);
  c.host_event_us = 1.5;
  p.host_launch_us = 12;
  CU_ASSERT_EQUAL(sim_host_setup(&h, &p, &c, NULL), 0);
  NEAR_ABS(h.launch_s, 12 * US, 1e-15);
  NEAR_ABS(h.gemm_s, 12 * US, 1e-15);
  NEAR_ABS(h.event_s, 12 * US, 1e-15);
  CU_ASSERT(c.host_graph_gap_us == 0); /* optional: absent here */
  c.host_graph_gap_us = 1.25;
  /* written and read back the same */
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL(schema_calibration_write(&c, f, &e), 0);
  fclose(f);
  schema_calibration again;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(buf, len, "again", &again, &e), 0);
  CU_ASSERT_EQUAL(again.n_host_sync, 2);
  NEAR_ABS(again.host_event_us, 1.5, 0);
  NEAR_ABS(again.host_graph_gap_us, 1.25, 0);
  NEAR_ABS(again.host_sync_gap_us[1], 80, 0);
  /* carried into another transport's file (tacorun calibrate --compute-from): the whole section, graph gap
   * too, written and read back; a source without the section leaves the destination's as it was */
  schema_calibration other;
  memset(&other, 0, sizeof other); /* a collectives-only file of another transport: its metadata, no host */
  snprintf(other.gpu, sizeof other.gpu, "X"), snprintf(other.driver, sizeof other.driver, "1");
  snprintf(other.cuda, sizeof other.cuda, "1"), snprintf(other.nccl, sizeof other.nccl, "1");
  snprintf(other.transport, sizeof other.transport, "shm"), snprintf(other.measured_at, sizeof other.measured_at, "now");
  schema_calibration_copy_host(&other, &again);
  CU_ASSERT(other.has_host);
  free(buf);
  buf = NULL, len = 0;
  f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL(schema_calibration_write(&other, f, &e), 0);
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"graph_gap_us\": 1.25"));
  schema_calibration copied;
  int copied_rc = schema_calibration_from_json_text(buf, len, "copied", &copied, &e);
  if (copied_rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(copied_rc, 0);
  NEAR_ABS(copied.host_launch_us, 4, 0);
  NEAR_ABS(copied.host_gemm_launch_us, 7, 0);
  NEAR_ABS(copied.host_event_us, 1.5, 0);
  NEAR_ABS(copied.host_graph_gap_us, 1.25, 0);
  CU_ASSERT_EQUAL(copied.n_host_sync, 2);
  NEAR_ABS(copied.host_sync_wait_us[1], 100, 0);
  NEAR_ABS(copied.host_sync_gap_us[1], 80, 0);
  schema_calibration none;
  memset(&none, 0, sizeof none);
  schema_calibration_copy_host(&copied, &none);
  NEAR_ABS(copied.host_graph_gap_us, 1.25, 0);
  schema_calibration_free(&copied);
  schema_calibration_free(&other);
  schema_calibration_free(&again);
  free(buf);
  schema_calibration_free(&c);
  /* bad input names the field */
  static const char *bad[][2] = {
      {"\"launch_us\": 0, \"gemm_launch_us\": 7, \"sync\": [{\"wait_us\": 0, \"gap_us\": 60}]", "host.launch_us"},
      {"\"launch_us\": 4, \"gemm_launch_us\": 7", "host.sync"},
      {"\"launch_us\": 4, \"gemm_launch_us\": 7, \"event_us\": 0, \"sync\": [{\"wait_us\": 0, \"gap_us\": 60}]",
       "host.event_us"},
      {"\"launch_us\": 4, \"gemm_launch_us\": 7, \"graph_gap_us\": -1, \"sync\": [{\"wait_us\": 0, \"gap_us\": 60}]",
       "host"},
      {"\"launch_us\": 4, \"gemm_launch_us\": 7, \"sync\": [{\"wait_us\": 5, \"gap_us\": 60}, {\"wait_us\": 5, "
       "\"gap_us\": 60}]",
       "host.sync[1]"},
      {"\"launch_us\": 4, \"gemm_launch_us\": 7, \"sync\": [{\"wait_us\": 0, \"gap_us\": 60}], \"x\": 1", "x"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"schema\": 1, \"gpu\": \"X\", \"driver\": \"1\", \"cuda\": \"1\", \"nccl\": \"1\", \"transport\": "
             "\"nvlink\", \"measured_at\": \"now\", \"host\": {%s}}",
             bad[i][0]);
    CU_ASSERT_NOT_EQUAL(schema_calibration_from_json_text(text, strlen(text), "bad.json", &c, &e), 0);
    if (!strstr(e.msg, bad[i][1])) fprintf(stderr, "\n  error '%s' does not name %s\n", e.msg, bad[i][1]);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i][1]));
  }
}

/* ---- the plan's counts and a whole simulation ---- */

static char platform_path[64];

/* moe-tiny (1 dense + 3 MoE layers of 8 experts) on one GPU, 4 micro-batches of 1 x 128 tokens. */
static void make_plan(plan *p) {
  test_hand_moe_plan(p, "hand-host", 1, 1, 10, 1, 10);
  p->schedule = PLAN_SCHED_1F1B;
  test_hand_platform(platform_path, sizeof platform_path, "test-host-platform", 1, 10e9, 1e-6);
}

/* The executor's counts on moe-tiny: one sync per MoE layer and micro-batch (the permute forward), the
 * expert GEMM ops one call per expert (and the walker's two event records). */
static void test_plan_counts(void) {
  plan p;
  make_plan(&p);
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  model_shard s = {.tp = 1, .micro_batch = 1, .seq = 128, .ep = 1};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&p.model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_FATAL(n > 0);
  int syncs = 0, expert_fwd = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    syncs += op->host_sync;
    if (op->host_sync) {
      CU_ASSERT_STRING_EQUAL(ops[op->model_op].name, "permute");
      CU_ASSERT_EQUAL(op->phase, PLAN_PHASE_FWD);
    }
    if (op->kind == PLAN_OP_COMPUTE && op->model_op >= 0 && !strcmp(ops[op->model_op].name, "expert_fc1") &&
        op->phase == PLAN_PHASE_FWD) {
      CU_ASSERT_EQUAL(op->gemm_launches, p.model.experts);
      CU_ASSERT_EQUAL(op->launches, 0);
      CU_ASSERT_EQUAL(op->events, 2); /* the walker's two event records */
      expert_fwd++;
    }
  }
  CU_ASSERT_EQUAL(syncs, 4 * 3); /* 4 micro-batches x 3 MoE layers */
  CU_ASSERT_EQUAL(expert_fwd, 4 * 3);
  plan_program_free(&g);
}

/* DeepSeek-V3's router on moe-tiny's plan: the top-k forward two kernels (the sigmoid scores, the
 * group-limited choice), its backward one; the optimizer two more with the balancing bias (the loads'
 * copy, the update); the softmax router one each, the optimizer one. */
static void count_router_launches(const plan *p, int *topk_fwd, int *topk_bwd, int *optimizer) {
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, 0, &g, &e), 0);
  model_shard s = {.tp = 1, .micro_batch = 1, .seq = 128, .ep = 1};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_FATAL(n > 0);
  *topk_fwd = *topk_bwd = *optimizer = -1;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind != PLAN_OP_COMPUTE) continue;
    if (op->model_op == PLAN_MOP_OPTIMIZER) *optimizer = op->launches;
    if (op->model_op >= 0 && op->model_op < n && !strcmp(ops[op->model_op].name, "router_topk"))
      *(op->phase == PLAN_PHASE_FWD ? topk_fwd : topk_bwd) = op->launches;
  }
  plan_program_free(&g);
}

static void test_plan_counts_sigmoid_router(void) {
  plan p;
  make_plan(&p);
  int f, b, o;
  count_router_launches(&p, &f, &b, &o);
  CU_ASSERT_EQUAL(f, 1);
  CU_ASSERT_EQUAL(b, 1);
  CU_ASSERT_EQUAL(o, 1);
  p.model.router = MODEL_ROUTER_SIGMOID, p.model.router_num_groups = 4, p.model.router_group_topk = 2;
  p.model.router_expert_bias = true, p.model.router_bias_update_rate = 1e-3;
  count_router_launches(&p, &f, &b, &o);
  CU_ASSERT_EQUAL(f, 2);
  CU_ASSERT_EQUAL(b, 1);
  CU_ASSERT_EQUAL(o, 3);
}

/* The flex dispatcher with DeepEP (the default backend): the first routed-expert op of each MoE layer's
 * forward carries the three host syncs and four calls of the index conversion; no other op does, and none
 * under "hybridep", "enable_experimental" or the all-to-all dispatcher. Returns the marked ops. */
static int deepep_marks(const plan *p) {
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, 0, &g, &e), 0);
  model_shard s = {.tp = 1, .micro_batch = 1, .seq = 128, .ep = 1};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e), marked = 0;
  CU_ASSERT_FATAL(n > 0);
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (!op->host_syncs_before && !op->host_calls_before) continue;
    marked++;
    CU_ASSERT_EQUAL(op->host_syncs_before, PLAN_MOE_DEEPEP_INDEX_SYNCS);
    CU_ASSERT_EQUAL(op->host_calls_before, PLAN_MOE_DEEPEP_INDEX_CALLS);
    CU_ASSERT_EQUAL(op->phase, PLAN_PHASE_FWD);
    CU_ASSERT_STRING_EQUAL(ops[op->model_op].name, "expert_fc1");
    CU_ASSERT_EQUAL(op->gemm_launches, p->model.experts); /* the counts of the op itself are kept */
  }
  plan_program_free(&g);
  return marked;
}

static void test_plan_deepep_syncs(void) {
  plan p;
  make_plan(&p);
  CU_ASSERT_EQUAL(deepep_marks(&p), 0); /* all-to-all */
  p.moe_flex = true;
  CU_ASSERT_EQUAL(deepep_marks(&p), 4 * 3);
  p.moe_hybridep = true;
  CU_ASSERT_EQUAL(deepep_marks(&p), 0);
  p.moe_hybridep = false, p.enable_experimental = true;
  CU_ASSERT_EQUAL(deepep_marks(&p), 0);
}

/* The plan's fields: optional, > 0 when given, named in the error. */
static void test_plan_fields(void) {
  const char *base = "{\"schema\": 1, \"name\": \"h\", \"model\": \"moe-tiny\", \"cluster\": \"h200x2-nvlink\","
                     " \"layout\": {\"dp\": 1, \"tp\": 1, \"pp\": 1}, \"batch\": {\"micro\": 1, \"global\": 4,"
                     " \"seq\": 128}, \"schedule\": \"1f1b\"%s}";
  char text[512];
  plan p;
  ts_err e = {0};
  snprintf(text, sizeof text, base, "");
  CU_ASSERT_EQUAL_FATAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT_EQUAL(p.host_launch_us, 0);
  snprintf(text, sizeof text, base, ", \"host_launch_us\": 11.1, \"host_sync_us\": 22.8");
  CU_ASSERT_EQUAL_FATAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
  NEAR_ABS(p.host_launch_us, 11.1, 0);
  NEAR_ABS(p.host_sync_us, 22.8, 0);
  CU_ASSERT_FALSE(p.enable_experimental);
  CU_ASSERT_FALSE(p.moe_hybridep);
  snprintf(text, sizeof text, base, ", \"enable_experimental\": true");
  CU_ASSERT_EQUAL_FATAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT(p.enable_experimental);
  const char *flex = "{\"schema\": 1, \"name\": \"h\", \"model\": \"moe-tiny\", \"cluster\": \"h200x2-nvlink\","
                     " \"layout\": {\"dp\": 2, \"tp\": 1, \"pp\": 1, \"ep\": 2%s}, \"batch\": {\"micro\": 1,"
                     " \"global\": 4, \"seq\": 128}, \"schedule\": \"1f1b\"}";
  snprintf(text, sizeof text, flex, ", \"moe_token_dispatcher_type\": \"flex\", \"moe_flex_dispatcher_backend\": \"hybridep\"");
  CU_ASSERT_EQUAL_FATAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT(p.moe_flex && p.moe_hybridep);
  snprintf(text, sizeof text, flex, ", \"capacity_factor\": 1.0, \"moe_pad_expert_input_to_capacity\": true");
  CU_ASSERT_EQUAL_FATAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT(p.moe_pad_to_capacity);
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int waits = 0;
  for (int i = 0; i < g.n; i++) waits += g.ops[i].host_sync + g.ops[i].host_syncs_before;
  CU_ASSERT_EQUAL(waits, 0); /* padded to capacity: the split sizes need no copy */
  plan_program_free(&g);
  static const char *bad_pad[] = {", \"moe_pad_expert_input_to_capacity\": true", /* no capacity factor */
                                  ", \"capacity_factor\": 1.0, \"moe_pad_expert_input_to_capacity\": true,"
                                  " \"moe_token_dispatcher_type\": \"flex\""};
  for (size_t i = 0; i < sizeof bad_pad / sizeof *bad_pad; i++) {
    snprintf(text, sizeof text, flex, bad_pad[i]);
    CU_ASSERT_NOT_EQUAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "layout.moe_pad_expert_input_to_capacity"));
    CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  }
  static const char *bad_flex[] = {", \"moe_flex_dispatcher_backend\": \"deepep\"", /* all-to-all dispatcher */
                                   ", \"moe_token_dispatcher_type\": \"flex\", \"moe_flex_dispatcher_backend\": \"nccl\""};
  for (size_t i = 0; i < sizeof bad_flex / sizeof *bad_flex; i++) {
    snprintf(text, sizeof text, flex, bad_flex[i]);
    CU_ASSERT_NOT_EQUAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
    if (!strstr(e.msg, "layout.moe_flex_dispatcher_backend")) fprintf(stderr, "\n  error '%s'\n", e.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "layout.moe_flex_dispatcher_backend"));
    CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  }
  static const char *bad[][2] = {{", \"host_launch_us\": 0", "host_launch_us"},
                                 {", \"host_sync_us\": -1", "host_sync_us"},
                                 {", \"host_launch_us\": \"fast\"", "host_launch_us"},
                                 {", \"enable_experimental\": 1", "enable_experimental"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    snprintf(text, sizeof text, base, bad[i][0]);
    CU_ASSERT_NOT_EQUAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
    if (!strstr(e.msg, bad[i][1])) fprintf(stderr, "\n  error '%s' does not name %s\n", e.msg, bad[i][1]);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i][1]));
    CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  }
}

static double simulate(const plan *p, const schema_calibration *cal, double *host_wait) {
  schema_result r;
  test_hand_simulate(p, cal, platform_path, &r);
  double t = r.iteration_time_s;
  if (host_wait) *host_wait = r.breakdown.host_wait_s;
  schema_result_free(&r);
  return t;
}

/* One GPU, one stream: after each routing sync the GPU idles from the copy's end until the host, back after
 * the gap G, issues what follows; with launches of ~0 cost the iteration grows by 12 x G exactly. A host
 * section with the same ~0 launch cost and a gap of ~0 leaves the iteration as without one. */
static void test_whole_iteration(void) {
  plan p;
  make_plan(&p);
  schema_calibration none, host;
  memset(&none, 0, sizeof none);
  memset(&host, 0, sizeof host);
  double hw;
  double base = simulate(&p, &none, &hw);
  CU_ASSERT_EQUAL(hw, 0);
  host.has_host = true;
  host.host_launch_us = host.host_gemm_launch_us = 1e-9;
  host.n_host_sync = 1;
  host.host_sync_wait_us[0] = 0;
  host.host_sync_gap_us[0] = 1000;
  double with = simulate(&p, &host, &hw);
  NEAR_ABS(with - base, 12 * 1000 * US, 1e-9);
  NEAR_ABS(hw, 12 * 1000 * US, 1e-9); /* the breakdown's host wait line: the twelve gaps */
  /* DeepEP (flex): three more gaps after each of the twelve permute syncs (the index conversion after the
   * dispatch; one GPU, so no all-to-all between), its four calls at ~0 cost: 12 x 4 x G in all */
  p.moe_flex = true;
  double flex = simulate(&p, &host, &hw);
  NEAR_ABS(flex - base, 12 * 4 * 1000 * US, 1e-9);
  NEAR_ABS(hw, 12 * 4 * 1000 * US, 1e-9);
  p.enable_experimental = true; /* the fused converter: the permute syncs alone */
  NEAR_ABS(simulate(&p, &host, NULL) - base, 12 * 1000 * US, 1e-9);
  p.moe_flex = false, p.enable_experimental = false;
  /* the all-to-all dispatcher with drop-and-pad: no wait at all (capacity 1, imbalance 1: the same GPU work) */
  p.capacity_factor = 1.0, p.moe_pad_to_capacity = true;
  NEAR_ABS(simulate(&p, &host, &hw), base, 1e-9);
  CU_ASSERT_EQUAL(hw, 0);
  p.capacity_factor = 0, p.moe_pad_to_capacity = false;
  host.host_sync_gap_us[0] = 1e-9;
  NEAR_ABS(simulate(&p, &host, NULL), base, 1e-12);
  unlink(platform_path);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_host", NULL, NULL);
  CU_add_test(s, "host-bound phase after a sync", test_host_bound_after_sync);
  CU_add_test(s, "GPU-bound phase: the host ahead costs nothing", test_gpu_bound_host_ahead);
  CU_add_test(s, "syncs and calls before an op (DeepEP index conversion)", test_wait_before);
  CU_add_test(s, "calibration host section", test_calibration_host_section);
  CU_add_test(s, "plan launch counts (moe-tiny)", test_plan_counts);
  CU_add_test(s, "the sigmoid router's and the balancing bias' launches", test_plan_counts_sigmoid_router);
  CU_add_test(s, "plan: DeepEP's syncs after the dispatch", test_plan_deepep_syncs);
  CU_add_test(s, "plan fields host_launch_us, host_sync_us, enable_experimental, moe_flex_dispatcher_backend, "
                 "moe_pad_expert_input_to_capacity",
              test_plan_fields);
  CU_add_test(s, "whole iteration: 12 syncs add 12 gaps", test_whole_iteration);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

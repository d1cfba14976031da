/* test_framework_host.c — a training framework's host time (the calibration's "framework_host" section,
 * schema/calibration_framework.c; the plan's host_framework; sim/sim_host.c): the section's loader, writer
 * and errors, the blocks a layer's ops belong to, the per-entry rates by hand on a made-up program, and one
 * whole host-bound simulation whose iteration is the section's time per layer-micro-batch times their count. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "sim_host.h"
#include "test_cal_round_trip.h"
#include "test_check.h"
#include "test_hand_moe.h"
#include "test_hand_sim.h"

#define US 1e-6

#define CAL_HEAD                                                                                                   \
  "{\"schema\": 1, \"gpu\": \"X\", \"driver\": \"1\", \"cuda\": \"1\", \"nccl\": \"1\", \"transport\": "          \
  "\"nvlink\", \"measured_at\": \"now\", \"host\": {\"launch_us\": 4, \"gemm_launch_us\": 7, \"sync\": "           \
  "[{\"wait_us\": 0, \"gap_us\": 60}]}, "

static const char *FW_CAL = CAL_HEAD
    "\"framework_host\": {\"framework\": \"megatron-core\", \"measured_on\": \"a host\", \"source\": \"a run\", "
    "\"layers\": {\"dense\": {\"fwd_us\": 600, \"bwd_us\": 300, \"parts\": {\"attention\": 100, \"mlp\": 200}}, "
    "\"moe\": {\"fwd_us\": 1000, \"bwd_us\": 500}}, "
    "\"calls\": {\"allgather\": 25, \"alltoall\": 40}}}";

static void load(const char *text, schema_calibration *c) {
  ts_err e = {0};
  int rc = schema_calibration_from_json_text(text, strlen(text), "fw.json", c, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static void test_section(void) {
  schema_calibration c;
  load(FW_CAL, &c);
  const schema_framework_host *f = &c.fw_host;
  CU_ASSERT_STRING_EQUAL(f->framework, "megatron-core");
  NEAR_ABS(f->layer_fwd_us[SCHEMA_FW_LAYER_DENSE], 600, 0);
  NEAR_ABS(f->layer_bwd_us[SCHEMA_FW_LAYER_MOE], 500, 0);
  NEAR_ABS(f->part_us[SCHEMA_FW_LAYER_DENSE][SCHEMA_FW_MLP], 200, 0);
  NEAR_ABS(f->part_us[SCHEMA_FW_LAYER_MOE][SCHEMA_FW_ATTENTION], 0, 0);
  NEAR_ABS(f->call_us[TS_COLL_ALLGATHER], 25, 0);
  NEAR_ABS(f->call_us[TS_COLL_ALLREDUCE], 0, 0);
  /* written and read back the same */
  ts_err e = {0};
  schema_calibration again;
  CU_ASSERT_EQUAL_FATAL(test_cal_round_trip(&c, "fw.json", &again, &e), 0);
  CU_ASSERT_EQUAL(memcmp(&again.fw_host, &c.fw_host, sizeof c.fw_host), 0);
  /* carried with the host's costs into another file (tacorun calibrate --compute-from) */
  schema_calibration other;
  memset(&other, 0, sizeof other);
  schema_calibration_copy_host(&other, &c);
  CU_ASSERT_EQUAL(memcmp(&other.fw_host, &c.fw_host, sizeof c.fw_host), 0);
  schema_calibration_free(&again);
  schema_calibration_free(&c);
  /* bad input names the field */
  static const char *bad[][2] = {
      {"\"framework\": \"deepspeed\", \"measured_on\": \"h\", \"source\": \"s\", \"layers\": {\"dense\": "
       "{\"fwd_us\": 1, \"bwd_us\": 1}}",
       "framework_host"},
      {"\"framework\": \"megatron-core\", \"measured_on\": \"h\", \"source\": \"s\"", "framework_host.layers"},
      {"\"framework\": \"megatron-core\", \"measured_on\": \"h\", \"source\": \"s\", \"layers\": {}",
       "framework_host.layers"},
      {"\"framework\": \"megatron-core\", \"measured_on\": \"h\", \"source\": \"s\", \"layers\": {\"dense\": "
       "{\"fwd_us\": 0, \"bwd_us\": 1}}",
       "framework_host.layers.dense"},
      {"\"framework\": \"megatron-core\", \"measured_on\": \"h\", \"source\": \"s\", \"layers\": {\"moe\": "
       "{\"fwd_us\": 1, \"bwd_us\": 1, \"parts\": {\"mlp\": 3}}}",
       "framework_host.layers.moe.parts.mlp"},
      {"\"framework\": \"megatron-core\", \"measured_on\": \"h\", \"source\": \"s\", \"layers\": {\"dense\": "
       "{\"fwd_us\": 1, \"bwd_us\": 1, \"parts\": {\"attention\": -3}}}",
       "framework_host.layers.dense.parts.attention"},
      {"\"framework\": \"megatron-core\", \"measured_on\": \"h\", \"source\": \"s\", \"layers\": {\"dense\": "
       "{\"fwd_us\": 1, \"bwd_us\": 1}}, \"calls\": {\"sendrecv\": 3}",
       "framework_host.calls.sendrecv"},
      {"\"framework\": \"megatron-core\", \"measured_on\": \"h\", \"source\": \"s\", \"layers\": {\"dense\": "
       "{\"fwd_us\": 1, \"bwd_us\": 1}}, \"x\": 1",
       "framework_host"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[1024];
    snprintf(text, sizeof text, CAL_HEAD "\"framework_host\": {%s}}", bad[i][0]);
    CU_ASSERT_NOT_EQUAL(schema_calibration_from_json_text(text, strlen(text), "bad.json", &c, &e), 0);
    if (!strstr(e.msg, bad[i][1])) fprintf(stderr, "\n  error '%s' does not name %s\n", e.msg, bad[i][1]);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i][1]));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.json"));
  }
}

static void test_parts(void) {
  CU_ASSERT_EQUAL(sim_host_fw_part("fc1", false), SCHEMA_FW_MLP);
  CU_ASSERT_EQUAL(sim_host_fw_part("mlp_residual", false), SCHEMA_FW_MLP);
  CU_ASSERT_EQUAL(sim_host_fw_part("mlp_residual", true), SCHEMA_FW_COMBINE);
  CU_ASSERT_EQUAL(sim_host_fw_part("router_topk", true), SCHEMA_FW_ROUTER);
  CU_ASSERT_EQUAL(sim_host_fw_part("permute", true), SCHEMA_FW_DISPATCH);
  CU_ASSERT_EQUAL(sim_host_fw_part("expert_fc2", true), SCHEMA_FW_EXPERTS);
  CU_ASSERT_EQUAL(sim_host_fw_part("shared_act", true), SCHEMA_FW_EXPERTS);
  CU_ASSERT_EQUAL(sim_host_fw_part("unpermute", true), SCHEMA_FW_COMBINE);
  CU_ASSERT_EQUAL(sim_host_fw_part("qkv", true), SCHEMA_FW_ATTENTION);
  CU_ASSERT_EQUAL(sim_host_fw_part("ln2", false), SCHEMA_FW_ATTENTION);
}

/* A made-up dense layer program, two micro-batches: forward ln1 (1 kernel + 2 events = 3 entries), fc1
 * (1 GEMM + 2 events = 3), an all-gather between them; backward fc1 (2 GEMMs + 2 events = 4), ln1 (2 + 2 = 4).
 * Forward 600 us split attention 100 : mlp 200: ln1 gets 200 us over its 3 entries, fc1 400 us over 3; the
 * backward's 300 us the same shares over 4 entries each: 100 and 200 us. */
static void test_rates_by_hand(void) {
  schema_calibration c;
  load(FW_CAL, &c);
  plan p;
  memset(&p, 0, sizeof p);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(model_load("gpt-tiny", NULL, &p.model, &e), 0);
  p.host_framework = PLAN_HOST_MEGATRON_CORE;
  sim_host h;
  CU_ASSERT_EQUAL_FATAL(sim_host_setup(&h, &p, &c, &e), 0);
  CU_ASSERT(h.on && h.fw);
  model_op mops[2];
  memset(mops, 0, sizeof mops);
  snprintf(mops[0].name, sizeof mops[0].name, "ln1");
  snprintf(mops[1].name, sizeof mops[1].name, "fc1");
  plan_op ops[10];
  memset(ops, 0, sizeof ops);
  int n = 0;
  for (int mb = 0; mb < 2; mb++) {
    ops[n++] = (plan_op){.kind = PLAN_OP_COMPUTE, .phase = PLAN_PHASE_FWD, .model_op = 0, .layer = 0, .micro = mb,
                         .launches = 1, .events = 2};
    ops[n++] = (plan_op){.kind = PLAN_OP_COLLECTIVE, .coll = PLAN_COLL_ALLGATHER, .phase = PLAN_PHASE_FWD,
                         .model_op = 1, .layer = 0, .micro = mb};
    ops[n++] = (plan_op){.kind = PLAN_OP_COMPUTE, .phase = PLAN_PHASE_FWD, .model_op = 1, .layer = 0, .micro = mb,
                         .gemm_launches = 1, .events = 2};
  }
  ops[n++] = (plan_op){.kind = PLAN_OP_COMPUTE, .phase = PLAN_PHASE_BWD, .model_op = 1, .layer = 0, .micro = 0,
                       .gemm_launches = 2, .events = 2};
  ops[n++] = (plan_op){.kind = PLAN_OP_COMPUTE, .phase = PLAN_PHASE_BWD, .model_op = 0, .layer = 0, .micro = 0,
                       .launches = 2, .events = 2};
  ops[n++] = (plan_op){.kind = PLAN_OP_COMPUTE, .phase = PLAN_PHASE_RECOMPUTE, .model_op = 1, .layer = 0,
                       .micro = 1, .gemm_launches = 1, .events = 2};
  ops[n++] = (plan_op){.kind = PLAN_OP_COMPUTE, .phase = PLAN_PHASE_OPTIMIZER, .model_op = PLAN_MOP_OPTIMIZER,
                       .layer = -1, .micro = -1, .launches = 1, .events = 2};
  plan_program prog = {.rank = 0, .n = n, .cap = n, .ops = ops};
  sim_host_fw_rates rate;
  sim_host_fw_entry_rates(&h, &p, mops, 2, &prog, rate);
  const double(*r)[2][SCHEMA_FW_NPARTS] = (const double(*)[2][SCHEMA_FW_NPARTS])rate;
  NEAR_ABS(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[0]), 200 * US, 1e-12);
  NEAR_ABS(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[2]), 400 * US, 1e-12);
  NEAR_ABS(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[5]), 400 * US, 1e-12); /* the second micro-batch: the same */
  NEAR_ABS(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[6]), 200 * US, 1e-12);
  NEAR_ABS(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[7]), 100 * US, 1e-12);
  NEAR_ABS(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[8]), 400 * US, 1e-12); /* recompute: the forward's rate */
  CU_ASSERT(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[9]) < 0);            /* the optimizer: the executor's costs */
  CU_ASSERT(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[1]) < 0);            /* a collective is not a layer op */
  NEAR_ABS(sim_host_fw_call_s(&h, &ops[1]), 25 * US, 1e-15);
  NEAR_ABS(sim_host_fw_call_s(&h, &ops[0]), 0, 0);
  /* without parts every entry of a phase costs the same: the MoE layer's 1,000 us over 6 entries */
  c.fw_host.part_us[SCHEMA_FW_LAYER_DENSE][SCHEMA_FW_ATTENTION] = 0;
  c.fw_host.part_us[SCHEMA_FW_LAYER_DENSE][SCHEMA_FW_MLP] = 0;
  CU_ASSERT_EQUAL_FATAL(sim_host_setup(&h, &p, &c, &e), 0);
  sim_host_fw_entry_rates(&h, &p, mops, 2, &prog, rate);
  NEAR_ABS(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[0]), 300 * US, 1e-12);
  NEAR_ABS(sim_host_fw_op_s(&h, &p, mops, 2, r, &ops[7]), 150 * US, 1e-12);
  /* the calibration must speak for the plan's framework and its layers: else file: framework_host: reason */
  p.model.experts = 8, p.model.dense_layers = 0;
  c.fw_host.layer_fwd_us[SCHEMA_FW_LAYER_MOE] = 0;
  CU_ASSERT_NOT_EQUAL(sim_host_setup(&h, &p, &c, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "framework_host.layers"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "moe"));
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  c.fw_host.framework[0] = 0;
  CU_ASSERT_NOT_EQUAL(sim_host_setup(&h, &p, &c, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "framework_host"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "megatron-core"));
  /* the executor's own calls need no section */
  p.host_framework = PLAN_HOST_EXECUTOR;
  CU_ASSERT_EQUAL(sim_host_setup(&h, &p, &c, &e), 0);
  CU_ASSERT(!h.fw);
  schema_calibration_free(&c);
}

static void test_plan_field(void) {
  static const char *base = "{\"schema\": 1, \"name\": \"t\", \"model\": \"moe-tiny\", \"cluster\": "
                            "\"h200x2-nvlink\", \"layout\": {\"dp\": 1, \"tp\": 1, \"pp\": 1}, \"batch\": "
                            "{\"micro\": 1, \"global\": 4, \"seq\": 128}, \"schedule\": \"1f1b\"%s}";
  char text[1024];
  plan p;
  ts_err e = {0};
  snprintf(text, sizeof text, base, "");
  CU_ASSERT_EQUAL_FATAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT_EQUAL(p.host_framework, PLAN_HOST_EXECUTOR);
  snprintf(text, sizeof text, base, ", \"host_framework\": \"megatron-core\"");
  CU_ASSERT_EQUAL_FATAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT_EQUAL(p.host_framework, PLAN_HOST_MEGATRON_CORE);
  snprintf(text, sizeof text, base, ", \"host_framework\": \"pytorch\"");
  CU_ASSERT_NOT_EQUAL(plan_from_json_text(text, strlen(text), "h.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "host_framework"));
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
}

static char platform_path[64];

static double simulate(const plan *p, const schema_calibration *cal) {
  schema_result r;
  test_hand_simulate(p, cal, platform_path, &r);
  /* the result records the plan's host framework (through the forked runner's JSON) */
  CU_ASSERT_STRING_EQUAL(r.host_framework, p->host_framework == PLAN_HOST_EXECUTOR ? "" : "megatron-core");
  double t = r.iteration_time_s;
  schema_result_free(&r);
  return t;
}

/* moe-tiny (1 dense + 3 MoE layers) on one GPU, 4 micro-batches, the section's layers at 10 + 20 ms (dense)
 * and 30 + 40 ms (MoE), every other launch at ~0 and no sync gap: the host issues for
 * 4 x (30 + 3 x 70) ms = 960 ms, far beyond the GPU's work, so the iteration is the host's time and at most
 * the GPU's own iteration (without the framework) more. */
static void test_whole_iteration(void) {
  plan p;
  test_hand_moe_plan(&p, "hand-fw", 1, 1, 10, 1, 10);
  p.schedule = PLAN_SCHED_1F1B;
  test_hand_platform(platform_path, sizeof platform_path, "test-fw-platform", 1, 10e9, 1e-6);
  schema_calibration cal;
  memset(&cal, 0, sizeof cal);
  cal.has_host = true;
  cal.host_launch_us = cal.host_gemm_launch_us = 1e-9;
  cal.n_host_sync = 1;
  cal.host_sync_gap_us[0] = 1e-9;
  double base = simulate(&p, &cal);
  snprintf(cal.fw_host.framework, sizeof cal.fw_host.framework, "megatron-core");
  cal.fw_host.layer_fwd_us[SCHEMA_FW_LAYER_DENSE] = 10e3, cal.fw_host.layer_bwd_us[SCHEMA_FW_LAYER_DENSE] = 20e3;
  cal.fw_host.layer_fwd_us[SCHEMA_FW_LAYER_MOE] = 30e3, cal.fw_host.layer_bwd_us[SCHEMA_FW_LAYER_MOE] = 40e3;
  NEAR_ABS(simulate(&p, &cal), base, 1e-12); /* the plan does not ask for it: unchanged */
  p.host_framework = PLAN_HOST_MEGATRON_CORE;
  const double host = 4 * (30e3 + 3 * 70e3) * US, t = simulate(&p, &cal);
  CU_ASSERT(t >= host - 1e-9);
  CU_ASSERT(t <= host + base + 1e-9);
  if (!(t >= host - 1e-9 && t <= host + base + 1e-9)) fprintf(stderr, "\n  %g s, host %g s, base %g s\n", t, host, base);
  /* split by block, the same total */
  cal.fw_host.part_us[SCHEMA_FW_LAYER_MOE][SCHEMA_FW_ATTENTION] = 3;
  cal.fw_host.part_us[SCHEMA_FW_LAYER_MOE][SCHEMA_FW_EXPERTS] = 1;
  const double split = simulate(&p, &cal);
  CU_ASSERT(split >= host - 1e-9 && split <= host + base + 1e-9);
  unlink(platform_path);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("framework_host", NULL, NULL);
  CU_add_test(s, "calibration section: load, write, copy, errors", test_section);
  CU_add_test(s, "the block of each layer op", test_parts);
  CU_add_test(s, "rates per entry by hand", test_rates_by_hand);
  CU_add_test(s, "plan field host_framework", test_plan_field);
  CU_add_test(s, "whole iteration at the host's pace", test_whole_iteration);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

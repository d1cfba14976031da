/* test_moe_sim.c — the simulator on MoE ops, by hand: an expert-parallel
 * all-to-all over a single-switch platform, and the imbalance wait. Each
 * simulation runs in a forked child (sim_run_isolated). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "test_check.h"
#include "test_hand_moe.h"

#define BW 10e9   /* bytes/s per link direction */
#define LAT 5e-6  /* s per link */
#define PEAK 1e15 /* FLOP/s of the hand cluster */

static char platform_path[64];
static schema_calibration cal; /* empty: every cost from the hand cluster's roofline */

/* moe-tiny on n hosts of one GPU each behind one switch, dp n, ep n. */
static void make_plan(plan *p, int n, double imbalance) {
  test_hand_moe_plan(p, "hand-moe", n, 1, BW / 1e9, 1, BW / 1e9);
  p->cluster.gpu.bf16_tflops = PEAK / 1e12;
  p->dp = n, p->ep = n, p->moe_imbalance = imbalance;
  p->global_batch = n;
  p->schedule = PLAN_SCHED_GPIPE;
  test_hand_platform(platform_path, sizeof platform_path, "test-moe-platform", n, BW, LAT);
}

static plan_op *add_op(plan_program *pr, plan_op_kind kind, plan_stream stream) {
  CU_ASSERT_FATAL(pr->n < pr->cap);
  plan_op *op = &pr->ops[pr->n++];
  memset(op, 0, sizeof *op);
  op->kind = (uint8_t)kind;
  op->stream = (uint8_t)stream;
  op->layer = op->micro = op->peer = op->tag = -1;
  for (int k = 0; k < PLAN_MAX_DEPS; k++) op->dep[k] = -1;
  return op;
}

/* Runs one program per rank, built by fill(rank, program); platform NULL: the plan's cluster. */
static int run_with(const plan *p, void (*fill)(const plan *, plan_program *), const char *platform, bool a2a_analytic,
                    schema_result *r) {
  int world = plan_world_size(p);
  plan_program *pr = calloc((size_t)world, sizeof *pr);
  for (int k = 0; k < world; k++) {
    pr[k].rank = k, pr[k].cap = 16, pr[k].ops = calloc(16, sizeof(plan_op));
    fill(p, &pr[k]);
  }
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .platform_path = platform, .programs = pr,
                   .clock_off = true, .alltoall_analytic = a2a_analytic};
  ts_err e = {0};
  int rc = sim_run_isolated(p, &o, r, &e);
  if (rc) fprintf(stderr, "\n  simulation failed: %s\n", e.msg);
  for (int k = 0; k < world; k++) free(pr[k].ops);
  free(pr);
  return rc;
}

static int run(const plan *p, void (*fill)(const plan *, plan_program *), schema_result *r) {
  return run_with(p, fill, platform_path, false, r);
}

static double a2a_bytes = 4e8;

static void one_alltoall(const plan *p, plan_program *g) {
  (void)p;
  plan_op *op = add_op(g, PLAN_OP_COLLECTIVE, PLAN_STREAM_TP);
  op->coll = PLAN_COLL_ALLTOALL;
  op->group = PLAN_GROUP_EP;
  op->traffic = PLAN_TRAFFIC_EP;
  op->model_op = PLAN_MOP_MOE_TOKENS;
  op->bytes = op->wire_bytes = a2a_bytes;
  plan_op *c = add_op(g, PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE); /* waits for it: the wait is EP exposed */
  c->model_op = -100;
  c->dep[0] = 0;
}

/* Each of n ranks sends S/n to each of the others: (n-1)/n S through its
 * link at BW, both directions at once (full duplex), plus one route latency
 * (two links). */
static void test_alltoall_on_a_switch(void) {
  for (int n = 4; n <= 8; n += 4) {
    plan p;
    make_plan(&p, n, 1.0);
    schema_result r;
    CU_ASSERT_EQUAL_FATAL(run(&p, one_alltoall, &r), 0);
    double expect = (n - 1.0) / n * a2a_bytes / BW + 2 * LAT;
    NEAR(r.iteration_time_s, expect, 0.01);
    NEAR(r.breakdown.ep_exposed_s, expect, 0.01);
    schema_result_free(&r);
  }
}

/* --alltoall analytic on the same switch: no flows, the same time to the rounding (each host's link carries
 * n - 1 flows of S/n each way, all ending together: t = 2 LAT + (n - 1) S / (n BW)), and the note says so. */
static void test_alltoall_analytic_on_a_switch(void) {
  for (int n = 4; n <= 8; n += 4) {
    plan p;
    make_plan(&p, n, 1.0);
    schema_result flows, analytic;
    CU_ASSERT_EQUAL_FATAL(run_with(&p, one_alltoall, platform_path, false, &flows), 0);
    CU_ASSERT_EQUAL_FATAL(run_with(&p, one_alltoall, platform_path, true, &analytic), 0);
    double expect = (n - 1.0) / n * a2a_bytes / BW + 2 * LAT;
    NEAR(analytic.iteration_time_s, expect, 1e-12);
    NEAR(analytic.iteration_time_s, flows.iteration_time_s, 1e-9);
    NEAR(analytic.breakdown.ep_exposed_s, flows.breakdown.ep_exposed_s, 1e-9);
    bool noted = false;
    for (int k = 0; k < analytic.n_notes; k++) noted |= strstr(analytic.notes[k], "alltoall analytic") != NULL;
    CU_ASSERT(noted);
    schema_result_free(&flows);
    schema_result_free(&analytic);
  }
}

/* The routed-expert ops of moe-tiny's MoE layer, forward, then the imbalance
 * op the program builder emits after them. */
static void experts_then_wait(const plan *p, plan_program *g) {
  model_shard s = {.tp = 1, .micro_batch = p->micro_batch, .seq = p->seq, .ep = p->ep};
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e;
  int n = model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  double flops = 0, bytes = 0;
  for (int i = 0; i < n; i++) {
    if (ops[i].parallel != MODEL_PAR_EXPERT) continue;
    plan_op *c = add_op(g, PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
    c->model_op = (int16_t)i, c->phase = PLAN_PHASE_FWD, c->flops = ops[i].flops_fwd, c->bytes = ops[i].bytes_fwd;
    flops += c->flops, bytes += c->bytes;
  }
  double f = plan_moe_max_load(p);
  if (f <= 1.0) return;
  plan_op *w = add_op(g, PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
  w->model_op = PLAN_MOP_MOE_IMBALANCE, w->phase = PLAN_PHASE_FWD, w->tag = 0;
  w->flops = (f - 1) * flops, w->bytes = (f - 1) * bytes;
}

/* The busiest rank's extra time is (f - 1) x the expert ops': reported as
 * the imbalance wait, not as compute. */
static void test_imbalance_wait(void) {
  plan p;
  schema_result even, skewed;
  make_plan(&p, 4, 1.0);
  CU_ASSERT_EQUAL_FATAL(run(&p, experts_then_wait, &even), 0);
  make_plan(&p, 4, 1.5);
  CU_ASSERT_EQUAL_FATAL(run(&p, experts_then_wait, &skewed), 0);
  double t = even.breakdown.compute_s;
  CU_ASSERT(t > 0);
  CU_ASSERT_DOUBLE_EQUAL(even.breakdown.imbalance_s, 0.0, 1e-15);
  NEAR(skewed.breakdown.compute_s, t, 1e-9);
  NEAR(skewed.breakdown.imbalance_s, 0.5 * t, 1e-9);
  NEAR(skewed.iteration_time_s, 1.5 * even.iteration_time_s, 1e-6);
  schema_result_free(&even);
  schema_result_free(&skewed);
}

/* A rail-optimised cluster of 8 nodes of 4 GPUs (path in cluster). */
/* A cluster file of `nodes` H200 nodes of 4 GPUs (NVSwitch inside, a 50 GB/s NIC a GPU) whose fabric is
 * the JSON object `fabric`, in /tmp named by `tag` and this process. */
static void write_cluster(char *cluster, size_t cap, const char *tag, int nodes, const char *fabric) {
  snprintf(cluster, cap, "/tmp/test-moe-%s-%d.json", tag, (int)getpid());
  FILE *f = fopen(cluster, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "{ \"schema\": 1, \"name\": \"%s\", \"gpu\": \"H200-SXM\", \"nodes\": %d, \"gpus_per_node\": 4,\n"
             "  \"intra\": { \"kind\": \"nvswitch\", \"gbps_per_gpu\": 450, \"latency_us\": 2 },\n"
             "  \"nic\": { \"per_node\": 4, \"gbps\": 50, \"latency_us\": 2.5 },\n"
             "  \"fabric\": %s }\n",
          tag, nodes, fabric);
  fclose(f);
}

static void write_rail_cluster(char *cluster, size_t cap) {
  write_cluster(cluster, cap, "rail4", 8,
                "{ \"kind\": \"rail_fat_tree\", \"levels\": 2, \"oversubscription\": 1.0, \"nodes_per_leaf\": 8, "
                "\"latency_us\": 0.5 }");
}

/* Plan p simulated in reduced mode (r[0]) and in full mode (r[1]), roofline costs, no clock model. */
static void reduced_and_full(const plan *p, schema_result r[2]) {
  ts_err e = {0};
  for (int k = 0; k < 2; k++) {
    sim_options o = {.mode = k ? SIM_MODE_FULL : SIM_MODE_REDUCED, .cal = &cal, .clock_off = true};
    int rc = sim_run_isolated(p, &o, &r[k], &e);
    if (rc) fprintf(stderr, "\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
  }
}

/* The MoE plan of the tests below: moe-tiny, dp 16, pp 2, ep 8 over nodes of 4 GPUs, TACO on the experts'
 * all-to-alls. */
static void rail_moe_plan(const char *cluster, plan *p) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"schema\":1,\"model\":\"moe-tiny\",\"cluster\":\"%s\",\"layout\":{\"dp\":16,\"tp\":1,\"pp\":2,"
           "\"zero1\":true,\"ep\":8},\"batch\":{\"micro\":2,\"global\":64,\"seq\":1024},\"schedule\":\"1f1b\","
           "\"codec\":{\"ep\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}},\"codec_min_bytes\":0}",
           cluster);
  ts_err e = {0};
  int rc = plan_from_json_text(text, strlen(text), "moe.json", NULL, NULL, p, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
}

/* Reduced mode (one rank per stage simulated) against every rank, with EP
 * groups that cross nodes (ep 8 over nodes of 4 GPUs) and TACO on them. */
static void test_reduced_matches_full(void) {
  char cluster[64];
  write_rail_cluster(cluster, sizeof cluster);
  plan p;
  rail_moe_plan(cluster, &p);
  schema_result r[2];
  reduced_and_full(&p, r);
  CU_ASSERT(r[0].breakdown.ep_exposed_s > 0);
  NEAR(r[0].iteration_time_s, r[1].iteration_time_s, 0.01);
  NEAR(r[0].breakdown.ep_exposed_s, r[1].breakdown.ep_exposed_s, 0.05);
  schema_result_free(&r[0]);
  schema_result_free(&r[1]);
  unlink(cluster);
}

/* Reduced mode with EP groups whose all-to-all has more edges than the scale cache once held: qwen3-30b-a3b (2
 * layers), tp 2, dp 32, ep 32 on 16 nodes of 4 GPUs, so two EP groups of 32 (the even and the odd ranks) share
 * every leaf's uplinks; a fat tree of 6 nodes per leaf (leaves of 6, 6 and 4 nodes) oversubscribed 3:1. Each
 * group has 32 x 31 = 992 edges; sim_scale.c's build() kept the first 8 x max(world, 64) = 512 of them, so the
 * edges of the group's last members took no scale factor and reduced mode ran them as if the other group were
 * not there. Measured 2026-12-05 here (roofline costs, sim/RESULTS.md for the default calibration): full
 * 0.0279518311 s, EP exposed 0.00653218872 s; reduced with the cut 0.0271260664 s (-3.0 %), EP exposed
 * 0.00583204011 s (-10.7 %); with every edge 0.0279098881 s (-0.15 %), EP exposed equal. */
static void test_reduced_matches_full_large_ep(void) {
  char cluster[64], text[1024];
  write_cluster(cluster, sizeof cluster, "ft64", 16,
                "{ \"kind\": \"fat_tree\", \"levels\": 2, \"oversubscription\": 3.0, \"nodes_per_leaf\": 6, "
                "\"latency_us\": 0.5 }");
  snprintf(text, sizeof text,
           "{\"schema\":1,\"model\":\"qwen3-30b-a3b\",\"cluster\":\"%s\",\"layout\":{\"dp\":32,\"tp\":2,\"pp\":1,"
           "\"zero1\":true,\"sequence_parallel\":true,\"ep\":32},\"batch\":{\"micro\":1,\"global\":32,\"seq\":1024},"
           "\"layers_override\":2,\"schedule\":\"1f1b\",\"codec\":{\"ep\":{\"kind\":\"none\"}}}",
           cluster);
  plan p;
  ts_err e = {0};
  int rc = plan_from_json_text(text, strlen(text), "moe64.json", NULL, NULL, &p, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(p.ep * (p.ep - 1), 992);
  CU_ASSERT(p.ep * (p.ep - 1) > 8 * 64); /* more edges than the old cut kept */
  schema_result r[2];
  reduced_and_full(&p, r);
  CU_ASSERT(r[1].breakdown.ep_exposed_s > 0);
  NEAR(r[0].iteration_time_s, r[1].iteration_time_s, 0.01);
  NEAR(r[0].breakdown.ep_exposed_s, r[1].breakdown.ep_exposed_s, 0.01);
  schema_result_free(&r[0]);
  schema_result_free(&r[1]);
  unlink(cluster);
}

/* --alltoall analytic on the rail cluster. An all-to-all alone (EP 8 = two nodes, each GPU 4 flows out of its
 * NIC and 4 in, the NVLink part far faster): the analytic time is the busiest link's bytes over its bandwidth
 * plus the largest route latency, the flows' end lies between that less the routes' latency spread and it. Then
 * the whole MoE plan: the approximation moves the iteration by little (the all-to-alls no longer share the
 * rails with the pipeline's sends and the DP reductions), in reduced and in full mode. */
static void one_ep_alltoall(const plan *p, plan_program *g) {
  (void)p;
  plan_op *op = add_op(g, PLAN_OP_COLLECTIVE, PLAN_STREAM_EP);
  op->coll = PLAN_COLL_ALLTOALL;
  op->group = PLAN_GROUP_EP;
  op->traffic = PLAN_TRAFFIC_EP;
  op->model_op = PLAN_MOP_MOE_TOKENS;
  op->bytes = op->wire_bytes = a2a_bytes;
  plan_op *c = add_op(g, PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
  c->model_op = -100;
  c->dep[0] = 0;
}

static void test_alltoall_analytic_on_rails(void) {
  char cluster[64];
  write_rail_cluster(cluster, sizeof cluster);
  plan p;
  rail_moe_plan(cluster, &p);
  p.pp = 1, p.dp = 32; /* one stage: every rank runs the all-to-all (the ops carry no codec) */
  schema_result flows, analytic;
  CU_ASSERT_EQUAL_FATAL(run_with(&p, one_ep_alltoall, NULL, false, &flows), 0);
  CU_ASSERT_EQUAL_FATAL(run_with(&p, one_ep_alltoall, NULL, true, &analytic), 0);
  /* NIC 50 GB/s, 4 of the 7 peers on the other node; routes: 2 x 2 us + ... inside a node, 2.5 + 0.5 us links
   * across (at most 4 links of 2.5 us and 2 of 0.5 us through the spine) */
  double bw = 50e9, b = a2a_bytes / 8;
  double lat_hi = 4 * 2.5e-6 + 2 * 0.5e-6 + 1e-6, lat_lo = 2 * 2.5e-6;
  double t = analytic.iteration_time_s;
  CU_ASSERT(t >= 4 * b / bw + lat_lo - 1e-12 && t <= 4 * b / bw + lat_hi + 1e-12);
  CU_ASSERT(flows.iteration_time_s <= t + 1e-12 && flows.iteration_time_s >= t - (lat_hi - lat_lo));
  NEAR(flows.iteration_time_s, t, 1e-6); /* measured: equal to 9 digits (0.0040055 s) */
  schema_result_free(&flows);
  schema_result_free(&analytic);

  rail_moe_plan(cluster, &p);
  for (int full = 0; full < 2; full++) {
    schema_result r[2];
    for (int k = 0; k < 2; k++) {
      sim_options o = {.mode = full ? SIM_MODE_FULL : SIM_MODE_REDUCED, .cal = &cal, .clock_off = true,
                       .alltoall_analytic = k == 1};
      ts_err e = {0};
      int rc = sim_run_isolated(&p, &o, &r[k], &e);
      if (rc) fprintf(stderr, "\n  %s\n", e.msg);
      CU_ASSERT_EQUAL_FATAL(rc, 0);
    }
    CU_ASSERT(r[1].breakdown.ep_exposed_s > 0);
    NEAR(r[1].iteration_time_s, r[0].iteration_time_s, 0.02);
    NEAR(r[1].breakdown.ep_exposed_s, r[0].breakdown.ep_exposed_s, 0.05);
    schema_result_free(&r[0]);
    schema_result_free(&r[1]);
  }
  unlink(cluster);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("moe.sim", NULL, NULL);
  CU_add_test(s, "EP all-to-all on a switch, by hand", test_alltoall_on_a_switch);
  CU_add_test(s, "--alltoall analytic on a switch: the flows' time, by hand", test_alltoall_analytic_on_a_switch);
  CU_add_test(s, "imbalance wait: (f - 1) x the expert ops, its own line", test_imbalance_wait);
  CU_add_test(s, "reduced mode matches full with EP across nodes", test_reduced_matches_full);
  CU_add_test(s, "reduced mode matches full with EP 32 all-to-alls of 992 edges on 64 GPUs",
              test_reduced_matches_full_large_ep);
  CU_add_test(s, "--alltoall analytic on rails: alone, and the whole plan", test_alltoall_analytic_on_rails);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  unlink(platform_path);
  return failures ? 1 : 0;
}

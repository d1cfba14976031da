/* test_sim_engine.c — simulations whose answers can be worked by hand.
 *
 * Every simulation runs in a forked child (sim_run_isolated): SimGrid
 * initialises once per process. The hand cases use a platform written here:
 * one GPU per node, each with a private full-duplex link of bandwidth B and
 * latency L to a switch, so a flow between two GPUs crosses two links (route
 * latency 2L) and each ring edge has its links to itself. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sim.h"
#include "sim_costs.h"
#include "test_check.h"
#include "test_power_section.h"

#define BW 10e9   /* bytes/s per link direction */
#define LAT 5e-6  /* s per link */
#define PEAK 1e15 /* FLOP/s of the hand cluster */

static char platform_path[64];
static schema_calibration cal; /* tiny codec kernels, nothing else */

static double platform_bw = BW;
static int platform_backbone; /* 1: every route also crosses one shared backbone link of bandwidth BW */

static void write_platform(int hosts) {
  snprintf(platform_path, sizeof platform_path, "/tmp/test-sim-platform-%d.xml", (int)getpid());
  FILE *f = fopen(platform_path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
          "<platform version=\"4.1\">\n"
          "<cluster id=\"c\" prefix=\"gpu\" suffix=\"\" radical=\"0-%d\" speed=\"1Pf\" bw=\"%.0fBps\" lat=\"%gs\" "
          "sharing_policy=\"SPLITDUPLEX\"%s/>\n</platform>\n",
          hosts - 1, platform_bw, LAT, platform_backbone ? " bb_bw=\"10GBps\" bb_lat=\"0s\"" : "");
  fclose(f);
}

/* A plan by hand: gpt-tiny on `nodes` nodes of `gpn` GPUs. */
static void make_plan(plan *p, int dp, int tp, int pp, int nodes, int gpn) {
  memset(p, 0, sizeof *p);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(model_load("gpt-tiny", NULL, &p->model, &e), 0);
  snprintf(p->path, sizeof p->path, "hand-plan");
  snprintf(p->name, sizeof p->name, "hand-plan");
  topo_cluster *c = &p->cluster;
  snprintf(c->name, sizeof c->name, "hand");
  snprintf(c->gpu.name, sizeof c->gpu.name, "X");
  c->gpu.bf16_tflops = PEAK / 1e12;
  c->gpu.hbm_gib = 80;
  c->gpu.hbm_gbps = 4000;
  c->nodes = nodes;
  c->gpus_per_node = gpn;
  c->intra.kind = TOPO_INTRA_NVSWITCH;
  c->intra.gbps_per_gpu = BW / 1e9;
  c->intra.latency_us = 1;
  c->nic.per_node = 1;
  c->nic.gbps = BW / 1e9;
  c->fabric.kind = TOPO_FABRIC_SINGLE_SWITCH;
  p->dp = dp, p->tp = tp, p->pp = pp, p->vpp = 1;
  p->order = PLAN_ORDER_TP_DP_PP;
  p->micro_batch = 1;
  p->seq = 128;
  p->global_batch = dp;
  p->layers = p->model.layers;
  p->schedule = PLAN_SCHED_GPIPE;
  write_platform(nodes * gpn);
}

static plan_program *new_programs(int world, int cap) {
  plan_program *pr = calloc((size_t)world, sizeof *pr);
  for (int r = 0; r < world; r++) {
    pr[r].rank = r;
    pr[r].cap = cap;
    pr[r].ops = calloc((size_t)cap, sizeof(plan_op));
  }
  return pr;
}

static void free_programs(plan_program *pr, int world) {
  for (int r = 0; r < world; r++) free(pr[r].ops);
  free(pr);
}

static plan_op *add_op(plan_program *pr, plan_op_kind kind, plan_stream stream) {
  CU_ASSERT_FATAL(pr->n < pr->cap);
  plan_op *op = &pr->ops[pr->n++];
  memset(op, 0, sizeof *op);
  op->kind = (uint8_t)kind;
  op->stream = (uint8_t)stream;
  op->model_op = -100; /* not a model op: the roofline of its FLOPs */
  op->layer = op->micro = op->peer = op->tag = -1;
  for (int k = 0; k < PLAN_MAX_DEPS; k++) op->dep[k] = -1;
  return op;
}

static bool run_ideal_overlap; /* sim_options.ideal_overlap of run() */
static bool run_clock_off;     /* sim_options.clock_off of run() */
static sim_clock_model run_clock_model; /* sim_options.clock_model of run() */
static bool run_local_off;     /* sim_options.local_off of run() */
static bool run_record;        /* sim_options.record_ops of run() */

static int run(const plan *p, plan_program *progs, sim_mode mode, schema_result *r) {
  sim_options o = {.mode = mode, .cal = &cal, .platform_path = platform_path, .programs = progs,
                   .ideal_overlap = run_ideal_overlap, .clock_off = run_clock_off, .clock_model = run_clock_model, .local_off = run_local_off,
                   .record_ops = run_record};
  ts_err e = {0};
  int rc = sim_run_isolated(p, &o, r, &e);
  if (rc) fprintf(stderr, "\n  simulation failed: %s\n", e.msg);
  return rc;
}

/* The iteration time of `world` hand-written programs (full mode), -1 if the
 * simulation failed; frees the programs. */
static double iteration_of(const plan *p, plan_program *progs, int world) {
  schema_result r;
  double t = run(p, progs, SIM_MODE_FULL, &r) == 0 ? r.iteration_time_s : -1;
  schema_result_free(&r);
  free_programs(progs, world);
  return t;
}

/* One all-reduce of S bytes over n GPUs on the DP stream. */
static double ring_allreduce_time(int n, double bytes, double wire) {
  plan p;
  make_plan(&p, n, 1, 1, n, 1);
  plan_program *pr = new_programs(n, 4);
  for (int r = 0; r < n; r++) {
    plan_op *op = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_DP);
    op->coll = PLAN_COLL_ALLREDUCE;
    op->group = PLAN_GROUP_DP;
    op->traffic = PLAN_TRAFFIC_DP;
    op->bytes = bytes;
    op->wire_bytes = wire;
  }
  return iteration_of(&p, pr, n);
}

static void test_ring_allreduce(void) {
  double S = 1e9;
  for (int n = 4; n <= 8; n += 4) {
    double expect = 2.0 * (n - 1) / n * S / BW + 2.0 * (n - 1) * (2 * LAT);
    NEAR(ring_allreduce_time(n, S, S), expect, 0.005);
  }
}

/* A small all-reduce over 8 nodes runs as a tree (NCCL's alpha-beta choice):
 * 2 x depth route latencies + 2 S / B, depth 3 for a binary tree of 8 nodes. */
static void test_tree_allreduce(void) {
  double S = 1e5;
  double ring = 2.0 * 7 * (2 * LAT) + 2.0 * 7 / 8 * S / BW, tree = 2.0 * 3 * (2 * LAT) + 2.0 * S / BW;
  CU_ASSERT_TRUE(tree < ring);
  NEAR(ring_allreduce_time(8, S, S), tree, 0.005);
}

/* CAAT-Net p = 0.5: the plan sends half the channels; the bandwidth term halves. */
static void test_caat_halves_allreduce(void) {
  double S = 1e9, lat = 2.0 * 3 * (2 * LAT);
  double full = ring_allreduce_time(4, S, S), half = ring_allreduce_time(4, S, 0.5 * S);
  NEAR(half - lat, 0.5 * (full - lat), 0.005);
  /* and the plan does send half: forward TP all-reduces of the shipped CAAT plan */
  plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt-h4096-tp2-caat.json", NULL, NULL, &p, &e), 0);
  plan_program prog = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int checked = 0;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind == PLAN_OP_COLLECTIVE && op->traffic == PLAN_TRAFFIC_TP_FWD && op->coll == PLAN_COLL_ALLREDUCE &&
        op->codec.kind == PLAN_CODEC_CAAT) {
      NEAR(op->wire_bytes, 0.5 * op->bytes, 1e-9);
      checked++;
    }
  }
  CU_ASSERT_TRUE(checked > 0);
  plan_program_free(&prog);
}

/* One send of S bytes (TACO-compressed or not) from GPU 0 to GPU 1. */
static double send_time(double bytes, int taco) {
  plan p;
  make_plan(&p, 1, 1, 2, 2, 1);
  plan_program *pr = new_programs(2, 4);
  plan_codec codec = {taco ? PLAN_CODEC_TACO : PLAN_CODEC_NONE, 128, PLAN_FP8_E4M3, 1.0};
  double wire = taco ? plan_codec_wire_bytes(&codec, bytes, 2) : bytes;
  for (int r = 0; r < 2; r++) {
    plan_op *op = add_op(&pr[r], r == 0 ? PLAN_OP_SEND : PLAN_OP_RECV, PLAN_STREAM_PP);
    op->peer = 1 - r;
    op->tag = 7;
    op->traffic = PLAN_TRAFFIC_PP;
    op->bytes = bytes;
    op->wire_bytes = wire;
    op->codec = codec;
  }
  return iteration_of(&p, pr, 2);
}

static void test_send_and_taco_wire_bytes(void) {
  double S = 2e9;
  double plain = send_time(S, 0), taco = send_time(S, 1);
  NEAR(plain, S / BW + 2 * LAT, 0.005);
  /* TACO, G = 128: N + 8N/G bytes for N bf16 elements = (1 + 8/G)/2 of the bf16 bytes */
  double ratio = (1.0 + 8.0 / 128) / 2.0;
  NEAR(taco - 2 * LAT, ratio * (plain - 2 * LAT), 0.005);
  plan_codec c = {PLAN_CODEC_TACO, 256, PLAN_FP8_E4M3, 1.0};
  NEAR(plan_codec_wire_bytes(&c, 1048576, 2), 1048576 * (1.0 + 8.0 / 256) / 2.0, 1e-12);
}

/* Reduced mode simulates rank 0 for both DP groups (tp 0 and tp 1); their four
 * flows share one backbone link, so each gets B/4. Full and reduced must both
 * see it: ring of 2 -> each edge carries S, at B/4: 4 S / B + 2 route latencies. */
static void test_reduced_keeps_cross_traffic(void) {
  double S = 1e9;
  platform_backbone = 1;
  plan p;
  make_plan(&p, 2, 2, 1, 4, 1);
  plan_program *pr = new_programs(4, 4);
  for (int r = 0; r < 4; r++) {
    plan_op *op = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_DP);
    op->coll = PLAN_COLL_ALLREDUCE;
    op->group = PLAN_GROUP_DP;
    op->traffic = PLAN_TRAFFIC_DP;
    op->bytes = op->wire_bytes = S;
  }
  schema_result full, red;
  CU_ASSERT_EQUAL_FATAL(run(&p, pr, SIM_MODE_FULL, &full), 0);
  CU_ASSERT_EQUAL_FATAL(run(&p, pr, SIM_MODE_REDUCED, &red), 0);
  platform_backbone = 0;
  double expect = 4 * S / BW + 2 * (2 * LAT);
  NEAR(full.iteration_time_s, expect, 0.005);
  NEAR(red.iteration_time_s, expect, 0.005);
  CU_ASSERT_EQUAL(red.n_ranks, 1);
  schema_result_free(&full);
  schema_result_free(&red);
  free_programs(pr, 4);
}

/* Programs that can never finish (a receive nobody sends) end in an error, not a hang. */
static void test_deadlock_reported(void) {
  plan p;
  make_plan(&p, 1, 1, 2, 2, 1);
  plan_program *pr = new_programs(2, 4);
  plan_op *op = add_op(&pr[0], PLAN_OP_RECV, PLAN_STREAM_PP);
  op->peer = 1, op->tag = 3, op->bytes = op->wire_bytes = 1e6;
  add_op(&pr[1], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = 1e9;
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .platform_path = platform_path, .programs = pr};
  schema_result r;
  ts_err e = {0};
  CU_ASSERT_EQUAL(sim_run_isolated(&p, &o, &r, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "deadlock"));
  free_programs(pr, 2);
}

/* A 1 TB/s link is not capped by a TCP window (gamma / 2 latency would be ~100 GB/s). */
static void test_fast_link_uncapped(void) {
  platform_bw = 1e12;
  double t = send_time(1e9, 0);
  platform_bw = BW;
  NEAR(t, 1e9 / 1e12 + 2 * LAT, 0.005);
}

/* GPipe on p stages, m micro-batches, free communication: the iteration is
 * (m + p - 1)(tf + tb) and each stage idles (p - 1)/(m + p - 1) of it. */
/* GPipe's programs on P stages of one node: M micro-batches, forward tf, backward tb, sends and receives
 * between neighbour stages. */
static plan_program *bubble_programs(int P, int M, double tf, double tb) {
  plan_program *pr = new_programs(P, 8 * M + 8);
  for (int s = 0; s < P; s++) {
    plan_program *g = &pr[s];
    for (int dir = 0; dir < 2; dir++)
      for (int mb = 0; mb < M; mb++) {
        int from = dir == 0 ? s - 1 : s + 1, to = dir == 0 ? s + 1 : s - 1;
        int dep = -1;
        if (from >= 0 && from < P) {
          plan_op *rv = add_op(g, PLAN_OP_RECV, PLAN_STREAM_PP);
          rv->peer = from, rv->tag = dir * 1000 + mb, rv->traffic = PLAN_TRAFFIC_PP;
          dep = g->n - 1;
        }
        plan_op *c = add_op(g, PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
        c->phase = dir ? PLAN_PHASE_BWD : PLAN_PHASE_FWD;
        c->flops = (dir ? tb : tf) * PEAK;
        c->micro = mb;
        c->dep[0] = dep;
        int cidx = g->n - 1;
        if (to >= 0 && to < P) {
          plan_op *sd = add_op(g, PLAN_OP_SEND, PLAN_STREAM_PP);
          sd->peer = to, sd->tag = dir * 1000 + mb, sd->traffic = PLAN_TRAFFIC_PP;
          sd->dep[0] = cidx;
        }
      }
  }
  return pr;
}

static void test_pipeline_bubble(void) {
  const int P = 4, M = 8;
  const double tf = 0.010, tb = 0.020;
  plan p;
  make_plan(&p, 1, 1, P, 1, P);
  plan_program *pr = bubble_programs(P, M, tf, tb);
  schema_result r;
  CU_ASSERT_EQUAL_FATAL(run(&p, pr, SIM_MODE_FULL, &r), 0);
  /* each compute op also pays the roofline's 3 us launch: well under 0.5% */
  NEAR(r.iteration_time_s, (M + P - 1) * (tf + tb), 0.005);
  NEAR(r.breakdown.bubble_s / r.iteration_time_s, (double)(P - 1) / (M + P - 1), 0.005);
  NEAR(r.breakdown.compute_s, M * (tf + tb), 0.005);
  CU_ASSERT_EQUAL(r.n_ranks, P);
  schema_result_free(&r);
  free_programs(pr, P);
}

/* Uneven pipeline stages (layout.decoder_first/last_pipeline_num_layers) through the simulator: the plan's own
 * programs (gpt-tiny on 8 x H200, PP messages as the plan sends them) with every compute op free except the first
 * of each (micro-batch, layer) forward, which costs U, and backward, 2 U: a step costs its stage's layers. The
 * makespans are the ones worked by hand in tests/test_plan_program.c ("uneven stages"), there with a list-
 * scheduling evaluator and free messages, here with SimGrid and the messages priced (a few us each); each rank
 * computes 3 m L_s U, and the bubble (with the tied embedding's all-reduce wait) is what the mean stage does not
 * compute. */
static void uneven_case(const char *schedule, int pp, int layers, int first, int last, int m, double units) {
  const double U = 0.01;
  char json[1024], extra[160] = "";
  if (first) snprintf(extra, sizeof extra, ", \"decoder_first_pipeline_num_layers\": %d", first);
  if (last)
    snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", \"decoder_last_pipeline_num_layers\": %d", last);
  snprintf(json, sizeof json,
           "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\",\n"
           "  \"layout\": { \"dp\": 1, \"tp\": 1, \"pp\": %d, \"vpp\": 1%s },\n"
           "  \"batch\": { \"micro\": 1, \"global\": %d, \"seq\": 256 }, \"schedule\": \"%s\", \"layers_override\": %d }\n",
           pp, extra, m, schedule, layers);
  static plan p;
  ts_err e = {0};
  int rc = plan_from_json_text(json, strlen(json), "uneven.json", NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL_FATAL(plan_micro_batches(&p), m);
  const int world = plan_world_size(&p);
  plan_program *g = calloc((size_t)world, sizeof *g);
  const double peak = p.cluster.gpu.bf16_tflops * 1e12;
  double mean_busy = 0;
  for (int r = 0; r < world; r++) {
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, r, &g[r], &e), 0);
    char *seen = calloc((size_t)m * layers * 2, 1);
    for (int i = 0; i < g[r].n; i++) {
      plan_op *op = &g[r].ops[i];
      if (op->kind != PLAN_OP_COMPUTE) continue;
      double cost = 0;
      if (op->micro >= 0 && op->layer >= 0 && (op->phase == PLAN_PHASE_FWD || op->phase == PLAN_PHASE_BWD)) {
        size_t c = ((size_t)op->micro * layers + op->layer) * 2 + (op->phase == PLAN_PHASE_BWD);
        if (!seen[c]) cost = op->phase == PLAN_PHASE_BWD ? 2 * U : U;
        seen[c] = 1;
      }
      op->model_op = -100; /* the roofline of its FLOPs: cost (plus the 3 us launch) or nothing */
      op->flops = cost * peak;
      op->bytes = 0;
    }
    free(seen);
    mean_busy += 3.0 * m * plan_stage_layers(&p, plan_coord_of(&p, r).pp) * U / world;
  }
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .programs = g, .clock_off = true};
  schema_result r;
  rc = sim_run_isolated(&p, &o, &r, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  printf("\n  %s pp %d, stages", schedule, pp);
  for (int s = 0; s < pp; s++) printf(" %d", plan_stage_layers(&p, s));
  printf(", m %d: %.6f s, worked out %.0f U = %.6f s; bubble %.6f s", m, r.iteration_time_s, units, units * U,
         r.breakdown.bubble_s);
  NEAR(r.iteration_time_s, units * U, 0.002);
  CU_ASSERT_EQUAL(r.n_ranks, world);
  for (int k = 0; k < r.n_ranks; k++) {
    int st = plan_coord_of(&p, r.ranks[k].rank).pp;
    NEAR(r.ranks[k].compute_s, 3.0 * m * plan_stage_layers(&p, st) * U, 0.001);
  }
  /* the last stage's wait for the first one's last backward is the tied embedding's gradient all-reduce (gpt-tiny
   * ties them), on the DP stream: DP exposed, not bubble; what neither computes nor sends is idle */
  CU_ASSERT_DOUBLE_EQUAL(r.breakdown.bubble_s + r.breakdown.dp_exposed_s + r.breakdown.pp_exposed_s,
                         r.iteration_time_s - mean_busy, 0.002 * r.iteration_time_s);
  CU_ASSERT(r.breakdown.bubble_s > 0.5 * (r.iteration_time_s - mean_busy));
  schema_result_free(&r);
  for (int k = 0; k < world; k++) plan_program_free(&g[k]);
  free(g);
}

static void test_uneven_stages_bubble(void) {
  uneven_case("1f1b", 2, 4, 1, 0, 5, 48);      /* L = 1, 3: 9 m + 3 */
  uneven_case("1f1b", 2, 4, 3, 0, 5, 45);      /* L = 3, 1: 9 m */
  uneven_case("gpipe", 2, 4, 1, 0, 5, 48);     /* sum L + (m - 1) max L, forward and backward */
  uneven_case("1f1b", 4, 10, 1, 1, 6, 87);     /* L = 1, 4, 4, 1 */
  uneven_case("1f1b", 4, 10, 4, 0, 6, 78);     /* L = 4, 2, 2, 2 */
  uneven_case("1f1b", 4, 10, 0, 1, 6, 72);     /* L = 3, 3, 3, 1 */
  uneven_case("1f1b", 4, 8, 0, 0, 6, 54);      /* even: (m + pp - 1) 3 L */
}

static int load_real(const char *name, plan *p, schema_calibration *c) {
  ts_err e = {0};
  char path[512];
  snprintf(path, sizeof path, "%s/%s", PLANS_DIR, name);
  if (plan_load(path, NULL, NULL, p, &e) || schema_calibration_load(CALIBRATION_FILE, c, &e)) {
    fprintf(stderr, "\n  %s\n", e.msg);
    return -1;
  }
  return 0;
}

/* Two ranks, each: a 1 ms then a 10 ms compute kernel, and an all-reduce of
 * `bytes` on the DP stream that depends on compute op `dep` (0: it arrives
 * while the 10 ms kernel runs; 1: after it). Returns the iteration time. */
static topo_intra_kind run_intra = TOPO_INTRA_NVSWITCH; /* the node's transport in kernel_then_allreduce */
static double kernel_then_allreduce(int nodes, int gpus_per_node, int dep, double bytes) {
  plan p;
  make_plan(&p, 2, 1, 1, nodes, gpus_per_node);
  p.cluster.intra.kind = run_intra;
  plan_program *pr = new_programs(2, 4);
  for (int r = 0; r < 2; r++) {
    plan_op *a = add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
    a->flops = 1e-3 * PEAK;
    plan_op *b = add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
    b->flops = 10e-3 * PEAK;
    plan_op *c = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_DP);
    c->coll = PLAN_COLL_ALLREDUCE, c->group = PLAN_GROUP_DP, c->traffic = PLAN_TRAFFIC_DP;
    c->bytes = c->wire_bytes = bytes;
    c->dep[0] = dep;
  }
  return iteration_of(&p, pr, 2);
}

/* A collective that reaches a GPU while a compute kernel runs there starts
 * when the kernel ends (its kernel needs the SMs); with ideal overlap it runs
 * beside it. Compute: 1 ms, then 10 ms with no dependency; the all-reduce
 * (about 5 ms alone) depends on the first. */
static void test_collective_waits_for_sms(void) {
  const double S = 5e7;
  double alone = ring_allreduce_time(2, S, S);
  double t[2];
  for (int ideal = 0; ideal < 2; ideal++) {
    run_ideal_overlap = ideal;
    t[ideal] = kernel_then_allreduce(2, 1, 0, S); /* two nodes of one GPU */
  }
  run_ideal_overlap = false;
  const double launch = 3e-6; /* the cluster roofline's fixed cost per compute op */
  CU_ASSERT_TRUE(alone > 4e-3 && alone < 6e-3);
  NEAR(t[0], 11e-3 + 2 * launch + alone, 0.005);  /* after the 10 ms kernel */
  /* across nodes no head start: it starts when the kernel ends */
  CU_ASSERT_DOUBLE_EQUAL(t[0], 11e-3 + 2 * launch + alone, 2e-6);
  NEAR(t[1], 11e-3 + 2 * launch, 0.005);          /* hidden behind it */
}

/* Inside an NVLink/NVSwitch node the collective gets 25 us of the running
 * kernel's last waves (sim_comm.c, head_start_s): against the same collective
 * issued after the kernel, it ends 25 us sooner. */
static void test_collective_head_start(void) {
  double t[2];
  for (int after = 0; after < 2; after++) t[after] = kernel_then_allreduce(1, 2, after, 5e7); /* one node of two GPUs */
  CU_ASSERT_TRUE(t[0] > 11e-3);
  CU_ASSERT_DOUBLE_EQUAL(t[1] - t[0], 25e-6, 1e-6);
}

/* Two GPUs of one NVSwitch node, each: a `first_s` kernel, then a kernel of b[r] seconds, and a DP all-reduce
 * of 1 MB that depends on the first kernel (dep 0: it reaches the GPU while the second runs and waits for its
 * SMs, less the 25 us head start) or on the second (dep 1: it starts after it). Returns the iteration time. */
static double two_kernels_then_allreduce(double first_s, const double b[2], int dep) {
  plan p;
  make_plan(&p, 2, 1, 1, 1, 2);
  plan_program *pr = new_programs(2, 4);
  for (int r = 0; r < 2; r++) {
    add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = first_s * PEAK;
    add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = b[r] * PEAK;
    plan_op *c = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_DP);
    c->coll = PLAN_COLL_ALLREDUCE, c->group = PLAN_GROUP_DP, c->traffic = PLAN_TRAFFIC_DP;
    c->bytes = c->wire_bytes = 1e6;
    c->dep[0] = dep;
  }
  return iteration_of(&p, pr, 2);
}

/* The members of an in-node collective that wait for different kernels' SMs meet at the later arrival. Rank 0
 * waits for a 10 ms kernel, rank 1 for a 20 ms one, from 100 ms on: each joins the meeting at once and the
 * meeting sleeps the waits (sim_comm.c, joins_early: 100 ms >= 2 (20 ms + the collective)), which must give
 * the instants of each member sleeping its own wait. With L the 3 us launch cost of each op and T the
 * collective alone: issued after the kernels (dep 1) it starts at 120 ms + 2L (rank 1's second kernel ends),
 * ends at 120 ms + 2L + T; issued beside them (dep 0) rank 1 arrives 25 us earlier (the head start), rank 0
 * at 110 ms + 2L - 25 us, so it ends 25 us sooner, whichever member joins last (b swapped). */
static void test_meeting_absorbs_sm_waits(void) {
  const double launch = 3e-6, b[2] = {10e-3, 20e-3}, swapped[2] = {20e-3, 10e-3};
  double after = two_kernels_then_allreduce(100e-3, b, 1);
  double beside = two_kernels_then_allreduce(100e-3, b, 0);
  double beside_swapped = two_kernels_then_allreduce(100e-3, swapped, 0);
  double T = after - (120e-3 + 2 * launch);
  CU_ASSERT_TRUE(T > 25e-6 && T < 10e-3); /* it outlasts the head start (else the kernel's end would count) */
  CU_ASSERT_DOUBLE_EQUAL(after - beside, 25e-6, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(beside_swapped, beside, 1e-12);
  /* the same instants when nobody joins early (1 ms in: the wait is slept by the member itself) */
  double early_after = two_kernels_then_allreduce(1e-3, b, 1), early_beside = two_kernels_then_allreduce(1e-3, b, 0);
  CU_ASSERT_DOUBLE_EQUAL(early_after - (21e-3 + 2 * launch), T, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(early_after - early_beside, 25e-6, 1e-9);
}

/* Two GPUs of one NVSwitch node (tp 2), each: a compute op P of `first_s` (a small DP all-reduce depends on it,
 * so the next op starts a block of its own), an op A of b[r] seconds, a TP all-reduce of 1 MB that depends on
 * A, and a 10 ms op Z that depends on the all-reduce. The compute stream runs the all-reduce for the TP stream
 * (sim_engine.c, run_for_idle_stream). Returns the iteration time. */
static double block_then_allreduce(double first_s, const double b[2]) {
  plan p;
  make_plan(&p, 1, 2, 1, 1, 2);
  plan_program *pr = new_programs(2, 8);
  for (int r = 0; r < 2; r++) {
    add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = first_s * PEAK; /* 0: P */
    plan_op *g = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_DP);               /* 1: after P */
    g->coll = PLAN_COLL_ALLREDUCE, g->group = PLAN_GROUP_TP, g->traffic = PLAN_TRAFFIC_DP;
    g->bytes = g->wire_bytes = 1e3;
    g->dep[0] = 0;
    add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = b[r] * PEAK; /* 2: A */
    plan_op *c = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_TP);           /* 3: after A */
    c->coll = PLAN_COLL_ALLREDUCE, c->group = PLAN_GROUP_TP, c->traffic = PLAN_TRAFFIC_TP_FWD;
    c->bytes = c->wire_bytes = 1e6;
    c->dep[0] = 2;
    plan_op *z = add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE); /* 4: Z, after the all-reduce */
    z->flops = 10e-3 * PEAK;
    z->dep[0] = 3;
  }
  return iteration_of(&p, pr, 2);
}

/* The compute stream's block before an in-node collective it runs itself is slept by the collective's meeting
 * (sim_engine.c, block_into_meeting) 100 ms in, and by the compute stream itself 1 ms in (joins_early's bound);
 * both must give the same instants: with L the 3 us launch cost of each op and T the all-reduce, Z ends at
 * first + 20 ms (the later A, rank 1's) + 2L + T + 10 ms + L, so the two differ by 99 ms; swapping the ranks'
 * A changes nothing. */
static void test_meeting_absorbs_compute_block(void) {
  const double b[2] = {10e-3, 20e-3}, swapped[2] = {20e-3, 10e-3};
  double late = block_then_allreduce(100e-3, b), early = block_then_allreduce(1e-3, b);
  double T = early - (1e-3 + 20e-3 + 3 * 3e-6 + 10e-3);
  CU_ASSERT_TRUE(T > 0 && T < 5e-3);
  CU_ASSERT_DOUBLE_EQUAL(late - early, 99e-3, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(block_then_allreduce(100e-3, swapped), late, 1e-12);
}

/* Through host memory (NCCL's shm and socket transports) a plain collective's
 * kernel copies at host-memory speed with a few blocks: it does not wait for
 * the GEMM's SMs (sim_comm.c, runs_beside_compute). Over sockets it hides
 * behind the 10 ms kernel; through shm one that meets an already running
 * kernel (here the 10 ms one, made ready by the same kernel end, starts
 * first) is delayed by max(k - 125 us, k / 3) of what that kernel has left
 * (delay_beside_running_kernel): against the same collective issued after
 * the kernel, it ends 125 us sooner. */
static void test_host_memory_collective_beside_kernel(void) {
  const double launch = 3e-6;
  run_intra = TOPO_INTRA_SOCKET;
  double beside = kernel_then_allreduce(1, 2, 0, 5e7), after = kernel_then_allreduce(1, 2, 1, 5e7);
  NEAR(beside, 11e-3 + 2 * launch, 0.005); /* hidden behind the 10 ms kernel */
  CU_ASSERT_TRUE(after > beside + 1e-3);    /* issued after it, nothing hides it */
  run_intra = TOPO_INTRA_SHM;
  beside = kernel_then_allreduce(1, 2, 0, 5e7), after = kernel_then_allreduce(1, 2, 1, 5e7);
  CU_ASSERT_TRUE(beside > 11e-3 + 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(after - beside, 125e-6, 1e-6);
  run_intra = TOPO_INTRA_NVSWITCH;
}

/* A TACO all-reduce of `bytes` on `stream` (DP group) that depends on
 * compute op `dep` of three back-to-back compute kernels (1, 10, 10 ms) on
 * two GPUs of one NVLink node. Returns the iteration time. */
static double kernels_then_compressed(plan_stream stream, int dep, double bytes) {
  plan p;
  make_plan(&p, 2, 1, 1, 1, 2);
  plan_program *pr = new_programs(2, 4);
  plan_codec codec = {PLAN_CODEC_TACO, 128, PLAN_FP8_E4M3, 1.0};
  for (int r = 0; r < 2; r++) {
    const double ms[3] = {1, 10, 10};
    for (int k = 0; k < 3; k++) add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = ms[k] * 1e-3 * PEAK;
    plan_op *c = add_op(&pr[r], PLAN_OP_COLLECTIVE, stream);
    c->coll = PLAN_COLL_ALLREDUCE, c->group = PLAN_GROUP_DP, c->traffic = PLAN_TRAFFIC_DP;
    c->bytes = bytes;
    c->wire_bytes = plan_codec_wire_bytes(&codec, bytes, 4);
    c->codec = codec;
    c->dep[0] = dep;
  }
  return iteration_of(&p, pr, 2);
}

/* Only the TP stream outranks compute in the executor: a compressed
 * collective on the DP (or PP) stream gets SMs when the compute stream runs
 * dry, after both 10 ms kernels, as if issued after them; on the TP stream
 * when the kernel it meets ends, hidden behind the second one
 * (sim_comm.c, waits_for_idle_compute). */
static void test_compressed_waits_for_idle_compute(void) {
  const double S = 1e8, compute = 21e-3 + 3 * 3e-6; /* three kernels and their launch costs */
  double after = kernels_then_compressed(PLAN_STREAM_DP, 2, S);
  double alone = after - compute;
  CU_ASSERT_TRUE(alone > 1e-3 && alone < 9e-3);
  NEAR(kernels_then_compressed(PLAN_STREAM_DP, 0, S), after, 1e-9);
  NEAR(kernels_then_compressed(PLAN_STREAM_TP, 0, S), compute, 1e-6);
}

/* The cross-entropy kernel writes the loss and the logits' gradient in one
 * forward pass (as the executor runs it): the backward loss ops cost their
 * GEMM half only, the forward op the logits GEMM plus one "loss" kernel. */
static void test_loss_counted_once(void) {
  static plan p;
  static sim_costs costs;
  schema_calibration c;
  if (load_real("gpt-h4096-tp2-none.json", &p, &c)) {
    CU_FAIL("plan or calibration did not load");
    return;
  }
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, NULL, &e), 0);
  plan_program prog = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  long long T = (long long)p.micro_batch * p.seq, V = model_vocab_per_gpu(&p.model, p.tp), H = p.model.hidden;
  double fwd_gemm, dgrad, wgrad, kernel;
  CU_ASSERT_EQUAL(schema_lookup_gemm(&costs.lk, T, V, H, &fwd_gemm, &e), 0);
  CU_ASSERT_EQUAL(schema_lookup_gemm(&costs.lk, T, H, V, &dgrad, &e), 0);
  CU_ASSERT_EQUAL(schema_lookup_gemm(&costs.lk, H, V, T, &wgrad, &e), 0);
  CU_ASSERT_EQUAL(schema_lookup_kernel(&costs.lk, "loss", 2.0 * 2.0 * (double)T * (double)V, 0, &kernel, &e), 0);
  int seen[3] = {0, 0, 0};
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op != PLAN_MOP_LOSS) continue;
    double s;
    CU_ASSERT_EQUAL_FATAL(sim_compute_s(&costs, op, &s, &e), 0);
    int which = op->phase == PLAN_PHASE_FWD ? 0 : op->part == PLAN_PART_DGRAD ? 1 : 2;
    const double expected[3] = {fwd_gemm + kernel, dgrad, wgrad};
    NEAR(s * 1e6, expected[which], 1e-9);
    seen[which]++;
  }
  CU_ASSERT_EQUAL(seen[0], plan_micro_batches(&p));
  CU_ASSERT_EQUAL(seen[1], plan_micro_batches(&p));
  CU_ASSERT_EQUAL(seen[2], plan_micro_batches(&p));
  plan_program_free(&prog);
  schema_calibration_free(&c);
}

/* Norms, activations and residual adds use the table of the kernel the model
 * runs ("layernorm_fwd", "gelu_bwd", "add_fwd") when the calibration has one,
 * else the generic table that averages kernels of equal bytes; with
 * bias_fusion false the residual add also pays fc2's bias pass, with it true
 * (the default) nothing more. */
static void test_specific_kernel_tables(void) {
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt-h4096-tp2-none.json", NULL, NULL, &p, &e), 0);
  const char *files[2] = {PLANS_DIR "/../../calibration/h200-nvlink.json", CALIBRATION_FILE};
  for (int v = 0; v < 4; v++) { /* each calibration, with bias_fusion true (the default) and false */
    int f = v % 2;
    p.bias_unfused = v >= 2;
    schema_calibration c;
    CU_ASSERT_EQUAL_FATAL(schema_calibration_load(files[f], &c, &e), 0);
    CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, NULL, &e), 0);
    plan_program prog = {0};
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
    int checked = 0;
    for (int i = 0; i < prog.n && checked < 6; i++) {
      const plan_op *op = &prog.ops[i];
      if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->micro != 0 || op->layer != 0) continue;
      const model_op *mo = &costs.mops[op->model_op];
      const char *specific = NULL, *generic = NULL;
      int bwd = op->phase == PLAN_PHASE_BWD;
      if (mo->kind == MODEL_OP_NORM) specific = bwd ? "layernorm_bwd" : "layernorm_fwd", generic = bwd ? "norm_bwd" : "norm";
      if (strcmp(mo->name, "act") == 0) specific = bwd ? "gelu_bwd" : "gelu_fwd", generic = bwd ? "elementwise_bwd" : "elementwise";
      if (strcmp(mo->name, "mlp_residual") == 0 && !bwd) specific = "add_fwd", generic = "elementwise";
      if (!specific) continue;
      const char *table = schema_has_kernel(&c, specific) ? specific : generic;
      if (!schema_has_kernel(&c, table)) table = mo->kind == MODEL_OP_NORM ? "norm" : "elementwise"; /* no _bwd table */
      CU_ASSERT_EQUAL(f == 0, table == specific); /* the measured file has them, the derived one not */
      double s, us;
      CU_ASSERT_EQUAL_FATAL(sim_compute_s(&costs, op, &s, &e), 0);
      CU_ASSERT_EQUAL_FATAL(schema_lookup_kernel(&costs.lk, table, op->bytes, 0, &us, &e), 0);
      if (strcmp(mo->name, "mlp_residual") == 0 && p.model.linear_bias && p.bias_unfused) {
        /* + fc2's bias, added in the residual op (sim_costs.c bias_us): a BF16 read and write of its rows */
        double bias_us, elems = (double)p.micro_batch * p.seq * p.model.hidden;
        const char *bt = schema_has_kernel(&c, "bias_fwd") ? "bias_fwd" : "elementwise";
        CU_ASSERT_EQUAL_FATAL(schema_lookup_kernel(&costs.lk, bt, 4.0 * elems, 0, &bias_us, &e), 0);
        us += bias_us;
      }
      NEAR(s * 1e6, us, 1e-9);
      checked++;
    }
    CU_ASSERT_EQUAL(checked, 6); /* ln1, ln2, act, mlp_residual forward; ln1, ln2, act backward: six of seven */
    plan_program_free(&prog);
    schema_calibration_free(&c);
  }
}

/* TACO on FP32 DP gradients: a calibration that measured FP32 payloads
 * ("allreduce.taco128.fp32", keyed by FP32 bytes) prices the bucket from that
 * table; one that measured only bf16 payloads looks up the same element count
 * (half the bytes) and adds the codec kernels' extra 2 bytes per element, read
 * by the encode and written by the decode. */
static void test_taco_fp32_payloads(void) {
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(
      plan_load(PLANS_DIR "/../validation/plans/gpt-h4096-dp2-taco-shm.json", NULL, NULL, &p, &e), 0);
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(PLANS_DIR "/../../calibration/h200-shm.json", &c, &e), 0);
  /* first as a file measured before the FP32 tables: hide them under a name nothing looks up */
  for (int i = 0; i < c.n_colls; i++) {
    char *fp32 = strstr(c.colls[i].name, ".fp32");
    if (fp32) memcpy(fp32, ".none", 5);
  }
  CU_ASSERT_FALSE(schema_has_coll(&c, "allreduce.taco128.fp32"));
  plan_program prog = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  const plan_op *dp = NULL;
  for (int i = 0; i < prog.n && !dp; i++)
    if (prog.ops[i].kind == PLAN_OP_COLLECTIVE && prog.ops[i].traffic == PLAN_TRAFFIC_DP &&
        prog.ops[i].codec.kind == PLAN_CODEC_TACO)
      dp = &prog.ops[i];
  CU_ASSERT_PTR_NOT_NULL_FATAL(dp);
  double elems = dp->bytes / 4.0, w = 1.0 + 8.0 / dp->codec.group;
  NEAR(dp->wire_bytes, elems * w, 1e-9);

  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, NULL, &e), 0);
  double s, table, enc, dec;
  int included = 0;
  CU_ASSERT_EQUAL_FATAL(sim_coll_calibrated_s(&costs, dp, 2, &s, &included, &e), 0);
  CU_ASSERT_EQUAL(included, 1);
  CU_ASSERT_EQUAL(schema_lookup_coll(&costs.lk, "allreduce.taco128", 2, elems * 2.0, &table, &e), 0);
  CU_ASSERT_EQUAL(schema_lookup_kernel(&costs.lk, "taco_encode", elems * 2.0, 128, &enc, &e), 0);
  CU_ASSERT_EQUAL(schema_lookup_kernel(&costs.lk, "taco_decode", elems * 2.0, 128, &dec, &e), 0);
  NEAR(s * 1e6, table + (enc + dec) * 2.0 / (2.0 + w), 1e-9);
  CU_ASSERT(s * 1e6 < 1.2 * table); /* not the bf16 table at the FP32 bytes: twice the elements */

  /* with an FP32 table (made up: a straight line), that table at the FP32 bytes */
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_coll(&c, "allreduce.taco128.fp32", 2, 1024.0, 10.0), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_coll(&c, "allreduce.taco128.fp32", 2, 4.0 * 1073741824.0, 1e5), 0);
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, NULL, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_coll_calibrated_s(&costs, dp, 2, &s, &included, &e), 0);
  CU_ASSERT_EQUAL(included, 1);
  CU_ASSERT_EQUAL(schema_lookup_coll(&costs.lk, "allreduce.taco128.fp32", 2, dp->bytes, &table, &e), 0);
  NEAR(s * 1e6, table, 1e-12);
  plan_program_free(&prog);
  schema_calibration_free(&c);
}

/* layout.tp_overlap_chunks: each forward row-parallel GEMM (attn_out, fc2)
 * becomes k GEMMs over m/k token rows, priced at m/k (they were once priced
 * as k whole GEMMs: +9% compute here). With the measured tables the sum of
 * the chunks stays within a few percent of the whole (interpolation at m/2,
 * one launch per chunk); the model FLOPs do not move. */
static void test_row_chunks_priced_at_their_rows(void) {
  static plan p;
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(load_real("gpt-h4096-tp2-none.json", &p, &c), 0);
  sim_options o = {.mode = SIM_MODE_REDUCED, .cal = &c, .clock_off = true};
  schema_result whole, split;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &whole, &e), 0);
  p.tp_overlap_chunks = 2;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &split, &e), 0);
  double ratio = split.breakdown.compute_s / whole.breakdown.compute_s;
  printf("\n  row chunks k=2: compute %.4f s vs %.4f s whole (x%.4f), iteration %.4f vs %.4f s\n",
         split.breakdown.compute_s, whole.breakdown.compute_s, ratio, split.iteration_time_s, whole.iteration_time_s);
  CU_ASSERT_TRUE(ratio > 0.97 && ratio < 1.03);
  /* the same model FLOPs: throughput in proportion to the iteration time */
  NEAR(split.tflops_per_gpu * split.iteration_time_s, whole.tflops_per_gpu * whole.iteration_time_s, 1e-9);
  schema_result_free(&whole);
  schema_result_free(&split);
  schema_calibration_free(&c);
}

/* Same plan and calibration, same numbers (two separate processes). */
static void test_deterministic(void) {
  static plan p;
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(load_real("gpt-h4096-pp2.json", &p, &c), 0);
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &c};
  schema_result a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &b, &e), 0);
  CU_ASSERT_TRUE(a.iteration_time_s > 0);
  CU_ASSERT_DOUBLE_EQUAL(a.iteration_time_s, b.iteration_time_s, 0);
  CU_ASSERT_DOUBLE_EQUAL(a.breakdown.bubble_s, b.breakdown.bubble_s, 0);
  CU_ASSERT_DOUBLE_EQUAL(a.breakdown.tp_exposed_s, b.breakdown.tp_exposed_s, 0);
  CU_ASSERT_DOUBLE_EQUAL(a.tokens_per_s, b.tokens_per_s, 0);
  schema_result_free(&a);
  schema_result_free(&b);
  schema_calibration_free(&c);
}

/* Reduced mode (one rank per stage) agrees with simulating all 64 ranks. */
static void test_full_vs_reduced(void) {
  static plan p;
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(load_real("gpt3-13b-64.json", &p, &c), 0);
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &c};
  schema_result full, red;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &full, &e), 0);
  o.mode = SIM_MODE_REDUCED;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &red, &e), 0);
  NEAR(red.iteration_time_s, full.iteration_time_s, 0.01);
  CU_ASSERT_EQUAL(full.n_ranks, 64);
  CU_ASSERT_EQUAL(red.n_ranks, p.pp);
  printf("\n  64 GPUs: full %.6f s, reduced %.6f s (%+.3f%%)\n", full.iteration_time_s, red.iteration_time_s,
         100.0 * (red.iteration_time_s - full.iteration_time_s) / full.iteration_time_s);
  schema_result_free(&full);
  schema_result_free(&red);
  schema_calibration_free(&c);
}

/* Full mode keeps one program per stage, shared by its ranks with their peers shifted
 * (plan_program_same_shifted): the prediction and every rank's records (names, times,
 * flows: a send names its own peer) are those of each rank running its own program. */
static void test_full_shared_programs(void) {
  static plan p;
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(load_real("gpt3-13b-64.json", &p, &c), 0);
  int world = plan_world_size(&p);
  plan_program *own = calloc((size_t)world, sizeof *own);
  CU_ASSERT_PTR_NOT_NULL_FATAL(own);
  ts_err e = {0};
  for (int r = 0; r < world; r++) CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, r, &own[r], &e), 0);
  /* (the clock model's representatives differ with programs given: off here) */
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &c, .record_ops = true, .clock_off = true};
  schema_result shared, mine;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &shared, &e), 0);
  o.programs = own;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &mine, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(shared.iteration_time_s, mine.iteration_time_s, 0);
  CU_ASSERT_DOUBLE_EQUAL(shared.breakdown.bubble_s, mine.breakdown.bubble_s, 0);
  CU_ASSERT_EQUAL_FATAL(shared.n_ops, mine.n_ops);
  int sends = 0, differ = 0;
  for (int i = 0; i < shared.n_ops; i++) {
    const schema_op_record *a = &shared.ops[i], *b = &mine.ops[i];
    differ += strcmp(a->name, b->name) || a->rank != b->rank || a->start_s != b->start_s || a->dur_s != b->dur_s ||
              a->flow != b->flow || a->bytes != b->bytes || a->merged != b->merged;
    sends += strcmp(a->kind, "send") == 0;
  }
  CU_ASSERT_EQUAL(differ, 0);
  CU_ASSERT_TRUE(sends > 0);
  printf("\n  gpt3-13b-64 full mode: %d records, %d sends, %.9f s shared and own\n", shared.n_ops, sends,
         shared.iteration_time_s);
  schema_result_free(&shared);
  schema_result_free(&mine);
  for (int r = 0; r < world; r++) plan_program_free(&own[r]);
  free(own);
  schema_calibration_free(&c);
}

/* ---- the simulator's own event queue (sim_local.c) ---- */

/* Whether two results agree to the bit: iteration, breakdown, every rank's figures, every record in order. */
static int results_differ(const schema_result *a, const schema_result *b) {
  int differ = a->iteration_time_s != b->iteration_time_s || a->n_ranks != b->n_ranks || a->n_ops != b->n_ops ||
               memcmp(&a->breakdown, &b->breakdown, sizeof a->breakdown) != 0;
  for (int k = 0; !differ && k < a->n_ranks; k++) {
    const schema_rank_stat *x = &a->ranks[k], *y = &b->ranks[k];
    differ += x->rank != y->rank || x->busy_s != y->busy_s || x->compute_s != y->compute_s || x->comm_s != y->comm_s ||
              x->clock_duty != y->clock_duty || x->clock_gemm_speed != y->clock_gemm_speed ||
              x->clock_mem_speed != y->clock_mem_speed || x->clock_cycle_us != y->clock_cycle_us;
  }
  for (int i = 0; !differ && i < a->n_ops; i++) {
    const schema_op_record *x = &a->ops[i], *y = &b->ops[i];
    differ += strcmp(x->name, y->name) || strcmp(x->stream, y->stream) || x->rank != y->rank ||
              x->start_s != y->start_s || x->dur_s != y->dur_s || x->flow != y->flow || x->merged != y->merged;
  }
  return differ;
}

/* Hand programs run twice, on the event queue and as SimGrid actors (--local-queue off), recorded: both
 * results in *on and *off; the programs are freed. */
static void run_both(const plan *p, plan_program *pr, int world, schema_result *on, schema_result *off) {
  run_record = true;
  CU_ASSERT_EQUAL_FATAL(run(p, pr, SIM_MODE_FULL, on), 0);
  run_local_off = true;
  CU_ASSERT_EQUAL_FATAL(run(p, pr, SIM_MODE_FULL, off), 0);
  run_local_off = run_record = false;
  free_programs(pr, world);
}

static const schema_op_record *find_record(const schema_result *r, int rank, const char *kind) {
  for (int i = 0; i < r->n_ops; i++)
    if (r->ops[i].rank == rank && strcmp(r->ops[i].kind, kind) == 0) return &r->ops[i];
  return NULL;
}

/* A stream of the event queue waits for a SimGrid-side receive: two nodes of one GPU (pp 2); rank 0 computes
 * A (10 ms) and sends S bytes (a flow across nodes, a SimGrid actor's), rank 1 receives them and computes B
 * (5 ms) once they arrived. B starts at the receive's end to the bit, the iteration is A + L + the flow
 * (S / B + 2 latencies) + B + L (L: the 3 us launch cost of each op), and the actors give the same records. */
static void test_local_waits_for_simgrid_recv(void) {
  const double S = 1e8, launch = 3e-6;
  plan p;
  make_plan(&p, 1, 1, 2, 2, 1);
  plan_program *pr = new_programs(2, 4);
  add_op(&pr[0], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = 10e-3 * PEAK;
  plan_op *sd = add_op(&pr[0], PLAN_OP_SEND, PLAN_STREAM_PP);
  sd->peer = 1, sd->tag = 3, sd->traffic = PLAN_TRAFFIC_PP, sd->bytes = sd->wire_bytes = S, sd->dep[0] = 0;
  plan_op *rv = add_op(&pr[1], PLAN_OP_RECV, PLAN_STREAM_PP);
  rv->peer = 0, rv->tag = 3, rv->traffic = PLAN_TRAFFIC_PP, rv->bytes = rv->wire_bytes = S;
  plan_op *b = add_op(&pr[1], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
  b->flops = 5e-3 * PEAK, b->dep[0] = 0;
  schema_result on, off;
  run_both(&p, pr, 2, &on, &off);
  const schema_op_record *recv = find_record(&on, 1, "recv"), *comp = find_record(&on, 1, "compute");
  CU_ASSERT_PTR_NOT_NULL_FATAL(recv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(comp);
  CU_ASSERT_EQUAL(comp->start_s, recv->start_s + recv->dur_s);
  NEAR(on.iteration_time_s, 10e-3 + launch + S / BW + 2 * LAT + 5e-3 + launch, 1e-6);
  CU_ASSERT_TRUE(on.breakdown.pp_exposed_s > 0);
  CU_ASSERT_EQUAL(results_differ(&on, &off), 0);
  schema_result_free(&on);
  schema_result_free(&off);
}

/* At one instant the compute stream runs before the other streams (class 0 before 1): a DP all-reduce inside a
 * node becomes ready when compute op A (1 ms) ends, at the instant the compute stream launches B (10 ms); it
 * must see B running and wait for its SMs, less the 25 us head start: the all-reduce ends 25 us before the same
 * one issued after B (test_collective_head_start's instants), and the actors give the same records. */
static void test_local_compute_first_at_an_instant(void) {
  double t[2];
  for (int off = 0; off < 2; off++) {
    run_local_off = off;
    t[off] = kernel_then_allreduce(1, 2, 0, 5e7); /* one node of two GPUs: all streams on the queue */
  }
  run_local_off = false;
  double after = kernel_then_allreduce(1, 2, 1, 5e7);
  CU_ASSERT_EQUAL(t[0], t[1]);
  CU_ASSERT_DOUBLE_EQUAL(after - t[0], 25e-6, 1e-9);
  /* the same in the records of both */
  plan p;
  make_plan(&p, 2, 1, 1, 1, 2);
  plan_program *pr = new_programs(2, 4);
  for (int r = 0; r < 2; r++) {
    add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = 1e-3 * PEAK;
    add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = 10e-3 * PEAK;
    plan_op *c = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_DP);
    c->coll = PLAN_COLL_ALLREDUCE, c->group = PLAN_GROUP_DP, c->traffic = PLAN_TRAFFIC_DP;
    c->bytes = c->wire_bytes = 5e7;
    c->dep[0] = 0;
  }
  schema_result on, off;
  run_both(&p, pr, 2, &on, &off);
  CU_ASSERT_EQUAL(results_differ(&on, &off), 0);
  const schema_op_record *ar = find_record(&on, 0, "collective");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ar);

  /* reached when A ended (records come back rounded to 10 digits); its record holds the wait for the SMs */
  CU_ASSERT_DOUBLE_EQUAL(ar->start_s, 1e-3 + 3e-6, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(ar->start_s + ar->dur_s, t[0], 1e-12);
  schema_result_free(&on);
  schema_result_free(&off);
}

/* Sends and receives inside a node run on the event queue too (every stream of the pipeline's programs on one
 * node): the same records as the actors, and the receives' waits split into bubble and exposed transfer alike. */
static void test_local_sendrecv_in_node(void) {
  const int P = 4, M = 8;
  plan p;
  make_plan(&p, 1, 1, P, 1, P);
  plan_program *pr = bubble_programs(P, M, 0.010, 0.020);
  for (int r = 0; r < P; r++) /* activations of 100 MB (priced inside the node: an exposed transfer) */
    for (int i = 0; i < pr[r].n; i++)
      if (pr[r].ops[i].kind != PLAN_OP_COMPUTE) pr[r].ops[i].bytes = pr[r].ops[i].wire_bytes = 1e8;
  schema_result on, off;
  run_both(&p, pr, P, &on, &off);
  CU_ASSERT_EQUAL(results_differ(&on, &off), 0);
  CU_ASSERT_TRUE(on.breakdown.bubble_s > 0 && on.breakdown.pp_exposed_s > 0);
  CU_ASSERT_TRUE(find_record(&on, 1, "recv") != NULL && find_record(&on, 1, "send") != NULL);
  schema_result_free(&on);
  schema_result_free(&off);
}

/* The queue's driver must not wait when SimGrid's clock is already past the next event: a wait to the event
 * before it can end up to SimGrid's precision (1e-9 s) late, and a wait with a timeout <= 0 never times out
 * (the driver then slept until some actor queued a stream, a deadlock when none did). Llama-3 8B cut to 31
 * layers with a first stage of one layer, TP 8 with sequence parallelism, PP 16, 8 micro-batches, 1F1B, with
 * the shipped NVLink calibration, reached such a wait and deadlocked (found with experiments/published/llama3);
 * now it runs, and predicts what the actors (--local-queue off) do to 1e-9 of the iteration (0.097224676900
 * against 0.097224676880 s). */
static void test_local_clock_past_next_event(void) {
  const char *json =
      "{ \"schema\": 1, \"model\": \"llama3-8b\", \"cluster\": \"h200-1024-rail\", \"attention_backend\": \"executor\",\n"
      "  \"layout\": { \"dp\": 1, \"tp\": 8, \"pp\": 16, \"sequence_parallel\": true,\n"
      "              \"decoder_first_pipeline_num_layers\": 1 },\n"
      "  \"batch\": { \"micro\": 1, \"global\": 8, \"seq\": 2048 }, \"schedule\": \"1f1b\", \"layers_override\": 31 }\n";
  static plan p;
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_from_json_text(json, strlen(json), "clock-past.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(NVLINK_CALIBRATION_FILE, &c, &e), 0);
  for (int mode = 0; mode < 2; mode++) {
    sim_options o = {.mode = mode ? SIM_MODE_FULL : SIM_MODE_REDUCED, .cal = &c};
    schema_result on, off;
    int rc = sim_run_isolated(&p, &o, &on, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    o.local_off = true;
    CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &off, &e), 0);
    CU_ASSERT_TRUE(on.iteration_time_s > 0);
    printf("\n  %s mode: %.12f s on the queue, %.12f s as actors", mode ? "full" : "reduced", on.iteration_time_s,
           off.iteration_time_s);
    /* not to the bit here: the late waits are paid by the actors where they wait, by the queue not; the
     * iteration agrees to 1e-9 of itself, its parts (waits split at the late instants) to 1e-6 */
    CU_ASSERT_DOUBLE_EQUAL(on.iteration_time_s, off.iteration_time_s, 1e-9 * off.iteration_time_s);
    CU_ASSERT_DOUBLE_EQUAL(on.breakdown.bubble_s, off.breakdown.bubble_s, 1e-6 * off.iteration_time_s);
    CU_ASSERT_DOUBLE_EQUAL(on.breakdown.tp_exposed_s, off.breakdown.tp_exposed_s, 1e-6 * off.iteration_time_s);
    CU_ASSERT_DOUBLE_EQUAL(on.breakdown.compute_s, off.breakdown.compute_s, 1e-6 * off.iteration_time_s);
    schema_result_free(&on);
    schema_result_free(&off);
  }
  schema_calibration_free(&c);
}

/* A shipped plan in full mode with the clock model (three simulations), every op recorded: on the event queue
 * and with every stream a SimGrid actor, the same prediction, rank figures and records to the bit. */
static void test_local_same_as_actors(void) {
  static plan p;
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(load_real("gpt3-13b-64.json", &p, &c), 0);
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &c, .record_ops = true};
  schema_result on, off;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &on, &e), 0);
  o.local_off = true;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &off, &e), 0);
  CU_ASSERT_TRUE(on.n_ops > 100000);
  CU_ASSERT_EQUAL(results_differ(&on, &off), 0);
  printf("\n  gpt3-13b-64 full mode: %d records, %.9f s on the queue and as actors\n", on.n_ops, on.iteration_time_s);
  schema_result_free(&on);
  schema_result_free(&off);
  schema_calibration_free(&c);
}

/* ---- the clock model (sim_clock.c) ---- */

/* The clock section of the hand calibration: speeds 1.25 (GEMM) and 1.1
 * (memory-bound) from duty 0.2 to 0.7, none from 0.9; a slower period that
 * the model must not use; the window is `window_s`. */
static void clock_section_on(double window_s) {
  cal.clock_window_us = window_s * 1e6;
  schema_calibration_add_clock(&cal, 0.2, 1000, 1.25, 1.1);
  schema_calibration_add_clock(&cal, 0.7, 1000, 1.25, 1.1);
  schema_calibration_add_clock(&cal, 0.9, 1000, 1.0, 1.0);
  schema_calibration_add_clock(&cal, 1.0, 1000, 1.0, 1.0);
  schema_calibration_add_clock(&cal, 0.5, 50000, 1.02, 1.0);
  schema_calibration_add_clock(&cal, 0.9, 50000, 1.0, 1.0);
  schema_calibration_sort(&cal);
}
static void clock_section_off(void) {
  free(cal.clock);
  cal.clock = NULL;
  cal.n_clock = 0;
  cal.clock_window_us = 0;
}

#define GEMM_S (1e-3 + 3e-6)  /* a 1 ms GEMM and its launch cost */
#define MEM_S (0.2e-3 + 3e-6) /* a 0.2 ms memory-bound kernel and its launch cost */

/* Two GPUs (one per node) alternate, 20 times: a GEMM and a memory-bound
 * kernel, then an all-reduce of 1e7 bytes (~1 ms) that the next GEMM waits
 * for. The compute stream is busy about half the time, in 2.2 ms cycles. */
#define ALTERNATING_ACROSS_NODES ((topo_intra_kind)-1)
static topo_intra_kind alternating_intra = ALTERNATING_ACROSS_NODES; /* else: two GPUs of one node over this transport */
static plan_program *alternating_programs(plan *p) {
  if (alternating_intra == ALTERNATING_ACROSS_NODES)
    make_plan(p, 2, 1, 1, 2, 1);
  else {
    make_plan(p, 2, 1, 1, 1, 2);
    p->cluster.intra.kind = alternating_intra;
  }
  p->cluster.gpu.hbm_gbps = 4000;
  plan_program *pr = new_programs(2, 64);
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 20; k++) {
      plan_op *g = add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
      g->flops = 1e-3 * PEAK;
      if (k > 0) g->dep[0] = pr[r].n - 2; /* the previous all-reduce */
      plan_op *m = add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE);
      m->bytes = 0.2e-3 * 4000e9;
      m->dep[0] = pr[r].n - 2;
      plan_op *c = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_DP);
      c->coll = PLAN_COLL_ALLREDUCE, c->group = PLAN_GROUP_DP, c->traffic = PLAN_TRAFFIC_DP;
      c->bytes = c->wire_bytes = 1e7;
      c->dep[0] = pr[r].n - 2;
    }
  return pr;
}

/* The same compute in one stretch (40 GEMMs back to back), then one
 * all-reduce of 1e8 bytes (~10 ms) idle. */
static plan_program *one_stretch_programs(plan *p) {
  make_plan(p, 2, 1, 1, 2, 1);
  plan_program *pr = new_programs(2, 64);
  for (int r = 0; r < 2; r++) {
    for (int k = 0; k < 40; k++) add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = 1e-3 * PEAK;
    plan_op *c = add_op(&pr[r], PLAN_OP_COLLECTIVE, PLAN_STREAM_DP);
    c->coll = PLAN_COLL_ALLREDUCE, c->group = PLAN_GROUP_DP, c->traffic = PLAN_TRAFFIC_DP;
    c->bytes = c->wire_bytes = 1e8;
    c->dep[0] = 39;
  }
  return pr;
}

static int run_programs(plan_program *(*build)(plan *), schema_result *r) {
  plan p;
  plan_program *pr = build(&p);
  int rc = run(&p, pr, SIM_MODE_FULL, r);
  free_programs(pr, 2);
  return rc;
}

/* Fine-grained compute/idle alternation: duty ~0.5, inside the 1.25x/1.1x
 * range, so each GEMM runs 1.25x and each memory-bound kernel 1.1x faster
 * and the communication is unchanged. The second simulation's duty is lower
 * still but its speeds are the same: two simulations. */
static void test_clock_fine_grained_faster(void) {
  schema_result off, on;
  CU_ASSERT_EQUAL_FATAL(run_programs(alternating_programs, &off), 0);
  clock_section_on(22e-3);
  int rc = run_programs(alternating_programs, &on);
  clock_section_off();
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  const double G = 20 * GEMM_S, M = 20 * MEM_S;
  NEAR(off.breakdown.compute_s, G + M, 1e-9);
  NEAR(on.breakdown.compute_s, G / 1.25 + M / 1.1, 1e-9);
  NEAR(on.iteration_time_s, off.iteration_time_s - G * (1 - 1 / 1.25) - M * (1 - 1 / 1.1), 1e-6);
  CU_ASSERT_EQUAL(off.clock_passes, 0);
  CU_ASSERT_EQUAL(on.clock_passes, 2);
  CU_ASSERT_EQUAL_FATAL(on.n_ranks, 2);
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(off.ranks[i].clock_gemm_speed, 0); /* no model: no fields */
    CU_ASSERT_EQUAL(on.ranks[i].clock_gemm_speed, 1.25);
    CU_ASSERT_EQUAL(on.ranks[i].clock_mem_speed, 1.1);
    /* busy 1.08 ms of each ~2.1 ms cycle once faster */
    CU_ASSERT_TRUE(on.ranks[i].clock_duty > 0.4 && on.ranks[i].clock_duty < 0.6);
  }
  int noted = 0;
  for (int i = 0; i < on.n_notes; i++) noted |= strstr(on.notes[i], "clock model") != NULL;
  CU_ASSERT_TRUE(noted);
  printf("\n  alternating: %.6f s calibrated, %.6f s with the clock model (duty %.3f)\n", off.iteration_time_s,
         on.iteration_time_s, on.ranks[0].clock_duty);
  schema_result_free(&off);
  schema_result_free(&on);
}

/* ---- the power-cap clock model (a "power" section) ---- */

#define OP1_S (1e-3 + 3e-6) /* a 1 ms kernel and its launch cost */

/* Never idle: three 1-ms GEMMs, then a 1-ms memory-bound kernel, 10 times, on each of two GPUs; no
 * communication. */
static plan_program *never_idle_programs(plan *p) {
  make_plan(p, 2, 1, 1, 2, 1);
  p->cluster.gpu.hbm_gbps = 4000;
  plan_program *pr = new_programs(2, 64);
  for (int r = 0; r < 2; r++)
    for (int k = 0; k < 10; k++) {
      for (int j = 0; j < 3; j++) add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->flops = 1e-3 * PEAK;
      add_op(&pr[r], PLAN_OP_COMPUTE, PLAN_STREAM_COMPUTE)->bytes = 1e-3 * 4000e9;
    }
  return pr;
}

/* The duty model sees a never-idle GPU at the cap; the power model sees its mix: with the hand section
 * (test_power_section.h) a window of GEMM share x runs at u = f / 2000 with u^2 = 600 / (400 + 400 x), the
 * GEMMs at u / sqrt(3/4) (faster: the tables' GEMMs ran at 1,732 MHz), the memory-bound kernel at sqrt(u)
 * (slower: its table ran at 2,000 MHz). The iteration (40 ms) is within the 100-ms window: every op's window is
 * the whole mix, x = (G / g) / (G / g + M / m), a fixed point the passes approach (x 0.75 -> 0.7297 ->
 * 0.72917, u 0.9258 -> 0.93123 -> 0.93138). Without the section, or with --clock-model duty and no clock
 * section, the calibrated times. */
static void test_power_clock_never_idle(void) {
  schema_result off, on, duty;
  CU_ASSERT_EQUAL_FATAL(run_programs(never_idle_programs, &off), 0);
  test_power_section(&cal.power, &TEST_POWER_HAND);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_power_fit_run(&cal.power, "hand", &e), 0);
  int rc = run_programs(never_idle_programs, &on);
  run_clock_model = SIM_CLOCK_MODEL_DUTY;
  int rc_duty = run_programs(never_idle_programs, &duty);
  run_clock_model = SIM_CLOCK_MODEL_AUTO;
  memset(&cal.power, 0, sizeof cal.power);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL_FATAL(rc_duty, 0);
  const double G = 30 * OP1_S, M = 10 * OP1_S;
  NEAR(off.breakdown.compute_s, G + M, 1e-9);
  CU_ASSERT_EQUAL(off.clock_passes, 0);
  CU_ASSERT_EQUAL(duty.clock_passes, 0);
  CU_ASSERT_EQUAL(duty.iteration_time_s, off.iteration_time_s);
  double x = 0.75, u = 1, g = 1, m = 1; /* the fixed point by hand */
  for (int i = 0; i < 60; i++) {
    u = sqrt(600 / (400 + 400 * x));
    g = u / sqrt(0.75), m = sqrt(u);
    x = (G / g) / (G / g + M / m);
  }
  NEAR(u, 0.93138, 1e-4);
  CU_ASSERT_FATAL(on.n_ranks == 2);
  CU_ASSERT(on.clock_passes >= 2 && on.clock_passes <= 4);
  for (int i = 0; i < 2; i++) {
    const schema_rank_stat *s = &on.ranks[i];
    NEAR(s->clock_gemm_speed, g, 5e-4); /* the last pass: within 0.05 % of the fixed point */
    NEAR(s->clock_mem_speed, m, 5e-4);
    NEAR(s->clock_mhz, 2000 * u, 5e-4);
    CU_ASSERT(s->clock_gemm_speed > 1.07 && s->clock_mem_speed < 0.97); /* GEMMs faster, the add slower */
    NEAR(s->clock_duty, 1.0, 1e-9);
  }
  NEAR(on.breakdown.compute_s, G / on.ranks[0].clock_gemm_speed + M / on.ranks[0].clock_mem_speed, 1e-9);
  NEAR(on.iteration_time_s, off.iteration_time_s - (G + M) + G / g + M / m, 5e-4);
  int noted = 0;
  for (int i = 0; i < on.n_notes; i++) noted |= strstr(on.notes[i], "clock model (power)") != NULL;
  CU_ASSERT_TRUE(noted);
  printf("\n  never idle: %.6f s calibrated, %.6f s under the power cap (%.1f MHz, GEMM x%.4f, memory x%.4f, %d "
         "simulations); fixed point %.1f MHz\n", off.iteration_time_s, on.iteration_time_s, on.ranks[0].clock_mhz,
         on.ranks[0].clock_gemm_speed, on.ranks[0].clock_mem_speed, on.clock_passes, 2000 * u);
  schema_result_free(&off);
  schema_result_free(&on);
  schema_result_free(&duty);
}

/* One 40-GEMM stretch, then ~10 ms idle; window 10 GEMMs wide: only the
 * five GEMMs at each end see idle time in their window (busy 0.55, 0.65,
 * ..., 0.95 of it; the iteration repeats, so the first ones see the previous
 * iteration's idle tail): duty (40 - 2 x 1.25) / 40 = 0.9375, above 0.9
 * where the speed is 1 (its cycle is the iteration: the 50 ms row, 1 above
 * duty 0.9 too). One simulation, the calibrated time. */
static void test_clock_long_stretch_unchanged(void) {
  schema_result off, on;
  CU_ASSERT_EQUAL_FATAL(run_programs(one_stretch_programs, &off), 0);
  clock_section_on(10 * GEMM_S);
  int rc = run_programs(one_stretch_programs, &on);
  clock_section_off();
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_TRUE(off.iteration_time_s > 40 * GEMM_S + 5 * GEMM_S); /* the idle tail is wider than half a window */
  CU_ASSERT_EQUAL(on.iteration_time_s, off.iteration_time_s);
  CU_ASSERT_EQUAL(on.breakdown.compute_s, off.breakdown.compute_s);
  CU_ASSERT_EQUAL(on.clock_passes, 1);
  CU_ASSERT_EQUAL_FATAL(on.n_ranks, 2);
  for (int i = 0; i < 2; i++) {
    NEAR(on.ranks[i].clock_duty, 0.9375, 1e-6);
    CU_ASSERT_EQUAL(on.ranks[i].clock_gemm_speed, 1.0);
  }
  schema_result_free(&off);
  schema_result_free(&on);
}

/* The same alternation on two GPUs of one node: over NVLink the all-reduces
 * are GPU-busy time (NCCL's kernels copy at NVLink speed and draw the power
 * the GEMMs leave), so the duty is ~1 and the compute keeps its calibrated
 * time; through shm they are not, and the GEMMs run 1.25x faster. */
static void test_clock_nvlink_collectives_count_as_busy(void) {
  const topo_intra_kind kinds[2] = {TOPO_INTRA_NVLINK, TOPO_INTRA_SHM};
  for (int k = 0; k < 2; k++) {
    alternating_intra = kinds[k];
    schema_result off, on;
    CU_ASSERT_EQUAL_FATAL(run_programs(alternating_programs, &off), 0);
    clock_section_on(22e-3);
    int rc = run_programs(alternating_programs, &on);
    clock_section_off();
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(on.n_ranks, 2);
    if (kinds[k] == TOPO_INTRA_NVLINK) {
      CU_ASSERT_TRUE(on.ranks[0].clock_duty > 0.95);
      CU_ASSERT_EQUAL(on.ranks[0].clock_gemm_speed, 1.0);
      CU_ASSERT_EQUAL(on.breakdown.compute_s, off.breakdown.compute_s);
    } else {
      CU_ASSERT_TRUE(on.ranks[0].clock_duty < 0.7);
      CU_ASSERT_EQUAL(on.ranks[0].clock_gemm_speed, 1.25);
      CU_ASSERT_TRUE(on.breakdown.compute_s < off.breakdown.compute_s);
    }
    /* its cycle: a GEMM, a memory-bound kernel and an all-reduce, ~1-3 ms */
    CU_ASSERT_TRUE(kinds[k] == TOPO_INTRA_NVLINK || (on.ranks[0].clock_cycle_us > 500 && on.ranks[0].clock_cycle_us < 5000));
    schema_result_free(&off);
    schema_result_free(&on);
  }
  alternating_intra = ALTERNATING_ACROSS_NODES;
}

/* --clock off is the calibration without the section: the same numbers, bit for bit. */
static void test_clock_off_equals_no_section(void) {
  schema_result none, off;
  CU_ASSERT_EQUAL_FATAL(run_programs(alternating_programs, &none), 0);
  clock_section_on(22e-3);
  run_clock_off = true;
  int rc = run_programs(alternating_programs, &off);
  run_clock_off = false;
  clock_section_off();
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_DOUBLE_EQUAL(off.iteration_time_s, none.iteration_time_s, 0);
  CU_ASSERT_DOUBLE_EQUAL(off.breakdown.compute_s, none.breakdown.compute_s, 0);
  CU_ASSERT_DOUBLE_EQUAL(off.breakdown.dp_exposed_s, none.breakdown.dp_exposed_s, 0);
  CU_ASSERT_EQUAL(off.clock_passes, 0);
  schema_result_free(&none);
  schema_result_free(&off);
}

/* A real plan in full mode: the ranks of one pipeline stage share the
 * duty of its tp 0, dp 0 rank, so their speeds; reduced mode (those ranks
 * only) gives the same iteration within 1%; --clock off (reduced) gives
 * the numbers of the calibration without the section. */
static void test_clock_real_plan_stages(void) {
  static plan p;
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(load_real("gpt-h4096-pp2.json", &p, &c), 0);
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &c};
  schema_result none, full, red, off;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &none, &e), 0);
  c.clock_window_us = 2000;
  schema_calibration_add_clock(&c, 0.5, 1000, 1.3, 1.1);
  schema_calibration_add_clock(&c, 1.0, 1000, 1.0, 1.0);
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &full, &e), 0);
  o.mode = SIM_MODE_REDUCED;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &red, &e), 0);
  o.clock_off = true;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &off, &e), 0);
  CU_ASSERT_TRUE(full.clock_passes >= 1 && full.clock_passes <= 4);
  CU_ASSERT_TRUE(full.iteration_time_s <= none.iteration_time_s);
  NEAR(red.iteration_time_s, full.iteration_time_s, 0.01);
  for (int i = 0; i < full.n_ranks; i++) {
    CU_ASSERT_TRUE(full.ranks[i].clock_duty > 0 && full.ranks[i].clock_duty <= 1);
    CU_ASSERT_TRUE(full.ranks[i].clock_gemm_speed >= 1.0 && full.ranks[i].clock_gemm_speed <= 1.3);
    for (int j = 0; j < full.n_ranks; j++)
      if (plan_coord_of(&p, full.ranks[i].rank).pp == plan_coord_of(&p, full.ranks[j].rank).pp)
        CU_ASSERT_EQUAL(full.ranks[i].clock_gemm_speed, full.ranks[j].clock_gemm_speed);
  }
  schema_result reduced_none;
  o.mode = SIM_MODE_REDUCED;
  o.clock_off = false;
  free(c.clock);
  c.clock = NULL, c.n_clock = 0, c.clock_window_us = 0;
  CU_ASSERT_EQUAL_FATAL(sim_run_isolated(&p, &o, &reduced_none, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(off.iteration_time_s, reduced_none.iteration_time_s, 0);
  printf("\n  gpt-h4096-pp2: %.6f s calibrated, %.6f s clock model (full, %d simulations, duty %.3f / %.3f)\n",
         none.iteration_time_s, full.iteration_time_s, full.clock_passes, full.ranks[0].clock_duty,
         full.ranks[full.n_ranks - 1].clock_duty);
  schema_result_free(&none);
  schema_result_free(&full);
  schema_result_free(&red);
  schema_result_free(&off);
  schema_result_free(&reduced_none);
  schema_calibration_free(&c);
}

/* The command: bad input exits 2 naming the file and field; --help lists everything. */
static int run_cmd(const char *cmd, char *out, size_t cap) {
  FILE *f = popen(cmd, "r");
  if (!f) return -1;
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = '\0';
  char rest[4096]; /* drain what did not fit: the command must not die of SIGPIPE */
  while (fread(rest, 1, sizeof rest, f) > 0) {
  }
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_command_bad_input(void) {
  char out[8192], cmd[1024];
  CU_ASSERT_EQUAL(run_cmd(TACOSIM_BIN " --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "simulate"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "compare"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "search"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "derive-calibration"));
  CU_ASSERT_EQUAL(run_cmd(TACOSIM_BIN " frobnicate 2>&1", out, sizeof out), 2);
  CU_ASSERT_EQUAL(run_cmd(TACOSIM_BIN " simulate /nonexistent/plan.json 2>&1", out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "/nonexistent/plan.json"));
  char bad[64];
  snprintf(bad, sizeof bad, "/tmp/test-sim-badcal-%d.json", (int)getpid());
  FILE *f = fopen(bad, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
             "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":-3}]}");
  fclose(f);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s/gpt-h4096-tp2-none.json --calibration %s 2>&1", PLANS_DIR, bad);
  CU_ASSERT_EQUAL(run_cmd(cmd, out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, bad));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "gemm[0].us"));
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s/gpt-h4096-tp2-none.json --mode sideways 2>&1", PLANS_DIR);
  CU_ASSERT_EQUAL(run_cmd(cmd, out, sizeof out), 2);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s/gpt-h4096-tp2-none.json --clock sometimes 2>&1", PLANS_DIR);
  CU_ASSERT_EQUAL(run_cmd(cmd, out, sizeof out), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--clock"));
  CU_ASSERT_EQUAL(run_cmd(TACOSIM_BIN " --help", out, sizeof out), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--clock on|off"));
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " compare %s %s 2>&1", bad, bad);
  CU_ASSERT_EQUAL(run_cmd(cmd, out, sizeof out), 2);
  remove(bad);
}

static int setup(void) {
  /* codec kernels that cost (almost) nothing, so the hand cases see the wire alone */
  memset(&cal, 0, sizeof cal);
  snprintf(cal.path, sizeof cal.path, "hand-calibration");
  for (int g = 32; g <= 512; g *= 2) {
    const char *names[] = {"taco_encode", "taco_decode", "taco_decode_sum_encode"};
    for (int i = 0; i < 3; i++) {
      schema_calibration_add_kernel(&cal, names[i], false, 1, g, 0.001);
      schema_calibration_add_kernel(&cal, names[i], false, 1e13, g, 0.001);
    }
  }
  schema_calibration_sort(&cal);
  return 0;
}

static int teardown(void) {
  schema_calibration_free(&cal);
  if (platform_path[0]) remove(platform_path);
  return 0;
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_engine", setup, teardown);
  CU_add_test(s, "ring all-reduce: 2(n-1)/n S/B + 2(n-1) latencies", test_ring_allreduce);
  CU_add_test(s, "small all-reduce across nodes: tree", test_tree_allreduce);
  CU_add_test(s, "CAAT-Net p=0.5 halves the all-reduce bytes", test_caat_halves_allreduce);
  CU_add_test(s, "send/recv, and TACO cuts wire bytes by (1+8/G)/2", test_send_and_taco_wire_bytes);
  CU_add_test(s, "fast links are not capped by a TCP window", test_fast_link_uncapped);
  CU_add_test(s, "programs that deadlock are reported", test_deadlock_reported);
  CU_add_test(s, "reduced mode keeps the cross traffic of shared links", test_reduced_keeps_cross_traffic);
  CU_add_test(s, "ideal pipeline bubble (p-1)/(m+p-1)", test_pipeline_bubble);
  CU_add_test(s, "uneven pipeline stages: the plan's programs at hand-worked makespans", test_uneven_stages_bubble);
  CU_add_test(s, "the fused loss kernel is charged once, in the forward", test_loss_counted_once);
  CU_add_test(s, "over host memory a plain collective runs beside the kernel", test_host_memory_collective_beside_kernel);
  CU_add_test(s, "a collective waits for the SMs of the running kernel (or overlaps: ideal)",
              test_collective_waits_for_sms);
  CU_add_test(s, "inside a node a collective gets a head start of the kernel's last waves", test_collective_head_start);
  CU_add_test(s, "an in-node meeting sleeps its members' waits for the SMs: the same instants",
              test_meeting_absorbs_sm_waits);
  CU_add_test(s, "an in-node meeting sleeps the compute block before it: the same instants",
              test_meeting_absorbs_compute_block);
  CU_add_test(s, "norms, activations, adds use their kernel's own table", test_specific_kernel_tables);
  CU_add_test(s, "a compressed collective off the TP stream waits for the compute stream to run dry",
              test_compressed_waits_for_idle_compute);
  CU_add_test(s, "TACO on FP32 gradients: the FP32 table, else the bf16 one at the same element count", test_taco_fp32_payloads);
  CU_add_test(s, "tp_overlap_chunks: row chunks priced at their rows", test_row_chunks_priced_at_their_rows);
  CU_add_test(s, "deterministic", test_deterministic);
  CU_add_test(s, "full and reduced modes agree within 1% (64 GPUs)", test_full_vs_reduced);
  CU_add_test(s, "full mode: a stage's shared program predicts what each rank's own does", test_full_shared_programs);
  CU_add_test(s, "event queue: a local stream waits for a SimGrid-side receive", test_local_waits_for_simgrid_recv);
  CU_add_test(s, "event queue: at one instant the compute stream launches before a collective looks",
              test_local_compute_first_at_an_instant);
  CU_add_test(s, "event queue: sends and receives inside a node", test_local_sendrecv_in_node);
  CU_add_test(s, "event queue: a shipped plan predicts and records what the actors do", test_local_same_as_actors);
  CU_add_test(s, "event queue: no wait when the clock is past the next event", test_local_clock_past_next_event);
  CU_add_test(s, "clock model: fine-grained compute/idle alternation runs faster", test_clock_fine_grained_faster);
  CU_add_test(s, "clock model: one long compute stretch keeps its calibrated time", test_clock_long_stretch_unchanged);
  CU_add_test(s, "clock model: collectives over NVLink count as busy, through shm not",
              test_clock_nvlink_collectives_count_as_busy);
  CU_add_test(s, "clock model: --clock off equals a calibration without the section", test_clock_off_equals_no_section);
  CU_add_test(s, "power-cap clock: a never-idle GEMM-heavy mix by hand", test_power_clock_never_idle);
  CU_add_test(s, "clock model: full mode shares a stage's speeds, reduced agrees", test_clock_real_plan_stages);
  CU_add_test(s, "tacosim: bad input exits 2 naming the field", test_command_bad_input);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

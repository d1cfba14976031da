/* test_moe_nodes.c — the flex (DeepEP) dispatcher across nodes: the expected
 * remote nodes and NVLink copies of a token against a brute-force enumeration
 * of every top-k choice, the two legs' groups, the program's legs and their
 * bytes, the loader's rule, and the simulator's RDMA leg by hand: the
 * inter-node bytes of one dispatch are the closed form's. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"
#include "test_check.h"
#include "test_hand_moe.h"

/* A plan struct by hand: E experts, top k, ep = dp ranks (tp 1, pp 1) on nodes of g GPUs, flex. */
static void hand_plan(plan *p, int E, int k, int ep, int g) {
  memset(p, 0, sizeof *p);
  p->model.experts = E, p->model.top_k = k;
  p->dp = ep, p->tp = 1, p->pp = 1, p->vpp = 1, p->ep = ep, p->moe_flex = true;
  p->order = PLAN_ORDER_TP_DP_PP;
  p->cluster.gpus_per_node = g;
  p->cluster.nodes = (ep + g - 1) / g;
}

/* Every k-subset of E experts (experts e on rank e / (E / ep), ranks r on node r / g), the sender at rank s:
 * sums of the remote nodes holding one of its experts and of the NVLink copies (on each node holding one,
 * the ranks holding one other than the rank with s's place there). */
static void enumerate(int E, int k, int ep, int g, int s, double *nodes, double *nvl) {
  int per_rank = E / ep, N = ep / g, place = s % g;
  long count = 0;
  double sum_nodes = 0, sum_nvl = 0;
  for (unsigned mask = 0; mask < 1u << E; mask++) {
    if (__builtin_popcount(mask) != k) continue;
    count++;
    for (int node = 0; node < N; node++) {
      int holds = 0, copies = 0;
      for (int j = 0; j < g; j++) {
        int r = node * g + j, has = 0;
        for (int e = r * per_rank; e < (r + 1) * per_rank; e++) has |= (int)(mask >> e & 1);
        holds |= has;
        copies += has && j != place;
      }
      sum_nodes += holds && node != s / g;
      sum_nvl += copies;
    }
  }
  *nodes = sum_nodes / count;
  *nvl = sum_nvl / count;
}

static void test_copies_brute_force(void) {
  static const int Es[] = {8, 12, 16};
  int cases = 0;
  for (size_t i = 0; i < sizeof Es / sizeof Es[0]; i++)
    for (int k = 1; k <= 4; k++)
      for (int ep = 2; ep <= Es[i]; ep++) {
        if (Es[i] % ep) continue;
        for (int g = 1; g <= ep; g++) {
          if (ep % g) continue;
          plan p;
          hand_plan(&p, Es[i], k, ep, g);
          int per_node, N = plan_moe_ep_nodes(&p, &per_node);
          CU_ASSERT_EQUAL(N, ep / g);
          CU_ASSERT_EQUAL(per_node, g);
          for (int s = 0; s < ep; s += (ep + 1) / 2) { /* two senders: the first rank and one in the second half */
            double nodes, nvl;
            enumerate(Es[i], k, ep, g, s, &nodes, &nvl);
            if (N < 2) { /* inside one node: no once-a-node leg */
              CU_ASSERT_DOUBLE_EQUAL(plan_moe_node_copies(&p), 0.0, 0);
              CU_ASSERT_DOUBLE_EQUAL(plan_moe_nvlink_copies(&p), 0.0, 0);
            } else {
              CU_ASSERT_DOUBLE_EQUAL(plan_moe_node_copies(&p), nodes, 1e-12);
              CU_ASSERT_DOUBLE_EQUAL(plan_moe_nvlink_copies(&p), nvl, 1e-12);
            }
            cases++;
          }
        }
      }
  CU_ASSERT(cases > 60);
  /* by hand: E 8, k 2, ep 4 on 2 nodes of 2: a node holds 4 experts, P(none) = C(4,2)/C(8,2) = 6/28; a rank
   * holds 2, P(none) = C(6,2)/C(8,2) = 15/28 */
  plan p;
  hand_plan(&p, 8, 2, 4, 2);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_node_copies(&p), 1.0 - 6.0 / 28.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_nvlink_copies(&p), 2.0 * (1.0 - 15.0 / 28.0), 1e-12);
  /* Qwen3-235B-A22B on EP 32 over 4 nodes of 8 (the published cross-node row): 2.72 remote nodes */
  hand_plan(&p, 128, 8, 32, 8);
  double none96 = 1, none124 = 1;
  for (int i = 0; i < 8; i++) none96 *= (96.0 - i) / (128.0 - i), none124 *= (124.0 - i) / (128.0 - i);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_node_copies(&p), 3.0 * (1.0 - none96), 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_nvlink_copies(&p), 28.0 * (1.0 - none124), 1e-12);
  CU_ASSERT(fabs(plan_moe_node_copies(&p) - 2.72) < 0.01);
  /* not flex: no once-a-node leg */
  p.moe_flex = false;
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_node_copies(&p), 0.0, 0);
}

static int members(const plan *p, int rank, plan_group_kind g, int *m) {
  return plan_group_members(p, rank, g, m, 64);
}

static void test_leg_groups(void) {
  plan p;
  int m[64];
  hand_plan(&p, 128, 8, 32, 8);
  CU_ASSERT_EQUAL_FATAL(members(&p, 3, PLAN_GROUP_EP_RAIL, m), 4);
  CU_ASSERT(m[0] == 3 && m[1] == 11 && m[2] == 19 && m[3] == 27);
  CU_ASSERT_EQUAL(plan_group_index(&p, 19, PLAN_GROUP_EP_RAIL), 2);
  CU_ASSERT_EQUAL_FATAL(members(&p, 10, PLAN_GROUP_EP_NODE, m), 8);
  for (int i = 0; i < 8; i++) CU_ASSERT_EQUAL(m[i], 8 + i);
  CU_ASSERT_EQUAL(plan_group_index(&p, 10, PLAN_GROUP_EP_NODE), 2);
  /* TP 2, expert TP 1, EP 8 over nodes of 4 GPUs: the EP group is 8 consecutive ranks (tp fastest) */
  memset(&p, 0, sizeof p);
  p.model.experts = 16, p.model.top_k = 2;
  p.tp = 2, p.dp = 4, p.pp = 1, p.vpp = 1, p.ep = 8, p.etp = 1, p.moe_flex = true, p.order = PLAN_ORDER_TP_DP_PP;
  p.cluster.gpus_per_node = 4, p.cluster.nodes = 2;
  CU_ASSERT_EQUAL_FATAL(members(&p, 5, PLAN_GROUP_EP_RAIL, m), 2);
  CU_ASSERT(m[0] == 1 && m[1] == 5);
  CU_ASSERT_EQUAL_FATAL(members(&p, 5, PLAN_GROUP_EP_NODE, m), 4);
  CU_ASSERT(m[0] == 4 && m[3] == 7);
  /* inside one node: groups of one */
  p.cluster.gpus_per_node = 8, p.cluster.nodes = 1;
  CU_ASSERT_EQUAL(members(&p, 5, PLAN_GROUP_EP_RAIL, m), 1);
  CU_ASSERT_EQUAL(members(&p, 5, PLAN_GROUP_EP_NODE, m), 1);
}

static int plan_text(const char *model, const char *cluster, const char *layout, int dp, int tp, int pp, plan *p,
                     ts_err *e) {
  char text[2048];
  snprintf(text, sizeof text,
           "{\"schema\":1,\"model\":\"%s\",\"cluster\":\"%s\",\"layout\":{\"dp\":%d,\"tp\":%d,\"pp\":%d,"
           "\"sequence_parallel\":%s%s},\"batch\":{\"micro\":1,\"global\":%d,\"seq\":256},\"schedule\":\"1f1b\"}",
           model, cluster, dp, tp, pp, tp > 1 ? "true" : "false", layout, 4 * dp);
  return plan_from_json_text(text, strlen(text), "p.json", NULL, NULL, p, e);
}

/* The program: inside a node one all-to-all over EP (as before); across nodes the RDMA leg (EP stream) beside
 * the NVLink leg (TP stream), with the closed form's bytes, and the next compute op waits for both. */
static void test_program_legs(void) {
  plan p;
  ts_err e = {0};
  /* moe-tiny (8 experts, top 2, hidden 256) on h200-1024-rail (8 GPUs a node): ep 16 = 2 nodes of 8 */
  CU_ASSERT_EQUAL_FATAL(plan_text("moe-tiny", "h200-1024-rail", ",\"ep\":8,\"moe_token_dispatcher_type\":\"flex\"", 16,
                                  1, 1, &p, &e), 0);
  int g, N = plan_moe_ep_nodes(&p, &g);
  CU_ASSERT_EQUAL(N, 1); /* ep 8 of consecutive ranks: one node */
  CU_ASSERT_EQUAL(plan_moe_node_copies(&p), 0.0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int legs[PLAN_GROUP_COUNT] = {0};
  for (int i = 0; i < prog.n; i++)
    if (prog.ops[i].model_op == PLAN_MOP_MOE_TOKENS) legs[prog.ops[i].group]++;
  CU_ASSERT(legs[PLAN_GROUP_EP] > 0);
  CU_ASSERT_EQUAL(legs[PLAN_GROUP_EP_RAIL] + legs[PLAN_GROUP_EP_NODE], 0);
  plan_program_free(&prog);

  /* qwen3-30b-a3b (128 experts, top 8, hidden 2048), ep 16 over 2 nodes of 8 */
  CU_ASSERT_EQUAL_FATAL(plan_text("qwen3-30b-a3b", "h200-1024-rail", ",\"ep\":16,\"moe_token_dispatcher_type\":\"flex\"",
                                  16, 1, 1, &p, &e), 0);
  N = plan_moe_ep_nodes(&p, &g);
  CU_ASSERT_EQUAL(N, 2);
  CU_ASSERT_EQUAL(g, 8);
  double none64 = 1, none120 = 1;
  for (int i = 0; i < 8; i++) none64 *= (64.0 - i) / (128.0 - i), none120 *= (120.0 - i) / (128.0 - i);
  const double t = 256, h = p.model.hidden;
  double rdma = 2.0 * t * h * (1.0 - none64);  /* bytes a rank sends to the other node per dispatch */
  double nvl = 2.0 * t * h * 14.0 * (1.0 - none120); /* bytes it sends over NVLink: (ep - N) p_rank copies */
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int rail = -1, pairs = 0, joined = 0;
  memset(legs, 0, sizeof legs);
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->model_op != PLAN_MOP_MOE_TOKENS) continue;
    legs[op->group]++;
    CU_ASSERT_EQUAL(op->coll, PLAN_COLL_ALLTOALL);
    /* all-to-all send buffers: n members x what goes to each other one */
    if (op->group == PLAN_GROUP_EP_RAIL) {
      NEAR(op->wire_bytes * (N - 1.0) / N, rdma, 1e-12);
      CU_ASSERT_EQUAL(op->stream, PLAN_STREAM_EP);
      rail = i;
    }
    if (op->group == PLAN_GROUP_EP_NODE) {
      NEAR(op->wire_bytes * (g - 1.0) / g, nvl, 1e-12);
      CU_ASSERT_EQUAL(op->stream, PLAN_STREAM_TP);
      /* the NVLink leg right after its RDMA leg, from the same point: the two run at once */
      CU_ASSERT_EQUAL_FATAL(rail, i - 1);
      CU_ASSERT_EQUAL(op->dep[0], prog.ops[rail].dep[0]);
      pairs++;
      /* the next compute op waits for both legs */
      for (int j = i + 1; j < prog.n; j++) {
        const plan_op *c = &prog.ops[j];
        if (c->kind != PLAN_OP_COMPUTE) continue;
        bool a = false, b = false;
        for (int k = 0; k < PLAN_MAX_DEPS; k++) a |= c->dep[k] == rail, b |= c->dep[k] == i;
        if (a && b) joined++;
        if (a || b) break;
      }
    }
  }
  CU_ASSERT_EQUAL(legs[PLAN_GROUP_EP], 0);
  CU_ASSERT(legs[PLAN_GROUP_EP_RAIL] > 0);
  CU_ASSERT_EQUAL(legs[PLAN_GROUP_EP_RAIL], legs[PLAN_GROUP_EP_NODE]);
  CU_ASSERT_EQUAL(pairs, legs[PLAN_GROUP_EP_NODE]);
  CU_ASSERT_EQUAL(joined, pairs);
  plan_program_free(&prog);

  /* one EP rank a node (Mixtral-8x7B, tp 8, expert TP 8: EP carved from DP, one rank of each node): once a node is once a
   * rank, the single all-to-all over EP as before */
  int rc = plan_text("mixtral-8x7b", "h200-1024-rail", ",\"ep\":2,\"moe_token_dispatcher_type\":\"flex\"", 2, 8, 1,
                     &p, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  N = plan_moe_ep_nodes(&p, &g);
  CU_ASSERT_EQUAL(N, 2);
  CU_ASSERT_EQUAL(g, 1);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  memset(legs, 0, sizeof legs);
  for (int i = 0; i < prog.n; i++)
    if (prog.ops[i].model_op == PLAN_MOP_MOE_TOKENS) legs[prog.ops[i].group]++;
  CU_ASSERT(legs[PLAN_GROUP_EP] > 0);
  CU_ASSERT_EQUAL(legs[PLAN_GROUP_EP_RAIL] + legs[PLAN_GROUP_EP_NODE], 0);
  plan_program_free(&prog);

  /* uneven: order tp-pp-dp with pp 3 puts EP ranks 0, 3, ..., 21 on nodes of 3, 3 and 2 of them */
  CU_ASSERT_EQUAL(plan_text("qwen3-30b-a3b", "h200-1024-rail",
                            ",\"ep\":8,\"order\":\"tp-pp-dp\",\"moe_token_dispatcher_type\":\"flex\"", 8, 1, 3, &p, &e),
                  -1);
  ASSERT_MSG(e, "p.json");
  ASSERT_MSG(e, "layout.moe_token_dispatcher_type");
  ASSERT_MSG(e, "unequal");
  /* the same layout with the all-to-all dispatcher is fine */
  CU_ASSERT_EQUAL(plan_text("qwen3-30b-a3b", "h200-1024-rail", ",\"ep\":8,\"order\":\"tp-pp-dp\"", 8, 1, 3, &p, &e),
                  0);
}

/* ---- the simulator's RDMA leg by hand ---- */

#define BW 10e9   /* bytes/s per link direction */
#define LAT 5e-6  /* s per link */

static char platform_path[64];
static schema_calibration cal; /* empty: costs from the hand cluster's roofline */
static double rail_wire;

/* E 8, k 2, ep 4 = 2 nodes of 2 GPUs; every GPU its own host behind one switch (links of BW). */
static void sim_plan(plan *p) {
  test_hand_moe_plan(p, "hand-moe-nodes", 2, 2, 100, 2, BW / 1e9);
  p->dp = 4, p->ep = 4, p->moe_flex = true;
  p->schedule = PLAN_SCHED_GPIPE;
  test_hand_platform(platform_path, sizeof platform_path, "test-moe-nodes", 4, BW, LAT);
}

static double node_wire;
static int with_rail, with_node, leg_tag = -1;

static plan_op *leg(plan_program *g, plan_stream stream, plan_group_kind group, double wire) {
  plan_op *op = &g->ops[g->n++];
  memset(op, 0, sizeof *op);
  op->kind = PLAN_OP_COLLECTIVE, op->stream = (uint8_t)stream, op->coll = PLAN_COLL_ALLTOALL;
  op->group = (uint8_t)group, op->traffic = PLAN_TRAFFIC_EP, op->model_op = PLAN_MOP_MOE_TOKENS;
  op->layer = op->micro = op->peer = -1;
  op->tag = leg_tag;
  for (int k = 0; k < PLAN_MAX_DEPS; k++) op->dep[k] = -1;
  op->bytes = op->wire_bytes = wire;
  return op;
}

/* the RDMA leg (EP stream) and / or the NVLink leg (TP stream), then a compute op that waits for them */
static void legs_then_compute(plan_program *g) {
  if (with_rail) leg(g, PLAN_STREAM_EP, PLAN_GROUP_EP_RAIL, rail_wire);
  if (with_node) leg(g, PLAN_STREAM_TP, PLAN_GROUP_EP_NODE, node_wire);
  plan_op *c = &g->ops[g->n++];
  memset(c, 0, sizeof *c);
  c->kind = PLAN_OP_COMPUTE, c->stream = PLAN_STREAM_COMPUTE, c->model_op = -100;
  c->layer = c->micro = c->peer = c->tag = -1;
  for (int k = 0; k < PLAN_MAX_DEPS; k++) c->dep[k] = -1;
  for (int k = 0; k < g->n - 1; k++) c->dep[k] = k;
}

static double simulate(const plan *p, int rail, int node) {
  with_rail = rail, with_node = node;
  int world = plan_world_size(p);
  plan_program *pr = calloc((size_t)world, sizeof *pr);
  for (int k = 0; k < world; k++) {
    pr[k].rank = k, pr[k].cap = 4, pr[k].ops = calloc(4, sizeof(plan_op));
    legs_then_compute(&pr[k]);
  }
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .platform_path = platform_path, .programs = pr,
                   .clock_off = true};
  ts_err e = {0};
  schema_result r;
  int rc = sim_run_isolated(p, &o, &r, &e);
  if (rc) fprintf(stderr, "\n  simulation failed: %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
  double t = rc ? -1 : r.iteration_time_s;
  if (rc == 0) {
    NEAR(r.breakdown.ep_exposed_s, t, 0.01); /* both legs are EP traffic */
    schema_result_free(&r);
  }
  for (int k = 0; k < world; k++) free(pr[k].ops);
  free(pr);
  return t;
}

/* One dispatch's RDMA leg: each rank sends its rail peer on the other node 2 h t x (1 - C(4,2)/C(8,2)) bytes
 * (t = 128 tokens, hidden 256): that many bytes through its link at BW, plus the route's latency (two links;
 * an all-to-all over all 4 EP ranks would be 3 flows a rank, a different time). The NVLink leg runs inside the
 * node beside it: the two together take the longer of the two alone, not their sum. */
static void test_sim_rail_leg(void) {
  plan p;
  sim_plan(&p);
  double inter = 2.0 * 128 * 256 * plan_moe_node_copies(&p);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_node_copies(&p), 1.0 - 6.0 / 28.0, 1e-12);
  rail_wire = inter * 2; /* the send buffer over the 2 rail members */
  node_wire = 40 * rail_wire;
  double t_rail = simulate(&p, 1, 0), t_node = simulate(&p, 0, 1), t_both = simulate(&p, 1, 1);
  NEAR(t_rail, inter / BW + 2 * LAT, 0.01);
  CU_ASSERT(t_node > 0.2 * t_rail); /* comparable, so a sum would show */
  if (getenv("TEST_VERBOSE")) fprintf(stderr, "\n  rail %g s, node %g s, both %g s\n", t_rail, t_node, t_both);
  NEAR(t_both, fmax(t_rail, t_node), 0.01);
  CU_ASSERT(t_both < 0.95 * (t_rail + t_node));
  unlink(platform_path);
}

/* The same RDMA leg moved by DeepEP's dispatch kernel (tagged as plan_program_moe.c tags it): its flows at the
 * links' rate, then the rest of the kernel's time at its published share of the line, 58 x 3/4 / 50 = 0.87
 * (plan_moe_flex_link_share): (bytes / BW + the route's latency) / 0.87; the combine kernel's 0.855. */
static void test_sim_rail_leg_kernel(void) {
  plan p;
  sim_plan(&p);
  double inter = 2.0 * 128 * 256 * plan_moe_node_copies(&p);
  rail_wire = inter * 2;
  leg_tag = PLAN_MOE_TAG_DISPATCH;
  double t_dispatch = simulate(&p, 1, 0);
  leg_tag = PLAN_MOE_TAG_COMBINE;
  double t_combine = simulate(&p, 1, 0);
  leg_tag = -1;
  NEAR(t_dispatch, (inter / BW + 2 * LAT) / 0.87, 0.01);
  NEAR(t_combine, (inter / BW + 2 * LAT) / 0.855, 0.01);
  unlink(platform_path);
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("moe_nodes", NULL, NULL);
  CU_add_test(s, "remote nodes and NVLink copies against every top-k choice", test_copies_brute_force);
  CU_add_test(s, "the RDMA and NVLink legs' groups", test_leg_groups);
  CU_add_test(s, "the program's legs, their order and bytes; the loader's rule", test_program_legs);
  CU_add_test(s, "the simulator's RDMA leg: inter-node bytes of one dispatch, by hand", test_sim_rail_leg);
  CU_add_test(s, "the RDMA leg at DeepEP's kernel rate, dispatch and combine", test_sim_rail_leg_kernel);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

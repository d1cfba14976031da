/* test_moe_flex.c — the flex dispatcher's kernels at their published rates (plan_moe.c
 * plan_moe_flex_link_share, sim_costs.c sim_flex_token_s): the share of each link by hand from the published
 * figures; one HybridEP dispatch of the GB200 row (Qwen3-235B-A22B, EP 8 inside a GB200 NVL72 rack): its
 * destinations, its bytes, its kernel tags and its time; the loader's rules for layout.moe_hybridep_num_sms. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "sim.h"
#include "sim_costs.h"
#include "test_check.h"

static void hand_plan(plan *p, bool flex, bool hybridep, int sms, int ep) {
  memset(p, 0, sizeof *p);
  p->model.experts = 128, p->model.top_k = 8;
  p->dp = ep, p->tp = 1, p->pp = 1, p->vpp = 1, p->ep = ep;
  p->moe_flex = flex, p->moe_hybridep = hybridep, p->moe_hybridep_num_sms = sms;
}

/* Each share from the published figure: logical GB/s x (1 - the benchmark's local share) / the link's rate. */
static void test_link_shares(void) {
  plan p;
  hand_plan(&p, true, false, 0, 8); /* DeepEP: H800 153 / 158 GB/s over 8 ranks of 200 GB/s NVLink */
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, false), 153.0 * 7 / 8 / 200, 1e-12);
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, true), 158.0 * 7 / 8 / 200, 1e-12);
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP_NODE, false), 0.669375, 1e-12);
  /* RDMA: EP 32 = 4 nodes, 58 / 57 GB/s counting the own node, of 50 GB/s */
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP_RAIL, false), 0.87, 1e-12);
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP_RAIL, true), 0.855, 1e-12);
  CU_ASSERT_EQUAL(plan_moe_flex_link_share(&p, PLAN_GROUP_TP, false), 0.0); /* not a token leg */

  hand_plan(&p, true, true, 32, 8); /* HybridEP on GB200, 32 SMs: 764.03 / 737.13 GB/s, 8 ranks, 900 GB/s */
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, false), 764.03 * 7 / 8 / 900, 1e-12);
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, true), 737.13 * 7 / 8 / 900, 1e-12);
  hand_plan(&p, true, true, 16, 8); /* 16 SMs: 750.15 / 684.27 */
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, false), 750.15 * 7 / 8 / 900, 1e-12);
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, true), 684.27 * 7 / 8 / 900, 1e-12);
  hand_plan(&p, true, true, 0, 8); /* unset (a plan built in code): Megatron-Core's default 16 */
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, true), 684.27 * 7 / 8 / 900, 1e-12);
  NEAR(plan_moe_flex_link_share(&p, PLAN_GROUP_EP_RAIL, false), 57.69 * 3 / 4 / 50, 1e-12); /* H100, 4 nodes */

  hand_plan(&p, false, false, 0, 8); /* the all-to-all dispatcher: NCCL's model, no share */
  CU_ASSERT_EQUAL(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, false), 0.0);
  hand_plan(&p, true, false, 0, 1); /* one EP rank: nothing moves */
  CU_ASSERT_EQUAL(plan_moe_flex_link_share(&p, PLAN_GROUP_EP, false), 0.0);
}

static int gb200_plan(const char *extra, plan *p, ts_err *e) {
  char text[2048];
  snprintf(text, sizeof text,
           "{\"schema\":1,\"model\":\"qwen3-235b-a22b\",\"cluster\":\"gb200-nvl72-1152\",\"layout\":{\"dp\":8,\"tp\":1,"
           "\"pp\":1,\"ep\":8,\"expert_tp\":1,\"moe_token_dispatcher_type\":\"flex\"%s},"
           "\"batch\":{\"micro\":1,\"global\":8,\"seq\":4096},\"schedule\":\"1f1b\",\"layers_override\":2}",
           extra);
  return plan_from_json_text(text, strlen(text), "p.json", NULL, NULL, p, e);
}

/* One HybridEP dispatch of the GB200 row by hand. Rank 0's EP group is ranks 0-7, all in rack 0 (72 GPUs a
 * NVLink domain): one all-to-all over them, no RDMA leg. A token goes once to each of the 8 ranks holding one
 * of its 8 experts (16 a rank): 8 (1 - C(112,8) / C(128,8)) = 5.34 copies, 4,096 tokens (micro 1 x seq
 * 4,096, TP 1) x 4,096 hidden x 2 bytes each: 179.16 MB a rank. Its kernel at 32 SMs moves the 7/8 that
 * leave the GPU at 764.03 x 7/8 GB/s: 2 us of NVLink latency + 179.16 MB / 764.03 GB/s = 236.5 us; the
 * combine kernel at 737.13 GB/s: 245.1 us. The forward dispatch and the combine's backward run the dispatch
 * kernel, the forward combine and the dispatch's backward the combine kernel: two of each a layer and
 * micro-batch. */
static void test_hybridep_dispatch(void) {
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  int rc = gb200_plan(",\"moe_flex_dispatcher_backend\":\"hybridep\",\"moe_hybridep_num_sms\":32", &p, &e);
  if (rc) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(p.moe_hybridep_num_sms, 32);
  int m[8];
  CU_ASSERT_EQUAL_FATAL(plan_group_members(&p, 0, PLAN_GROUP_EP, m, 8), 8);
  for (int k = 0; k < 8; k++) {
    CU_ASSERT_EQUAL(m[k], k);
    CU_ASSERT_EQUAL(topo_node_of(&p.cluster, m[k]), 0);
  }
  int g, N = plan_moe_ep_nodes(&p, &g);
  CU_ASSERT_EQUAL(N, 1);
  CU_ASSERT_EQUAL(plan_moe_node_copies(&p), 0.0);
  double none = 1;
  for (int i = 0; i < 8; i++) none *= (112.0 - i) / (128.0 - i);
  const double copies = 8 * (1 - none), bytes = 2.0 * 4096 * copies * 4096;
  NEAR(plan_moe_dispatch_copies(&p), copies, 1e-12);
  NEAR(copies, 5.3393, 1e-4);

  schema_calibration empty = {0};
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &empty, NULL, &e), 0);
  plan_program prog = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int n[2][PLAN_PHASE_OPTIMIZER + 1] = {{0}}, other = 0;
  const double t_dispatch = 2e-6 + bytes / 764.03e9, t_combine = 2e-6 + bytes / 737.13e9;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->model_op != PLAN_MOP_MOE_TOKENS) continue;
    if (op->group != PLAN_GROUP_EP || op->coll != PLAN_COLL_ALLTOALL || op->tag < 0 || op->tag > 1) {
      other++;
      continue;
    }
    n[op->tag][op->phase]++;
    NEAR(op->wire_bytes, bytes, 1e-12);
    double s;
    int inc;
    CU_ASSERT_EQUAL_FATAL(sim_coll_calibrated_s(&costs, op, 8, &s, &inc, &e), 0);
    NEAR(s, op->tag == PLAN_MOE_TAG_COMBINE ? t_combine : t_dispatch, 1e-9);
    NEAR(sim_flex_token_s(&p, op, 8), s, 1e-12);
  }
  NEAR(t_dispatch, 236.5e-6, 1e-3);
  NEAR(t_combine, 245.1e-6, 1e-3);
  CU_ASSERT_EQUAL(other, 0);
  /* 2 layers x 1 micro-batch: forward 2 dispatch + 2 combine kernels, backward the same */
  CU_ASSERT_EQUAL(n[PLAN_MOE_TAG_DISPATCH][PLAN_PHASE_FWD], 2);
  CU_ASSERT_EQUAL(n[PLAN_MOE_TAG_COMBINE][PLAN_PHASE_FWD], 2);
  CU_ASSERT_EQUAL(n[PLAN_MOE_TAG_DISPATCH][PLAN_PHASE_BWD], 2);
  CU_ASSERT_EQUAL(n[PLAN_MOE_TAG_COMBINE][PLAN_PHASE_BWD], 2);
  plan_program_free(&prog);

  /* the all-to-all dispatcher: untagged, the NCCL model prices it (not the kernel table) */
  CU_ASSERT_EQUAL_FATAL(gb200_plan("", &p, &e), 0);
  p.moe_flex = false;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int untagged = 0;
  for (int i = 0; i < prog.n; i++)
    if (prog.ops[i].model_op == PLAN_MOP_MOE_TOKENS) {
      untagged += prog.ops[i].tag == -1;
      CU_ASSERT(sim_flex_token_s(&p, &prog.ops[i], 8) < 0);
    }
  CU_ASSERT_EQUAL(untagged, 8);
  plan_program_free(&prog);
}

static void test_loader(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL(gb200_plan(",\"moe_flex_dispatcher_backend\":\"hybridep\",\"moe_hybridep_num_sms\":24", &p, &e), -1);
  ASSERT_MSG(e, "p.json");
  ASSERT_MSG(e, "layout.moe_hybridep_num_sms");
  ASSERT_MSG(e, "16 and 32");
  CU_ASSERT_EQUAL(gb200_plan(",\"moe_hybridep_num_sms\":32", &p, &e), -1); /* DeepEP (the default backend) */
  ASSERT_MSG(e, "layout.moe_hybridep_num_sms");
  ASSERT_MSG(e, "hybridep");
  CU_ASSERT_EQUAL_FATAL(gb200_plan(",\"moe_flex_dispatcher_backend\":\"hybridep\"", &p, &e), 0);
  CU_ASSERT_EQUAL(p.moe_hybridep_num_sms, 16); /* Megatron-Core's default */
}

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("moe_flex", NULL, NULL);
  CU_add_test(s, "each kernel's share of its link, from the published figures", test_link_shares);
  CU_add_test(s, "one HybridEP dispatch of the GB200 row: destinations, bytes, kernels, time", test_hybridep_dispatch);
  CU_add_test(s, "layout.moe_hybridep_num_sms: 16 or 32, hybridep only", test_loader);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

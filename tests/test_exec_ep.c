/* test_exec_ep.c — expert parallelism's host arithmetic (runtime/exec/exec_ep.c,
 * plain C): which rank owns which expert, the EP and expert-DP groups (against
 * the plan's own, plan_moe_group_index / _members, on the shipped EP plans),
 * the per-destination counts and offsets from the routing, the expert side's
 * segments, and the bytes each rank sends, plain and TACO. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "exec_ep.h"
#include "exec_walk_map.h"
#include "plan.h"

#define PLANS TACOSIM_SOURCE_DIR "/experiments/exec-moe/plans/"

static void test_place(void) {
  exec_ep_place pl;
  ts_err e = {{0}, 0};
  /* dp 8, ep 4, 8 experts: rank 5 is EP rank 1 of EP group 1 (DP ranks 4..7), expert-DP rank 1 of {1, 5} */
  CU_ASSERT_FATAL(exec_ep_place_of(NULL, 8, 4, 5, 8, &pl, &e) == 0);
  CU_ASSERT_EQUAL(pl.ep, 4);
  CU_ASSERT_EQUAL(pl.ep_rank, 1);
  CU_ASSERT_EQUAL(pl.ep_group, 1);
  CU_ASSERT_EQUAL(pl.edp, 2);
  CU_ASSERT_EQUAL(pl.edp_rank, 1);
  CU_ASSERT_EQUAL(pl.expert_lo, 2);
  CU_ASSERT_EQUAL(pl.experts_local, 2);
  for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(exec_ep_member(&pl, k), 4 + k);
  CU_ASSERT_EQUAL(exec_edp_member(&pl, 0), 1);
  CU_ASSERT_EQUAL(exec_edp_member(&pl, 1), 5);
  for (int x = 0; x < 8; x++) CU_ASSERT_EQUAL(exec_ep_owner(&pl, x), x / 2);
  /* ep = dp = 2 (the EP 2 code's case): EP rank = DP rank, expert-DP of one rank, 4 experts each */
  CU_ASSERT_FATAL(exec_ep_place_of(NULL, 2, 2, 1, 8, &pl, &e) == 0);
  CU_ASSERT_EQUAL(pl.ep_rank, 1);
  CU_ASSERT_EQUAL(pl.edp, 1);
  CU_ASSERT_EQUAL(pl.edp_rank, 0);
  CU_ASSERT_EQUAL(pl.expert_lo, 4);
  CU_ASSERT_EQUAL(pl.experts_local, 4);
  /* no EP (ep 0 or 1): every expert here, expert-DP = DP */
  CU_ASSERT_FATAL(exec_ep_place_of(NULL, 1, 0, 0, 8, &pl, &e) == 0);
  CU_ASSERT_EQUAL(pl.ep, 1);
  CU_ASSERT_EQUAL(pl.experts_local, 8);
  CU_ASSERT_EQUAL(pl.expert_lo, 0);
}

static void test_refusals(void) {
  exec_ep_place pl;
  struct { int dp, ep, experts; } bad[] = {{8, 3, 6}, {16, 16, 16}, {8, 4, 6}, {6, 4, 8}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ts_err e = {{0}, 0};
    CU_ASSERT_EQUAL(exec_ep_place_of("p.json", bad[i].dp, bad[i].ep, 0, bad[i].experts, &pl, &e), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "p.json: layout.ep:"));
    CU_ASSERT_EQUAL(ts_exit_status(&e), 2); /* bad input: exit 2 */
  }
}

/* 4 EP ranks, 8 experts (2 each): all[p][x] = rows of EP rank p for expert x. */
static const int32_t all4[4 * 8] = {
    3, 0, 5, 1, 2, 2, 0, 7, /* rank 0 */
    1, 1, 1, 1, 1, 1, 1, 1, /* rank 1 */
    0, 0, 0, 0, 9, 4, 2, 1, /* rank 2 */
    6, 2, 0, 3, 0, 0, 5, 0, /* rank 3 */
};

static void test_route(void) {
  ts_err e = {{0}, 0};
  exec_ep_place pl[4];
  long long scnt[4][4], soff[4][4], rcnt[4][4], roff[4][4], seg_cnt[4][8], erows[4];
  int32_t seg_ex[4][8];
  int nseg[4];
  long long total = 0;
  for (int i = 0; i < 32; i++) total += all4[i];
  for (int r = 0; r < 4; r++) {
    CU_ASSERT_FATAL(exec_ep_place_of(NULL, 4, 4, r, 8, &pl[r], &e) == 0);
    CU_ASSERT_FATAL(exec_ep_route(&pl[r], 8, all4, all4 + 8 * r, scnt[r], soff[r], rcnt[r], roff[r], seg_ex[r],
                                  seg_cnt[r], &nseg[r], &erows[r]) == 0);
    CU_ASSERT_EQUAL(nseg[r], 8);
  }
  /* rank 0 sends rows of experts 2p, 2p + 1 to p: 3, 6, 4, 7, from offsets 0, 3, 9, 13 */
  const long long s0[4] = {3, 6, 4, 7}, o0[4] = {0, 3, 9, 13};
  for (int p = 0; p < 4; p++) {
    CU_ASSERT_EQUAL(scnt[0][p], s0[p]);
    CU_ASSERT_EQUAL(soff[0][p], o0[p]);
  }
  /* rank 2 (experts 4, 5) receives 4, 2, 13, 0 from ranks 0..3; segments (source, expert) in that order */
  const long long r2[4] = {4, 2, 13, 0};
  const int32_t ex2[8] = {4, 5, 4, 5, 4, 5, 4, 5};
  const long long c2[8] = {2, 2, 1, 1, 9, 4, 0, 0};
  for (int p = 0; p < 4; p++) CU_ASSERT_EQUAL(rcnt[2][p], r2[p]);
  CU_ASSERT_EQUAL(roff[2][3], 19);
  for (int i = 0; i < 8; i++) {
    CU_ASSERT_EQUAL(seg_ex[2][i], ex2[i]);
    CU_ASSERT_EQUAL(seg_cnt[2][i], c2[i]);
  }
  CU_ASSERT_EQUAL(erows[2], 19);
  /* what p sends q is what q receives from p; every row lands once */
  long long landed = 0;
  for (int p = 0; p < 4; p++) {
    landed += erows[p];
    long long segs = 0;
    for (int i = 0; i < 8; i++) segs += seg_cnt[p][i];
    CU_ASSERT_EQUAL(segs, erows[p]);
    for (int q = 0; q < 4; q++) CU_ASSERT_EQUAL(scnt[p][q], rcnt[q][p]);
  }
  CU_ASSERT_EQUAL(landed, total);
  /* its own counts disagreeing with the gathered row, or a negative count: -1 */
  int32_t own[8], neg[32];
  memcpy(own, all4, sizeof own), own[3]++;
  memcpy(neg, all4, sizeof neg), neg[8 * 3 + 1] = -1;
  CU_ASSERT_EQUAL(exec_ep_route(&pl[0], 8, all4, own, scnt[0], soff[0], rcnt[0], roff[0], seg_ex[0], seg_cnt[0],
                                &nseg[0], &erows[0]), -1);
  CU_ASSERT_EQUAL(exec_ep_route(&pl[0], 8, neg, NULL, scnt[0], soff[0], rcnt[0], roff[0], seg_ex[0], seg_cnt[0],
                                &nseg[0], &erows[0]), -1);
}

static void test_bytes(void) {
  ts_err e = {{0}, 0};
  exec_ep_place pl;
  CU_ASSERT_FATAL(exec_ep_place_of(NULL, 4, 4, 1, 8, &pl, &e) == 0);
  CU_ASSERT_EQUAL(exec_ep_wire_bytes(3, 256, 0), 3 * 256 * 2);
  /* TACO G 128: ceil(768 / 128) = 6 groups of 128 FP8 codes + 8 bytes of scales */
  CU_ASSERT_EQUAL(exec_ep_wire_bytes(3, 256, 128), 6 * (128 + 8));
  CU_ASSERT_EQUAL(exec_ep_wire_bytes(1, 100, 128), 1 * (128 + 8)); /* a partial group is a whole one */
  const long long rows[4] = {2, 50, 0, 7};                          /* rank 1's own 50 rows cross no wire */
  CU_ASSERT_EQUAL(exec_ep_send_bytes(&pl, rows, 4096, 0), (2 + 7) * 4096 * 2);
  CU_ASSERT_EQUAL(exec_ep_send_bytes(&pl, rows, 4096, 128), (2 + 7) * 4096 / 128 * 136);
}

/* The shipped EP plans: each rank's EP and expert-DP place is the plan's
 * (plan_group_index / _members), and the executor runs every op of every
 * rank's program; expert-DP reductions iff ep < dp. */
static void test_plans(void) {
  const char *names[] = {"mixtral-8x7b-l1-ep2", "mixtral-8x7b-l1-ep4", "mixtral-8x7b-l1-ep4-taco",
                         "mixtral-8x7b-l1-ep8", "mixtral-8x7b-l1-ep8-taco", "mixtral-8x7b-l1-ep2-dp4",
                         "mixtral-8x7b-l1-ep4-dp8"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char path[512];
    snprintf(path, sizeof path, PLANS "%s.json", names[i]);
    plan p;
    ts_err e = {{0}, 0};
    int rc = plan_load(path, NULL, NULL, &p, &e);
    if (rc) fprintf(stderr, "\n  %s: %s\n", names[i], e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    for (int r = 0; r < plan_world_size(&p); r++) {
      exec_ep_place pl;
      CU_ASSERT_FATAL(exec_ep_place_of(path, p.dp, p.ep, r, p.model.experts, &pl, &e) == 0);
      CU_ASSERT_EQUAL(pl.ep_rank, plan_group_index(&p, r, PLAN_GROUP_EP));
      CU_ASSERT_EQUAL(pl.edp_rank, plan_group_index(&p, r, PLAN_GROUP_EDP));
      CU_ASSERT_EQUAL(pl.edp, plan_edp(&p));
      int m[64];
      CU_ASSERT_EQUAL_FATAL(plan_group_members(&p, r, PLAN_GROUP_EP, m, 64), p.ep);
      for (int k = 0; k < p.ep; k++) CU_ASSERT_EQUAL(exec_ep_member(&pl, k), m[k]);
      CU_ASSERT_EQUAL_FATAL(plan_group_members(&p, r, PLAN_GROUP_EDP, m, 64), pl.edp);
      for (int j = 0; j < pl.edp; j++) CU_ASSERT_EQUAL(exec_edp_member(&pl, j), m[j]);
      plan_program prog;
      CU_ASSERT_FATAL(plan_build_program(&p, r, &prog, &e) == 0);
      int edps = 0;
      for (int j = 0; j < prog.n; j++) edps += prog.ops[j].model_op == PLAN_MOP_EXPERT_GRADS;
      CU_ASSERT_EQUAL(edps > 0, p.ep < p.dp);
      rc = exec_walk_check_program(&p, &prog, &e);
      if (rc) fprintf(stderr, "\n  %s rank %d: %s\n", names[i], r, e.msg);
      CU_ASSERT_EQUAL(rc, 0);
      plan_program_free(&prog);
    }
  }
}

/* The plans `execute --check` builds for its EP cases (exec_check_moe.c, check_ep; the model file and the plan
 * text as exec_check_plan_text writes them): on 2, 4 and 8 ranks, EP N = DP N and EP N/2 < DP N over the check's
 * two MoE models, every op of every rank runs, 4 token all-to-alls per MoE layer (what check_ep expects) and
 * expert-DP reductions iff ep < dp. */
static void test_check_plans(void) {
  /* the check's models: Mixtral-like (4 experts, 2 MoE layers), moe-tiny-like (8 experts, 1 dense layer, shared) */
  const char *models[2] = {
      "{ \"schema\": 1, \"name\": \"exec-check-tiny\", \"family\": \"gpt\", \"layers\": 2, \"hidden\": 256,\n"
      "  \"heads\": 8, \"kv_heads\": 2, \"ffn_hidden\": 256, \"activation\": \"swiglu\", \"norm\": \"rmsnorm\",\n"
      "  \"vocab\": 512, \"tied_embeddings\": false, \"max_seq\": 128, \"position\": \"rope\", \"rope_theta\": 1e6,\n"
      "  \"qkv_bias\": false, \"linear_bias\": false, \"norm_eps\": 1e-5,\n"
      "  \"experts\": 4, \"top_k\": 2, \"expert_ffn_hidden\": 256, \"shared_experts\": 0, \"dense_layers\": 0 }\n",
      "{ \"schema\": 1, \"name\": \"exec-check-tiny\", \"family\": \"gpt\", \"layers\": 2, \"hidden\": 256,\n"
      "  \"heads\": 8, \"kv_heads\": 2, \"ffn_hidden\": 512, \"activation\": \"swiglu\", \"norm\": \"rmsnorm\",\n"
      "  \"vocab\": 512, \"tied_embeddings\": false, \"max_seq\": 128, \"position\": \"rope\", \"rope_theta\": 1e6,\n"
      "  \"qkv_bias\": false, \"linear_bias\": false, \"norm_eps\": 1e-6,\n"
      "  \"experts\": 8, \"top_k\": 2, \"expert_ffn_hidden\": 128, \"shared_experts\": 1, \"dense_layers\": 1 }\n"};
  const int moe_layers[2] = {2, 1};
  const struct { int n, ep, model; } cases[] = {{2, 2, 0}, {4, 4, 0}, {4, 2, 0}, {8, 8, 1}, {8, 4, 0}};
  char model_path[64];
  snprintf(model_path, sizeof model_path, "/tmp/test-exec-ep-%d.json", (int)getpid());
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const int n = cases[i].n, ep = cases[i].ep;
    FILE *f = fopen(model_path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(models[cases[i].model], f);
    fclose(f);
    char text[1024];
    snprintf(text, sizeof text,
             "{ \"schema\": 1, \"name\": \"exec-check\", \"model\": \"%s\", \"cluster\": \"%s\",\n"
             "  \"layout\": { \"dp\": %d, \"tp\": 1, \"pp\": 1, \"ep\": %d },\n"
             "  \"batch\": { \"micro\": 1, \"global\": %d, \"seq\": 128 }, \"schedule\": \"1f1b\",\n"
             "  \"hidden_dropout\": 0 }\n",
             model_path, n <= 2 ? "h200x2-nvlink" : "h200x8-nvswitch", n, ep, n);
    plan p;
    ts_err e = {{0}, 0};
    int rc = plan_from_json_text(text, strlen(text), "check plan", NULL, NULL, &p, &e);
    if (rc) fprintf(stderr, "\n  n %d ep %d: %s\n", n, ep, e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    for (int r = 0; r < n; r++) {
      plan_program prog;
      CU_ASSERT_FATAL(plan_build_program(&p, r, &prog, &e) == 0);
      int tokens = 0, edps = 0;
      for (int j = 0; j < prog.n; j++) {
        tokens += prog.ops[j].kind == PLAN_OP_COLLECTIVE && prog.ops[j].model_op == PLAN_MOP_MOE_TOKENS;
        edps += prog.ops[j].kind == PLAN_OP_COLLECTIVE && prog.ops[j].model_op == PLAN_MOP_EXPERT_GRADS;
      }
      CU_ASSERT_EQUAL(tokens, 4 * moe_layers[cases[i].model]);
      CU_ASSERT_EQUAL(edps > 0, ep < n);
      rc = exec_walk_check_program(&p, &prog, &e);
      if (rc) fprintf(stderr, "\n  n %d ep %d rank %d: %s\n", n, ep, r, e.msg);
      CU_ASSERT_EQUAL(rc, 0);
      plan_program_free(&prog);
    }
  }
  remove(model_path);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("exec_ep", NULL, NULL);
  CU_add_test(s, "EP and expert-DP places, expert owners (dp 8 ep 4, dp 2 ep 2, no EP)", test_place);
  CU_add_test(s, "layouts the executor refuses name layout.ep, exit 2", test_refusals);
  CU_add_test(s, "per-destination counts, offsets and expert segments from the routing (4 ranks)", test_route);
  CU_add_test(s, "bytes each rank sends, plain and TACO", test_bytes);
  CU_add_test(s, "shipped EP plans: places are the plan's, programs run op by op", test_plans);
  CU_add_test(s, "execute --check's EP plans (2, 4, 8 ranks) run op by op, the all-to-alls check_ep expects", test_check_plans);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

/* test_moe_search.c — the layout search enumerates expert parallelism for an
 * MoE model (every EP that divides the experts and DP) and nothing more for a
 * dense one; the plans it makes carry the EP degree and load. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "search.h"

typedef struct {
  long n, by_ep[65];
  int bad;
  const model_config *m;
} tally;

static void count(const sim_search_layout *l, void *arg) {
  tally *t = arg;
  t->n++;
  if (l->ep < 1 || l->ep > 64 || l->dp % l->ep || (t->m->experts ? t->m->experts % l->ep : l->ep != 1)) t->bad++;
  else t->by_ep[l->ep]++;
}

static void test_enumeration(void) {
  plan base;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(sim_search_base_plan("moe-tiny", "h200x8-nvswitch", &base, &e), 0);
  sim_search_space s = {.model = &base.model, .cluster = &base.cluster, .gpus = 8, .seq = 256, .global_batch = 16,
                        .max_micro = 4};
  tally t = {.m = &base.model};
  long n = sim_search_enumerate(&s, count, &t);
  CU_ASSERT_EQUAL(t.bad, 0);
  CU_ASSERT_EQUAL(n, t.n);
  /* 8 experts: ep 1, 2, 4, 8 wherever DP allows; dp 8 layouts give all four */
  CU_ASSERT(t.by_ep[1] > 0 && t.by_ep[2] > 0 && t.by_ep[4] > 0 && t.by_ep[8] > 0);
  CU_ASSERT(t.by_ep[8] < t.by_ep[4] && t.by_ep[4] < t.by_ep[2] && t.by_ep[2] <= t.by_ep[1]);
  /* a dense model: ep 1 only, as before */
  plan dense;
  CU_ASSERT_EQUAL_FATAL(sim_search_base_plan("gpt-tiny", "h200x8-nvswitch", &dense, &e), 0);
  s.model = &dense.model, s.cluster = &dense.cluster;
  tally d = {.m = &dense.model};
  sim_search_enumerate(&s, count, &d);
  CU_ASSERT_EQUAL(d.bad, 0);
  CU_ASSERT_EQUAL(d.by_ep[1], d.n);
  /* a plan made from an EP layout validates and has the all-to-alls */
  CU_ASSERT_EQUAL_FATAL(sim_search_base_plan("moe-tiny", "h200x8-nvswitch", &base, &e), 0);
  sim_search_layout l = {.tp = 2, .pp = 1, .vpp = 1, .dp = 4, .micro = 1, .sequence_parallel = true, .ep = 4};
  plan p;
  CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &l, 256, 16, &p, &e), 0);
  int rc = plan_validate(&p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
  CU_ASSERT_EQUAL(p.ep, 4);
  CU_ASSERT_DOUBLE_EQUAL(p.moe_imbalance, 1.04, 1e-12);
  CU_ASSERT_PTR_NOT_NULL(strstr(p.name, "-ep4"));
  sim_search_apply_codec(&p, SIM_SEARCH_CODEC_TACO);
  CU_ASSERT_EQUAL(p.codec[PLAN_TRAFFIC_EP].kind, PLAN_CODEC_TACO);
}

/* The estimate's expert all-to-alls by hand: moe-tiny (hidden 256, top 2) at TP 2 with SP, sequence 256,
 * micro-batch 1: 128 tokens a rank, 2 copies each, 2 x 128 x 2 x 256 = 131,072 bytes; EP 4 inside one 8-GPU
 * NVSwitch node: NCCL's all-to-all steps x the link latency + 3/4 of the bytes at the link's rate, twice
 * forward (dispatch, combine) and twice backward. TACO's wire bytes cost less; EP 1 or a dense model nothing. */
static void test_estimate_alltoall(void) {
  plan base, p;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(sim_search_base_plan("moe-tiny", "h200x8-nvswitch", &base, &e), 0);
  sim_search_layout l = {.tp = 2, .pp = 1, .vpp = 1, .dp = 4, .micro = 1, .sequence_parallel = true, .ep = 4};
  CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &l, 256, 16, &p, &e), 0);
  const topo_cluster *c = &p.cluster;
  const double bytes = 2.0 * 128 * 2 * 256;
  const double one = ts_coll_steps(TS_COLL_ALLTOALL, 4) * c->intra.latency_us * 1e-6 +
                     0.75 * bytes / (c->intra.gbps_per_gpu * 1e9);
  double bwd, fwd = sim_search_moe_alltoall_s(&p, &bwd);
  CU_ASSERT_DOUBLE_EQUAL(fwd, 2 * one, 1e-12 * one);
  CU_ASSERT_DOUBLE_EQUAL(bwd, 2 * one, 1e-12 * one);
  sim_search_apply_codec(&p, SIM_SEARCH_CODEC_TACO);
  CU_ASSERT_EQUAL(sim_search_moe_alltoall_s(&p, &bwd), fwd); /* under codec_min_bytes: sent uncompressed */
  p.codec_min_bytes = 0;
  double taco = sim_search_moe_alltoall_s(&p, &bwd);
  CU_ASSERT(taco > 0 && taco < fwd);
  l.ep = 1;
  CU_ASSERT_EQUAL_FATAL(sim_search_make_plan(&base, &l, 256, 16, &p, &e), 0);
  CU_ASSERT_EQUAL(sim_search_moe_alltoall_s(&p, &bwd), 0);
  CU_ASSERT_EQUAL(bwd, 0);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("moe.search", NULL, NULL);
  CU_add_test(s, "EP in the enumeration and the plans", test_enumeration);
  CU_add_test(s, "the estimate's expert all-to-alls", test_estimate_alltoall);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

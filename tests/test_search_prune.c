/* test_search_prune.c — the search's bound and pruning (sim/search_bound.c,
 * sim/search_rounds.c): on small searches the bound is never below a
 * simulated figure, and the pruned search prints the rows of the exhaustive
 * one (same layouts, codecs, figures and speedups, in the same order). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "search.h"

/* The printed rows: simulated, not samples, best first (r->cands is sorted). */
static int printed(const sim_search_result *r, int top, const sim_search_candidate **rows) {
  int m = 0;
  for (int i = 0; i < r->n && m < top; i++)
    if (r->cands[i].simulated && !r->cands[i].sample) rows[m++] = &r->cands[i];
  return m;
}

/* The best simulated row of FP8 recipe f, or NULL. */
static const sim_search_candidate *best_of(const sim_search_result *r, int f) {
  for (int i = 0; i < r->n; i++)
    if (r->cands[i].simulated && !r->cands[i].sample && r->cands[i].layout.fp8 == f) return &r->cands[i];
  return NULL;
}

/* fp8: --fp8's recipes (0: BF16); with several, each recipe's best row is the exhaustive search's too */
static void check_case(const char *model, const char *cluster, int gpus, int top, bool expect_pruned, unsigned fp8) {
  sim_search_options o = {.model = model, .cluster = cluster, .gpus = gpus, .global_batch = 16,
                          .codecs = (1u << SIM_SEARCH_CODEC_COUNT) - 1, .top = top, .simulate = 8, .jobs = 2,
                          .max_micro = 4, .bounds_all = true, .fp8_recipes = fp8};
  sim_search_result ex, pr;
  ts_err e = {0};
  o.exhaustive = true;
  CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &ex, &e), 0);
  o.exhaustive = false;
  CU_ASSERT_EQUAL_FATAL(sim_search_run(&o, &pr, &e), 0);
  CU_ASSERT_EQUAL(ex.candidates, pr.candidates);
  CU_ASSERT_EQUAL(ex.simulations, ex.candidates);
  CU_ASSERT_EQUAL(ex.pruned, 0);
  CU_ASSERT_EQUAL(pr.simulations + pr.pruned, pr.candidates);
  if (expect_pruned) CU_ASSERT_TRUE(pr.pruned > 0);
  /* the bound holds on every simulated candidate of the exhaustive run */
  int bounded = 0;
  for (int i = 0; i < ex.n; i++)
    if (ex.cands[i].simulated && ex.cands[i].bound_tokens_per_s > 0) {
      bounded++;
      CU_ASSERT_TRUE(ex.cands[i].bound_tokens_per_s >= ex.cands[i].sim_tokens_per_s);
    }
  CU_ASSERT_EQUAL(bounded, ex.n);
  const sim_search_candidate *a[64], *b[64];
  int na = printed(&ex, top, a), nb = printed(&pr, top, b);
  CU_ASSERT_EQUAL(na, nb);
  CU_ASSERT_EQUAL(na, top < ex.n ? top : ex.n);
  for (int i = 0; i < na && i < nb; i++) {
    CU_ASSERT_TRUE(sim_search_same_layout(&a[i]->layout, &b[i]->layout));
    CU_ASSERT_EQUAL(a[i]->codec, b[i]->codec);
    CU_ASSERT_DOUBLE_EQUAL(a[i]->sim_tokens_per_s, b[i]->sim_tokens_per_s, 0);
    CU_ASSERT_DOUBLE_EQUAL(a[i]->speedup, b[i]->speedup, 0);
    CU_ASSERT_TRUE(b[i]->speedup > 0); /* the uncompressed run of a printed layout is never dropped */
  }
  for (int f = 0; f < SIM_SEARCH_FP8_RECIPES; f++) {
    if (!(ex.fp8_recipes & (1u << f))) continue;
    const sim_search_candidate *x = best_of(&ex, f), *y = best_of(&pr, f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(y);
    CU_ASSERT_TRUE(sim_search_same_layout(&x->layout, &y->layout));
    CU_ASSERT_EQUAL(x->codec, y->codec);
    CU_ASSERT_DOUBLE_EQUAL(x->sim_tokens_per_s, y->sim_tokens_per_s, 0);
  }
  printf("\n  %s on %s, fp8 %#x: %d candidates, top %d: exhaustive %d simulations, pruned %d (%d avoided)", model,
         cluster, ex.fp8_recipes, ex.candidates, top, ex.simulations, pr.simulations, pr.pruned);
  sim_search_result_free(&ex);
  sim_search_result_free(&pr);
}

/* Two H200 on sockets: tensor parallelism pays its traffic in full, the bound sees it. */
static void test_prune_socket(void) { check_case("gpt3-1.3b", "h200x2-socket", 0, 2, true, 0); }
/* The same under --fp8 none,tensorwise: the FP8 rows lead the printed rows, BF16's best is still found */
static void test_prune_fp8(void) {
  check_case("gpt3-1.3b", "h200x2-socket", 0, 2, true, (1u << PLAN_FP8_OFF) | (1u << PLAN_FP8_TENSORWISE));
}
/* Eight on NVSwitch: candidates within a few per cent, the clock's head room keeps most. */
static void test_prune_nvswitch(void) { check_case("gpt3-1.3b", "h200x8-nvswitch", 0, 3, false, 0); }
/* Two PCIe nodes: cross-node DP and TP over PCIe. */
static void test_prune_pcie(void) { check_case("gpt3-1.3b", "pcie-8gpu-2x100gbe", 16, 1, false, 0); }

int main(void) {
  CU_initialize_registry();
  CU_pSuite s = CU_add_suite("search_prune", NULL, NULL);
  CU_add_test(s, "pruned = exhaustive, socket", test_prune_socket);
  CU_add_test(s, "pruned = exhaustive, nvswitch", test_prune_nvswitch);
  CU_add_test(s, "pruned = exhaustive, pcie", test_prune_pcie);
  CU_add_test(s, "pruned = exhaustive, socket, --fp8 none,tensorwise", test_prune_fp8);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

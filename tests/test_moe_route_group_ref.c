/* test_moe_route_group_ref.c — the plain-C references of DeepSeek-V3's routing
 * kernels (kernels/moe_route_group_ref.c, FP32 as the kernels compute) against
 * the float64 reference's routing (runtime/ops/exec_ref_moe.c, itself checked
 * by finite differences in test_exec_ref.c): the same choice, weights to FP32
 * rounding, the backward to BF16 rounding; the bias update by hand. The CUDA
 * kernels are checked against these references bit for bit by `tacorun
 * execute --check-moe` on a GPU. */
#include <CUnit/Basic.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec_ref.h"
#include "moe_route_group.h"

static float bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static unsigned long long next(unsigned long long *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}
static float uniform(unsigned long long *x, float lo, float hi) {
  return lo + (hi - lo) * (float)(next(x) >> 40) / (float)(1ull << 24);
}

/* t tokens of random logits and a random bias routed both ways; the worst
 * weight and dlogit differences (relative to the largest magnitude); same: the
 * choices agree but where two experts' scores are within FP32's resolution
 * (ties, counted; those tokens' weights are not compared). */
static void compare(int t, int E, int k, moe_group_route g, int biased, double *wdiff, double *ddiff, int *same,
                    int *ties) {
  exec_ref_config c = {.experts = E, .top_k = k, .router_sigmoid = 1, .router_groups = g.groups,
                       .router_group_topk = g.group_topk, .router_scale = g.scale};
  float *x = malloc((size_t)t * E * 4), *s = malloc((size_t)t * E * 4), *w = malloc((size_t)t * k * 4),
        *sel = malloc((size_t)t * k * 4), *dw = malloc((size_t)t * k * 4), bias[MOE_ROUTE_MAX_E];
  int32_t *idx = malloc((size_t)t * k * 4);
  uint16_t *dl = malloc((size_t)t * E * 2);
  CU_ASSERT_FATAL(x && s && w && sel && dw && idx && dl);
  unsigned long long r = 0x853c49e6748fea9bull ^ (unsigned long long)(E * 131 + k);
  for (size_t i = 0; i < (size_t)t * E; i++) x[i] = uniform(&r, -4.0f, 4.0f);
  for (size_t i = 0; i < (size_t)t * k; i++) dw[i] = uniform(&r, -3.0f, 3.0f);
  for (int i = 0; i < E; i++) bias[i] = biased ? uniform(&r, -0.05f, 0.05f) : 0.0f;
  moe_sigmoid_ref(x, (long long)t * E, s);
  moe_topk_group_ref(s, biased ? bias : NULL, t, E, k, &g, idx, w, sel);
  moe_topk_group_bwd_ref(idx, sel, dw, t, E, k, g.scale, dl);
  *wdiff = *ddiff = 0, *same = 1, *ties = 0;
  for (int q = 0; q < t; q++) {
    double lg[MOE_ROUTE_MAX_E], bd[MOE_ROUTE_MAX_E], wd[MOE_ROUTE_MAX_K], sd[MOE_ROUTE_MAX_K], dd[MOE_ROUTE_MAX_K],
        dld[MOE_ROUTE_MAX_E], big = 0;
    int id[MOE_ROUTE_MAX_K];
    for (int e = 0; e < E; e++) lg[e] = x[(size_t)q * E + e], bd[e] = bias[e];
    for (int j = 0; j < k; j++) dd[j] = dw[(size_t)q * k + j];
    exec_ref_moe_route(&c, lg, bd, id, wd, sd);
    int tie = 0; /* a different choice is allowed only between scores FP32 cannot tell apart */
    for (int j = 0; j < k; j++) {
      const int a = id[j], b = idx[(size_t)q * k + j];
      if (a == b) continue;
      const double va = 1 / (1 + exp(-lg[a])) + bd[a], vb = 1 / (1 + exp(-lg[b])) + bd[b];
      tie = 1, *same &= fabs(va - vb) <= 4 * FLT_EPSILON;
    }
    *ties += tie;
    if (tie) continue;
    for (int j = 0; j < k; j++) {
      double d = fabs(wd[j] - w[(size_t)q * k + j]) / g.scale;
      *wdiff = d > *wdiff ? d : *wdiff;
    }
    exec_ref_moe_route_bwd(&c, id, wd, sd, dd, dld);
    for (int e = 0; e < E; e++) big = fabs(dld[e]) > big ? fabs(dld[e]) : big;
    for (int e = 0; e < E; e++) {
      double d = fabs(dld[e] - bf16_value(dl[(size_t)q * E + e])) / (big > 0 ? big : 1);
      *ddiff = d > *ddiff ? d : *ddiff;
    }
  }
  free(x), free(s), free(w), free(sel), free(dw), free(idx), free(dl);
}

static void test_against_float64(void) {
  static const struct {
    int t, E, k, groups, kept, biased;
    float scale;
  } cases[] = {
      {512, 256, 8, 8, 4, 1, 2.5f}, /* DeepSeek-V3's shape */
      {512, 16, 4, 4, 2, 1, 2.5f},  /* the executor check's DeepSeek-like model */
      {512, 64, 6, 0, 0, 0, 1.0f},  /* no groups, no bias, no scaling */
      {512, 8, 1, 0, 0, 1, 2.5f},   /* top 1: the scaled score itself */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    moe_group_route g = {.groups = cases[i].groups, .group_topk = cases[i].kept, .scale = cases[i].scale};
    CU_ASSERT_EQUAL_FATAL(moe_group_route_valid(cases[i].E, cases[i].k, &g), 0);
    double wdiff, ddiff;
    int same, ties;
    compare(cases[i].t, cases[i].E, cases[i].k, g, cases[i].biased, &wdiff, &ddiff, &same, &ties);
    printf("\n    %d experts top %d, %d groups (%d kept), scaling %g, %s: same choice %s (%d FP32 ties of %d tokens), "
           "weights %.2e, dlogits %.2e", cases[i].E, cases[i].k, cases[i].groups, cases[i].kept, cases[i].scale,
           cases[i].biased ? "bias" : "no bias", same ? "yes" : "NO", ties, cases[i].t, wdiff, ddiff);
    CU_ASSERT(same);
    CU_ASSERT(ties <= cases[i].t / 100);
    CU_ASSERT(wdiff <= 1e-6); /* FP32 weights (in units of the scale) */
    CU_ASSERT(ddiff <= 1e-2); /* BF16 dlogits: 2^-8 relative each, against the token's largest */
  }
}

/* Routings the kernels refuse: groups not dividing E, more kept than groups,
 * a group's top_k / kept larger than a group, kept groups smaller than top_k. */
static void test_valid(void) {
  const moe_group_route ok = {.groups = 8, .group_topk = 4, .scale = 2.5f};
  CU_ASSERT_EQUAL(moe_group_route_valid(256, 8, &ok), 0);
  const moe_group_route bad[] = {{3, 1, 1.0f}, {8, 9, 1.0f}, {8, 0, 1.0f}, {64, 1, 1.0f}, {8, 4, 0.0f}, {33, 1, 1.0f}};
  const int E[] = {256, 256, 256, 64, 256, 264};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CU_ASSERT_EQUAL(moe_group_route_valid(E[i], 8, &bad[i]), -1);
}

/* The bias update by hand: loads {5, 1, 3, 3} (mean 3) move the bias by -r, +r, 0, 0; a row of equal loads not at
 * all; loads {1, 2} (mean 1.5, not an integer) by +r, -r. */
static void test_bias_update_by_hand(void) {
  const int32_t load[3 * 4] = {5, 1, 3, 3, 4, 4, 4, 4, 1, 2, 0, 0};
  float bias[3 * 4] = {0, 0, 0, 0.5f, 0.25f, 0.25f, 0.25f, 0.25f, 0, 0, 0, 0};
  moe_bias_update_ref(load, bias, 2, 4, 1e-3f);
  CU_ASSERT_EQUAL(bias[0], -1e-3f);
  CU_ASSERT_EQUAL(bias[1], 1e-3f);
  CU_ASSERT_EQUAL(bias[2], 0.0f);
  CU_ASSERT_EQUAL(bias[3], 0.5f);
  for (int i = 4; i < 8; i++) CU_ASSERT_EQUAL(bias[i], 0.25f);
  float b2[2] = {0, 0};
  moe_bias_update_ref(load + 8, b2, 1, 2, 1e-3f);
  CU_ASSERT_EQUAL(b2[0], 1e-3f);
  CU_ASSERT_EQUAL(b2[1], -1e-3f);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("moe_route_group_ref", NULL, NULL);
  CU_add_test(s, "C references vs the float64 routing", test_against_float64);
  CU_add_test(s, "routings the kernels take", test_valid);
  CU_add_test(s, "bias update by hand", test_bias_update_by_hand);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

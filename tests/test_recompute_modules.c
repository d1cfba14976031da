/* layout.recompute_modules (plan/plan_recompute.c): the loader's rules, the
 * activation bytes each module does not keep (by hand, moe-tiny), and what
 * each reruns before the backward (rank 0's recompute-phase ops). */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "test_check.h"

/* dp 8, tp 1, pp 1, seq 256, micro 1, 2 micro-batches; layout: the rest of the layout object */
static int plan_text(const char *model, const char *layout, plan *p, ts_err *e) {
  char text[2048];
  snprintf(text, sizeof text,
           "{\"schema\":1,\"model\":\"%s\",\"cluster\":\"h200-1024-rail\",\"layout\":{\"dp\":8,\"tp\":1,\"pp\":1%s},"
           "\"batch\":{\"micro\":1,\"global\":16,\"seq\":256},\"schedule\":\"1f1b\"}",
           model, layout);
  return plan_from_json_text(text, strlen(text), "p.json", NULL, NULL, p, e);
}

static void test_rules(void) {
  struct {
    const char *model, *layout, *says;
  } bad[] = {
      {"moe-tiny", ",\"ep\":4,\"recompute\":\"none\",\"recompute_modules\":[\"moe\"]", "selective"},
      {"moe-tiny", ",\"ep\":4,\"recompute\":\"full\",\"recompute_modules\":[\"moe\"]", "selective"},
      {"moe-tiny", ",\"ep\":4,\"recompute\":\"selective\",\"recompute_modules\":[\"mlp\"]", "\"mlp\": not modelled"},
      {"moe-tiny", ",\"ep\":4,\"recompute\":\"selective\",\"recompute_modules\":[]", "non-empty array"},
      {"moe-tiny", ",\"ep\":4,\"recompute\":\"selective\",\"recompute_modules\":\"moe\"", "non-empty array"},
      {"moe-tiny", ",\"ep\":4,\"recompute\":\"selective\",\"recompute_modules\":[\"moe\",\"moe\"]", "twice"},
      {"moe-tiny", ",\"ep\":4,\"recompute\":\"selective\",\"recompute_modules\":[1]", "not a string"},
      {"gpt-tiny", ",\"recompute\":\"selective\",\"recompute_modules\":[\"moe_act\"]", "no experts"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    plan p;
    ts_err e;
    CU_ASSERT_EQUAL(plan_text(bad[i].model, bad[i].layout, &p, &e), -1);
    ASSERT_MSG(e, "p.json");
    ASSERT_MSG(e, "layout.recompute_modules");
    ASSERT_MSG(e, bad[i].says);
  }
  plan p;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(plan_text("moe-tiny", ",\"ep\":4,\"recompute\":\"selective\"", &p, &e), 0);
  CU_ASSERT_EQUAL(p.recompute_modules, PLAN_RECOMPUTE_CORE_ATTN); /* selective as before the field */
  CU_ASSERT_EQUAL_FATAL(plan_text("moe-tiny", ",\"ep\":4", &p, &e), 0);
  CU_ASSERT_EQUAL(p.recompute_modules, 0u);
  CU_ASSERT_EQUAL_FATAL(
      plan_text("moe-tiny", ",\"ep\":4,\"recompute\":\"selective\",\"recompute_modules\":[\"layernorm\",\"moe\"]", &p, &e),
      0);
  CU_ASSERT_EQUAL(p.recompute_modules, PLAN_RECOMPUTE_LAYERNORM | PLAN_RECOMPUTE_MOE);
  CU_ASSERT(!plan_recomputes(&p, PLAN_RECOMPUTE_CORE_ATTN));
}

static double activations(const char *layout) {
  plan p;
  ts_err e;
  if (plan_text("moe-tiny", layout, &p, &e)) {
    printf("\n  %s\n", e.msg);
    return -1;
  }
  plan_memory m;
  if (plan_memory_of_stage(&p, 0, &m)) return -1;
  return m.activations / plan_inflight_peak(&p, 0);
}

/* moe-tiny at tp 1, seq 256, micro 1: t = 256 tokens, h 256, top 2 of 8
 * experts of 128 (SwiGLU), 4 layers (the count applies the MoE layer's
 * tensors to each). Per layer, by hand: layernorm keeps neither norm output,
 * 2 x 2h x t = 262,144 B; moe_act drops FC2's input, rows 512 x 2 x 128 =
 * 131,072 B; moe keeps none of the experts' tensors, 512 x (2 x 256 + 2 x
 * 128 x 2 + 2 x 128) + t x 4 x 8 = 663,552 B, and the one block being
 * recomputed holds them again meanwhile (once). */
static void test_memory_by_hand(void) {
  const char *sel = ",\"ep\":4,\"recompute\":\"selective\",\"recompute_modules\":";
  char l_attn[256], l_ln[256], l_act[256], l_moe[256], l_ln_only[256];
  snprintf(l_attn, sizeof l_attn, "%s[\"core_attn\"]", sel);
  snprintf(l_ln, sizeof l_ln, "%s[\"core_attn\",\"layernorm\"]", sel);
  snprintf(l_act, sizeof l_act, "%s[\"core_attn\",\"moe_act\"]", sel);
  snprintf(l_moe, sizeof l_moe, "%s[\"core_attn\",\"moe\",\"moe_act\"]", sel);
  snprintf(l_ln_only, sizeof l_ln_only, "%s[\"layernorm\"]", sel);
  double attn = activations(l_attn), none = activations(",\"ep\":4");
  CU_ASSERT_FATAL(attn > 0 && none > 0);
  CU_ASSERT_DOUBLE_EQUAL(attn - activations(l_ln), 4 * 262144.0, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(attn - activations(l_act), 4 * 131072.0, 0.5);
  plan p;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(plan_text("moe-tiny", l_moe, &p, &e), 0);
  double inflight = plan_inflight_peak(&p, 0);
  /* moe_act inside moe is not counted twice; the transient block is one layer's, not per micro-batch */
  CU_ASSERT_DOUBLE_EQUAL((attn - activations(l_moe)) * inflight, 4 * 663552.0 * inflight - 663552.0, 0.5);
  /* without core_attn the attention keeps what none keeps */
  CU_ASSERT_DOUBLE_EQUAL(none - activations(l_ln_only), 4 * 262144.0, 0.5);
}

/* Rank 0's recompute-phase ops, per layer and micro-batch (2 micro-batches,
 * 4 layers of which 3 MoE), and that they run before their backward. */
static void test_program(void) {
  struct {
    const char *modules;
    int computes, alltoalls;
  } cases[] = {
      {"[\"core_attn\"]", 4 * 2, 0},
      {"[\"layernorm\"]", 2 * 4 * 2, 0},
      {"[\"moe_act\"]", 3 * 2, 0},
      {"[\"moe\"]", -1, 2 * 3 * 2}, /* computes: the MoE block's ops, counted below */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char layout[256];
    snprintf(layout, sizeof layout, ",\"ep\":4,\"recompute\":\"selective\",\"recompute_modules\":%s",
             cases[c].modules);
    plan p;
    ts_err e;
    CU_ASSERT_EQUAL_FATAL(plan_text("moe-tiny", layout, &p, &e), 0);
    model_shard s = {.tp = 1, .micro_batch = 1, .seq = 256, .ep = 4, .etp = 1};
    model_op ops[MODEL_MAX_LAYER_OPS];
    int n = model_layer_ops(&p.model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
    CU_ASSERT_FATAL(n > 0);
    int moe_ops = 0;
    for (int i = 0; i < n; i++) moe_ops += ops[i].layers_kind == MODEL_LAYERS_MOE;
    plan_program g;
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
    int computes = 0, a2a = 0, bwd_before = 0;
    for (int i = 0; i < g.n; i++) {
      const plan_op *o = &g.ops[i];
      if (o->phase != PLAN_PHASE_RECOMPUTE) continue;
      if (o->kind == PLAN_OP_COLLECTIVE) {
        a2a += o->coll == PLAN_COLL_ALLTOALL;
        continue;
      }
      computes++;
      if (o->model_op >= 0) {
        const model_op *mo = &ops[o->model_op];
        if (c == 0) CU_ASSERT_EQUAL(mo->kind, MODEL_OP_ATTENTION);
        if (c == 1) CU_ASSERT_EQUAL(mo->kind, MODEL_OP_NORM);
        if (c == 2) CU_ASSERT(mo->parallel == MODEL_PAR_EXPERT && mo->kind != MODEL_OP_GEMM);
        if (c == 3) CU_ASSERT_EQUAL(mo->layers_kind, MODEL_LAYERS_MOE);
      }
      /* the same op's backward of the same layer and micro-batch comes later */
      for (int j = 0; j < i; j++)
        if (g.ops[j].phase == PLAN_PHASE_BWD && g.ops[j].model_op == o->model_op && g.ops[j].layer == o->layer &&
            g.ops[j].micro == o->micro && o->model_op >= 0)
          bwd_before++;
    }
    int want = cases[c].computes >= 0 ? cases[c].computes : (moe_ops + 1) * 3 * 2; /* + the imbalance wait */
    if (computes != want) printf("\n  %s: %d recompute ops, want %d\n", cases[c].modules, computes, want);
    CU_ASSERT_EQUAL(computes, want);
    CU_ASSERT_EQUAL(a2a, cases[c].alltoalls);
    CU_ASSERT_EQUAL(bwd_before, 0);
    plan_program_free(&g);
  }
}

/* layout.recompute_num_layers (Megatron-LM's block method): gpt-tiny with 4
 * layers (layers_override), dp 8, seq 256, micro 1, 2 micro-batches; pp as given. */
static int plan_num_layers(int pp, const char *layout, plan *p, ts_err *e) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"schema\":1,\"model\":\"gpt-tiny\",\"cluster\":\"h200-1024-rail\",\"layers_override\":4,"
           "\"layout\":{\"dp\":8,\"tp\":1,\"pp\":%d%s},\"batch\":{\"micro\":1,\"global\":16,\"seq\":256},"
           "\"schedule\":\"1f1b\"}",
           pp, layout);
  return plan_from_json_text(text, strlen(text), "p.json", NULL, NULL, p, e);
}

static void test_num_layers_rules(void) {
  const char *bad[] = {",\"recompute\":\"selective\",\"recompute_num_layers\":1",
                       ",\"recompute_num_layers\":1", ",\"recompute\":\"full\",\"recompute_num_layers\":0",
                       ",\"recompute\":\"full\",\"recompute_num_layers\":\"2\""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    plan p;
    ts_err e;
    CU_ASSERT_EQUAL(plan_num_layers(1, bad[i], &p, &e), -1);
    ASSERT_MSG(e, "p.json");
    ASSERT_MSG(e, "layout.recompute_num_layers");
  }
  plan p;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(plan_num_layers(1, ",\"recompute\":\"full\"", &p, &e), 0);
  CU_ASSERT_EQUAL(p.recompute_num_layers, 0);
  CU_ASSERT(plan_layer_full_recompute(&p, 3));
  CU_ASSERT_EQUAL_FATAL(plan_num_layers(1, ",\"recompute\":\"full\",\"recompute_num_layers\":2", &p, &e), 0);
  CU_ASSERT_EQUAL(p.recompute_num_layers, 2);
  CU_ASSERT(plan_layer_full_recompute(&p, 1));
  CU_ASSERT(!plan_layer_full_recompute(&p, 2));
}

/* The layers whose forward reruns, per stage: at pp 1 the first N of the 4;
 * at pp 2 the first N of each stage's 2 (layers 0 and 2 for N = 1). Every
 * recomputed layer reruns all of its forward ops, once per micro-batch. */
static void test_num_layers_program(void) {
  struct {
    int pp, n, stage;
    unsigned layers; /* bit l: layer l reruns */
  } cases[] = {{1, 0, 0, 0xf}, {1, 1, 0, 0x1}, {1, 3, 0, 0x7}, {1, 4, 0, 0xf}, {1, 9, 0, 0xf},
               {2, 1, 0, 0x1}, {2, 1, 1, 0x4}, {2, 2, 1, 0xc}};
  int per_layer = -1;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char layout[128];
    if (cases[c].n)
      snprintf(layout, sizeof layout, ",\"recompute\":\"full\",\"recompute_num_layers\":%d", cases[c].n);
    else
      snprintf(layout, sizeof layout, ",\"recompute\":\"full\"");
    plan p;
    ts_err e;
    CU_ASSERT_EQUAL_FATAL(plan_num_layers(cases[c].pp, layout, &p, &e), 0);
    plan_program g;
    const int rank = cases[c].stage * p.dp; /* tp-dp-pp: the first rank of the stage */
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, rank, &g, &e), 0);
    int count[4] = {0}, fwd0 = 0;
    for (int i = 0; i < g.n; i++) {
      const plan_op *o = &g.ops[i];
      if (o->kind != PLAN_OP_COMPUTE || o->layer < 0 || o->layer > 3 || o->micro != 0) continue;
      if (o->phase == PLAN_PHASE_RECOMPUTE) count[o->layer]++;
      if (o->phase == PLAN_PHASE_FWD && o->layer == (cases[c].stage == 0 ? 0 : 2)) fwd0++;
    }
    if (per_layer < 0) per_layer = fwd0;
    CU_ASSERT(fwd0 > 0);
    for (int l = 0; l < 4; l++) {
      const int want = (cases[c].layers >> l) & 1 ? fwd0 : 0; /* the layer's forward ops, rerun */
      if (count[l] != want) printf("\n  pp %d n %d stage %d layer %d: %d recompute ops, want %d\n", cases[c].pp,
                                   cases[c].n, cases[c].stage, l, count[l], want);
      CU_ASSERT_EQUAL(count[l], want);
    }
    plan_program_free(&g);
  }
}

/* Memory at pp 1: a recomputed layer holds its input (f bytes), a plain one
 * everything (n), and the one being recomputed holds n again meanwhile; so
 * A(N) = N f + (4 - N) n + n + X (X: logits and the rest, the same for all N),
 * A(full) = 4 f + n + X and A(none) = 4 n + X. Hence A(N+1) - A(N) = f - n for
 * every N < 4, A(N >= 4) = A(full), and n = 4 (A(1) - A(2)) - (A(none) - A(full))
 * is one layer's activations: at seq 256, micro 1, h 256 and 4 heads under the
 * fused attention (the default), the model's selective count + 4 B per head per
 * token (plan_memory.c). */
static double act_num_layers(const char *layout) {
  plan p;
  ts_err e;
  if (plan_num_layers(1, layout, &p, &e)) return -1;
  plan_memory m;
  if (plan_memory_of_stage(&p, 0, &m)) return -1;
  return m.activations;
}

static void test_num_layers_memory(void) {
  char l[128];
  double a[6];
  for (int n = 1; n <= 5; n++) {
    snprintf(l, sizeof l, ",\"recompute\":\"full\",\"recompute_num_layers\":%d", n);
    a[n] = act_num_layers(l);
    CU_ASSERT_FATAL(a[n] > 0);
  }
  const double full = act_num_layers(",\"recompute\":\"full\""), none = act_num_layers(",\"recompute\":\"none\"");
  CU_ASSERT_DOUBLE_EQUAL(a[2] - a[1], a[3] - a[2], 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(a[3] - a[2], a[4] - a[3], 1e-6);
  CU_ASSERT(a[2] < a[1]); /* each further recomputed layer holds less */
  CU_ASSERT_DOUBLE_EQUAL(a[4], full, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(a[5], full, 1e-6);
  plan p;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(plan_num_layers(1, "", &p, &e), 0);
  model_shard s = {.tp = 1, .micro_batch = 1, .seq = 256};
  const double n = model_activation_bytes_per_layer(&p.model, &s, MODEL_RECOMPUTE_SELECTIVE) + 4.0 * 256 * 4;
  CU_ASSERT_DOUBLE_EQUAL(4 * (a[1] - a[2]) - (none - full), n, 1e-6);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("plan.recompute_modules", NULL, NULL);
  CU_add_test(s, "loader rules and defaults", test_rules);
  CU_add_test(s, "activation bytes each module drops, by hand", test_memory_by_hand);
  CU_add_test(s, "what each module reruns before its backward", test_program);
  CU_add_test(s, "recompute_num_layers: loader rules", test_num_layers_rules);
  CU_add_test(s, "recompute_num_layers: the first N layers of each chunk rerun", test_num_layers_program);
  CU_add_test(s, "recompute_num_layers: activation bytes, linear in N", test_num_layers_memory);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

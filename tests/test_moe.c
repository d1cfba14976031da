/* test_moe.c — mixture of experts: the zoo's parameter counts against the
 * published totals and active parameters, FLOPs per token by hand, the
 * loader's rules, the expert groups of a plan, the token all-to-all bytes
 * per rank, the expert gradients' reduction and the memory per EP shard. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "test_check.h"

static model_config load(const char *name) {
  model_config m;
  ts_err e;
  int rc = model_load(name, NULL, &m, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return m;
}

static double rel(double a, double b) { return fabs(a - b) / fabs(b); }

/* Published totals and active parameters (cited in each model file's "source"). */
static const struct {
  const char *name;
  double total, active; /* billions */
  double active_digit;  /* last digit of the published active figure (0.1 or 1) */
  int active_within_1pct;
} published[] = {
    {"mixtral-8x7b", 46.7, 12.9, 0.1, 1},   {"mixtral-8x22b", 141, 39, 1, 1},
    {"qwen3-235b-a22b", 235, 22, 1, 1},     {"qwen3-30b-a3b", 30.5, 3.3, 0.1, 0},
    {"deepseek-v3", 671, 37, 1, 0},
};

static void test_published_counts(void) {
  printf("\n");
  for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
    model_config m = load(published[i].name);
    double t = model_params_total(&m) / 1e9, a = model_params_active(&m) / 1e9;
    printf("    %-16s total %8.3fB (published %6.1fB, %+.2f%%)  active %7.3fB (published %5.1fB, %+.2f%%)\n",
           m.name, t, published[i].total, 100 * (t / published[i].total - 1), a, published[i].active,
           100 * (a / published[i].active - 1));
    CU_ASSERT(rel(t, published[i].total) < 0.01);
    if (published[i].active_within_1pct) {
      CU_ASSERT(rel(a, published[i].active) < 0.01);
    } else {
      /* Qwen3-30B-A3B's "3.3B" and DeepSeek-V3's "37B" are our counts (3.353B,
       * 37.55B) cut to the published digits, 1.5-1.6 % below them. */
      CU_ASSERT(a >= published[i].active && a < published[i].active + published[i].active_digit);
    }
  }
  /* Qwen3-30B-A3B's card also gives 29.9B non-embedding parameters. */
  model_config q = load("qwen3-30b-a3b");
  CU_ASSERT(rel((model_params_total(&q) - model_params_embedding(&q)) / 1e9, 29.9) < 0.01);
}

/* Mixtral 8x7B by hand: attention q, k, v, o; 8 experts of 3 h x f; the router; 2 norms. */
static void test_mixtral_by_hand(void) {
  model_config m = load("mixtral-8x7b");
  double h = 4096, kv = 8 * 128, f = 14336;
  double attn = h * h + 2 * h * kv + h * h, expert = 3 * h * f, router = 8 * h, norms = 2 * h;
  double layer = attn + 8 * expert + router + norms;
  CU_ASSERT_DOUBLE_EQUAL(model_params_per_layer(&m), layer, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(model_params_total(&m), 32 * layer + 2 * 32000 * h + h, 1.0);
  CU_ASSERT_DOUBLE_EQUAL(model_params_active(&m), 32 * (attn + 2 * expert + router + norms) + 2 * 32000 * h + h, 1.0);
  /* FLOPs per token, forward: 2 x the GEMM weights a token meets + attention (4 s x heads x head_dim,
   * the full square) + the logits. */
  int s = 4096;
  double per_token = 32 * (2 * (attn + 2 * expert + router) + 4.0 * s * h) + 2 * h * 32000;
  CU_ASSERT(rel(model_flops_per_token_fwd(&m, s), per_token) < 1e-12);
  CU_ASSERT(rel(model_flops_per_iteration(&m, 8, s, false), 3 * 8 * s * per_token) < 1e-12);
}

/* DeepSeek-V3: MLA by its GEMMs, 3 dense layers, 1 shared expert. */
static void test_deepseek_by_hand(void) {
  model_config m = load("deepseek-v3");
  double h = 7168, H = 128;
  double mla = h * 1536 + 1536 + 1536 * H * 192 + h * (512 + 64) + 512 + 512 * H * 256 + H * 128 * h;
  double expert = 3 * h * 2048, dense_mlp = 3 * h * 18432, norms = 2 * h;
  double moe_layer = mla + 257 * expert + 256 * h + norms, dense_layer = mla + dense_mlp + norms;
  double total = 3 * dense_layer + 58 * moe_layer + 2 * 129280 * h + h;
  CU_ASSERT(rel(model_params_total(&m), total) < 1e-12);
  double active = 3 * dense_layer + 58 * (mla + 9 * expert + 256 * h + norms) + 2 * 129280 * h + h;
  CU_ASSERT(rel(model_params_active(&m), active) < 1e-12);
  CU_ASSERT_EQUAL(model_head_dim(&m), 192);
}

/* The published report's own count: Megatron-MoE-ModelZoo's Qwen3 H100 table
 * (experiments/published/moe/published.csv) prints 167 TFLOP/s per GPU for
 * Qwen3-235B-A22B at 29.0 s per step, 256 GPUs, global batch 2048, seq 4096,
 * TP 4: Megatron-LM's count of that step over 29.0 s x 256 must give it back. */
static void test_megatron_count_matches_published(void) {
  model_config m = load("qwen3-235b-a22b");
  double tflops = model_flops_megatron_lm(&m, 2048, 4096, 4) / (29.0 * 256) / 1e12;
  printf("\n    Qwen3-235B-A22B: %.2f TFLOP/s per GPU by Megatron-LM's count (published 167)\n", tflops);
  CU_ASSERT(rel(tflops, 167.0) < 0.005);
  /* The cross-node EP row of the same table prints both: 19.7 s and 245 TFLOP/s at TP 2. */
  double cross = model_flops_megatron_lm(&m, 2048, 4096, 2) / (19.7 * 256) / 1e12;
  printf("    Qwen3-235B-A22B TP 2 EP 32: %.2f TFLOP/s per GPU (published 245)\n", cross);
  CU_ASSERT(rel(cross, 245.0) < 0.01);
  /* Mixtral 8x7B by hand: 2 x (attention weights + top 2 experts) + causal attention + logits, x 3 */
  model_config x = load("mixtral-8x7b");
  double h = 4096, s = 4096, attn = 2 * h * h + 2 * h * 1024, experts = 2 * 3 * h * 14336;
  double per_token = 32 * (2 * (attn + experts) + 2 * s * 32 * 128) + 2 * h * 32000;
  CU_ASSERT(rel(model_flops_megatron_lm(&x, 8, 4096, 1), 3 * 8 * s * per_token) < 1e-12);
}

static void test_loader_rules(void) {
  const char *head = "{\"schema\":1,\"name\":\"x\",\"family\":\"x\",\"layers\":4,\"hidden\":256,\"heads\":4,"
                     "\"kv_heads\":4,\"ffn_hidden\":512,\"activation\":\"swiglu\",\"norm\":\"rmsnorm\",\"vocab\":100,"
                     "\"tied_embeddings\":false,\"max_seq\":64,\"position\":\"rope\"";
  struct {
    const char *tail, *field;
  } bad[] = {
      {",\"top_k\":2}", "top_k"},
      {",\"experts\":8}", "top_k"},
      {",\"experts\":8,\"top_k\":9,\"expert_ffn_hidden\":64}", "top_k"},
      {",\"experts\":8,\"top_k\":2}", "expert_ffn_hidden"},
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"dense_layers\":4}", "dense_layers"},
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router\":\"argmax\"}", "router"},
      {",\"q_lora_rank\":64}", "q_lora_rank"},
      {",\"attention\":\"mla\",\"q_lora_rank\":64}", "kv_lora_rank"},
      {",\"attention\":\"mla\",\"q_lora_rank\":64,\"kv_lora_rank\":32,\"qk_nope_head_dim\":32,\"qk_rope_head_dim\":"
       "15,\"v_head_dim\":32}", "qk_rope_head_dim"},
      {",\"experts\":-1}", "experts"},
      /* DeepSeek-V3's router fields (each refusal names its field) */
      {",\"router_num_groups\":2}", "router_num_groups"}, /* without experts */
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router_num_groups\":3,\"router_group_topk\":1}",
       "router_num_groups"}, /* 3 does not divide 8 */
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router_num_groups\":16,\"router_group_topk\":1}",
       "router_num_groups"}, /* more groups than experts */
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router_num_groups\":4}", "router_group_topk"},
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router_group_topk\":2}", "router_group_topk"},
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router_num_groups\":4,\"router_group_topk\":3}",
       "router_group_topk"}, /* 3 > top_k 2 */
      {",\"experts\":8,\"top_k\":4,\"expert_ffn_hidden\":64,\"router_num_groups\":4,\"router_group_topk\":1}",
       "router_group_topk"}, /* one group of 2 cannot hold top 4 */
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router_topk_scaling_factor\":0}",
       "router_topk_scaling_factor"},
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router_topk_scaling_factor\":\"2.5\"}",
       "router_topk_scaling_factor"},
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router_expert_bias\":true}", "router_expert_bias"},
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router\":\"sigmoid\",\"router_expert_bias\":1}",
       "router_expert_bias"},
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router\":\"sigmoid\","
       "\"router_bias_update_rate\":0.001}", "router_bias_update_rate"}, /* without the bias */
      {",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router\":\"sigmoid\",\"router_expert_bias\":true,"
       "\"router_bias_update_rate\":-1}", "router_bias_update_rate"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text, "%s%s", head, bad[i].tail);
    model_config m;
    ts_err e;
    CU_ASSERT_EQUAL(model_from_json_text(text, strlen(text), "m.json", &m, &e), -1);
    ASSERT_MSG(e, "m.json");
    ASSERT_MSG(e, bad[i].field);
  }
  char ok[1024];
  snprintf(ok, sizeof ok, "%s%s", head, ",\"experts\":8,\"top_k\":2,\"expert_ffn_hidden\":64,\"router\":\"sigmoid\"}");
  model_config m;
  ts_err e;
  CU_ASSERT_EQUAL(model_from_json_text(ok, strlen(ok), "m.json", &m, &e), 0);
  CU_ASSERT_EQUAL(m.router, MODEL_ROUTER_SIGMOID);
  /* the defaults route as before: no groups, no scaling, no bias */
  CU_ASSERT_EQUAL(m.router_num_groups, 0);
  CU_ASSERT_EQUAL(m.router_topk_scaling_factor, 1.0);
  CU_ASSERT_FALSE(m.router_expert_bias);
  /* DeepSeek-V3 as its config.json has it: n_group 8, topk_group 4, routed_scaling_factor 2.5, noaux_tc */
  m = load("deepseek-v3");
  CU_ASSERT_EQUAL(m.router, MODEL_ROUTER_SIGMOID);
  CU_ASSERT_EQUAL(m.router_num_groups, 8);
  CU_ASSERT_EQUAL(m.router_group_topk, 4);
  CU_ASSERT_EQUAL(m.router_topk_scaling_factor, 2.5);
  CU_ASSERT_TRUE(m.router_expert_bias);
  CU_ASSERT_EQUAL(m.router_bias_update_rate, 1e-3);
  m = load("qwen3-30b-a3b");
  CU_ASSERT_EQUAL(m.router_num_groups, 0);
  CU_ASSERT_FALSE(m.router_expert_bias);
}

/* ---- plans ---- */

static int plan_text(const char *layout, const char *codec, const char *model, int dp, int tp, plan *p, ts_err *e) {
  char text[2048];
  snprintf(text, sizeof text,
           "{\"schema\":1,\"model\":\"%s\",\"cluster\":\"h200-1024-rail\",\"layout\":{\"dp\":%d,\"tp\":%d,\"pp\":1,"
           "\"sequence_parallel\":%s%s},\"batch\":{\"micro\":1,\"global\":%d,\"seq\":256},\"schedule\":\"1f1b\","
           "\"codec\":{%s}}",
           model, dp, tp, tp > 1 ? "true" : "false", layout, 2 * dp, codec);
  return plan_from_json_text(text, strlen(text), "p.json", NULL, NULL, p, e);
}

static void test_layout_rules(void) {
  struct {
    const char *model, *layout, *codec;
    int dp, tp;
    const char *field;
  } bad[] = {
      {"moe-tiny", ",\"ep\":3", "", 6, 1, "layout.ep"},
      {"moe-tiny", ",\"ep\":16", "", 16, 1, "layout.ep"},
      {"moe-tiny", ",\"ep\":4,\"expert_tp\":3", "", 8, 2, "layout.expert_tp"},
      {"moe-tiny", ",\"ep\":8,\"expert_tp\":2", "", 4, 2, "layout.ep"},
      {"moe-tiny", ",\"ep\":4,\"capacity_factor\":0.5", "", 8, 1, "layout.capacity_factor"},
      {"moe-tiny", ",\"ep\":2,\"moe_imbalance\":3", "", 8, 1, "layout.moe_imbalance"},
      {"moe-tiny", ",\"ep\":2,\"moe_imbalance\":0.5", "", 8, 1, "moe_imbalance"},
      {"moe-tiny", ",\"ep\":4", "\"ep\":{\"kind\":\"caat\",\"p\":0.5}", 8, 1, "codec.ep.kind"},
      {"gpt-tiny", ",\"ep\":2", "", 8, 1, "layout.ep"},
      {"moe-tiny", ",\"ep\":4,\"moe_token_dispatcher_type\":\"allgather\"", "", 8, 1, "layout.moe_token_dispatcher_type"},
      {"moe-tiny", ",\"ep\":4,\"moe_token_dispatcher_type\":\"deepep\"", "", 8, 1, "moe_token_dispatcher_type"},
      {"gpt-tiny", ",\"moe_token_dispatcher_type\":\"flex\"", "", 8, 1, "layout.moe_token_dispatcher_type"},
      {"gpt-tiny", "", "\"ep\":{\"kind\":\"taco\"}", 8, 1, "codec.ep"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    plan p;
    ts_err e;
    CU_ASSERT_EQUAL(plan_text(bad[i].layout, bad[i].codec, bad[i].model, bad[i].dp, bad[i].tp, &p, &e), -1);
    ASSERT_MSG(e, bad[i].field);
    ASSERT_MSG(e, "p.json");
  }
  /* MoE with tp > 1 needs sequence parallelism */
  const char *nosp = "{\"schema\":1,\"model\":\"moe-tiny\",\"cluster\":\"h200-1024-rail\",\"layout\":{\"dp\":4,"
                     "\"tp\":2,\"pp\":1,\"ep\":2},\"batch\":{\"micro\":1,\"global\":8,\"seq\":256},\"schedule\":\"1f1b\"}";
  plan p;
  ts_err e;
  CU_ASSERT_EQUAL(plan_from_json_text(nosp, strlen(nosp), "p.json", NULL, NULL, &p, &e), -1);
  ASSERT_MSG(e, "layout.sequence_parallel");
  /* the default imbalance comes from the published measurement */
  CU_ASSERT_EQUAL_FATAL(plan_text(",\"ep\":4", "", "moe-tiny", 8, 1, &p, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(p.moe_imbalance, 1.04, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_max_load(&p), 1.04, 1e-12);
  CU_ASSERT_EQUAL_FATAL(plan_text(",\"ep\":4,\"moe_imbalance\":1.5,\"capacity_factor\":1.25", "", "moe-tiny", 8, 1, &p, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_max_load(&p), 1.25, 1e-12); /* capacity caps the busiest rank */
}

/* tp 2, dp 8, ep 4, expert_tp 2: a stage's 16 ranks fold into etp 2 x ep 4 x edp 2. */
static void test_expert_groups(void) {
  plan p;
  ts_err e;
  int rc = plan_text(",\"ep\":4,\"expert_tp\":2", "", "moe-tiny", 8, 2, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(plan_edp(&p), 2);
  int m[16];
  /* rank 5 = tp 1, dp 2: q = 5, etp index 1, ep index 2, edp index 0 */
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_EP, m, 16), 4);
  int want_ep[] = {1, 3, 5, 7};
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(m[i], want_ep[i]);
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_ETP, m, 16), 2);
  CU_ASSERT(m[0] == 4 && m[1] == 5); /* = the TP group */
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_EDP, m, 16), 2);
  CU_ASSERT(m[0] == 5 && m[1] == 13);
  CU_ASSERT_EQUAL(plan_group_index(&p, 5, PLAN_GROUP_EP), 2);
  CU_ASSERT_EQUAL(plan_group_index(&p, 13, PLAN_GROUP_EDP), 1);
  /* expert_tp 1 with tp 2: EP spans TP ranks (folding) */
  CU_ASSERT_EQUAL_FATAL(plan_text(",\"ep\":4,\"expert_tp\":1", "", "moe-tiny", 8, 2, &p, &e), 0);
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_EP, m, 16), 4);
  CU_ASSERT(m[0] == 4 && m[1] == 5 && m[2] == 6 && m[3] == 7);
  CU_ASSERT_EQUAL(plan_edp(&p), 4);
}

/* Token all-to-alls of rank 0, by hand: per MoE layer and micro-batch, four
 * (dispatch and combine, forward and backward) of t x top_k x h x 2 bytes,
 * t = micro x seq / tp tokens; with TACO, N + 8N/G bytes of N elements. */
static void test_token_traffic(void) {
  plan p;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(plan_text(",\"ep\":4", "\"ep\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}", "moe-tiny", 8, 1, &p, &e), 0);
  p.codec_min_bytes = 0; /* the test's messages are small */
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int a2a = 0, grads = 0, waits = 0;
  double bytes = 0, wire = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *o = &g.ops[i];
    if (o->kind == PLAN_OP_COLLECTIVE && o->coll == PLAN_COLL_ALLTOALL) {
      CU_ASSERT_EQUAL(o->group, PLAN_GROUP_EP);
      CU_ASSERT_EQUAL(o->traffic, PLAN_TRAFFIC_EP);
      a2a++, bytes += o->bytes, wire += o->wire_bytes;
    }
    if (o->model_op == PLAN_MOP_EXPERT_GRADS) {
      CU_ASSERT_EQUAL(o->group, PLAN_GROUP_EDP);
      grads++;
    }
    if (o->model_op == PLAN_MOP_MOE_IMBALANCE) waits++;
  }
  int moe_layers = 3, micro = plan_micro_batches(&p); /* 2 */
  CU_ASSERT_EQUAL(a2a, 4 * moe_layers * micro);
  double one = 256.0 * 2 * 256 * 2; /* t 256, top 2, h 256, bf16 */
  CU_ASSERT_DOUBLE_EQUAL(bytes, a2a * one, 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(wire, a2a * (one / 2) * (1 + 8.0 / 128), 1e-6);
  CU_ASSERT_EQUAL(grads, moe_layers); /* edp = 2: one reduction per MoE layer */
  CU_ASSERT_EQUAL(waits, 2 * moe_layers * micro); /* forward and backward */
  plan_program_free(&g);
}

/* The flex (DeepEP) dispatcher sends a token once to each EP rank holding one
 * of its experts: moe-tiny (8 experts, top 2) over ep 4, 2 experts a rank: a
 * token misses a given rank with probability (6 x 5) / (8 x 7), so it reaches
 * 4 x (1 - 30/56) = 1.857 ranks on average, and the all-to-alls carry that
 * many copies of it instead of 2. */
static void test_flex_dispatcher(void) {
  plan a, f;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(plan_text(",\"ep\":4", "", "moe-tiny", 8, 1, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_text(",\"ep\":4,\"moe_token_dispatcher_type\":\"flex\"", "", "moe-tiny", 8, 1, &f, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_dispatch_copies(&a), 2.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(plan_moe_dispatch_copies(&f), 4.0 * (1.0 - 30.0 / 56.0), 1e-12);
  double sum[2] = {0, 0}, rows[2] = {0, 0};
  const plan *ps[2] = {&a, &f};
  for (int k = 0; k < 2; k++) {
    plan_program g;
    CU_ASSERT_EQUAL_FATAL(plan_build_program(ps[k], 0, &g, &e), 0);
    for (int i = 0; i < g.n; i++) {
      const plan_op *o = &g.ops[i];
      if (o->kind == PLAN_OP_COLLECTIVE && o->coll == PLAN_COLL_ALLTOALL) sum[k] += o->bytes;
      if (o->kind == PLAN_OP_COMPUTE && o->model_op >= 0 && o->phase == PLAN_PHASE_FWD) rows[k] += o->flops;
    }
    plan_program_free(&g);
  }
  CU_ASSERT(sum[0] > 0);
  CU_ASSERT_DOUBLE_EQUAL(sum[1] / sum[0], (1.0 - 30.0 / 56.0) * 2.0, 1e-9); /* 1.857 of 2 copies */
  CU_ASSERT_DOUBLE_EQUAL(rows[1], rows[0], 1e-6 * rows[0]); /* the experts compute the same rows */
}

/* Expert weights and optimizer state per EP shard. */
static void test_memory_per_shard(void) {
  plan p1, p4;
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(plan_text(",\"ep\":1,\"zero1\":true", "", "moe-tiny", 8, 1, &p1, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_text(",\"ep\":4,\"zero1\":true", "", "moe-tiny", 8, 1, &p4, &e), 0);
  double x1 = plan_expert_params_of_stage(&p1, 0), x4 = plan_expert_params_of_stage(&p4, 0);
  double experts = 3.0 * 8 * 3 * 256 * 128; /* 3 MoE layers x 8 experts x 3 h f */
  CU_ASSERT_DOUBLE_EQUAL(x1, experts, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(x4, experts / 4, 0.5);
  double rest = plan_params_of_stage(&p1, 0) - x1;
  CU_ASSERT_DOUBLE_EQUAL(plan_params_of_stage(&p4, 0), rest + experts / 4, 0.5);
  /* ZeRO-1: non-expert state over dp 8, expert state over edp 2 */
  CU_ASSERT_DOUBLE_EQUAL(plan_optimizer_params_of_stage(&p4, 0), rest / 8 + experts / 4 / 2, 0.5);
}

/* The shipped MoE plans load (rules and memory) and build every stage's program. */
static void test_shipped_plans(void) {
  const char *plans[] = {"experiments/plans/moe/mixtral-8x7b-64-ep8.json",
                         "experiments/plans/moe/qwen3-30b-a3b-32-ep16.json",
                         "experiments/plans/moe/qwen3-30b-a3b-32-ep16-taco.json",
                         "experiments/published/moe/qwen3-235b-a22b-256-h100-tp4ep8.json",
                         "experiments/published/moe/qwen3-235b-a22b-256-h100-tp4ep8-16k.json",
                         "experiments/published/moe/qwen3-235b-a22b-256-h100-tp2ep8-a2a.json",
                         "experiments/published/moe/qwen3-235b-a22b-256-h100-tp2ep32.json",
                         "experiments/published/moe/qwen3-235b-a22b-256-gb200-tp1ep8.json",
                         "experiments/published/moe/mixtral-8x22b-128-h100-tp2ep8.json",
                         "experiments/published/moe/mixtral-8x22b-128-h100-tp2ep8-drop.json"};
  for (size_t i = 0; i < sizeof plans / sizeof plans[0]; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SOURCE_DIR, plans[i]);
    plan p;
    ts_err e;
    int rc = plan_load(path, NULL, NULL, &p, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT(model_is_moe(&p.model) && p.ep > 1);
    plan_program g;
    rc = plan_build_program(&p, plan_rank_of(&p, (plan_coord){0, 0, p.pp - 1}), &g, &e);
    CU_ASSERT_EQUAL(rc, 0);
    if (!rc) plan_program_free(&g);
  }
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("moe.models", NULL, NULL);
  CU_add_test(s, "flex (DeepEP) dispatcher: a token once a destination rank", test_flex_dispatcher);
  CU_add_test(s, "published totals and active parameters", test_published_counts);
  CU_add_test(s, "Mixtral 8x7B by hand (params, FLOPs per token)", test_mixtral_by_hand);
  CU_add_test(s, "DeepSeek-V3 by hand (MLA, dense layers, shared expert)", test_deepseek_by_hand);
  CU_add_test(s, "Megatron-LM's count reproduces a published TFLOP/s", test_megatron_count_matches_published);
  CU_add_test(s, "loader rules", test_loader_rules);
  CU_pSuite q = CU_add_suite("moe.plan", NULL, NULL);
  CU_add_test(q, "layout rules", test_layout_rules);
  CU_add_test(q, "expert groups (folding)", test_expert_groups);
  CU_add_test(q, "token all-to-all bytes per rank", test_token_traffic);
  CU_add_test(q, "memory per EP shard", test_memory_per_shard);
  CU_add_test(q, "shipped MoE plans load and build", test_shipped_plans);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

/* test_infer_adp.c — attention data parallelism and expert parallelism in inference plans (layout.attention_dp,
 * layout.ep; plan/plan_infer_load.c, sim/sim_infer.c, sim/sim_inflight.c): a GPU's memory by hand (full attention,
 * embedding and head weights, 1/ep of the experts at 1/moe_tp width, its own sequences' whole KV cache), one engine
 * step by hand on a calibration of constant costs (the layers at tp 1, the exchange around every MoE layer, no TP
 * all-reduce), the in-flight batch a GPU's, and the layouts the rules refuse naming the field. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_infer.h"
#include "sim_infer.h"
#include "sim_inflight.h"
#include "test_check.h"

static plan_infer g_plan;

/* Qwen3-30B-A3B (128 experts of 768, top 8; 32 heads, 4 KV heads of 128) cut to `layers` layers on 8 x H100. */
static int load(int tp, const char *layout_extra, const char *batch, const char *extra, int layers, ts_err *e) {
  char text[1024];
  snprintf(text, sizeof text,
           "{\"schema\":1,\"kind\":\"inference\",\"model\":\"qwen3-30b-a3b\",\"cluster\":\"h100x8-nvswitch\","
           "\"layout\":{\"tp\":%d%s},\"batch\":%s,\"prefill_attention\":\"flash\",\"layers_override\":%d%s%s}",
           tp, layout_extra, batch, layers, extra[0] ? "," : "", extra);
  return plan_infer_from_json_text(text, strlen(text), "p.json", NULL, NULL, &g_plan, e);
}

/* A GPU of tp 4, ep 2 (moe_tp 2), batch 8 (2 sequences a GPU) of 100 + 28 tokens, 2 layers, BF16. */
static void test_memory_by_hand(void) {
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(4, ",\"ep\":2,\"attention_dp\":true", "{\"size\":8,\"prompt\":100,\"generate\":28}", "", 2,
                             &e), 0);
  const double L = 2, h = 2048, hd = 128, E = 128, fe = 768, V = 151936, ep = 2, mtp = 2;
  const double attn = h * (32 + 2 * 4) * hd + 32 * hd * h;        /* qkv and attn_out, whole */
  const double experts = E / ep * (2.0 * (fe / mtp) * h + h * (fe / mtp)); /* 64 experts of 384: fc1 (gate | up), fc2 */
  const double layer = 2 * h + 2 * hd + attn + E * h + experts;         /* ln1, ln2, q_norm, k_norm, router */
  const double params = L * layer + 2 * V * h + h;                      /* embedding, head, final norm: whole */
  const double kv = 2.0 * L * 2 /* sequences a GPU */ * 128 * 4 /* all KV heads */ * hd * 2.0;
  plan_infer_memory m;
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&g_plan, &m), 0);
  NEAR(m.weights, 2.0 * params, 1e-12);
  NEAR(m.kv_cache, kv, 1e-12);
  NEAR(m.total, 2.0 * params + kv + m.overhead, 1e-12);
  /* without attention_dp (tp 4, experts 1/4 of each, a quarter of the heads, the whole batch): other figures */
  CU_ASSERT_EQUAL_FATAL(load(4, "", "{\"size\":8,\"prompt\":100,\"generate\":28}", "", 2, &e), 0);
  plan_infer_memory t;
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&g_plan, &t), 0);
  NEAR(t.kv_cache, 2.0 * L * 8 * 128 * 1 * hd * 2.0, 1e-12);
}

/* ---- a calibration of constant costs ---- */
#define GEMM_US 7.0
#define KERNEL_US 1000.0
#define ALLREDUCE_US 50.0
#define ALLGATHER_US 30.0
#define REDUCESCATTER_US 20.0
#include "infer_const_cal.h"

static void constant_calibration(schema_calibration *c) {
  static const char *const colls[] = {"allreduce", "allgather", "reducescatter", "sendrecv"};
  static const double us[] = {ALLREDUCE_US, ALLGATHER_US, REDUCESCATTER_US, 10.0};
  infer_const_calibration(c, colls, us, 4);
}

/* One decode step of 6 sequences a GPU (tp 8, ep 4) by hand: per layer every kernel of the layer at tp 1 other
 * than its GEMMs (KERNEL_US each; the decode attention from the FLOP-keyed "attention" table), then the exchange (an
 * all-gather and a reduce-scatter; no all-reduce); the embedding (no all-reduce: whole on the GPU), final norm and
 * sampling (KERNEL_US each; no all-gather of the logits). The GEMMs (5 a layer: qkv, attn_out, router and the routed
 * experts' two fused GEMMs, and the logits GEMM) are the price's own gemm_s: the constant table's one point is
 * anchored to the roofline for shapes that read more than it (the logits GEMM reads 0.6 GB at tp 1), so they are
 * not by hand, but each is at least GEMM_US. */
static void test_step_by_hand(void) {
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(8, ",\"ep\":4,\"attention_dp\":true", "{\"prompt\":100,\"generate\":28}",
                             "\"inflight\":{\"max_batch\":6}", 2, &e), 0);
  CU_ASSERT_EQUAL(g_plan.inflight.max_batch, 6); /* a GPU's */
  CU_ASSERT_EQUAL(g_plan.batch, 48);             /* the group's */
  schema_calibration cal;
  constant_calibration(&cal);
  model_shard sh = {1, false, 1, 6};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&g_plan.model, &sh, ops, MODEL_MAX_LAYER_OPS, &e), gemms = 0;
  CU_ASSERT_FATAL(n > 0);
  double layer_us = ALLGATHER_US + REDUCESCATTER_US;
  for (int i = 0; i < n; i++) {
    if (ops[i].kind == MODEL_OP_GEMM) gemms++;
    else layer_us += KERNEL_US;
  }
  CU_ASSERT_EQUAL(gemms, 5);
  const double hand_no_gemm = (2 * layer_us + 3 * KERNEL_US) * 1e-6;
  sim_infer_views v;
  CU_ASSERT_EQUAL_FATAL(sim_infer_views_new(&g_plan, &cal, &v, &e), 0);
  sim_infer_step_shape s = {.tokens = 6, .dec_seqs = 6, .kv_len = 110, .out_seqs = 6};
  sim_infer_step_price pr;
  CU_ASSERT_EQUAL_FATAL(sim_infer_step_s(&g_plan, &v, &s, NULL, &pr, &e), 0);
  NEAR(pr.total_s, hand_no_gemm + pr.gemm_s, 1e-9);
  CU_ASSERT(pr.gemm_s >= (2 * gemms + 1) * GEMM_US * 1e-6);
  const double step = pr.total_s - pr.gemm_s;
  NEAR(pr.exchange_s, 2 * (ALLGATHER_US + REDUCESCATTER_US) * 1e-6, 1e-12);
  NEAR(pr.tp_s, pr.exchange_s, 1e-12);
  /* the slowest GPU admits a prompt of 100: its prefill attention (KERNEL_US a layer) more; the other kernels alike
   * (the constant tables price any size alike), the GEMMs at its 106 rows and the experts at the group's 148 tokens */
  sim_infer_step_shape a = {.tokens = 106, .dec_seqs = 6, .kv_len = 110, .ctx_seqs = 1, .ctx_len = 100,
                            .ctx_scale = 1.0, .out_seqs = 7, .group_tokens = 48 + 100};
  CU_ASSERT_EQUAL_FATAL(sim_infer_step_s(&g_plan, &v, &a, NULL, &pr, &e), 0);
  NEAR(pr.total_s - pr.gemm_s, step + 2 * KERNEL_US * 1e-6, 1e-9);
  sim_infer_views_free(&v);
  schema_calibration_free(&cal);
}

/* The in-flight batch under attention_dp is a GPU's: its KV fit counts its own sequences' whole cache (all KV heads)
 * in the HBM left after its weights, and trtllm-bench's heuristic (of the group) caps it as each rank's
 * max_batch_size. */
static void test_inflight_batch_per_gpu(void) {
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(8, ",\"ep\":8,\"attention_dp\":true", "{\"prompt\":1000,\"generate\":1000}",
                             "\"kv_cache\":\"fp8\",\"inflight\":{}", 48, &e), 0);
  const plan_infer_inflight *f = &g_plan.inflight;
  plan_infer one = g_plan;
  one.batch = one.tp; /* one sequence a GPU */
  plan_infer_memory m;
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&one, &m), 0);
  const double per_seq = 2.0 * 48 * 2016 /* 2000 in blocks of 32 */ * 4 * 128 * (1.0 + 4.0 / 128);
  NEAR(plan_infer_kv_bytes(&one, 2016), per_seq, 1e-12);
  /* less the profiling forward's and the CUDA graphs' activations (test_inflight.c checks them by hand) */
  const double fit = floor(
      0.9 * (80.0 * 1073741824.0 - m.weights - m.overhead - f->profile_peak_bytes - f->cuda_graph_bytes) / per_seq);
  CU_ASSERT(f->profile_peak_bytes > 0);
  CU_ASSERT_EQUAL(f->moe_tokens, 8 * f->max_num_tokens); /* the gathered tokens of the 8 GPUs */
  CU_ASSERT_EQUAL(f->kv_fit_batch, (int)fit);
  CU_ASSERT_EQUAL(f->max_batch, f->kv_fit_batch < f->engine_max_batch ? f->kv_fit_batch : f->engine_max_batch);
  CU_ASSERT_EQUAL(g_plan.batch, 8 * f->max_batch);
  /* the steady state is the group's: 8 GPUs admit 8 x max_batch / generate requests a step */
  sim_inflight_result r;
  schema_calibration cal;
  constant_calibration(&cal);
  CU_ASSERT_EQUAL_FATAL(sim_inflight_predict(&g_plan, &cal, NULL, &r, &e), 0);
  NEAR(r.admitted, 8.0 * f->max_batch / 1000.0, 1e-12);
  NEAR(r.tokens_per_s, r.admitted * 1000.0 / r.step_s, 1e-12);
  schema_calibration_free(&cal);
}

/* The rules: each refused layout names its field. */
static void test_rules(void) {
  const struct {
    int tp;
    const char *layout, *batch, *extra, *field;
  } cases[] = {
      {4, ",\"ep\":2", "{\"size\":8,\"prompt\":10,\"generate\":4}", "", "layout.ep"},        /* ep without attention_dp */
      {4, ",\"ep\":3,\"attention_dp\":true", "{\"size\":8,\"prompt\":10,\"generate\":4}", "", "layout.ep"}, /* 3 / tp 4 */
      {1, ",\"attention_dp\":true", "{\"size\":8,\"prompt\":10,\"generate\":4}", "", "layout.attention_dp"}, /* tp 1 */
      {4, ",\"attention_dp\":true", "{\"size\":6,\"prompt\":10,\"generate\":4}", "", "batch.size"}, /* 6 over 4 GPUs */
      {4, ",\"attention_dp\":true,\"pp\":2", "{\"size\":8,\"prompt\":10,\"generate\":4}", "", "layout.pp"},
      {4, ",\"attention_dp\":true", "{\"size\":8,\"prompt\":10,\"generate\":4}",
       "\"codec\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}", "codec.kind"},
      {4, ",\"attention_dp\":\"yes\"", "{\"size\":8,\"prompt\":10,\"generate\":4}", "", "attention_dp"},
      {4, ",\"ep\":0,\"attention_dp\":true", "{\"size\":8,\"prompt\":10,\"generate\":4}", "", "ep"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    ts_err e = {0};
    CU_ASSERT_EQUAL(load(cases[i].tp, cases[i].layout, cases[i].batch, cases[i].extra, 2, &e), -1);
    CU_ASSERT_EQUAL(e.bad_input, 1);
    ASSERT_MSG(e, cases[i].field);
  }
  /* a dense model */
  const char *dense = "{\"schema\":1,\"kind\":\"inference\",\"model\":\"llama3-8b\",\"cluster\":\"h100x8-nvswitch\","
                      "\"layout\":{\"tp\":2,\"attention_dp\":true},\"batch\":{\"size\":2,\"prompt\":10,\"generate\":4},"
                      "\"prefill_attention\":\"flash\"}";
  ts_err e = {0};
  CU_ASSERT_EQUAL(plan_infer_from_json_text(dense, strlen(dense), "p.json", NULL, NULL, &g_plan, &e), -1);
  ASSERT_MSG(e, "layout.attention_dp");
  ASSERT_MSG(e, "dense model");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("infer_adp", NULL, NULL);
  CU_add_test(s, "a GPU's memory by hand", test_memory_by_hand);
  CU_add_test(s, "one engine step by hand", test_step_by_hand);
  CU_add_test(s, "the in-flight batch is a GPU's", test_inflight_batch_per_gpu);
  CU_add_test(s, "refused layouts name the field", test_rules);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_inflight.c — in-flight batching plans (plan/plan_inflight.c, sim/sim_inflight.c): the steady state of a
 * tiny case by hand on a calibration of constant costs, the engine's batch heuristic and the KV-cache fit by hand,
 * the limit where prefill is negligible against the static batch's decode step, malformed fields (exit 2 naming the
 * field), a finite run by hand, and `tacosim simulate` on such a plan (JSON with the options). */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plan_infer.h"
#include "sim_infer.h"
#include "sim_inflight.h"
#include "test_check.h"

static plan_infer g_plan;

static int load_text(const char *text, ts_err *e) {
  return plan_infer_from_json_text(text, strlen(text), "p.json", NULL, NULL, &g_plan, e);
}

/* Llama 3 8B on a cluster, tp (negative: that tp and pp 2), prompt and generate, and the "inflight" object (and
 * other root fields). */
static void plan_text(char *out, size_t cap, const char *cluster, int tp, int prompt, int generate, const char *inflight,
                      const char *extra) {
  snprintf(out, cap,
           "{\"schema\":1,\"kind\":\"inference\",\"model\":\"llama3-8b\",\"cluster\":\"%s\",\"layout\":{\"tp\":%d%s},"
           "\"batch\":{\"prompt\":%d,\"generate\":%d},\"prefill_attention\":\"flash\",\"inflight\":%s%s%s}",
           cluster, tp < 0 ? -tp : tp, tp < 0 ? ",\"pp\":2" : "", prompt, generate, inflight, extra[0] ? "," : "", extra);
}

/* ---- a calibration of constant costs (as tests/test_infer.c's) ---- */
#define GEMM_US 7.0
#define KERNEL_US 1000.0
#define ALLREDUCE_US 50.0
#define ALLGATHER_US 30.0
#include "infer_const_cal.h"

static void constant_calibration(schema_calibration *c) {
  static const char *const colls[] = {"allreduce", "allgather", "sendrecv"};
  static const double us[] = {ALLREDUCE_US, ALLGATHER_US, 10.0};
  infer_const_calibration(c, colls, us, 3);
}

/* One step without a prompt on the constant calibration: per layer its GEMMs (GEMM_US each), its other kernels and
 * the decode attention (KERNEL_US each: no attention_decode table, so the FLOP-keyed "attention" table) and two
 * all-reduces; the embedding (kernel + all-reduce), the final norm, the logits GEMM, their all-gather, sampling. */
static double hand_step_s(const plan_infer *p) {
  model_shard sh = {p->tp, false, 1, 8};
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e;
  int n = model_layer_ops(&p->model, &sh, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_FATAL(n > 0);
  double layer_us = 2 * ALLREDUCE_US;
  for (int i = 0; i < n; i++) layer_us += ops[i].kind == MODEL_OP_GEMM ? GEMM_US : KERNEL_US;
  return (p->model.layers * layer_us + KERNEL_US + ALLREDUCE_US + KERNEL_US + GEMM_US + ALLGATHER_US + KERNEL_US) * 1e-6;
}

/* The steady state of a tiny case by hand: batch 6, generate 9: 6 / 9 = 2/3 of a request admitted a step, so a third
 * of the steps admit none and two thirds one (prompts are whole); 2/3 x 8 = 5.33 sequences decode (priced as 5).
 * A step with a prompt adds each layer's prefill attention ("flash" without an attention_backends table: the
 * FLOP-keyed "attention" table, KERNEL_US, warned). */
static void test_steady_state_by_hand(void) {
  char t[1024];
  plan_text(t, sizeof t, "h200x2-nvlink", 2, 64, 9, "{\"max_batch\":6,\"max_num_tokens\":4096}", "");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  CU_ASSERT_EQUAL(g_plan.inflight.max_batch, 6);
  CU_ASSERT_EQUAL(g_plan.batch, 6);
  g_plan.cluster.gpu.bf16_tflops = 1e15, g_plan.cluster.gpu.hbm_gbps = 1e15; /* constant costs: lift the ceilings */
  schema_calibration cal;
  constant_calibration(&cal);
  sim_inflight_result r;
  CU_ASSERT_EQUAL_FATAL(sim_inflight_predict(&g_plan, &cal, NULL, &r, &e), 0);
  NEAR(r.admitted, 6.0 / 9.0, 1e-12);
  NEAR(r.in_flight, 6.0, 1e-12);
  NEAR(r.decode_seqs, 6.0 / 9.0 * 8, 1e-12);
  NEAR(r.step_tokens, 6.0 / 9.0 * (64 + 8), 1e-12);
  NEAR(r.kv_len, 64 + 4.5, 1e-12);
  CU_ASSERT_FALSE(r.token_bound);
  CU_ASSERT_EQUAL(r.k, 0);
  NEAR(r.phi, 2.0 / 3.0, 1e-12);
  CU_ASSERT_EQUAL(r.shape[0].tokens, 5);
  CU_ASSERT_EQUAL(r.shape[1].tokens, 5 + 64);
  CU_ASSERT_EQUAL(r.shape[1].out_seqs, 6);
  const double step0 = hand_step_s(&g_plan), prefill_attn = g_plan.model.layers * KERNEL_US * 1e-6;
  NEAR(r.price[0].total_s, step0, 1e-9);
  NEAR(r.price[1].total_s, step0 + prefill_attn, 1e-9);
  NEAR(r.step_s, step0 + 2.0 / 3.0 * prefill_attn, 1e-9);
  NEAR(r.tpot_s, r.step_s, 1e-12);
  NEAR(r.ttft_s, step0 + prefill_attn, 1e-9);
  NEAR(r.tokens_per_s, (6.0 / 9.0) * 9 / r.step_s, 1e-12);
  NEAR(r.tokens_per_s_per_gpu, r.tokens_per_s / 2, 1e-12);
  /* the token budget binds: batch 9 would admit one request a step, 32 + 8 = 40 tokens, but a step holds 35: 35 / 40
   * of a request a step, 35 / 40 x 9 sequences in flight */
  plan_text(t, sizeof t, "h200x2-nvlink", 2, 32, 9, "{\"max_batch\":9,\"max_num_tokens\":35}", "");
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  g_plan.cluster.gpu.bf16_tflops = 1e15, g_plan.cluster.gpu.hbm_gbps = 1e15;
  CU_ASSERT_EQUAL_FATAL(sim_inflight_predict(&g_plan, &cal, NULL, &r, &e), 0);
  CU_ASSERT_TRUE(r.token_bound);
  NEAR(r.admitted, 35.0 / 40.0, 1e-12);
  NEAR(r.in_flight, 35.0 / 40.0 * 9, 1e-12);
  NEAR(r.step_tokens, 35.0, 1e-12);
  schema_calibration_free(&cal);
}

/* A finite run by hand: batch 2, generate 3, 4 requests queued at once. Step 0 admits 2 prompts; steps 1 and 2 decode
 * them (their last token at step 2); step 3 admits the other 2, steps 4 and 5 decode them: 6 steps. On the constant
 * calibration every step costs hand_step_s (a prompt's attention replaces the decode attention at the same
 * KERNEL_US): the run takes 6 steps, the first tokens come at the end of steps 0 and 3 (mean 2.5 steps), each
 * request's last token 2 steps after its first (TPOT one step). */
static void test_finite_run_by_hand(void) {
  char t[1024];
  plan_text(t, sizeof t, "h200x2-nvlink", 2, 64, 3, "{\"max_batch\":2,\"max_num_tokens\":4096,\"requests\":4}", "");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  CU_ASSERT_EQUAL(g_plan.inflight.requests, 4);
  g_plan.cluster.gpu.bf16_tflops = 1e15, g_plan.cluster.gpu.hbm_gbps = 1e15;
  schema_calibration cal;
  constant_calibration(&cal);
  sim_inflight_result r;
  CU_ASSERT_EQUAL_FATAL(sim_inflight_predict(&g_plan, &cal, NULL, &r, &e), 0);
  const double s = hand_step_s(&g_plan);
  CU_ASSERT_TRUE(r.run);
  CU_ASSERT_EQUAL(r.run_steps, 6);
  NEAR(r.run_s, 6 * s, 1e-9);
  NEAR(r.run_tokens_per_s, 4.0 * 3 / (6 * s), 1e-9);
  NEAR(r.run_ttft_mean_s, 2.5 * s, 1e-9);
  NEAR(r.run_tpot_mean_s, s, 1e-9);
  NEAR(r.run_in_flight_mean, 2.0, 1e-12);
  schema_calibration_free(&cal);
}

/* trtllm-bench's heuristic and the KV fit by hand: Llama 3 8B (8.03e9 parameters), FP8 weights and cache, TP 1 on an
 * H100 (80 GiB), prompt 128, generate 128: 2 x 32 layers x 8 KV heads x 128 x 1 B = 64 KiB a token; (80 - 8.03e9 /
 * 2^30) x 0.9 / (64 KiB x 256 tokens) = 4,147 requests, capped at 4,096 (a multiple of 256); max_num_tokens 4,096 x
 * 2 = 8,192 (at least 128 + 4,096). The KV fit: the plan's own FP8 cache (1 + 4 / 128 bytes an element), 256 tokens a
 * sequence, in 0.9 of the HBM less the weights, the runtime, the profiling forward of 8,192 tokens and the CUDA
 * graphs' pool (test_engine_memory_by_hand). */
static void test_engine_heuristic_by_hand(void) {
  char t[1024];
  plan_text(t, sizeof t, "h100x8-nvswitch", 1, 128, 128, "{}", "\"quantization\":\"fp8\",\"kv_cache\":\"fp8\"");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  const plan_infer_inflight *f = &g_plan.inflight;
  CU_ASSERT_EQUAL(f->engine_max_batch, 4096);
  CU_ASSERT_EQUAL(f->engine_max_num_tokens, 8192);
  CU_ASSERT_EQUAL(f->max_num_tokens, 8192);
  NEAR(f->kv_fraction, 0.90, 1e-12);
  CU_ASSERT_EQUAL(f->tokens_per_block, 32);
  plan_infer q = g_plan;
  q.batch = 1;
  plan_infer_memory mem;
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&q, &mem), 0);
  const double per_seq = 2.0 * 32 * 8 * 128 * (1 + 4.0 / 128) * 256;
  const int fit = (int)floor(
      0.9 * (80 * 1073741824.0 - mem.weights - mem.overhead - f->profile_peak_bytes - f->cuda_graph_bytes) / per_seq);
  CU_ASSERT_EQUAL(f->kv_fit_batch, fit);
  CU_ASSERT_EQUAL(f->max_batch, fit < 4096 ? fit : 4096);
  CU_ASSERT_EQUAL(g_plan.batch, f->max_batch);
  /* a long prompt: max_num_tokens at least prompt + max_batch (no chunked prefill); a given max_batch caps */
  plan_text(t, sizeof t, "h100x8-nvswitch", 1, 6000, 100, "{\"max_batch\":16}", "\"kv_cache\":\"fp8\"");
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  CU_ASSERT(f->engine_max_num_tokens >= 6000 + f->engine_max_batch);
  CU_ASSERT_EQUAL(f->max_batch, 16);
}

/* The engine's memory before the KV cache by hand (sim/INFERENCE.md, "The engine's memory before the KV cache").
 * Llama 3 8B, FP8, TP 1, 128/128 on an H100 (hidden 4,096, ffn 14,336, 32 heads and 8 KV heads of 128, vocabulary
 * 128,256): the profiling forward of max_num_tokens 8,192 tokens peaks at the MLP's activation, its BF16 input of
 * 8,192 x 2 x 14,336 and FP8 output of 8,192 x 14,336, over the hidden states and residual (2 x 8,192 x 4,096 BF16);
 * the logits of its ceil(8,192 / 255) = 33 requests are smaller. The CUDA graphs (default largest batch 128, under the
 * heuristic's 4,096 and 8,192 tokens) peak at the logits: 128 x 4,096 BF16 hidden states + 128 x 128,256 BF16 logits.
 * The KV fit takes 0.9 of what is left. Qwen3-235B-A22B FP8 under attention DP and EP 8 (hidden 4,096, 128 experts of
 * 1,536, top 8) with max_num_tokens 2,048 a GPU and no graphs: the MoE buffers hold the 8 x 2,048 = 16,384 gathered
 * tokens (FP8), the workspace of 16,384 x 8 expanded rows (FP8 input, BF16 2 x 1,536 first GEMM output, FP8 1,536
 * activation, BF16 4,096 second GEMM output) and the BF16 output; moe_max_num_tokens 4,096 sizes them for 4,096. */
static void test_engine_memory_by_hand(void) {
  char t[1024];
  plan_text(t, sizeof t, "h100x8-nvswitch", 1, 128, 128, "{}", "\"quantization\":\"fp8\",\"kv_cache\":\"fp8\"");
  ts_err e = {0};
  ASSERT_OK(load_text(t, &e), e);
  const plan_infer_inflight *f = &g_plan.inflight;
  CU_ASSERT_EQUAL(f->max_num_tokens, 8192);
  CU_ASSERT_EQUAL(f->cuda_graph_max_batch, 128);
  CU_ASSERT_EQUAL(f->cuda_graph_batch, 128);
  CU_ASSERT_EQUAL(f->moe_tokens, 8192);
  const double T = 8192, stream = 4.0 * T * 4096;
  NEAR(f->profile_peak_bytes, stream + 2.0 * T * 2 * 14336 + T * 14336, 1e-12);
  NEAR(f->cuda_graph_bytes, 2.0 * 128 * 4096 + 2.0 * 128 * 128256, 1e-12);
  plan_infer q = g_plan;
  q.batch = 1;
  plan_infer_memory mem;
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&q, &mem), 0);
  const double left = 80 * 1073741824.0 - mem.weights - mem.overhead - f->profile_peak_bytes - f->cuda_graph_bytes;
  NEAR(f->kv_free_bytes, left, 1e-12);
  CU_ASSERT_EQUAL(f->kv_fit_batch, (int)floor(0.9 * left / (2.0 * 32 * 8 * 128 * (1 + 4.0 / 128) * 256)));
  /* 8,192-batch graphs: capped at the heuristic's 4,096; the logits of 4,096 rows */
  plan_text(t, sizeof t, "h100x8-nvswitch", 1, 128, 128, "{\"cuda_graph_max_batch\":8192}",
            "\"quantization\":\"fp8\",\"kv_cache\":\"fp8\"");
  ASSERT_OK(load_text(t, &e), e);
  CU_ASSERT_EQUAL(f->cuda_graph_batch, 4096);
  NEAR(f->cuda_graph_bytes, 2.0 * 4096 * 4096 + 2.0 * 4096 * 128256, 1e-12);
  /* no graphs */
  plan_text(t, sizeof t, "h100x8-nvswitch", 1, 128, 128, "{\"cuda_graph_max_batch\":0}",
            "\"quantization\":\"fp8\",\"kv_cache\":\"fp8\"");
  ASSERT_OK(load_text(t, &e), e);
  CU_ASSERT_EQUAL(f->cuda_graph_batch, 0);
  CU_ASSERT_EQUAL(f->cuda_graph_bytes, 0.0);
  /* attention DP and EP 8: the MoE's buffers for the group's tokens */
  for (int i = 0; i < 2; i++) {
    snprintf(t, sizeof t,
             "{\"schema\":1,\"kind\":\"inference\",\"model\":\"qwen3-235b-a22b\",\"cluster\":\"h100x8-nvswitch\","
             "\"layout\":{\"tp\":8,\"ep\":8,\"attention_dp\":true},\"batch\":{\"prompt\":128,\"generate\":2048},"
             "\"quantization\":\"fp8\",\"kv_cache\":\"fp8\",\"prefill_attention\":\"flash\",\"inflight\":"
             "{\"max_num_tokens\":2048,\"cuda_graph_max_batch\":0%s}}", i ? ",\"moe_max_num_tokens\":4096" : "");
    ASSERT_OK(load_text(t, &e), e);
    const double M = i ? 4096 : 16384, R = 8 * M, h = 4096, fe = 1536;
    CU_ASSERT_EQUAL(f->moe_tokens, (int)M);
    NEAR(f->profile_peak_bytes,
         4.0 * 2048 * h + (M * h + (R * h + 2.0 * R * 2 * fe + R * fe + 2.0 * R * h) + 2.0 * M * h), 1e-12);
    CU_ASSERT_EQUAL(f->cuda_graph_bytes, 0.0);
  }
}

/* Where prefill is negligible (a 16-token prompt, 4,000 generated), a step without a prompt is exactly the static
 * batch's decode step at the mean cached length (the same batch, prompt 2,015 + 1 = 16 + 4,000 / 2 keys), and the
 * throughput is the batch over that step within the prompt steps' share. */
static void test_static_limit(void) {
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(CALIBRATION_DIR "/h200-nvlink.json", &cal, &e), 0);
  char t[1024];
  plan_text(t, sizeof t, "h200x8-nvswitch", 1, 16, 4000, "{\"max_batch\":64}", "");
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  sim_inflight_result r;
  CU_ASSERT_EQUAL_FATAL(sim_inflight_predict(&g_plan, &cal, NULL, &r, &e), 0);
  CU_ASSERT_EQUAL(r.shape[0].dec_seqs, 64);
  CU_ASSERT_EQUAL(r.shape[0].kv_len, 2016);
  char s[1024];
  snprintf(s, sizeof s,
           "{\"schema\":1,\"kind\":\"inference\",\"model\":\"llama3-8b\",\"cluster\":\"h200x8-nvswitch\","
           "\"layout\":{\"tp\":1},\"batch\":{\"size\":64,\"prompt\":2015,\"generate\":2},\"prefill_attention\":\"flash\"}");
  static plan_infer st;
  CU_ASSERT_EQUAL_FATAL(plan_infer_from_json_text(s, strlen(s), "s.json", NULL, NULL, &st, &e), 0);
  sim_infer_opts o = {.prefill_clock_off = true};
  sim_infer_result sr;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&st, &cal, &o, NULL, &sr, &e), 0);
  NEAR(r.price[0].total_s, sr.tpot_s, 1e-9);
  NEAR(r.tokens_per_s, 64.0 / sr.tpot_s, 0.01);
  CU_ASSERT(r.tokens_per_s < 64.0 / sr.tpot_s); /* the prompt steps cost something */
  schema_calibration_free(&cal);
}

/* Each malformed in-flight plan is bad input naming the field. */
static void test_malformed_rejected(void) {
  static const struct {
    int tp, prompt;
    const char *inflight, *extra, *field;
  } cases[] = {
      {1, 128, "{\"max_batch\":0}", "", "inflight.max_batch"},
      {1, 128, "{\"max_num_tokens\":-5}", "", "inflight.max_num_tokens"},
      {1, 128, "{\"max_num_tokens\":100}", "", "inflight.max_num_tokens"}, /* below the prompt */
      {1, 128, "{\"kv_cache_fraction\":1.5}", "", "inflight.kv_cache_fraction"},
      {1, 128, "{\"kv_cache_fraction\":1e-6}", "", "inflight.kv_cache_fraction"}, /* holds no sequence */
      {1, 128, "{\"tokens_per_block\":0}", "", "inflight.tokens_per_block"},
      {1, 128, "{\"requests\":0}", "", "inflight.requests"},
      {1, 128, "{\"cuda_graph_max_batch\":-1}", "", "inflight.cuda_graph_max_batch"},
      {1, 128, "{\"cuda_graph_max_batch\":1.5}", "", "inflight.cuda_graph_max_batch"},
      {1, 128, "{\"moe_max_num_tokens\":0}", "", "inflight.moe_max_num_tokens"},
      {1, 128, "{\"moe_max_num_tokens\":4096}", "", "inflight.moe_max_num_tokens"}, /* a dense model */
      {1, 128, "{\"chunked_prefill\":true}", "", "inflight.chunked_prefill"},
      {1, 128, "7", "", "inflight"},
      {-1, 128, "{}", "", "layout.pp"},
      {1, 128, "{}", "\"prefill_attention\":\"executor\"", "prefill_attention"},
      {2, 128, "{}", "\"codec\":{\"kind\":\"caat\",\"p\":0.5}", "codec.kind"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char t[1024];
    plan_text(t, sizeof t, "h200x8-nvswitch", cases[i].tp, cases[i].prompt, 128, cases[i].inflight, cases[i].extra);
    ts_err e = {0};
    CU_ASSERT_EQUAL(load_text(t, &e), -1);
    CU_ASSERT_EQUAL(e.bad_input, 1);
    ASSERT_MSG(e, cases[i].field);
  }
  /* batch.size with an inflight object: the batch is the engine's */
  const char *t = "{\"schema\":1,\"kind\":\"inference\",\"model\":\"llama3-8b\",\"cluster\":\"h200x8-nvswitch\","
                  "\"layout\":{\"tp\":1},\"batch\":{\"size\":8,\"prompt\":128,\"generate\":128},"
                  "\"prefill_attention\":\"flash\",\"inflight\":{}}";
  ts_err e = {0};
  CU_ASSERT_EQUAL(load_text(t, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "batch.size"));
}

/* tacosim simulate: an in-flight plan's JSON carries mode, the resolved engine settings and the options; a bad field
 * is exit 2; --decode graph is refused. */
static void test_command(void) {
  char dir[] = "/tmp/test_inflight.XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  char plan[512], bad[512], json[512], cmd[2048], t[1024];
  snprintf(plan, sizeof plan, "%s/p.json", dir);
  snprintf(bad, sizeof bad, "%s/bad.json", dir);
  snprintf(json, sizeof json, "%s/r.json", dir);
  plan_text(t, sizeof t, "h200x8-nvswitch", 1, 128, 128, "{\"max_batch\":32}", "");
  FILE *f = fopen(plan, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(t, f);
  fclose(f);
  plan_text(t, sizeof t, "h200x8-nvswitch", 1, 128, 128, "{\"max_batch\":0}", "");
  f = fopen(bad, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(t, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s --json %s > /dev/null 2>&1", plan, json);
  CU_ASSERT_EQUAL(system(cmd), 0);
  json_error_t je;
  json_t *o = json_load_file(json, 0, &je);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "mode")), "inflight");
  CU_ASSERT_PTR_NOT_NULL(strstr(json_string_value(json_object_get(o, "options")), "--transfer"));
  json_t *in = json_object_get(o, "inflight");
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(in, "max_batch")), 32);
  CU_ASSERT(json_number_value(json_object_get(o, "tokens_per_s")) > 0);
  json_decref(o);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s > /dev/null 2>&1", bad);
  int st = system(cmd);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s --decode graph > /dev/null 2>&1", plan);
  st = system(cmd);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  unlink(json);
  unlink(plan);
  unlink(bad);
  rmdir(dir);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("inflight", NULL, NULL);
  CU_add_test(s, "steady state of a tiny case by hand", test_steady_state_by_hand);
  CU_add_test(s, "a finite run by hand", test_finite_run_by_hand);
  CU_add_test(s, "trtllm-bench's heuristic and the KV fit by hand", test_engine_heuristic_by_hand);
  CU_add_test(s, "the engine's memory before the KV cache by hand", test_engine_memory_by_hand);
  CU_add_test(s, "negligible prefill: the static batch's decode step", test_static_limit);
  CU_add_test(s, "malformed in-flight plans rejected naming the field", test_malformed_rejected);
  CU_add_test(s, "tacosim simulate on an in-flight plan", test_command);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

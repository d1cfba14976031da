/* test_infer_mla.c — inference plans of MLA models (sim/INFERENCE.md, "MLA"): DeepSeek-V3's latent KV cache by
 * hand (kv_lora_rank + qk_rope_head_dim = 576 elements a token a layer, the same on every TP rank; BF16 and FP8),
 * in the plan's memory; a decode step at TP 8 above the read floor of its FP8 weights and latent cache, its
 * absorbed decode attention memory-bound at 16 query heads a GPU and compute-bound at 128 (one layer, TP 1); a
 * dense GQA model's cache as before. Predictions use the shipped H200 calibration (what a plan on h200x8-nvswitch
 * reads by default). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan_infer.h"
#include "sim_infer.h"
#include "test_check.h"

static plan_infer g_plan;

/* An inference plan of model on h200x8-nvswitch: tp, batch, prompt, generate 16, kv_cache kv, FP8 weights,
 * `extra` more fields (or ""). */
static int load(const char *model, int tp, int batch, int prompt, const char *kv, const char *extra, ts_err *e) {
  char t[1024];
  snprintf(t, sizeof t,
           "{\"schema\":1,\"kind\":\"inference\",\"model\":\"%s\",\"cluster\":\"h200x8-nvswitch\",\"layout\":{\"tp\":%d,"
           "\"pp\":1},\"batch\":{\"size\":%d,\"prompt\":%d,\"generate\":16},\"quantization\":\"fp8\","
           "\"kv_cache\":\"%s\",\"prefill_attention\":\"flash\"%s}",
           model, tp, batch, prompt, kv, extra);
  return plan_infer_from_json_text(t, strlen(t), "p.json", NULL, NULL, &g_plan, e);
}

/* DeepSeek-V3 (models/deepseek-v3.json: 61 layers, kv_lora_rank 512, qk_rope_head_dim 64), batch 32, prompt 128
 * + generate 256 = 384 tokens: 61 x 32 x 384 x 576 = 431,751,168 elements, 863,502,336 bytes in BF16 and
 * 431,751,168 in FP8, on each GPU at TP 8 as at TP 4 (the latent is not split over the heads). The plan's
 * memory holds prompt + generate = 144 tokens of it: 61 x 32 x 144 x 1152 = 323,813,376 bytes. A cache of full
 * per-head K and V (2 x 128 / 8 heads x 192) would be 12,288 bytes a token a layer on each of 8 GPUs, not 1,152. */
static void test_latent_bytes(void) {
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", 8, 32, 128, "bf16", "", &e), 0);
  NEAR(plan_infer_kv_bytes(&g_plan, 384), 863502336.0, 1e-15);
  NEAR(plan_infer_kv_bytes(&g_plan, 1) / 61 / 32, 1152.0, 1e-15);
  plan_infer_memory mem;
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&g_plan, &mem), 0);
  NEAR(mem.kv_cache, 61.0 * 32 * 144 * 1152, 1e-15); /* the plan's prompt 128 + generate 16 */
  NEAR(mem.kv_cache, 323813376.0, 1e-15);
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", 8, 32, 128, "fp8", "", &e), 0);
  NEAR(plan_infer_kv_bytes(&g_plan, 384), 431751168.0, 1e-15);
  /* TP 4 (its FP8 weights exceed an H200 at full depth: 10 layers, 10 x 32 x 384 x 576 x 2 = 141,557,760) */
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", 4, 32, 128, "bf16", ",\"layers_override\":10", &e), 0);
  NEAR(plan_infer_kv_bytes(&g_plan, 384), 141557760.0, 1e-15);
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", 8, 32, 128, "bf16", ",\"layers_override\":10", &e), 0);
  NEAR(plan_infer_kv_bytes(&g_plan, 384), 141557760.0, 1e-15);
}

/* A GQA model keeps its per-head cache: Llama-3-8B (32 layers, 8 KV heads of 128) at TP 2, batch 4, 384 tokens:
 * 2 x 32 x 4 x 384 x 4 x 128 x 2 = 100,663,296 bytes. */
static void test_gqa_unchanged(void) {
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load("llama3-8b", 2, 4, 128, "bf16", "", &e), 0);
  NEAR(plan_infer_kv_bytes(&g_plan, 384), 100663296.0, 1e-15);
}

static void predict(const schema_calibration *cal, sim_infer_result *r) {
  ts_err e = {0};
  int rc = sim_infer_predict(&g_plan, cal, NULL, NULL, r, &e);
  ASSERT_OK(rc, e);
}

/* DeepSeek-V3 at TP 8 on H200s, FP8 weights, batch 32, prompt 2048, generate 16: the 15 decode steps attend over
 * 2049..2063 tokens, 2056 on average; a step reads 61 x 32 x 2056 x 576 x 2 = 4,623,335,424 bytes of latent cache
 * (0.963 ms at 4.8 TB/s) where per-head K and V would be 10.7x that. Its FP8 weights (test_infer_moe_fp8.c's
 * per-GPU figures): 61 layers' attention 36,634,624 B, 3 dense layers' fc 49,545,216 B, 58 MoE layers' shared
 * expert 5,505,024 B and, of 256 experts, 256 (1 - (255/256)^256) = 162.0 with rows, 162 x 5,505,024 B; in BF16
 * 58 routers (58 x 256 x 7168 x 2 B) and the output layer (16,256 x 7168 x 2 B): 54,873,751,552 bytes. The step
 * takes at least (weights + latent) / 4.8 TB/s = 12.40 ms, its decode attention at least the latent read. At 16
 * query heads a GPU (2 x 32 x 2056 x 16 x 1088 = 2.29 GFLOP a layer, 2.3 us at 989 TFLOP/s, against 15.8 us of
 * reading) the attention is the read: at TP 4 (32 heads a GPU, the same latent on each GPU) it takes as long.
 * An FP8 latent reads half the bytes and takes less. */
static void test_decode_step(void) {
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(CALIBRATION_DIR "/h200-nvlink.json", &cal, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", 8, 32, 2048, "bf16", "", &e), 0);
  sim_infer_result r;
  predict(&cal, &r);
  const double hbm = g_plan.cluster.gpu.hbm_gbps * 1e9;
  NEAR(hbm, 4.8e12, 1e-12);
  const double latent = 61.0 * 32 * 2056 * 576 * 2;
  NEAR(latent, 4623335424.0, 1e-15);
  const double weights = 61.0 * 36634624 + 3.0 * 49545216 + 58.0 * (162.0 * 5505024 + 5505024) +
                         58.0 * 256 * 7168 * 2 + 16256.0 * 7168 * 2;
  NEAR(weights, 54873751552.0, 1e-15);
  fprintf(stderr, "\n  deepseek-v3 tp 8 b32 p2048: TPOT %.3f ms (floor %.3f), decode attention %.3f ms (read %.3f)\n",
          r.tpot_s * 1e3, (weights + latent) / hbm * 1e3, r.decode.attention_s * 1e3, latent / hbm * 1e3);
  CU_ASSERT(r.tpot_s >= (weights + latent) / hbm);
  CU_ASSERT(r.decode.attention_s >= latent / hbm);
  /* memory-bound: 10 layers at TP 8 and at TP 4 take the same */
  sim_infer_result t8, t4;
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", 8, 32, 2048, "bf16", ",\"layers_override\":10", &e), 0);
  predict(&cal, &t8);
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", 4, 32, 2048, "bf16", ",\"layers_override\":10", &e), 0);
  predict(&cal, &t4);
  NEAR(t4.decode.attention_s, t8.decode.attention_s, 1e-12);
  NEAR(t8.decode.attention_s, r.decode.attention_s * 10 / 61, 1e-12);
  /* FP8 latent: half the read */
  sim_infer_result f;
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", 8, 32, 2048, "fp8", "", &e), 0);
  predict(&cal, &f);
  CU_ASSERT(f.decode.attention_s >= latent / 2 / hbm);
  CU_ASSERT(f.decode.attention_s < r.decode.attention_s);
  schema_calibration_free(&cal);
}

/* One layer at TP 1: 128 query heads over the latent, 2 x 128 x 1088 = 278,528 FLOPs a cached token against
 * 1,152 bytes (BF16) or 576 (FP8): 242 or 484 FLOP a byte, against the H200's 989 TFLOP/s / 4.8 TB/s = 206
 * (FlashMLA's analysis: h_q >= 128 is compute-bound on an H800). Batch 128, one step over 4096 tokens, FP8 latent:
 * 2 x 128 x 4096 x 128 x 1088 = 146,028,888,064 FLOPs, 147.7 us at 989 TFLOP/s, against 128 x 4096 x 576 =
 * 301,989,888 bytes, 62.9 us at 4.8 TB/s: the attention is priced at its FLOPs and a launch. */
static void test_compute_bound(void) {
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(CALIBRATION_DIR "/h200-nvlink.json", &cal, &e), 0);
  char t[1024];
  snprintf(t, sizeof t,
           "{\"schema\":1,\"kind\":\"inference\",\"model\":\"deepseek-v3\",\"cluster\":\"h200x8-nvswitch\","
           "\"layout\":{\"tp\":1,\"pp\":1},\"batch\":{\"size\":128,\"prompt\":4095,\"generate\":2},"
           "\"kv_cache\":\"fp8\",\"prefill_attention\":\"flash\",\"layers_override\":1}");
  CU_ASSERT_EQUAL_FATAL(plan_infer_from_json_text(t, strlen(t), "p.json", NULL, NULL, &g_plan, &e), 0);
  sim_infer_result r;
  predict(&cal, &r);
  const double flops = 2.0 * 128 * 4096 * 128 * 1088, bytes = 128.0 * 4096 * 576;
  NEAR(flops, 146028888064.0, 1e-15);
  NEAR(plan_infer_kv_bytes(&g_plan, 4096), bytes, 1e-15);
  const double peak = g_plan.cluster.gpu.bf16_tflops * 1e12, hbm = g_plan.cluster.gpu.hbm_gbps * 1e9;
  fprintf(stderr, "\n  deepseek-v3 1 layer tp 1 b128 fp8: decode attention %.2f us (FLOPs %.2f us, read %.2f us)\n",
          r.decode.attention_s * 1e6, flops / peak * 1e6, bytes / hbm * 1e6);
  CU_ASSERT(flops / peak > bytes / hbm);
  CU_ASSERT(r.decode.attention_s >= flops / peak);
  CU_ASSERT(r.decode.attention_s <= flops / peak + 10e-6);
  schema_calibration_free(&cal);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("infer_mla", NULL, NULL);
  CU_add_test(s, "DeepSeek-V3 latent KV cache bytes by hand (BF16, FP8, any TP)", test_latent_bytes);
  CU_add_test(s, "GQA cache unchanged", test_gqa_unchanged);
  CU_add_test(s, "DeepSeek-V3 TP 8 decode step above its read floor; absorbed attention at its read",
              test_decode_step);
  CU_add_test(s, "absorbed MLA decode at 128 heads a GPU: compute-bound", test_compute_bound);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

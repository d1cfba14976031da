/* test_infer_nvfp4.c — inference plans with "quantization": "nvfp4" (sim/INFERENCE.md, "NVFP4 weights"): the
 * weights' bytes by hand (the linear layers at 4.5 bits, the rest BF16), the GEMM price against the roofline rule
 * (sim_gemm_fp4_transfer_us: a compute-bound GEMM at the FP8 time x fp8 / fp4 peak, a memory-bound one by the bytes
 * it reads), trtllm-bench's batch heuristic with NVFP4 weights at 0.5 byte a parameter, a decode step on a B200
 * above its read floor and below the FP8 step, and the refusal on GPUs without FP4 tensor cores. Predictions use
 * the default calibration of a b200x8-nvswitch plan (the H200's measured file, moved to the B200 by the
 * catalogue). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan_infer.h"
#include "sim_costs.h"
#include "sim.h"
#include "sim_infer.h"
#include "test_check.h"

static plan_infer g_plan;

/* An inference plan of model on cluster (tp, batch 1 or in flight, prompt, generate), quantization quant. */
static int load(const char *model, const char *cluster, int tp, int prompt, int generate, const char *quant,
                bool inflight, ts_err *e) {
  char t[1024];
  snprintf(t, sizeof t,
           "{\"schema\":1,\"kind\":\"inference\",\"model\":\"%s\",\"cluster\":\"%s\",\"layout\":{\"tp\":%d,"
           "\"pp\":1},\"batch\":{%s\"prompt\":%d,\"generate\":%d},\"quantization\":\"%s\",\"kv_cache\":\"fp8\","
           "\"prefill_attention\":\"flash\"%s}",
           model, cluster, tp, inflight ? "" : "\"size\":1,", prompt, generate, quant, inflight ? ",\"inflight\":{}" : "");
  return plan_infer_from_json_text(t, strlen(t), "p.json", NULL, NULL, &g_plan, e);
}

static double weights_bytes(const char *quant) {
  ts_err e = {0};
  plan_infer_memory mem;
  int rc = load("llama3-8b", "b200x8-nvswitch", 1, 128, 16, quant, false, &e);
  ASSERT_OK(rc, e);
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&g_plan, &mem), 0);
  return mem.weights;
}

/* Llama-3 8B on one B200: the layers' linear weights are 32 x 4096 x (6144 + 4096 + 28672 + 14336) =
 * 6,979,321,856 parameters, at 0.5625 byte each under NVFP4 (a 4-bit E2M1 value and an E4M3 scale per 16):
 * 3,925,868,544 bytes. The rest is BF16: the embedding and the output layer (2 x 128,256 x 4,096 =
 * 1,050,673,152) and the norms (32 x 2 x 4,096 + 4,096 = 266,240), 2,101,878,784 bytes. NVFP4 weights:
 * 6,027,747,328 bytes; FP8 9,081,200,640; BF16 16,060,522,496. */
static void test_weights(void) {
  const double linear = 32.0 * 4096.0 * (6144.0 + 4096.0 + 28672.0 + 14336.0), rest = 1050673152.0 + 266240.0;
  NEAR(linear, 6979321856.0, 1e-15);
  NEAR(weights_bytes("nvfp4"), 6027747328.0, 1e-12);
  NEAR(weights_bytes("nvfp4"), 0.5625 * linear + 2.0 * rest, 1e-12);
  NEAR(weights_bytes("fp8"), 9081200640.0, 1e-12);
  NEAR(weights_bytes("none"), 16060522496.0, 1e-12);
}

/* The rule on the B200 (catalogue: FP8 4,500, FP4 9,000 TFLOP/s dense, 8,000 GB/s). 8192^3: 1.1e12 FLOPs take 244
 * us at the FP8 peak against 25 us for its 201 MB of FP8 operands and BF16 output, and 122 us at the FP4 peak
 * against 26 us: compute-bound on both sides, so half the FP8 time. m = 1, n = k = 8192 (a decode GEMM): 2 x 67 M
 * FLOPs are 0.03 us, its bytes (67,117,056 elements of A and B, 8,192 of C) are not: FP8 reads 67,117,056 + 2 x
 * 8,192 = 67,133,440 bytes, NVFP4 0.5625 x 67,117,056 + 16,384 = 37,769,728, so the time x 37,769,728 /
 * 67,133,440. A GPU without FP4 (the H200: fp4_tflops 0) keeps the FP8 time. */
static void test_gemm_rule(void) {
  topo_gpu b200, h200;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("B200", NULL, &b200, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("H200-SXM", NULL, &h200, &e), 0);
  NEAR(b200.fp4_tflops, 9000.0, 1e-15);
  NEAR(b200.fp4_tflops / b200.fp8_tflops, 2.0, 1e-15);
  CU_ASSERT_EQUAL(h200.fp4_tflops, 0.0);
  NEAR(sim_gemm_fp4_transfer_us(&b200, 8192, 8192, 8192, 300.0), 150.0, 1e-12);
  NEAR(sim_gemm_fp4_transfer_us(&b200, 1, 8192, 8192, 20.0), 20.0 * 37769728.0 / 67133440.0, 1e-12);
  NEAR(sim_gemm_fp4_transfer_us(&h200, 1, 8192, 8192, 20.0), 20.0, 1e-15);
}

/* trtllm-bench's max_batch_size for Llama 3.3 70B (70,553,706,496 parameters, tests: model_params_total) on one
 * B200, ISL 128, OSL 2048, FP8 KV cache (tuning.py at 04cba882: BYTES_PER_ELEM, NVFP4 0.5): 180 GiB less
 * 70,553,706,496 x 0.5 B (32.85 GiB) = 147.15 GiB, x 0.90 = 132.43 GiB for the cache, a request's 2,176 tokens x
 * 2 x 80 layers x 8 KV heads x 128 x 1 B = 0.332 GiB: 398.9 requests, rounded up to 128s: 512. With FP8 weights
 * (1 byte a parameter, 65.71 GiB) 309.8 requests: 384. */
static void test_heuristic(void) {
  ts_err e = {0};
  int rc = load("experiments/published/inflight-infer/models/llama3.3-70b.json", "b200x8-nvswitch", 1, 128, 2048,
                "nvfp4", true, &e);
  ASSERT_OK(rc, e);
  NEAR(model_params_total(&g_plan.model), 70553706496.0, 1e-12);
  CU_ASSERT_EQUAL(g_plan.inflight.engine_max_batch, 512);
  CU_ASSERT_EQUAL_FATAL(load("experiments/published/inflight-infer/models/llama3.3-70b.json", "b200x8-nvswitch", 1,
                             128, 2048, "fp8", true, &e), 0);
  CU_ASSERT_EQUAL(g_plan.inflight.engine_max_batch, 384);
}

/* A decode step of Llama-3 8B at batch 1 on one B200 reads the NVFP4 linear weights (3,925,868,544 B) and the BF16
 * output layer (128,256 x 4,096 x 2 = 1,050,673,152 B): its GEMMs take at least 4,976,541,696 B / 8 TB/s = 0.622
 * ms, and less than the FP8 step's GEMMs (8.03 GB); the decode attention does not move. */
static void test_decode_step(void) {
  sim_infer_result f4, f8;
  ts_err e = {0};
  const char *quant[] = {"nvfp4", "fp8"};
  sim_infer_result *out[] = {&f4, &f8};
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL_FATAL(load("llama3-8b", "b200x8-nvswitch", 1, 128, 16, quant[i], false, &e), 0);
    schema_calibration cal;
    sim_cost_source src;
    CU_ASSERT_EQUAL_FATAL(sim_load_costs(NULL, &g_plan.cluster, SIM_TRANSFER_ROOFLINE, &cal, &src, &e), 0);
    int rc = sim_infer_predict(&g_plan, &cal, NULL, NULL, out[i], &e);
    ASSERT_OK(rc, e);
    schema_calibration_free(&cal);
  }
  const double floor = (3925868544.0 + 1050673152.0) / 8e12;
  fprintf(stderr, "\n  llama3-8b b200 decode GEMMs: nvfp4 %.3f ms (floor %.3f), fp8 %.3f ms; step %.3f / %.3f ms\n",
          f4.decode.gemm_s * 1e3, floor * 1e3, f8.decode.gemm_s * 1e3, f4.tpot_s * 1e3, f8.tpot_s * 1e3);
  CU_ASSERT(f4.decode.gemm_s >= floor);
  CU_ASSERT(f4.decode.gemm_s < f8.decode.gemm_s);
  CU_ASSERT(f4.tpot_s < f8.tpot_s);
  NEAR(f4.decode.attention_s, f8.decode.attention_s, 1e-12);
}

/* NVFP4 on a GPU without FP4 tensor cores (H100, H200, A100) is an error naming the file, the field and the
 * catalogue figure; an unknown value is refused too. */
static void test_refused(void) {
  static const char *const clusters[] = {"h100x8-nvswitch", "h200x8-nvswitch", "a100x8-nvswitch"};
  for (int i = 0; i < 3; i++) {
    ts_err e = {0};
    CU_ASSERT_EQUAL(load("llama3-8b", clusters[i], 1, 128, 16, "nvfp4", false, &e), -1);
    CU_ASSERT_EQUAL(e.bad_input, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "p.json"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "quantization"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "fp4_tflops"));
  }
  ts_err e = {0};
  CU_ASSERT_EQUAL(load("llama3-8b", "b200x8-nvswitch", 1, 128, 16, "fp4", false, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "quantization"));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("infer_nvfp4", NULL, NULL);
  CU_add_test(s, "NVFP4 weights' bytes by hand", test_weights);
  CU_add_test(s, "NVFP4 GEMM price against the roofline rule", test_gemm_rule);
  CU_add_test(s, "trtllm-bench's batch heuristic with NVFP4 weights", test_heuristic);
  CU_add_test(s, "NVFP4 decode step on a B200: above its read floor, below FP8", test_decode_step);
  CU_add_test(s, "NVFP4 refused without FP4 tensor cores", test_refused);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

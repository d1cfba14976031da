/* test_infer_moe_fp8.c — inference plans of MoE models with "quantization": "fp8" (sim/INFERENCE.md, "FP8
 * weights"), and the fused MoE kernel's prefill reads: the weights' bytes by hand (the experts', the shared
 * experts' and the attention's linear layers at 1 byte a parameter, the router, embedding, output layer and norms
 * at 2), a decode step of FP8 experts above the read floor of its active experts' FP8 bytes and below the BF16
 * step, under both moe_kernel settings, and the refusal on a GPU without FP8 tensor cores. Predictions use the
 * shipped H100 calibration (what a plan on h100x8-nvswitch reads by default), the fused prefill the H200's moved
 * to the GB200. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan_infer.h"
#include "sim.h"
#include "sim_costs.h"
#include "sim_infer.h"
#include "test_check.h"

static plan_infer g_plan;

/* An inference plan of model on cluster (tp, batch, prompt, generate), quantization quant, moe_kernel kernel. */
static int load(const char *model, const char *cluster, int tp, int pp, int batch, int prompt, const char *quant,
                const char *kernel, ts_err *e) {
  char t[1024];
  snprintf(t, sizeof t,
           "{\"schema\":1,\"kind\":\"inference\",\"model\":\"%s\",\"cluster\":\"%s\",\"layout\":{\"tp\":%d,"
           "\"pp\":%d},\"batch\":{\"size\":%d,\"prompt\":%d,\"generate\":16},\"quantization\":\"%s\","
           "\"moe_kernel\":\"%s\",\"prefill_attention\":\"flash\"}",
           model, cluster, tp, pp, batch, prompt, quant, kernel);
  return plan_infer_from_json_text(t, strlen(t), "p.json", NULL, NULL, &g_plan, e);
}

/* (on H200s: Mixtral-8x7B's BF16 weights, 93 GB, do not fit one H100) */
static double weights_bytes_pp(const char *model, int tp, int pp, const char *quant) {
  ts_err e = {0};
  plan_infer_memory mem;
  CU_ASSERT_EQUAL_FATAL(load(model, "h200x8-nvswitch", tp, pp, 1, 128, quant, "fused", &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&g_plan, &mem), 0);
  return mem.weights;
}

static double weights_bytes(const char *model, int tp, const char *quant) { return weights_bytes_pp(model, tp, 1, quant); }

/* Mixtral-8x7B on one GPU (models/mixtral-8x7b.json): a layer's linear layers are qkv 4096 x (4096 + 2 x 1024) =
 * 25,165,824, attention output 4096 x 4096 = 16,777,216 and 8 experts x 3 x 4096 x 14336 = 1,409,286,144
 * parameters, 1,451,229,184 in all; 32 layers hold 46,439,333,888, one byte each under FP8. The rest stays BF16:
 * the embedding and the output layer (2 x 32,000 x 4,096 = 262,144,000), the router (32 x 8 x 4,096 = 1,048,576)
 * and the norms (32 x 2 x 4,096 + 4,096 = 266,240), 263,458,816 parameters, 526,917,632 bytes. FP8 weights:
 * 46,966,251,520 bytes; BF16: 93,405,585,408. Under TP 2 each GPU holds half of every linear layer: 23,219,666,944
 * FP8 bytes, plus half the embedding and output layer and the whole router and norms in BF16. Under PP 2 the
 * largest stage is the last: 16 layers' linear layers (23,219,666,944 FP8 bytes), their routers and norms
 * (524,288 + 131,072), the final norm (4,096) and the output layer (131,072,000) in BF16. */
static void test_mixtral_bytes(void) {
  const double linear = 32.0 * (25165824.0 + 16777216.0 + 1409286144.0), rest = 262144000.0 + 1048576.0 + 266240.0;
  NEAR(linear, 46439333888.0, 1e-15);
  NEAR(weights_bytes("mixtral-8x7b", 1, "fp8"), linear + 2.0 * rest, 1e-12);
  NEAR(weights_bytes("mixtral-8x7b", 1, "none"), 2.0 * (linear + rest), 1e-12);
  NEAR(weights_bytes("mixtral-8x7b", 2, "fp8"), linear / 2 + 2.0 * (262144000.0 / 2 + 1048576.0 + 266240.0), 1e-12);
  NEAR(weights_bytes_pp("mixtral-8x7b", 1, 2, "fp8"), linear / 2 + 2.0 * (524288.0 + 131072.0 + 4096.0 + 131072000.0),
       1e-12);
}

/* Qwen3-30B-A3B on one GPU (models/qwen3-30b-a3b.json: 48 layers, hidden 2048, 32 heads and 4 KV heads of 128,
 * 128 experts of 768, vocabulary 151,936): a layer's linear layers are qkv 2048 x (32 + 8) x 128 = 10,485,760,
 * attention output 4096 x 2048 = 8,388,608 and 128 x 3 x 2048 x 768 = 603,979,776 experts' parameters,
 * 622,854,144 in all; 48 layers hold 29,896,998,912, one byte each. BF16: the embedding and output
 * layer 2 x 151,936 x 2,048 = 622,329,856, the router 48 x 128 x 2,048 = 12,582,912, the norms 48 x 2 x 2,048 +
 * 2,048 = 198,656 and the QK norm's 48 x 2 x 128 = 12,288: 635,123,712 parameters, 1,270,247,424 bytes. FP8
 * weights: 31,167,246,336 bytes. */
static void test_qwen3_bytes(void) {
  const double linear = 48.0 * (10485760.0 + 8388608.0 + 603979776.0),
               rest = 622329856.0 + 12582912.0 + 198656.0 + 12288.0;
  NEAR(linear, 29896998912.0, 1e-15);
  NEAR(weights_bytes("qwen3-30b-a3b", 1, "fp8"), linear + 2.0 * rest, 1e-12);
  NEAR(weights_bytes("qwen3-30b-a3b", 1, "fp8"), 31167246336.0, 1e-12);
  NEAR(weights_bytes("qwen3-30b-a3b", 1, "none") - weights_bytes("qwen3-30b-a3b", 1, "fp8"), linear, 1e-12);
}

/* DeepSeek-V3 at TP 8 (models/deepseek-v3.json: 61 layers, the first 3 dense, hidden 7168, 128 heads, MLA with
 * q_lora 1536, kv_lora 512, nope 128, rope 64, v 128; 256 experts of 2048 and one shared, vocabulary 129,280).
 * A GPU's FP8 parameters: MLA's q_a 7168 x 1536 = 11,010,048 and kv_a 7168 x 576 = 4,128,768 (whole on every
 * rank), q_b 1536 x 16 x 192 = 4,718,592, kv_b 512 x 16 x 256 = 2,097,152, attention output 2048 x 7168 =
 * 14,680,064: 36,634,624 a layer; an MoE layer's 256 experts x 3 x 7168 x 256 = 1,409,286,144 and the shared
 * expert's 3 x 7168 x 256 = 5,505,024; a dense layer's fc1 / fc2 3 x 7168 x 2304 = 49,545,216. 58 x
 * 1,451,425,792 + 3 x 86,179,840 = 84,441,235,456 bytes. BF16: the embedding and output layer, each GPU's 16,160
 * rows padded to 16,256 (a multiple of 128, as Megatron pads the vocabulary: model_vocab_per_gpu), 2 x 16,256 x
 * 7168 = 233,046,016, 58 routers of 256 x 7168 = 106,430,464, the norms 61 x (2 x 7168 + 1536 + 512) + 7168 =
 * 1,006,592: 340,483,072 parameters, 680,966,144 bytes. */
static void test_deepseek_bytes(void) {
  const double fp8 = 58.0 * (36634624.0 + 1409286144.0 + 5505024.0) + 3.0 * (36634624.0 + 49545216.0);
  NEAR(fp8, 84441235456.0, 1e-15);
  NEAR(weights_bytes("deepseek-v3", 8, "fp8"), fp8 + 2.0 * (233046016.0 + 106430464.0 + 1006592.0), 1e-12);
}

static void predict(const char *model, int tp, int batch, const char *quant, const char *kernel,
                    const schema_calibration *cal, sim_infer_result *r) {
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(model, "h100x8-nvswitch", tp, 1, batch, 2048, quant, kernel, &e), 0);
  int rc = sim_infer_predict(&g_plan, cal, NULL, NULL, r, &e);
  ASSERT_OK(rc, e);
}

/* Qwen3-30B-A3B, one H100, batch 10: a decode step sends 10 x 8 copies over 128 experts, of which
 * 128 (1 - (127/128)^80) = 59.5, so 60, get rows (sim_grouped_active); the step's routed experts' GEMMs read
 * 48 layers x 60 experts x 3 x 2048 x 768 = 13,589,544,960 FP8 bytes, 4.06 ms at the H100's 3.35 TB/s. The
 * whole step also reads the attention's FP8 linear layers (48 x 18,874,368 B), the router (48 x 524,288 B) and
 * the output layer (622,329,856 B) in BF16: 15,143,010,304 bytes, 4.52 ms. Under both moe_kernel settings the
 * FP8 step's experts take at least their floor, and the FP8 step at least its floor; the attention is the same.
 * Fused, the FP8 experts and step take less than the BF16 ones. Per-expert, each expert's GEMMs are of one row,
 * where the H100 file measured cuBLASLt's FP8 GEMM slower than its BF16 one (fc1 1 x 1536 x 2048: 9.37 against
 * 6.98 us; fc2 1 x 2048 x 768 by the ratio at the nearest k, 1 x 2048 x 1024): the FP8 experts take more than the
 * BF16 ones, at most the larger of the two ratios times them. Mixtral-8x7B at TP 2, batch 4: each
 * token picks 2 of 8 experts, 8 (1 - (7/8)^8) = 5.2, so 5 experts of a GPU's half of 3 x 4096 x 14336 in each of
 * 32 layers, 14,092,861,440 FP8 bytes, 4.21 ms. */
/* The H100 file's FP8 / BF16 time ratio of one expert GEMM of m rows, as the per-expert price takes it (the
 * inference view's BF16 GEMM, the FP8 key of the shape or sim_gemm_fp8_unmeasured_us). */
static double expert_ratio(const schema_calibration *view, long long m, long long n, long long k) {
  schema_roofline roof;
  schema_lookup lk;
  ts_err e = {0};
  double bf16 = 0, fp8;
  long long at;
  sim_fp8_rule rule;
  sim_roofline_of(&g_plan.cluster, &roof);
  schema_lookup_init(&lk, view, &roof, NULL);
  CU_ASSERT_EQUAL(schema_lookup_gemm(&lk, m, n, k, &bf16, &e), 0);
  if (!schema_gemm_fp8_us(view, m, n, k, &fp8))
    fp8 = sim_gemm_fp8_unmeasured_us(view, &g_plan.cluster.gpu, m, n, k, false, bf16, &rule, &at);
  return fp8 / bf16;
}

static void test_decode_step(void) {
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(CALIBRATION_DIR "/h100-sxm-nvlink.json", &cal, &e), 0);
  static const char *const kernels[] = {"fused", "per-expert"};
  for (int k = 0; k < 2; k++) {
    sim_infer_result f, b;
    predict("qwen3-30b-a3b", 1, 10, "fp8", kernels[k], &cal, &f);
    predict("qwen3-30b-a3b", 1, 10, "none", kernels[k], &cal, &b);
    const double hbm = g_plan.cluster.gpu.hbm_gbps * 1e9;
    NEAR(hbm, 3.35e12, 1e-12);
    const double experts = 13589544960.0, step = experts + 48.0 * 18874368.0 + 48.0 * 524288.0 + 622329856.0;
    NEAR(step, 15143010304.0, 1e-15);
    fprintf(stderr, "\n  qwen3-30b-a3b %s: decode experts fp8 %.3f ms (floor %.3f), bf16 %.3f ms; step fp8 %.3f ms "
            "(floor %.3f), bf16 %.3f ms\n", kernels[k], f.decode.experts_s * 1e3, experts / hbm * 1e3,
            b.decode.experts_s * 1e3, f.tpot_s * 1e3, step / hbm * 1e3, b.tpot_s * 1e3);
    CU_ASSERT(f.decode.experts_s >= experts / hbm);
    CU_ASSERT(f.tpot_s >= step / hbm);
    if (k == 0) {
      CU_ASSERT(f.decode.experts_s < b.decode.experts_s);
      CU_ASSERT(f.tpot_s < b.tpot_s);
    } else { /* per-expert: one row an expert (80 / 60), where the H100's FP8 GEMMs are the slower */
      schema_calibration view;
      CU_ASSERT_EQUAL_FATAL(sim_infer_calibration_view(&cal, &view, &e), 0);
      const double r1 = expert_ratio(&view, 1, 1536, 2048), r2 = expert_ratio(&view, 1, 2048, 768);
      sim_infer_calibration_view_free(&view);
      fprintf(stderr, "  qwen3-30b-a3b per-expert: FP8 / BF16 of one expert's fc1 %.3f, fc2 %.3f; experts %.3f\n", r1,
              r2, f.decode.experts_s / b.decode.experts_s);
      CU_ASSERT(r1 > 1 && r2 > 1);
      CU_ASSERT(f.decode.experts_s > b.decode.experts_s);
      CU_ASSERT(f.decode.experts_s <= b.decode.experts_s * fmax(r1, r2));
    }
    NEAR(f.decode.attention_s, b.decode.attention_s, 1e-12);
    predict("mixtral-8x7b", 2, 4, "fp8", kernels[k], &cal, &f);
    predict("mixtral-8x7b", 2, 4, "none", kernels[k], &cal, &b);
    const double mx = 32.0 * 5 * 3 * 4096 * 7168;
    NEAR(mx, 14092861440.0, 1e-15);
    fprintf(stderr, "  mixtral-8x7b tp 2 %s: decode experts fp8 %.3f ms (floor %.3f), bf16 %.3f ms\n", kernels[k],
            f.decode.experts_s * 1e3, mx / hbm * 1e3, b.decode.experts_s * 1e3);
    CU_ASSERT(f.decode.experts_s >= mx / hbm);
    CU_ASSERT(f.decode.experts_s < b.decode.experts_s);
    CU_ASSERT(f.tpot_s < b.tpot_s);
  }
  schema_calibration_free(&cal);
}

/* DeepSeek-V3 at TP 8 on GB200, batch 2 x 4,096 prompt tokens, BF16, moe_kernel fused: 65,536 routed rows over
 * 256 experts, all active, 256 rows each. The fused kernel reads every expert's weights and its own rows of x and
 * writes its rows: fc1 (gate and up, 2 x 2048 / 8 = 512 columns an expert, k 7168) 2 x (256 x 512 x 7168 + 65,536
 * x 7168 + 65,536 x 512) = 2,885,681,152 B, fc2 (7168 columns, k 256) 2 x (256 x 7168 x 256 + 65,536 x 256 +
 * 65,536 x 7168) = 1,912,602,624 B. Priced as the dense GEMM of the experts side by side alone, which reads x's
 * 8,192 x 7168 once, fc1 came out at 325 us, below its bytes beyond the L2 at the GB200's 8 TB/s (344 us), and
 * the prediction stopped as a simulator failure; with each expert's rows of x read, the 58 MoE layers' routed
 * experts take at least their bytes beyond the L2 at the HBM rate. */
static void test_fused_prefill_reads(void) {
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load("deepseek-v3", "gb200-nvl72", 8, 1, 2, 4096, "none", "fused", &e), 0);
  schema_calibration cal;
  sim_cost_source src;
  CU_ASSERT_EQUAL_FATAL(sim_load_costs(NULL, &g_plan.cluster, SIM_TRANSFER_ROOFLINE, &cal, &src, &e), 0);
  sim_infer_result r;
  int rc = sim_infer_predict(&g_plan, &cal, NULL, NULL, &r, &e);
  ASSERT_OK(rc, e);
  const double fc1 = 2.0 * (256.0 * 512 * 7168 + 65536.0 * 7168 + 65536.0 * 512),
               fc2 = 2.0 * (256.0 * 7168 * 256 + 65536.0 * 256 + 65536.0 * 7168);
  NEAR(fc1, 2885681152.0, 1e-15);
  NEAR(fc2, 1912602624.0, 1e-15);
  const double l2 = g_plan.cluster.gpu.l2_mib * 1048576.0, hbm = g_plan.cluster.gpu.hbm_gbps * 1e9;
  const double floor = 58.0 * ((fc1 - l2) + (fc2 - l2)) / hbm;
  fprintf(stderr, "\n  deepseek-v3 gb200 tp 8 b2 x 4096: prefill routed experts %.3f ms (floor %.3f)\n",
          r.prefill.experts_s * 1e3, floor * 1e3);
  CU_ASSERT(r.prefill.experts_s >= floor);
  schema_calibration_free(&cal);
}

/* FP8 on a GPU without FP8 tensor cores stays an error naming the file and the field. */
static void test_refused_without_fp8(void) {
  ts_err e = {0};
  CU_ASSERT_EQUAL(load("mixtral-8x7b", "a100x8-nvswitch", 2, 1, 1, 128, "fp8", "fused", &e), -1);
  CU_ASSERT_EQUAL(e.bad_input, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "p.json"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "quantization"));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("infer_moe_fp8", NULL, NULL);
  CU_add_test(s, "Mixtral-8x7B FP8 weights' bytes by hand", test_mixtral_bytes);
  CU_add_test(s, "Qwen3-30B-A3B FP8 weights' bytes by hand", test_qwen3_bytes);
  CU_add_test(s, "DeepSeek-V3 FP8 weights' bytes by hand (dense first layers, MLA, shared expert)", test_deepseek_bytes);
  CU_add_test(s, "FP8 MoE decode step: above its read floor, below BF16", test_decode_step);
  CU_add_test(s, "FP8 refused on the A100", test_refused_without_fp8);
  CU_add_test(s, "fused MoE prefill: each expert's rows of x read (DeepSeek-V3, GB200)", test_fused_prefill_reads);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_infer_ref.c — the plain-C references of the inference kernels
 * (runtime/ops/infer_ref.c), the per-size codec rule shared by the simulator and
 * the executor (plan/plan_infer_policy.c), and inference results in the
 * result schema (schema/result.c). CPU only. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer_ref.h"
#include "rt_ops_ref.h"
#include "taco_fp8.h"
#include "plan_infer_policy.h"
#include "result.h"

static unsigned g_seed = 12345;
static float frand(void) {
  g_seed = g_seed * 1103515245u + 12345u;
  return ((g_seed >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* One cached position: the output is its value vector, whatever the query. */
static void test_decode_one_position(void) {
  const int B = 2, H = 4, KV = 2, D = 8, MAX = 3;
  float q[2 * 4 * 8], k[2 * 2 * 3 * 8], v[2 * 2 * 3 * 8], o[2 * 4 * 8];
  for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = frand();
  for (size_t i = 0; i < sizeof k / sizeof *k; i++) k[i] = frand(), v[i] = frand();
  infer_ref_decode_attention(q, k, v, o, B, H, KV, D, MAX, 1);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++)
      for (int x = 0; x < D; x++) /* query head h reads KV head h / (H / KV) */
        CU_ASSERT_DOUBLE_EQUAL(o[(b * H + h) * D + x], v[((b * KV + h / 2) * MAX) * D + x], 1e-6);
}

/* Identical keys: uniform weights, the output is the mean of the values. */
static void test_decode_equal_keys_mean(void) {
  const int D = 4, L = 5;
  float q[4], k[5 * 4], v[5 * 4], o[4];
  for (int x = 0; x < D; x++) q[x] = frand();
  for (int p = 0; p < L; p++)
    for (int x = 0; x < D; x++) k[p * D + x] = 0.5f, v[p * D + x] = (float)(p + x);
  infer_ref_decode_attention(q, k, v, o, 1, 1, 1, D, L, L);
  for (int x = 0; x < D; x++) CU_ASSERT_DOUBLE_EQUAL(o[x], 2.0 + x, 1e-5);
}

/* The causal attention's last row is the decode attention over the whole sequence. */
static void test_causal_last_row_is_decode(void) {
  const int S = 7, D = 16;
  float q[7 * 16], k[7 * 16], v[7 * 16], o[7 * 16], od[16];
  for (int i = 0; i < S * D; i++) q[i] = 2 * frand(), k[i] = frand(), v[i] = frand();
  infer_ref_causal_attention(q, k, v, o, S, D);
  infer_ref_decode_attention(q + (S - 1) * D, k, v, od, 1, 1, 1, D, S, S);
  for (int x = 0; x < D; x++) CU_ASSERT_DOUBLE_EQUAL(o[(S - 1) * D + x], od[x], 1e-5);
  /* row 0 attends to position 0 alone */
  for (int x = 0; x < D; x++) CU_ASSERT_DOUBLE_EQUAL(o[x], v[x], 1e-6);
}

/* The cache layout at G 8 and max_seq > len: each (batch, query head) equals the causal attention's last
 * row over its KV head's first len positions, gathered by hand; the positions past len hold NaN and must
 * not be read. */
static void test_decode_layout_gqa(void) {
  enum { B = 3, H = 16, KV = 2, D = 32, MAX = 40, LEN = 37 };
  static float q[B * H * D], k[B * KV * MAX * D], v[B * KV * MAX * D], o[B * H * D];
  static float sq[LEN * D], sk[LEN * D], sv[LEN * D], so[LEN * D];
  for (size_t i = 0; i < sizeof q / sizeof *q; i++) q[i] = 3 * frand();
  for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
    const int pos = (int)(i / D % MAX);
    k[i] = pos < LEN ? frand() : NAN, v[i] = pos < LEN ? frand() : NAN;
  }
  CU_ASSERT_EQUAL_FATAL(infer_ref_decode_attention(q, k, v, o, B, H, KV, D, MAX, LEN), 0);
  double worst = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < H; h++) {
      const size_t row0 = ((size_t)b * KV + h / (H / KV)) * MAX;
      for (int p = 0; p < LEN; p++)
        for (int x = 0; x < D; x++)
          sq[p * D + x] = q[(b * H + h) * D + x], sk[p * D + x] = k[(row0 + p) * D + x],
                   sv[p * D + x] = v[(row0 + p) * D + x];
      infer_ref_causal_attention(sq, sk, sv, so, LEN, D);
      for (int x = 0; x < D; x++) worst = fmax(worst, fabs((double)o[(b * H + h) * D + x] - so[(LEN - 1) * D + x]));
    }
  CU_ASSERT(worst < 1e-5);
}

/* RoPE: position 0 is the identity, norms are kept, and rotations compose. */
static void test_rope(void) {
  const int D = 8;
  float x[8], y[8], z[8];
  for (int i = 0; i < D; i++) x[i] = frand();
  memcpy(y, x, sizeof x);
  infer_ref_rope(y, D, 0, 10000.0);
  for (int i = 0; i < D; i++) CU_ASSERT_DOUBLE_EQUAL(y[i], x[i], 0);
  memcpy(y, x, sizeof x);
  infer_ref_rope(y, D, 5, 10000.0);
  infer_ref_rope(y, D, 7, 10000.0);
  memcpy(z, x, sizeof x);
  infer_ref_rope(z, D, 12, 10000.0);
  double nx = 0, ny = 0;
  for (int i = 0; i < D; i++) {
    CU_ASSERT_DOUBLE_EQUAL(y[i], z[i], 1e-5);
    nx += x[i] * x[i], ny += z[i] * z[i];
  }
  CU_ASSERT_DOUBLE_EQUAL(nx, ny, 1e-5);
  /* pair 0 turns by exactly pos radians: (1, 0) -> (cos 3, sin 3) */
  float w[8] = {1, 0, 0, 0, 0, 0, 0, 0};
  infer_ref_rope(w, D, 3, 10000.0);
  CU_ASSERT_DOUBLE_EQUAL(w[0], cos(3.0), 1e-6);
  CU_ASSERT_DOUBLE_EQUAL(w[4], sin(3.0), 1e-6);
}

/* The QK norm as the inference check's reference runs it (rt_ref_qk_norm_fwd, saved and rstd NULL): the same
 * values as the training forward's, which also keeps the input and 1/rms; the columns after the heads
 * untouched; with weights 1 each head comes out of mean square 1 (less eps's share), and with weights g the
 * normed head times g; RoPE after it keeps each head's norm. Qwen3's shape: 3 heads of 128 in a row of 400. */
static void test_qk_norm_inference(void) {
  enum { R = 2, H = 3, D = 128, LD = 400 };
  const float eps = 1e-6f;
  static float x[R * LD], a[R * LD], b[R * LD], c[R * LD], sv[R * H * D], g1[D], g[D];
  float rs[R * H];
  for (int i = 0; i < R * LD; i++) x[i] = 2.f * frand();
  for (int i = 0; i < D; i++) g1[i] = 1.f, g[i] = 1.f + 0.5f * frand();
  memcpy(a, x, sizeof x), memcpy(b, x, sizeof x), memcpy(c, x, sizeof x);
  rt_ref_qk_norm_fwd(a, LD, NULL, g, NULL, R, H, D, eps);
  rt_ref_qk_norm_fwd(b, LD, sv, g, rs, R, H, D, eps);
  CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
  for (int r = 0; r < R; r++) {
    for (int j = 0; j < H; j++)
      for (int i = 0; i < D; i++) CU_ASSERT_EQUAL(sv[(r * H + j) * D + i], x[r * LD + j * D + i]);
    for (int i = H * D; i < LD; i++) CU_ASSERT_EQUAL(a[r * LD + i], x[r * LD + i]); /* past the heads */
  }
  rt_ref_qk_norm_fwd(c, LD, NULL, g1, NULL, R, H, D, eps);
  for (int r = 0; r < R; r++)
    for (int j = 0; j < H; j++) {
      const float *u = c + r * LD + j * D, *v = a + r * LD + j * D;
      double ms = 0, before = 0;
      for (int i = 0; i < D; i++) {
        ms += (double)u[i] * u[i], before += (double)x[r * LD + j * D + i] * x[r * LD + j * D + i];
        CU_ASSERT_DOUBLE_EQUAL(v[i], u[i] * g[i], 1e-5 * (1 + fabs(u[i])));
      }
      before /= D;
      CU_ASSERT_DOUBLE_EQUAL(ms / D, before / (before + eps), 1e-5);
      float y[D];
      memcpy(y, u, sizeof y);
      infer_ref_rope(y, D, 1000 + j, 1e6);
      double ny = 0;
      for (int i = 0; i < D; i++) ny += (double)y[i] * y[i];
      CU_ASSERT_DOUBLE_EQUAL(ny, ms, 1e-4 * ms);
    }
}

static void test_bf16(void) {
  CU_ASSERT_EQUAL(infer_ref_to_bf16(1.0f), 0x3f80);
  CU_ASSERT_EQUAL(infer_ref_from_bf16(0x3f80), 1.0f);
  /* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1) */
  CU_ASSERT_EQUAL(infer_ref_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  CU_ASSERT_EQUAL(infer_ref_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  CU_ASSERT(isnan(infer_ref_from_bf16(infer_ref_to_bf16(NAN))));
}

/* The rule both halves apply per all-reduce size. */
/* The FP8 KV quantizer: the largest magnitude maps to 448 (code 0x7E), the
 * scale is amax / 448, zeros stay zero, a zero vector gets scale 0, and the
 * round trip is within E4M3's half step (2^-4 relative) of each element. */
static void test_kv8_quantize(void) {
  float x[8] = {3.0f, -1.5f, 0.f, 0.75f, -3.0f, 1e-3f, 2.9f, -0.1f}, y[8];
  unsigned char c[8];
  float sc;
  infer_ref_kv8_quantize(x, 8, c, &sc);
  CU_ASSERT_EQUAL(sc, 3.0f / 448.0f);
  CU_ASSERT_EQUAL(c[0], 0x7E);
  CU_ASSERT_EQUAL(c[4], 0xFE); /* -448 */
  CU_ASSERT_EQUAL(c[2], 0x00);
  infer_ref_kv8_dequantize(c, sc, 8, y);
  for (int i = 0; i < 8; i++) CU_ASSERT(fabsf(y[i] - x[i]) <= fabsf(x[i]) / 16 + 3.0f / 448 * 0x1p-9f);
  CU_ASSERT_EQUAL(y[1], -1.5f); /* -224: exact */
  float z[4] = {0, 0, 0, 0};
  infer_ref_kv8_quantize(z, 4, c, &sc);
  CU_ASSERT_EQUAL(sc, 0.f);
  for (int i = 0; i < 4; i++) CU_ASSERT_EQUAL(c[i], 0);
}

/* The reference's E4M3 (by enumeration) against kernels/taco_fp8.h's (bit
 * arithmetic, checked against the GPU's conversion over all floats): every
 * 97th float bit pattern and every code's value and midpoints. */
static void test_e4m3_two_ways(void) {
  long long bad = 0;
  for (unsigned long long u = 0; u < (1ULL << 32); u += 997) {
    float x;
    uint32_t b = (uint32_t)u;
    memcpy(&x, &b, 4);
    bad += infer_ref_e4m3_from_float(x) != taco_fp8_e4m3_from_float(x);
  }
  for (int c = 0; c < 256; c++) {
    float v = infer_ref_e4m3_to_float((unsigned char)c), t = taco_fp8_e4m3_to_float((uint8_t)c);
    bad += !(v == t || (isnan(v) && isnan(t)));
    if (c < 0x7e) {
      float mid = 0.5f * (v + infer_ref_e4m3_to_float((unsigned char)(c + 1)));
      bad += infer_ref_e4m3_from_float(mid) != taco_fp8_e4m3_from_float(mid);
    }
  }
  CU_ASSERT_EQUAL(bad, 0);
}

static void test_policy(void) {
  plan_codec none = {.kind = PLAN_CODEC_NONE}, taco = {.kind = PLAN_CODEC_TACO, .group = 128},
             caat = {.kind = PLAN_CODEC_CAAT, .p = 0.5}, both = {.kind = PLAN_CODEC_TACO_CAAT, .group = 128, .p = 0.5};
  CU_ASSERT_FALSE(plan_infer_use_codec(&none, true, 1, 2));
  CU_ASSERT_TRUE(plan_infer_use_codec(&taco, true, 1, 2));
  CU_ASSERT_FALSE(plan_infer_use_codec(&taco, true, 3, 2));
  CU_ASSERT_TRUE(plan_infer_use_codec(&taco, false, 3, 2)); /* codec_auto off: always the codec */
  CU_ASSERT_TRUE(plan_infer_use_codec(&caat, true, 3, 2));  /* CAAT-Net is the model: never dropped */
  CU_ASSERT_FALSE(plan_infer_use_codec(&both, true, 3, 2));
  CU_ASSERT_EQUAL(plan_infer_fallback_codec(&taco).kind, PLAN_CODEC_NONE);
  CU_ASSERT_EQUAL(plan_infer_fallback_codec(&both).kind, PLAN_CODEC_CAAT);
  CU_ASSERT_DOUBLE_EQUAL(plan_infer_fallback_codec(&both).p, 0.5, 0);
  CU_ASSERT_FALSE(plan_infer_has_fallback(&caat));
  CU_ASSERT_FALSE(plan_infer_has_fallback(&none));
  CU_ASSERT_TRUE(plan_infer_has_fallback(&both));
}

/* A measured inference result written and read back; a wrong kind is refused. */
static void test_result_roundtrip(void) {
  schema_result r, back;
  schema_result_init(&r, SCHEMA_SOURCE_MEASURED);
  snprintf(r.plan, sizeof r.plan, "infer-x");
  snprintf(r.kind, sizeof r.kind, "inference");
  r.ttft_s = 0.125, r.tpot_s = 0.0031, r.iteration_time_s = 0.125 + 15 * 0.0031, r.tokens_per_s = 100;
  r.iterations = 13, r.warmup = 2, r.min_s = 0.003, r.median_s = 0.0031, r.max_s = 0.0035;
  snprintf(r.machine.gpu, sizeof r.machine.gpu, "H200");
  snprintf(r.machine.transport, sizeof r.machine.transport, "shm");
  char path[] = "/tmp/test_infer_ref_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_result_save_json(&r, path, &e), 0);
  CU_ASSERT_EQUAL_FATAL(schema_result_load(path, &back, &e), 0);
  CU_ASSERT_STRING_EQUAL(back.kind, "inference");
  CU_ASSERT_DOUBLE_EQUAL(back.ttft_s, 0.125, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(back.tpot_s, 0.0031, 1e-12);
  schema_result_free(&back);
  /* a training result has no kind, and loads with ttft = tpot = 0 */
  r.kind[0] = 0;
  CU_ASSERT_EQUAL_FATAL(schema_result_save_json(&r, path, &e), 0);
  CU_ASSERT_EQUAL_FATAL(schema_result_load(path, &back, &e), 0);
  CU_ASSERT_STRING_EQUAL(back.kind, "");
  CU_ASSERT_DOUBLE_EQUAL(back.ttft_s, 0, 0);
  schema_result_free(&back);
  const char *bad = "{\"schema\":1,\"source\":\"simulated\",\"plan\":\"p\",\"kind\":\"serving\",\"iteration_time_s\":1,"
                    "\"tokens_per_s\":1,\"tflops_per_gpu\":0,\"mfu\":0,\"memory_per_gpu_bytes\":0,\"breakdown\":{"
                    "\"compute_s\":0,\"tp_exposed_s\":0,\"pp_exposed_s\":0,\"dp_exposed_s\":0,\"codec_s\":0,"
                    "\"bubble_s\":0},\"ranks\":[]}";
  CU_ASSERT_NOT_EQUAL(schema_result_from_json_text(bad, strlen(bad), "bad.json", &back, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "kind"));
  schema_result_free(&r);
  remove(path);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("infer_ref", NULL, NULL);
  CU_add_test(s, "decode attention: one position", test_decode_one_position);
  CU_add_test(s, "decode attention: equal keys give the mean", test_decode_equal_keys_mean);
  CU_add_test(s, "causal attention's last row is decode attention", test_causal_last_row_is_decode);
  CU_add_test(s, "decode attention: the GQA cache layout (G 8, max_seq > len)", test_decode_layout_gqa);
  CU_add_test(s, "RoPE", test_rope);
  CU_add_test(s, "QK norm without its saved copy (the inference reference), then RoPE", test_qk_norm_inference);
  CU_add_test(s, "bf16 rounding", test_bf16);
  CU_add_test(s, "FP8 KV cache quantizer", test_kv8_quantize);
  CU_add_test(s, "E4M3: enumeration vs taco_fp8.h", test_e4m3_two_ways);
  CU_add_test(s, "per-size codec rule", test_policy);
  CU_add_test(s, "inference result round trip", test_result_roundtrip);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_attn_fp8.c — the calibration's "attention_fp8" section (schema/calibration_attn_fp8.c): one fused attention
 * kernel's FP8 over BF16 forward speed by sequence length. The loader, the writer (round trip), the ratio at a
 * point, between points (linear in log length) and beyond the ends (the nearest end's), 0 without the section,
 * and the errors naming the file and the field. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"
#include "test_cal_round_trip.h"
#include "test_check.h"

#define CAL_HEAD                                                                                                   \
  "{\"schema\": 1, \"gpu\": \"X\", \"driver\": \"1\", \"cuda\": \"1\", \"nccl\": \"1\", \"transport\": "          \
  "\"nvlink\", \"measured_at\": \"now\", \"host\": {\"launch_us\": 4, \"gemm_launch_us\": 7, \"sync\": "           \
  "[{\"wait_us\": 0, \"gap_us\": 60}]}"

/* ratios 1.25 at 1,024 tokens and 1.75 at 4,096 */
static const char *FP8_CAL = CAL_HEAD ", \"attention_fp8\": {\"measured_on\": \"a GPU, a kernel\", \"source\": "
                                      "\"a paper\", \"points\": [{\"seq\": 1024, \"bf16_tflops\": 400, \"fp8_tflops\": "
                                      "500}, {\"seq\": 4096, \"bf16_tflops\": 400, \"fp8_tflops\": 700}]}}";

static void load(const char *text, schema_calibration *c) {
  ts_err e = {0};
  int rc = schema_calibration_from_json_text(text, strlen(text), "fp8.json", c, &e);
  ASSERT_OK(rc, e);
}

static void test_section(void) {
  schema_calibration c;
  load(FP8_CAL, &c);
  CU_ASSERT_EQUAL(c.attn_fp8.n, 2);
  CU_ASSERT_STRING_EQUAL(c.attn_fp8.measured_on, "a GPU, a kernel");
  NEAR_ABS(schema_attn_fp8_speedup(&c, 1024), 1.25, 1e-12);
  NEAR_ABS(schema_attn_fp8_speedup(&c, 4096), 1.75, 1e-12);
  NEAR_ABS(schema_attn_fp8_speedup(&c, 2048), 1.5, 1e-12); /* halfway in log length */
  NEAR_ABS(schema_attn_fp8_speedup(&c, 128), 1.25, 1e-12); /* below the first point: its ratio */
  NEAR_ABS(schema_attn_fp8_speedup(&c, 20000), 1.75, 1e-12); /* beyond the last: its ratio */
  ts_err e = {0};
  schema_calibration again;
  CU_ASSERT_EQUAL_FATAL(test_cal_round_trip(&c, "fp8.json", &again, &e), 0);
  CU_ASSERT_EQUAL(memcmp(&again.attn_fp8, &c.attn_fp8, sizeof c.attn_fp8), 0);
  schema_calibration_free(&again);
  schema_calibration_free(&c);
  load(CAL_HEAD "}", &c); /* no section: no ratio */
  CU_ASSERT_EQUAL(c.attn_fp8.n, 0);
  NEAR_ABS(schema_attn_fp8_speedup(&c, 2048), 0, 0);
  schema_calibration_free(&c);
}

static void test_errors(void) {
  static const char *bad[][2] = {
      {"[]", "attention_fp8"},
      {"{\"source\": \"s\", \"points\": [{\"seq\": 1, \"bf16_tflops\": 1, \"fp8_tflops\": 1}]}", "measured_on"},
      {"{\"measured_on\": \"m\", \"source\": \"s\"}", "attention_fp8.points"},
      {"{\"measured_on\": \"m\", \"source\": \"s\", \"points\": []}", "attention_fp8.points"},
      {"{\"measured_on\": \"m\", \"source\": \"s\", \"points\": [{\"seq\": 0, \"bf16_tflops\": 1, \"fp8_tflops\": 1}]}",
       "attention_fp8.points[0]"},
      {"{\"measured_on\": \"m\", \"source\": \"s\", \"points\": [{\"seq\": 8, \"bf16_tflops\": -1, \"fp8_tflops\": 1}]}",
       "bf16_tflops"},
      {"{\"measured_on\": \"m\", \"source\": \"s\", \"points\": [{\"seq\": 8, \"bf16_tflops\": 1, \"fp8_tflops\": 1}, "
       "{\"seq\": 8, \"bf16_tflops\": 1, \"fp8_tflops\": 2}]}",
       "attention_fp8.points[1]"},
      {"{\"measured_on\": \"m\", \"source\": \"s\", \"points\": [{\"seq\": 8, \"bf16_tflops\": 1, \"fp8_tflops\": 1, "
       "\"causal\": true}]}",
       "attention_fp8.points[0]"},
      {"{\"measured_on\": \"m\", \"source\": \"s\", \"ratio\": 2, \"points\": [{\"seq\": 8, \"bf16_tflops\": 1, "
       "\"fp8_tflops\": 1}]}",
       "attention_fp8"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[1024];
    schema_calibration c;
    ts_err e = {0};
    snprintf(text, sizeof text, CAL_HEAD ", \"attention_fp8\": %s}", bad[i][0]);
    CU_ASSERT_NOT_EQUAL(schema_calibration_from_json_text(text, strlen(text), "bad.json", &c, &e), 0);
    ASSERT_MSG(e, bad[i][1]);
    ASSERT_MSG(e, "bad.json");
  }
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("attn_fp8", NULL, NULL);
  CU_add_test(s, "calibration section: load, write, ratio by length", test_section);
  CU_add_test(s, "bad sections name the file and the field", test_errors);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

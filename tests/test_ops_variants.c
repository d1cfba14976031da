/* test_ops_variants.c — the executor's variants as options (runtime/ops/ops_variants.c):
 * defaults until set, NAME=VALUE parsing, bad names and values refused naming
 * the choices, the note a result records. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "ops_variants.h"

static void test_defaults(void) {
  ops_variant_reset();
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_ATTN), "fused");
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_FLASH_FWD), "default");
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_FLASH_BWD_WARPS), "4");
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_FLASH_BWD_PARTS), "0"); /* the rule of exec_flash_bwd_parts */
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_WGRAD_OVERLAP), "on");
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_TP_OVERLAP_SM_MARGIN), "0");
  CU_ASSERT_FALSE(ops_variant_is(OPS_V_ATTN, "unfused"));
}

static void test_set_and_reset(void) {
  ts_err e;
  ops_variant_reset();
  CU_ASSERT_EQUAL(ops_variant_set("attn=unfused", &e), 0);
  CU_ASSERT_EQUAL(ops_variant_set("flash-bwd=split", &e), 0);
  CU_ASSERT_EQUAL(ops_variant_set("tp-overlap-sm-margin=16", &e), 0);
  CU_ASSERT_TRUE(ops_variant_is(OPS_V_ATTN, "unfused"));
  CU_ASSERT_TRUE(ops_variant_is(OPS_V_FLASH_BWD, "split"));
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_TP_OVERLAP_SM_MARGIN), "16");
  ops_variant_reset();
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_FLASH_BWD), "default");
}

static void test_bad_input(void) {
  ts_err e;
  ops_variant_reset();
  CU_ASSERT_EQUAL(ops_variant_set("attn", &e), -1); /* no '=' */
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "NAME=VALUE"));
  CU_ASSERT_EQUAL(ops_variant_set("atn=fused", &e), -1); /* no such variant: the names are listed */
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "'atn' is not a variant"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "flash-order"));
  CU_ASSERT_EQUAL(ops_variant_set("flash-fwd=v9", &e), -1); /* the choices are listed */
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "flash-fwd"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "default, v1, w8, fa128"));
  CU_ASSERT_EQUAL(ops_variant_set("tp-overlap-sm-margin=-1", &e), -1);
  CU_ASSERT_EQUAL(ops_variant_set("tp-overlap-sm-margin=x", &e), -1);
  CU_ASSERT_EQUAL(ts_exit_status(&e), 2);
  CU_ASSERT_STRING_EQUAL(ops_variant(OPS_V_FLASH_FWD), "default"); /* a refused value changes nothing */
}

static void test_note_and_usage(void) {
  ts_err e;
  char note[320];
  ops_variant_reset();
  CU_ASSERT_EQUAL(ops_variant_set("ce=unfused", &e), 0);
  ops_variant_note(note, sizeof note);
  CU_ASSERT_STRING_EQUAL(note, "variants: attn=fused flash-fwd=default flash-bwd=default flash-bwd-warps=4 "
                               "flash-bwd-parts=0 flash-order=longest ce=unfused norm-bwd=fused softmax=causal wgrad-overlap=on "
                               "caat-bwd=fp32 tp-overlap-sm-margin=0 gemm-algo=bucket gemm-cache=hash reduce=atomic pp-slots=program");
  char buf[8192] = "";
  FILE *f = fmemopen(buf, sizeof buf - 1, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  ops_variant_usage(f);
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "--variant NAME=VALUE"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "flash-bwd: default, v1, v4, split, fa128 [default]"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "tp-overlap-sm-margin: a whole number >= 0 [0]"));
  ops_variant_reset();
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("ops_variants", NULL, NULL);
  CU_add_test(s, "every variant has its default until set", test_defaults);
  CU_add_test(s, "NAME=VALUE sets a variant; reset restores the defaults", test_set_and_reset);
  CU_add_test(s, "bad names and values are refused naming the choices (exit 2)", test_bad_input);
  CU_add_test(s, "the note a result records and the --help lines", test_note_and_usage);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

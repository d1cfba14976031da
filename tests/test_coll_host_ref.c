/* test_coll_host_ref.c — CPU tests of coll_host_sum_ref (kernels/coll_host.h),
 * the plain-C reference of the sum kernel of the uncompressed direct path:
 * blocks are read `stride` bytes apart, summed in float from block 0 on,
 * and rounded once to BF16 (round to nearest even). */
#include <CUnit/Basic.h>
#include <stdint.h>
#include <string.h>

#include "coll_host.h"
#include "taco_fp8.h"

static void test_fp32_stride(void) {
  float blocks[3][8]; /* stride 32 bytes, 5 elements used per block */
  memset(blocks, 0, sizeof blocks);
  for (int b = 0; b < 3; b++)
    for (int i = 0; i < 5; i++) blocks[b][i] = (float)(b * 10 + i);
  blocks[0][5] = 1e30f; /* beyond n: must not be read into the sum */
  float out[5] = {0};
  coll_host_sum_ref(blocks, 3, sizeof blocks[0], 5, TACO_DTYPE_FP32, out);
  for (int i = 0; i < 5; i++) CU_ASSERT_EQUAL(out[i], (float)(30 + 3 * i));
}

static void test_bf16_rounds_once(void) {
  uint16_t blocks[2][16];
  memset(blocks, 0, sizeof blocks);
  /* BF16 has an ulp of 2^-7 at 1: 1 + 2^-8 is exactly half an ulp and rounds
   * to even (1.0); 1 + 1.5 * 2^-8 is above half and rounds up. */
  blocks[0][0] = taco_bf16_from_float(1.0f);
  blocks[1][0] = taco_bf16_from_float(0x1p-8f);
  blocks[0][1] = taco_bf16_from_float(1.0f);
  blocks[1][1] = taco_bf16_from_float(0x1.8p-8f);
  blocks[0][2] = taco_bf16_from_float(-3.0f);
  blocks[1][2] = taco_bf16_from_float(3.0f);
  uint16_t out[3];
  coll_host_sum_ref(blocks, 2, sizeof blocks[0], 3, TACO_DTYPE_BF16, out);
  CU_ASSERT_EQUAL(taco_bf16_to_float(out[0]), 1.0f);
  CU_ASSERT_EQUAL(taco_bf16_to_float(out[1]), 1.0f + 0x1p-7f);
  CU_ASSERT_EQUAL(taco_bf16_to_float(out[2]), 0.0f);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("coll_host_ref", NULL, NULL);
  CU_add_test(s, "fp32 blocks at a stride", test_fp32_stride);
  CU_add_test(s, "bf16: one rounding, to nearest even", test_bf16_rounds_once);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

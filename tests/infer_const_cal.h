/* infer_const_cal.h — a calibration of constant costs, for the inference tests that work a step's time out by hand
 * (test_inflight.c, test_infer_adp.c): every GEMM GEMM_US, every memory-bound kernel (norm, elementwise, embedding,
 * argmax) and the FLOP-keyed "attention" table KERNEL_US, each collective colls[i] us[i] at 2, 4 and 8 ranks (any
 * size). The including test defines GEMM_US and KERNEL_US. */
#ifndef INFER_CONST_CAL_H
#define INFER_CONST_CAL_H

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"

static void infer_const_calibration(schema_calibration *c, const char *const *colls, const double *us, int n_colls) {
  memset(c, 0, sizeof *c);
  snprintf(c->transport, sizeof c->transport, "nvlink");
  snprintf(c->gpu, sizeof c->gpu, "test");
  CU_ASSERT_EQUAL(schema_calibration_add_gemm(c, 1, 1, 1, GEMM_US), 0);
  const char *bytes_tables[] = {"norm", "elementwise", "embedding", "argmax"};
  for (size_t i = 0; i < sizeof bytes_tables / sizeof bytes_tables[0]; i++) {
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, bytes_tables[i], false, 1, 0, KERNEL_US), 0);
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, bytes_tables[i], false, 1e15, 0, KERNEL_US), 0);
  }
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "attention", true, 1, 0, KERNEL_US), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "attention", true, 1e18, 0, KERNEL_US), 0);
  for (int i = 0; i < n_colls; i++)
    for (int n = 2; n <= 8; n *= 2) {
      CU_ASSERT_EQUAL(schema_calibration_add_coll(c, colls[i], n, 1, us[i]), 0);
      CU_ASSERT_EQUAL(schema_calibration_add_coll(c, colls[i], n, 1e15, us[i]), 0);
    }
  schema_calibration_sort(c);
}

#endif

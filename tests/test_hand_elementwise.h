/* test_hand_elementwise.h — a calibration with one "elementwise" table whose time is hand-computable: 5 us flat up
 * to 1 MB (log interpolation between equal times), then 5 us x bytes / 1 MB (a slope-1 line in log-log: 200 GB/s)
 * up to 10 TB. No GEMM or other table: those fall back to the cluster's roofline (3 us + 2 m n k / peak for a
 * GEMM). */
#ifndef TEST_HAND_ELEMENTWISE_H
#define TEST_HAND_ELEMENTWISE_H

#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"

static inline void hand_calibration(schema_calibration *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->path, sizeof c->path, "hand.json");
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "elementwise", false, 1.0, 0, 5.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "elementwise", false, 1e6, 0, 5.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "elementwise", false, 1e13, 0, 5e7), 0);
}

#endif

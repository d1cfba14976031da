/* test_cal_section.h — a calibration file as text around one section under test: a minimal head (one GEMM point)
 * and the section, written from section_fmt with its one %s replaced by arg (the section's list under test),
 * loaded as "bad.json" (so that error messages name that file). Shared by the section tests (test_power_clock.c,
 * test_op_power.c). */
#ifndef TEST_CAL_SECTION_H
#define TEST_CAL_SECTION_H

#include <stdio.h>
#include <string.h>

#include "calibration.h"

#define TEST_CAL_HEAD                                                                                              \
  "{\"schema\": 1, \"gpu\": \"X\", \"driver\": \"1\", \"cuda\": \"1\", \"nccl\": \"1\", \"transport\": "          \
  "\"nvlink\", \"measured_at\": \"now\", \"gemm\": [{\"m\": 1, \"n\": 1, \"k\": 1, \"us\": 5}]"

static inline int test_cal_load_section(const char *arg, const char *section_fmt, schema_calibration *c, ts_err *e) {
  char text[8192], sec[6144];
  snprintf(sec, sizeof sec, section_fmt, arg);
  snprintf(text, sizeof text, TEST_CAL_HEAD ", %s", sec);
  return schema_calibration_from_json_text(text, strlen(text), "bad.json", c, e);
}

#endif

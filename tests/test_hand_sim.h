/* test_hand_sim.h — one full-mode simulation of a hand-made plan on a hand platform
 * (test_hand_moe.h's test_hand_platform), the clock model off, in a forked child
 * (sim_run_isolated); the test fails at once when the simulation does. */
#ifndef TEST_HAND_SIM_H
#define TEST_HAND_SIM_H

#include <CUnit/Basic.h>
#include <stdio.h>

#include "sim.h"

/* Free *r with schema_result_free. */
static inline void test_hand_simulate(const plan *p, const schema_calibration *cal, const char *platform,
                                      schema_result *r) {
  sim_options o = {.mode = SIM_MODE_FULL, .cal = cal, .platform_path = platform, .clock_off = true};
  ts_err e = {0};
  int rc = sim_run_isolated(p, &o, r, &e);
  if (rc) fprintf(stderr, "\n  simulation failed: %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
}

#endif

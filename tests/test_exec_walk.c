/* test_exec_walk.c — the executor runs plan_build_program()'s programs: every
 * op of every rank of the shipped 2 x H200 plans it supports is one it knows
 * (runtime/exec_walk_map.c), and the plans it does not support are refused
 * with the field that says why. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <string.h>

#include "exec_walk_map.h"

#define PLANS TACOSIM_SOURCE_DIR "/experiments/plans/"

static int check_plan(const char *name, ts_err *e) {
  char path[512];
  snprintf(path, sizeof path, PLANS "%s.json", name);
  plan p;
  if (plan_load(path, NULL, NULL, &p, e)) return -2;
  for (int r = 0; r < plan_world_size(&p); r++) {
    plan_program prog;
    if (plan_build_program(&p, r, &prog, e)) return -2;
    int rc = exec_walk_check_program(&p, &prog, e);
    plan_program_free(&prog);
    if (rc) return -1;
  }
  return 0;
}

static void test_supported_plans(void) {
  const char *names[] = {"gpt-h4096-tp2-none", "gpt-h4096-tp2-taco", "gpt-h4096-tp2-caat", "gpt-h4096-tp2-taco-caat",
                         "gpt-h4096-dp2", "gpt-h4096-1gpu", "gpt-h4096-tp2-none-shm", "gpt-h4096-tp2-caat-socket"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    ts_err e = {{0}, 0};
    int rc = check_plan(names[i], &e);
    if (rc) fprintf(stderr, "\n  %s: %s\n", names[i], e.msg);
    CU_ASSERT_EQUAL(rc, 0);
  }
}

static void test_refused_plans(void) {
  ts_err e;
  CU_ASSERT_EQUAL(check_plan("gpt-h4096-pp2", &e), -1);
  CU_ASSERT(strstr(e.msg, "layout.pp") != NULL);
  CU_ASSERT_EQUAL(check_plan("gpt-h4096-tp2-sp", &e), -1);
  CU_ASSERT(strstr(e.msg, "sequence_parallel") != NULL);
}

/* The layer ops are found by name: GPT's learned positions give the identity. */
static void test_layer_op_index(void) {
  plan p;
  ts_err e;
  CU_ASSERT_FATAL(plan_load(PLANS "gpt-h4096-tp2-none.json", NULL, NULL, &p, &e) == 0);
  int index[EXEC_OP_COUNT];
  CU_ASSERT_FATAL(exec_walk_layer_op_index(&p, index, &e) == 0);
  for (int i = 0; i < EXEC_OP_COUNT; i++) CU_ASSERT_EQUAL(index[i], i);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("exec_walk", NULL, NULL);
  CU_add_test(s, "shipped PP=1 plans run op by op", test_supported_plans);
  CU_add_test(s, "PP and SP plans refused with the field", test_refused_plans);
  CU_add_test(s, "layer ops by name", test_layer_op_index);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

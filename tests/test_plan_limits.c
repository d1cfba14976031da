/* test_plan_limits.c — the program-size estimate against the programs built
 * for every shipped plan (between 1x and 2x the ops of the largest stage), and
 * the plans issue 20 found needing unbounded memory refused at load with exit
 * 2 naming the fields, in well under a second. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "plan.h"

static void test_estimate_bounds_shipped_plans(void) {
  DIR *d = opendir(PLANS_DIR);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  int checked = 0;
  double lo = 1e9, hi = 0;
  for (struct dirent *de; (de = readdir(d));) {
    size_t n = strlen(de->d_name);
    if (n < 6 || strcmp(de->d_name + n - 5, ".json")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PLANS_DIR, de->d_name);
    static plan p;
    ts_err e = {0};
    if (plan_load(path, NULL, NULL, &p, &e)) continue; /* inference plans live here too */
    int most = 0;
    int stages[3] = {0, p.pp / 2, p.pp - 1};
    for (int i = 0; i < 3; i++) {
      plan_program g;
      int rank = plan_rank_of(&p, (plan_coord){0, 0, stages[i]});
      CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, rank, &g, &e), 0);
      if (g.n > most) most = g.n;
      plan_program_free(&g);
    }
    double ratio = plan_estimate_ops_per_rank(&p) / most;
    if (ratio < lo) lo = ratio;
    if (ratio > hi) hi = ratio;
    if (ratio < 1.0 || ratio > 2.0) fprintf(stderr, "\n  %s: estimate / built = %.2f", de->d_name, ratio);
    CU_ASSERT(ratio >= 1.0 && ratio <= 2.0);
    checked++;
  }
  closedir(d);
  printf("\n  %d plans: estimate / ops built %.2f .. %.2f ", checked, lo, hi);
  CU_ASSERT(checked >= 20);
}

static int load_text(const char *text, plan *p, ts_err *e) {
  return plan_from_json_text(text, strlen(text), "big.json", NULL, NULL, p, e);
}

static void test_unbounded_plans_refused(void) {
  static plan p;
  ts_err e = {0};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  /* gpt-tiny with 4,096 layers and a global batch of 4,096 (26.5 s, 12.6 GB, then exit 1 before) */
  CU_ASSERT_EQUAL(load_text("{\"schema\":1,\"model\":\"gpt-tiny\",\"cluster\":\"h200x2-nvlink\",\"layout\":{\"dp\":1,"
                            "\"tp\":1,\"pp\":1},\"batch\":{\"micro\":1,\"global\":4096,\"seq\":128},"
                            "\"schedule\":\"1f1b\",\"layers_override\":4096}",
                            &p, &e),
                  -1);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "batch.global"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "layers_override"));
  /* a global batch of 2^20 (5.5 GB to plan, 144 s / 7.8 GB to simulate before) */
  e = (ts_err){0};
  CU_ASSERT_EQUAL(load_text("{\"schema\":1,\"model\":\"gpt-tiny\",\"cluster\":\"h200x2-nvlink\",\"layout\":{\"dp\":1,"
                            "\"tp\":1,\"pp\":1},\"batch\":{\"micro\":1,\"global\":1048576,\"seq\":128},"
                            "\"schedule\":\"1f1b\"}",
                            &p, &e),
                  -1);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "batch.global"));
  /* the same batch in micro-batches of 64 is fine */
  CU_ASSERT_EQUAL(load_text("{\"schema\":1,\"model\":\"gpt-tiny\",\"cluster\":\"h200x2-nvlink\",\"layout\":{\"dp\":1,"
                            "\"tp\":1,\"pp\":1},\"batch\":{\"micro\":64,\"global\":1048576,\"seq\":128},"
                            "\"schedule\":\"1f1b\"}",
                            &p, &e),
                  0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  CU_ASSERT(t1.tv_sec - t0.tv_sec < 5);
  /* full-mode simulation of 16,384 ranks: over the simulation bound, reduced mode is not */
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt3-175b-16384.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT_EQUAL(plan_check_sim_size(&p, plan_world_size(&p), p.path, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--mode reduced"));
  CU_ASSERT_EQUAL(plan_check_sim_size(&p, p.pp, p.path, &e), 0);
  /* 175B on 1,024 GPUs in full mode (the trace benchmark) stays allowed */
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt3-175b-1024.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT_EQUAL(plan_check_sim_size(&p, plan_world_size(&p), p.path, &e), 0);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("plan limits", NULL, NULL);
  CU_add_test(s, "estimate bounds the programs of the shipped plans", test_estimate_bounds_shipped_plans);
  CU_add_test(s, "plans needing unbounded memory are refused", test_unbounded_plans_refused);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

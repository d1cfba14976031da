/* test_calib_tpo_sm.c — the calibration's "tp_comm_overlap_sm" section (schema/calibration.h): the
 * loader's rules (every field named on bad input), the ratio between the points worked out by hand, the
 * proportional rule outside the table, for another SM count and without the section, the writer's round
 * trip, the copy into another transport's file, and the shipped Hopper files carrying the section of
 * calibration/tpo-sm's run. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "sim_transfer.h"
#include "topo.h"
#include "test_cal_round_trip.h"

#define HEAD                                                                                                  \
  "{\"schema\": 1, \"gpu\": \"X\", \"driver\": \"1\", \"cuda\": \"1\", \"nccl\": \"1\", \"transport\": \"nvlink\"," \
  " \"measured_at\": \"now\", \"gemm\": [{\"m\": 64, \"n\": 64, \"k\": 64, \"us\": 5}], "

static const char *GOOD =
    HEAD "\"tp_comm_overlap_sm\": {\"measured_on\": \"G\", \"sms\": 100, \"source\": \"run.log\", \"points\": ["
         "{\"held\": 2, \"margin\": 1.2, \"nomargin\": 1.1}, {\"held\": 10, \"margin\": 1.6, \"nomargin\": 1.5}, "
         "{\"held\": 20, \"margin\": 1.4, \"nomargin\": 2.0}]}}";

static void close_to(double got, double want) {
  if (!(got == want)) CU_ASSERT_DOUBLE_EQUAL(got, want, 1e-12 * want);
}

static void test_ratio(void) {
  schema_calibration c;
  ts_err e = {0};
  int rc = schema_calibration_from_json_text(GOOD, strlen(GOOD), "t.json", &c, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(c.n_tpo_sm, 3);
  CU_ASSERT_EQUAL(c.tpo_sm_sms, 100);
  CU_ASSERT_STRING_EQUAL(c.tpo_sm_measured_on, "G");
  CU_ASSERT_STRING_EQUAL(c.tpo_sm_source, "run.log");
  /* at the points: the measured ratios */
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 100, 2, true), 1.2);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 100, 10, false), 1.5);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 100, 20, true), 1.4);
  /* between: 4 of 8 from 2 to 10 (margin 1.2 -> 1.6), 5 of 10 from 10 to 20 (nomargin 1.5 -> 2.0) */
  close_to(schema_tpo_sm_ratio(&c, 100, 6, true), 1.4);
  close_to(schema_tpo_sm_ratio(&c, 100, 15, false), 1.75);
  close_to(schema_tpo_sm_ratio(&c, 100, 12, true), 1.6 - 0.2 * 2 / 10);
  /* outside the table, another GPU, no held SMs: the rule sms / (sms - n), or 1 */
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 100, 1, true), 100.0 / 99);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 100, 30, false), 100.0 / 70);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 132, 10, true), 132.0 / 122);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 100, 0, true), 1.0);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(NULL, 100, 10, true), 100.0 / 90);
  /* written and read back the same; copied into a file without it; a source without it changes nothing */
  schema_calibration again;
  CU_ASSERT_EQUAL_FATAL(test_cal_round_trip(&c, "again", &again, &e), 0);
  CU_ASSERT_EQUAL(again.n_tpo_sm, 3);
  CU_ASSERT_EQUAL(again.tpo_sm_sms, 100);
  CU_ASSERT_STRING_EQUAL(again.tpo_sm_measured_on, "G");
  CU_ASSERT_STRING_EQUAL(again.tpo_sm_source, "run.log");
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(again.tpo_sm_held[i], c.tpo_sm_held[i]);
    CU_ASSERT_EQUAL(again.tpo_sm_margin[i], c.tpo_sm_margin[i]);
    CU_ASSERT_EQUAL(again.tpo_sm_nomargin[i], c.tpo_sm_nomargin[i]);
  }
  schema_calibration other, none;
  memset(&other, 0, sizeof other);
  memset(&none, 0, sizeof none);
  schema_calibration_copy_tpo_sm(&other, &again);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&other, 100, 15, false), schema_tpo_sm_ratio(&c, 100, 15, false));
  schema_calibration_copy_tpo_sm(&other, &none);
  CU_ASSERT_EQUAL(other.n_tpo_sm, 3);
  schema_calibration_free(&again);
  schema_calibration_free(&c);
}

static void test_bad(void) {
  static const char *bad[][2] = {
      {"[]", "tp_comm_overlap_sm: must be an object"},
      {"{\"sms\": 100, \"source\": \"s\", \"points\": [{\"held\": 1, \"margin\": 1, \"nomargin\": 1}]}",
       "tp_comm_overlap_sm"},
      {"{\"measured_on\": \"G\", \"sms\": 1, \"source\": \"s\", \"points\": [{\"held\": 1, \"margin\": 1, "
       "\"nomargin\": 1}]}",
       "tp_comm_overlap_sm"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"\", \"points\": [{\"held\": 1, \"margin\": 1, "
       "\"nomargin\": 1}]}",
       "tp_comm_overlap_sm"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\"}", "tp_comm_overlap_sm.points: missing"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"points\": []}", "tp_comm_overlap_sm.points: must hold"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"points\": [{\"held\": 100, \"margin\": 1, "
       "\"nomargin\": 1}]}",
       "tp_comm_overlap_sm.points[0]"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"points\": [{\"held\": 0, \"margin\": 1, "
       "\"nomargin\": 1}]}",
       "tp_comm_overlap_sm.points[0]"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"points\": [{\"held\": 1, \"margin\": 0.2, "
       "\"nomargin\": 1}]}",
       "tp_comm_overlap_sm.points[0]"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"points\": [{\"held\": 1, \"margin\": 1, "
       "\"nomargin\": 11}]}",
       "tp_comm_overlap_sm.points[0]"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"points\": [{\"held\": 1, \"margin\": 1}]}",
       "tp_comm_overlap_sm.points[0]"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"points\": [{\"held\": 4, \"margin\": 1, "
       "\"nomargin\": 1}, {\"held\": 4, \"margin\": 1, \"nomargin\": 1}]}",
       "tp_comm_overlap_sm.points[1]: held must grow"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"points\": [{\"held\": 1, \"margin\": 1, "
       "\"nomargin\": 1, \"x\": 2}]}",
       "x"},
      {"{\"measured_on\": \"G\", \"sms\": 100, \"source\": \"s\", \"extra\": 1, \"points\": [{\"held\": 1, "
       "\"margin\": 1, \"nomargin\": 1}]}",
       "extra"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char text[1024];
    snprintf(text, sizeof text, HEAD "\"tp_comm_overlap_sm\": %s}", bad[i][0]);
    schema_calibration c;
    ts_err e = {0};
    CU_ASSERT_NOT_EQUAL(schema_calibration_from_json_text(text, strlen(text), "bad.json", &c, &e), 0);
    if (!strstr(e.msg, bad[i][1]) || strncmp(e.msg, "bad.json: ", 10))
      fprintf(stderr, "\n  case %zu: error '%s' does not name %s\n", i, e.msg, bad[i][1]);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, bad[i][1]));
    CU_ASSERT_EQUAL(strncmp(e.msg, "bad.json: ", 10), 0);
  }
}

/* Every shipped Hopper file carries calibration/tpo-sm's run (132 SMs, 6 points, n = 16 margin 1.4693),
 * "priced" true (since the simulator charges it only for each communication kernel's own time): the
 * table's figure; unpriced, the rule. */
static void test_shipped(void) {
  static const char *files[] = {"h200-nvlink", "h200-shm", "h200-socket", "h200-derived", "h200-shm-derived",
                                "h200-socket-derived"};
  for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/calibration/%s.json", TACOSIM_SOURCE_DIR, files[i]);
    schema_calibration c;
    ts_err e = {0};
    int rc = schema_calibration_load(path, &c, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(c.tpo_sm_sms, 132);
    CU_ASSERT_EQUAL(c.n_tpo_sm, 6);
    CU_ASSERT_TRUE(c.tpo_sm_priced);
    CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 132, 16, true), 1.4693);
    c.tpo_sm_priced = false;
    CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&c, 132, 16, true), 132.0 / 116);
    CU_ASSERT_STRING_EQUAL(c.tpo_sm_source, "calibration/tpo-sm/measured/h100-20261205-1450-cga2/{gpt3,llama}-cga2.txt");
    schema_calibration_free(&c);
  }
}

/* A calibration transferred onto another GPU (sim_transfer.c) keeps the section: onto H100-SXM (132 SMs,
 * the GPU it was measured on) the measured ratio, onto GB200 (148 SMs) the rule. */
static void test_transfer(void) {
  char path[512];
  snprintf(path, sizeof path, "%s/calibration/h200-nvlink.json", TACOSIM_SOURCE_DIR);
  schema_calibration c, h100, gb;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(path, &c, &e), 0);
  topo_gpu from, to_h100, to_gb;
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("H200-SXM", NULL, &from, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("H100-SXM", NULL, &to_h100, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("GB200", NULL, &to_gb, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&c, &from, &to_h100, 450, false, false, &h100, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&c, &from, &to_gb, 900, false, false, &gb, &e), 0);
  CU_ASSERT_EQUAL(h100.n_tpo_sm, 6);
  CU_ASSERT_TRUE(h100.tpo_sm_priced); /* kept as the shipped file says */
  CU_ASSERT_TRUE(gb.tpo_sm_priced);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&h100, to_h100.sms, 16, true), 1.4693);
  CU_ASSERT_EQUAL(schema_tpo_sm_ratio(&gb, to_gb.sms, 16, true), (double)to_gb.sms / (to_gb.sms - 16));
  CU_ASSERT_NOT_EQUAL(to_gb.sms, 132);
  schema_calibration_free(&gb);
  schema_calibration_free(&h100);
  schema_calibration_free(&c);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("calib_tpo_sm", NULL, NULL);
  CU_add_test(s, "ratio at, between and outside the points; round trip; copy", test_ratio);
  CU_add_test(s, "bad sections name the field", test_bad);
  CU_add_test(s, "shipped Hopper files carry the measured table", test_shipped);
  CU_add_test(s, "kept through a transfer onto another GPU; applied only at the table's SM count", test_transfer);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

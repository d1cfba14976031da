/* test_plan_reshape.c — a TACO codec's "group": "auto" (plan/plan_reshape.h):
 * the group the reshaping file chose is the plan's, priced as if written;
 * every bad file or field is rejected naming the file, the field or line, and
 * the reason (exit status 2). */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"
#include "plan_reshape.h"

#ifndef RESHAPE_CSV
#error "RESHAPE_CSV must point at experiments/loss/emu/reshape-124m-step1000.csv"
#endif

static char tmpdir[256];

#define HEADER "tensor,samples,rows,cols,group,axis,rel_err,cost_us,chosen,runnable,chosen_runnable\n"

static void write_file(const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

/* Rows of four tensor classes, each choosing group g (the class `odd` chooses g_odd). */
static void reshape_text(char *buf, size_t cap, int g, const char *odd, int g_odd) {
  static const char *classes[] = {"attn_out", "fc2_out", "fc1_dgrad", "qkv_dgrad"};
  size_t n = (size_t)snprintf(buf, cap, HEADER);
  for (int c = 0; c < 4; c++)
    for (int G = 32; G <= 512; G *= 2) {
      int pick = odd && !strcmp(classes[c], odd) ? g_odd : g;
      n += (size_t)snprintf(buf + n, cap - n, "%s,3,256,768,%d,hidden,0.02,0.7,%s,%s,%s\n", classes[c], G,
                            G == 512 ? "yes" : "", 768 % G ? "no" : "yes", G == pick ? "yes" : "");
      n += (size_t)snprintf(buf + n, cap - n, "%s,3,256,768,%d,tokens,0.02,1.1,,no,\n", classes[c], G);
    }
}

/* Rows of the four tensor classes: the forward ones (attn_out, fc2_out) choose gf, the backward
 * ones (fc1_dgrad, qkv_dgrad) gb. */
static void reshape_split(char *buf, size_t cap, int gf, int gb) {
  static const char *classes[] = {"attn_out", "fc2_out", "fc1_dgrad", "qkv_dgrad"};
  size_t n = (size_t)snprintf(buf, cap, HEADER);
  for (int c = 0; c < 4; c++)
    for (int G = 32; G <= 512; G *= 2)
      n += (size_t)snprintf(buf + n, cap - n, "%s,3,256,1024,%d,hidden,0.02,0.7,,yes,%s\n", classes[c], G,
                            G == (c < 2 ? gf : gb) ? "yes" : "");
}

/* A plan whose tp_fwd codec is `codec`, written to tmpdir/plan.json and loaded. */
static int load_codec(const char *codec, plan *p, ts_err *e) {
  char buf[2048], path[512];
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\",\n"
           "  \"layout\": { \"dp\": 2, \"tp\": 2, \"pp\": 2 },\n"
           "  \"batch\": { \"micro\": 1, \"global\": 8, \"seq\": 256 }, \"schedule\": \"1f1b\",\n"
           "  \"codec\": { \"tp_fwd\": %s } }\n",
           codec);
  write_file("plan.json", buf);
  snprintf(path, sizeof path, "%s/plan.json", tmpdir);
  memset(e, 0, sizeof *e);
  return plan_load(path, NULL, NULL, p, e);
}

static void expect_reject(const char *codec, const char *where, const char *reason) {
  plan p;
  ts_err e;
  int rc = load_codec(codec, &p, &e);
  CU_ASSERT_EQUAL(rc, -1);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  if (!strstr(e.msg, where) || !strstr(e.msg, reason)) printf("\n  message \"%s\" lacks \"%s\" or \"%s\"\n", e.msg, where, reason);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, where));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, reason));
}

/* The shipped reshaping of the 124M run (every class: G = 256 along hidden). */
static void test_shipped_file(void) {
  plan_reshape_choice c;
  ts_err e = {0};
  int rc = plan_reshape_read(RESHAPE_CSV, &c, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(c.group, 256);
  CU_ASSERT_EQUAL(c.axis, PLAN_AXIS_HIDDEN);
  CU_ASSERT_EQUAL(c.classes, 4);
  CU_ASSERT_EQUAL(c.cols, 768);
}

/* "auto" gives the plan the file's group, relative to the plan's folder: the same codec (and so the
 * same wire bytes the simulator prices) as the group written out. */
static void test_auto_is_the_written_group(void) {
  char buf[8192];
  for (int g = 64; g <= 256; g *= 2) {
    reshape_text(buf, sizeof buf, g, NULL, 0);
    write_file("r.csv", buf);
    plan pa, pw;
    ts_err e;
    int rc = load_codec("{\"kind\": \"taco\", \"group\": \"auto\", \"axis\": \"auto\", \"fp8\": \"e4m3\", "
                        "\"reshape\": \"r.csv\"}",
                        &pa, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    char written[128];
    snprintf(written, sizeof written, "{\"kind\": \"taco\", \"group\": %d, \"fp8\": \"e4m3\"}", g);
    CU_ASSERT_EQUAL_FATAL(load_codec(written, &pw, &e), 0);
    const plan_codec *a = &pa.codec[PLAN_TRAFFIC_TP_FWD], *w = &pw.codec[PLAN_TRAFFIC_TP_FWD];
    CU_ASSERT_EQUAL(a->group, g);
    CU_ASSERT(a->group_auto);
    CU_ASSERT(!w->group_auto);
    CU_ASSERT_EQUAL(a->kind, w->kind);
    CU_ASSERT_EQUAL(a->fp8, w->fp8);
    CU_ASSERT_DOUBLE_EQUAL(plan_codec_wire_bytes(a, 1 << 20, 2), plan_codec_wire_bytes(w, 1 << 20, 2), 0.0);
    /* 1 MiB of BF16: 2^19 FP8 bytes + 8 bytes per group */
    CU_ASSERT_DOUBLE_EQUAL(plan_codec_wire_bytes(a, 1 << 20, 2), (1 << 19) + 8.0 * ((1 << 19) / g), 1e-9);
  }
}

/* Each TP direction takes the choice of the tensors its all-reduces carry: the forward ones the
 * row-parallel outputs (attn_out, fc2_out), the backward ones the column-parallel input gradients
 * (qkv_dgrad, fc1_dgrad); a codec of another traffic class, and the whole file, need them all to agree. */
static void test_directions(void) {
  char buf[8192], planbuf[2048], path[512];
  reshape_split(buf, sizeof buf, 64, 512);
  write_file("split.csv", buf);
  snprintf(path, sizeof path, "%s/split.csv", tmpdir);
  plan_reshape_choice c;
  ts_err e = {0};
  CU_ASSERT_EQUAL(plan_reshape_read_classes(path, plan_reshape_fwd_classes, &c, &e), 0);
  CU_ASSERT_EQUAL(c.group, 64);
  CU_ASSERT_EQUAL(c.classes, 2);
  CU_ASSERT_EQUAL(plan_reshape_read_classes(path, plan_reshape_bwd_classes, &c, &e), 0);
  CU_ASSERT_EQUAL(c.group, 512);
  CU_ASSERT_EQUAL(c.classes, 2);
  CU_ASSERT_EQUAL(plan_reshape_read(path, &c, &e), -1); /* one group for every all-reduce: they differ */
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "a codec has one group for every all-reduce"));
  const char *aut = "{\"kind\": \"taco\", \"group\": \"auto\", \"fp8\": \"e4m3\", \"reshape\": \"split.csv\"}";
  snprintf(planbuf, sizeof planbuf,
           "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\",\n"
           "  \"layout\": { \"dp\": 2, \"tp\": 2, \"pp\": 2 },\n"
           "  \"batch\": { \"micro\": 1, \"global\": 8, \"seq\": 256 }, \"schedule\": \"1f1b\",\n"
           "  \"codec\": { \"tp_fwd\": %s, \"tp_bwd\": %s } }\n",
           aut, aut);
  write_file("split.json", planbuf);
  snprintf(path, sizeof path, "%s/split.json", tmpdir);
  plan p;
  int rc = plan_load(path, NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(p.codec[PLAN_TRAFFIC_TP_FWD].group, 64);
  CU_ASSERT_EQUAL(p.codec[PLAN_TRAFFIC_TP_BWD].group, 512);
  /* a file without the backward classes leaves tp_bwd with no choice: refused naming them */
  write_file("r.csv", HEADER "attn_out,3,256,768,128,hidden,0.02,0.7,yes,yes,yes\n");
  snprintf(planbuf, sizeof planbuf, "%s/r.csv", tmpdir);
  CU_ASSERT_EQUAL(plan_reshape_read_classes(planbuf, plan_reshape_fwd_classes, &c, &e), 0);
  CU_ASSERT_EQUAL(plan_reshape_read_classes(planbuf, plan_reshape_bwd_classes, &c, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "for qkv_dgrad, fc1_dgrad"));
}

/* The example plan of experiments/loss/ (its reshaping file named relative to its folder): each
 * direction's group is what the file chose for the classes it carries. */
static void test_example_plan(void) {
  plan p;
  ts_err e = {0};
  int rc = plan_load(EXAMPLE_PLAN, NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  const char *const *classes[] = {plan_reshape_fwd_classes, plan_reshape_bwd_classes};
  for (int t = PLAN_TRAFFIC_TP_FWD; t <= PLAN_TRAFFIC_TP_BWD; t++) {
    plan_reshape_choice c;
    CU_ASSERT_EQUAL_FATAL(plan_reshape_read_classes(EXAMPLE_RESHAPE, classes[t - PLAN_TRAFFIC_TP_FWD], &c, &e), 0);
    CU_ASSERT_EQUAL(p.codec[t].group, c.group);
    CU_ASSERT(p.codec[t].group_auto);
  }
}

static void test_rejects(void) {
  char buf[8192];
  const char *aut = "{\"kind\": \"taco\", \"group\": \"auto\", \"fp8\": \"e4m3\", \"reshape\": \"r.csv\"}";
  reshape_text(buf, sizeof buf, 256, "fc2_out", 128);
  write_file("r.csv", buf);
  expect_reject(aut, "r.csv: line", "fc2_out chose group 128");
  write_file("r.csv", "tensor,group\nattn_out,128\n");
  expect_reject(aut, "r.csv: line 1", "not the header");
  write_file("r.csv", HEADER "attn_out,3,256,768,100,hidden,0.02,0.7,yes,yes,yes\n");
  expect_reject(aut, "r.csv: line 2", "not a TACO group size");
  write_file("r.csv", HEADER "attn_out,3,256,768,128,hidden,0.02,0.7\n");
  expect_reject(aut, "r.csv: line 2", "not 11");
  write_file("r.csv", HEADER "attn_out,3,256,768,128,hidden,0.02,0.7,yes,yes,\n");
  expect_reject(aut, "r.csv", "no row chosen_runnable");
  write_file("r.csv", HEADER "attn_out,3,256,768,512,hidden,0.02,0.7,yes,no,yes\n");
  expect_reject(aut, "r.csv: line 2", "group 512 divides");
  write_file("r.csv", HEADER "attn_out,1,256,4444444444444096,32,hidden,0.067,4.9,,yes,yes\n");
  expect_reject(aut, "r.csv: line 2", "not a hidden size (1 to 16777216)");
  write_file("r.csv", HEADER "attn_out,3,256,768,128,tokens,0.02,0.7,yes,yes,yes\n");
  expect_reject(aut, "r.csv: line 2", "along hidden");
  write_file("r.csv", "");
  expect_reject(aut, "r.csv", "empty");
  expect_reject("{\"kind\": \"taco\", \"group\": \"auto\", \"fp8\": \"e4m3\", \"reshape\": \"missing.csv\"}",
                "missing.csv", "cannot read");
  reshape_text(buf, sizeof buf, 256, NULL, 0);
  write_file("r.csv", buf);
  expect_reject("{\"kind\": \"taco\", \"group\": \"auto\", \"fp8\": \"e4m3\"}", "codec.tp_fwd.reshape", "missing");
  expect_reject("{\"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\", \"reshape\": \"r.csv\"}",
                "codec.tp_fwd.reshape", "only applies");
  expect_reject("{\"kind\": \"taco\", \"group\": \"auto\", \"fp8\": \"e4m3\", \"reshape\": 7}", "codec.tp_fwd.reshape",
                "file name");
  expect_reject("{\"kind\": \"taco\", \"group\": \"big\", \"fp8\": \"e4m3\"}", "codec.tp_fwd.group", "");
  expect_reject("{\"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\", \"axis\": \"tokens\"}", "codec.tp_fwd.axis",
                "hidden only");
  expect_reject("{\"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\", \"axis\": \"rows\"}", "codec.tp_fwd.axis",
                "\"auto\" or \"hidden\"");
  expect_reject("{\"kind\": \"caat\", \"p\": 0.5, \"axis\": \"hidden\"}", "codec.tp_fwd.axis", "only applies");
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_plan_reshape_XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("plan_reshape", NULL, NULL);
  CU_add_test(s, "the shipped reshaping file", test_shipped_file);
  CU_add_test(s, "auto is the written group", test_auto_is_the_written_group);
  CU_add_test(s, "each TP direction takes its own tensor classes' choice", test_directions);
  CU_add_test(s, "the example plan", test_example_plan);
  CU_add_test(s, "bad files and fields rejected", test_rejects);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  char cmd[320];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd)) return 1;
  return failed ? 1 : 0;
}

/* test_calibrate_power.c — the plain C of the power phase of `tacorun
 * calibrate` (runtime/calibrate/calibrate_power_plan.c, calibrate_nvml.c): the
 * pattern planner, the fractions and speeds, the JSON and TSV writers, and
 * NVML's open path where the library is missing. CPU only. */
#include <CUnit/Basic.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibrate_nvml.h"
#include "calibrate_power.h"

static const calib_power_pattern *find(const calib_power_pattern *p, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(p[i].name, name)) return &p[i];
  return NULL;
}

static void test_plan(void) {
  ts_err e = {{0}, 0};
  calib_power_pattern p[CALIB_POWER_MAX_PATTERNS];
  /* an H100 under its cap: GEMM 90 us, add 33 us back to back */
  int n = calib_power_plan(90, 33, p, CALIB_POWER_MAX_PATTERNS, &e);
  CU_ASSERT_EQUAL(n, 3 + 10 + 3 + 1);
  CU_ASSERT_STRING_EQUAL(p[0].name, "idle");
  CU_ASSERT_EQUAL(p[0].n_gemm + p[0].n_add, 0);
  CU_ASSERT_STRING_EQUAL(p[1].name, "gemm");
  CU_ASSERT_EQUAL(p[1].n_gemm, 23); /* ceil(2000 / 90) */
  CU_ASSERT_EQUAL(p[1].n_add, 0);
  CU_ASSERT_DOUBLE_EQUAL(p[1].gemm_target, 1.0, 1e-12);
  CU_ASSERT_STRING_EQUAL(p[2].name, "mem");
  CU_ASSERT_EQUAL(p[2].n_add, 61); /* ceil(2000 / 33) */
  CU_ASSERT_DOUBLE_EQUAL(p[2].gemm_target, 0.0, 1e-12);
  /* mix at 0.5 over ~1 ms: k = round(500 / 90) = 6 GEMMs, j = round(540 / 33) = 16 adds */
  const calib_power_pattern *m = find(p, n, "mix-g50-p1ms");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->n_gemm, 6);
  CU_ASSERT_EQUAL(m->n_add, 16);
  CU_ASSERT_DOUBLE_EQUAL(m->idle_us, 0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(m->period_us, 6 * 90 + 16 * 33, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(m->gemm_target, 540.0 / 1068.0, 1e-12);
  /* 0.1 over ~1 ms: one GEMM, round(90 * 0.9 / (0.1 * 33)) = 25 adds */
  m = find(p, n, "mix-g10-p1ms");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->n_gemm, 1);
  CU_ASSERT_EQUAL(m->n_add, 25);
  /* every mix is within 0.02 of its target and its period within 25 % of the asked one */
  static const char *const mix[] = {"mix-g10", "mix-g25", "mix-g50", "mix-g75", "mix-g90"};
  static const double tg[] = {0.1, 0.25, 0.5, 0.75, 0.9};
  for (int i = 0; i < 5; i++)
    for (int ms = 1; ms <= 10; ms += 9) {
      char name[32];
      snprintf(name, sizeof name, "%s-p%dms", mix[i], ms);
      m = find(p, n, name);
      CU_ASSERT_PTR_NOT_NULL_FATAL(m);
      CU_ASSERT_DOUBLE_EQUAL(m->gemm_target, tg[i], 0.02);
      CU_ASSERT_DOUBLE_EQUAL(m->period_us / (1000.0 * ms), 1.0, 0.25);
      CU_ASSERT_TRUE(m->n_gemm >= 1 && m->n_add >= 1);
    }
  /* duties over 2 ms: 0.25 -> round(500 / 90) = 6 GEMMs, then 2000 - 540 = 1460 us idle (duty 0.27) */
  m = find(p, n, "gemm-d25");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->n_gemm, 6);
  CU_ASSERT_EQUAL(m->n_add, 0);
  CU_ASSERT_DOUBLE_EQUAL(m->idle_us, 2000 - 540, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(m->gemm_target, 0.27, 1e-12);
  CU_ASSERT_PTR_NOT_NULL(find(p, n, "gemm-d50"));
  CU_ASSERT_PTR_NOT_NULL(find(p, n, "gemm-d75"));
  m = find(p, n, "mem-d50");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->n_gemm, 0);
  CU_ASSERT_EQUAL(m->n_add, 30); /* round(1000 / 33) */
  CU_ASSERT_DOUBLE_EQUAL(m->idle_us, 2000 - 30 * 33, 1e-9);
  /* names unique and short */
  for (int i = 0; i < n; i++) {
    CU_ASSERT_TRUE(strlen(p[i].name) > 0 && strlen(p[i].name) < CALIB_POWER_NAME_MAX);
    for (int j = 0; j < i; j++) CU_ASSERT_STRING_NOT_EQUAL(p[i].name, p[j].name);
  }
  /* a slow GEMM (1 ms): a 0.1 mix over ~1 ms still has one GEMM, and 9 ms of adds */
  n = calib_power_plan(1000, 33, p, CALIB_POWER_MAX_PATTERNS, &e);
  m = find(p, n, "mix-g10-p1ms");
  CU_ASSERT_PTR_NOT_NULL_FATAL(m);
  CU_ASSERT_EQUAL(m->n_gemm, 1);
  CU_ASSERT_EQUAL(m->n_add, 273); /* round(900 / 3.3) */
  /* bad input and too small a buffer */
  CU_ASSERT_EQUAL(calib_power_plan(0, 33, p, CALIB_POWER_MAX_PATTERNS, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "GEMM launch time"));
  CU_ASSERT_EQUAL(calib_power_plan(90, NAN, p, CALIB_POWER_MAX_PATTERNS, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "add launch time"));
  CU_ASSERT_EQUAL(calib_power_plan(90, 33, p, 5, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "more than 5 patterns"));
}

static void test_fractions(void) {
  double g, m, i;
  calib_power_fractions(0.6, 0.3, 1.5, &g, &m, &i);
  CU_ASSERT_DOUBLE_EQUAL(g, 0.4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(m, 0.2, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(i, 0.4, 1e-12);
  /* events summing past the wall time (a few us of skew): scaled to 1, no idle */
  calib_power_fractions(1.2, 0.4, 1.5, &g, &m, &i);
  CU_ASSERT_DOUBLE_EQUAL(g, 0.75, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(m, 0.25, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(i, 0.0, 1e-12);
  /* nothing measured: all idle */
  calib_power_fractions(0, 0, 2.0, &g, &m, &i);
  CU_ASSERT_DOUBLE_EQUAL(i, 1.0, 1e-12);
  calib_power_fractions(0.5, 0, 0, &g, &m, &i);
  CU_ASSERT_DOUBLE_EQUAL(g, 0.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(i, 1.0, 1e-12);
}

/* A result as the GPU run gives one: idle, gemm, mem and one mix. */
static void fill_result(calib_power_result *r) {
  memset(r, 0, sizeof *r);
  r->cap_w = 700;
  r->f_max_mhz = 1980;
  r->idle_w = 70.5;
  snprintf(r->gpu, sizeof r->gpu, "NVIDIA H100 80GB HBM3");
  static const char *const names[] = {"idle", "gemm", "mem", "mix-g50-p1ms"};
  static const double gl[] = {0, 92.0, 0, 80.0}, al[] = {0, 0, 33.0, 30.0};
  static const double g[] = {0, 0.995, 0, 0.48}, m[] = {0, 0, 0.99, 0.50};
  static const double w[] = {70.5, 699.0, 420.0, 610.0}, mhz[] = {345, 1440, 1980, 1755};
  for (int i = 0; i < 4; i++) {
    calib_power_row *x = &r->rows[i];
    snprintf(x->plan.name, sizeof x->plan.name, "%s", names[i]);
    x->gemm_launch_us = gl[i];
    x->add_launch_us = al[i];
    x->gemm = g[i];
    x->mem = m[i];
    x->idle = 1 - g[i] - m[i];
    x->power_w = w[i];
    x->mhz_mean = mhz[i];
    x->period_us = 1000 + i;
    x->samples = 150;
  }
  r->n = 4;
}

static void test_speeds(void) {
  ts_err e = {{0}, 0};
  calib_power_result *r = malloc(sizeof *r);
  fill_result(r);
  CU_ASSERT_EQUAL(calib_power_speeds(r, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(r->rows[1].gemm_speed, 1.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(r->rows[1].mem_speed, 0.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(r->rows[2].mem_speed, 1.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(r->rows[3].gemm_speed, 92.0 / 80.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(r->rows[3].mem_speed, 1.1, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(r->rows[0].gemm_speed, 0.0, 1e-12);
  /* no reference: refused */
  snprintf(r->rows[2].plan.name, sizeof r->rows[2].plan.name, "mem2");
  CU_ASSERT_EQUAL(calib_power_speeds(r, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "\"mem\""));
  free(r);
}

static char *tmp_path(const char *suffix) {
  static char buf[2][64];
  static int k;
  char *p = buf[k++ % 2];
  snprintf(p, 64, "/tmp/test_calibrate_power_%d%s", (int)getpid(), suffix);
  return p;
}

static void test_json(void) {
  ts_err e = {{0}, 0};
  calib_power_result *r = malloc(sizeof *r);
  fill_result(r);
  CU_ASSERT_EQUAL_FATAL(calib_power_speeds(r, &e), 0);
  const char *path = tmp_path(".json");
  CU_ASSERT_EQUAL_FATAL(calib_power_write_json(path, r, &e), 0);
  json_error_t je;
  json_t *o = json_load_file(path, 0, &je);
  CU_ASSERT_PTR_NOT_NULL_FATAL(o);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(o, "cap_w")), 700, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(o, "f_max_mhz")), 1980, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(o, "idle_w")), 70.5, 1e-9);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "gpu")), "NVIDIA H100 80GB HBM3");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "gemm")), "4096x4096x2048 bf16");
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(o, "mem")), "rt_add 96 MiB");
  CU_ASSERT_EQUAL(json_object_size(o), 7);
  json_t *s = json_object_get(o, "samples");
  CU_ASSERT_EQUAL_FATAL(json_array_size(s), 3); /* idle is not a sample */
  json_t *mix = json_array_get(s, 2);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(mix, "name")), "mix-g50-p1ms");
  CU_ASSERT_EQUAL(json_object_size(mix), 9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(mix, "gemm")), 0.48, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(mix, "mem")), 0.50, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(mix, "idle")), 0.02, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(mix, "period_us")), 1003, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(mix, "power_w")), 610, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(mix, "sm_mhz")), 1755, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(mix, "gemm_speed")), 1.15, 1e-5);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(mix, "mem_speed")), 1.1, 1e-5);
  json_t *g = json_array_get(s, 0);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(g, "name")), "gemm");
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(g, "gemm_speed")), 1.0, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(json_number_value(json_object_get(g, "mem_speed")), 0.0, 1e-12);
  json_decref(o);
  remove(path);
  free(r);
}

static void test_json_refused(void) {
  ts_err e = {{0}, 0};
  calib_power_result *r = malloc(sizeof *r);
  const char *path = tmp_path("-bad.json");
  remove(path);
  /* fractions that do not sum to 1 */
  fill_result(r);
  r->rows[3].idle = 0.1;
  CU_ASSERT_EQUAL(calib_power_write_json(path, r, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mix-g50-p1ms: fractions sum to"));
  CU_ASSERT_EQUAL(access(path, F_OK), -1); /* nothing written */
  /* a name twice */
  fill_result(r);
  snprintf(r->rows[3].plan.name, sizeof r->rows[3].plan.name, "mem");
  CU_ASSERT_EQUAL(calib_power_write_json(path, r, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mem: name given twice"));
  /* no "gemm" sample */
  fill_result(r);
  snprintf(r->rows[1].plan.name, sizeof r->rows[1].plan.name, "gemm-b2b");
  CU_ASSERT_EQUAL(calib_power_check(r, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no \"gemm\" sample"));
  /* a window without power */
  fill_result(r);
  r->rows[2].power_w = NAN;
  CU_ASSERT_EQUAL(calib_power_check(r, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mem: power_w"));
  fill_result(r);
  r->cap_w = 0;
  CU_ASSERT_EQUAL(calib_power_check(r, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "power.cap_w"));
  CU_ASSERT_EQUAL(access(path, F_OK), -1);
  free(r);
}

static void test_tsv(void) {
  ts_err e = {{0}, 0};
  calib_power_result *r = malloc(sizeof *r);
  fill_result(r);
  r->rows[3].plan.n_gemm = 6;
  r->rows[3].plan.n_add = 16;
  r->rows[3].mhz_min = 1700;
  r->rows[3].mhz_max = 1800;
  const char *path = tmp_path(".tsv");
  CU_ASSERT_EQUAL_FATAL(calib_power_write_tsv(path, r, &e), 0);
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[1024];
  int rows = 0, cols_header = 0;
  char last[1024] = "";
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') continue;
    if (!cols_header) {
      for (char *c = line; *c; c++) cols_header += *c == '\t';
      cols_header++;
      CU_ASSERT_EQUAL(strncmp(line, "name\tn_gemm\tn_add", 17), 0);
      continue;
    }
    int cols = 1;
    for (char *c = line; *c; c++) cols += *c == '\t';
    CU_ASSERT_EQUAL(cols, cols_header);
    rows++;
    snprintf(last, sizeof last, "%s", line);
  }
  fclose(f);
  CU_ASSERT_EQUAL(cols_header, 25);
  CU_ASSERT_EQUAL(rows, 4); /* idle is a row of the table */
  CU_ASSERT_EQUAL(strncmp(last, "mix-g50-p1ms\t6\t16\t", 18), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(last, "\t1700\t1755.0\t1800\t150\n"));
  remove(path);
  free(r);
}

/* --power-gemm rows: after the patterns, the same columns plus the achieved
 * TFLOP/s (2 m n k / the launch time); an attention mix's TFLOP/s is the
 * attention's (the adds' slot); the JSON does not carry them. */
static void test_tsv_shapes(void) {
  ts_err e = {{0}, 0};
  calib_power_result *r = malloc(sizeof *r);
  fill_result(r);
  calib_power_row *g = &r->gemms[0];
  memset(g, 0, sizeof *g);
  snprintf(g->plan.name, sizeof g->plan.name, "gemm-4096x28672x4096");
  g->m = 4096, g->n = 28672, g->k = 4096;
  g->plan.n_gemm = 2;
  g->flops = 2.0 * 4096 * 28672 * 4096;
  g->gemm_launch_us = 1202.6; /* 2 x 4096 x 28672 x 4096 = 962.07e9 FLOPs: 800.0 TFLOP/s */
  g->power_w = 690.5;
  /* an attention op mixed with the reference GEMM: its TFLOP/s from the attention's launch time (the adds' slot) */
  calib_power_row *a = &r->gemms[1];
  memset(a, 0, sizeof *a);
  snprintf(a->plan.name, sizeof a->plan.name, "amix-32x8x128x1x4096");
  a->plan.n_gemm = 15, a->plan.n_add = 1;
  a->flops = 275e9;
  a->gemm_launch_us = 110.0, a->add_launch_us = 1375.0; /* 200.0 TFLOP/s */
  a->mem_speed = 0.95;
  r->n_gemms = 2;
  const char *path = tmp_path(".tsv");
  CU_ASSERT_EQUAL_FATAL(calib_power_write_tsv(path, r, &e), 0);
  FILE *f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[1024], last[1024] = "", mix[1024] = "";
  int comments = 0, rows = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#') comments++;
    else if (strncmp(line, "amix-", 5) == 0) rows++, snprintf(mix, sizeof mix, "%s", line);
    else rows++, snprintf(last, sizeof last, "%s", line);
  }
  fclose(f);
  CU_ASSERT_EQUAL(comments, 6);
  CU_ASSERT_EQUAL(rows, 1 + 4 + 2); /* header, the 4 patterns, the shape, the attention mix */
  size_t nm = strlen(mix);
  CU_ASSERT(nm > 7 && strcmp(mix + nm - 7, "\t200.0\n") == 0);
  CU_ASSERT_EQUAL(strncmp(mix, "amix-32x8x128x1x4096\t15\t1\t", 26), 0);
  CU_ASSERT_EQUAL(strncmp(last, "gemm-4096x28672x4096\t2\t0\t", 25), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(last, "\t690.50\t"));
  int cols = 1;
  for (char *c = last; *c; c++) cols += *c == '\t';
  CU_ASSERT_EQUAL(cols, 26);
  size_t n = strlen(last);
  CU_ASSERT(n > 7 && strcmp(last + n - 7, "\t800.0\n") == 0);
  const char *json = tmp_path(".json");
  CU_ASSERT_EQUAL_FATAL(calib_power_write_json(json, r, &e), 0);
  f = fopen(json, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  int found = 0;
  while (fgets(line, sizeof line, f)) found |= strstr(line, "28672") != NULL;
  fclose(f);
  CU_ASSERT_EQUAL(found, 0);
  remove(json);
  remove(path);
  free(r);
}

static void test_nvml_missing(void) {
  ts_err e = {{0}, 0};
  calib_nvml n;
  memset(&n, 0x5a, sizeof n);
  CU_ASSERT_EQUAL(calib_nvml_open(&n, "libtacosim-no-such-nvml.so.1", "0000:18:00.0", &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "power: cannot open libtacosim-no-such-nvml.so.1"));
  CU_ASSERT_PTR_NULL(n.lib); /* left closed */
  CU_ASSERT_EQUAL(n.inited, 0);
  calib_nvml_close(&n); /* safe twice */
  /* a call's failure names the function and the code */
  CU_ASSERT_EQUAL(calib_nvml_fail(&n, "nvmlDeviceGetTotalEnergyConsumption", 3, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "power: nvmlDeviceGetTotalEnergyConsumption: unknown error (NVML error 3)"));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("calibrate power phase", NULL, NULL);
  CU_add_test(s, "planner: back to back, mixes, duties, names, bad input", test_plan);
  CU_add_test(s, "fractions of a window", test_fractions);
  CU_add_test(s, "speeds against back to back", test_speeds);
  CU_add_test(s, "JSON: the section's shape and values", test_json);
  CU_add_test(s, "JSON: refused samples, nothing written", test_json_refused);
  CU_add_test(s, "TSV: every row, every column", test_tsv);
  CU_add_test(s, "TSV: --power-gemm shapes after the patterns, not in the JSON", test_tsv_shapes);
  CU_add_test(s, "NVML: missing library, named errors", test_nvml_missing);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

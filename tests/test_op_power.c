/* test_op_power.c — the calibration's "op_power" section (schema/calibration_op_power.c) and the clock of a window
 * of ops under the cap from it (sim/sim_op_power.c): the section read, written back and carried by
 * --compute-from; bad input names the file and the field; the attention row nearest a shape; a class's power at
 * a clock; the window's clock by hand. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"
#include "sim_op_power.h"
#include "test_cal_round_trip.h"
#include "test_cal_section.h"
#include "test_check.h"

/* A section with every field; ROWS are its attention rows. */
static const char *GOOD =
    "\"op_power\": {\"gpu\": \"X\", \"source\": \"hand\", \"cap_w\": 700, \"f_max_mhz\": 2000, \"idle_w\": 100, "
    "\"power_exponent\": 1, \"mem_power_exponent\": 0, \"speed_exponent\": 0.5, "
    "\"gemm\": {\"power_w\": 700, \"mhz\": 1000}, \"mem\": {\"power_w\": 400, \"mhz\": 2000}, "
    "\"attention_prefill\": [%s]}}";
static const char *ROWS =
    "{\"heads\": 32, \"kv_heads\": 8, \"head_dim\": 128, \"batch\": 1, \"seq\": 4096, \"power_w\": 690, \"mhz\": 1866},"
    "{\"heads\": 32, \"kv_heads\": 8, \"head_dim\": 128, \"batch\": 64, \"seq\": 256, \"power_w\": 450, \"mhz\": 2000},"
    "{\"heads\": 40, \"kv_heads\": 8, \"head_dim\": 128, \"batch\": 1, \"seq\": 4096, \"power_w\": 660, \"mhz\": 1980}";

/* text with its first `from` replaced by `to`, into out */
static void replaced(char *out, size_t cap, const char *text, const char *from, const char *to) {
  const char *at = strstr(text, from);
  CU_ASSERT_PTR_NOT_NULL_FATAL(at);
  snprintf(out, cap, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
}

/* The good section loaded into c: 0, or -1 (reported) */
static int load_good(schema_calibration *c) {
  ts_err e = {0};
  int rc = test_cal_load_section(ROWS, GOOD, c, &e);
  ASSERT_OK(rc, e);
  return rc;
}

static void test_load_and_round_trip(void) {
  schema_calibration c;
  ts_err e = {0};
  if (load_good(&c)) return;
  int rc;
  const schema_op_power *p = &c.op_power;
  CU_ASSERT_EQUAL(p->n_attn, 3);
  NEAR(p->gemm_w, 700, 0);
  NEAR(p->gemm_mhz, 1000, 0);
  NEAR(p->mem_w, 400, 0);
  NEAR(p->speed_exponent, 0.5, 0);
  CU_ASSERT_EQUAL(p->attn[1].batch, 64);
  CU_ASSERT_STRING_EQUAL(p->source, "hand");
  schema_calibration back;
  rc = test_cal_round_trip(&c, "op_power.json", &back, &e);
  ASSERT_OK(rc, e);
  if (rc == 0) {
    CU_ASSERT_EQUAL(back.op_power.n_attn, 3);
    NEAR(back.op_power.attn[0].mhz, 1866, 1e-7);
    NEAR(back.op_power.idle_w, 100, 1e-7);
    NEAR(back.op_power.power_exponent, 1, 1e-7);
    schema_calibration other; /* carried by --compute-from: a property of the GPU */
    memset(&other, 0, sizeof other);
    CU_ASSERT_EQUAL(schema_calibration_copy_compute(&other, &back), 0);
    CU_ASSERT_EQUAL(other.op_power.n_attn, 3);
    schema_calibration_free(&other);
    schema_calibration_free(&back);
  }
  CU_ASSERT(p->attention_speed_exponent < 0); /* not in the section: not measured */
  /* with the attention's own exponent: read and written back */
  {
    char fmt[2048];
    replaced(fmt, sizeof fmt, GOOD, "\"speed_exponent\": 0.5, ",
             "\"speed_exponent\": 0.5, \"attention_speed_exponent\": 0.25, ");
    schema_calibration a, a_back;
    rc = test_cal_load_section(ROWS, fmt, &a, &e);
    ASSERT_OK(rc, e);
    if (rc == 0) {
      NEAR(a.op_power.attention_speed_exponent, 0.25, 0);
      rc = test_cal_round_trip(&a, "op_power_attn.json", &a_back, &e);
      ASSERT_OK(rc, e);
      if (rc == 0) {
        NEAR(a_back.op_power.attention_speed_exponent, 0.25, 1e-12);
        schema_calibration_free(&a_back);
      }
      schema_calibration_free(&a);
    }
  }
  /* no section: nothing */
  schema_calibration none;
  const char *text = TEST_CAL_HEAD "}";
  rc = schema_calibration_from_json_text(text, strlen(text), "none.json", &none, &e);
  ASSERT_OK(rc, e);
  if (rc == 0) {
    CU_ASSERT_EQUAL(none.op_power.n_attn, 0);
    schema_calibration_free(&none);
  }
  schema_calibration_free(&c);
}

/* The section of fmt with rows refused, naming the file and the field. */
static void expect_refused(const char *rows, const char *fmt, const char *field) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL(test_cal_load_section(rows, fmt, &c, &e), -1);
  ASSERT_MSG(e, "bad.json");
  ASSERT_MSG(e, field);
}

static void test_bad_input(void) {
  static const struct {
    const char *from, *to, *field;
  } bad[] = {
      {"\"idle_w\": 100", "\"idle_w\": 800", "op_power.idle_w"},          /* above the cap */
      {"\"speed_exponent\": 0.5", "\"speed_exponent\": -1", "speed_exponent"},
      {"\"mhz\": 1000", "\"mhz\": 2500", "op_power.gemm"},               /* above f_max */
      {"\"power_w\": 400", "\"power_w\": 90", "op_power.mem"},           /* below idle */
      {"\"source\": \"hand\", ", "", "source"},                          /* missing */
      {"\"gemm\": {\"power_w\": 700, \"mhz\": 1000}", "\"gemm\": {\"power_w\": 700}", "op_power.gemm"},
      {"\"cap_w\": 700", "\"cap_w\": 700, \"extra\": 1", "op_power.extra"},
      {"\"attention_prefill\": [%s]", "\"attention_prefill\": []", "op_power.attention_prefill"},
      {"\"speed_exponent\": 0.5", "\"speed_exponent\": 0.5, \"attention_speed_exponent\": -0.1",
       "attention_speed_exponent"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char fmt[2048];
    replaced(fmt, sizeof fmt, GOOD, bad[i].from, bad[i].to);
    expect_refused(ROWS, fmt, bad[i].field);
  }
  static const struct {
    const char *from, *to, *field;
  } bad_row[] = {
      {"\"kv_heads\": 8, \"head_dim\": 128, \"batch\": 64", "\"kv_heads\": 7, \"head_dim\": 128, \"batch\": 64",
       "op_power.attention_prefill[1]"}, /* 7 does not divide 32 */
      {"\"mhz\": 1866", "\"mhz\": 2001", "op_power.attention_prefill[0]"},
      {"\"power_w\": 450", "\"power_w\": 99", "op_power.attention_prefill[1]"},
      {"\"seq\": 4096, \"power_w\": 660", "\"seq\": 0, \"power_w\": 660", "op_power.attention_prefill[2]"},
      {"\"batch\": 64", "\"batches\": 64", "op_power.attention_prefill[1]"},
  };
  for (size_t i = 0; i < sizeof bad_row / sizeof bad_row[0]; i++) {
    char rows[2048];
    replaced(rows, sizeof rows, ROWS, bad_row[i].from, bad_row[i].to);
    expect_refused(rows, GOOD, bad_row[i].field);
  }
}

/* The nearest layout first (40 / 8 heads is the third row whatever the shape), then the nearest shape. */
static void test_nearest_row(void) {
  schema_calibration c;
  if (load_good(&c)) return;
  const schema_op_power *p = &c.op_power;
  CU_ASSERT_PTR_EQUAL(schema_op_power_attention(p, 40, 8, 128, 64, 256), &p->attn[2]);
  CU_ASSERT_PTR_EQUAL(schema_op_power_attention(p, 32, 8, 128, 1, 8192), &p->attn[0]);
  CU_ASSERT_PTR_EQUAL(schema_op_power_attention(p, 32, 8, 128, 32, 128), &p->attn[1]);
  CU_ASSERT_PTR_EQUAL(schema_op_power_attention(p, 16, 4, 128, 64, 256), &p->attn[1]); /* 32 / 8 the nearest */
  /* the power of a class: idle + (p0 - idle) (f / f0)^g */
  NEAR(schema_op_power_w(p, 700, 1000, 1, 1500), 100 + 600 * 1.5, 1e-12);
  NEAR(schema_op_power_w(p, 400, 2000, 0, 1000), 400, 1e-12);
  schema_calibration_free(&c);
}

/* The window's clock by hand. Speed exponent 0 (times fixed), power exponents 1 and 0: one second of GEMM (700 W
 * at 1,000 MHz) and one of memory-bound work (400 W flat) draw (100 + 600 f / 1000 + 400) / 2 = 250 + 0.3 f, at
 * most 700 W: f = 1,500 MHz. Under 1,000 W: f_max, 2,000 MHz (850 W). Under 300 W, not even a quarter of f_max:
 * 500 MHz. With speed exponent 0.5 the speeds are (f / f0)^0.5: the GEMM at 1,500 MHz sqrt(1.5). */
static void test_window_clock(void) {
  schema_op_power p = {.cap_w = 700, .f_max_mhz = 2000, .idle_w = 100, .power_exponent = 1, .speed_exponent = 0,
                       .gemm_w = 700, .gemm_mhz = 1000, .mem_w = 400, .mem_mhz = 2000};
  sim_op_power_item it[2] = {sim_op_power_gemm(&p, 1.0), sim_op_power_mem(&p, 1.0)};
  NEAR(sim_op_power_mean_w(&p, it, 2, 1500), 700, 1e-12);
  NEAR(sim_op_power_clock(&p, it, 2, 700), 1500, 1e-9);
  NEAR(sim_op_power_clock(&p, it, 2, 1000), 2000, 0);
  NEAR(sim_op_power_clock(&p, it, 2, 300), SIM_OP_POWER_MIN_SHARE * 2000, 0);
  p.speed_exponent = 0.5;
  sim_op_power_item g = sim_op_power_gemm(&p, 1.0), m = sim_op_power_mem(&p, 1.0);
  NEAR(sim_op_power_speed(&g, 1500), sqrt(1.5), 1e-12);
  NEAR(sim_op_power_speed(&m, 1500), 1, 0);
  /* the attention item: the section's attention exponent where measured, else the GEMMs' */
  schema_op_power_attn row = {32, 8, 128, 1, 4096, 690, 1866};
  p.n_attn = 1, p.attn[0] = row, p.attention_speed_exponent = -1;
  sim_op_power_item at = sim_op_power_attention(&p, 1.0, 32, 8, 128, 1, 4096);
  NEAR(at.b, 0.5, 0);
  NEAR(at.f0_mhz, 1866, 0);
  NEAR(at.p0_w, 690, 0);
  p.attention_speed_exponent = 0.2;
  at = sim_op_power_attention(&p, 1.0, 32, 8, 128, 1, 4096);
  NEAR(at.b, 0.2, 0);
  /* with speed: the GEMM second shrinks to 1 / sqrt(f / 1000), the balance by bisection agrees with the mean */
  sim_op_power_item it2[2] = {g, m};
  double f = sim_op_power_clock(&p, it2, 2, 700);
  NEAR(sim_op_power_mean_w(&p, it2, 2, f), 700, 1e-9);
  CU_ASSERT(f > 1500); /* less GEMM time at the same clock: a lower mean, a higher clock */
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("op_power", NULL, NULL);
  CU_add_test(s, "the section read, written back, carried by --compute-from", test_load_and_round_trip);
  CU_add_test(s, "bad input names the file and the field", test_bad_input);
  CU_add_test(s, "the attention row nearest a shape; a class's power at a clock", test_nearest_row);
  CU_add_test(s, "the window's clock under the cap by hand", test_window_clock);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

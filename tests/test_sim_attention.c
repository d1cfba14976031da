/* test_sim_attention.c — attention_backend "unfused": the attention op of a
 * layer is priced as its parts (two batched GEMMs over the stacked rows, the
 * softmax and the dropout over the s x s scores through memory), forward and
 * backward, from the same calibration tables the rest of the plan uses. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "sim.h"
#include "sim_costs.h"
#include "test_check.h"

/* gpt-h4096-1gpu with the attention fields set. */
static int load_plan(plan *p, const char *backend, double dropout, ts_err *e) {
  json_error_t je;
  json_t *root = json_load_file(PLANS_DIR "/gpt-h4096-1gpu.json", 0, &je);
  if (!root) return -1;
  json_object_set_new(root, "attention_backend", json_string(backend));
  json_object_set_new(root, "attention_dropout", json_real(dropout));
  char *text = json_dumps(root, 0);
  json_decref(root);
  int rc = plan_from_json_text(text, strlen(text), "unfused.json", NULL, NULL, p, e);
  free(text);
  return rc;
}

/* The time of the first attention op of each phase on rank 0. */
static void attention_s(const plan *p, const schema_calibration *cal, double *fwd, double *bwd) {
  static sim_costs c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, p, cal, NULL, &e), 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, 0, &prog, &e), 0);
  *fwd = *bwd = -1;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || c.mops[op->model_op].kind != MODEL_OP_ATTENTION) continue;
    double *slot = op->phase == PLAN_PHASE_BWD ? bwd : fwd;
    if (*slot < 0) CU_ASSERT_EQUAL(sim_compute_s(&c, op, slot, &e), 0);
  }
  plan_program_free(&prog);
  CU_ASSERT(*fwd > 0 && *bwd > 0);
}

static double lookup_gemm(schema_lookup *lk, long long m, long long n, long long k) {
  double us;
  ts_err e = {0};
  CU_ASSERT_EQUAL(schema_lookup_gemm(lk, m, n, k, &us, &e), 0);
  return us;
}
static double lookup_kernel(schema_lookup *lk, const char *name, double bytes) {
  double us;
  ts_err e = {0};
  CU_ASSERT_EQUAL(schema_lookup_kernel(lk, name, bytes, 0, &us, &e), 0);
  return us;
}

/* Hand-composed from the tables: forward QK^T [rows x s x d] + PV [rows x d x
 * s] + softmax and dropout over (4 + 5) bytes per score; backward two dS
 * GEMMs [rows x d x s], dP [rows x s x d], dV [rows x d x s] and (6 + 5)
 * bytes per score. rows = micro x heads x s. */
static void test_unfused_composed(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "unfused", 0.1, &e), 0);
  CU_ASSERT_EQUAL(p.attention_backend, PLAN_ATTENTION_UNFUSED);
  schema_calibration cal;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(MEASURED_CALIBRATION, &cal, &e), 0);
  double fwd, bwd;
  attention_s(&p, &cal, &fwd, &bwd);
  schema_lookup lk;
  schema_roofline roof;
  sim_roofline_of(&p.cluster, &roof);
  schema_lookup_init(&lk, &cal, &roof, NULL);
  long long s = p.seq, d = model_head_dim(&p.model), rows = (long long)p.micro_batch * p.model.heads * s;
  double scores = (double)rows * s;
  const char *bwd_table = schema_has_kernel(&cal, "elementwise_bwd") ? "elementwise_bwd" : "elementwise";
  double want_fwd = lookup_gemm(&lk, rows, s, d) + lookup_gemm(&lk, rows, d, s) +
                    lookup_kernel(&lk, "elementwise", 9.0 * scores);
  double want_bwd = 3 * lookup_gemm(&lk, rows, d, s) + lookup_gemm(&lk, rows, s, d) +
                    lookup_kernel(&lk, bwd_table, 11.0 * scores);
  NEAR(fwd, want_fwd * 1e-6, 1e-9);
  NEAR(bwd, want_bwd * 1e-6, 1e-9);
  schema_calibration_free(&cal);
}

/* Dropout costs a kernel only when it is on; the fused kernel never pays the
 * s x s traffic, so at s = 2048 unfused attention is the slower one. */
static void test_unfused_against_fused(void) {
  static plan p;
  ts_err e = {0};
  schema_calibration cal;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(MEASURED_CALIBRATION, &cal, &e), 0);
  double f_fwd, f_bwd, u_fwd, u_bwd, n_fwd, n_bwd;
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "fused", 0.1, &e), 0);
  attention_s(&p, &cal, &f_fwd, &f_bwd);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "unfused", 0.1, &e), 0);
  attention_s(&p, &cal, &u_fwd, &u_bwd);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "unfused", 0.0, &e), 0);
  attention_s(&p, &cal, &n_fwd, &n_bwd);
  CU_ASSERT(u_fwd > f_fwd && u_bwd > f_bwd);
  CU_ASSERT(n_fwd < u_fwd && n_bwd < u_bwd);
  schema_calibration_free(&cal);
}

static void test_bad_fields(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_NOT_EQUAL(load_plan(&p, "flash3", 0.0, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "attention_backend"));
  /* Megatron's auto (TE chooses) and local are not implementations a plan can be priced by */
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_NOT_EQUAL(load_plan(&p, i ? "local" : "auto", 0.0, &e), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "attention_backend"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "is not one of"));
  }
  const struct {
    const char *name;
    plan_attention_backend be;
  } ok[] = {{"fused", PLAN_ATTENTION_FUSED}, {"flash", PLAN_ATTENTION_FLASH}, {"executor", PLAN_ATTENTION_EXECUTOR},
            {"unfused", PLAN_ATTENTION_UNFUSED}};
  for (int i = 0; i < 4; i++) {
    CU_ASSERT_EQUAL_FATAL(load_plan(&p, ok[i].name, 0.0, &e), 0);
    CU_ASSERT_EQUAL(p.attention_backend, ok[i].be);
    CU_ASSERT_STRING_EQUAL(plan_attention_backend_name(p.attention_backend), ok[i].name);
  }
  CU_ASSERT_NOT_EQUAL(load_plan(&p, "unfused", 1.5, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "attention_dropout"));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_attention", NULL, NULL);
  CU_add_test(s, "unfused attention is its parts, from the tables", test_unfused_composed);
  CU_add_test(s, "unfused against fused, dropout on and off", test_unfused_against_fused);
  CU_add_test(s, "bad attention fields are named", test_bad_fields);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

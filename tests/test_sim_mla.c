/* test_sim_mla.c — multi-head latent attention as the executor runs it: under
 * attention_backend "executor" the attention op is priced as the unfused
 * program with the query/key GEMMs at qk_nope + qk_rope and the value GEMMs
 * at v_head_dim (sim_costs.c, unfused_attention_us), and the program has a
 * kv_scatter op after kv_b's forward and before its backward (plan_mla.c),
 * priced by its bytes through the "elementwise" table. Worked by hand on a
 * calibration of one elementwise table and the roofline's GEMMs. */
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
#include "test_hand_elementwise.h"

/* PLANS_DIR/<name>.json with attention_backend set to `backend`. */
static int load_plan(plan *p, const char *name, const char *backend, ts_err *e) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s.json", PLANS_DIR, name);
  json_error_t je;
  json_t *root = json_load_file(path, 0, &je);
  if (!root) return -1;
  json_object_set_new(root, "attention_backend", json_string(backend));
  char *text = json_dumps(root, 0);
  json_decref(root);
  int rc = plan_from_json_text(text, strlen(text), path, NULL, NULL, p, e);
  free(text);
  return rc;
}


/* Layer 0, micro-batch 0 on rank 0: the attention op forward and backward, the kv_scatter op forward and
 * backward (us; -1 when absent), its bytes, and where the kv_scatter ops stand against kv_b's. */
typedef struct {
  double attn[2], scatter[2], scatter_bytes;
  int n_scatter, scatter_after_kv_b_fwd, scatter_before_kv_b_bwd;
} layer_prices;

static void prices_of(const plan *p, const schema_calibration *cal, layer_prices *r) {
  static sim_costs c;
  ts_err e = {0};
  *r = (layer_prices){{-1, -1}, {-1, -1}, -1, 0, 0, 0};
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, p, cal, NULL, &e), 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, 0, &prog, &e), 0);
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE) continue;
    if (op->model_op == PLAN_MOP_MLA_KV_SCATTER) r->n_scatter++;
    if (op->layer != 0 || op->micro != 0) continue;
    const int bwd = op->phase == PLAN_PHASE_BWD;
    double s;
    if (op->model_op == PLAN_MOP_MLA_KV_SCATTER) {
      CU_ASSERT_EQUAL(sim_compute_s(&c, op, &s, &e), 0);
      r->scatter[bwd] = s * 1e6;
      r->scatter_bytes = op->bytes;
      /* forward: the op before is kv_b's; backward: the op after is kv_b's dgrad */
      const plan_op *nb = &prog.ops[bwd ? i + 1 : i - 1];
      const bool kv_b = nb->kind == PLAN_OP_COMPUTE && nb->model_op >= 0 && !strcmp(c.mops[nb->model_op].name, "kv_b");
      if (bwd) r->scatter_before_kv_b_bwd = kv_b && nb->part == PLAN_PART_DGRAD;
      else r->scatter_after_kv_b_fwd = kv_b;
    } else if (op->model_op >= 0 && c.mops[op->model_op].kind == MODEL_OP_ATTENTION) {
      CU_ASSERT_EQUAL(sim_compute_s(&c, op, &s, &e), 0);
      r->attn[bwd] = s * 1e6;
    }
  }
  plan_program_free(&prog);
}

/* mla-tiny (8 heads, q/k 128 + 64 = 192, v 128; micro-batch 1, seq 2048, TP 1; 4 layers, 8 micro-batches).
 * rows = 8 x 2048 = 16,384 stacked query rows. The executor's causal softmax touches each row's columns up
 * to the diagonal in chunks of 8: 2048 x 2056 / 2 = 2,105,344 scores a head, 16,842,752 in all.
 * Forward: Q K^T [16384 x 2048 x 192] and P V [16384 x 128 x 2048], two GEMMs of 3 us + 2 x 16384 x 2048 x
 * 192 (or 128) / peak, and the softmax's 4 bytes a score: 5e-6 x 67,371,008 = 336.85504 us.
 * Backward: dQ, dK [16384 x 192 x 2048] each, dP [16384 x 2048 x 128], dV [16384 x 128 x 2048], four GEMMs
 * (12 us of launches) and 6 bytes a score: 5e-6 x 101,056,512 = 505.28256 us.
 * kv_scatter: 2,048 tokens x 8 heads x (128 + 128) elements, 2 bytes read and 2 written:
 * 16,777,216 bytes, 5e-6 x that = 83.88608 us, forward and backward alike. */
static void test_mla_by_hand(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "mla-tiny-1gpu", "executor", &e), 0);
  CU_ASSERT_TRUE(sim_attention_runs_unfused(&p));
  NEAR(sim_causal_softmax_scores(2048), 2105344.0, 0);
  NEAR(sim_causal_softmax_scores(12), 128.0, 0); /* rows 0-7: 8 columns each, rows 8-11: 16 */
  schema_calibration cal;
  hand_calibration(&cal);
  layer_prices r;
  prices_of(&p, &cal, &r);
  const double peak = p.cluster.gpu.bf16_tflops * 1e12, mm = 2.0 * 16384.0 * 2048.0 / peak * 1e6;
  NEAR(r.attn[0], 6.0 + mm * (192 + 128) + 336.85504, 1e-9);
  NEAR(r.attn[1], 12.0 + mm * (2 * 192 + 2 * 128) + 505.28256, 1e-9);
  NEAR(r.scatter_bytes, 16777216.0, 0);
  NEAR(r.scatter[0], 83.88608, 1e-9);
  NEAR(r.scatter[1], 83.88608, 1e-9);
  /* one forward and one backward copy a layer and micro-batch, placed around kv_b */
  CU_ASSERT_EQUAL(r.n_scatter, 2 * 4 * 8);
  CU_ASSERT_TRUE(r.scatter_after_kv_b_fwd);
  CU_ASSERT_TRUE(r.scatter_before_kv_b_bwd);
  schema_calibration_free(&cal);
}

/* The unfused backend (Megatron-LM's) prices MLA with the same GEMMs and its softmax over the whole rows:
 * 2048 x 2048 - 2,105,344 = 2,088,960 more scores a head, 16,711,680 in all, 4 bytes forward (334.2336 us
 * more) and 6 backward (501.3504 us); the flash backend keeps its attention tables (the
 * executor's unfused program is not what it names), and a model without MLA has no kv_scatter op and
 * keeps its attention pricing under the executor's backend. */
static void test_which_plans(void) {
  static plan p;
  ts_err e = {0};
  schema_calibration cal;
  hand_calibration(&cal);
  layer_prices ex, un;
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "mla-tiny-1gpu", "executor", &e), 0);
  prices_of(&p, &cal, &ex);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "mla-tiny-1gpu", "unfused", &e), 0);
  CU_ASSERT_TRUE(sim_attention_runs_unfused(&p));
  prices_of(&p, &cal, &un);
  NEAR(un.attn[0] - ex.attn[0], 334.2336, 1e-9);
  NEAR(un.attn[1] - ex.attn[1], 501.3504, 1e-9);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "mla-tiny-1gpu", "flash", &e), 0);
  CU_ASSERT_FALSE(sim_attention_runs_unfused(&p));
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "gpt-h4096-1gpu", "executor", &e), 0);
  CU_ASSERT_FALSE(sim_attention_runs_unfused(&p));
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int n = 0;
  for (int i = 0; i < prog.n; i++) n += prog.ops[i].model_op == PLAN_MOP_MLA_KV_SCATTER;
  CU_ASSERT_EQUAL(n, 0);
  plan_program_free(&prog);
  schema_calibration_free(&cal);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_mla", NULL, NULL);
  CU_add_test(s, "MLA under the executor: unfused attention at q/k and v widths, kv_scatter by its bytes",
              test_mla_by_hand);
  CU_add_test(s, "which plans price MLA unfused and have the kv_scatter op", test_which_plans);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_sim_loss.c — cross_entropy_loss_fusion false: the loss op is priced as
 * Megatron's unfused fp32 cross-entropy, kernel by kernel, each from its
 * bytes through the "elementwise" table (plan/plan_loss.c lists them); the
 * field is read strictly, and the memory model holds the 16-bit logits
 * beside their fp32 copy. */
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

/* gpt-h4096-1gpu (micro 2, seq 2048, vocabulary 50,257 padded to 50,304, TP 1)
 * with the field set to `value` (a JSON text; NULL: left out). */
static int load_plan(plan *p, const char *value, ts_err *e) {
  json_error_t je;
  json_t *root = json_load_file(PLANS_DIR "/gpt-h4096-1gpu.json", 0, &je);
  if (!root) return -1;
  if (value) json_object_set_new(root, "cross_entropy_loss_fusion", json_loads(value, JSON_DECODE_ANY, &je));
  char *text = json_dumps(root, 0);
  json_decref(root);
  int rc = plan_from_json_text(text, strlen(text), "loss.json", NULL, NULL, p, e);
  free(text);
  return rc;
}


/* The loss ops of micro-batch 0: forward, backward dgrad half, wgrad half (us). */
static void loss_us(const plan *p, const schema_calibration *cal, double us[3], double bytes[3]) {
  static sim_costs c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, p, cal, NULL, &e), 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, 0, &prog, &e), 0);
  for (int i = 0; i < 3; i++) us[i] = bytes[i] = -1;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op != PLAN_MOP_LOSS || op->micro != 0) continue;
    int w = op->phase == PLAN_PHASE_FWD ? 0 : op->part == PLAN_PART_DGRAD ? 1 : 2;
    double s;
    CU_ASSERT_EQUAL(sim_compute_s(&c, op, &s, &e), 0);
    us[w] = s * 1e6;
    bytes[w] = op->bytes;
  }
  plan_program_free(&prog);
}

/* Worked by hand. N = 2 x 2048 = 4,096 tokens, V = 50,304 logits per token,
 * L = N V = 206,045,184 logits. Forward (plan_loss.c): the six kernels over
 * the logits move 6 + 4 + 8 + 8 + 4 + 8 = 38 bytes per logit, and of them
 * max, subtract, sum and divide also 12 + 4 + 4 + 4 = 24 bytes per token:
 * each over 1 MB, so 5e-6 us per byte: 5e-6 x (38 L + 24 N) =
 * 5e-6 x 7,829,815,296 = 39,149.07648 us; the other twelve kernels touch
 * per-token values only (at most 24 x 4,096 bytes), 5 us each: 60 us.
 * Backward (with the dgrad half): multiply 8 bytes per logit + 4 per token,
 * cast back 6 per logit: 5e-6 x (14 L + 4 N) = 5e-6 x 2,884,648,960 =
 * 14,423.2448 us, and six per-token kernels: 30 us. The GEMMs are the
 * roofline's 3 us + 2 m n k / peak, as the fused op's. */
static void test_unfused_by_hand(void) {
  static plan fused, unfused;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&fused, NULL, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load_plan(&unfused, "false", &e), 0);
  CU_ASSERT_FALSE(fused.ce_unfused);
  CU_ASSERT_TRUE(unfused.ce_unfused);
  const double N = 4096, V = 50304, L = N * V, H = 4096;
  NEAR(plan_ce_logits(&unfused), L, 0);
  const plan_ce_kernel *k;
  CU_ASSERT_EQUAL(plan_ce_kernels(&unfused, PLAN_PHASE_FWD, &k), 18);
  CU_ASSERT_EQUAL(plan_ce_kernels(&unfused, PLAN_PHASE_BWD, &k), 8);
  CU_ASSERT_EQUAL(plan_ce_kernels(&fused, PLAN_PHASE_FWD, &k), 0);
  NEAR(plan_ce_unfused_bytes(&unfused, PLAN_PHASE_FWD), 38 * L + 163 * N, 1e-15);
  NEAR(plan_ce_unfused_bytes(&unfused, PLAN_PHASE_BWD), 14 * L + 85 * N, 1e-15);

  schema_calibration cal;
  hand_calibration(&cal);
  double f[3], u[3], fb[3], ub[3];
  loss_us(&fused, &cal, f, fb);
  loss_us(&unfused, &cal, u, ub);
  const double peak = fused.cluster.gpu.bf16_tflops * 1e12, gemm = 3.0 + 2.0 * N * V * H / peak * 1e6;
  NEAR(u[0], gemm + 39149.07648 + 60.0, 1e-9);
  NEAR(u[1], gemm + 14423.2448 + 30.0, 1e-9);
  NEAR(u[2], gemm, 1e-9);
  /* the fused op: the same GEMMs, one "loss" pass forward, nothing backward */
  NEAR(f[1], gemm, 1e-9);
  NEAR(f[2], gemm, 1e-9);
  CU_ASSERT(f[0] > gemm && f[0] < u[0]);
  /* the ops carry the unfused bytes: 38 L + 163 N forward, 14 L + 85 N with the dgrad half */
  NEAR(ub[0] - fb[0], 38 * L + 163 * N - 4 * L, 1e-12);
  NEAR(ub[1] - fb[1], 14 * L + 85 * N - 4 * L, 1e-12);
  NEAR(ub[2], fb[2], 0);
  schema_calibration_free(&cal);
}

/* A table point of list pts (exact m, n, k), or -1. */
static double point_us(const schema_gemm_point *pts, int n, long long m, long long nn, long long k) {
  for (int i = 0; i < n; i++)
    if (pts[i].m == m && pts[i].n == nn && pts[i].k == k) return pts[i].us;
  return -1;
}

/* The fused loss as the executor runs it (runtime/exec/exec_layer.c), on the H100's own tables: Qwen3-30B-A3B
 * cut to 2 layers on one H100 (micro 1 x 4,096 tokens, vocabulary 151,936, hidden 2,048, TP 1). Forward: the
 * logits GEMM [T x V x h] (cuBLASLt NT) and the fused cross-entropy (exec_ce_stats + exec_ce_finish8: the
 * "loss" table, keyed by 2 x 2 x T x V bytes, the logits read twice); backward: dlogits . E [T x h x V] and
 * dE += dlogits^T . X (the "gemm_wgrad" point keyed (h, V, T)); no vocabulary chunks, no backward kernel. Each
 * is the table's own point, no scaling: 3,722.7 + 1,328.7, 3,578.5 and 3,860.1 us, 99.9 ms over 8 micro-batches
 * against the 86.5 ms the 2026-12-07 run profiled (experiments/exec-qwen3/README.md: not a pricing error). */
static void test_fused_loss_table_points(void) {
  static plan p;
  static schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(TACOSIM_SOURCE_DIR "/experiments/exec-qwen3/plans/qwen3-30b-a3b-l2-1gpu-h100.json",
                                  NULL, NULL, &p, &e), 0);
  CU_ASSERT_FALSE(p.ce_unfused);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(TACOSIM_SOURCE_DIR "/calibration/h100-sxm-nvlink.json", &cal, &e), 0);
  const long long T = 4096, V = 151936, h = 2048;
  CU_ASSERT_EQUAL(model_vocab_per_gpu(&p.model, p.tp), V);
  CU_ASSERT_EQUAL(p.model.hidden, h);
  const double fwd = point_us(cal.gemm, cal.n_gemm, T, V, h), dgrad = point_us(cal.gemm, cal.n_gemm, T, h, V),
               wgrad = point_us(cal.gemm_wgrad, cal.n_gemm_wgrad, h, V, T);
  CU_ASSERT_FATAL(fwd > 0 && dgrad > 0 && wgrad > 0);
  const schema_kernel_table *t = schema_kernel_table_of(&cal, "loss");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  double ce = -1;
  for (int i = 0; i < t->n; i++)
    if (t->pts[i].x == 2.0 * 2.0 * T * V) ce = t->pts[i].us;
  CU_ASSERT_FATAL(ce > 0);
  double us[3], bytes[3];
  loss_us(&p, &cal, us, bytes);
  NEAR(us[0], fwd + ce, 1e-12);
  NEAR(us[1], dgrad, 1e-12);
  NEAR(us[2], wgrad, 1e-12);
  schema_calibration_free(&cal);
}

/* The memory model: 2 more bytes per logit of one micro-batch (the 16-bit
 * logits beside the fp32 copy), on the last stage only. */
static void test_unfused_memory(void) {
  static plan fused, unfused;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&fused, "true", &e), 0);
  CU_ASSERT_EQUAL_FATAL(load_plan(&unfused, "false", &e), 0);
  plan_memory a, b;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&fused, 0, &a), 0);
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&unfused, 0, &b), 0);
  NEAR(b.activations - a.activations, 2.0 * 4096 * 50304, 1e-12);
  NEAR(b.total - a.total, 2.0 * 4096 * 50304, 1e-12);
}

/* Anything but a boolean is refused, naming the file and the field. */
static void test_field_refused(void) {
  static plan p;
  const char *bad[] = {"\"false\"", "0", "1", "\"unfused\""}; /* (null: left out, as for every field) */
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ts_err e = {0};
    CU_ASSERT_NOT_EQUAL(load_plan(&p, bad[i], &e), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "loss.json"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cross_entropy_loss_fusion"));
  }
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_loss", NULL, NULL);
  CU_add_test(s, "unfused cross-entropy priced kernel by kernel, by hand", test_unfused_by_hand);
  CU_add_test(s, "unfused cross-entropy holds the 16-bit logits beside the fp32 copy", test_unfused_memory);
  CU_add_test(s, "cross_entropy_loss_fusion must be a boolean", test_field_refused);
  CU_add_test(s, "the fused loss on the H100: its GEMMs' and kernel's own table points (Qwen3-30B-A3B)",
              test_fused_loss_table_points);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

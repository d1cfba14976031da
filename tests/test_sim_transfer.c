/* test_sim_transfer.c — the calibration transfer between GPUs (sim_transfer.c):
 * compute-bound and memory-bound points land on the target's ceilings with
 * the efficiency they had, a launch-bound point does not move with FLOP/s,
 * no transferred point beats the target's roofline; the mismatch error and
 * the ceiling refusal of the simulator. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibration.h"
#include "sim.h"
#include "sim_costs.h"
#include "sim_transfer.h"
#include "test_check.h"

static topo_gpu gpu(const char *name, double tflops, double hbm, double nvlink) {
  topo_gpu g;
  memset(&g, 0, sizeof g);
  snprintf(g.name, sizeof g.name, "%s", name);
  g.bf16_tflops = tflops, g.hbm_gbps = hbm, g.nvlink_gbps = nvlink;
  return g;
}

/* A compute-bound GEMM at 80% of the source peak lands at 80% of the
 * target's; a memory-bound kernel at 90% of the source HBM at 90% of the
 * target's; the floor (launch) stays. */
static void test_point_on_ceilings(void) {
  sim_ceilings from = {1000e12, 5000e9, 450e9}, to = {300e12, 2000e9, 300e9};
  double flops = 2.0 * 8192 * 8192 * 8192, fl = 5.0;
  double t_src = fl + flops / (0.8 * from.peak_flops) * 1e6;
  double t_dst = sim_transfer_point_us(t_src, fl, flops, 1e6, &from, &to);
  NEAR(t_dst - fl, flops / (0.8 * to.peak_flops) * 1e6, 1e-9);
  double bytes = 1e9;
  double m_src = fl + bytes / (0.9 * from.hbm_bytes_per_s) * 1e6;
  double m_dst = sim_transfer_point_us(m_src, fl, 0, bytes, &from, &to);
  NEAR(m_dst - fl, bytes / (0.9 * to.hbm_bytes_per_s) * 1e6, 1e-9);
}

/* A launch-bound point (tiny work, time = floor + a little) barely moves when
 * the target has 10x fewer FLOP/s: it does not scale with FLOP/s. */
static void test_launch_bound_does_not_scale(void) {
  sim_ceilings from = {1000e12, 5000e9, 0}, to = {100e12, 5000e9, 0};
  double flops = 2.0 * 64 * 64 * 64; /* 0.5 MFLOP: 0.0005 us at the source peak */
  double t_src = 8.0 + flops / from.peak_flops * 1e6;
  double t_dst = sim_transfer_point_us(t_src, 8.0, flops, 0, &from, &to);
  CU_ASSERT(t_dst < 1.01 * t_src);
  CU_ASSERT(t_dst >= t_src);
}

/* A point compute-bound on the source but memory-bound on the target follows
 * the binding ceiling: the target's HBM. */
static void test_bound_switches(void) {
  sim_ceilings from = {1000e12, 5000e9, 0}, to = {1000e12, 500e9, 0};
  double flops = 1e12, bytes = 4e9; /* intensity 250 FLOP/B: above the source ridge (200), below the target's (2000) */
  double t_src = flops / from.peak_flops * 1e6;
  double t_dst = sim_transfer_point_us(t_src, 0, flops, bytes, &from, &to);
  NEAR(t_dst, bytes / to.hbm_bytes_per_s * 1e6, 1e-9);
}

static const schema_kernel_table *kernel_table(const schema_calibration *c, const char *name) {
  for (int k = 0; k < c->n_kernels; k++)
    if (strcmp(c->kernels[k].name, name) == 0) return &c->kernels[k];
  return NULL;
}

static const char *cal_text =
    "{\"schema\":1,\"gpu\":\"NVIDIA H200\",\"driver\":\"d\",\"cuda\":\"13.0\",\"nccl\":\"2.28\","
    "\"transport\":\"nvlink\",\"measured_at\":\"now\","
    "\"gemm\":[{\"m\":128,\"n\":128,\"k\":128,\"us\":8},{\"m\":8192,\"n\":8192,\"k\":8192,\"us\":1400}],"
    "\"kernels\":{\"norm\":[{\"bytes\":1000,\"us\":2},{\"bytes\":1e9,\"us\":260}],"
    "\"attention\":[{\"flops\":1e6,\"us\":6},{\"flops\":1e12,\"us\":2500}]},"
    "\"collectives\":{\"allreduce\":{\"2\":[{\"bytes\":1024,\"us\":10},{\"bytes\":1073741824,\"us\":3000}]},"
    "\"allreduce.taco128\":{\"2\":[{\"bytes\":1024,\"us\":12},{\"bytes\":1073741824,\"us\":2000}]}},"
    "\"clock\":{\"window_us\":100000,\"points\":[{\"duty\":0.5,\"period_us\":1000,\"gemm_speed\":1.1,"
    "\"mem_speed\":1.0}]}}";

/* cal_text below transferred into dst: above each table's floor, the big GEMM's time is scaled by
 * gemm_ratio and the large norm point's by hbm_ratio. The floors are the small points' excess over
 * their roofline on the source (the small GEMM's bf16 operands, the small norm's bytes, at 4.8 TB/s). */
static void check_scaled(const schema_calibration *src, const schema_calibration *dst, double gemm_ratio,
                         double hbm_ratio) {
  double fl = src->gemm[0].us - 2.0 * 3 * 128 * 128 / 4800e9 * 1e6;
  NEAR(dst->gemm[1].us - fl, (src->gemm[1].us - fl) * gemm_ratio, 1e-6);
  const schema_kernel_table *norm = kernel_table(dst, "norm");
  CU_ASSERT_PTR_NOT_NULL_FATAL(norm);
  double nfl = 2.0 - 1000 / 4800e9 * 1e6;
  NEAR(norm->pts[1].us - nfl, (260 - nfl) * hbm_ratio, 1e-6);
}

/* The whole file: every table moved, none below the target's roofline, the
 * compressed tables and the clock section dropped, labelled derived with both GPUs. */
static void test_calibration_transfer(void) {
  schema_calibration src, dst;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(cal_text, strlen(cal_text), "c.json", &src, &e), 0);
  topo_gpu h200 = gpu("H200-SXM", 989, 4800, 450), a100 = gpu("A100-SXM4-80GB", 312, 2039, 300);
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &a100, 300, true, false, &dst, &e), 0);
  CU_ASSERT_TRUE(dst.derived);
  CU_ASSERT_PTR_NOT_NULL(strstr(dst.notes, "H200-SXM"));
  CU_ASSERT_PTR_NOT_NULL(strstr(dst.notes, "A100-SXM4-80GB"));
  CU_ASSERT_STRING_EQUAL(dst.gpu, "A100-SXM4-80GB");
  CU_ASSERT_EQUAL(dst.n_gemm, 2);
  CU_ASSERT_EQUAL(dst.n_clock, 0);
  CU_ASSERT_EQUAL(dst.n_colls, 1); /* allreduce.taco128 dropped */
  CU_ASSERT_FALSE(schema_has_coll(&dst, "allreduce.taco128"));
  for (int i = 0; i < dst.n_gemm; i++) {
    double f = 2.0 * dst.gemm[i].m * dst.gemm[i].n * dst.gemm[i].k;
    CU_ASSERT(dst.gemm[i].us >= f / 312e12 * 1e6);
    CU_ASSERT(dst.gemm[i].us >= src.gemm[i].us); /* a slower GPU never runs a point faster */
  }
  /* the big GEMM by the peak ratio, the norm by the HBM ratio (efficiency kept) */
  check_scaled(&src, &dst, 989.0 / 312.0, 4800.0 / 2039.0);
  /* NVLink all-reduce: bus bytes at 450 -> 300 GB/s */
  double afl = 10 - 1024.0 / 450e9 * 1e6;
  NEAR(dst.colls[0].pts[1].us - afl, (3000 - afl) * 450.0 / 300.0, 1e-6);
  schema_calibration_free(&dst);
  /* by default the NVLink collectives go: the NCCL model prices them from the target's fabric */
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &a100, 300, false, false, &dst, &e), 0);
  CU_ASSERT_EQUAL(dst.n_colls, 0);
  CU_ASSERT_EQUAL(dst.n_gemm, 2);
  schema_calibration_free(&dst);
  schema_calibration_free(&src);
}

/* --transfer mamf: the compute ceilings are the GPUs' measured matmul rates, so the big (compute-bound)
 * GEMM scales by their ratio above the floor, not by the datasheet peaks'; the memory-bound norm as
 * before; a GPU without the figure is refused, naming the field. */
static void test_calibration_transfer_mamf(void) {
  schema_calibration src, dst;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(cal_text, strlen(cal_text), "c.json", &src, &e), 0);
  topo_gpu h200 = gpu("H200-SXM", 989, 4800, 450), gb = gpu("GB200", 2500, 8000, 900);
  h200.bf16_mamf_tflops = 794.5, gb.bf16_mamf_tflops = 1822;
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &gb, 900, false, true, &dst, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(dst.notes, SIM_TRANSFER_METHOD_MAMF));
  check_scaled(&src, &dst, 794.5 / 1822.0, 4800.0 / 8000.0);
  schema_calibration_free(&dst);
  gb.bf16_mamf_tflops = 0;
  CU_ASSERT_NOT_EQUAL(sim_transfer_calibration(&src, &h200, &gb, 900, false, true, &dst, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bf16_mamf_tflops"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "GB200"));
  schema_calibration_free(&src);
}

/* FlashAttention-2's tables move with each GPU's published FA2 utilisation (flash2_bf16_util) where
 * both GPUs have one: a compute-bound point by (989 x 0.35) / (312 x 0.73) above its floor, not by the
 * peaks' 989 / 312; cuDNN's fused table by the peaks as before; a target without the figure moves the
 * flash table by the peaks too. One point per table, so its floor is t - roof on the source. */
static void test_flash2_utilisation(void) {
  schema_calibration src, dst;
  memset(&src, 0, sizeof src);
  snprintf(src.gpu, sizeof src.gpu, "NVIDIA H200");
  snprintf(src.transport, sizeof src.transport, "nvlink");
  const schema_attn_shape sh = {.head_dim = 128, .seq = 8192, .batch = 1, .heads = 32, .kv_heads = 8, .causal = true};
  const double F = schema_attn_flops(&sh, false), Fb = schema_attn_flops(&sh, true);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_attn_backend(&src, SCHEMA_ATTN_FLASH, &sh, 3000, 9000), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_attn_backend(&src, SCHEMA_ATTN_FUSED, &sh, 2000, 6000), 0);
  schema_calibration_sort(&src);
  topo_gpu h200 = gpu("H200-SXM", 989, 4800, 450), a100 = gpu("A100-SXM4-80GB", 312, 2039, 300);
  h200.flash2_bf16_util = 0.35, a100.flash2_bf16_util = 0.73;
  ts_err e = {0};
  for (int with = 1; with >= 0; with--) {
    a100.flash2_bf16_util = with ? 0.73 : 0;
    CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &a100, 300, false, false, &dst, &e), 0);
    int n;
    const schema_attn_point *fl = schema_attn_points(&dst, SCHEMA_ATTN_FLASH, &n);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    const double pf = with ? 989e12 * 0.35 : 989e12, pt = with ? 312e12 * 0.73 : 312e12;
    NEAR(fl[0].fwd_us, 3000 - F / pf * 1e6 + F / pt * 1e6, 1e-6);
    NEAR(fl[0].bwd_us, 9000 - Fb / pf * 1e6 + Fb / pt * 1e6, 1e-6);
    const schema_attn_point *fu = schema_attn_points(&dst, SCHEMA_ATTN_FUSED, &n);
    CU_ASSERT_EQUAL_FATAL(n, 1);
    NEAR(fu[0].fwd_us, 2000 - F / 989e12 * 1e6 + F / 312e12 * 1e6, 1e-6);
    CU_ASSERT_EQUAL(strstr(dst.notes, "FlashAttention-2") != NULL, with);
    schema_calibration_free(&dst);
  }
  schema_calibration_free(&src);
}

/* The nearest-shape GEMM lookup (a model the calibration never measured)
 * and the transfer commute: pricing the shape on the transferred list gives
 * the transfer of its price on the measured list, t' = L + (t - L) R_to /
 * R_from with the list's floor L and the query's rooflines, because the
 * transfer keeps every point's efficiency above the floor and the floor. */
static void test_nearest_shapes_commute_with_transfer(void) {
  schema_calibration src, dst;
  memset(&src, 0, sizeof src);
  snprintf(src.gpu, sizeof src.gpu, "NVIDIA H200");
  snprintf(src.transport, sizeof src.transport, "nvlink");
  static const long long shapes[][3] = {{128, 128, 128},   {4096, 4096, 1024}, {8192, 1024, 4096},
                                        {2048, 8192, 8192}, {16384, 5120, 5120}, {1024, 1024, 16384}};
  static const double eff[] = {1.0, 0.7, 0.6, 0.8, 0.75, 0.5};
  sim_ceilings h = {989e12, 4800e9, 0}, a = {312e12, 2039e9, 0};
  for (int i = 0; i < 6; i++) {
    double m = (double)shapes[i][0], n = (double)shapes[i][1], k = (double)shapes[i][2];
    double tf = 2 * m * n * k / h.peak_flops, tb = 2 * (m * k + k * n + m * n) / h.hbm_bytes_per_s;
    CU_ASSERT_EQUAL_FATAL(
        schema_calibration_add_gemm(&src, shapes[i][0], shapes[i][1], shapes[i][2], 6.0 + (tf > tb ? tf : tb) * 1e6 / eff[i]), 0);
  }
  schema_calibration_sort(&src);
  topo_gpu h200 = gpu("H200-SXM", 989, 4800, 450), a100 = gpu("A100-SXM4-80GB", 312, 2039, 300);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &a100, 300, false, false, &dst, &e), 0);
  schema_roofline rh = {h.peak_flops, h.hbm_bytes_per_s, 1, 3, 1}, ra = {a.peak_flops, a.hbm_bytes_per_s, 1, 3, 1};
  schema_lookup lh, la;
  schema_lookup_init(&lh, &src, &rh, NULL);
  schema_lookup_init(&la, &dst, &ra, NULL);
  static const long long q[][3] = {{3000, 6000, 2500}, {100, 700, 900}, {20000, 12000, 3000}};
  for (int j = 0; j < 3; j++) {
    double th, ta;
    CU_ASSERT_EQUAL(schema_lookup_gemm(&lh, q[j][0], q[j][1], q[j][2], &th, &e), 0);
    CU_ASSERT_EQUAL(schema_lookup_gemm(&la, q[j][0], q[j][1], q[j][2], &ta, &e), 0);
    double m = (double)q[j][0], n = (double)q[j][1], k = (double)q[j][2], fl = 2 * m * n * k, by = 2 * (m * k + k * n + m * n);
    NEAR(ta, sim_transfer_point_us(th, 6.0, fl, by, &h, &a), 1e-9); /* floor 6 us: the first point sits on its roofline above it */
  }
  schema_calibration_free(&dst);
  schema_calibration_free(&src);
}

/* A GPU without the figures the transfer needs is refused with a named error. */
static void test_transfer_needs_figures(void) {
  schema_calibration src, dst;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(cal_text, strlen(cal_text), "c.json", &src, &e), 0);
  topo_gpu h200 = gpu("H200-SXM", 989, 4800, 450), bad = gpu("X", 0, 2000, 0);
  CU_ASSERT_NOT_EQUAL(sim_transfer_calibration(&src, &h200, &bad, 300, true, false, &dst, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "target GPU"));
  schema_calibration_free(&src);
}

static void test_same_gpu(void) {
  topo_gpu a = gpu("H200-SXM", 989, 4800, 450), b = a;
  CU_ASSERT_TRUE(sim_same_gpu(&a, &b));
  b.bf16_tflops = 100; /* a cluster that edits a figure describes another GPU */
  CU_ASSERT_FALSE(sim_same_gpu(&a, &b));
  b = a;
  snprintf(b.name, sizeof b.name, "A100-SXM4-80GB");
  CU_ASSERT_FALSE(sim_same_gpu(&a, &b));
}

/* An op priced below the GPU's ceiling is refused, naming the op: a GEMM
 * table 1000x faster than the H200 can run (measured on "the same GPU"). */
static void test_ceiling_refused(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt-h4096-1gpu.json", NULL, NULL, &p, &e), 0);
  const char *fast =
      "{\"schema\":1,\"gpu\":\"NVIDIA H200\",\"driver\":\"d\",\"cuda\":\"13.0\",\"nccl\":\"2.28\","
      "\"transport\":\"nvlink\",\"measured_at\":\"now\","
      "\"gemm\":[{\"m\":1024,\"n\":1024,\"k\":1024,\"us\":0.002},{\"m\":65536,\"n\":65536,\"k\":65536,"
      "\"us\":1}]}";
  schema_calibration cal;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(fast, strlen(fast), "fast.json", &cal, &e), 0);
  static sim_costs c;
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, &p, &cal, NULL, &e), 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int refused = 0;
  for (int i = 0; i < prog.n && !refused; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || c.mops[op->model_op].kind != MODEL_OP_GEMM) continue;
    double s;
    refused = sim_compute_s(&c, op, &s, &e) != 0;
  }
  CU_ASSERT_TRUE(refused);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_SIM_FAILURE);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "faster than the"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "ceiling"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "layer")); /* the op's name */
  plan_program_free(&prog);
  schema_calibration_free(&cal);
}

/* The attention's ceiling is the FLOPs its causal kernel does (half the s x s
 * square the op counts; sim_attention_kernel_flops): a fused point priced at
 * 0.9x that ceiling is refused, one at 1.2x it (0.6x the full square's time:
 * the cuDNN kernel at 54 % of the H200's peak, as measured for Llama-3 405B
 * at TP 1 and seq 8,192) is not. */
static int fused_attention_priced(double fraction_of_causal_roof, double *us, ts_err *e) {
  static plan p;
  if (plan_load(PLANS_DIR "/gpt-h4096-1gpu.json", NULL, NULL, &p, e)) return -1;
  p.attention_backend = PLAN_ATTENTION_FUSED; /* the plan says the executor's kernel; this prices cuDNN's */
  schema_attn_shape q = {.head_dim = model_head_dim(&p.model), .seq = plan_local_seq(&p), .batch = p.micro_batch,
                         .heads = p.model.heads / p.tp, .kv_heads = p.model.kv_heads / p.tp, .causal = true};
  double roof_s = schema_attn_flops(&q, false) / (p.cluster.gpu.bf16_tflops * 1e12);
  char text[1024];
  snprintf(text, sizeof text,
           "{\"schema\":1,\"gpu\":\"NVIDIA H200\",\"driver\":\"d\",\"cuda\":\"13.0\",\"nccl\":\"2.28\","
           "\"transport\":\"nvlink\",\"measured_at\":\"now\",\"gemm\":[{\"m\":1024,\"n\":1024,\"k\":1024,"
           "\"us\":10}],\"attention_backends\":{\"fused\":[{\"head_dim\":%d,\"seq\":%d,\"batch\":%d,\"heads\":%d,"
           "\"kv_heads\":%d,\"causal\":true,\"fwd_us\":%.6f,\"bwd_us\":%.6f}]}}",
           q.head_dim, q.seq, q.batch, q.heads, q.kv_heads, fraction_of_causal_roof * roof_s * 1e6,
           fraction_of_causal_roof * 2.5 * roof_s * 1e6);
  schema_calibration cal;
  if (schema_calibration_from_json_text(text, strlen(text), "attn.json", &cal, e)) return -1;
  static sim_costs c;
  int rc = sim_costs_init(&c, &p, &cal, NULL, e);
  plan_program prog;
  if (!rc) rc = plan_build_program(&p, 0, &prog, e);
  if (rc) {
    schema_calibration_free(&cal);
    return -1;
  }
  *us = -1;
  for (int i = 0; i < prog.n && !rc && *us < 0; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || c.mops[op->model_op].kind != MODEL_OP_ATTENTION) continue;
    double s;
    rc = sim_compute_s(&c, op, &s, e);
    if (!rc) *us = s * 1e6;
  }
  plan_program_free(&prog);
  schema_calibration_free(&cal);
  return rc;
}

static void test_attention_ceiling_is_the_kernels(void) {
  ts_err e = {0};
  double us;
  CU_ASSERT_NOT_EQUAL(fused_attention_priced(0.9, &us, &e), 0);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_SIM_FAILURE);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "attn"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "the attention kernel's"));
  memset(&e, 0, sizeof e);
  CU_ASSERT_EQUAL(fused_attention_priced(1.2, &us, &e), 0);
  CU_ASSERT(us > 0);
}

/* Prices every compute op of rank 0 of plan p with the shipped measured
 * calibration: the ops refused (at most 1: the first, printed) and, in
 * *above_hbm, the ops of over 10 MB priced faster than their bytes at the
 * HBM rate. */
static int price_every_op(const plan *p, int *above_hbm) {
  ts_err e = {0};
  schema_calibration cal;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(MEASURED_CALIBRATION, &cal, &e), 0);
  static sim_costs c;
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, p, &cal, NULL, &e), 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, 0, &prog, &e), 0);
  int bad = 0;
  *above_hbm = 0;
  for (int i = 0; i < prog.n && !bad; i++) {
    const plan_op *op = &prog.ops[i];
    double s;
    if (op->kind != PLAN_OP_COMPUTE) continue;
    if (sim_compute_s(&c, op, &s, &e)) {
      bad++;
      fprintf(stderr, "\n  %s: %s\n", p->name, e.msg);
    } else if (op->bytes > 1e7 && s < op->bytes / (p->cluster.gpu.hbm_gbps * 1e9))
      ++*above_hbm;
  }
  plan_program_free(&prog);
  schema_calibration_free(&cal);
  return bad;
}

/* The shipped measured calibration prices every op of the shipped H200 plans
 * at or above the ceiling (the refusal does not fire on honest costs). */
static void test_shipped_costs_within_ceiling(void) {
  static const char *plans[] = {"gpt-h4096-1gpu.json", "gpt-h4096-tp2-taco.json", "gpt-h4096-pp2.json",
                                "gpt3-175b-1024.json", "llama3-70b-1024.json", "qwen2.5-7b-8gpu.json"};
  for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++) {
    static plan p;
    ts_err e = {0};
    char path[512];
    snprintf(path, sizeof path, "%s/%s", PLANS_DIR, plans[k]);
    CU_ASSERT_EQUAL_FATAL(plan_load(path, NULL, NULL, &p, &e), 0);
    int above_hbm;
    CU_ASSERT_EQUAL(price_every_op(&p, &above_hbm), 0);
  }
}

/* The cluster's GPU against the calibration's: the same GPU gets the file as
 * measured; another one (an edited figure, or another catalogue GPU) the
 * transferred file, or under --transfer off an error naming both; a
 * calibration of a GPU the catalogue does not know cannot be transferred. */
static void test_cost_source(void) {
  topo_cluster cl;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(topo_load("h200x2-nvlink", NULL, &cl, &e), 0);
  schema_calibration cal;
  sim_cost_source src;
  CU_ASSERT_EQUAL_FATAL(sim_load_costs(MEASURED_CALIBRATION, &cl, SIM_TRANSFER_OFF, &cal, &src, &e), 0);
  CU_ASSERT_STRING_EQUAL(src.method, "none");
  CU_ASSERT_FALSE(cal.derived);
  CU_ASSERT(cal.n_clock > 0);
  schema_calibration_free(&cal);

  cl.gpu.bf16_tflops = 100; /* the case: a figure edited, the costs must follow */
  CU_ASSERT_NOT_EQUAL(sim_load_costs(MEASURED_CALIBRATION, &cl, SIM_TRANSFER_OFF, &cal, &src, &e), 0);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "NVIDIA H200"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "100 TFLOP/s"));
  CU_ASSERT_EQUAL_FATAL(sim_load_costs(MEASURED_CALIBRATION, &cl, SIM_TRANSFER_ROOFLINE, &cal, &src, &e), 0);
  CU_ASSERT_STRING_EQUAL(src.method, SIM_TRANSFER_METHOD);
  CU_ASSERT_TRUE(cal.derived);
  /* the biggest GEMM now runs at most 100 TFLOP/s */
  for (int i = 0; i < cal.n_gemm; i++)
    CU_ASSERT(2.0 * cal.gemm[i].m * cal.gemm[i].n * cal.gemm[i].k / (cal.gemm[i].us * 1e-6) <= 100e12);
  schema_calibration_free(&cal);

  topo_cluster a100;
  CU_ASSERT_EQUAL_FATAL(topo_load("a100x8-nvswitch", NULL, &a100, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_load_costs(MEASURED_CALIBRATION, &a100, SIM_TRANSFER_ROOFLINE, &cal, &src, &e), 0);
  CU_ASSERT_STRING_EQUAL(src.source_gpu, "H200-SXM");
  CU_ASSERT_STRING_EQUAL(src.target_gpu, "A100-SXM4-80GB");
  char line[256];
  sim_cost_source_line(&src, line, sizeof line);
  CU_ASSERT_PTR_NOT_NULL(strstr(line, "transferred to A100-SXM4-80GB"));
  schema_calibration_free(&cal);

  char path[] = "/tmp/tacosim-cal-XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs("{\"schema\":1,\"gpu\":\"NVIDIA Unknown 9000\",\"driver\":\"d\",\"cuda\":\"13.0\",\"nccl\":\"2\","
        "\"transport\":\"nvlink\",\"measured_at\":\"now\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":5}]}",
        f);
  fclose(f);
  CU_ASSERT_NOT_EQUAL(sim_load_costs(path, &a100, SIM_TRANSFER_ROOFLINE, &cal, &src, &e), 0);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "NVIDIA Unknown 9000"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "A100-SXM4-80GB"));
  unlink(path);
}

/* The default calibration of a cluster: a file measured on its own GPU when
 * one is shipped (H100-SXM: h100-sxm-nvlink.json, taken as measured, with no
 * transfer), else the H200's file of its fabric (transferred onto the A100);
 * a GPU named with characters no file name holds gets the H200's. */
static void test_default_calibration(void) {
  topo_cluster h100, a100, h200;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(topo_load("h100-1024-ndr", NULL, &h100, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_load("a100x8-nvswitch", NULL, &a100, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_load("h200x8-nvswitch", NULL, &h200, &e), 0);
  const char *path = sim_default_calibration(&h100);
  CU_ASSERT_PTR_NOT_NULL(strstr(path, "/h100-sxm-nvlink.json"));
  schema_calibration cal;
  sim_cost_source src;
  CU_ASSERT_EQUAL_FATAL(sim_load_costs(NULL, &h100, SIM_TRANSFER_OFF, &cal, &src, &e), 0);
  CU_ASSERT_STRING_EQUAL(src.method, "none");
  CU_ASSERT_STRING_EQUAL(src.source_gpu, "H100-SXM");
  CU_ASSERT_FALSE(cal.derived);
  CU_ASSERT(cal.n_clock > 0);
  schema_calibration_free(&cal);
  CU_ASSERT_PTR_NOT_NULL(strstr(sim_default_calibration(&a100), "/h200-nvlink.json"));
  CU_ASSERT_PTR_NOT_NULL(strstr(sim_default_calibration(&h200), "/h200-nvlink.json"));
  CU_ASSERT_EQUAL_FATAL(sim_load_costs(NULL, &a100, SIM_TRANSFER_ROOFLINE, &cal, &src, &e), 0);
  CU_ASSERT_STRING_EQUAL(src.source_gpu, "H200-SXM");
  schema_calibration_free(&cal);
  snprintf(h100.gpu.name, sizeof h100.gpu.name, "%s", "H100-SXM/../x");
  CU_ASSERT_PTR_NOT_NULL(strstr(sim_default_calibration(&h100), "/h200-nvlink.json"));
}

/* A weight gradient's own timing ("gemm_wgrad") prices a backward GEMM's
 * weight-gradient part; the forward and input-gradient parts keep "gemm". */
static void test_wgrad_priced_from_its_table(void) {
  static plan p;
  ts_err e = {0};
  char path[512];
  snprintf(path, sizeof path, "%s/%s", PLANS_DIR, "gpt-h4096-1gpu.json");
  CU_ASSERT_EQUAL_FATAL(plan_load(path, NULL, NULL, &p, &e), 0);
  schema_calibration cal;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(MEASURED_CALIBRATION, &cal, &e), 0);
  cal.n_gemm_wgrad = 0; /* the file's own weight-gradient timings set aside: the baseline prices from "gemm" */
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  static sim_costs c;
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, &p, &cal, NULL, &e), 0);
  const plan_op *bwd = NULL, *fwd = NULL;
  for (int i = 0; i < prog.n && !(bwd && fwd); i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->model_op >= c.n_mops ||
        c.mops[op->model_op].kind != MODEL_OP_GEMM || strcmp(c.mops[op->model_op].name, "fc1"))
      continue;
    if (op->phase == PLAN_PHASE_BWD && op->part != PLAN_PART_DGRAD && !bwd) bwd = op;
    if (op->phase == PLAN_PHASE_FWD && !fwd) fwd = op;
  }
  CU_ASSERT_FATAL(bwd && fwd);
  double b0, f0, b1, f1;
  CU_ASSERT_EQUAL_FATAL(sim_compute_s(&c, bwd, &b0, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_compute_s(&c, fwd, &f0, &e), 0);
  const model_op *mo = &c.mops[bwd->model_op];
  double w;
  schema_lookup l;
  schema_lookup_init(&l, &cal, &c.lk.roof, NULL);
  CU_ASSERT_EQUAL_FATAL(schema_lookup_gemm(&l, mo->k, mo->n, mo->m, &w, &e), 0);
  /* the same shape timed as a weight gradient: 1 ms longer */
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_gemm_wgrad(&cal, mo->k, mo->n, mo->m, w + 1000.0), 0);
  static sim_costs c2;
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c2, &p, &cal, NULL, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_compute_s(&c2, bwd, &b1, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_compute_s(&c2, fwd, &f1, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(b1 - b0, 1000e-6, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(f1, f0, 1e-12);
  plan_program_free(&prog);
  schema_calibration_free(&cal);
}

/* The transfer moves a "gemm_wgrad" point by its own bytes: C read and
 * written in FP32 (a point compute-bound with a BF16 C can be memory-bound
 * with it). One point a list, so its floor is t - R: t' = t - R_from + R_to. */
static void test_wgrad_transfer_bytes(void) {
  topo_gpu h200, a100;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("H200-SXM", NULL, &h200, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("A100-SXM4-80GB", NULL, &a100, &e), 0);
  schema_calibration src = {0}, out;
  snprintf(src.gpu, sizeof src.gpu, "NVIDIA H200");
  const long long m = 16384, n = 16384, k = 256;
  const double t = 500.0;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_gemm(&src, m, n, k, t), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_gemm_wgrad(&src, m, n, k, t), 0);
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &a100, a100.nvlink_gbps, false, false, &out, &e), 0);
  CU_ASSERT_EQUAL_FATAL(out.n_gemm_wgrad, 1);
  CU_ASSERT_EQUAL_FATAL(out.n_gemm, 1);
  const double flops = 2.0 * m * n * k;
  const double bf16 = 2.0 * ((double)m * k + (double)k * n + (double)m * n);
  const double fp32 = 2.0 * ((double)m * k + (double)k * n) + 8.0 * (double)m * n;
#define ROOF(F, B, G) fmax((F) / ((G).bf16_tflops * 1e12), (B) / ((G).hbm_gbps * 1e9)) * 1e6
  const double want_w = t - ROOF(flops, fp32, h200) + ROOF(flops, fp32, a100);
  const double want_g = t - ROOF(flops, bf16, h200) + ROOF(flops, bf16, a100);
#undef ROOF
  CU_ASSERT_DOUBLE_EQUAL(out.gemm_wgrad[0].us, want_w, 1e-6 * want_w);
  CU_ASSERT_DOUBLE_EQUAL(out.gemm[0].us, want_g, 1e-6 * want_g);
  CU_ASSERT(out.gemm_wgrad[0].us - out.gemm[0].us > 100.0); /* memory-bound on both GPUs with an FP32 C */
  schema_calibration_free(&out);
  schema_calibration_free(&src);
}

/* A "gemm_fp8" point moves between the two GPUs' FP8 peaks with its FP8 operands' bytes (A and B one byte
 * an element, C BF16); to a GPU without FP8 tensor cores the list is dropped. */
static void test_fp8_transfer(void) {
  topo_gpu h200, b200, a100;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("H200-SXM", NULL, &h200, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("B200", NULL, &b200, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("A100-SXM4-80GB", NULL, &a100, &e), 0);
  CU_ASSERT_FATAL(h200.fp8_tflops > 0 && b200.fp8_tflops > 0 && a100.fp8_tflops == 0);
  schema_calibration src = {0}, out;
  snprintf(src.gpu, sizeof src.gpu, "NVIDIA H200");
  const long long m = 8192, n = 8192, k = 8192;
  const double t = 900.0;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_gemm(&src, m, n, k, 1500.0), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_gemm_fp8(&src, m, n, k, t), 0);
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &b200, b200.nvlink_gbps, false, false, &out, &e), 0);
  CU_ASSERT_EQUAL_FATAL(out.n_gemm_fp8, 1);
  const double flops = 2.0 * m * n * k, bytes = (double)m * k + (double)k * n + 2.0 * (double)m * n;
#define ROOF8(G) fmax(flops / ((G).fp8_tflops * 1e12), bytes / ((G).hbm_gbps * 1e9)) * 1e6
  const double want = t - ROOF8(h200) + ROOF8(b200);
#undef ROOF8
  CU_ASSERT_DOUBLE_EQUAL(out.gemm_fp8[0].us, want, 1e-6 * want);
  schema_calibration_free(&out);
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &a100, a100.nvlink_gbps, false, false, &out, &e), 0);
  CU_ASSERT_EQUAL(out.n_gemm_fp8, 0);
  CU_ASSERT_EQUAL(out.n_gemm, 1);
  schema_calibration_free(&out);
  schema_calibration_free(&src);
}

/* The ceiling counts only the bytes beyond the L2 at the HBM rate: the
 * shipped MoE plans at 1,024 tokens, whose permute backward moves 38 MB in
 * 7.5 us on the H200 as measured (5.0 TB/s of nominal bytes), price every op;
 * a GEMM priced at a thousandth of its FLOPs' time is still refused
 * (test_ceiling_refused). */
static void test_ceiling_allows_l2(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/moe/qwen3-30b-a3b-32-ep16.json", NULL, NULL, &p, &e), 0);
  p.seq = 1024;
  int above_hbm;
  CU_ASSERT_EQUAL(price_every_op(&p, &above_hbm), 0);
  CU_ASSERT(above_hbm > 0); /* the case the L2 allowance is for is in this plan */
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_transfer", NULL, NULL);
  CU_add_test(s, "compute- and memory-bound points land on the target's ceilings", test_point_on_ceilings);
  CU_add_test(s, "a launch-bound point does not scale with FLOP/s", test_launch_bound_does_not_scale);
  CU_add_test(s, "a point follows whichever ceiling binds on the target", test_bound_switches);
  CU_add_test(s, "a whole calibration transferred", test_calibration_transfer);
  CU_add_test(s, "--transfer mamf: measured matmul rates as compute ceilings", test_calibration_transfer_mamf);
  CU_add_test(s, "FlashAttention-2 tables by each GPU's published FA2 utilisation", test_flash2_utilisation);
  CU_add_test(s, "GEMM nearest shapes and the transfer commute", test_nearest_shapes_commute_with_transfer);
  CU_add_test(s, "transfer refuses a GPU without its figures", test_transfer_needs_figures);
  CU_add_test(s, "same GPU: name and figures", test_same_gpu);
  CU_add_test(s, "measured, transferred or refused: the cluster's GPU against the calibration's", test_cost_source);
  CU_add_test(s, "the default calibration: the cluster GPU's own file, else the H200's", test_default_calibration);
  CU_add_test(s, "a weight gradient priced from gemm_wgrad, its other parts from gemm", test_wgrad_priced_from_its_table);
  CU_add_test(s, "gemm_wgrad transferred by its own bytes (FP32 C)", test_wgrad_transfer_bytes);
  CU_add_test(s, "gemm_fp8 transferred between the FP8 peaks, dropped without FP8", test_fp8_transfer);
  CU_add_test(s, "an op faster than the GPU's ceiling is refused", test_ceiling_refused);
  CU_add_test(s, "the ceiling: only the bytes beyond the L2 at the HBM rate", test_ceiling_allows_l2);
  CU_add_test(s, "attention: the ceiling is its causal kernel's FLOPs", test_attention_ceiling_is_the_kernels);
  CU_add_test(s, "the shipped costs respect the H200's ceilings", test_shipped_costs_within_ceiling);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

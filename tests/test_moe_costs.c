/* test_moe_costs.c — the MoE tables of a calibration: the routing kernels'
 * reference by hand, grouped-GEMM table names, the loader's rules for them,
 * and the simulator pricing expert GEMMs and routing ops from them (or, named
 * once, from the dense GEMM table and the generic ones when they are absent). */
#define _GNU_SOURCE /* open_memstream */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "moe_route.h"
#include "sim.h"
#include "sim_costs.h"
#include "sim_transfer.h"
#include "test_check.h"

static uint16_t bf(float f) { /* exact for the small values used here */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static float fl(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Two tokens, four experts, top 2, rows of 8: worked by hand. */
static void test_route_reference_by_hand(void) {
  const float logits[8] = {1, 3, 3, 0, /* a tie: the lower expert first */ 0, -1, 2, 1};
  int32_t idx[4], pos[4], count[4];
  float w[4];
  moe_topk_ref(logits, 2, 4, 2, idx, w);
  CU_ASSERT(idx[0] == 1 && idx[1] == 2 && idx[2] == 2 && idx[3] == 3);
  CU_ASSERT_EQUAL(w[0], 0.5f);
  CU_ASSERT_EQUAL(w[1], 0.5f);
  NEAR(w[2], 1.0 / (1.0 + exp(-1.0)), 1e-7);
  NEAR(w[3], exp(-1.0) / (1.0 + exp(-1.0)), 1e-6);
  CU_ASSERT_EQUAL(moe_map_ref(idx, 2, 4, 2, pos, count), 0);
  /* expert 1: (0,0); expert 2: (0,1), (1,0); expert 3: (1,1) */
  CU_ASSERT(pos[0] == 0 && pos[1] == 1 && pos[2] == 2 && pos[3] == 3);
  CU_ASSERT(count[0] == 0 && count[1] == 1 && count[2] == 2 && count[3] == 1);
  int32_t bad[4] = {0, 4, 1, 2};
  CU_ASSERT_EQUAL(moe_map_ref(bad, 2, 4, 2, pos, count), -1);
  moe_map_ref(idx, 2, 4, 2, pos, count);
  uint16_t x[16], perm[32], out[16], dy[32];
  for (int c = 0; c < 8; c++) x[c] = bf((float)(c + 1)), x[8 + c] = bf(-(float)(c + 1) * 2);
  moe_permute_ref(x, pos, 2, 2, 8, perm);
  CU_ASSERT_EQUAL(memcmp(perm, x, 16), 0);           /* row 0 = token 0 */
  CU_ASSERT_EQUAL(memcmp(perm + 8, x, 16), 0);       /* row 1 = token 0 */
  CU_ASSERT_EQUAL(memcmp(perm + 16, x + 8, 16), 0);  /* row 2 = token 1 */
  CU_ASSERT_EQUAL(memcmp(perm + 24, x + 8, 16), 0);  /* row 3 = token 1 */
  const float half[4] = {0.5f, 0.5f, 0.25f, 0.75f};
  moe_combine_ref(perm, pos, half, 2, 2, 8, out);
  for (int c = 0; c < 8; c++) {
    CU_ASSERT_EQUAL(fl(out[c]), (float)(c + 1));       /* 0.5 x + 0.5 x */
    CU_ASSERT_EQUAL(fl(out[8 + c]), -(float)(c + 1) * 2);
  }
  moe_combine_ref(perm, pos, NULL, 2, 2, 8, out); /* the permutation's backward: the sum of the copies */
  for (int c = 0; c < 8; c++) CU_ASSERT_EQUAL(fl(out[c]), 2.0f * (c + 1));
  float dw[4];
  moe_combine_bwd_ref(x, perm, pos, half, 2, 2, 8, dy, dw);
  for (int c = 0; c < 8; c++) {
    CU_ASSERT_EQUAL(fl(dy[c]), 0.5f * (c + 1));
    CU_ASSERT_EQUAL(fl(dy[24 + c]), 0.75f * -(float)(c + 1) * 2);
  }
  CU_ASSERT_EQUAL(dw[0], 204.0f); /* sum (c+1)^2, c < 8 */
  CU_ASSERT_EQUAL(dw[2], 816.0f);
}

static void test_grouped_names(void) {
  char s[48];
  int g;
  bool tk;
  long long a, b;
  CU_ASSERT_EQUAL(schema_grouped_gemm_name(s, sizeof s, 16, false, 3072, 4096), 0);
  CU_ASSERT_STRING_EQUAL(s, "gemm_grouped.g16.n3072.k4096");
  CU_ASSERT_EQUAL(schema_grouped_gemm_parse(s, &g, &tk, &a, &b), 0);
  CU_ASSERT(g == 16 && !tk && a == 3072 && b == 4096);
  CU_ASSERT_EQUAL(schema_grouped_gemm_name(s, sizeof s, 8, true, 2048, 1536), 0);
  CU_ASSERT_STRING_EQUAL(s, "gemm_grouped.g8.m2048.n1536");
  CU_ASSERT_EQUAL(schema_grouped_gemm_parse(s, &g, &tk, &a, &b), 0);
  CU_ASSERT(g == 8 && tk && a == 2048 && b == 1536);
  static const char *const bad[] = {"gemm_grouped.g1.n3.k4", "gemm_grouped.g16.n3.k", "gemm_grouped.g16.k3.n4",
                                    "gemm_grouped.g16.n03.k4", "gemm_grouped.g16.n3.k4.x", "gemm_grouped.g16",
                                    "gemm.g16.n3.k4", "gemm_grouped.g99999.n3.k4"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CU_ASSERT_EQUAL(schema_grouped_gemm_parse(bad[i], &g, &tk, &a, &b), -1);
}

#define HEAD "{\"schema\":1,\"gpu\":\"g\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"nvlink\",\"measured_at\":\"m\","

static void test_loader_rules(void) {
  struct {
    const char *text, *field;
  } cases[] = {
      {HEAD "\"kernels\":{\"gemm_grouped.g1.n3.k4\":[{\"flops\":1e9,\"us\":1}]}}", "kernels.gemm_grouped.g1.n3.k4"},
      {HEAD "\"kernels\":{\"gemm_grouped.g4.n3.q4\":[{\"flops\":1e9,\"us\":1}]}}", "gemm_grouped.g<G>.n<N>.k<K>"},
      {HEAD "\"kernels\":{\"gemm_grouped.g4.n3.k4\":[{\"bytes\":1e9,\"us\":1}]}}", "keyed by \"flops\""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    schema_calibration c;
    ts_err e = {0};
    CU_ASSERT_EQUAL(schema_calibration_from_json_text(cases[i].text, strlen(cases[i].text), "x.json", &c, &e), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "x.json"));
    if (!strstr(e.msg, cases[i].field)) fprintf(stderr, "\n  case %zu: %s\n", i, e.msg);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].field));
  }
  const char *ok = HEAD "\"kernels\":{\"gemm_grouped.g4.n3.k4\":[{\"flops\":1e9,\"us\":1}],"
                        "\"moe_permute_fwd\":[{\"bytes\":1e6,\"group\":8,\"us\":3}]}}";
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL(schema_calibration_from_json_text(ok, strlen(ok), "ok.json", &c, &e), 0);
  schema_calibration_free(&c);
}

static void repo_path(char *out, size_t n, const char *rel) {
  const char *slash = strrchr(__FILE__, '/');
  int dir = slash ? (int)(slash - __FILE__) : 0;
  snprintf(out, n, "%.*s%s../%s", dir, __FILE__, slash ? "/" : "", rel);
}

/* The key of one product of a grouped op (as sim_costs.c forms it). */
typedef struct {
  char name[48];
  double flops;
} piece;

static int pieces_of(const model_op *mo, int phase, int part, piece *out) {
  long long r = mo->m / mo->groups;
  int n = 0;
  if (phase != PLAN_PHASE_BWD) {
    schema_grouped_gemm_name(out[n].name, 48, mo->groups, false, mo->n, mo->k);
    out[n++].flops = 2.0 * mo->groups * r * mo->n * mo->k;
    return n;
  }
  if (part != PLAN_PART_WGRAD) {
    schema_grouped_gemm_name(out[n].name, 48, mo->groups, false, mo->k, mo->n);
    out[n++].flops = 2.0 * mo->groups * r * mo->n * mo->k;
  }
  if (part != PLAN_PART_DGRAD) {
    schema_grouped_gemm_name(out[n].name, 48, mo->groups, true, mo->k, mo->n);
    out[n++].flops = 2.0 * mo->groups * r * mo->n * mo->k;
  }
  return n;
}

/* The distinct grouped-GEMM pieces (by table name) of a program's expert ops, at most max; their count. */
static int unique_pieces(const plan_program *prog, const sim_costs *costs, piece *out, int max) {
  int n = 0;
  for (int i = 0; i < prog->n; i++) {
    const plan_op *op = &prog->ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->model_op >= costs->n_mops) continue;
    const model_op *mo = &costs->mops[op->model_op];
    piece pc[2];
    int np = mo->groups > 1 ? pieces_of(mo, op->phase, op->part, pc) : 0;
    for (int j = 0; j < np; j++) {
      int dup = 0;
      for (int q = 0; q < n; q++) dup |= !strcmp(out[q].name, pc[j].name);
      if (!dup && n < max) out[n++] = pc[j];
    }
  }
  return n;
}

/* Expert GEMMs and routing ops of a shipped MoE plan priced from a
 * calibration holding their tables (two points a factor 4 apart around each
 * key, time proportional to FLOPs or bytes: the lookup gives F x slope), and
 * without them from the dense rule, named once. */
/* The shipped Qwen3-30B-A3B EP 16 plan (rank 0's experts: 8 of 128). */
static int load_moe_plan(plan *p, ts_err *e) {
  char path[4096];
  repo_path(path, sizeof path, "experiments/plans/moe/qwen3-30b-a3b-32-ep16.json");
  return plan_load(path, NULL, NULL, p, e);
}

static void test_sim_prices_moe_tables(void) {
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_moe_plan(&p, &e), 0);
  schema_calibration empty = {0};
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &empty, NULL, &e), 0);
  plan_program prog = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  /* the tables: 1 us per GFLOP for grouped GEMMs, 1 us per MB for routing */
  static char text[1 << 16];
  int len = snprintf(text, sizeof text, HEAD "\"gemm\":[{\"m\":1024,\"n\":1024,\"k\":1024,\"us\":10}],\"kernels\":{");
  piece pc[32];
  const int n_seen = unique_pieces(&prog, &costs, pc, 32);
  for (int j = 0; j < n_seen; j++)
    len += snprintf(text + len, sizeof text - len, "%s\"%s\":[{\"flops\":%.17g,\"us\":%.17g},{\"flops\":%.17g,\"us\":%.17g}]",
                    j > 0 ? "," : "", pc[j].name, pc[j].flops / 2, pc[j].flops / 2e9, pc[j].flops * 2,
                    pc[j].flops * 2e-9);
  CU_ASSERT_TRUE_FATAL(n_seen >= 4); /* fc1 and fc2: forward, dgrad, wgrad families */
  const double k = p.model.top_k;
  len += snprintf(text + len, sizeof text - len,
                  ",\"moe_permute_fwd\":[{\"bytes\":1e3,\"group\":%g,\"us\":1e-3},{\"bytes\":1e10,\"group\":%g,\"us\":1e4}]"
                  ",\"moe_unpermute_bwd\":[{\"bytes\":1e3,\"group\":%g,\"us\":1e-3},{\"bytes\":1e10,\"group\":%g,\"us\":1e4}]}}",
                  k, k, k, k);
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, (size_t)len, "moe.json", &c, &e), 0);
  for (int with = 1; with >= 0; with--) {
    char *buf = NULL;
    size_t blen = 0;
    FILE *warn = open_memstream(&buf, &blen);
    schema_calibration none;
    const char *dense = HEAD "\"gemm\":[{\"m\":1024,\"n\":1024,\"k\":1024,\"us\":10}]}";
    CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(dense, strlen(dense), "dense.json", &none, &e), 0);
    CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, with ? &c : &none, warn, &e), 0);
    int priced = 0, routed = 0;
    for (int i = 0; i < prog.n; i++) {
      const plan_op *op = &prog.ops[i];
      if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->model_op >= costs.n_mops) continue;
      const model_op *mo = &costs.mops[op->model_op];
      double s;
      CU_ASSERT_EQUAL_FATAL(sim_compute_s(&costs, op, &s, &e), 0);
      if (mo->groups > 1) {
        piece pc[2];
        int np = pieces_of(mo, op->phase, op->part, pc);
        double want = 0;
        for (int j = 0; j < np; j++) want += pc[j].flops * 1e-9;
        if (with) {
          NEAR(s * 1e6, want, 1e-9);
        } else { /* groups x the dense GEMM less the saved launches: not the table's */
          CU_ASSERT(fabs(s * 1e6 - want) > 1e-3 * want);
        }
        priced++;
      } else if (with && !strcmp(mo->name, "permute") && op->phase == PLAN_PHASE_FWD) {
        NEAR(s * 1e6, op->bytes * 1e-6, 1e-9);
        routed++;
      } else if (with && !strcmp(mo->name, "unpermute") && op->phase == PLAN_PHASE_BWD) {
        NEAR(s * 1e6, op->bytes * 1e-6, 1e-9);
        routed++;
      }
    }
    CU_ASSERT_TRUE(priced > 0);
    CU_ASSERT_TRUE(!with || routed >= 2);
    fclose(warn);
    if (with) { /* the routing tables left out are named; no grouped-GEMM fallback */
      CU_ASSERT_PTR_NULL(strstr(buf, "gemm_grouped"));
      CU_ASSERT_PTR_NOT_NULL(strstr(buf, "no \"moe_unpermute_fwd\" table"));
      CU_ASSERT_PTR_NULL(strstr(buf, "moe_router_topk_bwd"));
    } else {
      CU_ASSERT_PTR_NOT_NULL(strstr(buf, "no \"gemm_grouped."));
      CU_ASSERT_PTR_NOT_NULL(strstr(buf, "less the launches a grouped kernel saves"));
    }
    free(buf);
    schema_calibration_free(&none);
  }
  schema_calibration_free(&c);
  plan_program_free(&prog);
}

/* A group count without its own table: the executor runs the products back to back, so G of them cost
 * G / G2 times the family's table of the nearest other count G2 at G2 products' FLOPs. The EP 16 plan's
 * groups are 8; tables of 4 (nearer) and 32 products of each family, a point at exactly the FLOPs asked
 * (10 ns a MFLOP + 7 us for 4 products, + 1000 us for 32): each piece 8 / 4 x the 4 products' time, named. */
static void test_grouped_other_count(void) {
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_moe_plan(&p, &e), 0);
  plan_program prog = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  schema_calibration empty = {0};
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &empty, NULL, &e), 0);
  static char text[1 << 16];
  int len = snprintf(text, sizeof text, HEAD "\"gemm\":[{\"m\":1024,\"n\":1024,\"k\":1024,\"us\":10}],\"kernels\":{");
  piece pcs[32];
  const int n_seen = unique_pieces(&prog, &costs, pcs, 32);
  int G = 0;
  for (int j = 0; j < n_seen; j++) {
    int g;
    bool tk;
    long long a, b;
    CU_ASSERT_EQUAL_FATAL(schema_grouped_gemm_parse(pcs[j].name, &g, &tk, &a, &b), 0);
    G = g;
    char n4[48], n32[48];
    schema_grouped_gemm_name(n4, sizeof n4, 4, tk, a, b);
    schema_grouped_gemm_name(n32, sizeof n32, 32, tk, a, b);
    const double f4 = pcs[j].flops * 4 / g, f32 = pcs[j].flops * 32 / g;
    len += snprintf(text + len, sizeof text - len,
                    "%s\"%s\":[{\"flops\":%.17g,\"us\":%.17g},{\"flops\":%.17g,\"us\":%.17g}],"
                    "\"%s\":[{\"flops\":%.17g,\"us\":%.17g},{\"flops\":%.17g,\"us\":%.17g}]",
                    j > 0 ? "," : "", n4, f4, f4 * 1e-8 + 7, 4 * f4, 4 * (f4 * 1e-8 + 7), n32, f32, f32 * 1e-8 + 1000,
                    4 * f32, 4 * (f32 * 1e-8 + 1000));
  }
  len += snprintf(text + len, sizeof text - len, "}}");
  CU_ASSERT_EQUAL_FATAL(G, 8);
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, (size_t)len, "moe.json", &c, &e), 0);
  char *buf = NULL;
  size_t blen = 0;
  FILE *warn = open_memstream(&buf, &blen);
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, warn, &e), 0);
  int priced = 0;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->model_op >= costs.n_mops) continue;
    const model_op *mo = &costs.mops[op->model_op];
    if (mo->groups <= 1) continue;
    piece pc[2];
    const int np = pieces_of(mo, op->phase, op->part, pc);
    double s;
    const int rc = sim_compute_s(&costs, op, &s, &e);
    if (rc) fprintf(stderr, "%s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    double want = 0; /* 8 / 4 x (the 4 products' FLOPs x 1e-8 + 7 us) a piece */
    for (int j = 0; j < np; j++) want += 8.0 / 4.0 * (pc[j].flops * 4 / 8 * 1e-8 + 7);
    NEAR(s * 1e6, want, 1e-9);
    priced++;
  }
  fclose(warn);
  CU_ASSERT_TRUE(priced > 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "using 8 / 4 x the \"gemm_grouped.g4."));
  CU_ASSERT_PTR_NULL(strstr(buf, "less the launches"));
  free(buf);
  schema_calibration_free(&c);
  plan_program_free(&prog);
}

/* Experts without rows run no GEMM (the executor skips them): of G experts sharing m copies evenly,
 * G (1 - (1 - 1/G)^m) get rows, by hand; every one at a training micro-batch's copies. An expert op of
 * few copies (1 row an active expert) is priced as the G groups on 1 row times active / G: two such ops
 * cost in the ratio of their active experts; 50 rows an expert (all active) cost more. */
static void test_grouped_active_experts(void) {
  CU_ASSERT_EQUAL(sim_grouped_active(64, 128), 51); /* 128 (1 - (127/128)^64) = 50.51 */
  CU_ASSERT_EQUAL(sim_grouped_active(16, 8), 7);    /* 8 (1 - (7/8)^16) = 7.06 */
  CU_ASSERT_EQUAL(sim_grouped_active(1, 128), 1);
  CU_ASSERT_EQUAL(sim_grouped_active(8192, 128), 128);
  CU_ASSERT_EQUAL(sim_grouped_active(4096 * 8, 256), 256);
  CU_ASSERT_EQUAL(sim_grouped_active(100, 1), 1);
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_moe_plan(&p, &e), 0);
  const char *dense = HEAD "\"gemm\":[{\"m\":1024,\"n\":1024,\"k\":1024,\"us\":10}]}";
  schema_calibration cal;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(dense, strlen(dense), "dense.json", &cal, &e), 0);
  FILE *quiet = fopen("/dev/null", "w");
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &cal, quiet, &e), 0);
  plan_program prog = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int checked = 0;
  for (int i = 0; i < prog.n && !checked; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->model_op >= costs.n_mops) continue;
    model_op *mo = &costs.mops[op->model_op];
    if (mo->groups < 8 || op->phase != PLAN_PHASE_FWD) continue;
    const long long m0 = mo->m;
    const int G = mo->groups;
    /* the op's own FLOPs and bytes are those of its real m: here a FLOP a copy, no bytes (the cost cache
     * keys on them; the ceiling check passes) */
    plan_op o = *op;
    o.bytes = 0;
    op = &o;
    double all, few;
    mo->m = 50LL * G, o.flops = (double)mo->m; /* 50 rows an expert: every expert active */
    CU_ASSERT_EQUAL_FATAL(sim_grouped_active(mo->m, G), G);
    CU_ASSERT_EQUAL_FATAL(sim_compute_s(&costs, op, &all, &e), 0);
    const long long m = G / 2;
    const int a = sim_grouped_active(m, G);
    CU_ASSERT_TRUE(a < G);
    mo->m = m, o.flops = (double)mo->m;
    CU_ASSERT_EQUAL_FATAL(sim_compute_s(&costs, op, &few, &e), 0);
    double one_row;
    mo->m = G, o.flops = (double)mo->m; /* G copies: a1 active experts, 1 row each */
    CU_ASSERT_EQUAL_FATAL(sim_compute_s(&costs, op, &one_row, &e), 0);
    const int a1 = sim_grouped_active(G, G);
    NEAR(few / one_row, (double)a / a1, 1e-12);
    CU_ASSERT_TRUE(all > one_row);
    mo->m = m0;
    checked = 1;
  }
  CU_ASSERT_EQUAL(checked, 1);
  fclose(quiet);
  plan_program_free(&prog);
  schema_calibration_free(&cal);
}

/* Transfer to another GPU: a grouped-GEMM point moves with the higher of its
 * FLOP and byte bounds, its bytes those of its operands (the weight gradient
 * accumulating into FP32: read and written). Two GPUs of equal FLOP/s and
 * half the bandwidth: a compute-bound forward point keeps its time, the
 * memory-bound weight gradient (k = 64 rows: 8 x 4096 x 4096 x 8 bytes of
 * FP32 C against 2 x 8 x 64 x 4096^2 FLOPs) gets slower by its byte bound. */
static void test_transfer_grouped(void) {
  const char *text = HEAD "\"kernels\":{"
                     "\"gemm_grouped.g8.n4096.k4096\":[{\"flops\":1.099511627776e12,\"us\":2000}],"
                     "\"gemm_grouped.g8.m4096.n4096\":[{\"flops\":1.7179869184e10,\"us\":500}]}}";
  schema_calibration c, out;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, strlen(text), "t.json", &c, &e), 0);
  topo_gpu a = {.bf16_tflops = 1000, .hbm_gbps = 4000}, b = {.bf16_tflops = 1000, .hbm_gbps = 2000};
  snprintf(a.name, sizeof a.name, "A"), snprintf(b.name, sizeof b.name, "B");
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&c, &a, &b, 0, false, false, &out, &e), 0);
  double fwd = -1, wgrad = -1;
  for (int i = 0; i < out.n_kernels; i++) {
    if (!strcmp(out.kernels[i].name, "gemm_grouped.g8.n4096.k4096")) fwd = out.kernels[i].pts[0].us;
    if (!strcmp(out.kernels[i].name, "gemm_grouped.g8.m4096.n4096")) wgrad = out.kernels[i].pts[0].us;
  }
  /* forward, m = 4096 rows per expert: 1.1 ms of FLOPs against 0.2 ms of bytes on A, 0.4 on B: unchanged */
  NEAR(fwd, 2000.0, 1e-12);
  /* wgrad: FLOPs 17.2 us; bytes 8 x (2 (4096 x 64 x 2) + 8 x 4096^2) = 1.0821e9: 270.5 us on A, 541.1 on B.
   * One point: its floor is t - R_from = 229.5 us, so t' = 229.5 + 541.1 */
  double bytes = 8.0 * (2.0 * (4096.0 * 64 * 2) + 8.0 * 4096.0 * 4096.0);
  NEAR(wgrad, 500.0 - bytes / 4e12 * 1e6 + bytes / 2e12 * 1e6, 1e-9);
  schema_calibration_free(&c);
  schema_calibration_free(&out);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("moe_costs", NULL, NULL);
  CU_add_test(s, "routing reference by hand (topk, map, permute, combine, backward)", test_route_reference_by_hand);
  CU_add_test(s, "grouped-GEMM table names: written and read back, bad ones refused", test_grouped_names);
  CU_add_test(s, "the loader refuses bad grouped-GEMM tables naming file and field", test_loader_rules);
  CU_add_test(s, "grouped GEMMs move to another GPU by their FLOP or byte bound", test_transfer_grouped);
  CU_add_test(s, "experts without rows run no GEMM: a decode step's active experts", test_grouped_active_experts);
  CU_add_test(s, "a group count without its table: G / G2 x the nearest other count's, named", test_grouped_other_count);
  CU_add_test(s, "expert GEMMs and routing ops priced from their tables, else named fallback",
              test_sim_prices_moe_tables);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_calib_attn.c — the calibration's "attention_shapes" section
 * (schema/calibration_attn.c): strict loader, writer round trip, the
 * nearest-shape lookup, the transfer to another GPU, and the simulator's
 * attention ops priced from it (sim/sim_costs.c). */
#define _XOPEN_SOURCE 700
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "sim.h"
#include "sim_costs.h"
#include "sim_transfer.h"
#include "test_cal_round_trip.h"

#define HEAD                                                                                                   \
  "{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"13.0\",\"nccl\":\"2.28\",\"transport\":\"nvlink\"," \
  "\"measured_at\":\"now\""

static const schema_roofline roof = {989e12, 4800e9, 450e9, 3.0, 1.0};

static int load(const char *text, schema_calibration *c, ts_err *e) {
  return schema_calibration_from_json_text(text, strlen(text), "a.json", c, e);
}

static void test_loads_and_round_trips(void) {
  const char *text = HEAD ",\"attention_shapes\":["
                          "{\"head_dim\":128,\"seq\":4096,\"batch\":1,\"heads\":32,\"kv_heads\":8,\"causal\":true,"
                          "\"fwd_us\":575.5,\"bwd_us\":1858.25},"
                          "{\"head_dim\":64,\"seq\":2048,\"batch\":2,\"heads\":16,\"kv_heads\":16,\"causal\":false,"
                          "\"fwd_us\":100,\"bwd_us\":250}]}";
  schema_calibration c, d;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(text, &c, &e), 0);
  CU_ASSERT_EQUAL_FATAL(c.n_attn, 2);
  /* sorted: causal false first */
  CU_ASSERT_FALSE(c.attn[0].s.causal);
  CU_ASSERT_EQUAL(c.attn[1].s.kv_heads, 8);
  CU_ASSERT_EQUAL(c.attn[1].bwd_us, 1858.25);
  CU_ASSERT_EQUAL_FATAL(test_cal_round_trip(&c, "w.json", &d, &e), 0);
  CU_ASSERT_EQUAL_FATAL(d.n_attn, 2);
  for (int i = 0; i < 2; i++) {
    const schema_attn_point *x = &c.attn[i], *y = &d.attn[i];
    CU_ASSERT(x->s.head_dim == y->s.head_dim && x->s.seq == y->s.seq && x->s.batch == y->s.batch &&
              x->s.heads == y->s.heads && x->s.kv_heads == y->s.kv_heads && x->s.causal == y->s.causal);
    CU_ASSERT(x->fwd_us == y->fwd_us && x->bwd_us == y->bwd_us);
  }
  schema_calibration_free(&c);
  schema_calibration_free(&d);
}

static void test_malformed_rejected(void) {
  static const struct {
    const char *section, *needle;
  } cases[] = {
      {"{}", "attention_shapes: must be an array"},
      {"[1]", "attention_shapes[0]: must be an object"},
      {"[{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":6,\"kv_heads\":4,\"causal\":true,\"fwd_us\":1,\"bwd_us\":2}]",
       "attention_shapes[0].kv_heads"},
      {"[{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":16,\"causal\":true,\"fwd_us\":1,\"bwd_us\":2}]",
       "attention_shapes[0].kv_heads"},
      {"[{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,\"fwd_us\":1,\"bwd_us\":2}]", "causal"},
      {"[{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,\"causal\":true,\"fwd_us\":-1,\"bwd_us\":2}]",
       "fwd_us"},
      {"[{\"head_dim\":0,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,\"causal\":true,\"fwd_us\":1,\"bwd_us\":2}]",
       "head_dim"},
      {"[{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,\"causal\":true,\"fwd_us\":1,\"bwd_us\":2,"
       "\"group\":1}]",
       "attention_shapes[0].group: unknown field"},
      {"[{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,\"causal\":true,\"fwd_us\":1,\"bwd_us\":2},"
       "{\"head_dim\":128,\"seq\":64,\"batch\":2,\"heads\":8,\"kv_heads\":8,\"causal\":true,\"fwd_us\":1,\"bwd_us\":2},"
       "{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,\"causal\":true,\"fwd_us\":3,\"bwd_us\":4}]",
       "attention_shapes[2]: duplicate shape"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text[1024];
    snprintf(text, sizeof text, HEAD ",\"attention_shapes\":%s}", cases[i].section);
    schema_calibration c;
    ts_err e = {0};
    CU_ASSERT_NOT_EQUAL(load(text, &c, &e), 0);
    if (!strstr(e.msg, cases[i].needle)) fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, e.msg, cases[i].needle);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].needle));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "a.json"));
    CU_ASSERT_EQUAL(c.n_attn, 0);
  }
}

/* Points all at one efficiency: every unmeasured shape of that causality is
 * priced launch + roofline / efficiency, exactly; a measured one by its own time. */
static void test_lookup_nearest_efficiency(void) {
  schema_calibration c;
  memset(&c, 0, sizeof c);
  const double eff = 0.4;
  int seqs[] = {1024, 2048, 8192}, bhs[] = {8, 32, 128}, groups[] = {1, 8};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      for (int g = 0; g < 2; g++) {
        schema_attn_shape s = {.head_dim = 128, .seq = seqs[i], .batch = 1, .heads = bhs[j],
                               .kv_heads = bhs[j] / groups[g], .causal = true};
        CU_ASSERT_EQUAL_FATAL(schema_calibration_add_attn(&c, &s, roof.launch_us + schema_attn_roof_us(&roof, &s, false) / eff,
                                                          roof.launch_us + schema_attn_roof_us(&roof, &s, true) / eff),
                              0);
      }
  schema_calibration_sort(&c);
  schema_lookup l;
  schema_lookup_init(&l, &c, &roof, NULL);
  schema_attn_shape q = {.head_dim = 128, .seq = 4096, .batch = 2, .heads = 40, .kv_heads = 5, .causal = true};
  double us;
  for (int bwd = 0; bwd < 2; bwd++) {
    CU_ASSERT_EQUAL_FATAL(schema_lookup_attn(&l, &q, bwd, &us), 0);
    CU_ASSERT(fabs(us - (roof.launch_us + schema_attn_roof_us(&roof, &q, bwd) / eff)) <= 1e-9 * us);
  }
  /* a measured shape: its own time, even where the efficiencies differ */
  c.attn[4].fwd_us *= 1.5;
  schema_attn_shape m = c.attn[4].s;
  CU_ASSERT_EQUAL(schema_lookup_attn(&l, &m, false, &us), 0);
  CU_ASSERT_EQUAL(us, c.attn[4].fwd_us);
  /* the same work split otherwise between batch and heads: that point's efficiency alone */
  schema_attn_shape split = m;
  split.batch *= 2, split.heads /= 2, split.kv_heads /= 2;
  CU_ASSERT_EQUAL(schema_lookup_attn(&l, &split, false, &us), 0);
  CU_ASSERT(fabs(us - c.attn[4].fwd_us) <= 1e-9 * us);
  /* no point of that causality: 1, the caller falls back */
  q.causal = false;
  us = -7;
  CU_ASSERT_EQUAL(schema_lookup_attn(&l, &q, false, &us), 1);
  CU_ASSERT_EQUAL(us, -7);
  schema_calibration_free(&c);
}

/* The transfer moves each point onto the target's roofline and keeps it. */
static void test_transfer_keeps_points(void) {
  schema_calibration c, t;
  memset(&c, 0, sizeof c);
  schema_attn_shape a = {128, 2048, 1, 32, 8, true}, b = {128, 8192, 4, 32, 8, true};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_attn(&c, &a, 100, 300), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_attn(&c, &b, 5000, 15000), 0);
  topo_gpu from = {0}, to = {0};
  snprintf(from.name, sizeof from.name, "A");
  snprintf(to.name, sizeof to.name, "B");
  from.bf16_tflops = 989, from.hbm_gbps = 4800, to.bf16_tflops = 2 * 989, to.hbm_gbps = 8000;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&c, &from, &to, 900, false, false, &t, &e), 0);
  CU_ASSERT_EQUAL_FATAL(t.n_attn, 2);
  /* compute-bound at both sizes: twice the peak roughly halves the time above the floor */
  CU_ASSERT(t.attn[1].fwd_us < 0.6 * 5000 && t.attn[1].fwd_us > 0.4 * 5000);
  CU_ASSERT(t.attn[0].fwd_us <= 100 && t.attn[0].bwd_us <= 300);
  schema_calibration_free(&c);
  schema_calibration_free(&t);
  /* another backend's points move the same way, into that backend's section */
  memset(&c, 0, sizeof c);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_attn_backend(&c, SCHEMA_ATTN_FUSED, &a, 100, 300), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_attn_backend(&c, SCHEMA_ATTN_FUSED, &b, 5000, 15000), 0);
  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&c, &from, &to, 900, false, false, &t, &e), 0);
  int n;
  const schema_attn_point *fp = schema_attn_points(&t, SCHEMA_ATTN_FUSED, &n);
  CU_ASSERT_EQUAL_FATAL(n, 2);
  CU_ASSERT_EQUAL(t.n_attn, 0);
  schema_attn_points(&t, SCHEMA_ATTN_FLASH, &n);
  CU_ASSERT_EQUAL(n, 0);
  CU_ASSERT(fp[1].fwd_us < 0.6 * 5000 && fp[1].fwd_us > 0.4 * 5000);
  CU_ASSERT(fp[0].fwd_us <= 100 && fp[0].bwd_us <= 300);
  schema_calibration_free(&c);
  schema_calibration_free(&t);
}

static void repo_path(char *out, size_t n, const char *rel) { snprintf(out, n, "%s/%s", TACOSIM_SOURCE_DIR, rel); }

/* Every attention op of rank 0's program of p priced at fwd_us / bwd_us (relative 1e-9); seen[0], seen[1]: how many
 * forward and backward ops there were. */
static void attention_prices_are(const plan *p, sim_costs *costs, double fwd_us, double bwd_us, int seen[2]) {
  ts_err e = {0};
  plan_program prog = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, 0, &prog, &e), 0);
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->model_op >= costs->n_mops ||
        costs->mops[op->model_op].kind != MODEL_OP_ATTENTION)
      continue;
    int bwd = op->phase == PLAN_PHASE_BWD;
    double s;
    CU_ASSERT_EQUAL_FATAL(sim_compute_s(costs, op, &s, &e), 0);
    CU_ASSERT(fabs(s * 1e6 - (bwd ? bwd_us : fwd_us)) <= 1e-9 * (bwd ? bwd_us : fwd_us));
    seen[bwd]++;
  }
  plan_program_free(&prog);
}

/* A plan's attention ops are priced from "attention_shapes" when the
 * calibration has them: its own shape (heads and key/value heads over TP,
 * the micro-batch, the sequence), forward and backward. */
static void test_sim_prices_attention_by_shape(void) {
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  char path[4096];
  repo_path(path, sizeof path, "experiments/plans/gpt-h4096-tp2-none.json");
  CU_ASSERT_EQUAL_FATAL(plan_load(path, NULL, NULL, &p, &e), 0);
  char text[2048];
  snprintf(text, sizeof text,
           HEAD ",\"kernels\":{\"attention\":[{\"flops\":1e9,\"us\":10},{\"flops\":1e13,\"us\":20000}]},"
                "\"attention_shapes\":[{\"head_dim\":%d,\"seq\":%d,\"batch\":%d,\"heads\":%d,\"kv_heads\":%d,"
                "\"causal\":true,\"fwd_us\":123,\"bwd_us\":456}]}",
           model_head_dim(&p.model), p.seq, p.micro_batch, p.model.heads / p.tp, p.model.kv_heads / p.tp);
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(load(text, &c, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, NULL, &e), 0);
  int seen[2] = {0, 0};
  attention_prices_are(&p, &costs, 123, 456, seen);
  CU_ASSERT_TRUE(seen[0] > 0 && seen[1] > 0);
  schema_calibration_free(&c);
}

/* A query width other than hidden (Qwen3-30B-A3B: 32 query heads x head_dim 128 = 4,096 over hidden
 * 2,048, 4 key/value heads) keys the shape by the model's head_dim, the heads and the micro-batch: the
 * one-H100 plan's attention is the H100 file's own point of (128, 4096, batch 1, 32, 4), forward and
 * backward, not a point of hidden / heads = 64 nor one scaled from another batch or head count
 * (experiments/exec-qwen3/README.md, 2026-12-07: the point, 566 / 1,833 us, is what that plan's
 * attention is priced at; the run's 463 / 1,494 us is not a lookup error). */
static void test_sim_keys_head_dim_not_hidden(void) {
  static plan p;
  static sim_costs costs;
  static schema_calibration c;
  ts_err e = {0};
  char path[4096];
  repo_path(path, sizeof path, "experiments/exec-qwen3/plans/qwen3-30b-a3b-l2-1gpu-h100.json");
  CU_ASSERT_EQUAL_FATAL(plan_load(path, NULL, NULL, &p, &e), 0);
  CU_ASSERT_EQUAL_FATAL(model_head_dim(&p.model), 128);
  CU_ASSERT_NOT_EQUAL(model_head_dim(&p.model), p.model.hidden / p.model.heads); /* 2048 / 32 = 64 */
  repo_path(path, sizeof path, "calibration/h100-sxm-nvlink.json");
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(path, &c, &e), 0);
  const schema_attn_point *own = NULL;
  for (int i = 0; i < c.n_attn; i++) {
    const schema_attn_shape *s = &c.attn[i].s;
    if (s->head_dim == 128 && s->seq == 4096 && s->batch == 1 && s->heads == 32 && s->kv_heads == 4 && s->causal)
      own = &c.attn[i];
  }
  CU_ASSERT_PTR_NOT_NULL_FATAL(own);
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, NULL, &e), 0);
  int seen[2] = {0, 0};
  attention_prices_are(&p, &costs, own->fwd_us, own->bwd_us, seen);
  /* 2 layers x 8 micro-batches, each way, as the executor's profile counts them */
  CU_ASSERT_EQUAL(seen[0], 16);
  CU_ASSERT_EQUAL(seen[1], 16);
  schema_calibration_free(&c);
}

/* "attention_backends": each backend's points load sorted, write back, and are
 * refused naming the backend's array; an unknown backend (or "executor", whose
 * points are "attention_shapes") is refused. */
static void test_backends_load_and_reject(void) {
  const char *text = HEAD ",\"attention_backends\":{\"flash\":["
                          "{\"head_dim\":128,\"seq\":4096,\"batch\":1,\"heads\":32,\"kv_heads\":8,\"causal\":true,"
                          "\"fwd_us\":300,\"bwd_us\":900},"
                          "{\"head_dim\":64,\"seq\":2048,\"batch\":2,\"heads\":16,\"kv_heads\":16,\"causal\":true,"
                          "\"fwd_us\":50,\"bwd_us\":150}],"
                          "\"fused\":[{\"head_dim\":128,\"seq\":4096,\"batch\":1,\"heads\":32,\"kv_heads\":8,"
                          "\"causal\":true,\"fwd_us\":250,\"bwd_us\":700}]}}";
  schema_calibration c, d;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(text, &c, &e), 0);
  int n;
  const schema_attn_point *fl = schema_attn_points(&c, SCHEMA_ATTN_FLASH, &n);
  CU_ASSERT_EQUAL_FATAL(n, 2);
  CU_ASSERT_EQUAL(fl[0].s.head_dim, 64); /* sorted */
  CU_ASSERT_EQUAL(schema_attn_points(&c, SCHEMA_ATTN_FUSED, &n)[0].bwd_us, 700);
  CU_ASSERT_EQUAL(n, 1);
  CU_ASSERT_EQUAL(c.n_attn, 0);
  CU_ASSERT_EQUAL_FATAL(test_cal_round_trip(&c, "b.json", &d, &e), 0);
  CU_ASSERT_EQUAL(schema_attn_points(&d, SCHEMA_ATTN_FLASH, &n)[1].fwd_us, 300);
  CU_ASSERT_EQUAL(n, 2);
  schema_calibration_free(&d);
  schema_calibration_free(&c);
  static const struct {
    const char *section, *needle;
  } cases[] = {
      {"[]", "attention_backends: must be an object"},
      {"{\"cudnn\":[]}", "attention_backends.cudnn: unknown backend"},
      {"{\"fused_dropout\":{}}", "attention_backends.fused_dropout: must be an array"},
      {"{\"executor\":[]}", "attention_backends.executor: unknown backend"},
      {"{\"fused\":{}}", "attention_backends.fused: must be an array"},
      {"{\"fused\":[{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,\"causal\":true,"
       "\"fwd_us\":0,\"bwd_us\":2}]}",
       "attention_backends.fused[0].fwd_us"},
      {"{\"flash\":[{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,\"causal\":true,"
       "\"fwd_us\":1,\"bwd_us\":2},{\"head_dim\":128,\"seq\":64,\"batch\":1,\"heads\":8,\"kv_heads\":8,"
       "\"causal\":true,\"fwd_us\":3,\"bwd_us\":4}]}",
       "attention_backends.flash[1]: duplicate shape"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char t[1024];
    snprintf(t, sizeof t, HEAD ",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1}],\"attention_backends\":%s}",
             cases[i].section);
    ts_err e2 = {0};
    CU_ASSERT_NOT_EQUAL(load(t, &c, &e2), 0);
    if (!strstr(e2.msg, cases[i].needle)) fprintf(stderr, "case %zu: '%s' lacks '%s'\n", i, e2.msg, cases[i].needle);
    CU_ASSERT_PTR_NOT_NULL(strstr(e2.msg, cases[i].needle));
  }
}

/* The plan's attention_backend picks the points: fused its own, executor
 * "attention_shapes", flash (no points here) falls back to the executor's;
 * with attention_dropout > 0 fused takes "fused_dropout", and flash (no
 * dropout points either) still the executor's. */
static void test_sim_prices_the_plans_backend(void) {
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  char path[4096];
  repo_path(path, sizeof path, "experiments/plans/gpt-h4096-tp2-none.json");
  CU_ASSERT_EQUAL_FATAL(plan_load(path, NULL, NULL, &p, &e), 0);
  char pt[256], text[2048];
  snprintf(pt, sizeof pt, "{\"head_dim\":%d,\"seq\":%d,\"batch\":%d,\"heads\":%d,\"kv_heads\":%d,\"causal\":true,",
           model_head_dim(&p.model), p.seq, p.micro_batch, p.model.heads / p.tp, p.model.kv_heads / p.tp);
  snprintf(text, sizeof text,
           HEAD ",\"attention_shapes\":[%s\"fwd_us\":123,\"bwd_us\":456}],"
                "\"attention_backends\":{\"fused\":[%s\"fwd_us\":100,\"bwd_us\":300}],"
                "\"fused_dropout\":[%s\"fwd_us\":210,\"bwd_us\":360}]}}",
           pt, pt, pt);
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(load(text, &c, &e), 0);
  const struct {
    plan_attention_backend be;
    double dropout, fwd, bwd;
  } want[] = {{PLAN_ATTENTION_FUSED, 0, 100, 300},   {PLAN_ATTENTION_EXECUTOR, 0, 123, 456},
              {PLAN_ATTENTION_FLASH, 0, 123, 456},   {PLAN_ATTENTION_FUSED, 0.1, 210, 360},
              {PLAN_ATTENTION_FLASH, 0.1, 123, 456}};
  for (int w = 0; w < 5; w++) {
    p.attention_backend = want[w].be;
    p.attention_dropout = want[w].dropout;
    CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, NULL, &e), 0);
    plan_program prog = {0};
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
    int seen = 0;
    for (int i = 0; i < prog.n; i++) {
      const plan_op *op = &prog.ops[i];
      if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->model_op >= costs.n_mops ||
          costs.mops[op->model_op].kind != MODEL_OP_ATTENTION)
        continue;
      int bwd = op->phase == PLAN_PHASE_BWD;
      double s;
      if (sim_compute_s(&costs, op, &s, &e)) fprintf(stderr, "%s\n", e.msg);
      CU_ASSERT(fabs(s * 1e6 - (bwd ? want[w].bwd : want[w].fwd)) <= 1e-9);
      seen++;
    }
    CU_ASSERT_TRUE(seen >= 2);
    plan_program_free(&prog);
  }
  schema_calibration_free(&c);
}

/* tacorun calibrate --compute-from: another transport's file gets the shipped file's compute side
 * whole (GEMMs, decode GEMMs, kernels, attention of every backend, clock, burst, host) and none of
 * its collectives. */
static void test_copy_compute(void) {
  char path[4096];
  repo_path(path, sizeof path, "calibration/h200-nvlink.json");
  schema_calibration src, dst;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(path, &src, &e), 0);
  memset(&dst, 0, sizeof dst);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_copy_compute(&dst, &src), 0);
  CU_ASSERT_EQUAL(dst.n_gemm, src.n_gemm);
  CU_ASSERT(src.n_gemm_infer > 0);
  CU_ASSERT_EQUAL(dst.n_gemm_infer, src.n_gemm_infer);
  CU_ASSERT_EQUAL(dst.n_kernels, src.n_kernels);
  for (int b = 0; b < SCHEMA_ATTN_NBACKENDS; b++) {
    int ns, nd;
    const schema_attn_point *ps = schema_attn_points(&src, (schema_attn_backend)b, &ns);
    const schema_attn_point *pd = schema_attn_points(&dst, (schema_attn_backend)b, &nd);
    CU_ASSERT(ns > 0); /* the shipped file has every backend */
    CU_ASSERT_EQUAL(nd, ns);
    if (nd == ns && ns > 0) CU_ASSERT_EQUAL(pd[ns - 1].bwd_us, ps[ns - 1].bwd_us);
  }
  CU_ASSERT_EQUAL(dst.n_clock, src.n_clock);
  CU_ASSERT_EQUAL(dst.n_burst, src.n_burst);
  CU_ASSERT(dst.has_host);
  CU_ASSERT_EQUAL(dst.host_graph_gap_us, src.host_graph_gap_us);
  CU_ASSERT_EQUAL(dst.n_colls, 0);
  schema_calibration_free(&dst);
  schema_calibration_free(&src);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("calib_attn", NULL, NULL);
  CU_add_test(s, "attention_shapes load sorted and write back the same", test_loads_and_round_trips);
  CU_add_test(s, "malformed attention_shapes are rejected naming the field", test_malformed_rejected);
  CU_add_test(s, "an unmeasured shape: the nearest shapes' efficiency", test_lookup_nearest_efficiency);
  CU_add_test(s, "the transfer to another GPU moves the points", test_transfer_keeps_points);
  CU_add_test(s, "the simulator prices attention ops by their shape", test_sim_prices_attention_by_shape);
  CU_add_test(s, "a query width other than hidden keys the shape by head_dim (Qwen3-30B-A3B on one H100)",
              test_sim_keys_head_dim_not_hidden);
  CU_add_test(s, "attention_backends load, write back, and are refused naming the field", test_backends_load_and_reject);
  CU_add_test(s, "the plan's attention_backend picks the calibration's points", test_sim_prices_the_plans_backend);
  CU_add_test(s, "--compute-from's copy: the whole compute side, no collectives", test_copy_compute);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

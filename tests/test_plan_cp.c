/* test_plan_cp.c — context parallelism (layout.context_parallel_size,
 * plan/plan_program_cp.c): the rank grid (tp, then cp, then dp / pp) and its
 * groups, the KV ring in the programs (cp - 1 KV steps forward; cp - 1 KV
 * and cp dKV steps backward; piece s waits for step s), bytes and FLOPs
 * worked out by hand, activation memory divided by cp, the rules, and cp 1
 * building today's programs bit for bit. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

/* gpt-tiny (4 layers, h 256, 4 heads) on 8 x H200 (or `cluster`) with the given layout fields. */
static const char *cluster = "h200x8-nvswitch";
static int load(const char *layout, const char *top, int seq, plan *p, ts_err *e) {
  char buf[2048];
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"%s\",\n"
           "  \"layout\": { %s },\n"
           "  \"batch\": { \"micro\": 1, \"global\": 4, \"seq\": %d }, \"schedule\": \"1f1b\", \"layers_override\": 4%s }\n",
           cluster, layout, seq, top);
  return plan_from_json_text(buf, strlen(buf), "cp.json", NULL, NULL, p, e);
}

static void test_grid(void) {
  plan p;
  ts_err e = {0};
  cluster = "h200-1024-rail";
  int rc = load("\"dp\": 2, \"tp\": 2, \"pp\": 2, \"context_parallel_size\": 2", "", 256, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(plan_world_size(&p), 16);
  /* tp-dp-pp with CP: rank = tp + 2 (cp + 2 (dp + 2 pp)) */
  for (int r = 0; r < 16; r++) {
    plan_coord c = plan_coord_of(&p, r);
    CU_ASSERT_EQUAL(r, c.tp + 2 * (c.cp + 2 * (c.dp + 2 * c.pp)));
    CU_ASSERT_EQUAL(plan_rank_of(&p, c), r);
  }
  int m[16];
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_CP, m, 16), 2); /* 5 = tp 1, cp 0, dp 1 */
  CU_ASSERT(m[0] == 5 && m[1] == 7);
  CU_ASSERT_EQUAL(plan_group_index(&p, 7, PLAN_GROUP_CP), 1);
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_DP, m, 16), 4); /* dp x cp, cp fastest */
  CU_ASSERT(m[0] == 1 && m[1] == 3 && m[2] == 5 && m[3] == 7);
  CU_ASSERT_EQUAL(plan_group_index(&p, 5, PLAN_GROUP_DP), 2);
  CU_ASSERT_EQUAL(plan_group_members(&p, 5, PLAN_GROUP_TP, m, 16), 2);
  CU_ASSERT(m[0] == 4 && m[1] == 5);
  CU_ASSERT_EQUAL(plan_group_members(&p, 7, PLAN_GROUP_PP, m, 16), 2);
  CU_ASSERT(m[0] == 7 && m[1] == 15);
  CU_ASSERT_EQUAL(plan_dp_shards(&p), 4);
  /* tp-pp-dp: rank = tp + 2 (cp + 2 (pp + 2 dp)) */
  plan q;
  CU_ASSERT_EQUAL_FATAL(
      load("\"dp\": 2, \"tp\": 2, \"pp\": 2, \"order\": \"tp-pp-dp\", \"context_parallel_size\": 2", "", 256, &q, &e),
      0);
  for (int r = 0; r < 16; r++) {
    plan_coord c = plan_coord_of(&q, r);
    CU_ASSERT_EQUAL(r, c.tp + 2 * (c.cp + 2 * (c.pp + 2 * c.dp)));
  }
  cluster = "h200x8-nvswitch";
}

typedef struct {
  int fwd_kv, bwd_kv, bwd_dkv, rc_kv; /* layer 1, micro 0 */
  double cp_bytes, cp_wire, attn_flops, gemm_flops;
} cp_sums;

static cp_sums sums(const plan *p, const plan_program *g) {
  cp_sums s = {0};
  const int cp = plan_cp(p);
  for (int i = 0; i < g->n; i++) {
    const plan_op *op = &g->ops[i];
    for (int d = 0; d < PLAN_MAX_DEPS; d++) CU_ASSERT(op->dep[d] < i);
    if (op->kind == PLAN_OP_COMPUTE && op->model_op >= 0) {
      /* attention: gpt-tiny's op "attn" is the only one without a GEMM shape; count it by its stream-free marks */
      if (op->row_chunks == cp && cp > 1) s.attn_flops += op->flops;
    }
    if (op->stream != PLAN_STREAM_CP) continue;
    CU_ASSERT_EQUAL(op->group, PLAN_GROUP_CP);
    CU_ASSERT_EQUAL(op->traffic, PLAN_TRAFFIC_CP);
    s.cp_bytes += op->bytes;
    s.cp_wire += op->wire_bytes;
    if (op->layer != 1 || op->micro != 0) continue;
    if (op->phase == PLAN_PHASE_FWD) s.fwd_kv++;
    if (op->phase == PLAN_PHASE_RECOMPUTE) s.rc_kv++;
    if (op->phase == PLAN_PHASE_BWD) *(op->tag < cp ? &s.bwd_kv : &s.bwd_dkv) += 1;
  }
  return s;
}

/* Attention FLOPs of a program when cp is 1: the op named "attn". */
static double attention_flops(const plan *p, const plan_program *g) {
  double f = 0;
  for (int i = 0; i < g->n; i++) {
    char name[128];
    plan_op_name(p, &g->ops[i], name, sizeof name);
    if (g->ops[i].kind == PLAN_OP_COMPUTE && strstr(name, ".attn") && !strstr(name, "attn_")) f += g->ops[i].flops;
  }
  return f;
}

static void test_ring_program(void) {
  for (int cp = 2; cp <= 8; cp *= 2) {
    for (int sel = 0; sel <= 1; sel++) {
      plan a, b;
      ts_err e = {0};
      char lay[256];
      const char *rc = sel ? ", \"recompute\": \"selective\"" : "";
      snprintf(lay, sizeof lay, "\"dp\": 1, \"tp\": 1, \"pp\": 1%s", rc);
      CU_ASSERT_EQUAL_FATAL(load(lay, "", 1024, &a, &e), 0);
      snprintf(lay, sizeof lay, "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": %d%s", cp, rc);
      int ok = load(lay, "", 1024, &b, &e);
      if (ok) printf("\n  %s\n", e.msg);
      CU_ASSERT_EQUAL_FATAL(ok, 0);
      plan_program ga, gb;
      CU_ASSERT_EQUAL_FATAL(plan_build_program(&a, 0, &ga, &e), 0);
      CU_ASSERT_EQUAL_FATAL(plan_build_program(&b, cp - 1, &gb, &e), 0); /* the last CP rank */
      cp_sums s = sums(&b, &gb);
      CU_ASSERT_EQUAL(s.fwd_kv, cp - 1);
      CU_ASSERT_EQUAL(s.rc_kv, sel ? cp - 1 : 0);
      CU_ASSERT_EQUAL(s.bwd_kv, cp - 1);
      CU_ASSERT_EQUAL(s.bwd_dkv, cp);
      /* one KV block: K and V, 1024 / cp tokens, 4 heads x 64, bf16; a step's nccl size is cp / (cp - 1) blocks */
      double kv = 2.0 * 2.0 * (1024.0 / cp) * 4 * 64;
      double steps = (sel ? 2 : 1) * (cp - 1) + (cp - 1) + cp;
      double want = 4 /* layers */ * 4 /* micro-batches */ * steps * kv * cp / (cp - 1.0);
      CU_ASSERT_DOUBLE_EQUAL(s.cp_bytes, want, 1e-9 * want);
      CU_ASSERT_DOUBLE_EQUAL(s.cp_wire, want, 1e-9 * want);
      /* the 2 cp split: this rank's pieces do 1/cp of the whole sequence's attention (x 3 with selective
       * recompute's forward again; forward 1 : backward 2 in the model's count is checked by the sum) */
      double full = attention_flops(&a, &ga);
      CU_ASSERT(full > 0);
      CU_ASSERT_DOUBLE_EQUAL(s.attn_flops, full / cp, 1e-9 * full);
      /* piece s >= 1 of a forward waits for KV step s; piece 0 for none */
      for (int i = 0; i < gb.n; i++) {
        const plan_op *op = &gb.ops[i];
        if (op->kind != PLAN_OP_COMPUTE || op->row_chunks != cp) continue;
        int waited = -1;
        for (int d = 0; d < PLAN_MAX_DEPS; d++)
          if (op->dep[d] >= 0 && gb.ops[op->dep[d]].stream == PLAN_STREAM_CP) waited = gb.ops[op->dep[d]].tag;
        CU_ASSERT_EQUAL(waited, op->row_chunk > 0 ? op->row_chunk : -1);
      }
      /* the op after each backward attention waits for its last dKV step (tag 2 cp - 1) */
      int after = 0;
      for (int i = 1; i < gb.n; i++) {
        const plan_op *op = &gb.ops[i], *prev = &gb.ops[i - 1];
        if (!(prev->stream == PLAN_STREAM_CP && prev->phase == PLAN_PHASE_BWD && prev->tag == 2 * cp - 1)) continue;
        bool w = false;
        for (int d = 0; d < PLAN_MAX_DEPS; d++) w |= op->dep[d] == i - 1;
        CU_ASSERT(w);
        after++;
      }
      CU_ASSERT_EQUAL(after, 4 * 4);
      /* plan_limits.c's estimate of the ops stays an upper bound within 2x */
      double est = plan_estimate_ops_per_rank(&b);
      CU_ASSERT(est >= gb.n && est <= 2.0 * gb.n + 512);
      plan_program_free(&ga);
      plan_program_free(&gb);
    }
  }
}

/* cp_comm_type "allgather" (the all-gather method of Llama 3's CP): per layer and micro-batch one KV
 * all-gather before the forward's pieces (and before a recomputed forward's), one before the backward's and
 * one dKV reduce-scatter after them, each of cp blocks (nccl-tests size); piece 0 waits for the gather, the
 * op after the backward for the reduce-scatter; the pieces' work is the ring's; the buffers hold 2 cp
 * blocks instead of 4. */
static void test_allgather_program(void) {
  for (int cp = 2; cp <= 8; cp *= 2) {
    for (int sel = 0; sel <= 1; sel++) {
      plan ring, ag;
      ts_err e = {0};
      char lay[256];
      const char *rc = sel ? ", \"recompute\": \"selective\"" : "";
      snprintf(lay, sizeof lay, "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": %d%s", cp, rc);
      CU_ASSERT_EQUAL_FATAL(load(lay, "", 1024, &ring, &e), 0);
      snprintf(lay, sizeof lay,
               "\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": %d, \"cp_comm_type\": \"allgather\"%s", cp,
               rc);
      int ok = load(lay, "", 1024, &ag, &e);
      if (ok) printf("\n  %s\n", e.msg);
      CU_ASSERT_EQUAL_FATAL(ok, 0);
      CU_ASSERT_TRUE(ag.cp_allgather);
      CU_ASSERT_FALSE(ring.cp_allgather);
      plan_program gr, ga;
      CU_ASSERT_EQUAL_FATAL(plan_build_program(&ring, cp - 1, &gr, &e), 0);
      CU_ASSERT_EQUAL_FATAL(plan_build_program(&ag, cp - 1, &ga, &e), 0);
      cp_sums r = sums(&ring, &gr), a = sums(&ag, &ga);
      CU_ASSERT_EQUAL(a.fwd_kv, 1);
      CU_ASSERT_EQUAL(a.rc_kv, sel ? 1 : 0);
      /* backward: the gather (tag 1 < cp) and the reduce-scatter (tag cp) */
      CU_ASSERT_EQUAL(a.bwd_kv, 1);
      CU_ASSERT_EQUAL(a.bwd_dkv, 1);
      double kv = 2.0 * 2.0 * (1024.0 / cp) * 4 * 64;
      double want = 4 /* layers */ * 4 /* micro-batches */ * ((sel ? 2 : 1) + 2) * cp * kv;
      CU_ASSERT_DOUBLE_EQUAL(a.cp_bytes, want, 1e-9 * want);
      CU_ASSERT_DOUBLE_EQUAL(a.attn_flops, r.attn_flops, 1e-9 * r.attn_flops);
      int gathers = 0, scatters = 0;
      for (int i = 0; i < ga.n; i++) {
        const plan_op *op = &ga.ops[i];
        if (op->stream == PLAN_STREAM_CP) {
          gathers += op->coll == PLAN_COLL_ALLGATHER;
          scatters += op->coll == PLAN_COLL_REDUCESCATTER;
          if (op->coll == PLAN_COLL_REDUCESCATTER) { /* the next op waits for it */
            CU_ASSERT_FATAL(i + 1 < ga.n);
            bool w = false;
            for (int d = 0; d < PLAN_MAX_DEPS; d++) w |= ga.ops[i + 1].dep[d] == i;
            CU_ASSERT(w);
          }
          continue;
        }
        if (op->kind != PLAN_OP_COMPUTE || op->row_chunks != cp) continue;
        int waited = -1;
        for (int d = 0; d < PLAN_MAX_DEPS; d++)
          if (op->dep[d] >= 0 && ga.ops[op->dep[d]].stream == PLAN_STREAM_CP) waited = ga.ops[op->dep[d]].coll;
        CU_ASSERT_EQUAL(waited, op->row_chunk == 0 ? PLAN_COLL_ALLGATHER : -1);
      }
      CU_ASSERT_EQUAL(gathers, 4 * 4 * ((sel ? 2 : 1) + 1));
      CU_ASSERT_EQUAL(scatters, 4 * 4);
      plan_memory mr, ma;
      CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&ring, 0, &mr), 0);
      CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&ag, 0, &ma), 0);
      CU_ASSERT_DOUBLE_EQUAL(ma.overhead - mr.overhead, (2.0 * cp - 4) * kv, 1e-6 * kv);
      double est = plan_estimate_ops_per_rank(&ag);
      CU_ASSERT(est >= ga.n);
      plan_program_free(&gr);
      plan_program_free(&ga);
    }
  }
}

static void test_taco_on_kv(void) {
  plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load("\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2",
                             ", \"codec\": { \"cp\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" } }, "
                             "\"codec_min_bytes\": 0",
                             1024, &p, &e),
                        0);
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  cp_sums s = sums(&p, &g);
  /* bf16 -> fp8 plus 8 bytes per group of 128 elements */
  CU_ASSERT_DOUBLE_EQUAL(s.cp_wire, s.cp_bytes / 2 * (1 + 8.0 / 128), 1e-9 * s.cp_bytes);
  plan_program_free(&g);
  plan q;
  CU_ASSERT_NOT_EQUAL(load("\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2",
                           ", \"codec\": { \"cp\": { \"kind\": \"caat\", \"p\": 0.5 } }", 1024, &q, &e),
                      0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "codec.cp"));
}

static void test_memory(void) {
  plan a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load("\"dp\": 1, \"tp\": 2, \"pp\": 2, \"sequence_parallel\": true", "", 2048, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(
      load("\"dp\": 1, \"tp\": 2, \"pp\": 2, \"sequence_parallel\": true, \"context_parallel_size\": 2", "", 2048, &b,
           &e),
      0);
  for (int st = 0; st < 2; st++) {
    plan_memory ma, mb;
    CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&a, st, &ma), 0);
    CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&b, st, &mb), 0);
    CU_ASSERT_DOUBLE_EQUAL(mb.activations, ma.activations / 2, 1e-9 * ma.activations);
    CU_ASSERT_DOUBLE_EQUAL(mb.weights, ma.weights, 1e-9 * ma.weights);
    /* overhead: one NCCL communicator more (0.28 GiB, plan_memory.c), the ring's buffers (two KV and two dKV
     * blocks: 1024 tokens, 2 of 4 heads x 64, K and V, bf16), and half the fused attention backward's fp32
     * workspace (4 B x tokens x (heads x head_dim + heads) / tp) */
    double blocks = 4 * 2.0 * 2.0 * 1024 * 2 * 64, ws = 4.0 * 2048 * (4 * 64 + 4) / 2;
    double want = 0.28 * 1073741824.0 + blocks - ws / 2;
    CU_ASSERT_DOUBLE_EQUAL(mb.overhead - ma.overhead, want, 1e-6 * want);
  }
}

static void expect_error(const char *layout, const char *top, int seq, const char *field) {
  plan p;
  ts_err e = {0};
  CU_ASSERT_NOT_EQUAL(load(layout, top, seq, &p, &e), 0);
  if (!strstr(e.msg, field)) printf("\n  expected %s in: %s\n", field, e.msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, field));
}

static void test_rules(void) {
  /* seq divisible by 2 cp */
  expect_error("\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 4", "", 1028, "layout.context_parallel_size");
  /* under SP, tp divides seq / cp */
  expect_error("\"dp\": 1, \"tp\": 4, \"pp\": 1, \"sequence_parallel\": true, \"context_parallel_size\": 2", "", 1036,
               "layout.context_parallel_size");
  expect_error("\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 0", "", 1024, "layout.context_parallel_size");
  expect_error("\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2, \"cp_comm_type\": \"a2a\"", "", 1024,
               "layout.cp_comm_type");
  expect_error("\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2, \"cp_comm_type\": \"a2a+p2p\"", "",
               1024, "layout.cp_comm_type");
  expect_error("\"dp\": 1, \"tp\": 1, \"pp\": 1, \"context_parallel_size\": 2", ", \"attention_backend\": \"unfused\"",
               1024, "layout.context_parallel_size");
  /* dp x tp x pp x cp must fit the 8 GPUs */
  expect_error("\"dp\": 2, \"tp\": 2, \"pp\": 2, \"context_parallel_size\": 2", "", 1024, "layout");
}

/* context_parallel_size 1 is today's program, bit for bit. */
static void test_cp1_unchanged(void) {
  plan a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load("\"dp\": 2, \"tp\": 2, \"pp\": 2, \"sequence_parallel\": true", "", 1024, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load("\"dp\": 2, \"tp\": 2, \"pp\": 2, \"sequence_parallel\": true, \"context_parallel_size\": 1",
                             "", 1024, &b, &e),
                        0);
  for (int r = 0; r < 8; r++) {
    plan_program ga, gb;
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&a, r, &ga, &e), 0);
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&b, r, &gb, &e), 0);
    CU_ASSERT_EQUAL_FATAL(ga.n, gb.n);
    CU_ASSERT_EQUAL(memcmp(ga.ops, gb.ops, sizeof *ga.ops * (size_t)ga.n), 0);
    plan_program_free(&ga);
    plan_program_free(&gb);
  }
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("plan_cp", NULL, NULL);
  CU_add_test(s, "rank grid tp-cp-dp-pp and its groups", test_grid);
  CU_add_test(s, "KV ring: steps, bytes, attention share, dependencies", test_ring_program);
  CU_add_test(s, "cp_comm_type allgather: gathers, reduce-scatters, bytes, waits, buffers", test_allgather_program);
  CU_add_test(s, "TACO on the KV exchanges (codec.cp)", test_taco_on_kv);
  CU_add_test(s, "memory: activations / cp, ring buffers", test_memory);
  CU_add_test(s, "rules (file: field: reason)", test_rules);
  CU_add_test(s, "cp 1 builds today's programs", test_cp1_unchanged);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

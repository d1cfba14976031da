/* test_plan_tpo.c — layout.tp_comm_overlap (Megatron-Core's --tp-comm-overlap
 * under sequence parallelism): the programs split each SP all-gather into
 * tp - 1 ring steps pipelined with tp GEMM pieces and each row-parallel
 * reduce-scatter into 4 pieces behind the GEMM pieces; bytes and FLOPs add
 * up to the unsplit program's exactly; the SMs of the communication kernels
 * beside each GEMM; the rules. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

static const char *sp = "true";
static int load(int tp, const char *extra, int seq, plan *p, ts_err *e) {
  char buf[2048];
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\",\n"
           "  \"layout\": { \"dp\": 1, \"tp\": %d, \"pp\": 2, \"sequence_parallel\": %s, \"recompute\": \"full\"%s },\n"
           "  \"batch\": { \"micro\": 1, \"global\": 4, \"seq\": %d }, \"schedule\": \"1f1b\", \"layers_override\": 4 }\n",
           tp, sp, extra, seq);
  return plan_from_json_text(buf, strlen(buf), "tpo.json", NULL, NULL, p, e);
}

typedef struct {
  double tp_bytes[2][4], flops;           /* [fwd, bwd traffic][coll], compute FLOPs */
  int steps, pieces, rs_pieces, layer_ag, layer_rs;
} totals;

static totals sum(const plan_program *g, int layer) {
  totals t = {0};
  for (int i = 0; i < g->n; i++) {
    const plan_op *op = &g->ops[i];
    for (int d = 0; d < PLAN_MAX_DEPS; d++) CU_ASSERT(op->dep[d] < i);
    if (op->kind == PLAN_OP_COMPUTE) t.flops += op->flops;
    if (op->kind != PLAN_OP_COLLECTIVE || op->stream != PLAN_STREAM_TP) continue;
    t.tp_bytes[op->traffic == PLAN_TRAFFIC_TP_BWD][op->coll] += op->bytes;
    if (op->model_op >= 0 && op->layer == layer && op->micro == 0 && op->phase == PLAN_PHASE_FWD) {
      if (op->coll == PLAN_COLL_ALLGATHER) t.layer_ag++;
      if (op->coll == PLAN_COLL_REDUCESCATTER) t.layer_rs++;
    }
  }
  return t;
}

static void test_split_exact(void) {
  for (int tp = 2; tp <= 4; tp *= 2) { /* gpt-tiny has 4 heads */
    plan a, b;
    ts_err e = {0};
    CU_ASSERT_EQUAL_FATAL(load(tp, "", 256, &a, &e), 0);
    int rc = load(tp, ", \"tp_comm_overlap\": true", 256, &b, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    for (int r = 0; r < plan_world_size(&a); r += tp) {
      plan_program ga, gb;
      CU_ASSERT_EQUAL_FATAL(plan_build_program(&a, r, &ga, &e), 0);
      CU_ASSERT_EQUAL_FATAL(plan_build_program(&b, r, &gb, &e), 0);
      int layer = plan_chunk_first_layer(&a, plan_coord_of(&a, r).pp, 0) + 1;
      totals ta = sum(&ga, layer), tb = sum(&gb, layer);
      for (int d = 0; d < 2; d++)
        for (int c = 0; c < 4; c++) CU_ASSERT_DOUBLE_EQUAL(tb.tp_bytes[d][c], ta.tp_bytes[d][c], 1e-6 * (1 + ta.tp_bytes[d][c]));
      CU_ASSERT_DOUBLE_EQUAL(tb.flops, ta.flops, 1e-9 * ta.flops);
      /* one layer's forward: 2 all-gathers -> 2 (tp - 1) ring steps; 2 reduce-scatters -> 2 x 4 pieces */
      CU_ASSERT_EQUAL(ta.layer_ag, 2);
      CU_ASSERT_EQUAL(ta.layer_rs, 2);
      CU_ASSERT_EQUAL(tb.layer_ag, 2 * (tp - 1));
      CU_ASSERT_EQUAL(tb.layer_rs, 2 * PLAN_TPO_PIPELINE_SPLITS);
      /* a ring piece s >= 1 waits for step s; piece 0 for no step */
      for (int i = 0; i < gb.n; i++) {
        const plan_op *op = &gb.ops[i];
        if (op->kind != PLAN_OP_COMPUTE || op->row_chunks != tp || op->row_chunks == PLAN_TPO_PIPELINE_SPLITS) continue;
        bool waits_step = false;
        for (int d = 0; d < PLAN_MAX_DEPS; d++) {
          int k = op->dep[d];
          if (k >= 0 && gb.ops[k].coll == PLAN_COLL_ALLGATHER && gb.ops[k].stream == PLAN_STREAM_TP &&
              gb.ops[k].model_op == op->model_op && gb.ops[k].row_chunk == op->row_chunk)
            waits_step = true;
        }
        CU_ASSERT_EQUAL(waits_step, op->row_chunk > 0);
      }
      plan_program_free(&ga);
      plan_program_free(&gb);
    }
    CU_ASSERT_DOUBLE_EQUAL(plan_model_flops(&a), plan_model_flops(&b), 0);
  }
}

/* gpt-tiny's layer ops: ln1, qkv (column), attention, attn_out (row), ..., fc1 (column), act, fc2 (row). */
static void test_comm_sms(void) {
  plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(2, ", \"tp_comm_overlap\": true", 256, &p, &e), 0);
  model_shard s = {.tp = p.tp, .sequence_parallel = true, .micro_batch = 1, .seq = 256};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&p.model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_FATAL(n > 0);
  int cols = 0, rows = 0;
  for (int i = 0; i < n; i++) {
    int f = plan_tpo_comm_sms(&p, i, PLAN_PHASE_FWD, PLAN_PART_WHOLE);
    int dg = plan_tpo_comm_sms(&p, i, PLAN_PHASE_BWD, PLAN_PART_DGRAD);
    int wg = plan_tpo_comm_sms(&p, i, PLAN_PHASE_BWD, PLAN_PART_WGRAD);
    if (ops[i].parallel == MODEL_PAR_ROW) {
      rows++;
      CU_ASSERT_EQUAL(f, 16);  /* pipeline reduce-scatter */
      CU_ASSERT_EQUAL(dg, 1);  /* ring-exchanged output gradient */
      CU_ASSERT_EQUAL(wg, 0);
    } else if (ops[i].parallel == MODEL_PAR_COLUMN) {
      cols++;
      CU_ASSERT_EQUAL(f, 1);   /* ring-exchanged input */
      CU_ASSERT_EQUAL(dg, 16); /* bulk all-gather of the input for the wgrad */
      CU_ASSERT_EQUAL(wg, 16); /* bulk reduce-scatter of the input gradient */
    } else {
      CU_ASSERT_EQUAL(f + dg + wg, 0);
    }
  }
  CU_ASSERT_EQUAL(rows, 2);
  CU_ASSERT_EQUAL(cols, 2);
  plan off;
  CU_ASSERT_EQUAL_FATAL(load(2, "", 256, &off, &e), 0);
  for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(plan_tpo_comm_sms(&off, i, PLAN_PHASE_FWD, PLAN_PART_WHOLE), 0);
}

static void expect_error(int tp, const char *extra, int seq, const char *field) {
  plan p;
  ts_err e = {0};
  CU_ASSERT_NOT_EQUAL(load(tp, extra, seq, &p, &e), 0);
  if (!strstr(e.msg, field)) printf("\n  %s: %s\n", field, e.msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, field));
}

/* The memory model counts Transformer Engine's userbuffers: ten buffers of [seq x micro / cp, hidden] bf16
 * and two more 32 MiB cuBLAS workspaces per GPU, in the overhead (plan_memory.c cites the sources); nothing
 * else changes. */
static void test_userbuffer_memory(void) {
  plan a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(2, "", 256, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load(2, ", \"tp_comm_overlap\": true", 256, &b, &e), 0);
  CU_ASSERT_EQUAL(plan_tpo_buffer_bytes(&a), 0);
  const double want = 10.0 * 2 * 1 * 256 * a.model.hidden + 2 * 32.0 * 1048576;
  CU_ASSERT_DOUBLE_EQUAL(plan_tpo_buffer_bytes(&b), want, 0.5);
  for (int st = 0; st < 2; st++) {
    plan_memory ma, mb;
    CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&a, st, &ma), 0);
    CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&b, st, &mb), 0);
    CU_ASSERT_DOUBLE_EQUAL(mb.overhead - ma.overhead, want, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(mb.total - ma.total, want, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(mb.activations, ma.activations, 0);
  }
}

/* Under an FP8 recipe Transformer Engine's initialize_ub allocates the all-gather userbuffers as uint8
 * (fp8_buf): with the defaults six all-gather buffers (qkv_fprop, qkv_dgrad, proj_dgrad, fc1_fprop,
 * fc1_dgrad, fc2_dgrad) at 1 byte an element and four reduce-scatter ones (proj_fprop, fc2_fprop,
 * qkv_wgrad, fc1_wgrad) at 2: 14 bytes per element of [seq x micro, hidden] instead of 20. qkv_dgrad as
 * ring_exchange reduce-scatters (bf16, 2 tp - 1 chunks of 1/tp: 3/2 at tp 2) and drops qkv_wgrad's buffer:
 * 5 x 1 + 3 x 2 + 1.5 x 2 = 14 again, by other buffers. */
static void test_userbuffer_memory_fp8(void) {
  plan a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(2, ", \"tp_comm_overlap\": true, \"fp8\": \"tensorwise\"", 256, &a, &e), 0);
  const double elems = 1.0 * 256 * a.model.hidden, ws = 2 * 32.0 * 1048576;
  CU_ASSERT_DOUBLE_EQUAL(plan_tpo_buffer_bytes(&a), (6 * 1.0 + 4 * 2.0) * elems + ws, 0.5);
  int rc = load(2, ", \"tp_comm_overlap\": true, \"fp8\": \"tensorwise\", "
                   "\"tp_comm_overlap_cfg\": {\"qkv_dgrad\": {\"method\": \"ring_exchange\"}}", 256, &b, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_DOUBLE_EQUAL(plan_tpo_buffer_bytes(&b), (5 * 1.0 + 3 * 2.0 + 1.5 * 2.0) * elems + ws, 0.5);
}

/* TACO on the overlapped pieces (codec.tp_fwd / tp_bwd): each ring step and each pipelined reduce-scatter
 * piece is a message of its own, compressed when it reaches codec_min_bytes, its wire bytes TACO's for its
 * own size; a threshold above a ring step but below the whole gather sends the steps plain where the
 * unsplit all-gather is compressed. */
static int load_codec(int tpo, double min_bytes, plan *p, ts_err *e) {
  char buf[2048];
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\",\n"
           "  \"layout\": { \"dp\": 1, \"tp\": 4, \"pp\": 1, \"sequence_parallel\": true%s },\n"
           "  \"batch\": { \"micro\": 1, \"global\": 1, \"seq\": 256 }, \"schedule\": \"1f1b\", \"layers_override\": 2,\n"
           "  \"codec_min_bytes\": %.0f,\n"
           "  \"codec\": { \"tp_fwd\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" },\n"
           "             \"tp_bwd\": { \"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\" } } }\n",
           tpo ? ", \"tp_comm_overlap\": true" : "", min_bytes);
  return plan_from_json_text(buf, strlen(buf), "tpo-taco.json", NULL, NULL, p, e);
}

static void test_taco_pieces(void) {
  plan p, q;
  ts_err e = {0};
  int rc = load_codec(1, 1, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int pieces = 0;
  double step = 0, whole_ag = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind != PLAN_OP_COLLECTIVE || op->stream != PLAN_STREAM_TP || op->model_op < 0) continue;
    CU_ASSERT_EQUAL(op->codec.kind, PLAN_CODEC_TACO);
    CU_ASSERT_DOUBLE_EQUAL(op->wire_bytes, plan_codec_wire_bytes(&op->codec, op->bytes, 2), 1e-6);
    CU_ASSERT(op->wire_bytes < op->bytes);
    if (op->row_chunks > 1 && op->coll == PLAN_COLL_ALLGATHER && op->bytes > step) step = op->bytes;
    pieces += op->row_chunks > 1;
  }
  plan_program_free(&g);
  CU_ASSERT(pieces >= 8);
  CU_ASSERT_FATAL(step > 0);
  /* threshold between a ring step and the whole gather (3 steps at tp 4) */
  CU_ASSERT_EQUAL_FATAL(load_codec(1, step + 1, &p, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load_codec(0, step + 1, &q, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  int plain_steps = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind != PLAN_OP_COLLECTIVE || op->stream != PLAN_STREAM_TP || op->coll != PLAN_COLL_ALLGATHER) continue;
    if (op->row_chunks > 1 && op->bytes <= step) {
      CU_ASSERT_EQUAL(op->codec.kind, PLAN_CODEC_NONE);
      CU_ASSERT_DOUBLE_EQUAL(op->wire_bytes, op->bytes, 0);
      plain_steps++;
    }
  }
  plan_program_free(&g);
  CU_ASSERT(plain_steps >= 3);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&q, 0, &g, &e), 0);
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind != PLAN_OP_COLLECTIVE || op->stream != PLAN_STREAM_TP || op->coll != PLAN_COLL_ALLGATHER ||
        op->model_op < 0)
      continue;
    CU_ASSERT_EQUAL(op->codec.kind, PLAN_CODEC_TACO);
    whole_ag += op->bytes > step;
  }
  plan_program_free(&g);
  CU_ASSERT(whole_ag >= 2);
}

static void test_rules(void) {
  expect_error(1, ", \"tp_comm_overlap\": true", 256, "layout.tp_comm_overlap");
  sp = "false";
  expect_error(2, ", \"tp_comm_overlap\": true", 256, "layout.tp_comm_overlap");
  sp = "true";
  expect_error(2, ", \"tp_comm_overlap\": true", 252, "layout.tp_comm_overlap"); /* 252 tokens, not 4 x 2 pieces */
  expect_error(2, ", \"tp_comm_overlap\": 1", 256, "layout.tp_comm_overlap");
}

/* layout.tp_comm_overlap_cfg (Transformer Engine's ub_cfgs), worked by hand on gpt-tiny at tp 2, seq 256:
 * proj_fprop as ring_exchange runs attn_out's forward as tp = 2 pieces, each reduce-scattered, beside a
 * 1-SM kernel (TE's ring default) instead of 4 pipeline pieces beside 16; proj_fprop pipeline with
 * num_splits 8 runs 8; qkv_dgrad as ring_exchange splits qkv's dgrad into 2 pieces, each reduce-scattered
 * (TE's ub_overlap_rs_dgrad), the wgrad beside nothing; fc1_dgrad pipeline num_splits 2 the same for fc1
 * with 16 SMs. Bytes and FLOPs add up to the unsplit program's; the userbuffers follow TE's sizes. */
static int mop_index(const plan *p, const char *name) {
  model_shard s = plan_shard(p);
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e = {0};
  int n = model_layer_ops(&p->model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  for (int i = 0; i < n; i++)
    if (!strcmp(ops[i].name, name)) return i;
  return -1;
}

/* In rank 0's program, layer `layer`, micro-batch 0: the compute pieces of model op mop in (phase, part), the
 * TP reduce-scatters of mop in that phase, and whether every piece has flops / pieces of the whole. */
static void count_pieces(const plan_program *g, int layer, int mop, int phase, int part, int *pieces, int *rs,
                         double *flops) {
  *pieces = *rs = 0;
  *flops = 0;
  for (int i = 0; i < g->n; i++) {
    const plan_op *op = &g->ops[i];
    if (op->layer != layer || op->micro != 0 || op->model_op != mop || op->phase != phase) continue;
    if (op->kind == PLAN_OP_COMPUTE && op->part == part) (*pieces)++, *flops += op->flops;
    if (op->kind == PLAN_OP_COLLECTIVE && op->stream == PLAN_STREAM_TP && op->coll == PLAN_COLL_REDUCESCATTER) (*rs)++;
  }
}

static void test_cfg_pieces(void) {
  static const struct {
    const char *cfg, *op;
    int phase, part, pieces, rs, sms, sms_wgrad;
    double buffers; /* userbuffers in units of [seq x micro, hidden] bf16 */
  } cases[] = {
      {"{}", "attn_out", PLAN_PHASE_FWD, PLAN_PART_WHOLE, 4, 4, 16, 0, 10},
      {"{\"proj_fprop\": {\"method\": \"ring_exchange\"}}", "attn_out", PLAN_PHASE_FWD, PLAN_PART_WHOLE, 2, 2, 1, 0,
       9 + 1.5},
      {"{\"proj_fprop\": {\"num_splits\": 8}}", "attn_out", PLAN_PHASE_FWD, PLAN_PART_WHOLE, 8, 8, 16, 0, 10},
      {"{}", "qkv", PLAN_PHASE_BWD, PLAN_PART_DGRAD, 1, 1, 16, 16, 10},
      {"{\"qkv_dgrad\": {\"method\": \"ring_exchange\"}}", "qkv", PLAN_PHASE_BWD, PLAN_PART_DGRAD, 2, 2, 1, 0,
       8 + 1.5},
      {"{\"fc1_dgrad\": {\"method\": \"pipeline\", \"num_splits\": 2, \"num_sm\": 20}}", "fc1", PLAN_PHASE_BWD,
       PLAN_PART_DGRAD, 2, 2, 20, 0, 9},
  };
  plan off;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(2, "", 256, &off, &e), 0);
  plan_program go;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&off, 0, &go, &e), 0);
  const int layer = plan_chunk_first_layer(&off, 0, 0) + 1;
  totals to = sum(&go, layer);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char extra[512];
    snprintf(extra, sizeof extra, ", \"tp_comm_overlap\": true, \"tp_comm_overlap_cfg\": %s", cases[c].cfg);
    plan p;
    int rc = load(2, extra, 256, &p, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    int mop = mop_index(&p, cases[c].op);
    CU_ASSERT_FATAL(mop >= 0);
    plan_program g;
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
    totals t = sum(&g, layer);
    for (int d = 0; d < 2; d++)
      for (int k = 0; k < 4; k++) CU_ASSERT_DOUBLE_EQUAL(t.tp_bytes[d][k], to.tp_bytes[d][k], 1e-6 * (1 + to.tp_bytes[d][k]));
    CU_ASSERT_DOUBLE_EQUAL(t.flops, to.flops, 1e-9 * to.flops);
    int pieces, rs;
    double flops, whole_flops;
    count_pieces(&g, layer, mop, cases[c].phase, cases[c].part, &pieces, &rs, &flops);
    int p_off, rs_off;
    count_pieces(&go, layer, mop, cases[c].phase, cases[c].part, &p_off, &rs_off, &whole_flops);
    if (pieces != cases[c].pieces || rs != cases[c].rs) printf("\n  case %zu: %d pieces, %d rs\n", c, pieces, rs);
    CU_ASSERT_EQUAL(p_off, 1);
    CU_ASSERT_EQUAL(pieces, cases[c].pieces);
    CU_ASSERT_EQUAL(rs, cases[c].rs);
    CU_ASSERT_DOUBLE_EQUAL(flops, whole_flops, 1e-9 * whole_flops);
    CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, mop, cases[c].phase, cases[c].part), cases[c].sms);
    if (cases[c].phase == PLAN_PHASE_BWD)
      CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, mop, PLAN_PHASE_BWD, PLAN_PART_WGRAD), cases[c].sms_wgrad);
    const double buffer = 2.0 * 256 * p.model.hidden;
    CU_ASSERT_DOUBLE_EQUAL(plan_tpo_buffer_bytes(&p), cases[c].buffers * buffer + 2 * 32.0 * 1048576, 0.5);
    plan_program_free(&g);
  }
  plan_program_free(&go);
}

/* The userbuffer kernel beside each GEMM piece (plan_tpo_comm_companion), worked by hand on gpt-tiny at tp 2,
 * seq 256 (act = 2 x 256 x hidden bytes, the builder's full activation), and found in the program: TE's
 * defaults run attn_out's forward piece s = 1..3 beside the reduce-scatter of piece s - 1 (act / 4, forward
 * traffic), piece 0 beside nothing; qkv's dgrad beside the all-gather of act, its wgrad beside the
 * reduce-scatter of act (backward); the ring exchanges (qkv's forward, attn_out's dgrad) beside nothing that
 * holds SMs. fc1_dgrad pipeline num_splits 2: fc1's dgrad piece 1 beside the reduce-scatter of act / 2, its
 * wgrad beside nothing; qkv_dgrad ring_exchange: none. Compressed (TACO) messages wait for the GEMM's SMs:
 * none. plan_tpo_ops_pieces is the number of pieces the program builds. */
static int companion(const plan *p, int mop, int phase, int part, int piece, int pieces, plan_tpo_companion *c) {
  return plan_tpo_comm_companion(p, mop, phase, part, piece, pieces, c);
}

static bool in_program(const plan_program *g, int layer, int mop, int phase, const plan_tpo_companion *c,
                       int row_chunk) {
  for (int i = 0; i < g->n; i++) {
    const plan_op *op = &g->ops[i];
    if (op->kind == PLAN_OP_COLLECTIVE && op->stream == PLAN_STREAM_TP && op->layer == layer && op->micro == 0 &&
        op->model_op == mop && op->phase == phase && op->coll == c->coll && op->bytes == c->bytes &&
        op->traffic == c->traffic && (row_chunk < 0 || op->row_chunk == row_chunk))
      return true;
  }
  return false;
}

static void test_companions(void) {
  plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load(2, ", \"tp_comm_overlap\": true", 256, &p, &e), 0);
  const double act = 2.0 * 256 * p.model.hidden;
  const int qkv = mop_index(&p, "qkv"), proj = mop_index(&p, "attn_out"), fc1 = mop_index(&p, "fc1");
  CU_ASSERT_FATAL(qkv >= 0 && proj >= 0 && fc1 >= 0);
  plan_program g;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  const int layer = plan_chunk_first_layer(&p, 0, 0) + 1;
  plan_tpo_companion c;
  CU_ASSERT_EQUAL(companion(&p, proj, PLAN_PHASE_FWD, PLAN_PART_WHOLE, 0, 4, &c), 0);
  CU_ASSERT_EQUAL(c.gemm, PLAN_TPO_PROJ_FPROP);
  for (int s = 1; s < 4; s++) {
    CU_ASSERT_EQUAL(companion(&p, proj, PLAN_PHASE_FWD, PLAN_PART_WHOLE, s, 4, &c), 1);
    CU_ASSERT_EQUAL(c.coll, PLAN_COLL_REDUCESCATTER);
    CU_ASSERT_EQUAL(c.traffic, PLAN_TRAFFIC_TP_FWD);
    CU_ASSERT_DOUBLE_EQUAL(c.bytes, act / 4, 0);
    CU_ASSERT_EQUAL(c.wire, c.bytes);
    CU_ASSERT(in_program(&g, layer, proj, PLAN_PHASE_FWD, &c, s - 1));
  }
  CU_ASSERT_EQUAL(companion(&p, qkv, PLAN_PHASE_BWD, PLAN_PART_DGRAD, 0, 0, &c), 1);
  CU_ASSERT_EQUAL(c.coll, PLAN_COLL_ALLGATHER);
  CU_ASSERT_EQUAL(c.traffic, PLAN_TRAFFIC_TP_BWD);
  CU_ASSERT_DOUBLE_EQUAL(c.bytes, act, 0);
  CU_ASSERT(in_program(&g, layer, qkv, PLAN_PHASE_BWD, &c, -1));
  CU_ASSERT_EQUAL(companion(&p, qkv, PLAN_PHASE_BWD, PLAN_PART_WGRAD, 0, 0, &c), 1);
  CU_ASSERT_EQUAL(c.coll, PLAN_COLL_REDUCESCATTER);
  CU_ASSERT_DOUBLE_EQUAL(c.bytes, act, 0);
  CU_ASSERT(in_program(&g, layer, qkv, PLAN_PHASE_BWD, &c, -1));
  CU_ASSERT_EQUAL(companion(&p, qkv, PLAN_PHASE_FWD, PLAN_PART_WHOLE, 1, 2, &c), 0); /* ring exchange */
  CU_ASSERT_EQUAL(c.gemm, PLAN_TPO_QKV_FPROP);
  CU_ASSERT_EQUAL(companion(&p, proj, PLAN_PHASE_BWD, PLAN_PART_DGRAD, 1, 2, &c), 0);
  CU_ASSERT_EQUAL(companion(&p, proj, PLAN_PHASE_BWD, PLAN_PART_WGRAD, 0, 0, &c), 0); /* no TE GEMM */
  CU_ASSERT_EQUAL(c.gemm, -1);
  model_shard sh = plan_shard(&p);
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&p.model, &sh, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_EQUAL(plan_tpo_ops_pieces(&p, ops, n, proj, PLAN_PHASE_FWD, PLAN_PART_WHOLE), 4);
  CU_ASSERT_EQUAL(plan_tpo_ops_pieces(&p, ops, n, qkv, PLAN_PHASE_FWD, PLAN_PART_WHOLE), 2);
  CU_ASSERT_EQUAL(plan_tpo_ops_pieces(&p, ops, n, qkv, PLAN_PHASE_BWD, PLAN_PART_DGRAD), 1);
  CU_ASSERT_EQUAL(plan_tpo_ops_pieces(&p, ops, n, qkv, PLAN_PHASE_BWD, PLAN_PART_WGRAD), 1);
  plan_program_free(&g);

  CU_ASSERT_EQUAL_FATAL(load(2, ", \"tp_comm_overlap\": true, \"tp_comm_overlap_cfg\": {\"fc1_dgrad\": {\"method\": "
                                "\"pipeline\", \"num_splits\": 2}, \"qkv_dgrad\": {\"method\": \"ring_exchange\"}}",
                             256, &p, &e),
                        0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  CU_ASSERT_EQUAL(companion(&p, fc1, PLAN_PHASE_BWD, PLAN_PART_DGRAD, 0, 2, &c), 0);
  CU_ASSERT_EQUAL(companion(&p, fc1, PLAN_PHASE_BWD, PLAN_PART_DGRAD, 1, 2, &c), 1);
  CU_ASSERT_EQUAL(c.coll, PLAN_COLL_REDUCESCATTER);
  CU_ASSERT_EQUAL(c.traffic, PLAN_TRAFFIC_TP_BWD);
  CU_ASSERT_DOUBLE_EQUAL(c.bytes, act / 2, 0);
  CU_ASSERT(in_program(&g, layer, fc1, PLAN_PHASE_BWD, &c, 0));
  CU_ASSERT_EQUAL(companion(&p, fc1, PLAN_PHASE_BWD, PLAN_PART_WGRAD, 0, 0, &c), 0);
  CU_ASSERT_EQUAL(c.gemm, -1);
  CU_ASSERT_EQUAL(companion(&p, qkv, PLAN_PHASE_BWD, PLAN_PART_DGRAD, 1, 2, &c), 0); /* ring exchange: no SM */
  CU_ASSERT_EQUAL(companion(&p, qkv, PLAN_PHASE_BWD, PLAN_PART_WGRAD, 0, 0, &c), 0);
  n = model_layer_ops(&p.model, &sh, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_EQUAL(plan_tpo_ops_pieces(&p, ops, n, fc1, PLAN_PHASE_BWD, PLAN_PART_DGRAD), 2);
  CU_ASSERT_EQUAL(plan_tpo_ops_pieces(&p, ops, n, qkv, PLAN_PHASE_BWD, PLAN_PART_DGRAD), 2);
  plan_program_free(&g);

  CU_ASSERT_EQUAL_FATAL(load_codec(1, 1, &p, &e), 0); /* TACO on every TP message */
  const int proj4 = mop_index(&p, "attn_out"), qkv4 = mop_index(&p, "qkv");
  CU_ASSERT_EQUAL(companion(&p, proj4, PLAN_PHASE_FWD, PLAN_PART_WHOLE, 1, 4, &c), 0);
  CU_ASSERT_EQUAL(c.gemm, PLAN_TPO_PROJ_FPROP);
  CU_ASSERT_EQUAL(companion(&p, qkv4, PLAN_PHASE_BWD, PLAN_PART_DGRAD, 0, 0, &c), 0);
  CU_ASSERT_EQUAL(companion(&p, qkv4, PLAN_PHASE_BWD, PLAN_PART_WGRAD, 0, 0, &c), 0);
}

/* NeMo's llama3 70B H100 BF16 configuration (nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py,
 * userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192, NVIDIA/NeMo at 8cfedd7; the llama3_70b recipe's
 * tp_comm_overlap_cfg), written as JSON: it loads (cga_size, set_sm_margin and aggregate false are accepted)
 * and each GEMM's kernel holds the SMs it names; the ring exchanges keep TE's 1. */
static void test_cfg_nemo(void) {
  const char *nemo =
      ", \"tp_comm_overlap\": true, \"tp_comm_overlap_cfg\": {"
      "\"qkv_dgrad\": {\"method\": \"bulk\", \"num_sm\": 4, \"cga_size\": 2, \"set_sm_margin\": false},"
      "\"qkv_wgrad\": {\"method\": \"bulk\", \"num_sm\": 24, \"cga_size\": 2, \"set_sm_margin\": false},"
      "\"fc1_dgrad\": {\"method\": \"bulk\", \"num_sm\": 2, \"cga_size\": 2, \"set_sm_margin\": false},"
      "\"fc1_wgrad\": {\"method\": \"bulk\", \"num_sm\": 4, \"cga_size\": 2, \"set_sm_margin\": false},"
      "\"qkv_fprop\": {\"method\": \"ring_exchange\", \"aggregate\": false},"
      "\"proj_dgrad\": {\"method\": \"ring_exchange\", \"aggregate\": false},"
      "\"fc1_fprop\": {\"method\": \"ring_exchange\", \"aggregate\": false},"
      "\"fc2_dgrad\": {\"method\": \"ring_exchange\", \"aggregate\": false},"
      "\"proj_fprop\": {\"method\": \"pipeline\", \"num_sm\": 24, \"cga_size\": 2, \"num_splits\": 4,"
      " \"set_sm_margin\": true},"
      "\"fc2_fprop\": {\"method\": \"pipeline\", \"num_sm\": 16, \"cga_size\": 2, \"num_splits\": 4,"
      " \"set_sm_margin\": true}}";
  plan p;
  ts_err e = {0};
  int rc = load(4, nemo, 256, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  const int qkv = mop_index(&p, "qkv"), proj = mop_index(&p, "attn_out"), fc1 = mop_index(&p, "fc1"),
            fc2 = mop_index(&p, "fc2");
  CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, qkv, PLAN_PHASE_FWD, PLAN_PART_WHOLE), 1);
  CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, qkv, PLAN_PHASE_BWD, PLAN_PART_DGRAD), 4);
  CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, qkv, PLAN_PHASE_BWD, PLAN_PART_WGRAD), 24);
  CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, proj, PLAN_PHASE_FWD, PLAN_PART_WHOLE), 24);
  CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, proj, PLAN_PHASE_BWD, PLAN_PART_DGRAD), 1);
  CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, fc1, PLAN_PHASE_BWD, PLAN_PART_DGRAD), 2);
  CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, fc1, PLAN_PHASE_BWD, PLAN_PART_WGRAD), 4);
  CU_ASSERT_EQUAL(plan_tpo_comm_sms(&p, fc2, PLAN_PHASE_FWD, PLAN_PART_WHOLE), 16);
  CU_ASSERT_EQUAL(plan_tpo_splits(&p, PLAN_TPO_PROJ_FPROP), 4);
  CU_ASSERT_EQUAL(plan_tpo_splits(&p, PLAN_TPO_QKV_FPROP), 4); /* tp */
  CU_ASSERT_DOUBLE_EQUAL(plan_tpo_buffer_bytes(&p), 10.0 * 2 * 256 * p.model.hidden + 2 * 32.0 * 1048576, 0.5);
}

static void test_cfg_rules(void) {
  static const struct {
    const char *cfg, *field;
  } cases[] = {
      {"[]", "layout.tp_comm_overlap_cfg"},
      {"{\"qkv\": {}}", "layout.tp_comm_overlap_cfg.qkv"},
      {"{\"proj_wgrad\": {\"method\": \"external\"}}", "layout.tp_comm_overlap_cfg.proj_wgrad"},
      {"{\"qkv_fprop\": 1}", "layout.tp_comm_overlap_cfg.qkv_fprop"},
      {"{\"qkv_fprop\": {\"splits\": 2}}", "layout.tp_comm_overlap_cfg.qkv_fprop.splits"},
      {"{\"qkv_fprop\": {\"cga_size\": 0}}", "layout.tp_comm_overlap_cfg.qkv_fprop.cga_size"},
      {"{\"qkv_fprop\": {\"aggregate\": true}}", "layout.tp_comm_overlap_cfg.qkv_fprop.aggregate"},
      {"{\"qkv_fprop\": {\"use_ce\": false}}", "layout.tp_comm_overlap_cfg.qkv_fprop.use_ce"},
      {"{\"proj_fprop\": {\"fp8_buf\": true}}", "layout.tp_comm_overlap_cfg.proj_fprop.fp8_buf"},
      {"{\"proj_fprop\": {\"set_sm_margin\": 1}}", "layout.tp_comm_overlap_cfg.proj_fprop.set_sm_margin"},
      {"{\"proj_fprop\": {\"comm_priority\": 0}}", "layout.tp_comm_overlap_cfg.proj_fprop.comm_priority"},
      {"{\"qkv_fprop\": {\"method\": \"ring\"}}", "layout.tp_comm_overlap_cfg.qkv_fprop.method"},
      {"{\"qkv_fprop\": {\"method\": \"pipeline\"}}", "layout.tp_comm_overlap_cfg.qkv_fprop.method"},
      {"{\"fc2_dgrad\": {\"method\": \"bulk\"}}", "layout.tp_comm_overlap_cfg.fc2_dgrad.method"},
      {"{\"proj_fprop\": {\"method\": \"bulk\"}}", "layout.tp_comm_overlap_cfg.proj_fprop.method"},
      {"{\"fc1_wgrad\": {\"method\": \"ring_exchange\"}}", "layout.tp_comm_overlap_cfg.fc1_wgrad.method"},
      {"{\"qkv_dgrad\": {\"method\": \"pipeline\"}, \"qkv_wgrad\": {}}", "layout.tp_comm_overlap_cfg.qkv_wgrad"},
      {"{\"fc2_fprop\": {\"num_sm\": 0}}", "layout.tp_comm_overlap_cfg.fc2_fprop.num_sm"},
      {"{\"fc2_fprop\": {\"num_sm\": 132}}", "layout.tp_comm_overlap_cfg.fc2_fprop.num_sm"}, /* H200: 132 SMs */
      {"{\"fc2_fprop\": {\"num_sm\": 2.5}}", "layout.tp_comm_overlap_cfg.fc2_fprop.num_sm"},
      {"{\"qkv_fprop\": {\"num_splits\": 2}}", "layout.tp_comm_overlap_cfg.qkv_fprop.num_splits"},
      {"{\"qkv_dgrad\": {\"num_splits\": 2}}", "layout.tp_comm_overlap_cfg.qkv_dgrad.num_splits"},
      {"{\"fc2_fprop\": {\"num_splits\": 3}}", "layout.tp_comm_overlap_cfg.fc2_fprop.num_splits"}, /* 256 / (3 x 2) */
      {"{\"fc2_fprop\": {\"num_splits\": 0}}", "layout.tp_comm_overlap_cfg.fc2_fprop.num_splits"},
      {"{\"fc2_fprop\": {\"num_splits\": 65}}", "layout.tp_comm_overlap_cfg.fc2_fprop.num_splits"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    char extra[512];
    snprintf(extra, sizeof extra, ", \"tp_comm_overlap\": true, \"tp_comm_overlap_cfg\": %s", cases[c].cfg);
    expect_error(2, extra, 256, cases[c].field);
  }
  /* the object needs the overlap on */
  expect_error(2, ", \"tp_comm_overlap_cfg\": {}", 256, "layout.tp_comm_overlap_cfg");
  /* 252 tokens split into 2 x 2 pieces (ring exchange on both reduce-scatters)... but qkv / fc1's ring needs
   * nothing more; with TE's pipeline defaults they do not split into 4 x 2 */
  plan p;
  ts_err e = {0};
  const char *rings = ", \"tp_comm_overlap\": true, \"tp_comm_overlap_cfg\": {\"proj_fprop\": {\"method\": "
                      "\"ring_exchange\"}, \"fc2_fprop\": {\"method\": \"ring_exchange\"}}";
  int rc = load(2, rings, 252, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
  expect_error(2, ", \"tp_comm_overlap\": true", 252, "layout.tp_comm_overlap");
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("plan_tpo", NULL, NULL);
  CU_add_test(s, "tp_comm_overlap: ring steps and pipeline pieces add up exactly", test_split_exact);
  CU_add_test(s, "tp_comm_overlap: SMs of the comm kernel beside each GEMM", test_comm_sms);
  CU_add_test(s, "tp_comm_overlap: userbuffers in the memory model", test_userbuffer_memory);
  CU_add_test(s, "tp_comm_overlap: TACO on each piece, codec_min_bytes per piece", test_taco_pieces);
  CU_add_test(s, "tp_comm_overlap: FP8 all-gather userbuffers hold 1 byte an element, worked by hand",
              test_userbuffer_memory_fp8);
  CU_add_test(s, "tp_comm_overlap: rules", test_rules);
  CU_add_test(s, "tp_comm_overlap_cfg: pieces, SMs and userbuffers by method, worked by hand", test_cfg_pieces);
  CU_add_test(s, "tp_comm_overlap_cfg: each rule names its field", test_cfg_rules);
  CU_add_test(s, "tp_comm_overlap: the userbuffer kernel beside each GEMM piece, found in the program", test_companions);
  CU_add_test(s, "tp_comm_overlap_cfg: NeMo's llama3 70B H100 configuration loads, SMs as it names", test_cfg_nemo);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

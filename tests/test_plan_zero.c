/* test_plan_zero.c — data-parallel sharding (ZeRO-1/2/3) and the distributed
 * optimizer's overlaps in the programs: hand-counted traffic per layer, op
 * placement (what waits for what), memory, and the rules with the field
 * named. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_internal.h"

/* gpt-tiny (h 256, 4 heads, ffn 1024, biases, LayerNorm) on one 8-GPU node,
 * DP 4, 4 layers, micro 1, global 8 (m = 2), seq 256. */
static const char *model = "gpt-tiny";
static int layers = 4;
static int load(const char *layout_extra, const char *top_extra, plan *p, ts_err *e) {
  char buf[2048];
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"%s\", \"cluster\": \"h200x8-nvswitch\",\n"
           "  \"layout\": { \"dp\": 4, \"tp\": 1, \"pp\": 1%s },\n"
           "  \"batch\": { \"micro\": 1, \"global\": 8, \"seq\": 256 }, \"schedule\": \"1f1b\",\n"
           "  \"layers_override\": %d%s }\n",
           model, layout_extra, layers, top_extra ? top_extra : "");
  return plan_from_json_text(buf, strlen(buf), "z.json", NULL, NULL, p, e);
}

static plan must_load(const char *layout_extra, const char *top_extra) {
  plan p;
  ts_err e = {0};
  int rc = load(layout_extra, top_extra, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return p;
}

/* gpt-tiny's layer: qkv 3h^2 + 3h, attn_out h^2 + h, fc1 4h^2 + 4h, fc2 4h^2 + h, two LayerNorms 4h. */
static double tiny_layer_params(void) {
  const double h = 256;
  return 12 * h * h + 13 * h;
}

typedef struct {
  int ag_fwd, ag_bwd, rs, ar, gathers_after_opt;
  double ag_bytes, rs_bytes;
} dp_count;

static dp_count count_dp(const plan_program *g) {
  dp_count c = {0};
  for (int i = 0; i < g->n; i++) {
    const plan_op *op = &g->ops[i];
    if (op->stream != PLAN_STREAM_DP || op->kind != PLAN_OP_COLLECTIVE) continue;
    if (op->coll == PLAN_COLL_ALLGATHER) {
      if (op->phase == PLAN_PHASE_OPTIMIZER) c.gathers_after_opt++;
      else if (op->phase == PLAN_PHASE_BWD) c.ag_bwd++;
      else c.ag_fwd++;
      c.ag_bytes += op->bytes;
    } else if (op->coll == PLAN_COLL_REDUCESCATTER) {
      c.rs++;
      c.rs_bytes += op->bytes;
    } else if (op->coll == PLAN_COLL_ALLREDUCE) {
      c.ar++;
    }
  }
  return c;
}

/* ZeRO-3, hand-counted: per layer and micro-batch an all-gather of its bf16
 * parameters (2 P bytes, the gathered size) before the forward, another
 * before the backward, and a reduce-scatter of its fp32 gradients (4 P)
 * after it; the embedding and the head likewise; no bucket, no gather after
 * the optimizer. Each layer's first forward op waits for its gather. */
static void test_zero3_traffic(void) {
  plan p = must_load(", \"data_parallel_sharding_strategy\": \"optim_grads_params\"", NULL);
  CU_ASSERT_EQUAL(p.zero_stage, 3);
  CU_ASSERT(p.zero1);
  CU_ASSERT(p.overlap_param_gather); /* Megatron turns it on for optim_grads_params */
  plan_program g;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  dp_count c = count_dp(&g);
  const int m = 2, L = 4, units = L + 2;
  CU_ASSERT_EQUAL(c.ag_fwd, m * units);
  CU_ASSERT_EQUAL(c.ag_bwd, m * units);
  CU_ASSERT_EQUAL(c.rs, m * units);
  CU_ASSERT_EQUAL(c.ar, 0);
  CU_ASSERT_EQUAL(c.gathers_after_opt, 0);
  const double P = tiny_layer_params();
  int per_layer_ag = 0, per_layer_rs = 0;
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->stream != PLAN_STREAM_DP || op->layer != 2 || op->micro != 1) continue;
    if (op->coll == PLAN_COLL_ALLGATHER) {
      per_layer_ag++;
      CU_ASSERT_DOUBLE_EQUAL(op->bytes, 2.0 * P, 1e-6);
    } else {
      per_layer_rs++;
      CU_ASSERT_DOUBLE_EQUAL(op->bytes, 4.0 * P, 1e-6);
    }
  }
  CU_ASSERT_EQUAL(per_layer_ag, 2);
  CU_ASSERT_EQUAL(per_layer_rs, 1);
  /* the whole stage's parameters: layers, embedding, head */
  double stage = plan_params_of_stage(&p, 0);
  CU_ASSERT_DOUBLE_EQUAL(c.ag_bytes, 2.0 * m * 2.0 * stage, 1e-6 * stage);
  CU_ASSERT_DOUBLE_EQUAL(c.rs_bytes, m * 4.0 * stage, 1e-6 * stage);
  /* every forward compute of layer l waits (through its first op) for a gather of layer l, issued earlier */
  int first_seen[8][2] = {{0}};
  for (int i = 0; i < g.n; i++) {
    const plan_op *op = &g.ops[i];
    if (op->kind != PLAN_OP_COMPUTE || op->layer < 0 || op->phase != PLAN_PHASE_FWD) continue;
    if (first_seen[op->layer][op->micro]) continue;
    first_seen[op->layer][op->micro] = 1;
    bool waits = false;
    for (int d = 0; d < PLAN_MAX_DEPS; d++) {
      int k = op->dep[d];
      if (k >= 0 && g.ops[k].coll == PLAN_COLL_ALLGATHER && g.ops[k].stream == PLAN_STREAM_DP &&
          g.ops[k].layer == op->layer && g.ops[k].micro == op->micro)
        waits = true;
    }
    CU_ASSERT(waits);
  }
  plan_program_free(&g);
  /* grad_reduce_in_fp32 false: the reduce-scatters carry 2 bytes per parameter */
  p = must_load(", \"data_parallel_sharding_strategy\": \"optim_grads_params\", \"grad_reduce_in_fp32\": false",
                NULL);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
  c = count_dp(&g);
  CU_ASSERT_DOUBLE_EQUAL(c.rs_bytes, m * 2.0 * plan_params_of_stage(&p, 0), 1e-6 * c.rs_bytes);
  plan_program_free(&g);
}

/* Prefetch depth d: before the compute of the k-th unit of a step the gathers
 * of units k..k+d have been issued, and not k+d+1. */
static void test_zero3_prefetch(void) {
  for (int d = 0; d <= 2; d++) {
    char extra[160];
    snprintf(extra, sizeof extra,
             ", \"data_parallel_sharding_strategy\": \"optim_grads_params\", \"zero3_prefetch_layers\": %d", d);
    plan p = must_load(extra, NULL);
    plan_program g;
    ts_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &g, &e), 0);
    /* micro 0's forward: gathers issued before layer 1's first compute */
    int issued = 0;
    for (int i = 0; i < g.n; i++) {
      const plan_op *op = &g.ops[i];
      if (op->kind == PLAN_OP_COMPUTE && op->layer == 1 && op->micro == 0 && op->phase == PLAN_PHASE_FWD) break;
      if (op->stream == PLAN_STREAM_DP && op->coll == PLAN_COLL_ALLGATHER && op->micro == 0) issued++;
    }
    /* units: embedding (0), layers 0..3 (1..4), head (5); layer 1 is unit 2 */
    CU_ASSERT_EQUAL(issued, 2 + 1 + d);
    plan_program_free(&g);
  }
}

/* overlap_param_gather: one all-gather per bucket at the start of the
 * iteration instead of after the optimizer, the same bytes; each bucket's
 * first forward waits for its own, and the next one is dispatched there. */
static void test_overlap_param_gather(void) {
  /* small buckets: 3 layers' fp32 gradients close one */
  const double P = tiny_layer_params();
  char top[96];
  snprintf(top, sizeof top, ", \"dp_bucket_bytes\": %.0f", 4.0 * P * 2.5);
  plan off = must_load(", \"zero1\": true", top);
  plan on = must_load(", \"zero1\": true, \"overlap_param_gather\": true", top);
  plan_program a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&off, 0, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&on, 0, &b, &e), 0);
  dp_count ca = count_dp(&a), cb = count_dp(&b);
  CU_ASSERT(ca.gathers_after_opt >= 2);
  CU_ASSERT_EQUAL(cb.gathers_after_opt, 0);
  CU_ASSERT_EQUAL(cb.ag_fwd, ca.gathers_after_opt);
  CU_ASSERT_DOUBLE_EQUAL(cb.ag_bytes, ca.ag_bytes, 1e-6 * ca.ag_bytes);
  CU_ASSERT_EQUAL(cb.rs, ca.rs);
  /* the gathers come before the first backward, in order, each after the one before */
  int last = -1, first_bwd = -1;
  for (int i = 0; i < b.n; i++)
    if (b.ops[i].kind == PLAN_OP_COMPUTE && b.ops[i].phase == PLAN_PHASE_BWD && first_bwd < 0) first_bwd = i;
  for (int i = 0; i < b.n; i++) {
    const plan_op *op = &b.ops[i];
    if (op->stream != PLAN_STREAM_DP || op->coll != PLAN_COLL_ALLGATHER) continue;
    CU_ASSERT(i < first_bwd);
    if (last >= 0) {
      bool after = false;
      for (int d = 0; d < PLAN_MAX_DEPS; d++) after |= op->dep[d] == last;
      CU_ASSERT(after);
    }
    last = i;
  }
  /* the estimate's list of the buckets (plan_zero_stage_bucket_list): the gathers' order and sizes */
  plan_zero_bucket zb[16];
  int nb = plan_zero_stage_bucket_list(&on, 0, zb, 16), g = 0, layers = 0;
  CU_ASSERT_EQUAL(nb, cb.ag_fwd);
  for (int i = 0; i < b.n && nb > 0 && nb <= 16; i++) {
    const plan_op *op = &b.ops[i];
    if (op->stream != PLAN_STREAM_DP || op->coll != PLAN_COLL_ALLGATHER || g >= nb) continue;
    CU_ASSERT_DOUBLE_EQUAL(op->bytes, 2.0 * zb[g].params, 1e-6 * op->bytes);
    CU_ASSERT_EQUAL(zb[g].chunk_last, g == nb - 1); /* one chunk */
    layers += zb[g++].layers;
  }
  CU_ASSERT_EQUAL(layers, 4);
  plan_program_free(&a);
  plan_program_free(&b);
}

/* overlap_grad_reduce false: the same buckets, every one after the last
 * backward compute op; ZeRO-2: a reduce-scatter per bucket per micro-batch. */
static void test_grad_reduce_and_zero2(void) {
  char top[96];
  snprintf(top, sizeof top, ", \"dp_bucket_bytes\": %.0f", 4.0 * tiny_layer_params() * 1.5);
  plan on = must_load(", \"zero1\": true", top);
  plan off = must_load(", \"zero1\": true, \"overlap_grad_reduce\": false", top);
  plan z2 = must_load(", \"data_parallel_sharding_strategy\": \"optim_grads\"", top);
  plan_program a, b, c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&on, 0, &a, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&off, 0, &b, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&z2, 0, &c, &e), 0);
  dp_count ca = count_dp(&a), cb = count_dp(&b), cc = count_dp(&c);
  CU_ASSERT_EQUAL(ca.rs, cb.rs);
  CU_ASSERT_DOUBLE_EQUAL(ca.rs_bytes, cb.rs_bytes, 1e-6 * ca.rs_bytes);
  int last_bwd = -1;
  for (int i = 0; i < b.n; i++)
    if (b.ops[i].kind == PLAN_OP_COMPUTE && b.ops[i].phase == PLAN_PHASE_BWD) last_bwd = i;
  for (int i = 0; i < b.n; i++)
    if (b.ops[i].model_op == PLAN_MOP_GRAD_BUCKET) CU_ASSERT(i > last_bwd);
  /* overlapped: the first bucket is issued before the last backward op */
  int first_bucket = -1;
  last_bwd = -1;
  for (int i = 0; i < a.n; i++) {
    if (a.ops[i].kind == PLAN_OP_COMPUTE && a.ops[i].phase == PLAN_PHASE_BWD) last_bwd = i;
    if (a.ops[i].model_op == PLAN_MOP_GRAD_BUCKET && first_bucket < 0) first_bucket = i;
  }
  CU_ASSERT(first_bucket >= 0 && first_bucket < last_bwd);
  /* ZeRO-2: m = 2 times the buckets and bytes; the param gathers after the step as ZeRO-1 */
  CU_ASSERT_EQUAL(cc.rs, 2 * ca.rs);
  CU_ASSERT_DOUBLE_EQUAL(cc.rs_bytes, 2 * ca.rs_bytes, 1e-6 * ca.rs_bytes);
  CU_ASSERT_EQUAL(cc.gathers_after_opt, ca.gathers_after_opt);
  /* the estimate's count of the buckets one micro-batch closes (plan_zero_stage_buckets) is the program's */
  CU_ASSERT_EQUAL(plan_zero_stage_buckets(&z2, 0), cc.rs / 2);
  CU_ASSERT_EQUAL(plan_zero_stage_buckets(&on, 0), ca.rs);
  plan_program_free(&a);
  plan_program_free(&b);
  plan_program_free(&c);
}

/* Megatron-LM's account_for_embedding/loss_in_pipeline_split with sharding:
 * gpt-tiny, 6 layers + 2 slots over pp 2 x vpp 2 (virtual stages {emb, 0},
 * {1,2}, {3,4}, {5, loss}), dp 4. Each chunk's units are its own layers
 * (plus the embedding / head), so ZeRO-2 reduce-scatters m x 4 bytes of the
 * stage's parameters, and overlap_param_gather gathers 2 bytes of them
 * before the first backward, in the order of plan_zero_stage_bucket_list. */
static plan load_accounted(const char *layout_extra, const char *top_extra) {
  char buf[2048];
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\",\n"
           "  \"layout\": { \"dp\": 4, \"tp\": 1, \"pp\": 2, \"vpp\": 2, \"account_for_embedding_in_pipeline_split\": "
           "true, \"account_for_loss_in_pipeline_split\": true%s },\n"
           "  \"batch\": { \"micro\": 1, \"global\": 16, \"seq\": 256 }, \"schedule\": \"interleaved-1f1b\",\n"
           "  \"layers_override\": 6%s }\n",
           layout_extra, top_extra ? top_extra : "");
  plan p;
  ts_err e = {0};
  int rc = plan_from_json_text(buf, strlen(buf), "a.json", NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return p;
}

static void test_accounted_chunks(void) {
  const double P = tiny_layer_params();
  char top[96];
  snprintf(top, sizeof top, ", \"dp_bucket_bytes\": %.0f", 4.0 * P * 1.5); /* 2 layers' gradients close a bucket */
  plan z2 = load_accounted(", \"data_parallel_sharding_strategy\": \"optim_grads\"", top);
  plan pg = load_accounted(", \"zero1\": true, \"overlap_param_gather\": true", top);
  const int m = plan_micro_batches(&z2); /* 16 / 4 = 4 */
  CU_ASSERT_EQUAL(m, 4);
  for (int stage = 0; stage < 2; stage++) {
    const double params = plan_params_of_stage(&z2, stage);
    /* stage 0 holds the embedding and layers {0}, {3,4}; stage 1 layers {1,2}, {5} and the head */
    CU_ASSERT_DOUBLE_EQUAL(params, 3 * P + (stage == 0 ? plan_embedding_params(&z2) : plan_head_params(&z2)),
                           1e-6 * params);
    int units = 0, layer_units = 0;
    double unit_params = 0;
    for (int c = 0; c < 2; c++) {
      plan_zero_chunk z;
      ts_err e = {0};
      CU_ASSERT_EQUAL_FATAL(plan_zero_chunk_units(&pg, stage, c, &z, &e), 0);
      CU_ASSERT_EQUAL(z.n - z.emb - z.head, plan_vchunk_layers(&pg, stage, c));
      CU_ASSERT_EQUAL(z.first_layer, plan_chunk_first_layer(&pg, stage, c));
      units += z.n, layer_units += z.n - z.emb - z.head;
      for (int u = 0; u < z.n; u++) unit_params += z.params[u];
    }
    CU_ASSERT_EQUAL(layer_units, 3);
    CU_ASSERT_EQUAL(units, 4);
    CU_ASSERT_DOUBLE_EQUAL(unit_params, params, 1e-6 * params);
    plan_program a, b;
    ts_err e = {0};
    /* rank of (tp 0, dp 0, pp stage) under tp-dp-pp: stage x dp */
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&z2, stage * 4, &a, &e), 0);
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&pg, stage * 4, &b, &e), 0);
    dp_count ca = count_dp(&a), cb = count_dp(&b);
    CU_ASSERT_DOUBLE_EQUAL(ca.rs_bytes, m * 4.0 * params, 1e-6 * ca.rs_bytes);
    CU_ASSERT_DOUBLE_EQUAL(cb.rs_bytes, 4.0 * params, 1e-6 * cb.rs_bytes);
    CU_ASSERT_EQUAL(cb.gathers_after_opt, 0);
    CU_ASSERT_DOUBLE_EQUAL(cb.ag_bytes, 2.0 * params, 1e-6 * cb.ag_bytes);
    /* the estimate's bucket list: the gathers' order and sizes, and every layer of the stage once */
    plan_zero_bucket zb[16];
    int nb = plan_zero_stage_bucket_list(&pg, stage, zb, 16), g = 0, layers = 0;
    CU_ASSERT_EQUAL(nb, cb.ag_fwd);
    for (int i = 0; i < b.n && nb > 0 && nb <= 16; i++) {
      const plan_op *op = &b.ops[i];
      if (op->stream != PLAN_STREAM_DP || op->coll != PLAN_COLL_ALLGATHER || g >= nb) continue;
      CU_ASSERT_DOUBLE_EQUAL(op->bytes, 2.0 * zb[g].params, 1e-6 * op->bytes);
      layers += zb[g++].layers;
    }
    CU_ASSERT_EQUAL(layers, plan_stage_layers(&pg, stage));
    plan_program_free(&a);
    plan_program_free(&b);
  }
}

/* Memory: ZeRO-1 divides the optimizer by dp; ZeRO-2 also the gradients
 * (plus two buckets); ZeRO-3 also the weights (plus the gathered layers). */
static void test_zero_memory(void) {
  model = "llama3-8b", layers = 32; /* layers of 218 M parameters; embedding and head 525 M each, untied */
  plan z1 = must_load(", \"zero1\": true", NULL);
  plan z2 = must_load(", \"data_parallel_sharding_strategy\": \"optim_grads\"", ", \"dp_bucket_bytes\": 1000");
  plan z3 = must_load(", \"data_parallel_sharding_strategy\": \"optim_grads_params\", \"zero3_prefetch_layers\": 2",
                      NULL);
  plan_memory m1, m2, m3;
  CU_ASSERT_EQUAL(plan_memory_of_stage(&z1, 0, &m1), 0);
  CU_ASSERT_EQUAL(plan_memory_of_stage(&z2, 0, &m2), 0);
  CU_ASSERT_EQUAL(plan_memory_of_stage(&z3, 0, &m3), 0);
  const double params = plan_params_of_stage(&z1, 0);
  CU_ASSERT_DOUBLE_EQUAL(m1.optimizer, 12.0 * params / 4, 1e-6 * params);
  CU_ASSERT_DOUBLE_EQUAL(m1.gradients, 4.0 * params, 1e-6 * params);
  CU_ASSERT_DOUBLE_EQUAL(m2.gradients, 4.0 * params / 4 + 2 * 1000.0, 1e-6 * params);
  CU_ASSERT_DOUBLE_EQUAL(m2.weights, m1.weights, 1e-6);
  /* the largest unit of stage 0 (pp 1) is the embedding or the head: 3 of them gathered (prefetch 2 + the one in
   * use), 2 of their gradients */
  const double unit = plan_embedding_params(&z3) > plan_head_params(&z3) ? plan_embedding_params(&z3)
                                                                         : plan_head_params(&z3);
  CU_ASSERT_DOUBLE_EQUAL(m3.weights, 2.0 * params / 4 + 3 * 2.0 * unit, 1e-6 * params);
  CU_ASSERT_DOUBLE_EQUAL(m3.gradients, 4.0 * params / 4 + 2 * 4.0 * unit, 1e-6 * params);
  CU_ASSERT_DOUBLE_EQUAL(m3.optimizer, m1.optimizer, 1e-6 * params);
  CU_ASSERT(m3.total < m2.total && m2.total < m1.total);
  model = "gpt-tiny", layers = 4;
}

static void expect_error(const char *layout_extra, const char *field) {
  plan p;
  ts_err e = {0};
  CU_ASSERT_NOT_EQUAL(load(layout_extra, NULL, &p, &e), 0);
  if (!strstr(e.msg, field)) printf("\n  %s: %s\n", field, e.msg);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, field));
}

static void test_zero_rules(void) {
  expect_error(", \"overlap_param_gather\": true", "layout.overlap_param_gather");
  expect_error(", \"zero1\": true, \"overlap_param_gather\": true, \"overlap_grad_reduce\": false",
               "layout.overlap_param_gather");
  expect_error(", \"zero1\": false, \"data_parallel_sharding_strategy\": \"optim\"",
               "layout.data_parallel_sharding_strategy");
  expect_error(", \"zero1\": true, \"data_parallel_sharding_strategy\": \"no_shard\"",
               "layout.data_parallel_sharding_strategy");
  expect_error(", \"data_parallel_sharding_strategy\": \"zero2\"", "layout.data_parallel_sharding_strategy");
  expect_error(", \"data_parallel_sharding_strategy\": \"optim_grads\", \"overlap_grad_reduce\": false",
               "layout.overlap_grad_reduce");
  expect_error(", \"zero1\": true, \"zero3_prefetch_layers\": 1", "layout.zero3_prefetch_layers");
  expect_error(", \"data_parallel_sharding_strategy\": \"optim_grads_params\", \"zero3_prefetch_layers\": -1",
               "layout.zero3_prefetch_layers");
  expect_error(", \"overlap_grad_reduce\": 1", "layout.overlap_grad_reduce");
  /* a plan set up in code with zero1 alone (the layout search) is ZeRO-1 and validates */
  {
    plan q = must_load("", NULL);
    q.zero1 = true;
    ts_err e2 = {0};
    CU_ASSERT_EQUAL(plan_validate(&q, &e2), 0);
    q.zero_stage = 2, q.zero1 = false;
    CU_ASSERT_NOT_EQUAL(plan_validate(&q, &e2), 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(e2.msg, "layout.zero1"));
  }
  /* the defaults build today's program: zero1 as before, overlaps as before */
  plan a = must_load(", \"zero1\": true", NULL);
  plan b = must_load(", \"zero1\": true, \"data_parallel_sharding_strategy\": \"optim\", \"overlap_grad_reduce\": true,"
                     " \"overlap_param_gather\": false", NULL);
  plan_program ga, gb;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&a, 1, &ga, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&b, 1, &gb, &e), 0);
  CU_ASSERT_EQUAL_FATAL(ga.n, gb.n);
  CU_ASSERT_EQUAL(memcmp(ga.ops, gb.ops, sizeof *ga.ops * (size_t)ga.n), 0);
  plan_program_free(&ga);
  plan_program_free(&gb);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("plan_zero", NULL, NULL);
  CU_add_test(s, "ZeRO-3: traffic per layer hand-counted", test_zero3_traffic);
  CU_add_test(s, "ZeRO-3: prefetch depth", test_zero3_prefetch);
  CU_add_test(s, "overlap_param_gather: gathers beside the forward", test_overlap_param_gather);
  CU_add_test(s, "overlap_grad_reduce false, ZeRO-2", test_grad_reduce_and_zero2);
  CU_add_test(s, "ZeRO-1/2/3 memory", test_zero_memory);
  CU_add_test(s, "embedding and loss accounted as layers: units per chunk", test_accounted_chunks);
  CU_add_test(s, "rules, and the defaults build today's program", test_zero_rules);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

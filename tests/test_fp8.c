/* test_fp8.c — layout.fp8 (plan/plan_fp8.c): the loader's rules, the FP8 GEMMs and Transformer Engine's
 * casts in the program, their prices by hand (the BF16 -> FP8 transfer of a GEMM, a "gemm_fp8" point used
 * when the calibration has one, a cast through the "elementwise" table), the calibration list's round trip,
 * the memory model, the collectives' bytes (FP8 sequence-parallel and parameter all-gathers), and BF16 left as
 * it was when the field is absent. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibration.h"
#include "sim.h"
#include "sim_costs.h"
#include "test_check.h"

/* gpt-h4096-1gpu (H200, micro 2, seq 2048: m = 4,096 tokens; h 4,096, ffn 16,384, TP 1), biases fused,
 * with layout members set from `layout_json` (NULL: none) and the cluster `cluster` (NULL: the plan's). */
static int load_plan(plan *p, const char *layout_json, const char *cluster, ts_err *e) {
  json_error_t je;
  json_t *root = json_load_file(PLANS_DIR "/gpt-h4096-1gpu.json", 0, &je);
  if (!root) return -1;
  json_object_del(root, "bias_fusion");
  if (cluster) json_object_set_new(root, "cluster", json_string(cluster));
  if (layout_json) {
    json_t *add = json_loads(layout_json, 0, &je);
    if (!add) {
      json_decref(root);
      return -1;
    }
    json_object_update(json_object_get(root, "layout"), add);
    json_decref(add);
  }
  char *text = json_dumps(root, 0);
  json_decref(root);
  int rc = plan_from_json_text(text, strlen(text), "fp8.json", NULL, NULL, p, e);
  free(text);
  return rc;
}

static void expect_refused(const char *layout_json, const char *cluster, const char *field) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_NOT_EQUAL(load_plan(&p, layout_json, cluster, &e), 0);
  if (!strstr(e.msg, field)) fprintf(stderr, "\n  error \"%s\" does not name %s\n", e.msg, field);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, field));
}

static void test_loader(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, NULL, NULL, &e), 0);
  CU_ASSERT_EQUAL(p.fp8_recipe, PLAN_FP8_OFF);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "{\"fp8\": null}", NULL, &e), 0);
  CU_ASSERT_EQUAL(p.fp8_recipe, PLAN_FP8_OFF);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "{\"fp8\": \"tensorwise\"}", NULL, &e), 0);
  CU_ASSERT_EQUAL(p.fp8_recipe, PLAN_FP8_TENSORWISE);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "{\"fp8\": \"delayed\", \"zero1\": true, \"fp8_param_gather\": true}", NULL, &e), 0);
  CU_ASSERT_EQUAL(p.fp8_recipe, PLAN_FP8_DELAYED);
  CU_ASSERT_TRUE(p.fp8_param_gather);
  expect_refused("{\"fp8\": \"e4m3\"}", NULL, "layout.fp8");
  expect_refused("{\"fp8\": \"bf16\"}", NULL, "layout.fp8");
  expect_refused("{\"fp8\": true}", NULL, "layout.fp8");
  expect_refused("{\"fp8\": \"mxfp8\"}", NULL, "layout.fp8");                    /* Hopper: no MXFP8 */
  expect_refused("{\"fp8\": \"tensorwise\"}", "a100x8-nvswitch", "layout.fp8");  /* fp8_tflops 0 */
  expect_refused("{\"fp8_param_gather\": true}", NULL, "layout.fp8_param_gather");
  expect_refused("{\"fp8\": \"tensorwise\", \"fp8_param_gather\": true}", NULL, "layout.fp8_param_gather");
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "{\"fp8\": \"mxfp8\"}", "b200x8-nvswitch", &e), 0);
  CU_ASSERT_EQUAL(p.fp8_recipe, PLAN_FP8_MXFP8);
  CU_ASSERT_TRUE(p.cluster.gpu.mxfp8); /* the catalogue entry's field */
  /* the field decides, not the GPU's name: an H100 refuses MXFP8 naming its catalogue field; an inline GPU
   * block accepts it only with "mxfp8": true, whatever it is called */
  CU_ASSERT_NOT_EQUAL(load_plan(&p, "{\"fp8\": \"mxfp8\"}", "h100x8-nvswitch", &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "fp8.json: layout.fp8: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "the H100-SXM has none (its catalogue entry's mxfp8 is false)"));
  static const char *const inline_gpu =
      "{\"schema\": 1, \"name\": \"c\", \"gpu\": {\"name\": \"%s\", \"bf16_tflops\": 2250, \"fp8_tflops\": 4500,"
      " \"hbm_gib\": 180, \"hbm_gbps\": 8000%s}, \"nodes\": 1, \"gpus_per_node\": 1,"
      " \"intra\": {\"kind\": \"nvswitch\", \"gbps_per_gpu\": 900, \"latency_us\": 2}}";
  const struct { const char *name, *extra; bool ok; } blocks[] = {
      {"B200-like", ", \"mxfp8\": true", true}, {"B200", "", false}, {"B200", ", \"mxfp8\": false", false}};
  for (size_t i = 0; i < sizeof blocks / sizeof *blocks; i++) {
    char cluster[1024], path[] = "/tmp/test_fp8_cluster_XXXXXX";
    snprintf(cluster, sizeof cluster, inline_gpu, blocks[i].name, blocks[i].extra);
    int fd = mkstemp(path);
    CU_ASSERT_FATAL(fd >= 0);
    FILE *f = fdopen(fd, "w");
    CU_ASSERT_FATAL(f != NULL);
    fputs(cluster, f);
    fclose(f);
    e = (ts_err){0};
    int rc = load_plan(&p, "{\"fp8\": \"mxfp8\"}", path, &e);
    unlink(path);
    if ((rc == 0) != blocks[i].ok) fprintf(stderr, "\n  %s%s: %s\n", blocks[i].name, blocks[i].extra, e.msg);
    CU_ASSERT_EQUAL(rc == 0, blocks[i].ok);
    if (!blocks[i].ok) CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "layout.fp8: "));
  }
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "{\"fp8\": \"mxfp8\"}", "b200x8-nvswitch", &e), 0);
  /* MXFP8: no amax pass; both layouts carry an E8M0 scale per 32 elements */
  NEAR(plan_fp8_cast_bytes(&p, 32.0), 2.0 * 32 + 2.0 * 32 + 2.0, 1e-15);
  NEAR(plan_fp8_weight_bytes_per_param(&p), 2.0 + 1.0 / 16.0, 1e-15);
}

/* The ops of layer 0 of rank 0's program: the casts (by GEMM and tensor) and which GEMMs run in FP8. */
static void test_program(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "{\"fp8\": \"tensorwise\"}", NULL, &e), 0);
  model_op ops[MODEL_MAX_LAYER_OPS];
  model_shard s = {.tp = 1, .micro_batch = 2, .seq = 2048, .no_hidden_dropout = true};
  int n = model_layer_ops(&p.model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_FATAL(n > 0);
  int fp8_gemms = 0;
  for (int i = 0; i < n; i++) {
    bool want = !strcmp(ops[i].name, "qkv") || !strcmp(ops[i].name, "attn_out") || !strcmp(ops[i].name, "fc1") ||
                !strcmp(ops[i].name, "fc2");
    CU_ASSERT_EQUAL(plan_fp8_gemm(&p, &ops[i]), want);
    fp8_gemms += want;
  }
  CU_ASSERT_EQUAL(fp8_gemms, 4);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int input[2] = {0}, grad = 0, weight[2] = {0}; /* [micro 0, micro 1] */
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->model_op != PLAN_MOP_FP8_CAST || op->layer != 0) continue;
    const model_op *g = &ops[plan_fp8_cast_gemm(op->tag)];
    CU_ASSERT_TRUE(plan_fp8_gemm(&p, g));
    CU_ASSERT_EQUAL(op->kind, PLAN_OP_COMPUTE);
    /* the next compute op of the stream is the GEMM the cast feeds */
    int j = i + 1;
    while (j < prog.n && prog.ops[j].kind != PLAN_OP_COMPUTE) j++;
    CU_ASSERT_FATAL(j < prog.n);
    const int what = plan_fp8_cast_what(op->tag);
    if (what != PLAN_FP8_CAST_WEIGHT) CU_ASSERT_EQUAL(prog.ops[j].model_op, plan_fp8_cast_gemm(op->tag));
    const int mb = op->micro == 0 ? 0 : 1;
    if (what == PLAN_FP8_CAST_INPUT) {
      CU_ASSERT_EQUAL(op->phase, PLAN_PHASE_FWD);
      NEAR(op->bytes, 6.0 * g->m * g->k, 1e-15); /* current scaling: amax read, read, row + column writes */
      input[mb]++;
    } else if (what == PLAN_FP8_CAST_GRAD) {
      CU_ASSERT_EQUAL(op->phase, PLAN_PHASE_BWD);
      NEAR(op->bytes, 6.0 * g->m * g->n, 1e-15);
      grad++;
    } else {
      CU_ASSERT_EQUAL(what, PLAN_FP8_CAST_WEIGHT);
      NEAR(op->bytes, 6.0 * g->k * g->n, 1e-15);
      weight[mb]++;
    }
  }
  CU_ASSERT_EQUAL(input[0], 4);
  CU_ASSERT_EQUAL(input[1], 4 * (plan_micro_batches(&p) - 1));
  CU_ASSERT_EQUAL(grad, 4 * plan_micro_batches(&p));
  CU_ASSERT_EQUAL(weight[0], 4); /* once per iteration: the first micro-batch */
  CU_ASSERT_EQUAL(weight[1], 0);
  /* the program-size estimate counts the casts: between 1x and 2x the ops built (plan_limits.c) */
  const double ratio = plan_estimate_ops_per_rank(&p) / prog.n;
  CU_ASSERT(ratio >= 1.0 && ratio <= 2.0);
  plan_program_free(&prog);

  /* fp8_param_gather: no weight casts; BF16: no casts at all */
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, "{\"fp8\": \"delayed\", \"zero1\": true, \"fp8_param_gather\": true}", NULL, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int casts = 0;
  for (int i = 0; i < prog.n; i++)
    if (prog.ops[i].model_op == PLAN_MOP_FP8_CAST) {
      CU_ASSERT_NOT_EQUAL(plan_fp8_cast_what(prog.ops[i].tag), PLAN_FP8_CAST_WEIGHT);
      NEAR(prog.ops[i].bytes, 4.0 * (plan_fp8_cast_what(prog.ops[i].tag) == PLAN_FP8_CAST_GRAD
                                        ? (double)ops[plan_fp8_cast_gemm(prog.ops[i].tag)].m * ops[plan_fp8_cast_gemm(prog.ops[i].tag)].n
                                        : (double)ops[plan_fp8_cast_gemm(prog.ops[i].tag)].m * ops[plan_fp8_cast_gemm(prog.ops[i].tag)].k),
           1e-15); /* delayed scaling: no amax pass */
      casts++;
    }
  CU_ASSERT_EQUAL(casts, 8 * p.layers * plan_micro_batches(&p));
  plan_program_free(&prog);
  /* MXFP8 with fp8_param_gather: the parameters are gathered in BF16 and quantized after the gather, so the
   * weights' casts stay (4 GEMMs a layer, in micro-batch 0's forward: 2 + 2 + 1/16 bytes a weight element) */
  CU_ASSERT_EQUAL_FATAL(
      load_plan(&p, "{\"fp8\": \"mxfp8\", \"zero1\": true, \"fp8_param_gather\": true}", "b200x8-nvswitch", &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int weight_casts = 0;
  for (int i = 0; i < prog.n; i++)
    if (prog.ops[i].model_op == PLAN_MOP_FP8_CAST && plan_fp8_cast_what(prog.ops[i].tag) == PLAN_FP8_CAST_WEIGHT) {
      const model_op *o = &ops[plan_fp8_cast_gemm(prog.ops[i].tag)];
      CU_ASSERT_EQUAL(prog.ops[i].micro, 0);
      NEAR(prog.ops[i].bytes, (4.0 + 1.0 / 16.0) * (double)o->k * o->n, 1e-15);
      weight_casts++;
    }
  CU_ASSERT_EQUAL(weight_casts, 4 * p.layers);
  plan_program_free(&prog);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, NULL, NULL, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  for (int i = 0; i < prog.n; i++) CU_ASSERT_NOT_EQUAL(prog.ops[i].model_op, PLAN_MOP_FP8_CAST);
  plan_program_free(&prog);
}

/* Under sequence parallelism TE quantizes only the rank's own rows of a tensor it all-gathers in FP8 (qkv's
 * and fc1's input, attn_out's and fc2's output gradient) and, where the GEMMs need a columnwise copy (the
 * per-tensor recipes on Hopper), makes it from the gathered FP8 rows (plan_fp8.c cites the source). By hand
 * on gpt-h4096 at TP 2 (4,096 gathered rows, 2,048 local; h 4,096, ffn 16,384): each tensor gathered is
 * 4,096 x 4,096 elements (qkv's and fc1's input h wide, attn_out's dY h wide, fc2's dY h wide), local half.
 *   tensorwise, H200: quantize 2 + 1 + 2 (amax) = 5 bytes a local element, transpose 2 a gathered one;
 *   delayed, H200: 3 and 2; tensorwise, B200 (one FP8 copy): 5 and none;
 *   mxfp8, B200: both usages of the local rows, 2 + 2 + 2/32, and no transpose (both usages gathered).
 * Micro-batch 1 (no weight casts): per layer 2 input quantizes (forward), 2 input transposes (backward, after
 * the re-gather), 2 output-gradient quantizes and 2 transposes; the tensors not gathered (attn_out's and
 * fc2's input, qkv's and fc1's output gradient) keep their whole cast (plan_fp8_cast_bytes). */
static void check_sp_casts(const char *recipe, const char *cluster, double quantize, double transpose) {
  static plan p;
  ts_err e = {0};
  char layout[256];
  snprintf(layout, sizeof layout, "{\"tp\": 2, \"dp\": 4, \"sequence_parallel\": true, \"fp8\": \"%s\"}", recipe);
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, layout, cluster, &e), 0);
  const double gathered = 4096.0 * 4096.0, local = gathered / 2;
  model_op ops[MODEL_MAX_LAYER_OPS];
  model_shard s = {.tp = 2, .sequence_parallel = true, .micro_batch = 2, .seq = 2048, .no_hidden_dropout = true};
  CU_ASSERT_FATAL(model_layer_ops(&p.model, &s, ops, MODEL_MAX_LAYER_OPS, &e) > 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int n_quantize = 0, n_transpose = 0, n_full = 0;
  for (int i = 0; i + 1 < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->model_op != PLAN_MOP_FP8_CAST || op->micro != 1 || op->layer != 0) continue;
    const int what = plan_fp8_cast_what(op->tag);
    const model_op *g = &ops[plan_fp8_cast_gemm(op->tag)];
    CU_ASSERT_NOT_EQUAL_FATAL(what, PLAN_FP8_CAST_WEIGHT);
    const bool col = !strcmp(g->name, "qkv") || !strcmp(g->name, "fc1");
    if (col != (what == PLAN_FP8_CAST_INPUT)) { /* attn_out's and fc2's input, qkv's and fc1's dY: not gathered */
      NEAR(op->bytes, plan_fp8_cast_bytes(&p, what == PLAN_FP8_CAST_INPUT ? (double)g->m * g->k : (double)g->m * g->n),
           1e-15);
      n_full++;
    } else if (prog.ops[i + 1].kind == PLAN_OP_COLLECTIVE) { /* the quantize before the gather */
      NEAR(op->bytes, quantize * local, 1e-15);
      n_quantize++;
    } else { /* the transpose after it, in the backward */
      CU_ASSERT_EQUAL(op->phase, PLAN_PHASE_BWD);
      NEAR(op->bytes, transpose * gathered, 1e-15);
      n_transpose++;
    }
  }
  CU_ASSERT_EQUAL(n_quantize, 4);
  CU_ASSERT_EQUAL(n_transpose, transpose > 0 ? 4 : 0);
  CU_ASSERT_EQUAL(n_full, 4);
  plan_program_free(&prog);
}

static void test_sp_casts(void) {
  check_sp_casts("tensorwise", "h200x8-nvswitch", 5.0, 2.0);
  check_sp_casts("delayed", "h200x8-nvswitch", 3.0, 2.0);
  check_sp_casts("tensorwise", "b200x8-nvswitch", 5.0, 0.0);
  check_sp_casts("mxfp8", "b200x8-nvswitch", 4.0 + 2.0 / 32.0, 0.0);
}

/* The TP and DP collectives' bytes under each recipe, by hand: gpt-h4096 (h 4,096, micro 2 x seq 2,048 = 4,096
 * tokens) on 8 GPUs, TP 2 with sequence parallelism, DP 4 with the distributed optimizer and fp8_param_gather.
 * A BF16 sequence-parallel all-gather moves 2 x 4,096 x 4,096 bytes. Under FP8 (Transformer Engine v2.9 /
 * v2.10) the gathers feeding the FP8 GEMMs carry FP8: the forward gathers of qkv's and fc1's input and their
 * backward re-gathers, and the backward gathers of attn_out's and fc2's output gradient; 1 byte an element
 * under the per-tensor recipes, 1 + 1/32 under MXFP8 (E8M0 scales), twice that for the output gradients, which
 * MXFP8 gathers in both layouts. The reduce-scatters and the embedding's and loss's gathers stay BF16. The
 * parameter all-gathers: 2 bytes a parameter, 1 for the FP8 GEMMs' under the per-tensor recipes. Current scaling
 * adds a 4-byte TP all-reduce (the amax) before each of the four quantizes whose data is gathered. */
static void check_communication(const char *recipe, const char *cluster, bool overlap_param_gather) {
  static plan p;
  ts_err e = {0};
  char layout[256];
  if (recipe)
    snprintf(layout, sizeof layout,
             "{\"tp\": 2, \"dp\": 4, \"sequence_parallel\": true, \"zero1\": true, \"overlap_param_gather\": %s, "
             "\"fp8\": \"%s\", \"fp8_param_gather\": true}",
             overlap_param_gather ? "true" : "false", recipe);
  else
    snprintf(layout, sizeof layout,
             "{\"tp\": 2, \"dp\": 4, \"sequence_parallel\": true, \"zero1\": true, \"overlap_param_gather\": %s}",
             overlap_param_gather ? "true" : "false");
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, layout, cluster, &e), 0);
  const double elems = 4096.0 * 4096.0, bf16 = 2.0 * elems;
  double in = bf16, dy = bf16, saved = 0.0; /* input gathers, output-gradient gathers; param-gather saving */
  if (recipe && !strcmp(recipe, "mxfp8")) {
    in = (1.0 + 1.0 / 32.0) * elems, dy = 2.0 * in;
  } else if (recipe) {
    in = dy = elems, saved = 1.0;
  }
  model_op ops[MODEL_MAX_LAYER_OPS];
  model_shard s = {.tp = 2, .sequence_parallel = true, .micro_batch = 2, .seq = 2048, .no_hidden_dropout = true};
  int n = model_layer_ops(&p.model, &s, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_FATAL(n > 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int fwd_in = 0, bwd_in = 0, bwd_dy = 0, rs = 0, other = 0, amax[2] = {0};
  double gathered = 0.0;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COLLECTIVE) continue;
    if (op->model_op == PLAN_MOP_PARAM_GATHER) {
      gathered += op->bytes;
      continue;
    }
    if (op->group != PLAN_GROUP_TP || op->micro != 0) continue;
    if (op->coll == PLAN_COLL_ALLREDUCE && op->layer == 0 && op->model_op >= 0) { /* current scaling's amax */
      const char *name = ops[op->model_op].name;
      NEAR(op->bytes, 4.0, 1e-15);
      bool fwd = op->phase == PLAN_PHASE_FWD;
      CU_ASSERT(fwd ? !strcmp(name, "qkv") || !strcmp(name, "fc1") : !strcmp(name, "attn_out") || !strcmp(name, "fc2"));
      amax[fwd ? 0 : 1]++;
      continue;
    }
    if (op->coll == PLAN_COLL_REDUCESCATTER) {
      NEAR(op->bytes, bf16, 1e-15);
      rs++;
      continue;
    }
    if (op->coll != PLAN_COLL_ALLGATHER) continue;
    if (op->model_op < 0) { /* the embedding's and the loss's: BF16 */
      NEAR(op->bytes, bf16, 1e-15);
      other++;
      continue;
    }
    if (op->layer != 0) continue;
    const char *name = ops[op->model_op].name;
    if (!strcmp(name, "qkv") || !strcmp(name, "fc1")) {
      NEAR(op->bytes, in, 1e-15);
      if (op->phase == PLAN_PHASE_FWD) fwd_in++;
      else bwd_in++;
    } else {
      CU_ASSERT(!strcmp(name, "attn_out") || !strcmp(name, "fc2"));
      CU_ASSERT_EQUAL(op->phase, PLAN_PHASE_BWD);
      NEAR(op->bytes, dy, 1e-15);
      bwd_dy++;
    }
  }
  CU_ASSERT_EQUAL(fwd_in, 2);
  CU_ASSERT_EQUAL(bwd_in, 2);
  CU_ASSERT_EQUAL(bwd_dy, 2);
  /* current scaling only: one float all-reduced over TP before each gathered quantize (qkv's and fc1's input,
   * attn_out's and fc2's output gradient); the re-gathers reuse the kept FP8 shard */
  const int want_amax = recipe && !strcmp(recipe, "tensorwise") ? 2 : 0;
  CU_ASSERT_EQUAL(amax[0], want_amax);
  CU_ASSERT_EQUAL(amax[1], want_amax);
  CU_ASSERT(rs >= 4 * p.layers); /* the layers' four a micro-batch (and the embedding's) */
  CU_ASSERT(other >= 1);
  /* the parameter all-gathers: all the stage's parameters once */
  const double fp8_params = 4.0 * 4096.0 * 4096.0 / 2 + 2.0 * 4096.0 * 16384.0 / 2; /* qkv, attn_out, fc1, fc2 weights / TP */
  NEAR(plan_fp8_gemm_weights(&p, ops, n), recipe ? fp8_params : 0.0, 1e-12);
  NEAR(gathered, 2.0 * plan_params_of_stage(&p, 0) - saved * fp8_params * p.layers, 1e-12);
  plan_program_free(&prog);

  /* with TACO on the TP traffic (all of it over the 8 MiB threshold): the reduce-scatters and the BF16 gathers
   * are compressed, an FP8 gather travels as it is */
  for (int t = PLAN_TRAFFIC_TP_FWD; t <= PLAN_TRAFFIC_TP_BWD; t++)
    p.codec[t] = (plan_codec){.kind = PLAN_CODEC_TACO, .group = 128, .fp8 = PLAN_FP8_E4M3};
  CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
  int raw = 0, packed = 0;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->kind != PLAN_OP_COLLECTIVE || op->group != PLAN_GROUP_TP || op->layer != 0 || op->micro != 0) continue;
    if (op->coll != PLAN_COLL_ALLGATHER && op->coll != PLAN_COLL_REDUCESCATTER) continue;
    const bool fp8_gather = op->coll == PLAN_COLL_ALLGATHER && recipe != NULL;
    CU_ASSERT_EQUAL(op->codec.kind, fp8_gather ? PLAN_CODEC_NONE : PLAN_CODEC_TACO);
    if (fp8_gather) NEAR(op->wire_bytes, op->bytes, 1e-15);
    else CU_ASSERT(op->wire_bytes < op->bytes);
    fp8_gather ? raw++ : packed++;
  }
  CU_ASSERT_EQUAL(raw, recipe ? 6 : 0);
  CU_ASSERT_EQUAL(packed, recipe ? 4 : 10);
  plan_program_free(&prog);
}

static void test_communication(void) {
  for (int overlap = 0; overlap < 2; overlap++) {
    check_communication(NULL, "h200x8-nvswitch", overlap);
    check_communication("tensorwise", "h200x8-nvswitch", overlap);
    check_communication("delayed", "h200x8-nvswitch", overlap);
    check_communication("tensorwise", "b200x8-nvswitch", overlap); /* one FP8 copy there: the same bytes */
    check_communication("mxfp8", "b200x8-nvswitch", overlap);
  }
}

/* A calibration with one "elementwise" table, 5 us flat to 1 MB then 5 us per MB (200 GB/s); no "gemm"
 * table, so a BF16 GEMM is the roofline's 3 us + 2 m n k / BF16 peak; an FP8 one (when given) in "gemm_fp8". */
static void hand_calibration(schema_calibration *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->path, sizeof c->path, "hand.json");
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "elementwise", false, 1.0, 0, 5.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "elementwise", false, 1e6, 0, 5.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "elementwise", false, 1e13, 0, 5e7), 0);
}

/* Micro-batch 0's forward fc1 GEMM and its input cast on layer 0 (us). */
static void fc1_us(const plan *p, const schema_calibration *cal, double *gemm, double *cast) {
  static sim_costs c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_costs_init(&c, p, cal, NULL, &e), 0);
  plan_program prog;
  CU_ASSERT_EQUAL_FATAL(plan_build_program(p, 0, &prog, &e), 0);
  *gemm = *cast = -1;
  for (int i = 0; i < prog.n; i++) {
    const plan_op *op = &prog.ops[i];
    if (op->layer != 0 || op->micro != 0 || op->phase != PLAN_PHASE_FWD || op->kind != PLAN_OP_COMPUTE) continue;
    int mop = op->model_op == PLAN_MOP_FP8_CAST ? plan_fp8_cast_gemm(op->tag) : op->model_op;
    if (mop < 0 || strcmp(c.mops[mop].name, "fc1")) continue;
    double s = -1e-6;
    CU_ASSERT_EQUAL(sim_compute_s(&c, op, &s, &e), 0);
    if (op->model_op == PLAN_MOP_FP8_CAST && plan_fp8_cast_what(op->tag) == PLAN_FP8_CAST_INPUT) *cast = s * 1e6;
    if (op->model_op >= 0) *gemm = s * 1e6;
  }
  plan_program_free(&prog);
}

/* fc1 forward: m 4,096, n 16,384, k 4,096: F = 2 m n k = 5.4976e11 FLOP. BF16 (no "gemm" table): 3 us +
 * F / 989e12 s = 558.88 us. Its roofline: BF16, max(F / 989 TFLOP/s, 2 (mk + kn + mn) B / 4.8 TB/s) = the
 * FLOPs (555.9 us vs 41.9 us); FP8, max(F / 1,979 TFLOP/s, (mk + kn + 2 mn) B / 4.8 TB/s) = the FLOPs too:
 * the transfer halves the time, 558.88 x 989 / 1979. The input cast (tensorwise): 6 bytes an element of
 * X [m x k], 100,663,296 bytes, 5 us per MB = 503.31648 us. With "gemm_fp8" holding the shape: its 300 us (above the FP8 ceiling F / 1,979 TFLOP/s = 277.8 us). */
static void test_costs_by_hand(void) {
  static plan bf16, fp8;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&bf16, NULL, NULL, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load_plan(&fp8, "{\"fp8\": \"tensorwise\"}", NULL, &e), 0);
  const double m = 4096, n = 16384, k = 4096, F = 2 * m * n * k;
  const double p16 = bf16.cluster.gpu.bf16_tflops * 1e12, p8 = bf16.cluster.gpu.fp8_tflops * 1e12;
  CU_ASSERT_EQUAL(p16, 989e12);
  CU_ASSERT_EQUAL(p8, 1979e12);
  schema_calibration cal;
  hand_calibration(&cal);
  double g16, c16, g8, c8;
  fc1_us(&bf16, &cal, &g16, &c16);
  fc1_us(&fp8, &cal, &g8, &c8);
  const double t16 = 3.0 + F / p16 * 1e6;
  NEAR(g16, t16, 1e-12);
  CU_ASSERT_EQUAL(c16, -1); /* no cast in BF16 */
  NEAR(g8, t16 * p16 / p8, 1e-12);
  NEAR(c8, 5e-6 * 6 * m * k, 1e-12);
  /* points of (n, k) on both sides of m: their times interpolated in log-log, at m 4,096 between 2,048 (160 us)
   * and 8,192 (560 us) the geometric mean, 299.33 us (not the BF16 roofline moved to FP8) */
  CU_ASSERT_EQUAL(schema_calibration_add_gemm_fp8(&cal, 2048, 16384, 4096, 160.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_gemm_fp8(&cal, 8192, 16384, 4096, 560.0), 0);
  schema_calibration_sort(&cal);
  fc1_us(&fp8, &cal, &g8, &c8);
  NEAR(g8, sqrt(160.0 * 560.0), 1e-9);
  /* a measured point of the shape wins */
  CU_ASSERT_EQUAL(schema_calibration_add_gemm_fp8(&cal, 4096, 16384, 4096, 300.0), 0);
  schema_calibration_sort(&cal);
  fc1_us(&fp8, &cal, &g8, &c8);
  NEAR(g8, 300.0, 1e-15);
  schema_calibration_free(&cal);
}

/* MXFP8 on the B200 (2,250 / 4,500 TFLOP/s, 8 TB/s; its catalogue entry's measured mxfp8_gemm_ratio
 * 1.0512): fc1 forward, F = 5.4976e11 FLOP, BF16 3 us + F / 2,250e12 s = 247.34 us; per-tensor FP8 (both
 * rooflines the FLOPs: FP8 bytes mk + kn + 2 mn = 218 MB take 27 us, F at 4,500 TFLOP/s 122 us) half of it,
 * 123.67 us; MXFP8 that times 1.0512 = 130.0 us. A "gemm_fp8" point of 150 us (above the FP8 ceiling, 122 us): 157.68 us under
 * MXFP8, 150 under tensorwise. The cast is the recipe's (4 + 1/16 bytes an element), not scaled. An inline GPU block
 * with "mxfp8": true and no ratio prices MXFP8 GEMMs as per-tensor ones. */
static void test_mxfp8_gemm_ratio(void) {
  static plan tw, mx;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&tw, "{\"fp8\": \"tensorwise\"}", "b200x8-nvswitch", &e), 0);
  CU_ASSERT_EQUAL_FATAL(load_plan(&mx, "{\"fp8\": \"mxfp8\"}", "b200x8-nvswitch", &e), 0);
  CU_ASSERT_EQUAL(mx.cluster.gpu.mxfp8_gemm_ratio, 1.0512);
  const double m = 4096, n = 16384, k = 4096, F = 2 * m * n * k;
  schema_calibration cal;
  hand_calibration(&cal);
  double gt, ct, gm, cm;
  fc1_us(&tw, &cal, &gt, &ct);
  fc1_us(&mx, &cal, &gm, &cm);
  const double t16 = 3.0 + F / 2250e12 * 1e6;
  NEAR(gt, t16 * 2250.0 / 4500.0, 1e-12);
  NEAR(gm, t16 * 2250.0 / 4500.0 * 1.0512, 1e-12);
  NEAR(cm, 5e-6 * (4.0 + 1.0 / 16.0) * m * k, 1e-12);
  NEAR(ct, 5e-6 * 5.0 * m * k, 1e-12); /* tensorwise on the B200: one FP8 copy (test_non_tn_copies) */
  NEAR(sim_gemm_fp8_recipe_us(&mx, 100.0), 105.12, 1e-12);
  NEAR(sim_gemm_fp8_recipe_us(&tw, 100.0), 100.0, 1e-15);
  CU_ASSERT_EQUAL(schema_calibration_add_gemm_fp8(&cal, 4096, 16384, 4096, 150.0), 0);
  schema_calibration_sort(&cal);
  fc1_us(&tw, &cal, &gt, &ct);
  fc1_us(&mx, &cal, &gm, &cm);
  NEAR(gt, 150.0, 1e-15);
  NEAR(gm, 157.68, 1e-12);
  /* an inline Blackwell-like block without the figure: MXFP8 priced as per-tensor FP8 */
  char path[] = "/tmp/test_fp8_cluster_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  FILE *f = fdopen(fd, "w");
  CU_ASSERT_FATAL(f != NULL);
  fputs("{\"schema\": 1, \"name\": \"c\", \"gpu\": {\"name\": \"B200-like\", \"bf16_tflops\": 2250, "
        "\"fp8_tflops\": 4500, \"hbm_gib\": 180, \"hbm_gbps\": 8000, \"mxfp8\": true}, \"nodes\": 1, "
        "\"gpus_per_node\": 1, \"intra\": {\"kind\": \"nvswitch\", \"gbps_per_gpu\": 900, \"latency_us\": 2}}", f);
  fclose(f);
  int rc = load_plan(&mx, "{\"fp8\": \"mxfp8\"}", path, &e);
  unlink(path);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(mx.cluster.gpu.mxfp8_gemm_ratio, 0.0);
  fc1_us(&mx, &cal, &gm, &cm);
  NEAR(gm, 150.0, 1e-15);
  schema_calibration_free(&cal);
}

/* FP8 GEMMs in any operand layout (the B200's fp8_non_tn_gemm): TE's per-tensor FP8 tensors carry the rowwise
 * copy only, so a cast writes 1 byte an element, not 2 (tensorwise 2 + 2 + 1 = 5, delayed 2 + 1 = 3), and the
 * weights' FP8 copies are 1 byte a parameter (fp8_param_gather: the FP8 parameter itself, 1 - 2 = -1); MXFP8
 * keeps both copies (4 + 1/16; 2 + 1/16). The H200 (TN only): two copies for every recipe. */
static void test_non_tn_copies(void) {
  static plan p;
  ts_err e = {0};
  const struct { const char *layout, *cluster; double cast, weight; } rows[] = {
      {"{\"fp8\": \"tensorwise\"}", "b200x8-nvswitch", 5, 1},
      {"{\"fp8\": \"delayed\"}", "b200x8-nvswitch", 3, 1},
      {"{\"fp8\": \"delayed\", \"zero1\": true, \"fp8_param_gather\": true}", "b200x8-nvswitch", 3, -1},
      {"{\"fp8\": \"mxfp8\"}", "b200x8-nvswitch", 4 + 1.0 / 16, 2 + 1.0 / 16},
      {"{\"fp8\": \"mxfp8\", \"zero1\": true, \"fp8_param_gather\": true}", "b200x8-nvswitch", 4 + 1.0 / 16, 1.0 / 16},
      {"{\"fp8\": \"tensorwise\"}", NULL, 6, 2},
      {"{\"fp8\": \"delayed\"}", NULL, 4, 2},
      {"{\"fp8\": \"delayed\", \"zero1\": true, \"fp8_param_gather\": true}", NULL, 4, 0},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    CU_ASSERT_EQUAL_FATAL(load_plan(&p, rows[i].layout, rows[i].cluster, &e), 0);
    CU_ASSERT_EQUAL(p.cluster.gpu.fp8_non_tn_gemm, rows[i].cluster != NULL);
    NEAR(plan_fp8_cast_bytes(&p, 32.0), rows[i].cast * 32.0, 1e-15);
    NEAR(plan_fp8_weight_bytes_per_param(&p), rows[i].weight, 1e-15);
  }
}

/* The transfer on the memory side: m 16, n k 4,096 on the H200 (989 / 1,979 TFLOP/s, 4.8 TB/s). F = 5.37e8
 * FLOP: 0.54 us at the BF16 peak, but BF16 bytes 2 (mk + kn + mn) = 33,816,576 take 7.045 us; FP8 bytes
 * mk + kn + 2 mn = 16,908,288 take 3.5226 us (> F / FP8 peak, 0.27 us): 10 us becomes 10 x 3.5226 / 7.045. */
static void test_transfer_memory_bound(void) {
  static plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, NULL, NULL, &e), 0);
  const topo_gpu *g = &p.cluster.gpu;
  CU_ASSERT_EQUAL(g->hbm_gbps, 4800);
  const double b16 = 2.0 * (16.0 * 4096 + 4096.0 * 4096 + 16.0 * 4096), b8 = 16.0 * 4096 + 4096.0 * 4096 + 2 * 16.0 * 4096;
  NEAR(sim_gemm_fp8_transfer_us(g, 16, 4096, 4096, 10.0), 10.0 * b8 / b16, 1e-12);
  /* compute-bound on both sides: the peaks' ratio */
  NEAR(sim_gemm_fp8_transfer_us(g, 8192, 8192, 8192, 1000.0), 1000.0 * 989.0 / 1979.0, 1e-12);
}

/* "gemm_fp8" in a file: loaded, sorted like "gemm", written back; exact shapes, the interpolation between two
 * points in m, the FP8 / BF16 ratio at the nearest m. */
static void test_calibration_list(void) {
  const char *text = "{\"schema\":1,\"gpu\":\"NVIDIA H200\",\"driver\":\"d\",\"cuda\":\"13.0\",\"nccl\":\"2\","
                     "\"transport\":\"nvlink\",\"measured_at\":\"t\","
                     "\"gemm\":[{\"m\":4096,\"n\":8192,\"k\":2048,\"us\":100}],"
                     "\"gemm_fp8\":[{\"m\":8192,\"n\":8192,\"k\":2048,\"us\":110},{\"m\":4096,\"n\":8192,\"k\":2048,\"us\":60}]}";
  const char *path = "test_fp8_cal.json";
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
  schema_calibration a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(path, &a, &e), 0);
  CU_ASSERT_EQUAL(a.n_gemm_fp8, 2);
  CU_ASSERT_EQUAL(a.gemm_fp8[0].m, 4096);
  double us;
  CU_ASSERT_EQUAL(schema_gemm_fp8_us(&a, 8192, 8192, 2048, &us), 1);
  NEAR(us, 110, 0);
  CU_ASSERT_EQUAL(schema_gemm_fp8_us(&a, 6144, 8192, 2048, &us), 0);
  /* a shape the list lacks: the FP8 / BF16 ratio at the nearest m of the same (n, k) that "gemm" also holds
   * (8192 is nearer to 6144 but has no BF16 point: 4096's 60 / 100), within a factor 4 in m */
  double r;
  long long at;
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 6144, 8192, 2048, 4.0, &r, &at), 1);
  NEAR(r, 0.6, 1e-15);
  CU_ASSERT_EQUAL(at, 4096);
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 16384, 8192, 2048, 4.0, &r, &at), 1); /* 4x: still in */
  CU_ASSERT_EQUAL(at, 4096);
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 1024, 8192, 2048, 4.0, &r, &at), 1); /* from below: 4096 / 4 */
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 32768, 8192, 2048, 4.0, &r, &at), 0); /* 4096 is 8x away */
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 1000, 8192, 2048, 4.0, &r, &at), 0);
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 4096, 8192, 4096, 4.0, &r, &at), 1); /* k 2x: along k, same (m, n) */
  NEAR(r, 0.6, 1e-15);
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 4096, 8192, 16384, 4.0, &r, &at), 0); /* k 8x away */
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 2048, 8192, 4096, 4.0, &r, &at), 0); /* another m and k */
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&a, 4096, 4096, 2048, 4.0, &r, &at), 0); /* another n */
  /* an m between two points of (n, k): log(time) interpolated against log(m) between them, 6,144 between 4,096
   * (60 us) and 8,192 (110 us): 60 x (110 / 60)^(ln 1.5 / ln 2) = 85.54 us; the points themselves, m outside
   * them and another (n, k) are not between */
  const double between = 60.0 * pow(110.0 / 60.0, log(1.5) / log(2.0));
  long long lo_m = 0, hi_m = 0;
  CU_ASSERT_EQUAL(schema_gemm_fp8_between_us(&a, 6144, 8192, 2048, &us, &lo_m, &hi_m), 1);
  NEAR(us, between, 1e-12);
  CU_ASSERT(us > 85.5 && us < 85.6);
  CU_ASSERT_EQUAL(lo_m, 4096);
  CU_ASSERT_EQUAL(hi_m, 8192);
  CU_ASSERT_EQUAL(schema_gemm_fp8_between_us(&a, 4096, 8192, 2048, &us, &lo_m, &hi_m), 0);
  CU_ASSERT_EQUAL(schema_gemm_fp8_between_us(&a, 8192, 8192, 2048, &us, &lo_m, &hi_m), 0);
  CU_ASSERT_EQUAL(schema_gemm_fp8_between_us(&a, 2048, 8192, 2048, &us, &lo_m, &hi_m), 0);
  CU_ASSERT_EQUAL(schema_gemm_fp8_between_us(&a, 16384, 8192, 2048, &us, &lo_m, &hi_m), 0);
  CU_ASSERT_EQUAL(schema_gemm_fp8_between_us(&a, 6144, 8192, 4096, &us, &lo_m, &hi_m), 0);
  CU_ASSERT_EQUAL(schema_gemm_fp8_between_us(&a, 6144, 4096, 2048, &us, &lo_m, &hi_m), 0);
  /* the simulator's price: a bracketed m interpolated; a weight gradient there, or an m outside the points,
   * BF16 time x the ratio at the nearest m; else the datasheet transfer */
  static plan p;
  sim_fp8_rule rule;
  CU_ASSERT_EQUAL_FATAL(load_plan(&p, NULL, NULL, &e), 0);
  NEAR(sim_gemm_fp8_unmeasured_us(&a, &p.cluster.gpu, 6144, 8192, 2048, false, 50.0, &rule, &at), between, 1e-12);
  CU_ASSERT_EQUAL(rule, SIM_FP8_BETWEEN);
  CU_ASSERT_EQUAL(at, 0);
  NEAR(sim_gemm_fp8_unmeasured_us(&a, &p.cluster.gpu, 6144, 8192, 2048, true, 50.0, &rule, &at), 30.0, 1e-12);
  CU_ASSERT_EQUAL(rule, SIM_FP8_RATIO);
  CU_ASSERT_EQUAL(at, 4096);
  NEAR(sim_gemm_fp8_unmeasured_us(&a, &p.cluster.gpu, 16384, 8192, 2048, false, 50.0, &rule, &at), 30.0, 1e-12);
  CU_ASSERT_EQUAL(rule, SIM_FP8_RATIO);
  CU_ASSERT_EQUAL(at, 4096);
  NEAR(sim_gemm_fp8_unmeasured_us(&a, &p.cluster.gpu, 32768, 8192, 2048, false, 50.0, &rule, &at),
       sim_gemm_fp8_transfer_us(&p.cluster.gpu, 32768, 8192, 2048, 50.0), 1e-12);
  CU_ASSERT_EQUAL(rule, SIM_FP8_TRANSFER);
  CU_ASSERT_EQUAL(at, 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_save(&a, path, &e), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(path, &b, &e), 0);
  CU_ASSERT_EQUAL(b.n_gemm_fp8, 2);
  CU_ASSERT_EQUAL(schema_gemm_fp8_us(&b, 4096, 8192, 2048, &us), 1);
  NEAR(us, 60, 0);
  schema_calibration_free(&a);
  schema_calibration_free(&b);
  remove(path);
}

/* Memory: weights + 2 bytes per parameter of the four GEMMs (FP8 rowwise and columnwise copies), 0 with
 * fp8_param_gather; activations: the norm outputs and fc2's input 1 byte an element less, attn_out's input
 * 1 more, per layer and micro-batch held. */
static void test_memory(void) {
  static plan bf16, fp8, gather;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_plan(&bf16, "{\"zero1\": true}", NULL, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load_plan(&fp8, "{\"zero1\": true, \"fp8\": \"tensorwise\"}", NULL, &e), 0);
  CU_ASSERT_EQUAL_FATAL(load_plan(&gather, "{\"zero1\": true, \"fp8\": \"tensorwise\", \"fp8_param_gather\": true}",
                                  NULL, &e), 0);
  plan_memory a, b, c;
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&bf16, 0, &a), 0);
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&fp8, 0, &b), 0);
  CU_ASSERT_EQUAL_FATAL(plan_memory_of_stage(&gather, 0, &c), 0);
  const double h = 4096, f = 16384, L = 8, m = 4096;
  const double gemm_params = (3 * h * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h); /* with biases */
  NEAR(b.weights - a.weights, 2.0 * gemm_params * L, 1e-12);
  NEAR(c.weights, a.weights, 1e-15);
  const double per_layer = -(m * h) + (m * h) - (m * h) - (m * f); /* qkv, attn_out, fc1, fc2 inputs */
  const double held = (b.activations - a.activations) / (per_layer * L);
  CU_ASSERT(held >= 1.0 && fabs(held - round(held)) < 1e-9); /* whole micro-batches of layers held */
  NEAR(c.activations, b.activations, 1e-15);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("fp8", NULL, NULL);
  CU_add_test(s, "layout.fp8 and fp8_param_gather: accepted, refused naming the field", test_loader);
  CU_add_test(s, "the four linear GEMMs in FP8, TE's casts before them", test_program);
  CU_add_test(s, "sequence parallelism: the local rows quantized before the FP8 gather, the transpose after, by hand",
              test_sp_casts);
  CU_add_test(s, "an FP8 GEMM transferred from BF16 and a cast, by hand; a gemm_fp8 point wins", test_costs_by_hand);
  CU_add_test(s, "MXFP8 GEMMs: the per-tensor price times the catalogue's measured ratio", test_mxfp8_gemm_ratio);
  CU_add_test(s, "per-tensor FP8 on a GPU with any-layout FP8 GEMMs: one FP8 copy", test_non_tn_copies);
  CU_add_test(s, "the transfer on the memory side", test_transfer_memory_bound);
  CU_add_test(s, "gemm_fp8 loaded, sorted, written, exact shapes", test_calibration_list);
  CU_add_test(s, "memory with FP8 weights and activations", test_memory);
  CU_add_test(s, "SP all-gathers and parameter all-gathers in FP8, by hand per recipe", test_communication);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

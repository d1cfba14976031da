/* test_infer.c — inference plans: loader rules and malformed files, the KV
 * cache and wire-byte formulas, a hand-computable prediction (a calibration
 * of constant costs), and the codec policy (plain NCCL where the codec is
 * slower). */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <dirent.h>
#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_infer.h"
#include "test_power_section.h"
#include "sim_infer.h"
#include "test_check.h"

static plan_infer g_plan;

/* A plan text with the given pieces (each a JSON fragment). */
static void plan_text(char *out, size_t cap, const char *layout, const char *batch, const char *extra) {
  snprintf(out, cap,
           "{\"schema\":1,\"kind\":\"inference\",\"model\":\"llama3-8b\",\"cluster\":\"h200x2-nvlink\","
           "\"layout\":%s,\"batch\":%s%s%s}",
           layout, batch, extra[0] ? "," : "", extra);
}

static int load_text(const char *text, ts_err *e) {
  return plan_infer_from_json_text(text, strlen(text), "p.json", NULL, NULL, &g_plan, e);
}

static void test_valid_loads(void) {
  char t[1024];
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":4,\"prompt\":128,\"generate\":16}",
            "\"kv_cache\":\"fp8\",\"codec\":{\"kind\":\"taco+caat\",\"group\":64,\"fp8\":\"e5m2\",\"p\":0.25}");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  CU_ASSERT_EQUAL(g_plan.tp, 2);
  CU_ASSERT_EQUAL(g_plan.pp, 1);
  CU_ASSERT_EQUAL(g_plan.batch, 4);
  CU_ASSERT_EQUAL(g_plan.kv, PLAN_KV_FP8);
  CU_ASSERT_EQUAL(g_plan.codec.kind, PLAN_CODEC_TACO_CAAT);
  CU_ASSERT_EQUAL(g_plan.codec.group, 64);
  CU_ASSERT_TRUE(g_plan.codec_auto);
  CU_ASSERT_EQUAL(g_plan.codec_min_bytes, 0.0);
  CU_ASSERT_STRING_EQUAL(g_plan.name, "p");
}

/* Each malformed plan is rejected as bad input, naming the field. */
static void test_malformed_rejected(void) {
  static const struct {
    const char *layout, *batch, *extra, *field;
  } cases[] = {
      {"{\"tp\":3}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "", "layout.tp"},   /* heads */
      {"{\"tp\":4}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "", "layout.tp"},   /* 2 GPUs per node */
      {"{\"tp\":2,\"pp\":3}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "", "layout.pp"},
      {"{\"tp\":2,\"dp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "", "layout.dp"},
      {"{\"pp\":1}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "", "layout.tp"},
      {"{\"tp\":2}", "{\"size\":0,\"prompt\":8,\"generate\":8}", "", "batch.size"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8}", "", "batch.generate"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8000,\"generate\":8000}", "", "batch.generate"},
      {"{\"tp\":2}", "{\"size\":4096,\"prompt\":4096,\"generate\":4096}", "", "batch.size"}, /* KV > HBM */
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8,\"micro\":1}", "", "batch.micro"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"kv_cache\":\"int4\"", "kv_cache"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"bogus\":1", "bogus"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"codec\":{\"kind\":\"zip\"}", "codec.kind"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}",
       "\"codec\":{\"kind\":\"taco\",\"group\":100,\"fp8\":\"e4m3\"}", "codec.group"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"codec\":{\"kind\":\"taco\",\"p\":0.5}",
       "codec.group"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"codec\":{\"kind\":\"caat\",\"p\":0}", "codec.p"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"codec\":{\"kind\":\"caat\",\"p\":1.5}", "codec.p"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"codec\":{\"kind\":\"none\",\"p\":0.5}",
       "codec.p"},
      {"{\"tp\":1}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"codec\":{\"kind\":\"caat\",\"p\":0.5}",
       "codec.kind"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"codec_min_bytes\":-1", "codec_min_bytes"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"codec_auto\":1", "codec_auto"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"model\":\"no-such-model\"", "model"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"decode_attention\":\"per-head\"",
       "decode_attention"},
      {"{\"tp\":2}", "{\"size\":1,\"prompt\":8,\"generate\":8}", "\"decode_attention\":1", "decode_attention"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char t[1024];
    plan_text(t, sizeof t, cases[i].layout, cases[i].batch, cases[i].extra);
    /* a later duplicate "model" key wins in jansson: the no-such-model case */
    ts_err e = {0};
    int rc = load_text(t, &e);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_EQUAL(e.bad_input, 1);
    if (!strstr(e.msg, cases[i].field)) fprintf(stderr, "case %zu: \"%s\" does not name %s\n", i, e.msg, cases[i].field);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].field));
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "p.json"));
  }
  /* not JSON, no kind, another kind */
  const char *bad[] = {"{", "{\"schema\":1,\"model\":\"llama3-8b\"}", "{\"schema\":1,\"kind\":\"training\"}"};
  for (size_t i = 0; i < 3; i++) {
    ts_err e = {0};
    CU_ASSERT_EQUAL(load_text(bad[i], &e), -1);
    CU_ASSERT_EQUAL(e.bad_input, 1);
  }
}

/* KV cache = 2 x layers/pp x batch x tokens x kv_heads/tp x head_dim x element bytes. */
static void test_kv_cache_formula(void) {
  char t[1024];
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":3,\"prompt\":100,\"generate\":28}", "");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  const model_config *m = &g_plan.model;
  double want = 2.0 * m->layers * 3 * 128 * (m->kv_heads / 2) * (m->hidden / m->heads) * 2.0;
  NEAR(plan_infer_kv_bytes(&g_plan, 128), want, 1e-12);
  plan_infer_memory mem;
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&g_plan, &mem), 0);
  NEAR(mem.kv_cache, want, 1e-12);
  NEAR(mem.total, mem.weights + mem.kv_cache + mem.activations + mem.overhead, 1e-12);
  /* weights: bf16 parameters, half of the model (plus padding) on each of 2 GPUs */
  CU_ASSERT(mem.weights > model_params_total(m) && mem.weights < 1.05 * model_params_total(m));
  g_plan.kv = PLAN_KV_FP8;
  /* E4M3 codes and one FP32 scale per head vector of K and of V */
  double d = m->hidden / m->heads;
  NEAR(plan_infer_kv_bytes(&g_plan, 128), want / 2 * (1 + 4 / d), 1e-12);
}

/* The decode read floor (plan_infer_decode_floor_bytes) by hand: Llama-3 8B (hidden 4,096, 32 query and 8 KV heads
 * of 128, FFN 14,336, vocabulary 128,256, 32 layers, RMSNorm, SwiGLU, no bias) at TP 2, batch 3, prompt 100,
 * generate 27:
 * - a layer's linear weights 4096 x (32 + 16) x 128 + 4096 x 4096 + 3 x 4096 x 14336 = 218,103,808, half a GPU,
 *   and two norms of 4,096: 32 x (109,051,904 + 8,192) = 3,489,923,072; the final norm 4,096 and half the head
 *   128,256 x 4,096 / 2 = 262,668,288; at 2 bytes 7,505,190,912;
 * - the KV cache at 100 + 27 / 2 = 113.5 positions: 2 x 32 layers x 4 KV heads x 128 x 2 bytes x 3 x 113.5
 *   = 22,315,008 bytes; the FP8 cache 1 + 4 / 128 bytes an element instead of 2.
 * - FP8 weights: the 3,489,660,928 linear parameters at 1 byte, the 262,934,528 others (norms, head) at 2:
 *   4,015,529,984 bytes; NVFP4: 0.5625 bytes a linear parameter, 2,488,803,328.
 * experiments/infer/floor.py counts the same (tests/infer_floor_c.sh compares the two on the shipped plans).
 * An MoE model is refused, naming the model and the field. */
static void test_decode_floor(void) {
  char t[1024];
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":3,\"prompt\":100,\"generate\":27}", "");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  double w = 0, kv = 0;
  CU_ASSERT_EQUAL_FATAL(plan_infer_decode_floor_bytes(&g_plan, &w, &kv, &e), 0);
  NEAR(w, 7505190912.0, 1e-12);
  NEAR(kv, 22315008.0, 1e-12);
  g_plan.kv = PLAN_KV_FP8;
  CU_ASSERT_EQUAL_FATAL(plan_infer_decode_floor_bytes(&g_plan, &w, &kv, &e), 0);
  NEAR(kv, 22315008.0 / 2 * (1 + 4.0 / 128), 1e-12);
  g_plan.quant = PLAN_QUANT_FP8;
  CU_ASSERT_EQUAL_FATAL(plan_infer_decode_floor_bytes(&g_plan, &w, &kv, &e), 0);
  NEAR(w, 4015529984.0, 1e-12);
  g_plan.quant = PLAN_QUANT_NVFP4;
  CU_ASSERT_EQUAL_FATAL(plan_infer_decode_floor_bytes(&g_plan, &w, &kv, &e), 0);
  NEAR(w, 2488803328.0, 1e-12);
  const char *moe = "{\"schema\":1,\"kind\":\"inference\",\"model\":\"mixtral-8x7b\",\"cluster\":\"h200x2-nvlink\","
                    "\"layout\":{\"tp\":2},\"batch\":{\"size\":1,\"prompt\":128,\"generate\":16}}";
  CU_ASSERT_EQUAL_FATAL(load_text(moe, &e), 0);
  CU_ASSERT_EQUAL(plan_infer_decode_floor_bytes(&g_plan, &w, &kv, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mixtral-8x7b"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "model"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "p.json"));
}

/* The executor's buffers (plan_infer.h) by hand: Llama-3 8B at TP 2 (16 query heads, 4 KV heads, head dim 128,
 * FFN 7,168 and vocabulary 64,128 a GPU), batch 3, prompt 100, generate 28, on H200s (132 SMs), BF16 cache:
 * - prefill of T = 300 tokens: 2 x 300 x (3 x 4096 + (16 + 8) x 128 + 3 x 16 x 128 + 3 x 7168) + 4 x 300
 *   = 2 x 300 x 43,008 + 1,200 = 25,806,000;
 * - scores: a head 2 x 100^2 = 20,000 B; a group of 4 heads fits 1 GiB many times, capped at every head of
 *   every sequence: 20,000 x 16 x 3 = 960,000;
 * - decode partials: min(ceil(8 x 132 / 12), ceil(128 / 64)) = 2 splits, 3 x 16 x 2 x 130 x 4 = 49,920;
 * - last rows, normed rows, logits, gathered logits: 2 x (2 x 3 x 4096 + 3 x 64128 + 3 x 64128 x 2) = 1,203,456;
 * in all 28,019,376 bytes; the runtime 1.09 GiB + 32 MiB and one NVLink communicator 0.28 GiB. A plan
 * naming a fused prefill attention counts no executor buffers. */
static void test_executor_buffers(void) {
  char t[1024];
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":3,\"prompt\":100,\"generate\":28}", "");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  CU_ASSERT_EQUAL_FATAL(g_plan.cluster.gpu.sms, 132);
  plan_infer_memory mem;
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&g_plan, &mem), 0);
  NEAR(mem.activations, 28019376.0, 1e-12);
  NEAR(mem.overhead, 1.37 * 1073741824.0 + 33554432.0, 1e-12);
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":3,\"prompt\":100,\"generate\":28}", "\"prefill_attention\":\"flash\"");
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  CU_ASSERT_EQUAL_FATAL(plan_infer_memory_per_gpu(&g_plan, &mem), 0);
  CU_ASSERT_EQUAL(mem.activations, 0);
}

static void test_codec_wire_bytes(void) {
  plan_codec none = {.kind = PLAN_CODEC_NONE}, taco = {.kind = PLAN_CODEC_TACO, .group = 128};
  plan_codec caat = {.kind = PLAN_CODEC_CAAT, .p = 0.3}, both = {.kind = PLAN_CODEC_TACO_CAAT, .group = 64, .p = 0.5};
  int h = 4096;
  double bytes = 2.0 * 32 * h; /* one decode step of batch 32 */
  CU_ASSERT_EQUAL(plan_infer_wire_bytes(&none, bytes, h, 0), bytes);
  double n = bytes / 2;
  CU_ASSERT_EQUAL(plan_infer_wire_bytes(&taco, bytes, h, 0), n + 8 * ceil(n / 128));
  CU_ASSERT_EQUAL(plan_infer_wire_bytes(&caat, bytes, h, 0), bytes * floor(0.3 * h) / h);
  double shared = bytes * floor(0.5 * h) / h;
  CU_ASSERT_EQUAL(plan_infer_wire_bytes(&both, bytes, h, 0), shared / 2 + 8 * ceil(shared / 2 / 64));
  /* below codec_min_bytes TACO stays off; CAAT-Net still drops channels */
  CU_ASSERT_EQUAL(plan_infer_wire_bytes(&taco, bytes, h, bytes + 1), bytes);
  CU_ASSERT_EQUAL(plan_infer_wire_bytes(&both, bytes, h, bytes), shared);
}

/* ---- predictions on a calibration of constant costs ---- */
#define GEMM_US 7.0
#define KERNEL_US 1000.0 /* large, so decode attention's KV-read roofline never wins */
#define ALLREDUCE_US 50.0
#define ALLGATHER_US 30.0

static void constant_calibration(schema_calibration *c, double taco_us) {
  memset(c, 0, sizeof *c);
  snprintf(c->transport, sizeof c->transport, "nvlink");
  snprintf(c->gpu, sizeof c->gpu, "test");
  /* One GEMM point, 1 x 1 x 1: no GEMM of a plan shares two dimensions with
   * it, so each is priced by the nearest shapes' efficiency: the list's
   * latency floor (GEMM_US less the point's roofline time, 6e-18 us under the
   * lifted ceilings) plus its own roofline time over the point's efficiency
   * (1: its time above the floor is its roofline time). Under lift_ceilings
   * a plan's GEMM has a roofline time under 1e-10 us: GEMM_US to 1e-11. */
  CU_ASSERT_EQUAL(schema_calibration_add_gemm(c, 1, 1, 1, GEMM_US), 0);
  const char *bytes_tables[] = {"norm", "elementwise", "embedding", "taco_encode", "taco_decode",
                                "taco_decode_sum_encode", "caat_gather", "caat_scatter"};
  for (size_t i = 0; i < sizeof bytes_tables / sizeof bytes_tables[0]; i++) {
    double us = i < 3 ? KERNEL_US : 0.001;
    int group = i >= 3 && i < 6 ? 128 : 0;
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, bytes_tables[i], false, 1, group, us), 0);
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, bytes_tables[i], false, 1e15, group, us), 0);
  }
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "attention", true, 1, 0, KERNEL_US), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "attention", true, 1e18, 0, KERNEL_US), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "argmax", false, 1, 0, KERNEL_US), 0); /* greedy sampling */
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(c, "argmax", false, 1e15, 0, KERNEL_US), 0);
  const char *colls[] = {"allreduce", "allgather", "sendrecv", "allreduce.taco128"};
  double us[] = {ALLREDUCE_US, ALLGATHER_US, 10.0, taco_us};
  for (int i = 0; i < 4; i++)
    for (int n = 2; n <= 8; n *= 4) { /* 2 and 8 ranks */
      CU_ASSERT_EQUAL(schema_calibration_add_coll(c, colls[i], n, 1, us[i]), 0);
      CU_ASSERT_EQUAL(schema_calibration_add_coll(c, colls[i], n, 1e15, us[i]), 0);
    }
  schema_calibration_sort(c);
}

/* One forward pass: per layer its GEMMs, its other kernels, attention and two
 * all-reduces; plus the embedding (kernel + all-reduce), the final norm, the
 * logits GEMM, the logits all-gather and the greedy sampling (argmax). */
static double hand_forward_s(const plan_infer *p, double allreduce_us) {
  model_shard sh = {p->tp, false, p->batch, 1};
  model_op ops[MODEL_MAX_LAYER_OPS];
  ts_err e;
  int n = model_layer_ops(&p->model, &sh, ops, MODEL_MAX_LAYER_OPS, &e);
  CU_ASSERT_FATAL(n > 0);
  double layer_us = 2 * allreduce_us;
  for (int i = 0; i < n; i++) layer_us += ops[i].kind == MODEL_OP_GEMM ? GEMM_US : KERNEL_US;
  double ends_us = KERNEL_US + ALLREDUCE_US + KERNEL_US + GEMM_US + ALLGATHER_US + KERNEL_US;
  return (p->model.layers * layer_us + ends_us) * 1e-6;
}

/* With no prefill attention table the prefill prices the executor's unfused
 * program: two GEMMs (Q K^T, P V) and the softmax kernel, where the forward
 * of hand_forward_s counts one kernel: two GEMMs more per layer. */
static double hand_prefill_attention_extra_s(const plan_infer *p) { return p->model.layers * 2 * GEMM_US * 1e-6; }

/* The constant calibration prices every GEMM and kernel at one time whatever
 * its size, which a real H200 could not beat only for small ops: lift the
 * GPU's ceilings so the simulator's ceiling check (sim/README.md) leaves these
 * hand-computed sums alone. */
static void lift_ceilings(void) {
  g_plan.cluster.gpu.bf16_tflops = 1e15;
  g_plan.cluster.gpu.hbm_gbps = 1e15;
}

static void load_small_plan(const char *codec) {
  char t[1024], extra[256];
  snprintf(extra, sizeof extra, "\"codec\":%s", codec);
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":2,\"prompt\":64,\"generate\":9}", extra);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  lift_ceilings();
}

/* The small plan without a codec, predicted on the constant calibration (*cal: free it). */
static void predict_small_constant(schema_calibration *cal, sim_infer_result *r) {
  load_small_plan("{\"kind\":\"none\"}");
  constant_calibration(cal, 20.0);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, cal, NULL, NULL, r, &e), 0);
}

static void test_hand_computed_prediction(void) {
  schema_calibration cal;
  sim_infer_result r;
  predict_small_constant(&cal, &r);
  double fwd = hand_forward_s(&g_plan, ALLREDUCE_US);
  /* no prefill attention table: the executor's unfused program, Q K^T and P V GEMMs and the softmax kernel */
  NEAR(r.ttft_s, fwd + hand_prefill_attention_extra_s(&g_plan), 1e-9);
  NEAR(r.tpot_s, fwd, 1e-9);
  NEAR(r.total_s, r.ttft_s + 8 * r.tpot_s, 1e-12);
  NEAR(r.tokens_per_s, 2.0 * 9 / r.total_s, 1e-12);
  NEAR(r.prefill.tp_s, (g_plan.model.layers * 2 * ALLREDUCE_US + ALLREDUCE_US + ALLGATHER_US) * 1e-6, 1e-9);
  CU_ASSERT_EQUAL(r.n_choices, 0);
  NEAR(r.plain_ttft_s, r.ttft_s, 1e-12);
  schema_calibration_free(&cal);
}

static const sim_infer_op_cost *op_named(const sim_infer_op_costs *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (!strcmp(l->op[i].name, name)) return &l->op[i];
  return NULL;
}

/* tacosim ops on an inference plan (sim_infer_result.ops): each phase's op list sums to its figure, and on the
 * constant calibration each op is its hand price: a GEMM GEMM_US and a kernel KERNEL_US a launch, once a layer; the
 * layer all-reduce twice a layer; the ends once. */
static void test_op_lists_by_hand(void) {
  schema_calibration cal;
  sim_infer_result r;
  predict_small_constant(&cal, &r);
  const int L = g_plan.model.layers;
  for (int ph = 0; ph < 2; ph++) {
    double sum = 0;
    for (int i = 0; i < r.ops[ph].n; i++) sum += r.ops[ph].op[i].s;
    NEAR(sum, ph ? r.tpot_s : r.ttft_s, 1e-12);
  }
  const sim_infer_op_cost *qkv = op_named(&r.ops[1], "qkv"), *ln1 = op_named(&r.ops[1], "ln1"),
                          *ar = op_named(&r.ops[0], "allreduce"), *lg = op_named(&r.ops[1], "logits"),
                          *ag = op_named(&r.ops[1], "logits.allgather"), *emb = op_named(&r.ops[0], "embedding"),
                          *attn = op_named(&r.ops[0], "attn");
  CU_ASSERT_PTR_NOT_NULL_FATAL(qkv);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ln1);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ar);
  CU_ASSERT_PTR_NOT_NULL_FATAL(lg);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ag);
  CU_ASSERT_PTR_NOT_NULL_FATAL(emb);
  CU_ASSERT_PTR_NOT_NULL_FATAL(attn);
  CU_ASSERT_EQUAL(qkv->count, L);
  NEAR(qkv->s, L * GEMM_US * 1e-6, 1e-12);
  NEAR(ln1->s, L * KERNEL_US * 1e-6, 1e-12);
  CU_ASSERT_EQUAL(ar->count, 2 * L);
  NEAR(ar->s, 2 * L * ALLREDUCE_US * 1e-6, 1e-12);
  CU_ASSERT_EQUAL(lg->count, 1);
  NEAR(lg->s, GEMM_US * 1e-6, 1e-12);
  NEAR(ag->s, ALLGATHER_US * 1e-6, 1e-12);
  CU_ASSERT_EQUAL(emb->count, 1);
  /* the prefill's attention: the executor's unfused program (two GEMMs and the softmax kernel a layer) */
  NEAR(attn->s, L * (2 * GEMM_US + KERNEL_US) * 1e-6, 1e-12);
  NEAR(attn->s, r.prefill.attention_s, 1e-12);
  schema_calibration_free(&cal);
}

/* Prefill attention keyed by head dimension and prompt length replaces the
 * unfused pricing; a decode-attention table faster than the HBM allows is a
 * simulator failure (exit 3), not a prediction. */
static void test_prefill_keyed_and_ceiling(void) {
  load_small_plan("{\"kind\":\"none\"}");
  schema_calibration cal;
  constant_calibration(&cal, 20.0);
  sim_infer_result base, keyed;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &base, &e), 0);
  char name[64];
  snprintf(name, sizeof name, "attention_prefill.d%d.s64", model_head_dim(&g_plan.model));
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, name, true, 1, 0, 123.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, name, true, 1e18, 0, 123.0), 0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &keyed, &e), 0);
  NEAR(keyed.ttft_s - base.ttft_s, g_plan.model.layers * (123.0 - 2 * GEMM_US - KERNEL_US) * 1e-6, 1e-9);
  NEAR(keyed.tpot_s, base.tpot_s, 1e-12);
  schema_calibration_free(&cal);
  /* on the real H200 ceilings: a KV-cache read at 1e6 TB/s is impossible */
  char t[1024];
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":8,\"prompt\":2048,\"generate\":4}", "");
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(CALIBRATION_DIR "/h200-nvlink.json", &cal, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &base, &e), 0);
  for (int i = 0; i < cal.n_kernels; i++) /* the plain table and those of the head layouts ("attention_decode.g4") */
    if (!strcmp(cal.kernels[i].name, "attention_decode") || !strncmp(cal.kernels[i].name, "attention_decode.", 17))
      for (int k = 0; k < cal.kernels[i].n; k++) cal.kernels[i].pts[k].us = cal.kernels[i].pts[k].x / 1e18 * 1e6;
  CU_ASSERT_EQUAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &base, &e), -1);
  CU_ASSERT(strncmp(e.msg, TS_SIM_FAILURE_PREFIX, strlen(TS_SIM_FAILURE_PREFIX)) == 0);
  CU_ASSERT(strstr(e.msg, "decode attention") != NULL);
  schema_calibration_free(&cal);
}

/* The "attention_prefill" tables are held to the bytes of the executor's unfused program
 * (model_prefill_attention_bytes: its s x s scores written, read and written by the softmax, read again), not
 * only to its Q, K, V and O. Llama-3 8B at TP 2, 8 x 2,048 tokens: 128 query heads of 2,048 tokens, 4 per KV
 * head, 2 x (128 x (4 x 2,048^2 + 4 x 2,048 x 128) + 32 x 2 x 2,048 x 128) = 4,596,957,184 bytes, 957.7 us at
 * the H200's 4,800 GB/s. The keyed table at half the program's memory time at each of its points is refused
 * on the H200's ceilings (exit 3, naming prefill attention); the FLOP-keyed table of the same points, which
 * averages prompt lengths and is moved to another GPU by its FLOPs alone, is priced at the op's roofline
 * instead: a launch (3 us) + those bytes at the HBM rate (memory-bound: its 2.75e11 FLOPs take 278 us). */
static void test_prefill_tables_hold_program_bytes(void) {
  char t[1024];
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":8,\"prompt\":2048,\"generate\":4}", "");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  const double bytes = model_prefill_attention_bytes(128, 2048, 128, 4), bw = g_plan.cluster.gpu.hbm_gbps * 1e9;
  NEAR(bytes, 4596957184.0, 0);
  NEAR(bw, 4800e9, 0);
  schema_calibration cal;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(CALIBRATION_DIR "/h200-nvlink.json", &cal, &e), 0);
  schema_kernel_table *k = NULL;
  for (int i = 0; i < cal.n_kernels; i++)
    if (!strcmp(cal.kernels[i].name, "attention_prefill.d128.s2048")) k = &cal.kernels[i];
  CU_ASSERT_PTR_NOT_NULL_FATAL(k);
  CU_ASSERT_FATAL(!schema_has_kernel(&cal, "attention_prefill"));
  for (int i = 0; i < k->n; i++) k->pts[i].us = 0.5 * model_prefill_attention_bytes_at(128, 2048, k->pts[i].x, 4) / bw * 1e6;
  const sim_infer_opts o = {.prefill_clock_off = true, .prefill_power_off = true}; /* the tables as priced */
  sim_infer_result r;
  CU_ASSERT_EQUAL(sim_infer_predict(&g_plan, &cal, &o, NULL, &r, &e), -1);
  CU_ASSERT(strncmp(e.msg, TS_SIM_FAILURE_PREFIX, strlen(TS_SIM_FAILURE_PREFIX)) == 0);
  ASSERT_MSG(e, "prefill attention");
  snprintf(k->name, sizeof k->name, "attention_prefill");
  e = (ts_err){0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &o, NULL, &r, &e), 0);
  const int layers = g_plan.model.layers / g_plan.pp;
  NEAR(r.prefill.attention_s, layers * (3.0 + bytes / bw * 1e6) * 1e-6, 1e-12);
  schema_calibration_free(&cal);
}

/* The prefill clock: schema_burst_advance by hand over two bins with a gap;
 * a profile of speed 2 everywhere halves the prefill's GEMMs and attention
 * (compute-bound by the roofline; the memory-bound kernels and the
 * all-reduces keep their price) in every timed prefill; one that ends before
 * the warm-up does changes nothing; so do --prefill-clock off and a roofline
 * under which every op is memory-bound; TPOT never moves. */
static void test_prefill_clock(void) {
  schema_calibration cal;
  constant_calibration(&cal, 20.0);
  cal.n_burst = 2;
  cal.burst[0] = (schema_burst_bin){0, 10000, 2.0};
  cal.burst[1] = (schema_burst_bin){20000, 30000, 1.5};
  NEAR(schema_burst_advance(&cal, 0, 4e-3), 2e-3, 1e-12);
  NEAR(schema_burst_advance(&cal, 8e-3, 6e-3), 12e-3, 1e-12);         /* 4 ms of work by 10 ms, 2 ms at 1 */
  NEAR(schema_burst_advance(&cal, 15e-3, 10e-3), 20e-3 + 5e-3 / 1.5, 1e-12); /* the gap at 1, then 1.5 */
  NEAR(schema_burst_advance(&cal, 25e-3, 20e-3), 30e-3 + 12.5e-3, 1e-12);   /* 7.5 ms in the bin, the rest at 1 */
  NEAR(schema_burst_advance(&cal, 40e-3, 1e-3), 41e-3, 1e-12);
  cal.n_burst = 0;
  NEAR(schema_burst_advance(&cal, 1.0, 2.0), 3.0, 1e-12);

  load_small_plan("{\"kind\":\"none\"}");
  g_plan.cluster.gpu.hbm_gbps = 1e18; /* ridge 1 FLOP/B: every GEMM and the attention compute-bound, clocked */
  char name[64];
  snprintf(name, sizeof name, "attention_prefill.d%d.s64", model_head_dim(&g_plan.model));
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, name, true, 1, 0, 123.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, name, true, 1e18, 0, 123.0), 0);
  sim_infer_result base, fast, early, off;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &base, &e), 0);
  CU_ASSERT(!base.prefill_clock);
  model_shard sh = {g_plan.tp, false, g_plan.batch, g_plan.prompt};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&g_plan.model, &sh, ops, MODEL_MAX_LAYER_OPS, &e), gemms = 0;
  for (int i = 0; i < n; i++) gemms += ops[i].kind == MODEL_OP_GEMM;
  const double clocked_s = g_plan.model.layers * (gemms * GEMM_US + 123.0) * 1e-6;
  cal.n_burst = 1;
  cal.burst[0] = (schema_burst_bin){0, 1e9, 2.0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &fast, &e), 0);
  CU_ASSERT(fast.prefill_clock);
  NEAR(fast.ttft_s, base.ttft_s - clocked_s / 2, 1e-9);
  NEAR(fast.prefill_sustained_s, base.ttft_s, 1e-12);
  NEAR(fast.tpot_s, base.tpot_s, 1e-12);
  NEAR(fast.prefill.compute_s + fast.prefill.tp_s + fast.prefill.pp_s, fast.ttft_s, 1e-12);
  cal.burst[0] = (schema_burst_bin){0, 1.0, 2.0}; /* 1 us: inside the warm-up prefill */
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &early, &e), 0);
  NEAR(early.ttft_s, base.ttft_s, 1e-12);
  cal.burst[0] = (schema_burst_bin){0, 1e9, 2.0};
  sim_infer_opts o = {.prefill_clock_off = true};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &o, NULL, &off, &e), 0);
  NEAR(off.ttft_s, base.ttft_s, 1e-12);
  CU_ASSERT(!off.prefill_clock);
  /* ridge 1e9 FLOP/B: every op memory-bound by the roofline, none clocked (as the clock section's add) */
  g_plan.cluster.gpu.bf16_tflops = 1e15, g_plan.cluster.gpu.hbm_gbps = 1e6;
  sim_infer_result membound, membound_base;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &o, NULL, &membound_base, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &membound, &e), 0);
  CU_ASSERT(membound.prefill_clock);
  NEAR(membound.ttft_s, membound_base.ttft_s, 1e-12);
  schema_calibration_free(&cal);
}

/* The prefill clock tests' set-up: the small plan and the constant calibration with every GEMM and the attention
 * compute-bound (the keyed attention table at 123 us a layer); *base its prediction at the tables' speed; returns
 * the GEMMs' time of one prefill. */
#define PREFILL_ATTN_US 123.0
static double prefill_clock_setup(schema_calibration *cal, sim_infer_result *base) {
  constant_calibration(cal, 20.0);
  load_small_plan("{\"kind\":\"none\"}");
  g_plan.cluster.gpu.hbm_gbps = 1e18; /* every GEMM and the attention compute-bound */
  char name[64];
  snprintf(name, sizeof name, "attention_prefill.d%d.s64", model_head_dim(&g_plan.model));
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(cal, name, true, 1, 0, PREFILL_ATTN_US), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(cal, name, true, 1e18, 0, PREFILL_ATTN_US), 0);
  ts_err e = {0};
  CU_ASSERT_EQUAL(sim_infer_predict(&g_plan, cal, NULL, NULL, base, &e), 0);
  model_shard sh = {g_plan.tp, false, g_plan.batch, g_plan.prompt};
  model_op ops[MODEL_MAX_LAYER_OPS];
  int n = model_layer_ops(&g_plan.model, &sh, ops, MODEL_MAX_LAYER_OPS, &e), gemms = 0;
  for (int i = 0; i < n; i++) gemms += ops[i].kind == MODEL_OP_GEMM;
  return g_plan.model.layers * gemms * GEMM_US * 1e-6;
}

/* A prefill clock's result against the tables' (base): the sustained TTFT is base's, the phases sum to the TTFT,
 * TPOT does not move. */
static void check_prefill_clocked(const sim_infer_result *r, const sim_infer_result *base) {
  NEAR(r->prefill_sustained_s, base->ttft_s, 1e-12);
  NEAR(r->prefill.compute_s + r->prefill.tp_s + r->prefill.pp_s, r->ttft_s, 1e-12);
  NEAR(r->tpot_s, base->tpot_s, 1e-12);
}

/* The prefill under the power-cap model (a "power" section; sim/INFERENCE.md "The prefill clock"), on the
 * small plan and the constant calibration with every GEMM and the attention compute-bound: the memory-bound
 * kernels (1 ms each) dominate its time, so its GEMM share x is below 1/2 and the hand section
 * (test_power_section.h) runs it at f_max, 2,000 MHz (100 + (400 + 400 x) u^2 <= 700 at u = 1): the GEMMs
 * and attention at 2000 / 1732.05 = 2 / sqrt(3) of their tables' speed, the memory-bound kernels at
 * (2000 / 2000)^0.5 = 1. A burst profile of speed 2 is the GEMM back to back at 2 x 1,732 MHz, clamped to
 * 2,000 MHz: 200 W above the cap, which moves a prefill already at f_max no further; the duty model (no power
 * section, or --clock-model duty) halves the GEMMs as before; --clock-model off prices the tables. TPOT never
 * moves. */
static void test_prefill_power(void) {
  schema_calibration cal;
  sim_infer_result base, pw, pw_burst, duty_burst, off;
  const double clocked_s = prefill_clock_setup(&cal, &base) + g_plan.model.layers * PREFILL_ATTN_US * 1e-6;
  ts_err e = {0};
  test_power_section(&cal.power, &TEST_POWER_HAND);
  CU_ASSERT_EQUAL_FATAL(schema_power_fit_run(&cal.power, "hand", &e), 0);
  const sim_infer_opts no_burst = {.prefill_clock_off = true};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &no_burst, NULL, &pw, &e), 0);
  CU_ASSERT(pw.prefill_power);
  CU_ASSERT(!pw.prefill_clock);
  CU_ASSERT(pw.prefill_x_gemm > 0 && pw.prefill_x_gemm < 0.5);
  NEAR(pw.prefill_mhz, 2000, 1e-12);
  NEAR(pw.prefill_gemm_speed, 2 / sqrt(3), 1e-9);
  NEAR(pw.prefill_mem_speed, 1, 1e-12);
  NEAR(pw.ttft_s, base.ttft_s - clocked_s * (1 - sqrt(3) / 2), 1e-9);
  check_prefill_clocked(&pw, &base);
  cal.n_burst = 1;
  cal.burst[0] = (schema_burst_bin){0, 1e9, 2.0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &pw_burst, &e), 0);
  CU_ASSERT(pw_burst.prefill_power && pw_burst.prefill_clock);
  NEAR(pw_burst.ttft_s, pw.ttft_s, 1e-9); /* at f_max already */
  const sim_infer_opts duty = {.clock_model = SIM_CLOCK_MODEL_DUTY};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &duty, NULL, &duty_burst, &e), 0);
  CU_ASSERT(!duty_burst.prefill_power && duty_burst.prefill_clock);
  NEAR(duty_burst.ttft_s, base.ttft_s - clocked_s / 2, 1e-9);
  const sim_infer_opts none = {.clock_model = SIM_CLOCK_MODEL_OFF};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &none, NULL, &off, &e), 0);
  CU_ASSERT(!off.prefill_power && !off.prefill_clock);
  CU_ASSERT_EQUAL(off.ttft_s, base.ttft_s);
  /* A prefill of GEMMs alone (one GPU, no all-reduce; the memory-bound kernels made 1e-6 us): its mix is the
   * GEMM back to back, so it runs at the tables' speed, and a burst bin of 1.1 is the GEMM at 1.1 x 1,732 MHz
   * (P_gemm 826 W), the clock that extra power buys the same mix: the profile as measured, as the duty model
   * applies it (to the mix's 1e-6 share of memory-bound time). */
  {
    char t[1024];
    plan_text(t, sizeof t, "{\"tp\":1}", "{\"size\":2,\"prompt\":64,\"generate\":9}", "\"codec\":{\"kind\":\"none\"}");
    CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
    lift_ceilings();
    g_plan.cluster.gpu.hbm_gbps = 1e18;
    for (int k = 0; k < cal.n_kernels; k++)
      if (!cal.kernels[k].by_flops)
        for (int i = 0; i < cal.kernels[k].n; i++) cal.kernels[k].pts[i].us = 1e-6;
    sim_infer_result gemm_base, gemm_pw, gemm_duty, gemm_pw_burst;
    cal.n_burst = 0;
    CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &duty, NULL, &gemm_base, &e), 0);
    CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &gemm_pw, &e), 0);
    CU_ASSERT(gemm_pw.prefill_power && gemm_pw.prefill_x_gemm > 1 - 1e-6);
    NEAR(gemm_pw.prefill_mhz, 2000 * sqrt(0.75), 1e-6);
    NEAR(gemm_pw.ttft_s, gemm_base.ttft_s, 1e-6);
    cal.n_burst = 1;
    cal.burst[0] = (schema_burst_bin){0, 1e9, 1.1};
    CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &duty, NULL, &gemm_duty, &e), 0);
    CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &gemm_pw_burst, &e), 0);
    CU_ASSERT(gemm_duty.ttft_s < gemm_base.ttft_s);
    NEAR(gemm_pw_burst.ttft_s, gemm_duty.ttft_s, 1e-6);
  }
  /* --clock-model power without the section: refused naming it */
  memset(&cal.power, 0, sizeof cal.power);
  const sim_infer_opts power = {.clock_model = SIM_CLOCK_MODEL_POWER};
  sim_infer_result refused;
  memset(&e, 0, sizeof e);
  CU_ASSERT_EQUAL(sim_infer_predict(&g_plan, &cal, &power, NULL, &refused, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "power"));
  schema_calibration_free(&cal);
}

/* The prefill at one clock from its ops' power (an "op_power" section; sim/INFERENCE.md), on the same small plan
 * and constant calibration, every GEMM and the attention compute-bound. A hand section whose cap no mix reaches
 * runs the prefill at f_max, 2,000 MHz: the GEMMs' tables were timed at 1,000 MHz, so they run (2000 / 1000)^0.5 =
 * sqrt(2) faster; the attention's nearest row (its layout, timed at 2,000 MHz) and the memory-bound kernels at
 * their tables' speed. A burst bin of speed 2 adds nothing at f_max. --prefill-power off, --clock-model off: the
 * tables; a fitted "power" section takes precedence (the other model); TPOT never moves. Under a cap that binds,
 * the clock is between, each table moved from its own clock to it. */
static void test_prefill_op_power(void) {
  schema_calibration cal;
  sim_infer_result base, op, off, none, burst, capped;
  const double gemm_s = prefill_clock_setup(&cal, &base);
  ts_err e = {0};
  schema_op_power *p = &cal.op_power;
  *p = (schema_op_power){.cap_w = 1e4, .f_max_mhz = 2000, .idle_w = 100, .power_exponent = 1,
                         .speed_exponent = 0.5, .attention_speed_exponent = -1, .gemm_w = 700, .gemm_mhz = 1000,
                         .mem_w = 400, .mem_mhz = 2000, .n_attn = 1};
  p->attn[0] = (schema_op_power_attn){g_plan.model.heads / g_plan.tp, g_plan.model.kv_heads / g_plan.tp,
                                      model_head_dim(&g_plan.model), 1, 64, 650, 2000};
  const sim_infer_opts no_burst = {.prefill_clock_off = true};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &no_burst, NULL, &op, &e), 0);
  CU_ASSERT(op.prefill_op_power && !op.prefill_power && !op.prefill_clock);
  NEAR(op.prefill_mhz, 2000, 0);
  NEAR(op.prefill_gemm_speed, sqrt(2), 1e-12);
  NEAR(op.prefill_attn_speed, 1, 1e-12); /* its row was timed at f_max */
  NEAR(op.ttft_s, base.ttft_s - gemm_s * (1 - 1 / sqrt(2)), 1e-9);
  check_prefill_clocked(&op, &base);
  cal.n_burst = 1;
  cal.burst[0] = (schema_burst_bin){0, 1e9, 2.0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &burst, &e), 0);
  CU_ASSERT(burst.prefill_op_power && burst.prefill_clock);
  NEAR(burst.ttft_s, op.ttft_s, 1e-9);
  cal.n_burst = 0;
  const sim_infer_opts power_off = {.prefill_power_off = true}, model_off = {.clock_model = SIM_CLOCK_MODEL_OFF};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &power_off, NULL, &off, &e), 0);
  CU_ASSERT(!off.prefill_op_power);
  CU_ASSERT_EQUAL(off.ttft_s, base.ttft_s);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &model_off, NULL, &none, &e), 0);
  CU_ASSERT(!none.prefill_op_power);
  CU_ASSERT_EQUAL(none.ttft_s, base.ttft_s);
  /* a cap that binds: with the memory-bound kernels (98 % of the time) at 200 W, the mean is ~206 W at 1,000 MHz
   * and ~212 W at f_max; under 209 W the clock is between, and the GEMMs' speed that clock's, below sqrt(2) */
  p->cap_w = 209, p->mem_w = 200;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &no_burst, NULL, &capped, &e), 0);
  CU_ASSERT(capped.prefill_mhz > 1000 && capped.prefill_mhz < 2000);
  NEAR(capped.prefill_gemm_speed, sqrt(capped.prefill_mhz / 1000), 1e-12);
  NEAR(capped.prefill_attn_speed, sqrt(capped.prefill_mhz / 2000), 1e-12); /* the GEMMs' law from its row's clock */
  { /* the GEMMs faster than their tables (timed at 1,000 MHz), the attention slower than its (at 2,000) */
    const double f = capped.prefill_mhz, attn_s = g_plan.model.layers * PREFILL_ATTN_US * 1e-6;
    NEAR(capped.ttft_s, base.ttft_s - gemm_s * (1 - sqrt(1000 / f)) + attn_s * (sqrt(2000 / f) - 1), 1e-9);
  }
  /* the attention's own law where the section has one: at exponent 0 it keeps its table's time at any clock (the
   * clock moves too: less attention time at a lower clock, more GEMM share) */
  p->attention_speed_exponent = 0;
  sim_infer_result own;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &no_burst, NULL, &own, &e), 0);
  NEAR(own.ttft_s, base.ttft_s - gemm_s * (1 - sqrt(1000 / own.prefill_mhz)), 1e-9);
  NEAR(own.prefill_attn_speed, 1, 1e-12);
  p->attention_speed_exponent = -1;
  /* an engine's fused prefill attention: not the attention the section measured, the tables' speed */
  {
    sim_infer_result fused;
    g_plan.prefill_attention = PLAN_PREFILL_ATTN_FUSED;
    e = (ts_err){0};
    CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &no_burst, NULL, &fused, &e), 0);
    CU_ASSERT(!fused.prefill_op_power);
    g_plan.prefill_attention = PLAN_PREFILL_ATTN_EXECUTOR;
  }
  /* with a fitted "power" section, that model prices the prefill and op_power is not read */
  test_power_section(&cal.power, &TEST_POWER_HAND);
  CU_ASSERT_EQUAL_FATAL(schema_power_fit_run(&cal.power, "hand", &e), 0);
  sim_infer_result fitted;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &no_burst, NULL, &fitted, &e), 0);
  CU_ASSERT(fitted.prefill_power && !fitted.prefill_op_power);
  schema_calibration_free(&cal);
}

/* clock.burst in a calibration file: saved and loaded back; bins that
 * overlap, do not start at 0, have no width, a speed out of range or an
 * unknown key are refused naming the bin. */
static void test_burst_file(void) {
  char path[] = "/tmp/test_infer_burstXXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  schema_calibration cal, back;
  constant_calibration(&cal, 20.0);
  CU_ASSERT_EQUAL(schema_calibration_add_clock(&cal, 0.5, 4000, 1.15, 1.0), 0);
  cal.clock_window_us = 100000;
  snprintf(cal.driver, sizeof cal.driver, "1"), snprintf(cal.cuda, sizeof cal.cuda, "1");
  snprintf(cal.nccl, sizeof cal.nccl, "1"), snprintf(cal.measured_at, sizeof cal.measured_at, "2026-12-04T12:00:00Z");
  cal.n_burst = 2;
  cal.burst[0] = (schema_burst_bin){0, 5000, 1.2};
  cal.burst[1] = (schema_burst_bin){5000, 20000, 1.05};
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_save(&cal, path, &e), 0);
  int loaded = schema_calibration_load(path, &back, &e);
  if (loaded) fprintf(stderr, "burst file: %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(loaded, 0);
  CU_ASSERT_EQUAL(back.n_burst, 2);
  NEAR(back.burst[1].from_us, 5000.0, 1e-9);
  NEAR(back.burst[1].to_us, 20000.0, 1e-9);
  NEAR(back.burst[1].gemm_speed, 1.05, 1e-12);
  schema_calibration_free(&back);
  schema_calibration_free(&cal);
  json_t *good = json_load_file(path, 0, NULL);
  CU_ASSERT_FATAL(good != NULL);
  static const struct {
    const char *bins, *field;
  } bad[] = {
      {"[{\"from_us\":0,\"to_us\":10,\"gemm_speed\":1.1},{\"from_us\":5,\"to_us\":20,\"gemm_speed\":1}]", "clock.burst[1]"},
      {"[{\"from_us\":1,\"to_us\":10,\"gemm_speed\":1.1}]", "clock.burst[0]"},
      {"[{\"from_us\":0,\"to_us\":0,\"gemm_speed\":1.1}]", "clock.burst[0]"},
      {"[{\"from_us\":0,\"to_us\":10,\"gemm_speed\":0}]", "clock.burst[0]"},
      {"[{\"from_us\":0,\"to_us\":10,\"speed\":1.1}]", "clock.burst[0]"},
      {"[]", "clock.burst"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *bins = json_loads(bad[i].bins, 0, NULL);
    CU_ASSERT_FATAL(bins != NULL);
    json_object_set_new(json_object_get(good, "clock"), "burst", bins);
    CU_ASSERT_EQUAL_FATAL(json_dump_file(good, path, 0), 0);
    CU_ASSERT_EQUAL(schema_calibration_load(path, &back, &e), -1);
    CU_ASSERT(strstr(e.msg, bad[i].field) != NULL);
    if (!strstr(e.msg, bad[i].field)) fprintf(stderr, "bad burst %zu: %s\n", i, e.msg);
  }
  json_decref(good);
  unlink(path);
}

/* --decode graph (each decode step one CUDA graph): every GEMM launch and the
 * decode attention's two launches of a step priced host.graph_gap_us below
 * their tables, the rest and the prefill as eager; refused without the field
 * or at TP > 1, naming them. */
static void test_decode_graph(void) {
  char t[1024];
  plan_text(t, sizeof t, "{\"tp\":1}", "{\"size\":2,\"prompt\":64,\"generate\":9}", "\"codec\":{\"kind\":\"none\"}");
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  lift_ceilings();
  schema_calibration cal;
  constant_calibration(&cal, 20.0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "attention_decode", true, 1, 0, 50.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "attention_decode", true, 1e18, 0, 50.0), 0);
  sim_infer_result eager, graph;
  sim_infer_opts o = {.decode_graph = true};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &eager, &e), 0);
  CU_ASSERT_EQUAL(sim_infer_predict(&g_plan, &cal, &o, NULL, &graph, &e), -1); /* no host section */
  CU_ASSERT(strstr(e.msg, "host.graph_gap_us") != NULL);
  cal.has_host = true, cal.host_graph_gap_us = 2.0;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &o, NULL, &graph, &e), 0);
  const int launches = g_plan.model.layers * (4 + 2) + 1; /* qkv, attn_out, fc1, fc2, attention x 2; logits */
  CU_ASSERT_EQUAL(graph.graph_launches, launches);
  NEAR(eager.tpot_s - graph.tpot_s, launches * 2.0e-6, 1e-9);
  NEAR(graph.ttft_s, eager.ttft_s, 1e-12);
  /* the sampling as timed in a graph (argmax.graph, 3 us below the stream-timed 20) prices the graph step
   * only; its table is not one of the GEMMs, nothing more is taken off it */
  sim_infer_result sampled;
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "argmax.graph", false, 1, 0, KERNEL_US - 3.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "argmax.graph", false, 1e15, 0, KERNEL_US - 3.0), 0);
  schema_calibration_sort(&cal);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, &o, NULL, &sampled, &e), 0);
  NEAR(graph.tpot_s - sampled.tpot_s, 3.0e-6, 1e-9);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &sampled, &e), 0);
  NEAR(sampled.tpot_s, eager.tpot_s, 1e-12);
  CU_ASSERT(graph.decode_graph && !eager.decode_graph);
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":2,\"prompt\":64,\"generate\":9}", "\"codec\":{\"kind\":\"none\"}");
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  lift_ceilings();
  CU_ASSERT_EQUAL(sim_infer_predict(&g_plan, &cal, &o, NULL, &graph, &e), -1);
  CU_ASSERT(strstr(e.msg, "layout") != NULL && strstr(e.msg, "TP 2") != NULL);
  schema_calibration_free(&cal);
}

/* A decode attention table grouped by (sequence, KV head) pairs is read at the
 * plan's batch x KV heads on a GPU (here 2 x 8 / 2 = 8): only that group's
 * price moves TPOT, by its change once a layer; the table of the model's head
 * layout ("attention_decode.g4") is read in place of the plain one, another
 * layout's never, nor at a head dim other than the tables' 128. */
static void decode_attention_groups(schema_calibration *cal, double us4, double us8, double us16) {
  constant_calibration(cal, 20.0);
  const int groups[] = {4, 8, 16};
  const double us[] = {us4, us8, us16};
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(cal, "attention_decode", false, 1, groups[i], us[i]), 0);
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(cal, "attention_decode", false, 1e18, groups[i], us[i]), 0);
  }
  schema_calibration_sort(cal);
}

static void test_decode_attention_pairs(void) {
  load_small_plan("{\"kind\":\"none\"}");
  CU_ASSERT_EQUAL_FATAL(g_plan.batch * g_plan.model.kv_heads / g_plan.tp, 8);
  schema_calibration a, b, c;
  decode_attention_groups(&a, 70.0, 50.0, 90.0);
  decode_attention_groups(&b, 70.0, 40.0, 90.0);
  decode_attention_groups(&c, 10.0, 50.0, 10.0);
  sim_infer_result ra, rb, rc;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &a, NULL, NULL, &ra, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &b, NULL, NULL, &rb, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &c, NULL, NULL, &rc, &e), 0);
  NEAR(ra.tpot_s - rb.tpot_s, g_plan.model.layers * 10.0e-6, 1e-9);
  NEAR(rc.tpot_s, ra.tpot_s, 1e-12);
  NEAR(ra.ttft_s, rb.ttft_s, 1e-12); /* the prefill has no decode attention */
  /* the table of the model's head layout (Llama-3 8B: 32 / 8 heads, G 4) takes the place of the plain one */
  sim_infer_result rg;
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&a, "attention_decode.g4", false, 1, 8, 30.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&a, "attention_decode.g4", false, 1e18, 8, 30.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&b, "attention_decode.g7", false, 1, 8, 30.0), 0); /* not G 4 */
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&b, "attention_decode.g7", false, 1e18, 8, 30.0), 0);
  schema_calibration_sort(&a), schema_calibration_sort(&b);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &a, NULL, NULL, &rg, &e), 0);
  NEAR(ra.tpot_s - rg.tpot_s, g_plan.model.layers * 20.0e-6, 1e-9);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &b, NULL, NULL, &rg, &e), 0);
  NEAR(rg.tpot_s, rb.tpot_s, 1e-12);
  /* the layout tables are measured at head dim 128: another head dim reads the plain table */
  sim_infer_result r64, r64g;
  g_plan.model.head_dim_override = 64;
  schema_calibration_free(&a);
  decode_attention_groups(&a, 70.0, 50.0, 90.0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &a, NULL, NULL, &r64, &e), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&a, "attention_decode.g4", false, 1, 8, 30.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&a, "attention_decode.g4", false, 1e18, 8, 30.0), 0);
  schema_calibration_sort(&a);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &a, NULL, NULL, &r64g, &e), 0);
  NEAR(r64g.tpot_s, r64.tpot_s, 1e-12);
  g_plan.model.head_dim_override = 0;
  schema_calibration_free(&a), schema_calibration_free(&b), schema_calibration_free(&c);
}

/* "decode_attention": "per-query-head" (plan_infer.h): a kernel that reads the KV cache once per query head runs as
 * MHA of heads / tp KV heads, so it is priced from the ".g1" table at G = heads / kv_heads times the bytes and batch x
 * heads / tp (sequence, head) pairs. Llama-3 8B at TP 2 (16 query heads and 4 KV heads a GPU, G 4, head dim 128),
 * batch 2, prompt 64, generate 9, BF16 cache: a layer's cache at kv_len tokens is 2 x 2 x kv_len x 4 x 128 x 2 B =
 * 4,096 x kv_len B a GPU (per KV head), read 4 times: 16,384 x kv_len B. The tables are linear in bytes (the lookup
 * interpolates log-log): ".g4" (the model's layout) K4 us a byte at 8 pairs (2 x 4), ".g1" K1 at 32 pairs (2 x 16)
 * and, as a decoy, 1 us a byte at 8 pairs. The 8 decode steps attend over 65..72 keys, 68.5 on average, so a decode
 * step's attention is 32 layers x 4,096 x 68.5 x K4 us per KV head and 32 x 16,384 x 68.5 x K1 us per query head;
 * the prefill and the rest of the step do not move. */
#define DA_K4 1e-6
#define DA_K1 2e-6
static void test_decode_attention_per_query_head(void) {
  load_small_plan("{\"kind\":\"none\"}");
  CU_ASSERT_EQUAL_FATAL(g_plan.decode_attention, PLAN_DECODE_ATTN_PER_KV_HEAD); /* the default */
  CU_ASSERT_EQUAL_FATAL(g_plan.model.heads / g_plan.tp, 16);
  CU_ASSERT_EQUAL_FATAL(g_plan.model.kv_heads / g_plan.tp, 4);
  schema_calibration cal;
  constant_calibration(&cal, 20.0);
  const struct {
    const char *name;
    int group;
    double us_per_byte;
  } pts[] = {{"attention_decode.g4", 8, DA_K4}, {"attention_decode.g1", 32, DA_K1}, {"attention_decode.g1", 8, 1.0}};
  for (size_t i = 0; i < sizeof pts / sizeof pts[0]; i++)
    for (double x = 1e3; x <= 1e15; x *= 1e12)
      CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, pts[i].name, false, x, pts[i].group, x * pts[i].us_per_byte), 0);
  schema_calibration_sort(&cal);
  sim_infer_result kv, q;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &kv, &e), 0);
  NEAR(kv.decode.attention_s, 32 * 4096.0 * 68.5 * DA_K4 * 1e-6, 1e-12);
  g_plan.decode_attention = PLAN_DECODE_ATTN_PER_QUERY_HEAD;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &q, &e), 0);
  NEAR(q.decode.attention_s, 32 * 16384.0 * 68.5 * DA_K1 * 1e-6, 1e-12);
  NEAR(q.tpot_s - kv.tpot_s, q.decode.attention_s - kv.decode.attention_s, 1e-12);
  NEAR(q.ttft_s, kv.ttft_s, 1e-12);
  /* an MHA model reads each KV head once for its one query head either way: the same price */
  g_plan.model.kv_heads = g_plan.model.heads;
  sim_infer_result mq, mk;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &mq, &e), 0);
  g_plan.decode_attention = PLAN_DECODE_ATTN_PER_KV_HEAD;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &mk, &e), 0);
  NEAR(mq.tpot_s, mk.tpot_s, 1e-15);
  NEAR(mq.decode.attention_s, q.decode.attention_s, 1e-12); /* MHA of 16 heads a GPU: the shape priced above */
  schema_calibration_free(&cal);
  /* the field as a plan file gives it */
  char t[1024];
  plan_text(t, sizeof t, "{\"tp\":2}", "{\"size\":2,\"prompt\":64,\"generate\":9}",
            "\"decode_attention\":\"per-query-head\"");
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  CU_ASSERT_EQUAL(g_plan.decode_attention, PLAN_DECODE_ATTN_PER_QUERY_HEAD);
  CU_ASSERT_STRING_EQUAL(plan_decode_attention_name(g_plan.decode_attention), "per-query-head");
}

/* A measured per-query-head table ("attention_decode_pqh[_fp8].g<G>", tacorun calibrate-infer --per-query-head)
 * prices a per-query-head plan in place of the bound: by the UNIQUE KV bytes, grouped by batch x KV heads a GPU, as
 * the ".g<G>" tables. The plan and tables of test_decode_attention_per_query_head (G 4, 2 x 4 = 8 (sequence, KV head)
 * pairs, a layer's cache 4,096 x kv_len B a GPU, 68.5 keys on average over the 8 decode steps) plus
 * "attention_decode_pqh.g4", PQ us a byte at 8 pairs (and, as decoys, 1 us a byte at 32 pairs, another G's and the
 * FP8 cache's table): a step's attention is 32 layers x 4,096 x 68.5 x PQ us. Without the table, or at another head
 * dim, the bound (32 x 16,384 x 68.5 x K1); a per-KV-head plan never reads it. Over an FP8 cache (1 B an element and
 * a 4 B scale a head vector of 128: 4,096 x 33/64 = 2,112 x kv_len B) the FP8 table, PQ8 us a byte; without it the
 * bound ("attention_decode_fp8.g1", K1 at 32 pairs, 4 x the bytes). The result names the source (decode_attn_source and a note). */
#define DA_PQ 1.5e-6
#define DA_PQ8 1.25e-6
static void pqh_points(schema_calibration *cal, const char *name, int group, double us_per_byte) {
  for (double x = 1e3; x <= 1e15; x *= 1e12)
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(cal, name, false, x, group, x * us_per_byte), 0);
}
static bool has_note(const sim_infer_result *r, const char *text) {
  for (int i = 0; i < r->n_notes; i++)
    if (strstr(r->notes[i], text)) return true;
  return false;
}
static void test_decode_attention_pqh_table(void) {
  load_small_plan("{\"kind\":\"none\"}");
  CU_ASSERT_EQUAL_FATAL(g_plan.model.heads / g_plan.tp, 16);
  CU_ASSERT_EQUAL_FATAL(g_plan.model.kv_heads / g_plan.tp, 4);
  schema_calibration bound, cal;
  constant_calibration(&bound, 20.0);
  constant_calibration(&cal, 20.0);
  schema_calibration *both[] = {&bound, &cal};
  for (int i = 0; i < 2; i++) {
    pqh_points(both[i], "attention_decode.g4", 8, DA_K4);
    pqh_points(both[i], "attention_decode.g1", 32, DA_K1);
    pqh_points(both[i], "attention_decode.g1", 8, 1.0);
    pqh_points(both[i], "attention_decode_fp8.g1", 32, DA_K1); /* the FP8 cache's bound */
  }
  pqh_points(&cal, "attention_decode_pqh.g4", 8, DA_PQ);
  pqh_points(&cal, "attention_decode_pqh.g4", 32, 1.0); /* the MHA shape's pairs: not read */
  pqh_points(&cal, "attention_decode_pqh.g8", 8, 1.0);  /* another G */
  schema_calibration_sort(&bound), schema_calibration_sort(&cal);
  sim_infer_result kv, kv_t, qb, qt;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &bound, NULL, NULL, &kv, &e), 0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &kv_t, &e), 0);
  NEAR(kv_t.tpot_s, kv.tpot_s, 1e-15); /* per KV head: the table is not read */
  CU_ASSERT_STRING_EQUAL(kv_t.decode_attn_source, "");
  g_plan.decode_attention = PLAN_DECODE_ATTN_PER_QUERY_HEAD;
  char name[64];
  CU_ASSERT(!sim_infer_pqh_table(&bound, &g_plan, name, sizeof name));
  CU_ASSERT_STRING_EQUAL(name, "attention_decode_pqh.g4");
  CU_ASSERT(sim_infer_pqh_table(&cal, &g_plan, name, sizeof name));
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &bound, NULL, NULL, &qb, &e), 0);
  NEAR(qb.decode.attention_s, 32 * 16384.0 * 68.5 * DA_K1 * 1e-6, 1e-12); /* the bound, as before */
  CU_ASSERT_STRING_EQUAL(qb.decode_attn_source, "bound");
  CU_ASSERT(has_note(&qb, "upper bound (no \"attention_decode_pqh.g4\" table)"));
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &qt, &e), 0);
  NEAR(qt.decode.attention_s, 32 * 4096.0 * 68.5 * DA_PQ * 1e-6, 1e-12); /* measured: the unique bytes, 8 pairs */
  NEAR(qt.tpot_s - kv.tpot_s, qt.decode.attention_s - kv.decode.attention_s, 1e-9); /* a small difference of two larger sums */
  NEAR(qt.ttft_s, kv.ttft_s, 1e-12);
  CU_ASSERT_STRING_EQUAL(qt.decode_attn_source, "attention_decode_pqh.g4");
  CU_ASSERT(has_note(&qt, "the measured \"attention_decode_pqh.g4\" table"));
  /* the tables are of head dim 128: another head dim takes the bound */
  g_plan.model.head_dim_override = 64;
  CU_ASSERT(!sim_infer_pqh_table(&cal, &g_plan, name, sizeof name));
  sim_infer_result q64;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &q64, &e), 0);
  CU_ASSERT_STRING_EQUAL(q64.decode_attn_source, "bound");
  CU_ASSERT(has_note(&q64, "upper bound (head dim 64"));
  g_plan.model.head_dim_override = 0;
  /* an FP8 cache reads the FP8 table only: without it the bound */
  g_plan.kv = PLAN_KV_FP8;
  sim_infer_result q8b, q8t;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &q8b, &e), 0);
  CU_ASSERT_STRING_EQUAL(q8b.decode_attn_source, "bound");
  NEAR(q8b.decode.attention_s, 32 * 4.0 * 2112.0 * 68.5 * DA_K1 * 1e-6, 1e-12);
  pqh_points(&cal, "attention_decode_pqh_fp8.g4", 8, DA_PQ8);
  schema_calibration_sort(&cal);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &q8t, &e), 0);
  CU_ASSERT_STRING_EQUAL(q8t.decode_attn_source, "attention_decode_pqh_fp8.g4");
  NEAR(q8t.decode.attention_s, 32 * 2112.0 * 68.5 * DA_PQ8 * 1e-6, 1e-12);
  g_plan.kv = PLAN_KV_BF16;
  g_plan.decode_attention = PLAN_DECODE_ATTN_PER_KV_HEAD;
  schema_calibration_free(&bound), schema_calibration_free(&cal);
  /* the loader takes the tables' names as calibrate-infer writes them */
  const char *text =
      "{\"schema\":1,\"gpu\":\"test\",\"driver\":\"1\",\"cuda\":\"1\",\"nccl\":\"1\",\"transport\":\"nvlink\","
      "\"measured_at\":\"2026-12-06T00:00:00Z\",\"kernels\":{"
      "\"attention_decode_pqh.g8\":[{\"bytes\":1048576,\"group\":8,\"us\":5},{\"bytes\":2097152,\"group\":8,\"us\":7}],"
      "\"attention_decode_pqh_fp8.g16\":[{\"bytes\":540672,\"group\":64,\"us\":6}]}}";
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, strlen(text), "pqh.json", &cal, &e), 0);
  CU_ASSERT(schema_has_kernel(&cal, "attention_decode_pqh.g8") && schema_has_kernel(&cal, "attention_decode_pqh_fp8.g16"));
  CU_ASSERT_EQUAL(schema_kernel_table_of(&cal, "attention_decode_pqh.g8")->n, 2);
  schema_calibration_free(&cal);
}

/* An FP8 KV cache: decode attention from "attention_decode_fp8" when the
 * calibration has it, else from the BF16 table (at the FP8 bytes); KV memory
 * 1 + 4/head_dim bytes an element; prefill unchanged. */
static void test_fp8_kv_decode_table(void) {
  load_small_plan("{\"kind\":\"none\"}");
  schema_calibration cal;
  constant_calibration(&cal, 20.0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "attention_decode", true, 1, 0, 50.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "attention_decode", true, 1e18, 0, 50.0), 0);
  sim_infer_result r16, r8, r8t;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r16, &e), 0);
  g_plan.kv = PLAN_KV_FP8;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r8, &e), 0);
  NEAR(r8.tpot_s, r16.tpot_s, 1e-12); /* the BF16 table (constant here) */
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "attention_decode_fp8", true, 1, 0, 30.0), 0);
  CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "attention_decode_fp8", true, 1e18, 0, 30.0), 0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r8t, &e), 0);
  NEAR(r16.tpot_s - r8t.tpot_s, g_plan.model.layers * (50.0 - 30.0) * 1e-6, 1e-9);
  NEAR(r8t.ttft_s, r16.ttft_s, 1e-12);
  double d = model_head_dim(&g_plan.model);
  NEAR(r8t.memory.kv_cache, r16.memory.kv_cache / 2 * (1 + 4 / d), 1e-6);
  schema_calibration_free(&cal);
}

/* The inference view of a calibration: "<name>.infer" tables stand in for
 * "<name>" (kernels and collectives of the same rank count), the decode GEMMs
 * of "gemm_infer" join the GEMM list (sorted as a file's lists are), the rest stays;
 * the loader takes ".infer" collective names and the training file's own
 * tables are untouched. */
static void test_infer_view(void) {
  const char *text =
      "{\"schema\":1,\"gpu\":\"test\",\"driver\":\"1\",\"cuda\":\"1\",\"nccl\":\"1\",\"transport\":\"nvlink\","
      "\"measured_at\":\"2026-12-02T00:00:00Z\",\"gemm\":[{\"m\":8,\"n\":64,\"k\":64,\"us\":1}],"
      "\"gemm_infer\":[{\"m\":2,\"n\":8,\"k\":8,\"us\":4}],\"gemm_fp8\":[{\"m\":2,\"n\":8,\"k\":8,\"us\":2}],"
      "\"kernels\":{\"add_fwd\":[{\"bytes\":1,\"us\":1}],\"rmsnorm_fwd\":[{\"bytes\":1,\"us\":2}],"
      "\"rmsnorm_fwd.infer\":[{\"bytes\":1,\"us\":3}]},"
      "\"collectives\":{\"allreduce\":{\"2\":[{\"bytes\":1024,\"us\":10}],\"4\":[{\"bytes\":1024,\"us\":12}]},"
      "\"allreduce.infer\":{\"2\":[{\"bytes\":1024,\"us\":7}]},\"allgather\":{\"2\":[{\"bytes\":1024,\"us\":5}]}}}";
  schema_calibration cal, view;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, strlen(text), "view.json", &cal, &e), 0);
  /* the decode GEMMs of "gemm_infer" stay out of the training list and join the view's */
  CU_ASSERT_EQUAL(cal.n_gemm, 1);
  CU_ASSERT_EQUAL(cal.n_gemm_infer, 1);
  CU_ASSERT_EQUAL_FATAL(sim_infer_calibration_view(&cal, &view, &e), 0);
  CU_ASSERT_EQUAL_FATAL(view.n_gemm, 2);
  int decode = -1;
  for (int i = 0; i < view.n_gemm; i++)
    if (view.gemm[i].m == 2 && view.gemm[i].n == 8 && view.gemm[i].k == 8) decode = i;
  CU_ASSERT(decode >= 0 && view.gemm[decode].us == 4.0);
  /* the joined list in the file's order (n, k, m), though "gemm" holds the larger n: the exact-shape search
   * by halves finds the decode shape, so an FP8 shape next to it takes the measured FP8 / BF16 ratio 2 / 4 */
  CU_ASSERT_EQUAL(decode, 0);
  double ratio = 0;
  long long at = 0;
  CU_ASSERT_EQUAL(schema_gemm_fp8_ratio(&view, 4, 8, 8, 4.0, &ratio, &at), 1);
  CU_ASSERT_EQUAL(ratio, 0.5);
  CU_ASSERT_EQUAL(at, 2);
  CU_ASSERT_EQUAL(view.n_kernels, 2);
  for (int i = 0; i < view.n_kernels; i++) {
    if (!strcmp(view.kernels[i].name, "rmsnorm_fwd")) CU_ASSERT_EQUAL(view.kernels[i].pts[0].us, 3.0);
    CU_ASSERT(strstr(view.kernels[i].name, ".infer") == NULL);
  }
  CU_ASSERT_EQUAL(view.n_colls, 3); /* allreduce (2 ranks, the .infer one), allreduce (4), allgather */
  for (int i = 0; i < view.n_colls; i++) {
    CU_ASSERT(strstr(view.colls[i].name, ".infer") == NULL);
    if (!strcmp(view.colls[i].name, "allreduce"))
      CU_ASSERT_EQUAL(view.colls[i].pts[0].us, view.colls[i].nranks == 2 ? 7.0 : 12.0);
  }
  sim_infer_calibration_view_free(&view);
  CU_ASSERT_EQUAL(cal.n_kernels, 3);
  CU_ASSERT_EQUAL(cal.n_colls, 4);
  CU_ASSERT_EQUAL(cal.n_gemm, 1);
  schema_calibration_free(&cal);
  const char *bad = "{\"schema\":1,\"gpu\":\"t\",\"driver\":\"1\",\"cuda\":\"1\",\"nccl\":\"1\",\"transport\":\"nvlink\","
                    "\"measured_at\":\"x\",\"collectives\":{\"allreduce.inferx\":{\"2\":[{\"bytes\":1,\"us\":1}]}}}";
  CU_ASSERT_EQUAL(schema_calibration_from_json_text(bad, strlen(bad), "bad.json", &cal, &e), -1);
  CU_ASSERT(strstr(e.msg, "allreduce.inferx") != NULL);
}

/* The QKV bias of a decode step (a model with qkv_bias: the executor adds it after the qkv GEMM) read from the
 * decode-sized "bias_fwd.eager" table (calibrate-infer --small-only) at the plan's qkv width a GPU: Llama-3 8B at
 * TP 2 with a QKV bias, (32 / 2 + 2 x 8 / 2) x 128 = 3,072; a decoy group of 8,192 at 1 us. Without the table the
 * pass is priced from the generic "elementwise" one (KERNEL_US); with it 5 us: TPOT moves by layers x (KERNEL_US - 5)
 * us, the prefill (no lone twins in its view) not at all. */
static void test_decode_bias_table(void) {
  load_small_plan("{\"kind\":\"none\"}");
  g_plan.model.qkv_bias = true; /* the training view of an inference plan prices the pass (plan_infer_load.c) */
  schema_calibration cal;
  constant_calibration(&cal, 20.0);
  sim_infer_result before, after;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &before, &e), 0);
  const double pts[] = {1, 1e15};
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "bias_fwd.eager", false, pts[i], 3072, 5.0), 0);
    CU_ASSERT_EQUAL(schema_calibration_add_kernel(&cal, "bias_fwd.eager", false, pts[i], 8192, 1.0), 0);
  }
  schema_calibration_sort(&cal);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &after, &e), 0);
  NEAR(before.tpot_s - after.tpot_s, g_plan.model.layers * (KERNEL_US - 5.0) * 1e-6, 1e-9);
  NEAR(after.ttft_s, before.ttft_s, 1e-12);
  g_plan.model.qkv_bias = false;
  schema_calibration_free(&cal);
}

/* The phase views (sim_infer_phase_view): a ".graph" / ".eager" twin joins
 * below its table (the twin's points, then the table's above them), at the
 * width nearest the plan's when keyed by width; TACO's groups each on their
 * own; a lone twin becomes a table only with lone_twins; the other mode's
 * tables never show. Hand-checked points. */
static void test_phase_view(void) {
  const char *text =
      "{\"schema\":1,\"gpu\":\"test\",\"driver\":\"1\",\"cuda\":\"1\",\"nccl\":\"1\",\"transport\":\"nvlink\","
      "\"measured_at\":\"2026-12-02T00:00:00Z\",\"kernels\":{"
      "\"rmsnorm_fwd\":[{\"bytes\":1000,\"us\":9},{\"bytes\":4000,\"us\":20}],"
      "\"rmsnorm_fwd.graph\":[{\"bytes\":10,\"group\":1024,\"us\":2},{\"bytes\":2000,\"group\":1024,\"us\":2.5},"
      "{\"bytes\":10,\"group\":4096,\"us\":3},{\"bytes\":20,\"group\":4096,\"us\":3.1}],"
      "\"rmsnorm_fwd.eager\":[{\"bytes\":10,\"group\":4096,\"us\":4}],"
      "\"rope_scatter_fwd.graph\":[{\"bytes\":10,\"group\":5120,\"us\":7.7}],"
      "\"taco_encode\":[{\"bytes\":65536,\"group\":32,\"us\":3.6},{\"bytes\":65536,\"group\":64,\"us\":3.7}],"
      "\"taco_encode.graph\":[{\"bytes\":4096,\"group\":32,\"us\":1.7}]}}";
  schema_calibration cal, v;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, strlen(text), "phase.json", &cal, &e), 0);
  const sim_infer_width w[] = {{"rmsnorm_fwd", 3584}, {"rope_scatter_fwd", 5120}};
  CU_ASSERT_EQUAL_FATAL(sim_infer_phase_view(&cal, ".graph", true, w, 2, &v, &e), 0);
  CU_ASSERT_EQUAL(v.n_kernels, 3); /* rmsnorm_fwd, rope_scatter_fwd, taco_encode */
  for (int i = 0; i < v.n_kernels; i++) {
    const schema_kernel_table *t = &v.kernels[i];
    CU_ASSERT(strchr(t->name, '.') == NULL);
    if (!strcmp(t->name, "rmsnorm_fwd")) { /* width 4096 is nearest 3584; then the table's points */
      CU_ASSERT_EQUAL_FATAL(t->n, 4);
      CU_ASSERT(t->pts[0].x == 10 && t->pts[0].us == 3 && t->pts[0].group == 0);
      CU_ASSERT(t->pts[1].x == 20 && t->pts[1].us == 3.1);
      CU_ASSERT(t->pts[2].x == 1000 && t->pts[2].us == 9); /* above the twin's 20 bytes */
      CU_ASSERT(t->pts[3].x == 4000 && t->pts[3].us == 20);
    } else if (!strcmp(t->name, "rope_scatter_fwd")) {
      CU_ASSERT(t->n == 1 && t->pts[0].us == 7.7);
    } else if (!strcmp(t->name, "taco_encode")) { /* G 32: the twin's 4 KiB, then 64 KiB; G 64 as it was */
      CU_ASSERT_EQUAL_FATAL(t->n, 3);
      CU_ASSERT(t->pts[0].group == 32 && t->pts[0].x == 4096 && t->pts[0].us == 1.7);
      CU_ASSERT(t->pts[1].group == 32 && t->pts[1].x == 65536);
      CU_ASSERT(t->pts[2].group == 64 && t->pts[2].us == 3.7);
    }
  }
  sim_infer_phase_view_free(&v);
  CU_ASSERT_EQUAL_FATAL(sim_infer_phase_view(&cal, ".eager", false, w, 2, &v, &e), 0);
  CU_ASSERT_EQUAL(v.n_kernels, 2); /* no lone rope_scatter_fwd */
  for (int i = 0; i < v.n_kernels; i++)
    if (!strcmp(v.kernels[i].name, "rmsnorm_fwd"))
      CU_ASSERT(v.kernels[i].n == 3 && v.kernels[i].pts[0].us == 4 && v.kernels[i].pts[1].us == 9);
  sim_infer_phase_view_free(&v);
  CU_ASSERT_EQUAL(cal.n_kernels, 6); /* the file's tables untouched */
  schema_calibration_free(&cal);
}

/* Two stages on two nodes: the prefill adds one activation send across the
 * fabric, alpha-beta from the topology (NIC bandwidth shared by the TP ranks). */
static void test_pipeline_across_nodes(void) {
  const char *t = "{\"schema\":1,\"kind\":\"inference\",\"model\":\"llama3-70b\",\"cluster\":\"h200-1024-rail\","
                  "\"layout\":{\"tp\":8,\"pp\":2},\"batch\":{\"size\":2,\"prompt\":64,\"generate\":9}}";
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
  lift_ceilings();
  schema_calibration cal;
  constant_calibration(&cal, 20.0);
  sim_infer_result r;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r, &e), 0);
  const topo_cluster *cl = &g_plan.cluster;
  double share = (double)cl->nic.per_node / 8;
  double bw = cl->nic.gbps * 1e9 * (share < 1 ? share : 1);
  double latency = (2 * cl->nic.latency_us + 2 * cl->fabric.levels * cl->fabric.latency_us) * 1e-6;
  double hop = latency + 2.0 * 2 * 64 * g_plan.model.hidden / bw;
  NEAR(r.prefill.pp_s, hop, 1e-9);
  NEAR(r.ttft_s, hand_forward_s(&g_plan, ALLREDUCE_US) + hand_prefill_attention_extra_s(&g_plan) + hop, 1e-9);
  NEAR(r.decode.pp_s, latency + 2.0 * 2 * g_plan.model.hidden / bw, 1e-9);
  schema_calibration_free(&cal);
}

/* A measured compressed all-reduce faster than plain NCCL is used, one slower is not. */
static void test_codec_policy(void) {
  load_small_plan("{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\"}");
  schema_calibration cal;
  ts_err e = {0};
  sim_infer_result r;
  /* faster: every layer all-reduce is compressed (the embedding's stays plain) */
  constant_calibration(&cal, 20.0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r, &e), 0);
  double layers = g_plan.model.layers;
  NEAR(r.ttft_s, hand_forward_s(&g_plan, 20.0) + hand_prefill_attention_extra_s(&g_plan), 1e-9);
  NEAR(r.plain_ttft_s - r.ttft_s, layers * 2 * (ALLREDUCE_US - 20.0) * 1e-6, 1e-6);
  CU_ASSERT_EQUAL(r.n_choices, 2);
  CU_ASSERT_TRUE(r.choices[0].compressed && r.choices[1].compressed);
  CU_ASSERT(r.choices[1].wire_bytes < r.choices[1].bytes);
  schema_calibration_free(&cal);
  /* slower: plain NCCL everywhere, and a note says where the codec lost */
  constant_calibration(&cal, 80.0);
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r, &e), 0);
  NEAR(r.ttft_s, r.plain_ttft_s, 1e-12);
  NEAR(r.tpot_s, r.plain_tpot_s, 1e-12);
  CU_ASSERT_FALSE(r.choices[0].compressed || r.choices[1].compressed);
  CU_ASSERT(r.choices[1].codec_s > r.choices[1].plain_s);
  CU_ASSERT(r.n_notes >= 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.notes[r.n_notes - 1], "plain"));
  /* forced (codec_auto false): compressed, and slower */
  g_plan.codec_auto = false;
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r, &e), 0);
  CU_ASSERT_TRUE(r.choices[1].compressed);
  NEAR(r.tpot_s, hand_forward_s(&g_plan, 80.0), 1e-9);
  CU_ASSERT(r.tpot_s > r.plain_tpot_s);
  schema_calibration_free(&cal);
}

/* CAAT-Net is the model: when TACO loses, a TACO + CAAT-Net plan drops TACO
 * and sends the shared channels in BF16 (the CAAT-Net plan's time), never a
 * full all-reduce. */
static void test_caat_fallback_keeps_the_model(void) {
  schema_calibration cal;
  ts_err e = {0};
  sim_infer_result both, caat;
  constant_calibration(&cal, 80.0); /* the compressed all-reduce loses to plain NCCL (50 us) */
  load_small_plan("{\"kind\":\"caat\",\"p\":0.5}");
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &caat, &e), 0);
  CU_ASSERT_TRUE(caat.choices[0].compressed && caat.choices[1].compressed);
  load_small_plan("{\"kind\":\"taco+caat\",\"group\":128,\"fp8\":\"e4m3\",\"p\":0.5}");
  CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &both, &e), 0);
  CU_ASSERT_EQUAL_FATAL(both.n_choices, 2);
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_FALSE(both.choices[i].compressed);
    CU_ASSERT_TRUE(both.choices[i].fallback_is_caat);
    CU_ASSERT(both.choices[i].fallback_s < both.choices[i].codec_s);
  }
  NEAR(both.ttft_s, caat.ttft_s, 1e-12);
  NEAR(both.tpot_s, caat.tpot_s, 1e-12);
  CU_ASSERT(both.n_notes >= 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(both.notes[both.n_notes - 1], "caat in BF16"));
  schema_calibration_free(&cal);
}

/* Decode attention grows with the KV cache: more generated tokens, a larger mean TPOT. */
static void test_decode_attention_grows(void) {
  char t[1024];
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(CALIBRATION_DIR "/h200-derived.json", &cal, &e), 0);
  double tpot[2];
  int gen[2] = {2, 4000};
  for (int i = 0; i < 2; i++) {
    char batch[128];
    snprintf(batch, sizeof batch, "{\"size\":32,\"prompt\":2048,\"generate\":%d}", gen[i]);
    plan_text(t, sizeof t, "{\"tp\":2}", batch, "");
    CU_ASSERT_EQUAL_FATAL(load_text(t, &e), 0);
    sim_infer_result r;
    CU_ASSERT_EQUAL_FATAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r, &e), 0);
    tpot[i] = r.tpot_s;
    CU_ASSERT(r.ttft_s > r.tpot_s);
  }
  CU_ASSERT(tpot[1] > tpot[0]);
  schema_calibration_free(&cal);
}

/* Every shipped inference plan loads and predicts. */
static void test_shipped_plans(void) {
  DIR *d = opendir(PLANS_DIR);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  schema_calibration cal;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(CALIBRATION_DIR "/h200-derived.json", &cal, &e), 0);
  struct dirent *de;
  int n = 0;
  while ((de = readdir(d))) {
    if (strncmp(de->d_name, "infer-", 6) != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PLANS_DIR, de->d_name);
    bool is_inf = false;
    CU_ASSERT_EQUAL(plan_file_is_inference(path, &is_inf, &e), 0);
    CU_ASSERT_TRUE(is_inf);
    if (plan_infer_load(path, NULL, NULL, &g_plan, &e)) {
      fprintf(stderr, "%s\n", e.msg);
      CU_FAIL("a shipped plan does not load");
      continue;
    }
    sim_infer_result r;
    CU_ASSERT_EQUAL(sim_infer_predict(&g_plan, &cal, NULL, NULL, &r, &e), 0);
    CU_ASSERT(r.ttft_s > 0 && r.tpot_s > 0 && r.tokens_per_s > 0);
    /* auto never loses to its fallback: plain NCCL for TACO, CAAT-Net in BF16 for CAAT-Net
       plans (CAAT-Net is the model, so those may lose to plain NCCL) */
    if (g_plan.codec.kind == PLAN_CODEC_TACO || g_plan.codec.kind == PLAN_CODEC_NONE)
      CU_ASSERT(r.ttft_s <= r.plain_ttft_s * (1 + 1e-12));
    for (int i = 0; i < r.n_choices; i++)
      if (g_plan.codec_auto && g_plan.codec.kind != PLAN_CODEC_CAAT)
        CU_ASSERT(r.choices[i].compressed ? r.choices[i].codec_s <= r.choices[i].fallback_s
                                          : r.choices[i].fallback_s <= r.choices[i].codec_s);
    n++;
  }
  closedir(d);
  CU_ASSERT(n >= 12);
  bool is_inf = true;
  CU_ASSERT_EQUAL(plan_file_is_inference(PLANS_DIR "/../gpt-h4096-tp2-taco.json", &is_inf, &e), 0);
  CU_ASSERT_FALSE(is_inf);
  schema_calibration_free(&cal);
}

/* The command: plan and simulate an inference plan, JSON written, bad input exits 2. */
static void test_command(void) {
  char dir[] = "/tmp/test_infer_XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  const char *plan = PLANS_DIR "/infer-llama3-8b-tp2-shm-b32-taco.json";
  char cmd[2048], json[256], bad[256];
  snprintf(json, sizeof json, "%s/r.json", dir);
  snprintf(bad, sizeof bad, "%s/bad.json", dir);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " plan %s > /dev/null", plan);
  CU_ASSERT_EQUAL(system(cmd), 0);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s --calibration %s --json %s > /dev/null 2>&1", plan,
           CALIBRATION_DIR "/h200-shm-derived.json", json);
  CU_ASSERT_EQUAL(system(cmd), 0);
  json_error_t err;
  json_t *r = json_load_file(json, 0, &err);
  CU_ASSERT_PTR_NOT_NULL_FATAL(r);
  CU_ASSERT_EQUAL(json_integer_value(json_object_get(r, "schema")), 1);
  CU_ASSERT_STRING_EQUAL(json_string_value(json_object_get(r, "source")), "simulated");
  CU_ASSERT(json_real_value(json_object_get(r, "ttft_s")) > 0);
  CU_ASSERT(json_real_value(json_object_get(r, "tpot_s")) > 0);
  CU_ASSERT(json_real_value(json_object_get(r, "tokens_per_s")) > 0);
  json_decref(r);
  FILE *f = fopen(bad, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("{\"schema\":1,\"kind\":\"inference\",\"model\":\"llama3-8b\",\"cluster\":\"h200x2-nvlink\","
        "\"layout\":{\"tp\":2},\"batch\":{\"size\":1,\"prompt\":8,\"generate\":8},\"kv_cache\":\"int2\"}",
        f);
  fclose(f);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s > /dev/null 2>&1", bad);
  int st = system(cmd);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  snprintf(cmd, sizeof cmd, TACOSIM_BIN " simulate %s --trace %s/t.json > /dev/null 2>&1", plan, dir);
  st = system(cmd);
  CU_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 2);
  unlink(json);
  unlink(bad);
  rmdir(dir);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("infer", NULL, NULL);
  CU_add_test(s, "valid plan loads", test_valid_loads);
  CU_add_test(s, "malformed plans rejected", test_malformed_rejected);
  CU_add_test(s, "KV cache formula", test_kv_cache_formula);
  CU_add_test(s, "tacosim ops on an inference plan: each phase's op list by hand", test_op_lists_by_hand);
  CU_add_test(s, "decode read floor by hand (BF16, FP8 and NVFP4 weights); MoE refused", test_decode_floor);
  CU_add_test(s, "the executor's buffers and the runtime by hand", test_executor_buffers);
  CU_add_test(s, "FP8 KV cache: decode table and memory", test_fp8_kv_decode_table);
  CU_add_test(s, "decode attention by head layout, grouped by batch x KV heads", test_decode_attention_pairs);
  CU_add_test(s, "decode attention read once per query head (decode_attention per-query-head)",
              test_decode_attention_per_query_head);
  CU_add_test(s, "per-query-head decode attention from its measured table, else the bound", test_decode_attention_pqh_table);
  CU_add_test(s, "codec wire bytes", test_codec_wire_bytes);
  CU_add_test(s, "decode steps as CUDA graphs (--decode graph)", test_decode_graph);
  CU_add_test(s, "the prefill clock (clock.burst): by hand, off, early profile", test_prefill_clock);
  CU_add_test(s, "clock.burst in a calibration file: saved, loaded, bad bins refused", test_burst_file);
  CU_add_test(s, "the prefill under the power-cap model: its mix's clock by hand, the burst as extra power",
              test_prefill_power);
  CU_add_test(s, "the prefill at one clock from its ops' power: by hand, the burst, off, the fitted model first",
              test_prefill_op_power);
  CU_add_test(s, "hand-computed TTFT and TPOT", test_hand_computed_prediction);
  CU_add_test(s, "codec policy", test_codec_policy);
  CU_add_test(s, "prefill attention keyed by (head dim, prompt); ceiling is a failure", test_prefill_keyed_and_ceiling);
  CU_add_test(s, "prefill attention tables held to the unfused program's bytes", test_prefill_tables_hold_program_bytes);
  CU_add_test(s, "inference view: .infer tables stand in for the training ones", test_infer_view);
  CU_add_test(s, "phase views: .graph / .eager small-kernel tables", test_phase_view);
  CU_add_test(s, "decode QKV bias from the decode-sized bias_fwd table", test_decode_bias_table);
  CU_add_test(s, "CAAT-Net fallback keeps the model", test_caat_fallback_keeps_the_model);
  CU_add_test(s, "pipeline across nodes", test_pipeline_across_nodes);
  CU_add_test(s, "decode attention grows with the cache", test_decode_attention_grows);
  CU_add_test(s, "shipped plans", test_shipped_plans);
  CU_add_test(s, "tacosim plan and simulate", test_command);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failed = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

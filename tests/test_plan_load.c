/* test_plan_load.c — plan files: every shipped plan loads, every validation
 * rule rejects what it should with "file: field: reason", and a corpus of
 * malformed files (syntax, types, missing fields, zero/negative/huge numbers)
 * is answered with a message naming the field. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plan.h"
#include "plan_infer.h"
#include "test_check.h"

#ifndef SOURCE_DIR
#error "SOURCE_DIR must point at the source tree"
#endif
#ifndef PLANS_DIR
#error "PLANS_DIR must point at experiments/plans"
#endif

static char tmpdir[256];

/* A plan's settings; text() turns them into a plan file. */
typedef struct {
  const char *model, *cluster, *schedule, *order, *recompute, *codec, *extra;
  int dp, tp, pp, vpp, sp, zero1, micro, seq, layers;
  long long global;
} spec;

static spec base(void) {
  return (spec){.model = "gpt-tiny", .cluster = "h200x8-nvswitch", .schedule = "1f1b", .order = "tp-dp-pp",
                .recompute = "none", .codec = "{}", .extra = "", .dp = 2, .tp = 2, .pp = 2, .vpp = 1, .micro = 1,
                .seq = 256, .layers = 0, .global = 8};
}

static void text(const spec *s, char *buf, size_t cap) {
  char layers[32];
  if (s->layers)
    snprintf(layers, sizeof layers, "%d", s->layers);
  else
    snprintf(layers, sizeof layers, "null");
  snprintf(buf, cap,
           "{ \"schema\": 1, \"model\": \"%s\", \"cluster\": \"%s\",\n"
           "  \"layout\": { \"dp\": %d, \"tp\": %d, \"pp\": %d, \"vpp\": %d, \"sequence_parallel\": %s,\n"
           "              \"order\": \"%s\", \"zero1\": %s, \"recompute\": \"%s\" },\n"
           "  \"batch\": { \"micro\": %d, \"global\": %lld, \"seq\": %d },\n"
           "  \"schedule\": \"%s\", \"layers_override\": %s, \"codec\": %s %s }\n",
           s->model, s->cluster, s->dp, s->tp, s->pp, s->vpp, s->sp ? "true" : "false", s->order,
           s->zero1 ? "true" : "false", s->recompute, s->micro, s->global, s->seq, s->schedule, layers, s->codec,
           s->extra);
}

static int load_spec(const spec *s, plan *p, ts_err *e) {
  char buf[4096];
  text(s, buf, sizeof buf);
  return plan_from_json_text(buf, strlen(buf), "t.json", NULL, NULL, p, e);
}

/* The spec must be rejected, naming the file, `field` and `reason`. */
static void expect_reject(const spec *s, const char *field, const char *reason) {
  plan p;
  ts_err e = {0};
  int rc = load_spec(s, &p, &e);
  if (rc == 0) printf("\n  accepted a plan that should fail on %s\n", field);
  CU_ASSERT_EQUAL(rc, -1);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  ASSERT_MSG(e, "t.json: ");
  ASSERT_MSG(e, field);
  if (reason) ASSERT_MSG(e, reason);
}

static void expect_ok(const spec *s) {
  plan p;
  ts_err e = {0};
  int rc = load_spec(s, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL(rc, 0);
}

/* An inference plan given to a training command is named as such. */
static void test_inference_plan_named(void) {
  spec s = base();
  s.extra = ", \"kind\": \"inference\"";
  expect_reject(&s, "kind", "an inference plan");
}

/* ---- shipped plans ---- */

static void test_shipped_plans_load(void) {
  DIR *dir = opendir(PLANS_DIR);
  CU_ASSERT_PTR_NOT_NULL_FATAL(dir);
  int count = 0;
  struct dirent *ent;
  while ((ent = readdir(dir))) {
    size_t n = strlen(ent->d_name);
    if (n < 6 || strcmp(ent->d_name + n - 5, ".json")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PLANS_DIR, ent->d_name);
    plan p;
    ts_err e = {0};
    int rc = plan_load(path, NULL, NULL, &p, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL(rc, 0);
    count++;
  }
  closedir(dir);
  CU_ASSERT(count >= 7);
}

/* Issue 20: the layouts that published training runs used fit as they did. Every plan of
 * experiments/published/<set>/plans/ (the MoE set: the plans beside its README) passes the loader, whose rules include the memory check against the
 * cluster's HBM (the model files are named by repository path: loaded from the source tree's root). The
 * fullest GPU of each set is printed against its HBM. */
static void test_published_plans_fit(void) {
  char here[4096];
  CU_ASSERT_PTR_NOT_NULL_FATAL(getcwd(here, sizeof here));
  CU_ASSERT_EQUAL_FATAL(chdir(SOURCE_DIR), 0);
  DIR *sets = opendir("experiments/published");
  CU_ASSERT_PTR_NOT_NULL_FATAL(sets);
  int count = 0, on_80 = 0;
  struct dirent *set;
  while ((set = readdir(sets))) {
    if (set->d_name[0] == '.') continue;
    char dir[512];
    snprintf(dir, sizeof dir, "experiments/published/%s/plans", set->d_name);
    DIR *d = opendir(dir);
    if (!d) { /* the MoE set keeps its plans beside its README */
      snprintf(dir, sizeof dir, "experiments/published/%s", set->d_name);
      d = opendir(dir);
    }
    if (!d) continue; /* a file */
    double fullest = 0, hbm = 0;
    char which[256] = "";
    struct dirent *ent;
    while ((ent = readdir(d))) {
      size_t n = strlen(ent->d_name);
      if (n < 6 || strcmp(ent->d_name + n - 5, ".json")) continue;
      char path[1024];
      snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
      static plan p;
      ts_err e = {0};
      bool inference = false;
      CU_ASSERT_EQUAL(plan_file_is_inference(path, &inference, &e), 0);
      if (inference) { /* a serving set's plan (moe-infer): its own loader, whose rules check the memory */
        static plan_infer pi;
        int irc = plan_infer_load(path, NULL, NULL, &pi, &e);
        if (irc) printf("\n  %s\n", e.msg);
        CU_ASSERT_EQUAL(irc, 0);
        plan_infer_memory im;
        if (irc || plan_infer_memory_per_gpu(&pi, &im)) continue;
        count++;
        on_80 += pi.cluster.gpu.hbm_gib <= 80.0;
        if (im.total / (pi.cluster.gpu.hbm_gib * 1073741824.0) > (hbm > 0 ? fullest / hbm : 0)) {
          fullest = im.total / 1073741824.0, hbm = pi.cluster.gpu.hbm_gib;
          snprintf(which, sizeof which, "%s", ent->d_name);
        }
        continue;
      }
      int rc = plan_load(path, NULL, NULL, &p, &e);
      if (rc) printf("\n  %s\n", e.msg);
      CU_ASSERT_EQUAL(rc, 0);
      if (rc) continue;
      count++;
      plan_memory m;
      CU_ASSERT_EQUAL(plan_memory_per_gpu(&p, &m), 0);
      CU_ASSERT(m.total <= p.cluster.gpu.hbm_gib * 1073741824.0);
      on_80 += p.cluster.gpu.hbm_gib <= 80.0;
      if (m.total / (p.cluster.gpu.hbm_gib * 1073741824.0) > (hbm > 0 ? fullest / hbm : 0)) {
        fullest = m.total / 1073741824.0, hbm = p.cluster.gpu.hbm_gib;
        snprintf(which, sizeof which, "%s", ent->d_name);
      }
    }
    closedir(d);
    printf("\n  %-12s fullest %s: %.1f of %.0f GiB", set->d_name, which, fullest, hbm);
  }
  closedir(sets);
  printf("\n  %d published plans fit, %d of them on GPUs of 80 GiB or less ", count, on_80);
  CU_ASSERT(count >= 60);
  CU_ASSERT(on_80 >= 20);
  CU_ASSERT_EQUAL(chdir(here), 0);
}

static void test_reference_plan_fields(void) {
  plan p;
  ts_err e = {0};
  int rc = plan_load(PLANS_DIR "/gpt3-175b-1024.json", NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(p.dp, 16);
  CU_ASSERT_EQUAL(p.tp, 8);
  CU_ASSERT_EQUAL(p.pp, 8);
  CU_ASSERT_EQUAL(p.schedule, PLAN_SCHED_1F1B);
  CU_ASSERT_EQUAL(p.micro_batch, 1);
  CU_ASSERT_EQUAL(p.global_batch, 1536);
  CU_ASSERT_EQUAL(p.seq, 2048);
  CU_ASSERT_EQUAL(p.layers, 96);
  CU_ASSERT_EQUAL(plan_micro_batches(&p), 96);
  CU_ASSERT_EQUAL(plan_world_size(&p), 1024);
  CU_ASSERT_STRING_EQUAL(p.name, "gpt3-175b-1024");
  CU_ASSERT_EQUAL(p.vocab_padded % (128 * p.tp), 0);
  CU_ASSERT(p.vocab_padded >= p.model.vocab && p.vocab_padded < p.model.vocab + 128 * p.tp);
}

static void test_defaults(void) {
  const char *t = "{\"schema\":1,\"model\":\"gpt-tiny\",\"cluster\":\"h200x2-nvlink\","
                  "\"layout\":{\"dp\":1,\"tp\":2,\"pp\":1},\"batch\":{\"micro\":1,\"global\":4,\"seq\":128},"
                  "\"schedule\":\"1f1b\"}";
  plan p;
  ts_err e = {0};
  int rc = plan_from_json_text(t, strlen(t), "dir/d.json", NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_EQUAL(p.vpp, 1);
  CU_ASSERT_FALSE(p.sequence_parallel);
  CU_ASSERT_FALSE(p.zero1);
  CU_ASSERT_EQUAL(p.order, PLAN_ORDER_TP_DP_PP);
  CU_ASSERT_EQUAL(p.recompute, MODEL_RECOMPUTE_NONE);
  CU_ASSERT_STRING_EQUAL(p.name, "d");
  for (int t2 = 0; t2 < PLAN_TRAFFIC_COUNT; t2++) CU_ASSERT_EQUAL(p.codec[t2].kind, PLAN_CODEC_NONE);
  CU_ASSERT(p.codec_min_bytes > 0);
  CU_ASSERT(p.dp_bucket_bytes > 0);
  CU_ASSERT_EQUAL(p.layers, p.model.layers);
  /* pp_scatter_gather false, grad_reduce_in_fp32 true: fp32 buckets of
   * Megatron-LM's max(40M, 1M x dp) parameters */
  CU_ASSERT_FALSE(p.pp_scatter_gather);
  CU_ASSERT_FALSE(p.grad_reduce_bf16);
  CU_ASSERT_EQUAL(plan_grad_bytes(&p), 4);
  CU_ASSERT_DOUBLE_EQUAL(p.dp_bucket_bytes, 4.0 * 40e6, 0);
  CU_ASSERT_EQUAL(p.hidden_dropout, 0.1); /* Megatron-LM's --hidden-dropout default */
}

static void mutate(const char *from, const char *to, const char *field);

/* "hidden_dropout": a number in [0, 1); anything else is refused naming it. */
static void test_hidden_dropout(void) {
  const char *ok[] = {"0", "0.0", "0.1", "0.5", "0.999"};
  const double want[] = {0, 0, 0.1, 0.5, 0.999};
  for (int i = 0; i < 5; i++) {
    spec s = base();
    char extra[64];
    snprintf(extra, sizeof extra, ", \"hidden_dropout\": %s", ok[i]);
    s.extra = extra;
    plan p;
    ts_err e = {0};
    int rc = load_spec(&s, &p, &e);
    if (rc) printf("\n  %s: %s\n", ok[i], e.msg);
    CU_ASSERT_EQUAL(rc, 0);
    if (rc == 0) CU_ASSERT_EQUAL(p.hidden_dropout, want[i]);
  }
  const char *bad[] = {"-0.1", "1", "1.5", "1e300", "\"0.1\"", "true", "[0]"}; /* null: the default, as elsewhere */
  for (int i = 0; i < 7; i++) {
    char to[64];
    snprintf(to, sizeof to, "\"codec\": {}, \"hidden_dropout\": %s", bad[i]);
    mutate("\"codec\": {}", to, "hidden_dropout");
  }
}

/* The base spec with `fields` added to its layout object. */
static int load_layout_extra(const spec *s, const char *fields, plan *p, ts_err *e) {
  char buf[4096], out[4200];
  text(s, buf, sizeof buf);
  char key[64];
  snprintf(key, sizeof key, "\"recompute\": \"%s\"", s->recompute);
  char *at = strstr(buf, key);
  CU_ASSERT_PTR_NOT_NULL_FATAL(at);
  at += strlen(key);
  snprintf(out, sizeof out, "%.*s, %s%s", (int)(at - buf), buf, fields, at);
  return plan_from_json_text(out, strlen(out), "t.json", NULL, NULL, p, e);
}

static void expect_layout_reject(const spec *s, const char *fields, const char *field, const char *reason) {
  plan p;
  ts_err e = {0};
  int rc = load_layout_extra(s, fields, &p, &e);
  if (rc == 0) printf("\n  accepted layout fields %s that should fail on %s\n", fields, field);
  CU_ASSERT_EQUAL(rc, -1);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  ASSERT_MSG(e, "t.json: ");
  ASSERT_MSG(e, field);
  if (reason) ASSERT_MSG(e, reason);
}

/* layout.pp_scatter_gather: a bool, only with tp >= 2, pp >= 2 and no SP;
 * layout.grad_reduce_in_fp32: a bool; false halves the default bucket bytes
 * (same parameters per bucket) and an explicit dp_bucket_bytes is kept. */
static void test_rule_pp_scatter_gather_and_grad_precision(void) {
  spec s = base(); /* dp 2, tp 2, pp 2 */
  plan p;
  ts_err e = {0};
  int rc = load_layout_extra(&s, "\"pp_scatter_gather\": true, \"grad_reduce_in_fp32\": false", &p, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_TRUE(p.pp_scatter_gather);
  CU_ASSERT_TRUE(p.grad_reduce_bf16);
  CU_ASSERT_EQUAL(plan_grad_bytes(&p), 2);
  CU_ASSERT_DOUBLE_EQUAL(p.dp_bucket_bytes, 2.0 * 40e6, 0);
  CU_ASSERT_EQUAL(load_layout_extra(&s, "\"pp_scatter_gather\": false, \"grad_reduce_in_fp32\": true", &p, &e), 0);
  CU_ASSERT_FALSE(p.pp_scatter_gather);
  CU_ASSERT_FALSE(p.grad_reduce_bf16);
  CU_ASSERT_DOUBLE_EQUAL(p.dp_bucket_bytes, 4.0 * 40e6, 0);
  spec x = s;
  x.extra = ", \"dp_bucket_bytes\": 12345678";
  CU_ASSERT_EQUAL(load_layout_extra(&x, "\"grad_reduce_in_fp32\": false", &p, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(p.dp_bucket_bytes, 12345678.0, 0);

  expect_layout_reject(&s, "\"pp_scatter_gather\": 1", "layout.pp_scatter_gather", NULL);
  expect_layout_reject(&s, "\"pp_scatter_gather\": \"true\"", "layout.pp_scatter_gather", NULL);
  expect_layout_reject(&s, "\"grad_reduce_in_fp32\": \"no\"", "layout.grad_reduce_in_fp32", NULL);
  /* null stands for the default, as for every optional field */
  CU_ASSERT_EQUAL(load_layout_extra(&s, "\"grad_reduce_in_fp32\": null", &p, &e), 0);
  CU_ASSERT_FALSE(p.grad_reduce_bf16);
  expect_layout_reject(&s, "\"pp_scatter_gathr\": true", "layout.pp_scatter_gathr", NULL);
  x = s;
  x.tp = 1;
  expect_layout_reject(&x, "\"pp_scatter_gather\": true", "layout.pp_scatter_gather", "tp >= 2");
  x = s;
  x.pp = 1;
  expect_layout_reject(&x, "\"pp_scatter_gather\": true", "layout.pp_scatter_gather", "pp >= 2");
  x = s;
  x.sp = 1;
  expect_layout_reject(&x, "\"pp_scatter_gather\": true", "layout.pp_scatter_gather", "sequence_parallel");
  /* false is accepted wherever: it is today's behaviour */
  CU_ASSERT_EQUAL(load_layout_extra(&x, "\"pp_scatter_gather\": false", &p, &e), 0);
  /* plan_validate on an edited plan, as a layout search would do */
  CU_ASSERT_EQUAL_FATAL(load_layout_extra(&s, "\"pp_scatter_gather\": true", &p, &e), 0);
  CU_ASSERT_EQUAL(plan_validate(&p, &e), 0);
  p.sequence_parallel = true;
  CU_ASSERT_EQUAL(plan_validate(&p, &e), -1);
  ASSERT_MSG(e, "layout.pp_scatter_gather");
}

static void test_layers_override(void) {
  spec s = base();
  s.layers = 6;
  s.pp = 3;
  s.dp = 1;
  s.global = 6;
  plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_spec(&s, &p, &e), 0);
  CU_ASSERT_EQUAL(p.layers, 6);
  CU_ASSERT_EQUAL(p.model.layers, 6);
}

/* ---- validation rules, one at a time ---- */

static char model_path[512];

/* Writes a model file into the temporary folder; returns its path. */
static const char *write_model(const char *name, int hidden, int heads, int kv, int ffn) {
  snprintf(model_path, sizeof model_path, "%s/%s.json", tmpdir, name);
  FILE *f = fopen(model_path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "{\"schema\":1,\"name\":\"%s\",\"family\":\"gpt\",\"layers\":8,\"hidden\":%d,\"heads\":%d,"
          "\"kv_heads\":%d,\"ffn_hidden\":%d,\"activation\":\"gelu\",\"norm\":\"layernorm\",\"vocab\":1000,"
          "\"tied_embeddings\":true,\"max_seq\":1024,\"position\":\"learned\"}\n",
          name, hidden, heads, kv, ffn);
  fclose(f);
  return model_path;
}

static void test_rule_tp_divides_heads_kv_ffn(void) {
  spec s = base();
  s.dp = 1;
  s.pp = 1;
  s.global = 4;
  s.tp = 8;
  s.model = write_model("heads12", 768, 12, 12, 3072);
  expect_reject(&s, "layout.tp", "attention heads");
  s.tp = 4;
  s.model = write_model("kv2", 1024, 16, 2, 4096);
  expect_reject(&s, "layout.tp", "KV heads");
  s.model = write_model("ffn", 1024, 16, 16, 4098);
  expect_reject(&s, "layout.tp", "ffn_hidden");
  s.model = write_model("good", 1024, 16, 4, 4096);
  expect_ok(&s);
}

static void test_rule_vocab_is_padded_not_rejected(void) {
  spec s = base(); /* vocab 50257 is odd: padding makes every tp work */
  s.dp = 1;
  s.pp = 1;
  s.tp = 4;
  s.global = 4;
  plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(load_spec(&s, &p, &e), 0);
  CU_ASSERT_EQUAL(p.vocab_padded, 50688);
}

static void test_rule_tp_within_node(void) {
  spec s = base();
  s.cluster = "h200x2-nvlink";
  s.dp = 1;
  s.pp = 1;
  s.tp = 4;
  s.global = 4;
  expect_reject(&s, "layout.tp", "GPUs per node");
}

static void test_rule_pipeline_and_layers(void) {
  spec s = base(); /* gpt-tiny: 2 layers */
  s.dp = 1;
  s.tp = 1;
  s.pp = 4;
  expect_reject(&s, "layout.pp", "4 pipeline stages for 2 layers");
  s.layers = 6;
  expect_reject(&s, "layout.pp", "split evenly");
  s.layers = 8;
  expect_ok(&s);
}

static void test_rule_vpp_and_interleaved(void) {
  spec s = base();
  s.dp = 1;
  s.tp = 1;
  s.layers = 8;
  s.vpp = 2;
  expect_reject(&s, "layout.vpp", "interleaved-1f1b");
  s.schedule = "interleaved-1f1b";
  s.global = 8;
  expect_ok(&s);
  s.vpp = 1;
  expect_reject(&s, "layout.vpp", "vpp >= 2");
  s.vpp = 3;
  expect_reject(&s, "layout.vpp", "split evenly");
  s.vpp = 2;
  s.global = 6; /* 6 micro-batches, pp 2: fine; 5 is not a multiple of pp */
  expect_ok(&s);
  s.global = 5;
  expect_reject(&s, "batch.global", "multiple of pp");
  s.global = 8;
  s.pp = 1;
  s.vpp = 2;
  expect_reject(&s, "layout.pp", "pp >= 2");
}

static void test_rule_global_batch_divisible(void) {
  spec s = base();
  s.micro = 2;
  s.dp = 2;
  s.global = 10;
  expect_reject(&s, "batch.global", "micro 2 x dp 2");
  s.global = 12;
  expect_ok(&s);
}

static void test_rule_world_fits_cluster(void) {
  spec s = base(); /* 8 GPUs */
  s.dp = 4;
  s.global = 16;
  expect_reject(&s, "layout", "16 GPUs, but h200x8-nvswitch has 8");
}

static void test_rule_seq(void) {
  spec s = base();
  s.seq = 4096;
  expect_reject(&s, "batch.seq", "maximum sequence");
  s.seq = 255;
  s.sp = 1;
  expect_reject(&s, "layout.sequence_parallel", "not divisible by tp");
}

static void test_rule_memory_fits(void) {
  spec s = base();
  s.model = "gpt3-175b";
  s.cluster = "h200-1024-rail";
  s.dp = 1;
  s.tp = 8;
  s.pp = 1;
  s.global = 1;
  s.seq = 2048;
  expect_reject(&s, "layout", "GiB per GPU");
  s.pp = 16;
  s.global = 16;
  s.zero1 = 1;
  expect_ok(&s);
}

static void test_rule_codec(void) {
  spec s = base();
  s.codec = "{\"tp_fwd\":{\"kind\":\"taco\",\"group\":100,\"fp8\":\"e4m3\"}}";
  expect_reject(&s, "codec.tp_fwd.group", "TACO group size");
  s.codec = "{\"tp_fwd\":{\"kind\":\"taco\",\"group\":256,\"fp8\":\"e3m4\"}}";
  expect_reject(&s, "codec.tp_fwd.fp8", "not one of");
  s.codec = "{\"tp_fwd\":{\"kind\":\"taco\",\"group\":64,\"fp8\":\"e5m2\"}}";
  expect_ok(&s);
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0}}";
  expect_reject(&s, "codec.tp_fwd.p", "(0, 1]");
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":1.5},\"tp_bwd\":{\"kind\":\"caat\",\"p\":1.5}}";
  expect_reject(&s, "codec.tp_fwd.p", "out of range");
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.5},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0.5}}";
  expect_ok(&s);
  s.sp = 1;
  expect_reject(&s, "codec.tp_fwd.kind", "sequence_parallel");
  s.sp = 0;
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.5}}";
  expect_reject(&s, "codec.tp_bwd", "both tp_fwd and tp_bwd");
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.5},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0.25}}";
  expect_reject(&s, "codec.tp_bwd", "same p");
  s.codec = "{\"pp\":{\"kind\":\"caat\",\"p\":0.5}}";
  expect_reject(&s, "codec.pp.kind", "tp_fwd and tp_bwd");
  s.codec = "{\"dp\":{\"kind\":\"taco+caat\",\"group\":128,\"fp8\":\"e4m3\",\"p\":0.5}}";
  expect_reject(&s, "codec.dp.kind", "tp_fwd and tp_bwd");
  s.codec = "{\"tp_fwd\":{\"kind\":\"taco\",\"group\":128,\"fp8\":\"e4m3\",\"p\":0.5}}";
  expect_reject(&s, "codec.tp_fwd.p", "only applies");
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.5,\"group\":128},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0.5}}";
  expect_reject(&s, "codec.tp_fwd.group", "only applies");
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.0001},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0.0001}}";
  expect_reject(&s, "codec.tp_fwd.p", "no channel");
  s.tp = 1;
  s.dp = 4;
  s.global = 8;
  s.codec = "{\"tp_fwd\":{\"kind\":\"caat\",\"p\":0.5},\"tp_bwd\":{\"kind\":\"caat\",\"p\":0.5}}";
  expect_reject(&s, "codec.tp_fwd.kind", "tp >= 2");
}

/* ---- malformed files ---- */

static void expect_text_reject(const char *t, const char *field) {
  plan p;
  ts_err e = {0};
  int rc = plan_from_json_text(t, strlen(t), "bad.json", NULL, NULL, &p, &e);
  if (rc == 0) printf("\n  accepted: %s\n", t);
  CU_ASSERT_EQUAL(rc, -1);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  ASSERT_MSG(e, "bad.json: ");
  ASSERT_MSG(e, field);
}

/* Replaces the first occurrence of `from` in the reference text by `to`. */
static void mutate(const char *from, const char *to, const char *field) {
  spec s = base();
  char buf[4096], out[4096];
  text(&s, buf, sizeof buf);
  char *at = strstr(buf, from);
  CU_ASSERT_PTR_NOT_NULL_FATAL(at);
  snprintf(out, sizeof out, "%.*s%s%s", (int)(at - buf), buf, to, at + strlen(from));
  expect_text_reject(out, field);
}

static void test_syntax_errors(void) {
  expect_text_reject("", "invalid JSON");
  expect_text_reject("{", "invalid JSON");
  expect_text_reject("[1, 2]", "top level");
  expect_text_reject("{\"schema\": 1,}", "invalid JSON");
  expect_text_reject("{\"schema\": 1, \"schema\": 1}", "invalid JSON"); /* duplicate key */
  expect_text_reject("\"plan\"", "invalid JSON");
  expect_text_reject("{\"schema\": 2}", "schema");
  expect_text_reject("{}", "schema");
}

static void test_missing_fields(void) {
  mutate("\"model\": \"gpt-tiny\",", "", "model");
  mutate("\"cluster\": \"h200x8-nvswitch\",", "", "cluster");
  mutate("\"schedule\": \"1f1b\",", "", "schedule");
  mutate("\"dp\": 2, ", "", "layout.dp");
  mutate("\"tp\": 2, ", "", "layout.tp");
  mutate("\"pp\": 2, ", "", "layout.pp");
  mutate("\"micro\": 1, ", "", "batch.micro");
  mutate("\"global\": 8, ", "", "batch.global");
  mutate(", \"seq\": 256", "", "batch.seq");
  mutate("\"codec\": {}", "\"codec\": {\"tp_fwd\": {}}", "codec.tp_fwd.kind");
  mutate("\"codec\": {}", "\"codec\": {\"tp_fwd\": {\"kind\": \"taco\"}}", "codec.tp_fwd.group");
  mutate("\"codec\": {}", "\"codec\": {\"tp_fwd\": {\"kind\": \"caat\"}, \"tp_bwd\": {\"kind\": \"caat\"}}",
         "codec.tp_fwd.p");
  expect_text_reject("{\"schema\": 1, \"model\": \"gpt-tiny\", \"cluster\": \"h200x8-nvswitch\"}", "layout");
}

static void test_wrong_types(void) {
  mutate("\"dp\": 2", "\"dp\": \"2\"", "layout.dp");
  mutate("\"dp\": 2", "\"dp\": 2.5", "layout.dp");
  mutate("\"tp\": 2", "\"tp\": true", "layout.tp");
  mutate("\"sequence_parallel\": false", "\"sequence_parallel\": 0", "layout.sequence_parallel");
  mutate("\"zero1\": false", "\"zero1\": \"no\"", "layout.zero1");
  mutate("\"recompute\": \"none\"", "\"recompute\": \"some\"", "layout.recompute");
  mutate("\"order\": \"tp-dp-pp\"", "\"order\": \"dp-tp-pp\"", "layout.order");
  mutate("\"schedule\": \"1f1b\"", "\"schedule\": \"zb-v\"", "schedule");
  mutate("\"schedule\": \"1f1b\"", "\"schedule\": 1", "schedule");
  mutate("\"model\": \"gpt-tiny\"", "\"model\": 7", "model");
  mutate("\"model\": \"gpt-tiny\"", "\"model\": \"no-such-model\"", "model");
  mutate("\"cluster\": \"h200x8-nvswitch\"", "\"cluster\": \"no-such-cluster\"", "cluster");
  mutate("\"model\": \"gpt-tiny\"", "\"model\": \"\"", "model");
  mutate("\"codec\": {}", "\"codec\": []", "codec");
  mutate("\"codec\": {}", "\"codec\": {\"tp_fwd\": \"taco\"}", "codec.tp_fwd");
  mutate("\"codec\": {}", "\"codec\": {\"tp_fwd\": {\"kind\": \"zip\"}}", "codec.tp_fwd.kind");
  mutate("\"layout\": {", "\"layout\": 3, \"codec_min_bytes\": {", "layout");
  mutate("\"batch\": {", "\"batch\": [], \"dp_bucket_bytes\": {", "batch");
  mutate("\"layers_override\": null", "\"layers_override\": \"8\"", "layers_override");
  mutate("\"layers_override\": null", "\"layers_override\": 8, \"codec_min_bytes\": \"big\"", "codec_min_bytes");
  mutate("\"schema\": 1", "\"schema\": \"1\"", "schema");
}

static void test_unknown_fields(void) {
  mutate("\"layout\"", "\"lyout\": {}, \"layout\"", "lyout");
  mutate("\"dp\": 2", "\"dp\": 2, \"ddp\": 2", "layout.ddp");
  mutate("\"micro\": 1", "\"micro\": 1, \"mikro\": 1", "batch.mikro");
  mutate("\"codec\": {}", "\"codec\": {\"tp\": {\"kind\": \"none\"}}", "codec.tp");
  mutate("\"codec\": {}", "\"codec\": {\"pp\": {\"kind\": \"none\", \"gruop\": 1}}", "codec.pp.gruop");
}

static void test_bad_numbers(void) {
  mutate("\"dp\": 2", "\"dp\": 0", "layout.dp");
  mutate("\"dp\": 2", "\"dp\": -1", "layout.dp");
  mutate("\"tp\": 2", "\"tp\": 1e30", "layout.tp");
  mutate("\"tp\": 2", "\"tp\": 2147483648", "layout.tp");
  mutate("\"pp\": 2", "\"pp\": 9223372036854775807", "layout.pp");
  mutate("\"vpp\": 1", "\"vpp\": 0", "layout.vpp");
  mutate("\"vpp\": 1", "\"vpp\": 100000", "layout.vpp");
  mutate("\"micro\": 1", "\"micro\": 0", "batch.micro");
  mutate("\"global\": 8", "\"global\": -8", "batch.global");
  mutate("\"global\": 8", "\"global\": 99999999999999", "batch.global");
  mutate("\"global\": 8", "\"global\": 99999999999999999999999", "invalid JSON");
  mutate("\"global\": 8", "\"global\": 4194304", "batch.global"); /* too many micro-batches */
  mutate("\"seq\": 256", "\"seq\": 0", "batch.seq");
  mutate("\"seq\": 256", "\"seq\": 1073741824", "batch.seq");
  mutate("\"layers_override\": null", "\"layers_override\": 0", "layers_override");
  mutate("\"layers_override\": null", "\"layers_override\": -3", "layers_override");
  mutate("\"layers_override\": null", "\"layers_override\": 100000000", "layers_override");
  mutate("\"layers_override\": null", "\"layers_override\": null, \"codec_min_bytes\": -1", "codec_min_bytes");
  mutate("\"layers_override\": null", "\"layers_override\": null, \"dp_bucket_bytes\": 0", "dp_bucket_bytes");
  mutate("\"codec\": {}", "\"codec\": {\"tp_fwd\": {\"kind\": \"taco\", \"group\": -128, \"fp8\": \"e4m3\"}}",
         "codec.tp_fwd.group");
  mutate("\"codec\": {}", "\"codec\": {\"tp_fwd\": {\"kind\": \"caat\", \"p\": -0.5}, \"tp_bwd\": {\"kind\": \"caat\", \"p\": -0.5}}",
         "codec.tp_fwd.p");
}

static void test_missing_file(void) {
  plan p;
  ts_err e = {0};
  CU_ASSERT_EQUAL(plan_load("/nonexistent/plan.json", NULL, NULL, &p, &e), -1);
  ASSERT_MSG(e, "/nonexistent/plan.json");
}

static int setup(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_plan_XXXXXX");
  return mkdtemp(tmpdir) ? 0 : -1;
}

static int cleanup(void) {
  const char *names[] = {"heads12", "kv2", "ffn", "good"};
  char path[600];
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s.json", tmpdir, names[i]);
    unlink(path);
  }
  rmdir(tmpdir);
  return 0;
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite ok = CU_add_suite("plan.load", setup, cleanup);
  CU_add_test(ok, "shipped plans load", test_shipped_plans_load);
  CU_add_test(ok, "published plans fit as the runs did", test_published_plans_fit);
  CU_add_test(ok, "reference plan fields", test_reference_plan_fields);
  CU_add_test(ok, "defaults", test_defaults);
  CU_add_test(ok, "hidden_dropout", test_hidden_dropout);
  CU_add_test(ok, "layers_override", test_layers_override);
  CU_pSuite rules = CU_add_suite("plan.rules", setup, cleanup);
  CU_add_test(rules, "inference plan named as such", test_inference_plan_named);
  CU_add_test(rules, "tp divides heads, KV heads, ffn", test_rule_tp_divides_heads_kv_ffn);
  CU_add_test(rules, "vocabulary is padded, not rejected", test_rule_vocab_is_padded_not_rejected);
  CU_add_test(rules, "tp within a node", test_rule_tp_within_node);
  CU_add_test(rules, "pp and layers", test_rule_pipeline_and_layers);
  CU_add_test(rules, "vpp and interleaved", test_rule_vpp_and_interleaved);
  CU_add_test(rules, "global batch divisible", test_rule_global_batch_divisible);
  CU_add_test(rules, "world fits the cluster", test_rule_world_fits_cluster);
  CU_add_test(rules, "sequence length", test_rule_seq);
  CU_add_test(rules, "memory fits HBM", test_rule_memory_fits);
  CU_add_test(rules, "codec", test_rule_codec);
  CU_add_test(rules, "pp_scatter_gather and grad_reduce_in_fp32", test_rule_pp_scatter_gather_and_grad_precision);
  CU_pSuite bad = CU_add_suite("plan.malformed", NULL, NULL);
  CU_add_test(bad, "syntax errors", test_syntax_errors);
  CU_add_test(bad, "missing fields", test_missing_fields);
  CU_add_test(bad, "wrong types", test_wrong_types);
  CU_add_test(bad, "unknown fields", test_unknown_fields);
  CU_add_test(bad, "zero, negative, huge numbers", test_bad_numbers);
  CU_add_test(bad, "missing file", test_missing_file);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

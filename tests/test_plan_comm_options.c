/* test_plan_comm_options.c — layout.pp_scatter_gather and
 * layout.grad_reduce_in_fp32 in the per-rank programs and the memory model.
 *
 * Hand-computed bytes per rank and op counts: with scatter/gather every PP
 * send/recv carries 1/tp of the activation and each recv is followed by one
 * TP all-gather of the whole tensor that the consumer waits for (after the
 * recv); with bf16 gradients every DP bucket, the tied-embedding all-reduce
 * and the norm-gradient all-reduce carry half the bytes, in as many buckets
 * of the same parameters; with the defaults, every shipped plan builds the
 * same program whether the fields are absent or spelled out. */
#define _POSIX_C_SOURCE 200809L
#include <CUnit/Basic.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"

#ifndef PLANS_DIR
#error "PLANS_DIR must point at experiments/plans"
#endif

/* gpt-tiny (hidden 256) on one 8-GPU node; `layout` is added to the layout
 * object, `top` to the root. */
static plan load(int dp, int tp, int pp, int global, const char *model, int layers, const char *layout,
                 const char *top) {
  char buf[4096], lay[32];
  if (layers)
    snprintf(lay, sizeof lay, "%d", layers);
  else
    snprintf(lay, sizeof lay, "null");
  snprintf(buf, sizeof buf,
           "{ \"schema\": 1, \"model\": \"%s\", \"cluster\": \"h200x8-nvswitch\",\n"
           "  \"layout\": { \"dp\": %d, \"tp\": %d, \"pp\": %d%s },\n"
           "  \"batch\": { \"micro\": 1, \"global\": %d, \"seq\": 256 },\n"
           "  \"schedule\": \"1f1b\", \"layers_override\": %s %s }\n",
           model, dp, tp, pp, layout, global, lay, top);
  plan p;
  ts_err e = {0};
  int rc = plan_from_json_text(buf, strlen(buf), "t.json", NULL, NULL, &p, &e);
  if (rc) printf("\n  %s\n%s", e.msg, buf);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return p;
}

static plan_program build(const plan *p, plan_coord c) {
  plan_program g;
  ts_err e = {0};
  int rc = plan_build_program(p, plan_rank_of(p, c), &g, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return g;
}

static bool has_dep(const plan_op *op, int32_t d) {
  for (int k = 0; k < PLAN_MAX_DEPS; k++)
    if (op->dep[k] == d) return true;
  return false;
}

static bool is_pp_gather(const plan_op *op) {
  return op->kind == PLAN_OP_COLLECTIVE && op->model_op == PLAN_MOP_PP_ACTIVATION;
}

/* Field by field: the struct has padding. */
static bool same_op(const plan_op *a, const plan_op *b) {
  bool same = a->kind == b->kind && a->stream == b->stream && a->phase == b->phase && a->coll == b->coll &&
              a->group == b->group && a->traffic == b->traffic && a->part == b->part &&
              a->row_chunk == b->row_chunk && a->row_chunks == b->row_chunks && a->elem_bytes == b->elem_bytes &&
              a->model_op == b->model_op && a->layer == b->layer && a->micro == b->micro && a->chunk == b->chunk &&
              a->peer == b->peer && a->tag == b->tag && a->flops == b->flops && a->bytes == b->bytes &&
              a->wire_bytes == b->wire_bytes && a->codec.kind == b->codec.kind && a->codec.group == b->codec.group &&
              a->codec.fp8 == b->codec.fp8 && a->codec.p == b->codec.p;
  for (int k = 0; k < PLAN_MAX_DEPS; k++) same = same && a->dep[k] == b->dep[k];
  return same;
}

/* TP2 PP2, 4 micro-batches of 256 tokens: an activation is 2 x 256 x 256 =
 * 131072 bytes; scatter/gather sends 65536 per rank and all-gathers 131072. */
static void test_scatter_gather_bytes_and_ops(void) {
  const double whole = 2.0 * 256 * 256;
  const int m = 4;
  plan off = load(1, 2, 2, m, "gpt-tiny", 4, "", "");
  plan on = load(1, 2, 2, m, "gpt-tiny", 4, ", \"pp_scatter_gather\": true", "");
  for (int stage = 0; stage < 2; stage++)
    for (int tp = 0; tp < 2; tp++) {
      plan_program a = build(&off, (plan_coord){0, tp, stage});
      plan_program b = build(&on, (plan_coord){0, tp, stage});
      int sends = 0, recvs = 0, gathers = 0, tp_off = 0, tp_on = 0;
      double pp_off = 0, pp_on = 0, tp_bytes_off = 0, tp_bytes_on = 0;
      for (int i = 0; i < a.n; i++) {
        const plan_op *op = &a.ops[i];
        if (op->kind == PLAN_OP_SEND) pp_off += op->bytes;
        if (op->stream == PLAN_STREAM_TP) tp_off++, tp_bytes_off += op->bytes;
        CU_ASSERT_FALSE(is_pp_gather(op));
      }
      for (int i = 0; i < b.n; i++) {
        const plan_op *op = &b.ops[i];
        if (op->stream == PLAN_STREAM_TP) tp_on++, tp_bytes_on += op->bytes;
        if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
          CU_ASSERT_DOUBLE_EQUAL(op->bytes, whole / 2, 0);
          CU_ASSERT_DOUBLE_EQUAL(op->wire_bytes, whole / 2, 0);
          /* each TP rank talks to the rank of the same TP index next door */
          CU_ASSERT_EQUAL(plan_coord_of(&on, op->peer).tp, tp);
        }
        if (op->kind == PLAN_OP_SEND) sends++, pp_on += op->bytes;
        if (op->kind != PLAN_OP_RECV) continue;
        recvs++;
        /* the next op gathering this micro-batch's message depends on the recv */
        int g = i + 1;
        while (g < b.n && !(is_pp_gather(&b.ops[g]) && has_dep(&b.ops[g], i))) g++;
        CU_ASSERT_FATAL(g < b.n);
        const plan_op *ag = &b.ops[g];
        gathers++;
        CU_ASSERT_EQUAL(ag->stream, PLAN_STREAM_TP);
        CU_ASSERT_EQUAL(ag->group, PLAN_GROUP_TP);
        CU_ASSERT_EQUAL(ag->coll, PLAN_COLL_ALLGATHER);
        CU_ASSERT_EQUAL(ag->micro, op->micro);
        CU_ASSERT_EQUAL(ag->phase, op->phase);
        CU_ASSERT_EQUAL(ag->traffic, op->phase == PLAN_PHASE_BWD ? PLAN_TRAFFIC_TP_BWD : PLAN_TRAFFIC_TP_FWD);
        CU_ASSERT_DOUBLE_EQUAL(ag->bytes, whole, 0); /* nccl-tests size: the gathered output */
        CU_ASSERT_DOUBLE_EQUAL(ag->wire_bytes, whole, 0);
        CU_ASSERT_EQUAL(ag->codec.kind, PLAN_CODEC_NONE);
        char name[96], want[96];
        plan_op_name(&on, ag, name, sizeof name);
        snprintf(want, sizeof want, "mb%d.%s.activation.allgather", op->micro, op->phase == PLAN_PHASE_BWD ? "bwd" : "fwd");
        CU_ASSERT_STRING_EQUAL(name, want);
        /* the consumer: the next compute op, waiting first for the recv, then for the gather */
        int c = g + 1;
        while (c < b.n && b.ops[c].kind != PLAN_OP_COMPUTE) c++;
        CU_ASSERT_FATAL(c < b.n);
        CU_ASSERT_EQUAL(b.ops[c].dep[0], i);
        CU_ASSERT(has_dep(&b.ops[c], g));
        CU_ASSERT_EQUAL(b.ops[c].micro, op->micro);
        CU_ASSERT_EQUAL(b.ops[c].phase, op->phase);
      }
      /* stage 0 receives m gradients, stage 1 m activations; one gather each */
      CU_ASSERT_EQUAL(recvs, m);
      CU_ASSERT_EQUAL(sends, m);
      CU_ASSERT_EQUAL(gathers, m);
      CU_ASSERT_EQUAL(b.n, a.n + m);
      CU_ASSERT_EQUAL(tp_on, tp_off + m);
      CU_ASSERT_DOUBLE_EQUAL(pp_off, m * whole, 0);
      CU_ASSERT_DOUBLE_EQUAL(pp_on, m * whole / 2, 0);
      CU_ASSERT_DOUBLE_EQUAL(tp_bytes_on - tp_bytes_off, m * whole, 0);
      /* nothing else changes: the program without the gathers is today's,
       * but for the PP sizes and the consumers' extra dep */
      int j = 0;
      for (int i = 0; i < b.n; i++) {
        if (is_pp_gather(&b.ops[i])) continue;
        CU_ASSERT_FATAL(j < a.n);
        CU_ASSERT_EQUAL(b.ops[i].kind, a.ops[j].kind);
        CU_ASSERT_EQUAL(b.ops[i].stream, a.ops[j].stream);
        CU_ASSERT_EQUAL(b.ops[i].model_op, a.ops[j].model_op);
        CU_ASSERT_EQUAL(b.ops[i].micro, a.ops[j].micro);
        CU_ASSERT_DOUBLE_EQUAL(b.ops[i].flops, a.ops[j].flops, 0);
        j++;
      }
      CU_ASSERT_EQUAL(j, a.n);
      plan_program_free(&a);
      plan_program_free(&b);
    }
}

/* TP4: a quarter per rank; codec.pp compresses the slice (its own size
 * decides against codec_min_bytes), the gather stays uncompressed even with
 * codec.tp_fwd set. */
static void test_scatter_gather_tp4_and_codecs(void) {
  const double whole = 2.0 * 256 * 256, slice = whole / 4;
  plan on = load(1, 4, 2, 4, "gpt-tiny", 4, ", \"pp_scatter_gather\": true",
                 ", \"codec_min_bytes\": 1, \"codec\": {\"pp\": {\"kind\": \"taco\", \"group\": 64, \"fp8\": \"e4m3\"},"
                 " \"tp_fwd\": {\"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\"}}");
  /* N = 32768 / 2 = 16384 fp8 elements + 8 bytes per group of 64 */
  const double wire = 16384 + 8.0 * 16384 / 64;
  for (int stage = 0; stage < 2; stage++) {
    plan_program g = build(&on, (plan_coord){0, 3, stage});
    int pp = 0, gathers = 0;
    for (int i = 0; i < g.n; i++) {
      const plan_op *op = &g.ops[i];
      if (op->kind == PLAN_OP_SEND || op->kind == PLAN_OP_RECV) {
        pp++;
        CU_ASSERT_DOUBLE_EQUAL(op->bytes, slice, 0);
        CU_ASSERT_DOUBLE_EQUAL(op->wire_bytes, wire, 0);
        CU_ASSERT_EQUAL(op->codec.kind, PLAN_CODEC_TACO);
      }
      if (is_pp_gather(op)) {
        gathers++;
        CU_ASSERT_DOUBLE_EQUAL(op->bytes, whole, 0);
        CU_ASSERT_DOUBLE_EQUAL(op->wire_bytes, whole, 0);
        CU_ASSERT_EQUAL(op->codec.kind, PLAN_CODEC_NONE);
      }
    }
    CU_ASSERT_EQUAL(pp, 8);
    CU_ASSERT_EQUAL(gathers, 4);
    plan_program_free(&g);
  }
  /* a slice under codec_min_bytes travels uncompressed although the whole would not */
  plan big = load(1, 4, 2, 4, "gpt-tiny", 4, ", \"pp_scatter_gather\": true",
                  ", \"codec_min_bytes\": 65536, \"codec\": {\"pp\": {\"kind\": \"taco\", \"group\": 64, \"fp8\": \"e4m3\"}}");
  plan_program g = build(&big, (plan_coord){0, 0, 0});
  for (int i = 0; i < g.n; i++)
    if (g.ops[i].kind == PLAN_OP_SEND) CU_ASSERT_EQUAL(g.ops[i].codec.kind, PLAN_CODEC_NONE);
  plan_program_free(&g);
}

/* gpt3-125m DP2 PP2 (tied embeddings): bf16 gradients halve every bucket,
 * the tied-embedding all-reduce, and the gradient memory; the buckets hold
 * the same parameters (default dp_bucket_bytes scales with the element). */
static void test_grad_reduce_bf16(void) {
  for (int zero1 = 0; zero1 <= 1; zero1++) {
    const char *z = zero1 ? ", \"zero1\": true" : "";
    char lay_off[96], lay_on[128];
    snprintf(lay_off, sizeof lay_off, "%s", z);
    snprintf(lay_on, sizeof lay_on, "%s, \"grad_reduce_in_fp32\": false", z);
    plan off = load(2, 1, 2, 8, "gpt3-125m", 0, lay_off, "");
    plan on = load(2, 1, 2, 8, "gpt3-125m", 0, lay_on, "");
    CU_ASSERT_DOUBLE_EQUAL(on.dp_bucket_bytes, off.dp_bucket_bytes / 2, 0);
    for (int stage = 0; stage < 2; stage++) {
      plan_program a = build(&off, (plan_coord){1, 0, stage});
      plan_program b = build(&on, (plan_coord){1, 0, stage});
      CU_ASSERT_EQUAL_FATAL(a.n, b.n); /* same ops, same buckets */
      double dp_a = 0, dp_b = 0;
      int buckets = 0;
      for (int i = 0; i < a.n; i++) {
        const plan_op *x = &a.ops[i], *y = &b.ops[i];
        CU_ASSERT_EQUAL(x->model_op, y->model_op);
        CU_ASSERT_EQUAL(x->elem_bytes, 0);
        if (x->model_op == PLAN_MOP_GRAD_BUCKET || x->model_op == PLAN_MOP_EMBEDDING_GRADS) {
          buckets += x->model_op == PLAN_MOP_GRAD_BUCKET;
          CU_ASSERT_EQUAL(y->tag, x->tag);
          CU_ASSERT_EQUAL(y->coll, x->coll);
          CU_ASSERT_DOUBLE_EQUAL(y->bytes, x->bytes / 2, 0);
          CU_ASSERT_DOUBLE_EQUAL(y->wire_bytes, x->wire_bytes / 2, 0);
          CU_ASSERT_EQUAL(y->elem_bytes, 2);
          dp_a += x->bytes, dp_b += y->bytes;
        } else {
          CU_ASSERT(same_op(x, y));
        }
      }
      CU_ASSERT(buckets >= 1);
      /* every parameter of the stage once, plus the tied copy's all-reduce */
      double emb = (double)on.vocab_padded * on.model.hidden;
      CU_ASSERT_DOUBLE_EQUAL(dp_b, 2.0 * (plan_params_of_stage(&on, stage) + emb), 1e-9 * dp_b);
      CU_ASSERT_DOUBLE_EQUAL(dp_a, 2.0 * dp_b, 0);
      plan_memory ma, mb;
      CU_ASSERT_EQUAL(plan_memory_of_stage(&off, stage, &ma), 0);
      CU_ASSERT_EQUAL(plan_memory_of_stage(&on, stage, &mb), 0);
      CU_ASSERT_DOUBLE_EQUAL(mb.gradients, 2.0 * plan_params_of_stage(&on, stage), 1);
      CU_ASSERT_DOUBLE_EQUAL(ma.gradients, 2.0 * mb.gradients, 0);
      CU_ASSERT_DOUBLE_EQUAL(ma.total - mb.total, mb.gradients, 1);
      plan_program_free(&a);
      plan_program_free(&b);
    }
  }
}

/* Under TACO (codec.dp) a bf16 bucket sends what an fp32 bucket of the same
 * parameters sends: one fp8 byte per element plus the scales. An explicit
 * dp_bucket_bytes is bytes of gradient: bf16 buckets hold twice the
 * parameters of fp32 buckets of the same bytes. */
static void test_grad_reduce_bf16_codec_and_explicit_buckets(void) {
  const char *taco = ", \"codec_min_bytes\": 1, \"codec\": {\"dp\": {\"kind\": \"taco\", \"group\": 128, \"fp8\": \"e4m3\"}}";
  plan off = load(2, 1, 1, 2, "gpt3-125m", 0, "", taco);
  plan on = load(2, 1, 1, 2, "gpt3-125m", 0, ", \"grad_reduce_in_fp32\": false", taco);
  plan_program a = build(&off, (plan_coord){0, 0, 0});
  plan_program b = build(&on, (plan_coord){0, 0, 0});
  CU_ASSERT_EQUAL_FATAL(a.n, b.n);
  int buckets = 0;
  for (int i = 0; i < a.n; i++) {
    if (a.ops[i].model_op != PLAN_MOP_GRAD_BUCKET) continue;
    buckets++;
    double params = a.ops[i].bytes / 4;
    double want = params + 8.0 * ((double)(long long)((params + 127) / 128)); /* N + 8 ceil(N / 128) */
    CU_ASSERT_EQUAL(b.ops[i].codec.kind, PLAN_CODEC_TACO);
    CU_ASSERT_DOUBLE_EQUAL(a.ops[i].wire_bytes, want, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(b.ops[i].wire_bytes, want, 1e-6);
    CU_ASSERT_DOUBLE_EQUAL(b.ops[i].bytes, 2 * params, 0);
  }
  CU_ASSERT(buckets >= 1);
  plan_program_free(&a);
  plan_program_free(&b);

  const char *bucket = ", \"dp_bucket_bytes\": 40000000";
  off = load(2, 1, 1, 2, "gpt3-125m", 0, "", bucket);
  on = load(2, 1, 1, 2, "gpt3-125m", 0, ", \"grad_reduce_in_fp32\": false", bucket);
  int n_off = 0, n_on = 0;
  a = build(&off, (plan_coord){0, 0, 0});
  b = build(&on, (plan_coord){0, 0, 0});
  double first_off = 0, first_on = 0;
  for (int i = 0; i < a.n; i++)
    if (a.ops[i].model_op == PLAN_MOP_GRAD_BUCKET && n_off++ == 0) first_off = a.ops[i].bytes / 4;
  for (int i = 0; i < b.n; i++)
    if (b.ops[i].model_op == PLAN_MOP_GRAD_BUCKET && n_on++ == 0) first_on = b.ops[i].bytes / 2;
  /* a bucket closes once it holds dp_bucket_bytes of gradient */
  CU_ASSERT(4 * first_off >= 4e7 && 2 * first_on >= 4e7);
  CU_ASSERT(first_on > first_off);
  CU_ASSERT(n_on < n_off);
  plan_program_free(&a);
  plan_program_free(&b);
}

/* Under SP the norm-weight gradients are all-reduced across TP from the same
 * gradient buffer: bf16 halves them too. */
static void test_grad_reduce_bf16_norm_grads(void) {
  plan off = load(1, 2, 1, 2, "gpt-tiny", 0, ", \"sequence_parallel\": true", "");
  plan on = load(1, 2, 1, 2, "gpt-tiny", 0, ", \"sequence_parallel\": true, \"grad_reduce_in_fp32\": false", "");
  plan_program a = build(&off, (plan_coord){0, 0, 0});
  plan_program b = build(&on, (plan_coord){0, 0, 0});
  CU_ASSERT_EQUAL_FATAL(a.n, b.n);
  int norms = 0;
  for (int i = 0; i < a.n; i++)
    if (a.ops[i].model_op == PLAN_MOP_NORM_GRADS) {
      norms++;
      /* layernorm: 2 norms x (weight + bias) x hidden per layer, + the final norm */
      CU_ASSERT_DOUBLE_EQUAL(a.ops[i].bytes, 4.0 * (2 * 2 * 256 * 2 + 2 * 256), 0);
      CU_ASSERT_DOUBLE_EQUAL(b.ops[i].bytes, a.ops[i].bytes / 2, 0);
    }
  CU_ASSERT_EQUAL(norms, 1);
  plan_program_free(&a);
  plan_program_free(&b);
}

/* `tacosim plan` says which is on. */
static void test_summary_names_them(void) {
  plan p = load(2, 2, 2, 8, "gpt-tiny", 4, ", \"pp_scatter_gather\": true, \"grad_reduce_in_fp32\": false", "");
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  ts_err e = {0};
  CU_ASSERT_EQUAL(plan_print_summary(&p, out, &e), 0);
  fclose(out);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "pipeline  messages scatter/gather"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "gradients bf16 (grad_reduce_in_fp32 false), 2 bytes per parameter"));
  free(buf);
  p = load(2, 2, 2, 8, "gpt-tiny", 4, "", "");
  out = open_memstream(&buf, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(out);
  CU_ASSERT_EQUAL(plan_print_summary(&p, out, &e), 0);
  fclose(out);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "pipeline  messages whole on every TP rank"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "gradients fp32, 4 bytes per parameter"));
  free(buf);
}

/* With the defaults spelled out, every shipped plan builds the same program
 * (field by field) as with the fields absent, and no op sets elem_bytes. */
static void test_defaults_build_the_same_programs(void) {
  DIR *d = opendir(PLANS_DIR);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  struct dirent *ent;
  int plans = 0;
  while ((ent = readdir(d))) {
    size_t len = strlen(ent->d_name);
    if (len < 6 || strcmp(ent->d_name + len - 5, ".json")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", PLANS_DIR, ent->d_name);
    FILE *f = fopen(path, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static char text[65536], edited[66000];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char *at = strstr(text, "\"layout\"");
    if (!at || strstr(text, "\"inference\"")) continue;
    at = strchr(at, '{');
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    at++;
    snprintf(edited, sizeof edited, "%.*s \"pp_scatter_gather\": false, \"grad_reduce_in_fp32\": true,%s",
             (int)(at - text), text, at);
    static plan a, b;
    ts_err e = {0};
    CU_ASSERT_EQUAL_FATAL(plan_load(path, NULL, NULL, &a, &e), 0);
    int rc = plan_from_json_text(edited, strlen(edited), path, NULL, NULL, &b, &e);
    if (rc) printf("\n  %s\n", e.msg);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_DOUBLE_EQUAL(a.dp_bucket_bytes, b.dp_bucket_bytes, 0);
    for (int s = 0; s < a.pp; s++) {
      plan_program x = build(&a, (plan_coord){0, 0, s}), y = build(&b, (plan_coord){0, 0, s});
      CU_ASSERT_EQUAL_FATAL(x.n, y.n);
      int differ = 0, elem = 0;
      for (int i = 0; i < x.n; i++) {
        differ += !same_op(&x.ops[i], &y.ops[i]);
        elem += x.ops[i].elem_bytes != 0;
      }
      if (differ) printf("\n  %s stage %d: %d ops differ\n", ent->d_name, s, differ);
      CU_ASSERT_EQUAL(differ, 0);
      CU_ASSERT_EQUAL(elem, 0);
      plan_program_free(&x);
      plan_program_free(&y);
    }
    plans++;
  }
  closedir(d);
  CU_ASSERT(plans >= 20);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("plan.comm_options", NULL, NULL);
  CU_add_test(s, "pp_scatter_gather: 1/tp PP bytes, one TP all-gather per recv", test_scatter_gather_bytes_and_ops);
  CU_add_test(s, "pp_scatter_gather: TP4, codec.pp on the slice, gather uncompressed",
              test_scatter_gather_tp4_and_codecs);
  CU_add_test(s, "grad_reduce_in_fp32 false: DP bytes and gradient memory halved", test_grad_reduce_bf16);
  CU_add_test(s, "grad_reduce_in_fp32 false: TACO wire bytes, explicit dp_bucket_bytes",
              test_grad_reduce_bf16_codec_and_explicit_buckets);
  CU_add_test(s, "grad_reduce_in_fp32 false: SP norm gradients halved", test_grad_reduce_bf16_norm_grads);
  CU_add_test(s, "summary names both", test_summary_names_them);
  CU_add_test(s, "defaults spelled out build the same programs", test_defaults_build_the_same_programs);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

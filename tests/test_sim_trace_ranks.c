/* test_sim_trace_ranks.c — `--trace-ranks`: the rank lists it accepts and
 * refuses, and that a simulation records only the ranks chosen. */
#include <CUnit/Basic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

static plan p;

static void test_parse(void) {
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt-h4096-pp2.json", NULL, NULL, &p, &e), 0);
  int world = plan_world_size(&p);
  unsigned char sel[64];
  CU_ASSERT_FATAL(world <= 64);
  CU_ASSERT_EQUAL(sim_parse_trace_ranks("stages", &p, sel, &e), 0);
  int n = 0;
  for (int r = 0; r < world; r++) n += sel[r];
  CU_ASSERT_EQUAL(n, p.pp);
  CU_ASSERT_EQUAL(sim_parse_trace_ranks("1", &p, sel, &e), 0);
  CU_ASSERT(!sel[0] && sel[1]);
  CU_ASSERT_EQUAL(sim_parse_trace_ranks("0-1", &p, sel, &e), 0);
  CU_ASSERT(sel[0] && sel[1]);
  CU_ASSERT_EQUAL(sim_parse_trace_ranks("all", &p, sel, &e), 0);
  n = 0;
  for (int r = 0; r < world; r++) n += sel[r];
  CU_ASSERT_EQUAL(n, world);
  /* the default: every rank of a small plan, the stages' of one beyond SIM_TRACE_ALL_RANKS_MAX GPUs */
  CU_ASSERT_STRING_EQUAL(sim_default_trace_ranks(&p), "all");
  static plan big;
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt3-175b-1024.json", NULL, NULL, &big, &e), 0);
  CU_ASSERT_FATAL(plan_world_size(&big) > SIM_TRACE_ALL_RANKS_MAX);
  CU_ASSERT_STRING_EQUAL(sim_default_trace_ranks(&big), "stages");
  const char *bad[] = {"", "x", "1,", "2", "1-0", "-1", "0-5", "0;1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    e = (ts_err){0};
    CU_ASSERT_EQUAL(sim_parse_trace_ranks(bad[i], &p, sel, &e), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "--trace-ranks"));
    CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  }
}

/* simulates the plan in full mode recording rank `rank` only, in this process
 * (sim_run: once per process) or in a forked child (its result comes back as
 * JSON through the result loader); 0 when it ran */
static int record_rank(int rank, bool isolated, schema_calibration *cal, schema_result *r) {
  ts_err e = {0};
  sim_cost_source src;
  if (sim_load_costs(NULL, &p.cluster, SIM_TRANSFER_ROOFLINE, cal, &src, &e)) return -1;
  unsigned char sel[2] = {rank == 0, rank == 1};
  sim_options o = {.mode = SIM_MODE_FULL, .cal = cal, .record_ops = true, .record_ranks = sel, .clock_off = true};
  int rc = isolated ? sim_run_isolated(&p, &o, r, &e) : sim_run(&p, &o, r, &e);
  if (rc) printf("\n  %s ", e.msg), schema_calibration_free(cal);
  return rc;
}

static void test_records_only_chosen(void) {
  schema_calibration cal;
  schema_result r;
  CU_ASSERT_EQUAL_FATAL(record_rank(1, false, &cal, &r), 0);
  int other = 0;
  for (int i = 0; i < r.n_ops; i++) other += r.ops[i].rank != 1;
  printf("\n  %d ops recorded for rank 1 ", r.n_ops);
  CU_ASSERT(r.n_ops > 10);
  CU_ASSERT_EQUAL(other, 0);
  schema_result_free(&r);
  schema_calibration_free(&cal);
}

/* every plan stream is a named thread of the trace; an op of the CP ring
 * lands on the cp thread, not on compute */
static void test_trace_streams(void) {
  schema_result r;
  schema_result_init(&r, SCHEMA_SOURCE_SIMULATED);
  schema_op_record op = {.name = "layer0.mb0.fwd.attn.cp_kv0", .rank = 3, .stream = "cp", .start_s = 1e-3,
                         .dur_s = 2e-3, .kind = "send", .codec = "taco", .bytes = 4194304, .wire_bytes = 2162688};
  r.ops = &op, r.n_ops = 1;
  char path[] = "/tmp/test_trace_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  ts_err e = {0};
  schema_rank_stat st = {.rank = 3};
  CU_ASSERT_EQUAL_FATAL(schema_result_add_rank(&r, &st), 0);
  CU_ASSERT_EQUAL_FATAL(sim_write_trace(&r, path, &e), 0);
  r.ops = NULL, r.n_ops = 0;
  schema_result_free(&r);
  FILE *f = fopen(path, "r");
  CU_ASSERT_FATAL(f != NULL);
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  unlink(path);
  char want[128];
  snprintf(want, sizeof want, "\"pid\":3,\"tid\":%d,\"ts\":1000.000,\"dur\":2000.000", (int)PLAN_STREAM_CP);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, want));
  snprintf(want, sizeof want, "\"pid\":3,\"tid\":%d,\"args\":{\"name\":\"cp\"}", (int)PLAN_STREAM_CP);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"args\":{\"kind\":\"send\",\"codec\":\"taco\",\"bytes\":4.1943e+06,"
                                     "\"wire_bytes\":2.16269e+06}"));
}

/* A merged record says what it merged: one name per merged op (the list form), or the first and the
 * last of them (the range form); and the trace carries them as the event's "merged" argument. Counts
 * the records of each form. */
static void check_merged(const schema_result *r, int *lists, int *ranges) {
  int merged = 0;
  for (int i = 0; i < r->n_ops; i++) {
    const schema_op_record *op = &r->ops[i];
    merged += op->merged > 0;
    CU_ASSERT_EQUAL(op->merged > 0, op->merged_names[0] != '\0');
    if (op->merged <= 0) continue;
    int names = 1;
    for (const char *c = op->merged_names; *c; c++) names += *c == ',';
    const char *range = strstr(op->merged_names, " ... ");
    bool ok = range ? names == 1 && op->merged > 2 && !strstr(range + 5, " ") : names == op->merged;
    if (!ok) printf("\n  %s: merged %d, names \"%s\"", op->name, op->merged, op->merged_names);
    CU_ASSERT(ok);
    int *form = range ? ranges : lists;
    if (++*form == 1) printf("\n  e.g. \"%s\": %s", op->name, op->merged_names);
  }
  char path[] = "/tmp/test_trace_merged_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_write_trace(r, path, &e), 0);
  FILE *f = fopen(path, "r");
  CU_ASSERT_FATAL(f != NULL);
  int with_names = 0;
  char line[2048];
  while (fgets(line, sizeof line, f)) with_names += strstr(line, "\"merged_ops\":") && strstr(line, ",\"merged\":\"");
  fclose(f);
  unlink(path);
  CU_ASSERT_EQUAL(with_names, merged);
}

/* records of kind `kind` (and whose source holds `what`) */
static int count_kind(const schema_result *r, const char *kind) {
  int n = 0;
  for (int i = 0; i < r->n_ops; i++) n += strcmp(r->ops[i].kind, kind) == 0;
  return n;
}
static int count_source(const schema_result *r, const char *kind, const char *what) {
  int n = 0;
  for (int i = 0; i < r->n_ops; i++) n += strcmp(r->ops[i].kind, kind) == 0 && strstr(r->ops[i].source, what);
  return n;
}
/* every communication record says what priced it */
static void check_comm_sources(const schema_result *r) {
  for (int i = 0; i < r->n_ops; i++)
    if (strcmp(r->ops[i].kind, "compute")) CU_ASSERT_NOT_EQUAL(r->ops[i].source[0], '\0');
}

/* a simulation's records say what each op was (kind, sizes, what a merged record merged), also through
 * the forked child's result */
static void test_records_describe_ops(void) {
  schema_calibration cal;
  schema_result r;
  CU_ASSERT_EQUAL_FATAL(record_rank(0, true, &cal, &r), 0);
  int compute = 0, comm = 0, merged = 0, lists = 0, ranges = 0, sourced = 0, gemm = 0;
  for (int i = 0; i < r.n_ops; i++) {
    const schema_op_record *op = &r.ops[i];
    if (!strcmp(op->kind, "compute")) {
      compute += op->flops > 0 || op->bytes > 0;
      sourced += op->source[0] != '\0'; /* the tables that priced it */
      gemm += strstr(op->source, "gemm") != NULL;
    } else {
      comm += op->bytes > 0 && op->wire_bytes > 0;
      CU_ASSERT_NOT_EQUAL(op->source[0], '\0'); /* what priced the transfer */
    }
    merged += op->merged > 0;
  }
  CU_ASSERT_EQUAL(sourced, compute);
  CU_ASSERT(gemm > 0);
  printf("\n  %d ops: %d compute with sizes, %d communication, %d merged ", r.n_ops, compute, comm, merged);
  CU_ASSERT(compute > 0);
  CU_ASSERT(comm > 0);
  CU_ASSERT(merged > 0);
  CU_ASSERT_EQUAL(compute + comm, r.n_ops);
  check_merged(&r, &lists, &ranges); /* a pipeline stage's forward: whole layers merged (ranges) */
  /* inside the NVLink node: the calibration's measured tables, named as the file names them */
  CU_ASSERT_EQUAL(count_source(&r, "send", "collectives.sendrecv.2 (nvlink)"), count_kind(&r, "send"));
  CU_ASSERT(count_source(&r, "collective", "collectives.allreduce.2 (nvlink)") > 0); /* the tied embedding */
  schema_result_free(&r);
  schema_calibration_free(&cal);
  /* TP 2: the compute between two TP all-reduces merged (lists) */
  static plan keep;
  keep = p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt-h4096-tp2-taco.json", NULL, NULL, &p, &e), 0);
  const plan_codec taco = p.codec[PLAN_TRAFFIC_TP_FWD];
  CU_ASSERT_EQUAL_FATAL(record_rank(0, true, &cal, &r), 0);
  check_merged(&r, &lists, &ranges);
  check_comm_sources(&r);
  /* the measured compressed all-reduce, codec included */
  CU_ASSERT(count_source(&r, "collective", "collectives.allreduce.taco128.2 (nvlink)") > 0);
  schema_result_free(&r);
  schema_calibration_free(&cal);
  p = keep;
  printf("\n  merged records: %d listed, %d as a range ", lists, ranges);
  CU_ASSERT(lists > 0);
  CU_ASSERT(ranges > 0);
  /* by hand: the PP2 plan's stages on two nodes of one GPU behind one switch, TACO on the pipeline's
   * messages: the messages and the tied embedding's all-reduce run as SimGrid flows on the platform's
   * links, the codec's kernels priced by the calibration's kernel tables */
  topo_cluster *c = &p.cluster;
  c->nodes = 2, c->gpus_per_node = 1;
  c->nic.per_node = 1, c->nic.gbps = 50, c->nic.latency_us = 2;
  c->fabric.kind = TOPO_FABRIC_SINGLE_SWITCH, c->fabric.latency_us = 1;
  p.codec[PLAN_TRAFFIC_PP] = taco;
  CU_ASSERT_EQUAL_FATAL(record_rank(0, true, &cal, &r), 0);
  int sends = count_kind(&r, "send");
  CU_ASSERT(sends > 0);
  CU_ASSERT_EQUAL(count_source(&r, "send", "SimGrid flow on the platform's links"), sends);
  CU_ASSERT_EQUAL(count_source(&r, "send", "kernels.taco_encode"), sends);
  CU_ASSERT_EQUAL(count_source(&r, "send", "collectives."), 0); /* no in-node table across nodes */
  CU_ASSERT(count_source(&r, "collective", "SimGrid flows: ") > 0);
  check_comm_sources(&r);
  const char *kinds[] = {"send", "recv", "collective"};
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < r.n_ops; i++)
      if (strcmp(r.ops[i].kind, kinds[k]) == 0) {
        printf("\n  e.g. %s: %s", r.ops[i].name, r.ops[i].source);
        break;
      }
  schema_result_free(&r);
  schema_calibration_free(&cal);
  p = keep;
}

/* flow arrows: each send and its receive carry one flow id (through the
 * forked child's result), and the trace draws an arrow s -> f for each, and one through the members of
 * each collective call recorded on both ranks; p in full mode, ranks 0 and 1 recorded. Returns the
 * collective calls drawn. */
static int flow_sends; /* the sends of the last flow_arrows() */
static int flow_arrows(void) {
  schema_calibration cal;
  schema_result r;
  ts_err e = {0};
  sim_cost_source src;
  CU_ASSERT_EQUAL_FATAL(sim_load_costs(NULL, &p.cluster, SIM_TRANSFER_ROOFLINE, &cal, &src, &e), 0);
  unsigned char sel[2] = {1, 1};
  sim_options o = {.mode = SIM_MODE_FULL, .cal = &cal, .record_ops = true, .record_ranks = sel, .clock_off = true};
  if (sim_run_isolated(&p, &o, &r, &e)) {
    CU_FAIL(e.msg);
    schema_calibration_free(&cal);
    return 0;
  }
  int sends = 0, matched = 0, colls = 0;
  for (int i = 0; i < r.n_ops; i++) {
    const schema_op_record *a = &r.ops[i];
    if (!strcmp(a->kind, "compute")) CU_ASSERT_EQUAL(a->flow, 0);
    if (!strcmp(a->kind, "collective") && a->flow > 0) colls++;
    if (strcmp(a->kind, "send")) continue;
    sends++;
    CU_ASSERT(a->flow > 0);
    for (int j = 0; j < r.n_ops; j++)
      if (!strcmp(r.ops[j].kind, "recv") && r.ops[j].flow == a->flow && r.ops[j].rank != a->rank &&
          r.ops[j].start_s + r.ops[j].dur_s >= a->start_s)
        matched++;
  }
  printf("\n  %d sends, %d matched by a receive of the same flow; %d collective records with a flow ", sends, matched,
         colls);
  CU_ASSERT_EQUAL(matched, sends);
  flow_sends = sends;
  char path[] = "/tmp/test_trace_flow_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  close(fd);
  CU_ASSERT_EQUAL_FATAL(sim_write_trace(&r, path, &e), 0);
  FILE *f = fopen(path, "r");
  CU_ASSERT_FATAL(f != NULL);
  int starts = 0, ends = 0;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    starts += strstr(line, "{\"ph\":\"s\",") != NULL;
    ends += strstr(line, "{\"ph\":\"f\",\"bp\":\"e\",") != NULL;
  }
  fclose(f);
  unlink(path);
  /* one arrow per message, and one through the members of each collective call recorded on both ranks */
  int calls = 0;
  for (int i = 0; i < r.n_ops; i++) {
    const schema_op_record *a = &r.ops[i];
    if (strcmp(a->kind, "collective") || a->flow <= 0) continue;
    int first = 1, others = 0;
    for (int j = 0; j < r.n_ops; j++)
      if (r.ops[j].flow == a->flow && strcmp(r.ops[j].kind, "collective") == 0 && j != i) {
        first &= j > i;
        others += r.ops[j].rank != a->rank;
      }
    calls += first && others > 0;
  }
  printf("%d arrows, %d of them through a collective call's members ", starts, calls);
  CU_ASSERT_EQUAL(starts, sends + calls);
  CU_ASSERT_EQUAL(starts, ends);
  schema_result_free(&r);
  schema_calibration_free(&cal);
  return calls;
}

static void test_flow_arrows(void) {
  CU_ASSERT(flow_arrows() > 0); /* PP 2: the messages, and the tied embedding's all-reduce */
  CU_ASSERT(flow_sends > 0);
  static plan keep;
  keep = p;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(plan_load(PLANS_DIR "/gpt-h4096-tp2-taco.json", NULL, NULL, &p, &e), 0);
  CU_ASSERT(flow_arrows() >= 8 * 4); /* TP 2: every TP all-reduce's two members, 4 a layer and micro-batch */
  p = keep;
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("trace ranks", NULL, NULL);
  CU_add_test(s, "--trace-ranks lists", test_parse);
  CU_add_test(s, "each plan stream its own trace thread", test_trace_streams);
  CU_add_test(s, "records say what each op was", test_records_describe_ops); /* forks: before sim_run */
  CU_add_test(s, "flow arrows between a send and its receive, through a collective's members", test_flow_arrows);
  CU_add_test(s, "only the chosen ranks are recorded", test_records_only_chosen);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

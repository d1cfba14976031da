/* test_common.c — the error record and the strict JSON getters every loader
 * uses: messages read "file: field: reason", types and ranges are enforced. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, mkdtemp, fdopen, ftruncate */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ts_args.h"
#include "ts_coll.h"
#include "ts_env.h"
#include "ts_error.h"
#include "ts_file.h"
#include "ts_json.h"
#include "test_check.h"

static json_t *parse(const char *text) {
  ts_err e;
  json_t *root = tsj_load_string(text, strlen(text), "t.json", &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(root);
  return root;
}

static void test_fail_formats_file_field_reason(void) {
  ts_err e;
  CU_ASSERT_EQUAL(ts_fail(&e, "a.json", "layout.tp", "%d is odd", 3), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "a.json: layout.tp: 3 is odd");
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  ts_fail(&e, NULL, "tp", "bad");
  CU_ASSERT_STRING_EQUAL(e.msg, "tp: bad");
  ts_fail(&e, "a.json", NULL, "bad");
  CU_ASSERT_STRING_EQUAL(e.msg, "a.json: bad");
  ts_fail(&e, "", "", "bad");
  CU_ASSERT_STRING_EQUAL(e.msg, "bad");
  CU_ASSERT_EQUAL(ts_fail(NULL, "a", "b", "c"), -1);
}

static void test_fail_sys_is_not_bad_input(void) {
  ts_err e;
  CU_ASSERT_EQUAL(ts_fail_sys(&e, "out of memory after %d bytes", 42), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "out of memory after 42 bytes");
  CU_ASSERT_EQUAL(e.bad_input, 0);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_FAILURE);
  CU_ASSERT_EQUAL(ts_exit_status(NULL), TS_EXIT_FAILURE);
}

static void test_fail_truncates_long_messages(void) {
  ts_err e;
  char big[3000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  ts_fail(&e, big, big, "%s", big);
  CU_ASSERT_EQUAL(strlen(e.msg), sizeof e.msg - 1);
  ts_fail(&e, "f", big, "%s", "tail");
  CU_ASSERT_EQUAL(strncmp(e.msg, "f: xxx", 6), 0);
  CU_ASSERT_EQUAL(strlen(e.msg), sizeof e.msg - 1);
}

static void test_load_string_rejects_bad_json(void) {
  ts_err e;
  const char *text = "{\n  \"a\": 1,\n  \"b\": }";
  CU_ASSERT_PTR_NULL(tsj_load_string(text, strlen(text), "m.json", &e));
  ASSERT_MSG(e, "m.json: invalid JSON at line 3");
  CU_ASSERT_EQUAL(e.bad_input, 1);
  CU_ASSERT_PTR_NULL(tsj_load_string("[1, 2]", 6, "m.json", &e));
  ASSERT_MSG(e, "top level must be a JSON object");
  CU_ASSERT_PTR_NULL(tsj_load_string("{\"a\": 1, \"a\": 2}", 16, "m.json", &e));
  ASSERT_MSG(e, "m.json: invalid JSON");
  CU_ASSERT_PTR_NULL(tsj_load_string("", 0, "m.json", &e));
  /* The length bounds the parse: text past it is never read. */
  json_t *root = tsj_load_string("{}garbage", 2, "m.json", &e);
  CU_ASSERT_PTR_NOT_NULL(root);
  json_decref(root);
}

static void test_load_file(void) {
  ts_err e;
  CU_ASSERT_PTR_NULL(tsj_load_file("/nonexistent/dir/x.json", &e));
  ASSERT_MSG(e, "/nonexistent/dir/x.json: cannot read file");
  char path[] = "/tmp/tacosim_test_common_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs("{\"schema\": 1,\n \"x\": [1,}\n", f);
  fclose(f);
  CU_ASSERT_PTR_NULL(tsj_load_file(path, &e));
  ASSERT_MSG(e, path);
  ASSERT_MSG(e, "line 2");
  f = fopen(path, "w");
  fputs("{\"schema\": 1}", f);
  fclose(f);
  json_t *root = tsj_load_file(path, &e);
  CU_ASSERT_PTR_NOT_NULL(root);
  CU_ASSERT_EQUAL(tsj_schema(root, 1, path, &e), 0);
  json_decref(root);
  unlink(path);
}

static void test_int_getter(void) {
  ts_err e;
  long long v = 0;
  json_t *r = parse("{\"n\": 8, \"s\": \"8\", \"f\": 8.5, \"big\": 9007199254740993, \"neg\": -3, \"nul\": null}");
  CU_ASSERT_EQUAL(tsj_int(r, "n", 1, 16, &v, "t.json", "layout", &e), 0);
  CU_ASSERT_EQUAL(v, 8);
  CU_ASSERT_EQUAL(tsj_int(r, "n", 9, 16, &v, "t.json", "layout", &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: layout.n: 8 is out of range [9, 16]");
  CU_ASSERT_EQUAL(tsj_int(r, "s", 1, 16, &v, "t.json", NULL, &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: s: must be an integer");
  CU_ASSERT_EQUAL(tsj_int(r, "f", 1, 16, &v, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "f: must be an integer");
  CU_ASSERT_EQUAL(tsj_int(r, "big", 1, 1000, &v, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "big: ");
  ASSERT_MSG(e, "out of range");
  CU_ASSERT_EQUAL(tsj_int(r, "neg", 0, 10, &v, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "neg: -3 is out of range");
  CU_ASSERT_EQUAL(tsj_int(r, "missing", 0, 10, &v, "t.json", NULL, &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: missing: missing (an integer is required)");
  CU_ASSERT_EQUAL(tsj_int(r, "nul", 0, 10, &v, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "nul: missing");
  CU_ASSERT_EQUAL(tsj_int_opt(r, "missing", 0, 10, 7, &v, "t.json", NULL, &e), 0);
  CU_ASSERT_EQUAL(v, 7);
  CU_ASSERT_EQUAL(tsj_int_opt(r, "n", 0, 4, 7, &v, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "n: 8 is out of range [0, 4]");
  json_decref(r);
}

static void test_real_getter(void) {
  ts_err e;
  double x = 0;
  json_t *r = parse("{\"i\": 3, \"f\": 0.25, \"s\": \"0.5\", \"huge\": 1e308}");
  CU_ASSERT_EQUAL(tsj_real(r, "i", 0, 10, &x, "t.json", "codec", &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(x, 3.0, 0.0);
  CU_ASSERT_EQUAL(tsj_real(r, "f", 0, 1, &x, "t.json", "codec", &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(x, 0.25, 0.0);
  CU_ASSERT_EQUAL(tsj_real(r, "f", 0.5, 1, &x, "t.json", "codec", &e), -1);
  ASSERT_MSG(e, "t.json: codec.f: 0.25 is out of range");
  CU_ASSERT_EQUAL(tsj_real(r, "s", 0, 1, &x, "t.json", NULL, &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: s: must be a number");
  CU_ASSERT_EQUAL(tsj_real(r, "huge", 0, 1e6, &x, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "huge: 1e+308 is out of range");
  CU_ASSERT_EQUAL(tsj_real(r, "none", 0, 1, &x, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "none: missing (a number is required)");
  CU_ASSERT_EQUAL(tsj_real_opt(r, "none", 0, 1, 0.5, &x, "t.json", NULL, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(x, 0.5, 0.0);
  json_decref(r);
}

static void test_bool_getter(void) {
  ts_err e;
  bool b = false;
  json_t *r = parse("{\"t\": true, \"one\": 1, \"s\": \"true\"}");
  CU_ASSERT_EQUAL(tsj_bool(r, "t", &b, "t.json", NULL, &e), 0);
  CU_ASSERT_TRUE(b);
  CU_ASSERT_EQUAL(tsj_bool(r, "one", &b, "t.json", NULL, &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: one: must be true or false");
  CU_ASSERT_EQUAL(tsj_bool(r, "s", &b, "t.json", NULL, &e), -1);
  CU_ASSERT_EQUAL(tsj_bool(r, "none", &b, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "none: missing");
  CU_ASSERT_EQUAL(tsj_bool_opt(r, "none", true, &b, "t.json", NULL, &e), 0);
  CU_ASSERT_TRUE(b);
  CU_ASSERT_EQUAL(tsj_bool_opt(r, "one", true, &b, "t.json", NULL, &e), -1);
  json_decref(r);
}

static void test_string_getter(void) {
  ts_err e;
  char out[8];
  /* An embedded NUL never reaches a getter: the parser refuses it. */
  const char nul[] = "{\"nul\": \"a\\u0000b\"}";
  CU_ASSERT_PTR_NULL(tsj_load_string(nul, strlen(nul), "t.json", &e));
  ASSERT_MSG(e, "t.json: invalid JSON");
  json_t *r = parse("{\"ok\": \"abc\", \"empty\": \"\", \"long\": \"abcdefgh\", \"n\": 3}");
  CU_ASSERT_EQUAL(tsj_string(r, "ok", out, sizeof out, "t.json", NULL, &e), 0);
  CU_ASSERT_STRING_EQUAL(out, "abc");
  CU_ASSERT_EQUAL(tsj_string(r, "empty", out, sizeof out, "t.json", NULL, &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: empty: must not be empty");
  CU_ASSERT_EQUAL(tsj_string(r, "long", out, sizeof out, "t.json", NULL, &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: long: is 8 characters long (at most 7)");
  CU_ASSERT_EQUAL(tsj_string(r, "n", out, sizeof out, "t.json", NULL, &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: n: must be a string");
  CU_ASSERT_EQUAL(tsj_string_opt(r, "none", "dflt", out, sizeof out, "t.json", NULL, &e), 0);
  CU_ASSERT_STRING_EQUAL(out, "dflt");
  json_decref(r);
}

static void test_enum_getter(void) {
  ts_err e;
  static const char *const names[] = {"none", "taco", "caat", NULL};
  int idx = -1;
  json_t *r = parse("{\"kind\": \"caat\", \"bad\": \"zip\", \"num\": 1}");
  CU_ASSERT_EQUAL(tsj_enum(r, "kind", names, &idx, "t.json", "codec.tp_fwd", &e), 0);
  CU_ASSERT_EQUAL(idx, 2);
  CU_ASSERT_EQUAL(tsj_enum(r, "bad", names, &idx, "t.json", "codec.tp_fwd", &e), -1);
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: codec.tp_fwd.bad: \"zip\" is not one of \"none\", \"taco\", \"caat\"");
  CU_ASSERT_EQUAL(tsj_enum(r, "num", names, &idx, "t.json", NULL, &e), -1);
  ASSERT_MSG(e, "num: must be a string");
  CU_ASSERT_EQUAL(tsj_enum_opt(r, "none", names, 1, &idx, "t.json", NULL, &e), 0);
  CU_ASSERT_EQUAL(idx, 1);
  json_decref(r);
}

static void test_object_getters(void) {
  ts_err e;
  bool failed = true;
  json_t *r = parse("{\"layout\": {\"tp\": 2}, \"codec\": 3}");
  json_t *layout = tsj_object(r, "layout", "t.json", NULL, &e);
  CU_ASSERT_PTR_NOT_NULL(layout);
  long long tp = 0;
  CU_ASSERT_EQUAL(tsj_int(layout, "tp", 1, 8, &tp, "t.json", "layout", &e), 0);
  CU_ASSERT_EQUAL(tp, 2);
  CU_ASSERT_PTR_NULL(tsj_object(r, "codec", "t.json", NULL, &e));
  CU_ASSERT_STRING_EQUAL(e.msg, "t.json: codec: must be an object");
  CU_ASSERT_PTR_NULL(tsj_object(r, "batch", "t.json", NULL, &e));
  ASSERT_MSG(e, "batch: missing (an object is required)");
  CU_ASSERT_PTR_NULL(tsj_object_opt(r, "batch", "t.json", NULL, &e, &failed));
  CU_ASSERT_FALSE(failed);
  CU_ASSERT_PTR_NULL(tsj_object_opt(r, "codec", "t.json", NULL, &e, &failed));
  CU_ASSERT_TRUE(failed);
  json_decref(r);
}

static void test_schema_getter(void) {
  ts_err e;
  json_t *r = parse("{\"schema\": 2}");
  CU_ASSERT_EQUAL(tsj_schema(r, 1, "t.json", &e), -1);
  ASSERT_MSG(e, "t.json: schema: version 2 is not supported");
  json_decref(r);
  r = parse("{\"schema\": \"1\"}");
  CU_ASSERT_EQUAL(tsj_schema(r, 1, "t.json", &e), -1);
  ASSERT_MSG(e, "schema: must be an integer");
  json_decref(r);
  r = parse("{}");
  CU_ASSERT_EQUAL(tsj_schema(r, 1, "t.json", &e), -1);
  ASSERT_MSG(e, "schema: missing");
  json_decref(r);
}

/* ---- ts_read_file: the one reader of input files ---- */

static void write_file(const char *path, const char *text, size_t len) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fwrite(text, 1, len, f), len);
  fclose(f);
}

static void test_read_file_whole(void) {
  char dir[] = "/tmp/tacosim_test_read_XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/a.json", dir);
  write_file(path, "{\"a\": 1}\n", 9);
  ts_err e = {0};
  size_t len = 99;
  char *text = ts_read_file(path, 0, &len, &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  CU_ASSERT_EQUAL(len, 9);
  CU_ASSERT_STRING_EQUAL(text, "{\"a\": 1}\n");
  free(text);
  /* a cap of exactly the size reads it, one byte less refuses it with both figures */
  text = ts_read_file(path, 9, &len, &e);
  CU_ASSERT_PTR_NOT_NULL(text);
  free(text);
  CU_ASSERT_PTR_NULL(ts_read_file(path, 8, &len, &e));
  ASSERT_MSG(e, ": is 9 bytes, over the limit of 8 bytes on input files");
  CU_ASSERT_EQUAL(e.bad_input, 1);
  /* an empty file reads as empty text; tsj_load_file names it */
  write_file(path, "", 0);
  text = ts_read_file(path, 0, &len, &e);
  CU_ASSERT_PTR_NOT_NULL(text);
  CU_ASSERT_EQUAL(len, 0);
  free(text);
  CU_ASSERT_PTR_NULL(tsj_load_file(path, &e));
  ASSERT_MSG(e, "a.json: is empty");
  CU_ASSERT_EQUAL(e.bad_input, 1);
  unlink(path);
  rmdir(dir);
}

/* A directory is named as one, by the reader and by every loader built on it. */
static void test_read_file_directory(void) {
  char dir[] = "/tmp/tacosim_test_read_XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
  ts_err e = {0};
  size_t len;
  char want[300];
  snprintf(want, sizeof want, "%s: is a directory", dir);
  CU_ASSERT_PTR_NULL(ts_read_file(dir, 0, &len, &e));
  ASSERT_MSG(e, want);
  CU_ASSERT_EQUAL(e.bad_input, 1);
  CU_ASSERT_PTR_NULL(tsj_load_file(dir, &e));
  ASSERT_MSG(e, want);
  CU_ASSERT_EQUAL(ts_exit_status(&e), TS_EXIT_BAD_INPUT);
  rmdir(dir);
}

/* Over TS_MAX_INPUT_BYTES: refused from its size before a byte is read (a sparse
 * file: no disk used); a device with no size (/dev/zero) is cut at the cap. */
static void test_read_file_cap(void) {
  char path[] = "/tmp/tacosim_test_big_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  CU_ASSERT_EQUAL(ftruncate(fd, (off_t)TS_MAX_INPUT_BYTES + 1), 0);
  close(fd);
  ts_err e = {0};
  size_t len;
  char want[128];
  snprintf(want, sizeof want, ": is %lu bytes, over the limit of %lu bytes (%lu MiB)",
           (unsigned long)TS_MAX_INPUT_BYTES + 1, (unsigned long)TS_MAX_INPUT_BYTES,
           (unsigned long)(TS_MAX_INPUT_BYTES >> 20));
  CU_ASSERT_PTR_NULL(tsj_load_file(path, &e));
  ASSERT_MSG(e, path);
  ASSERT_MSG(e, want);
  CU_ASSERT_EQUAL(e.bad_input, 1);
  unlink(path);
  CU_ASSERT_PTR_NULL(ts_read_file("/dev/zero", 1000, &len, &e));
  ASSERT_MSG(e, "/dev/zero: is more than 1000 bytes, over the limit of 1000 bytes");
  char *text = ts_read_file("/dev/null", 1000, &len, &e);
  CU_ASSERT_PTR_NOT_NULL(text);
  CU_ASSERT_EQUAL(len, 0);
  free(text);
  CU_ASSERT_PTR_NULL(ts_read_file("/nonexistent/x.json", 0, &len, &e));
  ASSERT_MSG(e, "/nonexistent/x.json: cannot read file (No such file or directory)");
}

/* The knobs a run records: its families only, sorted, cut safely. */
extern char **environ;
static void clear_knobs(void) {
  char name[256];
  for (int again = 1; again;) {
    again = 0;
    for (char **v = environ; *v; v++)
      if (ts_env_is_knob(*v)) {
        snprintf(name, sizeof name, "%.*s", (int)(strchr(*v, '=') - *v), *v);
        unsetenv(name);
        again = 1;
        break;
      }
  }
}

static void test_env_knobs(void) {
  char buf[512];
  clear_knobs();
  CU_ASSERT_EQUAL(ts_env_knobs(buf, sizeof buf), 0);
  CU_ASSERT_STRING_EQUAL(buf, "");
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("EXEC_NO_OVERLAP", "1", 1);
  setenv("EXEC_ATTN", "unfused", 1);
  setenv("TACO_TILING", "warp", 1);       /* read by nothing now: the codec's variants are options */
  setenv("TACORUN_RANK", "1", 1);         /* a launch variable, not an option */
  setenv("TACOSIM_MODELS_DIR", "/tmp", 1); /* a path, not an option */
  CU_ASSERT_EQUAL(ts_env_knobs(buf, sizeof buf), 3);
  CU_ASSERT_STRING_EQUAL(buf, " EXEC_ATTN=unfused EXEC_NO_OVERLAP=1 NCCL_P2P_DISABLE=1");
  char small[24];
  CU_ASSERT_EQUAL(ts_env_knobs(small, sizeof small), 3);
  CU_ASSERT_STRING_EQUAL(small, " EXEC_ATTN=unfused ...");
  CU_ASSERT(!ts_env_is_knob("TACORUN_ID_FILE=x") && !ts_env_is_knob("TACOSIM_TOPOLOGIES_DIR=x"));
  clear_knobs();
  unsetenv("TACORUN_RANK"), unsetenv("TACOSIM_MODELS_DIR"), unsetenv("TACO_TILING");
}

/* tsj_dump_data: points on one line, the rest one member per line; what it
 * writes reads back equal. */
static void test_dump_data(void) {
  json_t *v = json_pack("{s:i,s:{s:[{s:i,s:f},{s:i,s:f}]},s:[],s:s}", "schema", 1, "colls", "allreduce", "bytes", 4096,
                        "us", 9.5, "bytes", 8192, "us", 12.25, "empty", "notes", "a \"b\"");
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL(tsj_dump_data(v, f, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)), 0);
  fclose(f);
  CU_ASSERT_STRING_EQUAL(buf, "{\n \"schema\": 1,\n \"colls\": {\n  \"allreduce\": [\n   {\"bytes\":4096,\"us\":9.5},\n"
                              "   {\"bytes\":8192,\"us\":12.25}\n  ]\n },\n \"empty\": [],\n \"notes\": \"a \\\"b\\\"\"\n}\n");
  ts_err e;
  json_t *back = tsj_load_string(buf, len, "dump", &e);
  CU_ASSERT_PTR_NOT_NULL_FATAL(back);
  CU_ASSERT(json_equal(v, back));
  json_decref(back);
  json_decref(v);
  free(buf);
}

/* The collective table against nccl-tests' definitions (PERFORMANCE.md of
 * nccl-tests: busbw factors 2(n-1)/n all-reduce, (n-1)/n all-gather,
 * reduce-scatter, all-to-all, 1 send/recv) and the ring's latency steps. */
static void test_coll_table(void) {
  for (int n = 1; n <= 64; n *= 2) {
    double f = (n - 1.0) / n;
    CU_ASSERT_DOUBLE_EQUAL(ts_coll_busbw_factor(TS_COLL_ALLREDUCE, n), 2 * f, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ts_coll_busbw_factor(TS_COLL_ALLGATHER, n), f, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ts_coll_busbw_factor(TS_COLL_REDUCESCATTER, n), f, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ts_coll_busbw_factor(TS_COLL_ALLTOALL, n), f, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(ts_coll_busbw_factor(TS_COLL_SENDRECV, n), 1.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(ts_coll_steps(TS_COLL_ALLREDUCE, n), 2.0 * (n - 1), 0);
    CU_ASSERT_DOUBLE_EQUAL(ts_coll_steps(TS_COLL_ALLGATHER, n), n - 1.0, 0);
    CU_ASSERT_DOUBLE_EQUAL(ts_coll_steps(TS_COLL_SENDRECV, n), 1.0, 0);
  }
  CU_ASSERT_EQUAL(ts_coll_busbw_factor(TS_COLL_ALLREDUCE, 0), 0.0);
  CU_ASSERT_EQUAL(ts_coll_busbw_factor(TS_COLL_COUNT, 4), 0.0);
  /* the name list and the table are one */
  for (int i = 0; i < TS_COLL_COUNT; i++) {
    ts_coll c = TS_COLL_COUNT;
    CU_ASSERT_STRING_EQUAL(ts_coll_names[i], ts_colls[i].name);
    CU_ASSERT(ts_coll_parse(ts_coll_names[i], &c) == 0 && c == (ts_coll)i);
  }
  CU_ASSERT_PTR_NULL(ts_coll_names[TS_COLL_COUNT]);
  for (int i = 0; i < TS_CODEC_COUNT; i++) CU_ASSERT_STRING_EQUAL(ts_codec_names[i], ts_codecs[i].name);
  CU_ASSERT_PTR_NULL(ts_codec_names[TS_CODEC_COUNT]);
  /* calibration keys: a collective, then optionally a codec */
  ts_coll c;
  CU_ASSERT(ts_coll_of_key("allreduce.taco128.fp32.infer", &c) == 0 && c == TS_COLL_ALLREDUCE);
  CU_ASSERT(ts_coll_of_key("sendrecv", &c) == 0 && c == TS_COLL_SENDRECV);
  CU_ASSERT_EQUAL(ts_coll_of_key("allreducex", &c), -1);
  CU_ASSERT_EQUAL(ts_coll_parse("allreduce.taco128", &c), -1);
  CU_ASSERT_EQUAL(ts_coll_of_key("broadcast", &c), -1);
  /* the codecs: what travels */
  CU_ASSERT(ts_codecs[TS_CODEC_TACO_CAAT].taco && ts_codecs[TS_CODEC_TACO_CAAT].caat);
  CU_ASSERT(!ts_codecs[TS_CODEC_NONE].taco && !ts_codecs[TS_CODEC_NONE].caat);
  CU_ASSERT_DOUBLE_EQUAL(ts_taco_wire_elements(256, 128), 256 + 16, 0);
  CU_ASSERT_DOUBLE_EQUAL(ts_taco_wire_elements(129, 128), 129 + 16, 0);
  CU_ASSERT_DOUBLE_EQUAL(ts_taco_wire_elements(100, 0), 100, 0);
}

/* Option values (common/ts_args.h): ranges, suffixes, lists, and what is refused. */
static void test_args(void) {
  int i = 7;
  long long ll = 0, v[4];
  double d = 0;
  size_t b = 0;
  CU_ASSERT(ts_arg_is_help("--help") && ts_arg_is_help("-h") && !ts_arg_is_help("--helpx") && !ts_arg_is_help(NULL));
  int quick = 0, graph = 0;
  const ts_arg_flag flags[] = {{"--quick", &quick}, {"--graph", &graph}};
  CU_ASSERT_EQUAL(ts_arg_set_flag("--graph", flags, 2), 1);
  CU_ASSERT(graph == 1 && quick == 0);
  CU_ASSERT_EQUAL(ts_arg_set_flag("--quic", flags, 2), 0);
  CU_ASSERT_EQUAL(quick, 0);
  CU_ASSERT_EQUAL(ts_arg_int("42", 1, 100, &i), 0);
  CU_ASSERT_EQUAL(i, 42);
  CU_ASSERT_EQUAL(ts_arg_int("0", 1, 100, &i), -1);
  CU_ASSERT_EQUAL(ts_arg_int("101", 1, 100, &i), -1);
  CU_ASSERT_EQUAL(ts_arg_int("12x", 1, 100, &i), -1);
  CU_ASSERT_EQUAL(ts_arg_int("", 1, 100, &i), -1);
  CU_ASSERT_EQUAL(ts_arg_int("99999999999999999999", 0, 100, &i), -1);
  CU_ASSERT_EQUAL(i, 42); /* untouched by the refusals */
  CU_ASSERT_EQUAL(ts_arg_ll("-5", -10, 10, &ll), 0);
  CU_ASSERT_EQUAL(ll, -5);
  CU_ASSERT_EQUAL(ts_arg_double("0.5", 0, 1, &d), 0);
  CU_ASSERT_DOUBLE_EQUAL(d, 0.5, 0);
  CU_ASSERT_EQUAL(ts_arg_double("nan", 0, 1, &d), -1);
  CU_ASSERT_EQUAL(ts_arg_double("1.5", 0, 1, &d), -1);
  CU_ASSERT_EQUAL(ts_arg_double("0.5s", 0, 1, &d), -1);
  CU_ASSERT_EQUAL(ts_arg_bytes("4096", &b), 0);
  CU_ASSERT_EQUAL(b, 4096);
  CU_ASSERT_EQUAL(ts_arg_bytes("1.5M", &b), 0);
  CU_ASSERT_EQUAL(b, 1572864);
  CU_ASSERT_EQUAL(ts_arg_bytes("64MB", &b), 0);
  CU_ASSERT_EQUAL(b, (size_t)64 << 20);
  CU_ASSERT_EQUAL(ts_arg_bytes("1g", &b), 0);
  CU_ASSERT_EQUAL(b, (size_t)1 << 30);
  CU_ASSERT_EQUAL(ts_arg_bytes("-1", &b), -1);
  CU_ASSERT_EQUAL(ts_arg_bytes("3T", &b), -1);
  CU_ASSERT_EQUAL(ts_arg_bytes("M", &b), -1);
  CU_ASSERT_EQUAL(ts_arg_ll_list("1,16,64", 1, 64, v, 4), 3);
  CU_ASSERT(v[0] == 1 && v[1] == 16 && v[2] == 64);
  CU_ASSERT_EQUAL(ts_arg_ll_list("1,2,3,4,5", 1, 64, v, 4), -1);
  CU_ASSERT_EQUAL(ts_arg_ll_list("1,,2", 1, 64, v, 4), -1);
  CU_ASSERT_EQUAL(ts_arg_ll_list("1,", 1, 64, v, 4), -1);
  CU_ASSERT_EQUAL(ts_arg_ll_list("0", 1, 64, v, 4), -1);
  CU_ASSERT_EQUAL(ts_arg_ll_list("", 1, 64, v, 4), -1);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return CU_get_error();
  CU_pSuite s = CU_add_suite("common", NULL, NULL);
  CU_add_test(s, "ts_fail formats file: field: reason", test_fail_formats_file_field_reason);
  CU_add_test(s, "option values (ts_args)", test_args);
  CU_add_test(s, "ts_fail_sys is not bad input", test_fail_sys_is_not_bad_input);
  CU_add_test(s, "long messages are truncated safely", test_fail_truncates_long_messages);
  CU_add_test(s, "tsj_load_string rejects bad JSON", test_load_string_rejects_bad_json);
  CU_add_test(s, "tsj_load_file", test_load_file);
  CU_add_test(s, "ts_read_file reads a whole file, its cap exactly", test_read_file_whole);
  CU_add_test(s, "a directory is named as one", test_read_file_directory);
  CU_add_test(s, "a file over TS_MAX_INPUT_BYTES is refused by name", test_read_file_cap);
  CU_add_test(s, "tsj_int", test_int_getter);
  CU_add_test(s, "tsj_real", test_real_getter);
  CU_add_test(s, "tsj_bool", test_bool_getter);
  CU_add_test(s, "tsj_string", test_string_getter);
  CU_add_test(s, "tsj_enum", test_enum_getter);
  CU_add_test(s, "tsj_object", test_object_getters);
  CU_add_test(s, "tsj_schema", test_schema_getter);
  CU_add_test(s, "ts_env_knobs: the recorded families, sorted, cut safely", test_env_knobs);
  CU_add_test(s, "ts_coll: one table of collectives and codecs", test_coll_table);
  CU_add_test(s, "tsj_dump_data: one point per line, reads back equal", test_dump_data);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  return failures ? 1 : 0;
}

/* test_sim_schema.c — calibration and result files: loader rules, writer
 * round trips, lookups (interpolation, roofline outside, missing tables). */
#define _XOPEN_SOURCE 700 /* POSIX 2008 and nftw */
#include <CUnit/Basic.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "result.h"
#include "sim.h"
#include "sim_costs.h"
#include "test_cal_round_trip.h"
#include "test_check.h"

static const char *valid =
    "{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"13.0\",\"nccl\":\"2.28\",\"transport\":\"nvlink\","
    "\"measured_at\":\"now\",\"gemm\":[{\"m\":1024,\"n\":1024,\"k\":1024,\"us\":10},"
    "{\"m\":4096,\"n\":1024,\"k\":1024,\"us\":40}],"
    "\"kernels\":{\"norm\":[{\"bytes\":1000,\"us\":2},{\"bytes\":100000,\"us\":20}],"
    "\"taco_encode\":[{\"bytes\":1000,\"group\":128,\"us\":3},{\"bytes\":100000,\"group\":128,\"us\":30}]},"
    "\"collectives\":{\"allreduce\":{\"2\":[{\"bytes\":1048576,\"us\":100},{\"bytes\":4194304,\"us\":400}]}},"
    "\"fits\":{\"allreduce.2\":{\"latency_us\":1,\"gbps\":10}}}";

static void test_valid_loads(void) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(valid, strlen(valid), "v.json", &c, &e), 0);
  CU_ASSERT_EQUAL(c.n_gemm, 2);
  CU_ASSERT_EQUAL(c.n_kernels, 2);
  CU_ASSERT_EQUAL(c.n_colls, 1);
  CU_ASSERT_EQUAL(c.colls[0].nranks, 2);
  CU_ASSERT_FALSE(c.derived);
  schema_calibration_free(&c);
}

/* Each malformed file must be rejected with a message naming the field. */
static void test_malformed_rejected(void) {
  struct {
    const char *text, *field;
  } cases[] = {
      {"{", "invalid JSON"},
      {"[]", "top level"},
      {"{\"schema\":2,\"gpu\":\"G\"}", "schema"},
      {"{\"schema\":1,\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\",\"measured_at\":\"m\","
       "\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1}]}",
       "gpu"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\"}",
       "no tables"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"gemm\":[{\"m\":-1,\"n\":1,\"k\":1,\"us\":1}]}",
       "gemm[0].m"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":\"fast\"}]}",
       "gemm[0].us"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":0}]}",
       "gemm[0].us"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1},{\"m\":1,\"n\":1,\"k\":1,\"us\":2}]}",
       "duplicate"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1,\"extra\":0}]}",
       "gemm[0].extra"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"kernels\":{\"norm\":[]}}",
       "kernels.norm"},
      /* two keys the writer (8 significant digits) could not tell apart: one point (fuzz_calibration) */
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"kernels\":{\"attention\":[{\"flops\":1000000000.0,\"us\":10},"
       "{\"flops\":1000000000.8,\"us\":2500}]}}",
       "kernels.attention[1]: duplicate point"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"kernels\":{\"norm\":[{\"bytes\":1e300,\"us\":1}]}}",
       "kernels.norm[0].bytes"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"collectives\":{\"allreduse\":{\"2\":[{\"bytes\":1,\"us\":1}]}}}",
       "collectives.allreduse"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"collectives\":{\"allreduce.taco100\":{\"2\":[{\"bytes\":1,\"us\":1}]}}}",
       "collectives.allreduce.taco100"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"collectives\":{\"allreduce.taco128.fp16\":{\"2\":[{\"bytes\":1,\"us\":1}]}}}",
       "collectives.allreduce.taco128.fp16"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"collectives\":{\"allreduce\":{\"one\":[{\"bytes\":1,\"us\":1}]}}}",
       "collectives.allreduce.one"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"collectives\":{\"allreduce\":{\"1\":[{\"bytes\":1,\"us\":1}]}}}",
       "collectives.allreduce.1"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"collectives\":{\"allreduce\":{\"2\":{\"bytes\":1}}}}",
       "collectives.allreduce.2"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1}],\"fits\":{\"x\":{\"latency_us\":-1,"
       "\"gbps\":1}}}",
       "fits.x.latency_us"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1}],\"derived\":\"yes\"}",
       "derived"},
      {"{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","
       "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1}],\"tables\":{}}",
       "tables"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    schema_calibration c;
    ts_err e = {0};
    int rc = schema_calibration_from_json_text(cases[i].text, strlen(cases[i].text), "bad.json", &c, &e);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_TRUE(e.bad_input);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.json"));
    if (!strstr(e.msg, cases[i].field)) fprintf(stderr, "case %zu: \"%s\" lacks \"%s\"\n", i, e.msg, cases[i].field);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].field));
  }
}

static void test_missing_file(void) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL(schema_calibration_load("/nonexistent/cal.json", &c, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "/nonexistent/cal.json"));
}

/* Writing and reading back gives the same tables; the derived file round-trips too. */
static void test_round_trip(void) {
  schema_calibration a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_derive_calibration("shm", &a, &e), 0);
  CU_ASSERT_TRUE(a.derived);
  /* a table of TACO on FP32 payloads round-trips too (its name is accepted) */
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_coll(&a, "reducescatter.taco256.fp32", 2, 4096.0, 12.5), 0);
  CU_ASSERT_EQUAL_FATAL(test_cal_round_trip(&a, "rt.json", &b, &e), 0);
  CU_ASSERT_EQUAL(a.n_gemm, b.n_gemm);
  CU_ASSERT_EQUAL(a.n_kernels, b.n_kernels);
  CU_ASSERT_EQUAL(a.n_colls, b.n_colls);
  CU_ASSERT_EQUAL(a.n_fits, b.n_fits);
  CU_ASSERT_TRUE(b.derived);
  for (int i = 0; i < a.n_gemm && i < b.n_gemm; i++) NEAR(a.gemm[i].us, b.gemm[i].us, 1e-7);
  for (int i = 0; i < a.n_colls && i < b.n_colls; i++) {
    CU_ASSERT_STRING_EQUAL(a.colls[i].name, b.colls[i].name);
    CU_ASSERT_EQUAL(a.colls[i].n, b.colls[i].n);
    for (int k = 0; k < a.colls[i].n && k < b.colls[i].n; k++) NEAR(a.colls[i].pts[k].us, b.colls[i].pts[k].us, 1e-7);
  }
  schema_calibration_free(&a);
  schema_calibration_free(&b);
  ts_err e2 = {0};
  CU_ASSERT_EQUAL(sim_derive_calibration("carrier-pigeon", &a, &e2), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e2.msg, "transport"));
}

/* "gemm_wgrad": a weight gradient's own timings of shapes "gemm" also holds;
 * written and read back, sorted, found by exact shape only, repeats refused. */
static void test_gemm_wgrad(void) {
  static const char text[] =
      "{\"schema\":1,\"gpu\":\"g\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"nvlink\","
      "\"measured_at\":\"t\",\"gemm\":[{\"m\":4096,\"n\":8192,\"k\":2048,\"us\":100},"
      "{\"m\":8192,\"n\":8192,\"k\":2048,\"us\":200}],"
      "\"gemm_wgrad\":[{\"m\":8192,\"n\":8192,\"k\":2048,\"us\":260},{\"m\":4096,\"n\":8192,\"k\":2048,\"us\":130}]}";
  schema_calibration a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, strlen(text), "w.json", &a, &e), 0);
  CU_ASSERT_EQUAL(a.n_gemm_wgrad, 2);
  CU_ASSERT_EQUAL(a.gemm_wgrad[0].m, 4096); /* sorted like "gemm" */
  double us = 0;
  CU_ASSERT_EQUAL(schema_gemm_wgrad_us(&a, 8192, 8192, 2048, &us), 1);
  NEAR(us, 260, 1e-12);
  CU_ASSERT_EQUAL(schema_gemm_wgrad_us(&a, 4096, 8192, 2048, &us), 1);
  NEAR(us, 130, 1e-12);
  CU_ASSERT_EQUAL(schema_gemm_wgrad_us(&a, 6144, 8192, 2048, &us), 0); /* exact shapes only */
  CU_ASSERT_EQUAL(schema_gemm_wgrad_us(&a, 8192, 2048, 8192, &us), 0);
  /* the other lookups read "gemm" */
  schema_roofline roof = {1e15, 4e12, 4e11, 3, 1};
  schema_lookup l;
  schema_lookup_init(&l, &a, &roof, NULL);
  CU_ASSERT_EQUAL(schema_lookup_gemm(&l, 8192, 8192, 2048, &us, &e), 0);
  NEAR(us, 200, 1e-9);
  CU_ASSERT_EQUAL_FATAL(test_cal_round_trip(&a, "rt.json", &b, &e), 0);
  CU_ASSERT_EQUAL(b.n_gemm_wgrad, 2);
  for (int i = 0; i < 2 && i < b.n_gemm_wgrad; i++) NEAR(a.gemm_wgrad[i].us, b.gemm_wgrad[i].us, 1e-9);
  schema_calibration_free(&b);
  schema_calibration c;
  CU_ASSERT_EQUAL_FATAL(schema_calibration_copy_compute(memset(&c, 0, sizeof c), &a), 0);
  CU_ASSERT_EQUAL(c.n_gemm_wgrad, 2);
  schema_calibration_free(&c);
  schema_calibration_free(&a);
  static const char repeat[] =
      "{\"schema\":1,\"gpu\":\"g\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"nvlink\","
      "\"measured_at\":\"t\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":5}],"
      "\"gemm_wgrad\":[{\"m\":2,\"n\":2,\"k\":2,\"us\":5},{\"m\":2,\"n\":2,\"k\":2,\"us\":6}]}";
  CU_ASSERT_NOT_EQUAL(schema_calibration_from_json_text(repeat, strlen(repeat), "r.json", &a, &e), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "gemm_wgrad[1]"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "duplicate"));
}

/* Inside the range, log-space interpolation is exact for a power law. */
static void test_lookup_interpolates(void) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(valid, strlen(valid), "v.json", &c, &e), 0);
  schema_roofline roof = {1e15, 4e12, 4e11, 3, 1};
  schema_lookup l;
  schema_lookup_init(&l, &c, &roof, NULL);
  double us;
  /* norm: t = 2 (x/1000)^0.5 between the points */
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "norm", 10000, 0, &us, &e), 0);
  NEAR(us, 2.0 * sqrt(10.0), 1e-9);
  /* gemm along m with the same n, k: linear here */
  CU_ASSERT_EQUAL(schema_lookup_gemm(&l, 2048, 1024, 1024, &us, &e), 0);
  NEAR(us, 20.0, 1e-9);
  /* exact point */
  CU_ASSERT_EQUAL(schema_lookup_coll(&l, "allreduce", 2, 1048576, &us, &e), 0);
  NEAR(us, 100.0, 1e-12);
  /* other nranks: scaled by the bus-bandwidth factor 2(n-1)/n */
  CU_ASSERT_EQUAL(schema_lookup_coll(&l, "allreduce", 8, 1048576, &us, &e), 0);
  NEAR(us, 100.0 * (2.0 * 7 / 8) / 1.0, 1e-9);
  schema_calibration_free(&c);
}

/* A decode attention table asked for more (sequence, KV head) pairs than it measured: extrapolated along the
 * group axis at equal bytes a pair from its two largest groups (here t = 10 us + pairs x bytes a pair / 10,240 us,
 * whose line the rule continues exactly), not the largest group's curve at the same total bytes (which would
 * read 4,096 pairs of 100 bytes as 2,048 of 200: 50 us, the long rows' rate); a grouped table of another kind
 * keeps its nearest group. */
static void test_lookup_decode_attention_beyond_groups(void) {
  static const char text[] =
      "{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"13.0\",\"nccl\":\"2.28\",\"transport\":\"nvlink\","
      "\"measured_at\":\"now\",\"kernels\":{\"attention_decode_fp8.g1\":["
      "{\"bytes\":102400,\"group\":1024,\"us\":20},{\"bytes\":204800,\"group\":1024,\"us\":30},"
      "{\"bytes\":204800,\"group\":2048,\"us\":30},{\"bytes\":409600,\"group\":2048,\"us\":50}],"
      "\"taco_encode\":[{\"bytes\":102400,\"group\":1024,\"us\":20},{\"bytes\":204800,\"group\":1024,\"us\":30},"
      "{\"bytes\":204800,\"group\":2048,\"us\":30},{\"bytes\":409600,\"group\":2048,\"us\":50}]}}";
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, strlen(text), "d.json", &c, &e), 0);
  schema_roofline roof = {1e15, 4e12, 4e11, 3, 1};
  char *buf = NULL;
  size_t len = 0;
  FILE *warn = open_memstream(&buf, &len);
  schema_lookup l;
  schema_lookup_init(&l, &c, &roof, warn);
  double us;
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "attention_decode_fp8.g1", 4096 * 100.0, 4096, &us, &e), 0);
  NEAR(us, 50.0, 1e-9); /* 30 + 2,048 x (30 - 20) / 1,024 */
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "attention_decode_fp8.g1", 4096 * 200.0, 4096, &us, &e), 0);
  NEAR(us, 90.0, 1e-9); /* 50 + 2,048 x (50 - 30) / 1,024 */
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "attention_decode_fp8.g1", 8192 * 100.0, 8192, &us, &e), 0);
  NEAR(us, 90.0, 1e-9);
  /* inside the measured groups: the group's own curve, as before */
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "attention_decode_fp8.g1", 409600, 2048, &us, &e), 0);
  NEAR(us, 50.0, 1e-9);
  /* another grouped table: the nearest group's curve at the same bytes */
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "taco_encode", 409600, 4096, &us, &e), 0);
  NEAR(us, 50.0, 1e-9);
  fclose(warn);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "group 4096 beyond the measured range"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "kernel taco_encode: group 4096 not measured, using group 2048"));
  free(buf);
  schema_calibration_free(&c);
}

/* GEMMs interpolate along the one dimension their measured neighbours vary in:
 * k for wgrad shapes (k = tokens), m first when both bracket; a shape sharing
 * no two dimensions with a measured one is priced by the nearest shapes, with a warning. */
static void test_lookup_gemm_dimensions(void) {
  static const char text[] =
      "{\"schema\":1,\"gpu\":\"g\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"nvlink\","
      "\"measured_at\":\"m\",\"gemm\":["
      "{\"m\":4096,\"n\":1024,\"k\":1024,\"us\":10},{\"m\":4096,\"n\":1024,\"k\":4096,\"us\":80},"
      "{\"m\":1024,\"n\":512,\"k\":512,\"us\":3},{\"m\":4096,\"n\":512,\"k\":512,\"us\":12},"
      "{\"m\":2048,\"n\":512,\"k\":256,\"us\":1},{\"m\":2048,\"n\":512,\"k\":1024,\"us\":100}]}";
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, strlen(text), "g.json", &c, &e), 0);
  schema_roofline roof = {1e15, 4e12, 4e11, 3, 1};
  char *buf = NULL;
  size_t len = 0;
  FILE *warn = open_memstream(&buf, &len);
  schema_lookup l;
  schema_lookup_init(&l, &c, &roof, warn);
  double us;
  /* wgrad-like: only k varies between (4096, 1024, 1024) and (4096, 1024, 4096); log-log: 10 * 2^1.5 */
  CU_ASSERT_EQUAL(schema_lookup_gemm(&l, 4096, 1024, 2048, &us, &e), 0);
  NEAR(us, 10.0 * pow(2.0, 1.5), 1e-9);
  /* (2048, 512, 512) is bracketed along m (3 -> 12, linear: 6) and along k (1 -> 100): m wins */
  CU_ASSERT_EQUAL(schema_lookup_gemm(&l, 2048, 512, 512, &us, &e), 0);
  NEAR(us, 6.0, 1e-9);
  /* exact point */
  CU_ASSERT_EQUAL(schema_lookup_gemm(&l, 4096, 512, 512, &us, &e), 0);
  NEAR(us, 12.0, 1e-12);
  CU_ASSERT_PTR_NULL(buf && len ? strstr(buf, "gemm") : NULL);
  /* nothing shares two dimensions: the nearest shapes' efficiency, warned */
  CU_ASSERT_EQUAL(schema_lookup_gemm(&l, 3000, 700, 900, &us, &e), 0);
  CU_ASSERT_TRUE(us > 0);
  fflush(warn);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "gemm (nearest shapes)"));
  fclose(warn);
  free(buf);
  schema_calibration_free(&c);
}

/* A shape sharing no two dimensions with a measured one: the latency floor
 * plus its roofline time over the neighbours' efficiency, weighted by
 * 1 / distance^2 in (ln m, ln n, ln k). By hand, on a compute-bound roofline
 * (1e15 FLOP/s): A = 1024^3 runs at its roofline (2.147483648 us, efficiency
 * 1, so the floor is 0), B = 4096^3 at half of it (274.877906944 us); the
 * query 2048^3 lies halfway between them in log space, so its efficiency is
 * (1 + 0.5) / 2 and its time 17.179869184 / 0.75 us. Adding 5 us to both
 * points raises the floor to 5 and leaves the efficiencies as they were. */
static void test_lookup_gemm_nearest_shapes(void) {
  for (int shift = 0; shift <= 5; shift += 5) {
    schema_calibration c;
    memset(&c, 0, sizeof c);
    CU_ASSERT_EQUAL_FATAL(schema_calibration_add_gemm(&c, 1024, 1024, 1024, 2.147483648 + shift), 0);
    CU_ASSERT_EQUAL_FATAL(schema_calibration_add_gemm(&c, 4096, 4096, 4096, 274.877906944 + shift), 0);
    schema_calibration_sort(&c);
    schema_roofline roof = {1e15, 1e20, 4e11, 3, 1};
    schema_lookup l;
    schema_lookup_init(&l, &c, &roof, NULL);
    double us;
    ts_err e = {0};
    CU_ASSERT_EQUAL(schema_lookup_gemm(&l, 2048, 2048, 2048, &us, &e), 0);
    NEAR(us, shift + 17.179869184 / 0.75, 1e-9);
    schema_calibration_free(&c);
  }
}

/* The index (k-d tree) and the plain scan pick the same neighbours, ties
 * included: 3,000 points on a coarse grid (many equal distances), 2,000
 * queries, each priced with the index and again after dropping it. */
static void test_lookup_gemm_index_matches_scan(void) {
  static const long long dims[] = {64, 96, 128, 256, 384, 512, 1024, 1536, 2048, 4096, 8192, 16384};
  const int nd = (int)(sizeof dims / sizeof dims[0]);
  schema_calibration c;
  memset(&c, 0, sizeof c);
  unsigned r = 12345;
  for (int i = 0; i < 3000; i++) {
    long long m, n, k;
    r = r * 1103515245u + 12345u, m = dims[(r >> 8) % (unsigned)nd];
    r = r * 1103515245u + 12345u, n = dims[(r >> 8) % (unsigned)nd];
    r = r * 1103515245u + 12345u, k = dims[(r >> 8) % (unsigned)nd];
    r = r * 1103515245u + 12345u;
    double us = 5.0 + 2.0 * (double)m * (double)n * (double)k / 5e14 * 1e6 * (1.0 + (double)((r >> 8) % 1000) / 1000.0);
    bool dup = false;
    for (int j = 0; j < c.n_gemm && !dup; j++) dup = c.gemm[j].m == m && c.gemm[j].n == n && c.gemm[j].k == k;
    if (!dup) CU_ASSERT_EQUAL_FATAL(schema_calibration_add_gemm(&c, m, n, k, us), 0);
  }
  schema_calibration_sort(&c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(c.gemm_index);
  schema_roofline roof = {1e15, 4e12, 4e11, 3, 1};
  int differ = 0;
  for (int q = 0; q < 2000; q++) {
    long long m, n, k; /* off-grid shapes: nothing shares two dimensions with them */
    r = r * 1103515245u + 12345u, m = 50 + (r >> 8) % 20000;
    r = r * 1103515245u + 12345u, n = 50 + (r >> 8) % 20000;
    r = r * 1103515245u + 12345u, k = 50 + (r >> 8) % 20000;
    double with, without;
    ts_err e = {0};
    schema_lookup l;
    schema_lookup_init(&l, &c, &roof, NULL);
    CU_ASSERT_EQUAL(schema_lookup_gemm(&l, m, n, k, &with, &e), 0);
    struct schema_gemm_index *kept = c.gemm_index;
    c.gemm_index = NULL; /* the lookup scans */
    CU_ASSERT_EQUAL(schema_lookup_gemm(&l, m, n, k, &without, &e), 0);
    c.gemm_index = kept;
    differ += with != without;
  }
  CU_ASSERT_EQUAL(differ, 0);
  schema_calibration_free(&c);
}

/* Outside the range: the roofline anchored at the nearest point, and a warning naming the op once. */
static void test_lookup_outside_warns_once(void) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(valid, strlen(valid), "v.json", &c, &e), 0);
  schema_roofline roof = {1e15, 1e9, 4e11, 0, 1}; /* 1 GB/s, no launch: time grows linearly */
  char *buf = NULL;
  size_t len = 0;
  FILE *warn = open_memstream(&buf, &len);
  schema_lookup l;
  schema_lookup_init(&l, &c, &roof, warn);
  double us;
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "norm", 1e6, 0, &us, &e), 0);
  NEAR(us, 200.0, 1e-9); /* 20 us at 1e5 bytes, x10 */
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "norm", 2e6, 0, &us, &e), 0);
  NEAR(us, 400.0, 1e-9);
  fclose(warn);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "kernel norm"));
  CU_ASSERT_PTR_NULL(strstr(strstr(buf, "kernel norm") + 1, "kernel norm")); /* once */
  free(buf);
  /* a missing table is an error naming it */
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "attention", 1e9, 0, &us, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "attention"));
  CU_ASSERT_EQUAL(schema_lookup_coll(&l, "alltoall", 2, 1e6, &us, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "alltoall"));
  schema_calibration_free(&c);
}

/* The repository's root, from this file's path (CMake compiles it by its absolute path). */
static void repo_path(char *out, size_t n, const char *rel) {
  const char *slash = strrchr(__FILE__, '/');
  int dir = slash ? (int)(slash - __FILE__) : 0;
  snprintf(out, n, "%.*s%s../%s", dir, __FILE__, slash ? "/" : "", rel);
}

/* Attention ops read the table of the model's head dimension and the plan's
 * sequence ("attention.d128.s2048", "attention_bwd.d128.s2048" for GPT
 * h = 4096 at seq 2048) when the calibration has it; without it the
 * FLOP-keyed "attention" / "attention_bwd" tables, and a warning names the
 * missing table. The per-shape tables here hold half the generic times, so
 * the two cases cannot agree by accident. */
static void test_attention_per_shape_tables(void) {
  static plan p;
  static sim_costs costs;
  ts_err e = {0};
  char path[4096];
  repo_path(path, sizeof path, "experiments/plans/gpt-h4096-tp2-none.json");
  CU_ASSERT_EQUAL_FATAL(plan_load(path, NULL, NULL, &p, &e), 0);
  p.attention_backend = PLAN_ATTENTION_EXECUTOR; /* the executor's tables (a fused plan warns of its own section) */
  CU_ASSERT_EQUAL_FATAL(model_head_dim(&p.model), 128);
  CU_ASSERT_EQUAL_FATAL(p.seq, 2048);
  static const char head[] =
      "{\"schema\":1,\"gpu\":\"g\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"nvlink\","
      "\"measured_at\":\"m\",\"kernels\":{"
      "\"attention\":[{\"flops\":1e9,\"us\":10},{\"flops\":1e13,\"us\":20000}],"
      "\"attention_bwd\":[{\"flops\":2.5e9,\"us\":30},{\"flops\":2.5e13,\"us\":60000}]";
  static const char per_shape[] =
      ",\"attention.d128.s2048\":[{\"flops\":1e9,\"us\":5},{\"flops\":1e13,\"us\":10000}],"
      "\"attention_bwd.d128.s2048\":[{\"flops\":2.5e9,\"us\":15},{\"flops\":2.5e13,\"us\":30000}]";
  /* a table of another shape does not count */
  static const char other_shape[] = ",\"attention.d64.s2048\":[{\"flops\":1e9,\"us\":1},{\"flops\":1e13,\"us\":2}]";
  for (int with = 1; with >= 0; with--) {
    char text[2048];
    snprintf(text, sizeof text, "%s%s}}", head, with ? per_shape : other_shape);
    schema_calibration c;
    CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, strlen(text), "a.json", &c, &e), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *warn = open_memstream(&buf, &len);
    CU_ASSERT_EQUAL_FATAL(sim_costs_init(&costs, &p, &c, warn, &e), 0);
    plan_program prog = {0};
    CU_ASSERT_EQUAL_FATAL(plan_build_program(&p, 0, &prog, &e), 0);
    int seen[2] = {0, 0};
    for (int i = 0; i < prog.n; i++) {
      const plan_op *op = &prog.ops[i];
      if (op->kind != PLAN_OP_COMPUTE || op->model_op < 0 || op->model_op >= costs.n_mops ||
          costs.mops[op->model_op].kind != MODEL_OP_ATTENTION)
        continue;
      int bwd = op->phase == PLAN_PHASE_BWD;
      const char *table = with ? (bwd ? "attention_bwd.d128.s2048" : "attention.d128.s2048")
                               : (bwd ? "attention_bwd" : "attention");
      double s, us, generic;
      CU_ASSERT_EQUAL_FATAL(sim_compute_s(&costs, op, &s, &e), 0);
      CU_ASSERT_EQUAL_FATAL(schema_lookup_kernel(&costs.lk, table, op->flops, 0, &us, &e), 0);
      CU_ASSERT_EQUAL_FATAL(schema_lookup_kernel(&costs.lk, bwd ? "attention_bwd" : "attention", op->flops, 0,
                                                 &generic, &e), 0);
      NEAR(s * 1e6, us, 1e-9);
      NEAR(s * 1e6, with ? 0.5 * generic : generic, 1e-9);
      seen[bwd]++;
    }
    CU_ASSERT_TRUE(seen[0] > 0 && seen[1] > 0);
    fclose(warn);
    /* the fallback is named, once per table; the per-shape case warns about nothing */
    if (with) {
      CU_ASSERT_EQUAL(len, 0);
    } else {
      CU_ASSERT_PTR_NOT_NULL(strstr(buf, "no \"attention.d128.s2048\" table; using the FLOP-keyed \"attention\""));
      CU_ASSERT_PTR_NOT_NULL(
          strstr(buf, "no \"attention_bwd.d128.s2048\" table; using the FLOP-keyed \"attention_bwd\""));
      CU_ASSERT_PTR_NULL(strstr(strstr(buf, "attention.d128") + 1, "attention.d128"));
    }
    free(buf);
    plan_program_free(&prog);
    schema_calibration_free(&c);
  }
}

/* The derived calibration reproduces the figures it is derived from. */
static void test_derived_matches_design_figures(void) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(sim_derive_calibration("nvlink", &c, &e), 0);
  schema_roofline roof = {989e12, 4800e9, 450e9, 3, 1};
  schema_lookup l;
  schema_lookup_init(&l, &c, &roof, NULL);
  double us;
  /* all-reduce busbw at 16 MiB and 256 MiB on 2 GPUs: 218 and 303 GB/s (factor 1) */
  CU_ASSERT_EQUAL(schema_lookup_coll(&l, "allreduce", 2, 16777216, &us, &e), 0);
  NEAR(16777216 / (us * 1e-6) / 1e9, 218.0, 0.01);
  CU_ASSERT_EQUAL(schema_lookup_coll(&l, "allreduce", 2, 268435456, &us, &e), 0);
  NEAR(268435456 / (us * 1e-6) / 1e9, 303.0, 0.01);
  /* all-gather busbw 245 GB/s at 256 MiB: factor (n-1)/n = 1/2 */
  CU_ASSERT_EQUAL(schema_lookup_coll(&l, "allgather", 2, 268435456, &us, &e), 0);
  NEAR(268435456 * 0.5 / (us * 1e-6) / 1e9, 245.0, 0.02);
  /* a big GEMM runs near 790 TFLOP/s */
  CU_ASSERT_EQUAL(schema_lookup_gemm(&l, 16384, 16384, 16384, &us, &e), 0);
  double tflops = 2.0 * 16384.0 * 16384 * 16384 / (us * 1e-6) / 1e12;
  CU_ASSERT_TRUE(tflops > 700 && tflops <= 790);
  /* HBM-bound copy-like kernels near 4276 GB/s */
  CU_ASSERT_EQUAL(schema_lookup_kernel(&l, "elementwise", 4294967296.0, 0, &us, &e), 0);
  double gbps = 4294967296.0 / (us * 1e-6) / 1e9;
  CU_ASSERT_TRUE(gbps > 0.85 * 4276 && gbps < 4276);
  schema_calibration_free(&c);
}

/* r written as JSON and read back into *b; the text is returned (the caller frees it). */
static char *result_json_round_trip(const schema_result *r, schema_result *b) {
  char *buf = NULL;
  size_t len = 0;
  ts_err e = {0};
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(schema_result_write_json(r, f, &e), 0);
  fclose(f);
  int rc = schema_result_from_json_text(buf, len, "r.json", b, &e);
  if (rc) printf("\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  return buf;
}

static void test_result_round_trip(void) {
  schema_result r, b;
  schema_result_init(&r, SCHEMA_SOURCE_MEASURED);
  snprintf(r.plan, sizeof r.plan, "p.json");
  r.iteration_time_s = 0.5;
  r.tokens_per_s = 1000;
  r.tflops_per_gpu = 300;
  r.mfu = 0.3;
  r.memory_per_gpu_bytes = 1e10;
  r.breakdown.compute_s = 0.4;
  r.breakdown.bubble_s = 0.1;
  r.iterations = 10, r.warmup = 2, r.min_s = 0.49, r.median_s = 0.5, r.max_s = 0.52;
  snprintf(r.machine.gpu, sizeof r.machine.gpu, "H200");
  snprintf(r.machine.transport, sizeof r.machine.transport, "nvlink");
  snprintf(r.options, sizeof r.options, "--iters 10 --warmup 2");
  schema_rank_stat rs = {.rank = 1, .busy_s = 0.4, .compute_s = 0.35, .comm_s = 0.1};
  schema_op_record op = {"layer0.fwd.qkv", 1, "compute", 0.001, 0.002};
  CU_ASSERT_EQUAL(schema_result_add_rank(&r, &rs), 0);
  CU_ASSERT_EQUAL(schema_result_add_op(&r, &op), 0);
  CU_ASSERT_EQUAL(schema_result_add_note(&r, "a note"), 0);
  char *buf = result_json_round_trip(&r, &b);
  size_t len = 0;
  ts_err e = {0};
  FILE *f;
  CU_ASSERT_EQUAL(b.source, SCHEMA_SOURCE_MEASURED);
  NEAR(b.iteration_time_s, 0.5, 1e-12);
  NEAR(b.breakdown.bubble_s, 0.1, 1e-12);
  CU_ASSERT_EQUAL(b.n_ranks, 1);
  CU_ASSERT_EQUAL(b.n_ops, 1);
  CU_ASSERT_EQUAL(b.n_notes, 1);
  CU_ASSERT_EQUAL(b.iterations, 10);
  CU_ASSERT_STRING_EQUAL(b.machine.transport, "nvlink");
  CU_ASSERT_STRING_EQUAL(b.options, "--iters 10 --warmup 2"); /* the options it ran with */
  CU_ASSERT_STRING_EQUAL(b.ops[0].stream, "compute");
  /* no clock model: no clock fields written, none read */
  CU_ASSERT_PTR_NULL(strstr(buf, "clock"));
  CU_ASSERT_EQUAL(b.clock_passes, 0);
  CU_ASSERT_EQUAL(b.ranks[0].clock_gemm_speed, 0);
  /* cross_entropy_loss_fusion: not recorded here (0), so not written */
  CU_ASSERT_PTR_NULL(strstr(buf, "cross_entropy"));
  CU_ASSERT_EQUAL(b.cross_entropy_loss_fusion, 0);
  /* hidden_dropout: not recorded (schema_result_init's -1), so not written, read back as not recorded */
  CU_ASSERT_PTR_NULL(strstr(buf, "hidden_dropout"));
  CU_ASSERT(b.hidden_dropout < 0);
  schema_result_free(&b);
  free(buf);
  /* recorded: 0 (what tacorun execute ran) and Megatron-LM's 0.1, written and read back */
  const double rates[] = {0.0, 0.1};
  for (int i = 0; i < 2; i++) {
    r.hidden_dropout = rates[i];
    buf = result_json_round_trip(&r, &b);
    CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"hidden_dropout\": "));
    CU_ASSERT_EQUAL(b.hidden_dropout, rates[i]);
    schema_result_free(&b);
    free(buf);
  }
  r.hidden_dropout = -1.0;
  /* recorded false (a plan's unfused cross-entropy): written and read back */
  r.cross_entropy_loss_fusion = -1;
  buf = result_json_round_trip(&r, &b);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"cross_entropy_loss_fusion\": false"));
  CU_ASSERT_EQUAL(b.cross_entropy_loss_fusion, -1);
  schema_result_free(&b);
  free(buf);
  /* the clock model's fields round-trip */
  schema_result c;
  schema_result_init(&c, SCHEMA_SOURCE_SIMULATED);
  snprintf(c.plan, sizeof c.plan, "p.json");
  c.iteration_time_s = 0.5;
  c.clock_passes = 3;
  schema_rank_stat cs = {.rank = 0, .busy_s = 0.4, .compute_s = 0.3, .comm_s = 0.1, .clock_duty = 0.625,
                         .clock_gemm_speed = 1.25, .clock_mem_speed = 1.0625};
  CU_ASSERT_EQUAL(schema_result_add_rank(&c, &cs), 0);
  buf = result_json_round_trip(&c, &b);
  CU_ASSERT_EQUAL(b.clock_passes, 3);
  CU_ASSERT_EQUAL_FATAL(b.n_ranks, 1);
  CU_ASSERT_EQUAL(b.ranks[0].clock_duty, 0.625);
  CU_ASSERT_EQUAL(b.ranks[0].clock_gemm_speed, 1.25);
  CU_ASSERT_EQUAL(b.ranks[0].clock_mem_speed, 1.0625);
  schema_result_free(&b);
  schema_result_free(&c);
  free(buf);
  /* CSV: header, one figures row, then a block per rank */
  buf = NULL;
  f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL(schema_result_write_csv(&r, f, &e), 0);
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "# iteration_time_s"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\n1 0.4 0.35 0.1\n"));
  free(buf);
  /* a measured result without its spread is rejected, naming the field */
  const char *bad = "{\"schema\":1,\"source\":\"measured\",\"plan\":\"p\",\"iteration_time_s\":1,\"tokens_per_s\":1,"
                    "\"tflops_per_gpu\":1,\"mfu\":0.1,\"memory_per_gpu_bytes\":1,\"breakdown\":{\"compute_s\":1,"
                    "\"tp_exposed_s\":0,\"pp_exposed_s\":0,\"dp_exposed_s\":0,\"codec_s\":0,\"bubble_s\":0},"
                    "\"ranks\":[]}";
  CU_ASSERT_EQUAL(schema_result_from_json_text(bad, strlen(bad), "m.json", &b, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "iterations"));
  schema_result_free(&r);
}

/* ---- the optional clock section ---- */

#define CAL_HEAD                                                                                              \
  "{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"shm\","          \
  "\"measured_at\":\"m\",\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1}]"

static const char clock_cal[] = CAL_HEAD
    ",\"clock\":{\"window_us\":2000,\"points\":["
    "{\"duty\":1,\"period_us\":5000,\"gemm_speed\":1,\"mem_speed\":1},"
    "{\"duty\":0.5,\"period_us\":500,\"gemm_speed\":1.25,\"mem_speed\":1.05},"
    "{\"duty\":0.25,\"period_us\":500,\"gemm_speed\":1.35,\"mem_speed\":1.1},"
    "{\"duty\":1,\"period_us\":500,\"gemm_speed\":1,\"mem_speed\":1},"
    "{\"duty\":0.5,\"period_us\":5000,\"gemm_speed\":1.02,\"mem_speed\":1}]}}";

/* Loads, sorted by period then duty; the writer writes it back the same. */
static void test_clock_round_trip(void) {
  schema_calibration a, b;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(clock_cal, strlen(clock_cal), "c.json", &a, &e), 0);
  CU_ASSERT_EQUAL(a.clock_window_us, 2000.0);
  CU_ASSERT_EQUAL_FATAL(a.n_clock, 5);
  const double period[] = {500, 500, 500, 5000, 5000}, duty[] = {0.25, 0.5, 1, 0.5, 1};
  for (int i = 0; i < 5; i++) {
    CU_ASSERT_EQUAL(a.clock[i].period_us, period[i]);
    CU_ASSERT_EQUAL(a.clock[i].duty, duty[i]);
  }
  CU_ASSERT_EQUAL(a.clock[0].gemm_speed, 1.35);
  CU_ASSERT_EQUAL(a.clock[0].mem_speed, 1.1);
  /* a point added in memory (tacorun calibrate) is written in order too */
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_clock(&a, 0.75, 200, 1.125, 1.0625), 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_write(&a, f, &e), 0);
  fclose(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "\"window_us\": 2000"));
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(buf, len, "rt.json", &b, &e), 0);
  CU_ASSERT_EQUAL(b.clock_window_us, 2000.0);
  CU_ASSERT_EQUAL_FATAL(b.n_clock, 6);
  CU_ASSERT_EQUAL(b.clock[0].period_us, 200.0);
  CU_ASSERT_EQUAL(b.clock[0].duty, 0.75);
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL(a.clock[i].duty, b.clock[i].duty);
    CU_ASSERT_EQUAL(a.clock[i].period_us, b.clock[i].period_us);
    CU_ASSERT_EQUAL(a.clock[i].gemm_speed, b.clock[i].gemm_speed);
    CU_ASSERT_EQUAL(a.clock[i].mem_speed, b.clock[i].mem_speed);
  }
  free(buf);
  schema_calibration_free(&b);
  /* points without a window cannot be written (the file would not load) */
  a.clock_window_us = 0;
  buf = NULL;
  f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL(schema_calibration_write(&a, f, &e), -1);
  fclose(f);
  free(buf);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "clock"));
  schema_calibration_free(&a);
  /* a clock section alone is a calibration (tacorun calibrate --only clock) */
  static const char clock_only[] =
      "{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"shm\","
      "\"measured_at\":\"m\",\"clock\":{\"window_us\":2000,\"points\":[{\"duty\":0.5,\"period_us\":500,"
      "\"gemm_speed\":1.25,\"mem_speed\":1.05}]}}";
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(clock_only, strlen(clock_only), "c.json", &a, &e), 0);
  CU_ASSERT_EQUAL(a.n_clock, 1);
  CU_ASSERT_EQUAL(a.n_gemm + a.n_kernels + a.n_colls, 0);
  schema_calibration_free(&a);
  /* without the section nothing is written and nothing is set */
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(valid, strlen(valid), "v.json", &a, &e), 0);
  CU_ASSERT_EQUAL(a.clock_window_us, 0.0);
  CU_ASSERT_EQUAL(a.n_clock, 0);
  buf = NULL;
  f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL(schema_calibration_write(&a, f, &e), 0);
  fclose(f);
  CU_ASSERT_PTR_NULL(strstr(buf, "clock"));
  free(buf);
  schema_calibration_free(&a);
}

/* Linear in duty over the points of the period nearest the cycle in log scale
 * (the smallest without a cycle), clamped to their range; speed 1 without a
 * section. */
static void test_clock_interpolation(void) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(clock_cal, strlen(clock_cal), "c.json", &c, &e), 0);
  double g, m;
  schema_clock_speed(&c, 0.5, 0, &g, &m); /* a point: the 500 us one, not the 5000 us one */
  NEAR(g, 1.25, 1e-12);
  NEAR(m, 1.05, 1e-12);
  schema_clock_speed(&c, 0.375, 0, &g, &m); /* half way between 0.25 and 0.5 */
  NEAR(g, 1.30, 1e-12);
  NEAR(m, 1.075, 1e-12);
  schema_clock_speed(&c, 0.75, 0, &g, &m); /* half way between 0.5 and 1 */
  NEAR(g, 1.125, 1e-12);
  NEAR(m, 1.025, 1e-12);
  schema_clock_speed(&c, 0.05, 0, &g, &m); /* below the range: the lowest duty's speeds */
  NEAR(g, 1.35, 1e-12);
  NEAR(m, 1.1, 1e-12);
  schema_clock_speed(&c, 1.0, 0, &g, &m);
  NEAR(g, 1.0, 1e-12);
  /* cycles nearer 5000 us than 500 us in log scale (above ~1581 us) take the 5000 us points */
  schema_clock_speed(&c, 0.5, 2000, &g, &m);
  NEAR(g, 1.02, 1e-12);
  NEAR(m, 1.0, 1e-12);
  schema_clock_speed(&c, 0.75, 1e6, &g, &m); /* half way between 0.5 and 1 of the 5000 us row */
  NEAR(g, 1.01, 1e-12);
  schema_clock_speed(&c, 0.5, 1500, &g, &m); /* still nearer 500 us */
  NEAR(g, 1.25, 1e-12);
  /* a smaller period added in memory (unsorted) takes over; one point: constant */
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_clock(&c, 0.6, 100, 1.5, 1.2), 0);
  schema_clock_speed(&c, 0.1, 0, &g, &m);
  NEAR(g, 1.5, 1e-12);
  schema_clock_speed(&c, 1.0, 0, &g, &m);
  NEAR(m, 1.2, 1e-12);
  schema_calibration_free(&c);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(valid, strlen(valid), "v.json", &c, &e), 0);
  schema_clock_speed(&c, 0.3, 0, &g, &m);
  CU_ASSERT_EQUAL(g, 1.0);
  CU_ASSERT_EQUAL(m, 1.0);
  schema_calibration_free(&c);
}

/* Bad clock sections: rejected, naming the field. */
static void test_clock_rejected(void) {
#define PT(d, p, g, m) "{\"duty\":" d ",\"period_us\":" p ",\"gemm_speed\":" g ",\"mem_speed\":" m "}"
  struct {
    const char *text, *field;
  } cases[] = {
      {CAL_HEAD ",\"clock\":[]}", "clock: must be an object"},
      {CAL_HEAD ",\"clock\":{\"points\":[" PT("1", "500", "1", "1") "]}}", "clock.window_us: missing"},
      {CAL_HEAD ",\"clock\":{\"window_us\":0,\"points\":[" PT("1", "500", "1", "1") "]}}", "clock.window_us"},
      {CAL_HEAD ",\"clock\":{\"window_us\":\"1ms\",\"points\":[" PT("1", "500", "1", "1") "]}}",
       "clock.window_us: must be a number"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000}}", "clock.points: missing"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[]}}", "clock.points: must not be empty"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":{}}}", "clock.points: must be an array"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[1]}}", "clock.points[0]: must be an object"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("0", "500", "1", "1") "]}}",
       "clock.points[0].duty: must be > 0"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("1.5", "500", "1", "1") "]}}",
       "clock.points[0].duty"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("1", "-5", "1", "1") "]}}",
       "clock.points[0].period_us"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("1", "0", "1", "1") "]}}",
       "clock.points[0].period_us: must be > 0"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("1", "500", "0", "1") "]}}",
       "clock.points[0].gemm_speed"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("1", "500", "1", "-1") "]}}",
       "clock.points[0].mem_speed"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("1", "500", "true", "1") "]}}",
       "clock.points[0].gemm_speed: must be a number"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[{\"duty\":1,\"period_us\":500,\"gemm_speed\":1}]}}",
       "clock.points[0].mem_speed: missing"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[{\"duty\":1,\"period_us\":500,\"gemm_speed\":1,"
                "\"mem_speed\":1,\"sm_mhz\":1980}]}}",
       "clock.points[0].sm_mhz: unknown field"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"window\":1,\"points\":[" PT("1", "500", "1", "1") "]}}",
       "clock.window: unknown field"},
      /* the same (duty, period) twice, also when only the written 8 digits are equal */
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("0.5", "500", "1", "1") "," PT(
           "0.5", "500", "1.1", "1") "]}}",
       "clock.points[1]: duplicate point"},
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"points\":[" PT("0.5", "500", "1", "1") "," PT(
           "0.500000001", "500", "1.1", "1") "]}}",
       "clock.points[1]: duplicate point"},
      /* a duplicated JSON key is rejected by the parser */
      {CAL_HEAD ",\"clock\":{\"window_us\":1000,\"window_us\":2000,\"points\":[" PT("1", "500", "1", "1") "]}}",
       "duplicate"},
  };
#undef PT
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    schema_calibration c;
    ts_err e = {0};
    int rc = schema_calibration_from_json_text(cases[i].text, strlen(cases[i].text), "bad.json", &c, &e);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT_TRUE(e.bad_input);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "bad.json"));
    if (!strstr(e.msg, cases[i].field)) fprintf(stderr, "clock case %zu: \"%s\" lacks \"%s\"\n", i, e.msg, cases[i].field);
    CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, cases[i].field));
    CU_ASSERT_EQUAL(c.n_clock, 0);
    CU_ASSERT_PTR_NULL(c.clock);
  }
}

/* ---- repeated points: found by sorting, reported as a point-by-point check would ---- */

#define DUP_HEAD                                                                                              \
  "{\"schema\":1,\"gpu\":\"G\",\"driver\":\"d\",\"cuda\":\"c\",\"nccl\":\"n\",\"transport\":\"t\","           \
  "\"measured_at\":\"m\","

static void expect_calibration_error(const char *text, const char *want) {
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL(schema_calibration_from_json_text(text, strlen(text), "bad.json", &c, &e), -1);
  CU_ASSERT_TRUE(e.bad_input);
  if (!strstr(e.msg, want)) fprintf(stderr, "\n  \"%s\" lacks \"%s\"\n", e.msg, want);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
}

/* The point named is the first in file order that repeats an earlier one;
 * a bad point before it is named instead, one after it is not. */
static void test_duplicates_in_file_order(void) {
  /* shapes: [0] A, [1] B, [2] C, [3] B (repeats [1]), [4] A (repeats [0]) */
  expect_calibration_error(DUP_HEAD "\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1},{\"m\":2,\"n\":1,\"k\":1,\"us\":1},"
                                    "{\"m\":3,\"n\":1,\"k\":1,\"us\":1},{\"m\":2,\"n\":1,\"k\":1,\"us\":2},"
                                    "{\"m\":1,\"n\":1,\"k\":1,\"us\":2}]}",
                           "bad.json: gemm[3]: duplicate shape 2x1x1");
  /* three of one shape: the second is named */
  expect_calibration_error(DUP_HEAD "\"gemm\":[{\"m\":5,\"n\":6,\"k\":7,\"us\":1},{\"m\":1,\"n\":1,\"k\":1,\"us\":1},"
                                    "{\"m\":5,\"n\":6,\"k\":7,\"us\":2},{\"m\":5,\"n\":6,\"k\":7,\"us\":3}]}",
                           "bad.json: gemm[2]: duplicate shape 5x6x7");
  /* a repeat before a bad point: the repeat */
  expect_calibration_error(DUP_HEAD "\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1},{\"m\":1,\"n\":1,\"k\":1,\"us\":2},"
                                    "{\"m\":3,\"n\":1,\"k\":1,\"us\":-1}]}",
                           "bad.json: gemm[1]: duplicate shape 1x1x1");
  /* a bad point before a repeat: the bad point */
  expect_calibration_error(DUP_HEAD "\"gemm\":[{\"m\":1,\"n\":1,\"k\":1,\"us\":1},{\"m\":3,\"n\":1,\"k\":1,\"us\":-1},"
                                    "{\"m\":1,\"n\":1,\"k\":1,\"us\":2}]}",
                           "bad.json: gemm[1].us");
  /* m, n and k each count: 1x2x3, 2x1x3, 3x2x1, 1x3x2 are four shapes */
  const char *four = DUP_HEAD "\"gemm\":[{\"m\":1,\"n\":2,\"k\":3,\"us\":1},{\"m\":2,\"n\":1,\"k\":3,\"us\":1},"
                              "{\"m\":3,\"n\":2,\"k\":1,\"us\":1},{\"m\":1,\"n\":3,\"k\":2,\"us\":1}]}";
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL(schema_calibration_from_json_text(four, strlen(four), "ok.json", &c, &e), 0);
  CU_ASSERT_EQUAL(c.n_gemm, 4);
  schema_calibration_free(&c);
  /* kernels: a repeat is (bytes, group); the same bytes in another group is another point */
  const char *groups = DUP_HEAD "\"kernels\":{\"taco_encode\":[{\"bytes\":1000,\"group\":128,\"us\":1},"
                                "{\"bytes\":1000,\"group\":64,\"us\":1}]}}";
  CU_ASSERT_EQUAL(schema_calibration_from_json_text(groups, strlen(groups), "ok.json", &c, &e), 0);
  CU_ASSERT_EQUAL(c.kernels[0].n, 2);
  schema_calibration_free(&c);
  expect_calibration_error(DUP_HEAD "\"kernels\":{\"norm\":[{\"bytes\":10,\"us\":1}],\"taco_encode\":["
                                    "{\"bytes\":1000,\"group\":128,\"us\":1},{\"bytes\":2000,\"group\":128,\"us\":1},"
                                    "{\"bytes\":1000,\"group\":128,\"us\":2}]}}",
                           "bad.json: kernels.taco_encode[2]: duplicate point (bytes 1000, group 128)");
  /* the same size in two tables (two rank counts, two collectives) is no repeat; in one it is */
  const char *tables = DUP_HEAD "\"collectives\":{\"allreduce\":{\"2\":[{\"bytes\":64,\"us\":1}],\"4\":[{\"bytes\":64,"
                                "\"us\":1}]},\"allgather\":{\"2\":[{\"bytes\":64,\"us\":1}]}}}";
  CU_ASSERT_EQUAL(schema_calibration_from_json_text(tables, strlen(tables), "ok.json", &c, &e), 0);
  CU_ASSERT_EQUAL(c.n_colls, 3);
  schema_calibration_free(&c);
  expect_calibration_error(DUP_HEAD "\"collectives\":{\"allreduce\":{\"2\":[{\"bytes\":64,\"us\":1}],\"4\":["
                                    "{\"bytes\":64,\"us\":1},{\"bytes\":128,\"us\":1},{\"bytes\":64,\"us\":2}]}}}",
                           "bad.json: collectives.allreduce.4[2]: duplicate size 64");
  /* a number of ranks is written one way only: "08" would be a second key for table 8 */
  expect_calibration_error(DUP_HEAD "\"collectives\":{\"allreduce\":{\"8\":[{\"bytes\":64,\"us\":1}],\"08\":["
                                    "{\"bytes\":64,\"us\":2}]}}}",
                           "bad.json: collectives.allreduce.08: write the number of ranks as 8");
  expect_calibration_error(DUP_HEAD "\"collectives\":{\"allreduce\":{\"+8\":[{\"bytes\":64,\"us\":1}]}}}",
                           "collectives.allreduce.+8: write the number of ranks as 8");
}

/* Many points: a repeat at the end is found and named (the check is O(n log n):
 * 40,000 points checked point by point were 8 x 10^8 comparisons). */
static void test_duplicates_at_scale(void) {
  enum { N = 40000 };
  size_t cap = (size_t)N * 64 + 512, used = 0;
  char *text = malloc(cap);
  CU_ASSERT_PTR_NOT_NULL_FATAL(text);
  used += (size_t)snprintf(text + used, cap - used, "%s\"gemm\":[", DUP_HEAD);
  for (int i = 0; i < N; i++)
    used += (size_t)snprintf(text + used, cap - used, "%s{\"m\":%d,\"n\":%d,\"k\":64,\"us\":1}", i ? "," : "",
                             1 + i % 200, 64 * (1 + i / 200));
  used += (size_t)snprintf(text + used, cap - used, "]}");
  schema_calibration c;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_from_json_text(text, used, "big.json", &c, &e), 0);
  CU_ASSERT_EQUAL(c.n_gemm, N);
  for (int i = 1; i < c.n_gemm; i++) /* loaded sorted, all distinct */
    CU_ASSERT(c.gemm[i - 1].n < c.gemm[i].n || (c.gemm[i - 1].n == c.gemm[i].n && c.gemm[i - 1].m < c.gemm[i].m));
  schema_calibration_free(&c);
  /* the last point repeats point 12345 (m 146, n 64 * 62) */
  used -= 2;
  used += (size_t)snprintf(text + used, cap - used, ",{\"m\":%d,\"n\":%d,\"k\":64,\"us\":2}]}", 1 + 12345 % 200,
                           64 * (1 + 12345 / 200));
  CU_ASSERT_EQUAL(schema_calibration_from_json_text(text, used, "big.json", &c, &e), -1);
  char want[96];
  snprintf(want, sizeof want, "big.json: gemm[%d]: duplicate shape %dx%dx64", N, 1 + 12345 % 200, 64 * (1 + 12345 / 200));
  if (!strstr(e.msg, want)) fprintf(stderr, "\n  \"%s\" lacks \"%s\"\n", e.msg, want);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
  free(text);
}

/* ---- the result loader refuses what it does not know, as every loader does ---- */

#define RESULT_HEAD                                                                                          \
  "{\"schema\":1,\"plan\":\"p\",\"iteration_time_s\":1,\"tokens_per_s\":1,\"tflops_per_gpu\":1,\"mfu\":0.1,"  \
  "\"memory_per_gpu_bytes\":1,\"breakdown\":{\"compute_s\":1,\"tp_exposed_s\":0,\"pp_exposed_s\":0,"         \
  "\"dp_exposed_s\":0,\"codec_s\":0,\"bubble_s\":0}"
#define MEASURED_TAIL                                                                                        \
  ",\"iterations\":3,\"warmup\":1,\"min_s\":1,\"median_s\":1,\"max_s\":1,\"machine\":{\"gpu\":\"H200\","     \
  "\"transport\":\"nvlink\"}"
#define INFER_DETAILS                                                                                        \
  ",\"codec\":\"taco\",\"total_s\":1,\"memory\":{\"weights_bytes\":1,\"kv_cache_bytes\":1},"                 \
  "\"prefill\":{\"total_s\":1,\"compute_s\":1,\"tp_exposed_s\":0,\"codec_s\":0,\"pp_exposed_s\":0},"         \
  "\"decode\":{\"total_s\":1,\"compute_s\":1,\"tp_exposed_s\":0,\"codec_s\":0,\"pp_exposed_s\":0},"          \
  "\"plain_nccl\":{\"ttft_s\":1,\"tpot_s\":1,\"tokens_per_s\":1},\"speedup\":{\"ttft\":1,\"tpot\":1,"       \
  "\"tokens_per_s\":1},\"codec_choices\":[{\"what\":\"prefill\",\"bytes\":1,\"wire_bytes\":1,\"plain_s\":1," \
  "\"fallback_s\":1,\"fallback\":\"none\",\"codec_s\":1,\"compressed\":true}]"

static void expect_result(const char *text, const char *want) {
  schema_result r;
  ts_err e = {0};
  int rc = schema_result_from_json_text(text, strlen(text), "r.json", &r, &e);
  if (!want) {
    if (rc) fprintf(stderr, "\n  refused: %s\n", e.msg);
    CU_ASSERT_EQUAL(rc, 0);
    schema_result_free(&r);
    return;
  }
  CU_ASSERT_EQUAL(rc, -1);
  CU_ASSERT_TRUE(e.bad_input);
  if (!strstr(e.msg, want)) fprintf(stderr, "\n  \"%s\" lacks \"%s\"\n", e.msg, want);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, want));
}

static void test_result_strict_keys(void) {
  /* the four kinds load */
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"mode\":\"reduced\",\"ranks\":[]}", NULL);
  expect_result(RESULT_HEAD ",\"source\":\"measured\",\"ranks\":[]" MEASURED_TAIL "}", NULL);
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"kind\":\"inference\",\"ttft_s\":1,\"tpot_s\":1,\"ranks\":[]"
                INFER_DETAILS "}", NULL);
  expect_result(RESULT_HEAD ",\"source\":\"measured\",\"kind\":\"inference\",\"ttft_s\":1,\"tpot_s\":1,\"ranks\":[]"
                MEASURED_TAIL "}", NULL);
  /* the options it ran with: a string */
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"options\":\"--mode full\",\"ranks\":[]}", NULL);
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"options\":3,\"ranks\":[]}", "r.json: options");
  /* unknown keys, at every level */
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"ranks\":[],\"iteration_time\":1}",
                "r.json: iteration_time: unknown field");
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"ranks\":[{\"rank\":0,\"busy_s\":1,\"compute_s\":1,"
                "\"comm_s\":0,\"idle_s\":0}]}",
                "r.json: ranks[0].idle_s: unknown field");
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"ranks\":[],\"ops\":[{\"name\":\"a\",\"rank\":0,"
                "\"stream\":\"tp\",\"start_s\":0,\"dur_s\":1,\"size\":8}]}",
                "r.json: ops[0].size: unknown field");
  expect_result("{\"schema\":1,\"plan\":\"p\",\"iteration_time_s\":1,\"tokens_per_s\":1,\"tflops_per_gpu\":1,"
                "\"mfu\":0.1,\"memory_per_gpu_bytes\":1,\"breakdown\":{\"compute_s\":1,\"tp_exposed_s\":0,"
                "\"pp_exposed_s\":0,\"dp_exposed_s\":0,\"codec_s\":0,\"bubble_s\":0,\"idle_s\":0},"
                "\"source\":\"simulated\",\"ranks\":[]}",
                "r.json: breakdown.idle_s: unknown field");
  expect_result(RESULT_HEAD ",\"source\":\"measured\",\"ranks\":[]" MEASURED_TAIL ",\"host\":\"x\"}",
                "r.json: host: unknown field");
  expect_result(RESULT_HEAD ",\"source\":\"measured\",\"ranks\":[],\"iterations\":3,\"warmup\":1,\"min_s\":1,"
                "\"median_s\":1,\"max_s\":1,\"machine\":{\"gpu\":\"H200\",\"transport\":\"nvlink\",\"cpu\":\"x\"}}",
                "r.json: machine.cpu: unknown field");
  /* keys of another kind of result are named as such */
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"ranks\":[]" MEASURED_TAIL "}",
                "r.json: iterations: only in a measured result");
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"ranks\":[],\"ttft_s\":1}",
                "r.json: ttft_s: only in an inference result");
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"ranks\":[],\"total_s\":1}",
                "r.json: total_s: only in an inference result");
  /* the inference details are checked as written */
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"kind\":\"inference\",\"ttft_s\":1,\"tpot_s\":1,\"ranks\":[],"
                "\"prefill\":{\"total_s\":1,\"compute_s\":1,\"tp_exposed_s\":0,\"codec_s\":0,\"pp_exposed_s\":0,"
                "\"x\":1}}",
                "r.json: prefill.x: unknown field");
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"kind\":\"inference\",\"ttft_s\":1,\"tpot_s\":1,\"ranks\":[],"
                "\"memory\":{\"weights_bytes\":\"1\",\"kv_cache_bytes\":1}}",
                "r.json: memory.weights_bytes: must be a number");
  expect_result(RESULT_HEAD ",\"source\":\"simulated\",\"kind\":\"inference\",\"ttft_s\":1,\"tpot_s\":1,\"ranks\":[],"
                "\"codec_choices\":[{\"what\":\"prefill\",\"bytes\":1,\"wire_bytes\":1,\"plain_s\":1,"
                "\"fallback_s\":1,\"fallback\":\"fp8\",\"codec_s\":1,\"compressed\":true}]}",
                "r.json: codec_choices[0].fallback");
}

/* The writer writes only keys the reader knows: a result with every field set round-trips. */
static void test_result_writer_keys_known(void) {
  schema_result r, b;
  schema_result_init(&r, SCHEMA_SOURCE_MEASURED);
  snprintf(r.plan, sizeof r.plan, "p.json");
  snprintf(r.calibration, sizeof r.calibration, "c.json");
  snprintf(r.mode, sizeof r.mode, "full");
  snprintf(r.options, sizeof r.options, "--mode full --clock on");
  snprintf(r.kind, sizeof r.kind, "inference");
  r.ttft_s = 0.1, r.tpot_s = 0.01, r.iteration_time_s = 0.5, r.tokens_per_s = 10, r.mfu = 0.2;
  r.clock_passes = 2;
  r.iterations = 4, r.warmup = 1, r.min_s = 0.4, r.median_s = 0.5, r.max_s = 0.6;
  snprintf(r.machine.gpu, sizeof r.machine.gpu, "H200");
  snprintf(r.machine.driver, sizeof r.machine.driver, "580");
  snprintf(r.machine.cuda, sizeof r.machine.cuda, "13.0");
  snprintf(r.machine.nccl, sizeof r.machine.nccl, "2.28");
  snprintf(r.machine.transport, sizeof r.machine.transport, "nvlink");
  schema_rank_stat rs = {.rank = 0, .busy_s = 0.4, .compute_s = 0.3, .comm_s = 0.1, .clock_duty = 0.5,
                         .clock_gemm_speed = 1.1, .clock_mem_speed = 1.0, .clock_cycle_us = 900};
  schema_op_record op = {"layer0.fwd.qkv", 0, "tp", 0.001, 0.002};
  CU_ASSERT_EQUAL(schema_result_add_rank(&r, &rs), 0);
  CU_ASSERT_EQUAL(schema_result_add_op(&r, &op), 0);
  CU_ASSERT_EQUAL(schema_result_add_note(&r, "n"), 0);
  char *buf = NULL;
  size_t len = 0;
  ts_err e = {0};
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_EQUAL(schema_result_write_json(&r, f, &e), 0);
  fclose(f);
  int rc = schema_result_from_json_text(buf, len, "all.json", &b, &e);
  if (rc) fprintf(stderr, "\n  refused: %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(rc, 0);
  CU_ASSERT_STRING_EQUAL(b.kind, "inference");
  CU_ASSERT_EQUAL(b.ranks[0].clock_cycle_us, 900);
  CU_ASSERT_STRING_EQUAL(b.machine.nccl, "2.28");
  CU_ASSERT_EQUAL(b.clock_passes, 2);
  schema_result_free(&b);
  schema_result_free(&r);
  free(buf);
}

/* Every result file shipped under experiments/ loads: the JSON files whose top
 * level says "source": "simulated" or "measured" and has an iteration time. */
static int shipped_total, shipped_loaded;
static int visit_result(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)ftw;
  size_t n = strlen(path);
  if (type != FTW_F || n < 5 || strcmp(path + n - 5, ".json")) return 0;
  json_t *root = json_load_file(path, 0, NULL);
  const char *src = json_string_value(json_object_get(root, "source"));
  int is_result = src && (!strcmp(src, "simulated") || !strcmp(src, "measured")) &&
                  json_object_get(root, "iteration_time_s");
  json_decref(root);
  if (!is_result) return 0;
  shipped_total++;
  schema_result r;
  ts_err e = {0};
  if (schema_result_load(path, &r, &e) == 0) {
    shipped_loaded++;
    schema_result_free(&r);
  } else
    fprintf(stderr, "\n  shipped result refused: %s\n", e.msg);
  return 0;
}

static void test_shipped_results_load(void) {
  char dir[1024];
  repo_path(dir, sizeof dir, "experiments");
  shipped_total = shipped_loaded = 0;
  CU_ASSERT_EQUAL(nftw(dir, visit_result, 16, FTW_PHYS), 0);
  printf("(%d of %d result files) ", shipped_loaded, shipped_total);
  CU_ASSERT(shipped_total > 0);
  CU_ASSERT_EQUAL(shipped_loaded, shipped_total);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("sim_schema", NULL, NULL);
  CU_add_test(s, "a valid calibration loads", test_valid_loads);
  CU_add_test(s, "malformed calibrations are rejected naming the field", test_malformed_rejected);
  CU_add_test(s, "a missing file is named", test_missing_file);
  CU_add_test(s, "calibration write/read round trip", test_round_trip);
  CU_add_test(s, "gemm_wgrad: a weight gradient's own timing, by exact shape", test_gemm_wgrad);
  CU_add_test(s, "lookups interpolate in log space", test_lookup_interpolates);
  CU_add_test(s, "GEMMs interpolate along the dimension that varies", test_lookup_gemm_dimensions);
  CU_add_test(s, "GEMM of an unmeasured model: the nearest shapes' efficiency", test_lookup_gemm_nearest_shapes);
  CU_add_test(s, "GEMM nearest shapes: the index and the scan agree", test_lookup_gemm_index_matches_scan);
  CU_add_test(s, "outside the range: anchored roofline, one warning", test_lookup_outside_warns_once);
  CU_add_test(s, "decode attention beyond its measured groups: along groups at equal bytes a group",
              test_lookup_decode_attention_beyond_groups);
  CU_add_test(s, "attention reads its (head dim, sequence) table, else the FLOP-keyed one, warned",
              test_attention_per_shape_tables);
  CU_add_test(s, "derived calibration reproduces DESIGN.md figures", test_derived_matches_design_figures);
  CU_add_test(s, "result JSON/CSV round trip", test_result_round_trip);
  CU_add_test(s, "clock section: loads sorted, written back the same", test_clock_round_trip);
  CU_add_test(s, "clock speed: linear in duty over the smallest period, clamped", test_clock_interpolation);
  CU_add_test(s, "bad clock sections are rejected naming the field", test_clock_rejected);
  CU_add_test(s, "repeated points: the first repeat in file order is named", test_duplicates_in_file_order);
  CU_add_test(s, "repeated points among 40,000: found and named", test_duplicates_at_scale);
  CU_add_test(s, "result loader: unknown and misplaced keys are refused", test_result_strict_keys);
  CU_add_test(s, "result writer: every key it writes is one the loader knows", test_result_writer_keys_known);
  CU_add_test(s, "every result file under experiments/ loads", test_shipped_results_load);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

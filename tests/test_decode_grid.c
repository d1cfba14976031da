/* Tests of the plain-C half of `tacorun bench-decode-step` (runtime/bench/bench_decode_step_grid.h): its options
 * and their refusals, the read floor of a grid point against the count `tacorun execute` prints for a plan (and
 * against Llama 3 8B's shapes by hand), what a point needs in memory and which KV length fits, the median, and the
 * rows, summary and CSV. No GPU. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_decode_step_grid.h"
#include "infer_decode.h"
#include "plan_infer.h"

/* Runs dgrid_parse on a space-separated command line; *msg gets what it printed (stdout and stderr). */
static int parse_line(const char *line, dgrid_opts *o, char *msg, size_t cap) {
  static char buf[1024];
  char *argv[64];
  int argc = 0;
  snprintf(buf, sizeof buf, "bench-decode-step %s", line);
  for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " ")) argv[argc++] = t;
  FILE *f = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  const int rc = dgrid_parse(argc, argv, o, f, f);
  rewind(f);
  size_t n = fread(msg, 1, cap - 1, f);
  msg[n] = '\0';
  fclose(f);
  return rc;
}

static void test_options(void) {
  dgrid_opts o;
  char msg[8192];
  CU_ASSERT_EQUAL(parse_line("", &o, msg, sizeof msg), -1);
  CU_ASSERT_STRING_EQUAL(o.model, "llama3-8b");
  CU_ASSERT_EQUAL(o.tp, 1);
  CU_ASSERT_EQUAL(o.kv_fp8, 0);
  CU_ASSERT_EQUAL(o.steps, 20);
  CU_ASSERT_EQUAL(o.warmup, 5);
  CU_ASSERT_EQUAL(o.decode_attn, INFER_DECODE_DEFAULT);
  CU_ASSERT_EQUAL(o.eager, 0);
  CU_ASSERT_EQUAL(o.peak_gbps, 0);
  CU_ASSERT_PTR_NULL(o.csv);
  const long long b[] = {1, 2, 4, 8, 16, 32, 64}, kv[] = {128, 256, 512, 1024, 2048, 4096, 8192};
  CU_ASSERT_EQUAL_FATAL(o.nb, 7);
  CU_ASSERT_EQUAL_FATAL(o.nkv, 7);
  for (int i = 0; i < 7; i++) CU_ASSERT(o.batches[i] == b[i] && o.kv[i] == kv[i]);

  CU_ASSERT_EQUAL(parse_line("--model qwen2.5-7b --kv-cache fp8 --batches 3,5 --kv 100,9000 --steps 7 --warmup 0 "
                             "--decode-attention v2 --eager --peak-gbps 3350 --csv out.csv --seed 9 --tp 1",
                             &o, msg, sizeof msg), -1);
  CU_ASSERT_STRING_EQUAL(o.model, "qwen2.5-7b");
  CU_ASSERT(o.kv_fp8 == 1 && o.steps == 7 && o.warmup == 0 && o.decode_attn == 2 && o.eager == 1);
  CU_ASSERT(o.nb == 2 && o.batches[0] == 3 && o.batches[1] == 5 && o.nkv == 2 && o.kv[0] == 100 && o.kv[1] == 9000);
  CU_ASSERT_DOUBLE_EQUAL(o.peak_gbps, 3350, 1e-9);
  CU_ASSERT_STRING_EQUAL(o.csv, "out.csv");
  CU_ASSERT(o.seed == 9);

  CU_ASSERT_EQUAL(parse_line("--help", &o, msg, sizeof msg), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "usage: tacorun bench-decode-step"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "[1,2,4,8,16,32,64]"));

  /* refusals: exit 2, the option named */
  static const struct {
    const char *line, *named;
  } bad[] = {{"--tp 2", "--tp: '2' is not 1"},
             {"--tp 0", "--tp: '0'"},
             {"--kv-cache fp16", "--kv-cache: 'fp16' must be bf16 or fp8"},
             {"--batches 0,1", "--batches: '0,1'"},
             {"--batches 4,2", "--batches: '4,2'"},
             {"--batches 8,8", "--batches: '8,8'"},
             {"--kv 128,", "--kv: '128,'"},
             {"--kv 2097152", "--kv: '2097152'"},
             {"--steps 0", "--steps: '0'"},
             {"--warmup -1", "--warmup: '-1'"},
             {"--decode-attention v6", "--decode-attention: 'v6'"},
             {"--peak-gbps 0", "--peak-gbps: '0'"},
             {"--seed x", "--seed: 'x'"},
             {"--kv-cache fp8 --decode-attention v1", "--kv-cache fp8 is read by decode attention v2 to v5 only"},
             {"--frobnicate 1", "unknown option: --frobnicate"},
             {"--steps", "missing value: --steps"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    const int rc = parse_line(bad[i].line, &o, msg, sizeof msg);
    if (rc != 2 || !strstr(msg, bad[i].named)) fprintf(stderr, "\n  '%s' -> %d: %s\n", bad[i].line, rc, msg);
    CU_ASSERT_EQUAL(rc, 2);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad[i].named));
  }
}

static model_config llama(void) {
  model_config mc;
  ts_err e;
  CU_ASSERT_FATAL(model_load("llama3-8b", NULL, &mc, &e) == 0);
  return mc;
}

/* Llama 3 8B by hand (models/llama3-8b.json: 32 layers, hidden 4096, 32 heads / 8 KV of 128, FFN 14336, vocab
 * 128256): a layer's linear weights 4096 x (32 + 16) x 128 + 4096 x 4096 + 3 x 4096 x 14336 = 218,103,808, BF16;
 * two norms a layer, the final norm and the head 128256 x 4096, BF16. The cache: 2 x 32 layers x 8 x 128 x 2 bytes
 * = 131,072 bytes a position a sequence (FP8: 1 + 4 / 128 bytes an element: 67,584). */
static void test_floor(void) {
  const model_config mc = llama();
  ts_err e;
  double w, kv;
  CU_ASSERT_EQUAL_FATAL(dgrid_floor_bytes(&mc, 4, 1024, 0, &w, &kv, &e), 0);
  const double want_w = 2.0 * 32 * 218103808.0 + 2.0 * (32 * 2 * 4096.0 + 4096 + 128256.0 * 4096);
  CU_ASSERT_DOUBLE_EQUAL(w, want_w, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(w, 15009849344.0, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(kv, 131072.0 * 4 * 1024, 0.5);
  CU_ASSERT_EQUAL_FATAL(dgrid_floor_bytes(&mc, 64, 8192, 1, &w, &kv, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(w, want_w, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(kv, 67584.0 * 64 * 8192, 0.5);

  /* the count `tacorun execute` prints for a plan whose mean decode length prompt + generate / 2 is 1024 */
  const char *text = "{ \"schema\": 1, \"kind\": \"inference\", \"name\": \"p\", \"model\": \"llama3-8b\", "
                     "\"cluster\": \"h200x2-nvlink\", \"layout\": { \"tp\": 1, \"pp\": 1 }, \"batch\": { \"size\": 4, "
                     "\"prompt\": 1000, \"generate\": 48 }, \"kv_cache\": \"fp8\" }";
  static plan_infer p;
  if (plan_infer_from_json_text(text, strlen(text), "plan", NULL, NULL, &p, &e)) fprintf(stderr, "\n  %s\n", e.msg);
  CU_ASSERT_EQUAL_FATAL(plan_infer_from_json_text(text, strlen(text), "plan", NULL, NULL, &p, &e), 0);
  double pw, pkv;
  CU_ASSERT_EQUAL_FATAL(plan_infer_decode_floor_bytes(&p, &pw, &pkv, &e), 0);
  CU_ASSERT_EQUAL_FATAL(dgrid_floor_bytes(&mc, 4, 1024, 1, &w, &kv, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(w, pw, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(kv, pkv, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(kv, 67584.0 * 4 * 1024, 0.5);

  /* an MoE model has no dense floor: refused, the model named */
  model_config moe;
  CU_ASSERT_FATAL(model_load("mixtral-8x7b", NULL, &moe, &e) == 0);
  CU_ASSERT_EQUAL(dgrid_floor_bytes(&moe, 1, 128, 0, &w, &kv, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "mixtral-8x7b"));
}

/* What batch 1 over 8192 positions needs: the weights 2 x 8,030,261,248 parameters (the layers' 32 x (218,103,808
 * + 2 x 4096 norms), the final norm, embedding and head 128256 x 4096 each); the cache 131,072 x 8192; the
 * buffers of infer_model_init at one token a sequence: x, xn, proj (3 x 4096), qkv (6144), qh, oh, attn (3 x
 * 4096), f and act (3 x 14336), 2 bytes each, rstd 4 bytes; decode attention's partials at min(ceil(8 x 132 SMs /
 * 8 KV heads), ceil(8192 / 64)) = 128 splits of 32 heads x (128 + 2) x 4 bytes; the last rows (2 x 4096) and
 * logits (128256), 2 bytes; the runtime 1.09 GiB + 32 MiB; the init scratch the head's 128256 x 4096 BF16. */
static void test_need_and_fit(void) {
  const model_config mc = llama();
  ts_err e;
  dgrid_need n;
  CU_ASSERT_EQUAL_FATAL(dgrid_need_bytes(&mc, 1, 8192, 0, 132, &n, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(n.weights, 2.0 * 8030261248.0, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(n.kv_cache, 131072.0 * 8192, 0.5);
  const double buffers = 2.0 * (3 * 4096 + 6144 + 3 * 4096 + 3 * 14336) + 4 + 128.0 * 32 * 130 * 4 +
                         2.0 * (2 * 4096 + 128256);
  CU_ASSERT_DOUBLE_EQUAL(n.buffers, buffers, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(n.runtime, 1.09 * 1073741824.0 + 32.0 * 1048576.0, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(n.init_scratch, 2.0 * 128256 * 4096, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(n.fill_scratch, 0, 0);
  CU_ASSERT_DOUBLE_EQUAL(n.total, n.weights + n.kv_cache + n.buffers + n.runtime + n.init_scratch, 1);
  /* the FP8 cache: codes and scales, and the fill's scratch */
  CU_ASSERT_EQUAL_FATAL(dgrid_need_bytes(&mc, 1, 8192, 1, 132, &n, &e), 0);
  CU_ASSERT_DOUBLE_EQUAL(n.kv_cache, 67584.0 * 8192, 0.5);
  CU_ASSERT_DOUBLE_EQUAL(n.fill_scratch, 2.0 * DGRID_FILL_ROWS * 128, 0.5);

  /* batch 64 on 79 GB free: 8192 positions need 64 x 8192 x 131,072 = 68.7 GB of cache beside 16 GB of weights
   * (no), 4096 half of it (yes) */
  const long long kv[] = {128, 256, 512, 1024, 2048, 4096, 8192};
  CU_ASSERT_EQUAL(dgrid_fit(&mc, 64, kv, 7, 0, 132, 79e9, &n, &e), 5);
  CU_ASSERT(n.total <= 79e9 && n.total > 16e9 + 34e9);
  dgrid_need n8;
  CU_ASSERT_EQUAL_FATAL(dgrid_need_bytes(&mc, 64, 8192, 0, 132, &n8, &e), 0);
  CU_ASSERT(n8.total > 79e9);
  /* all of it on a large card; none of it where the weights alone do not fit */
  CU_ASSERT_EQUAL(dgrid_fit(&mc, 64, kv, 7, 0, 132, 139e9, &n, &e), 6);
  CU_ASSERT_EQUAL(dgrid_fit(&mc, 1, kv, 7, 0, 132, 10e9, &n, &e), -1);
  /* exactly at the need of 2048 positions: 2048 fits, 4096 does not */
  dgrid_need n2;
  CU_ASSERT_EQUAL_FATAL(dgrid_need_bytes(&mc, 32, 2048, 1, 132, &n2, &e), 0);
  CU_ASSERT_EQUAL(dgrid_fit(&mc, 32, kv, 7, 1, 132, n2.total, &n, &e), 4);
  CU_ASSERT_EQUAL(dgrid_fit(&mc, 32, kv, 7, 1, 132, n2.total - 1, &n, &e), 3);
}

static void test_median(void) {
  double a[] = {3, 1, 2}, b[] = {4, 1, 3, 2}, c[] = {7};
  CU_ASSERT_DOUBLE_EQUAL(dgrid_median(a, 3), 2, 0);
  CU_ASSERT_DOUBLE_EQUAL(dgrid_median(b, 4), 2.5, 0);
  CU_ASSERT_DOUBLE_EQUAL(dgrid_median(c, 1), 7, 0);
  CU_ASSERT_DOUBLE_EQUAL(dgrid_median(NULL, 0), 0, 0);
}

/* Rows: 3.35 GB read in 2 ms at 3350 GB/s is 1,675 GB/s, the floor's 1 ms 50 % of the step. */
static void test_rows(void) {
  dgrid_point pts[3] = {{.batch = 1, .kv = 128, .step_s = 2e-3, .weight_bytes = 3.0e9, .kv_bytes = 0.35e9},
                        {.batch = 8, .kv = 4096, .step_s = 1e-3 / 0.85, .weight_bytes = 3.35e9},
                        {.batch = 64, .kv = 8192, .step_s = 1e-3 / 0.9, .weight_bytes = 3.35e9}};
  CU_ASSERT_DOUBLE_EQUAL(dgrid_gbps(&pts[0]), 1675, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(dgrid_pct(&pts[0], 3350), 50, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(dgrid_pct(&pts[2], 3350), 90, 1e-9);
  CU_ASSERT_DOUBLE_EQUAL(dgrid_pct(&pts[0], 0), 0, 0);
  char row[256];
  dgrid_row(&pts[0], 3350, row, sizeof row);
  int b;
  long long kv;
  double us, gb, gbps, pct;
  char meets[8];
  CU_ASSERT_EQUAL_FATAL(sscanf(row, "%d %lld %lf %lf %lf %lf %7s", &b, &kv, &us, &gb, &gbps, &pct, meets), 7);
  CU_ASSERT(b == 1 && kv == 128);
  CU_ASSERT_DOUBLE_EQUAL(us, 2000, 0.005);
  CU_ASSERT_DOUBLE_EQUAL(gb, 3.35, 0.0005);
  CU_ASSERT_DOUBLE_EQUAL(gbps, 1675, 0.05);
  CU_ASSERT_DOUBLE_EQUAL(pct, 50, 0.05);
  CU_ASSERT_STRING_EQUAL(meets, "no");
  dgrid_row(&pts[1], 3350, row, sizeof row);
  CU_ASSERT_PTR_NOT_NULL(strstr(row, " 85.0    yes"));
  dgrid_row(&pts[1], 0, row, sizeof row);
  CU_ASSERT_PTR_NOT_NULL(strstr(row, "n/a"));
  /* the header's columns line up with the rows' */
  FILE *f = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  dgrid_header(f);
  rewind(f);
  char head[256];
  CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(head, sizeof head, f));
  fclose(f);
  dgrid_row(&pts[0], 3350, row, sizeof row);
  CU_ASSERT_EQUAL(strlen(head) - 1, strlen(row));
  CU_ASSERT_EQUAL(strstr(head, "step_us") + strlen("step_us") - head, strstr(row, "2000.00") + strlen("2000.00") - row);

  char sum[256];
  dgrid_summary(pts, 3, 3350, sum, sizeof sum);
  CU_ASSERT_STRING_EQUAL(sum, "# 3 points: % of floor min 50.0 / median 85.0 / max 90.0; 2 of 3 >= 80 %");
  dgrid_summary(pts, 3, 0, sum, sizeof sum);
  CU_ASSERT_PTR_NOT_NULL(strstr(sum, "GB/s min 1675.0 / median 2847.5 / max 3015.0"));
  dgrid_summary(pts, 0, 3350, sum, sizeof sum);
  CU_ASSERT_STRING_EQUAL(sum, "# no point measured");

  char path[] = "/tmp/test_decode_grid_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  ts_err e;
  CU_ASSERT_EQUAL_FATAL(dgrid_csv_write(path, pts, 3, 3350, &e), 0);
  f = fopen(path, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[512];
  CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
  CU_ASSERT_STRING_EQUAL(line, "batch,kv,step_us,floor_gb,weights_gb,kv_gb,gbps,pct_floor,meets_80,peak_gbps\n");
  CU_ASSERT_PTR_NOT_NULL(fgets(line, sizeof line, f));
  CU_ASSERT_STRING_EQUAL(line, "1,128,2000.000,3.350000,3.000000,0.350000,1675.00,50.00,no,3350\n");
  int rows = 1;
  while (fgets(line, sizeof line, f)) rows++;
  CU_ASSERT_EQUAL(rows, 3);
  fclose(f);
  remove(path);
  close(fd);
  CU_ASSERT_EQUAL(dgrid_csv_write("/nonexistent-dir/x.csv", pts, 3, 3350, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "/nonexistent-dir/x.csv: --csv"));
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("decode_grid", NULL, NULL);
  CU_add_test(s, "options, defaults and refusals", test_options);
  CU_add_test(s, "the read floor of a point is execute's count", test_floor);
  CU_add_test(s, "memory a point needs and the KV length that fits", test_need_and_fit);
  CU_add_test(s, "median", test_median);
  CU_add_test(s, "rows, summary and CSV", test_rows);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_transfer_prefill_attn.c — the calibration transfer of the inference executor's prefill attention
 * tables (sim/sim_transfer.c, kernel_table_bytes, sim_transfer_split_us): a keyed "attention_prefill.d<D>.s<S>"
 * point's time is split into the bytes of the unfused program (model_prefill_attention_bytes_at) at the HBM rate,
 * which move with the bandwidth, and the rest, which moves with the FLOP peak, by hand; after the
 * transfer no point is faster than its bytes at the target's HBM rate; the FLOP-keyed "attention_prefill"
 * moves by its FLOPs alone (its key carries no prompt length). */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "calibration.h"
#include "model.h"
#include "sim_transfer.h"
#include "test_check.h"

static topo_gpu gpu(const char *name, double tflops, double hbm) {
  topo_gpu g;
  memset(&g, 0, sizeof g);
  snprintf(g.name, sizeof g.name, "%s", name);
  g.bf16_tflops = tflops, g.hbm_gbps = hbm, g.nvlink_gbps = 450;
  return g;
}

/* The program's bytes by hand, d = 128, s = 1,024. A query head: Q 1,024 x 128 read, the 1,024 x 1,024
 * scores written (Q K^T), read and written (softmax), read (P V), O written and copied (read + written):
 * 131,072 + 4 x 1,048,576 + 3 x 131,072 = 4,718,592 elements. A KV head: K and V, 262,144 elements. BF16. */
static void test_program_bytes(void) {
  NEAR(model_prefill_attention_bytes(128, 1024, 8, 4), 2.0 * (8 * 4718592.0 + 2 * 262144.0), 0); /* 76,546,048 */
  NEAR(model_prefill_attention_bytes(128, 1024, 8, 4), 76546048.0, 0);
  /* at the FLOPs of 8 query heads (4 x 1,024^2 x 128 each = 2^32 in all), K and V once per query head */
  NEAR(model_attention_fwd_flops(1024, 1024, 8 * 128), 4294967296.0, 0);
  NEAR(model_prefill_attention_bytes_at(128, 1024, 4294967296.0, 1), 2.0 * 8 * (4718592.0 + 262144.0), 0);
  NEAR(model_prefill_attention_bytes_at(128, 1024, 4294967296.0, 1), 79691776.0, 0);
}

static void test_parse(void) {
  int d = 0;
  long long s = 0;
  CU_ASSERT_EQUAL(schema_prefill_attention_parse("attention_prefill.d128.s1024", &d, &s), 0);
  CU_ASSERT_EQUAL(d, 128);
  CU_ASSERT_EQUAL(s, 1024);
  CU_ASSERT_EQUAL(schema_prefill_attention_parse("attention_prefill.d64.s8128", &d, &s), 0);
  CU_ASSERT_EQUAL(d, 64);
  CU_ASSERT_EQUAL(s, 8128);
  const char *bad[] = {"attention_prefill", "attention_prefill.d128", "attention_prefill.d128.s",
                       "attention_prefill.d128.s1024.g4", "attention_prefill.d0.s64", "attention_prefill.d128.s064",
                       "attention.d128.s2048", "attention_prefill.s1024.d128", "attention_prefill.d1280000000.s1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (schema_prefill_attention_parse(bad[i], &d, &s) == 0) fprintf(stderr, "\n  parsed \"%s\"\n", bad[i]);
    CU_ASSERT_NOT_EQUAL(schema_prefill_attention_parse(bad[i], &d, &s), 0);
  }
}

/* Two points of "attention_prefill.d128.s1024" measured on a GPU of 989 TFLOP/s and 4,800 GB/s (the H200's
 * datasheet figures): 8 query heads (2^32 FLOPs, 79,691,776 bytes) in 30 us, 16 (2^33, 159,383,552) in 50 us.
 * The split (sim_transfer_split_us): the bytes at 4,800 GB/s take 16.602453 and 33.204907 us, leaving 13.397547
 * and 16.795093 us; the table's floor is the least of those, 13.397547 us, and stays; the rest (0 and 3.397546 us)
 * moves with the FLOP peak.
 * To 500 TFLOP/s, 2,000 GB/s: t' = floor + rest x 989 / 500 + bytes / 2,000 GB/s:
 *   13.397547 + 0 + 39.845888 = 53.243435 us, 13.397547 + 3.397546 x 1.978 + 79.691776 = 99.809670 us.
 * To 362 TFLOP/s, 864 GB/s (the L40S's figures): 13.397547 + 0 + 92.235852 = 105.633399 us, above the
 * point's 92.235852 us of bytes at 864 GB/s, where the FLOPs alone (the same points in the FLOP-keyed
 * "attention_prefill": R = 4.342737 and 8.685473 us, floor min(30 - 4.342737, 50 - 8.685473) = 25.657263 us)
 * give 25.657263 + 4.342737 x 989 / 362 = 37.521813 us, 2.5 x faster than its memory allows. */
static void test_keyed_transfer_by_hand(void) {
  const topo_gpu h200 = gpu("H200-SXM", 989, 4800), mid = gpu("mid", 500, 2000), l40s = gpu("L40S", 362, 864);
  const char *keyed = "attention_prefill.d128.s1024";
  const double f1 = 4294967296.0, f2 = 2 * f1;
  schema_calibration src = {0}, out;
  snprintf(src.gpu, sizeof src.gpu, "NVIDIA H200");
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_kernel(&src, keyed, true, f1, 0, 30.0), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_kernel(&src, keyed, true, f2, 0, 50.0), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_kernel(&src, "attention_prefill", true, f1, 0, 30.0), 0);
  CU_ASSERT_EQUAL_FATAL(schema_calibration_add_kernel(&src, "attention_prefill", true, f2, 0, 50.0), 0);
  ts_err e = {0};

  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &mid, 450, false, false, &out, &e), 0);
  const schema_kernel_table *t = schema_kernel_table_of(&out, keyed);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL_FATAL(t->n, 2);
  NEAR(t->pts[0].us, 53.243435, 1e-6);
  NEAR(t->pts[1].us, 99.809670, 1e-6);
  schema_calibration_free(&out);

  CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &h200, &l40s, 450, false, false, &out, &e), 0);
  t = schema_kernel_table_of(&out, keyed);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  NEAR(t->pts[0].us, 105.633399, 1e-6);
  for (int i = 0; i < t->n; i++) { /* the memory floor: every point's bytes at the target's HBM rate */
    const double floor_us = model_prefill_attention_bytes_at(128, 1024, t->pts[i].x, 1) / 864e9 * 1e6;
    if (!(t->pts[i].us >= floor_us)) fprintf(stderr, "\n  point %d: %.6g us below %.6g us\n", i, t->pts[i].us, floor_us);
    CU_ASSERT(t->pts[i].us >= floor_us);
  }
  NEAR(model_prefill_attention_bytes_at(128, 1024, f1, 1) / 864e9 * 1e6, 92.235852, 1e-7);
  const schema_kernel_table *flat = schema_kernel_table_of(&out, "attention_prefill");
  CU_ASSERT_PTR_NOT_NULL_FATAL(flat);
  NEAR(flat->pts[0].us, 37.521813, 1e-7); /* by its FLOPs alone: no prompt length in its key */
  schema_calibration_free(&out);
  schema_calibration_free(&src);
}

/* The shipped H200 file's keyed tables transferred to every GPU of the catalogue: no point below the bytes
 * of the program at that GPU's HBM rate (K and V counted once per query head, the most any head layout moves),
 * and a GPU of the same figures leaves every point as measured. */
static void test_shipped_tables_keep_the_floor(void) {
  static const char *const gpus[] = {"A100-SXM4-40GB", "A100-SXM4-80GB", "B200", "GB200", "H100-PCIe",
                                     "H100-SXM-HBM2e-96GB", "H100-SXM", "H20", "H200-SXM", "L40S"};
  schema_calibration src;
  topo_gpu from;
  ts_err e = {0};
  CU_ASSERT_EQUAL_FATAL(schema_calibration_load(MEASURED_CALIBRATION, &src, &e), 0);
  CU_ASSERT_EQUAL_FATAL(topo_gpu_load("H200-SXM", NULL, &from, &e), 0);
  int keyed = 0;
  for (size_t g = 0; g < sizeof gpus / sizeof *gpus; g++) {
    topo_gpu to;
    schema_calibration out;
    CU_ASSERT_EQUAL_FATAL(topo_gpu_load(gpus[g], NULL, &to, &e), 0);
    CU_ASSERT_EQUAL_FATAL(sim_transfer_calibration(&src, &from, &to, to.nvlink_gbps, false, false, &out, &e), 0);
    for (int k = 0; k < out.n_kernels; k++) {
      const schema_kernel_table *t = &out.kernels[k], *m = schema_kernel_table_of(&src, t->name);
      int d;
      long long s;
      if (schema_prefill_attention_parse(t->name, &d, &s)) continue;
      keyed += g == 0;
      CU_ASSERT_PTR_NOT_NULL_FATAL(m);
      CU_ASSERT_EQUAL_FATAL(m->n, t->n);
      for (int i = 0; i < t->n; i++) {
        const double floor_us = model_prefill_attention_bytes_at(d, s, t->pts[i].x, 1) / (to.hbm_gbps * 1e9) * 1e6;
        if (!(t->pts[i].us >= floor_us))
          fprintf(stderr, "\n  %s %s x %.6g: %.6g us below %.6g us\n", gpus[g], t->name, t->pts[i].x, t->pts[i].us,
                  floor_us);
        CU_ASSERT(t->pts[i].us >= floor_us);
        if (!strcmp(gpus[g], "H200-SXM")) NEAR(t->pts[i].us, m->pts[i].us, 1e-12);
      }
    }
    schema_calibration_free(&out);
  }
  CU_ASSERT(keyed >= 8); /* d128, s 128 .. 8,192 and 8,128 */
  schema_calibration_free(&src);
}

int main(void) {
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("transfer_prefill_attn", NULL, NULL);
  CU_add_test(s, "the unfused program's bytes by hand", test_program_bytes);
  CU_add_test(s, "keyed prefill attention table names", test_parse);
  CU_add_test(s, "a keyed point moved by its bytes, by hand; the FLOP-keyed table by its FLOPs",
              test_keyed_transfer_by_hand);
  CU_add_test(s, "the shipped keyed tables on every catalogue GPU: none below its memory floor",
              test_shipped_tables_keep_the_floor);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

/* test_rt_idmsg.c — rank 0's NCCL id, or its failure, reaches every rank
 * (runtime/nccl/rt_idmsg.h): a failed message ends a reader at once with
 * rank 0's reason (no rank waits for an id that never comes), a good one
 * hands over the id byte for byte, through memory and through the id file;
 * a missing file ends in a bounded, named error. */
#include <CUnit/Basic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt_idmsg.h"

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void tmp_path(char *buf, size_t n, const char *tag) {
  const char *dir = getenv("TMPDIR");
  snprintf(buf, n, "%s/test_rt_idmsg.%s.%d", dir && *dir ? dir : "/tmp", tag, (int)getpid());
}

static void test_memory(void) {
  unsigned char id[RT_ID_BYTES], out[RT_ID_BYTES];
  for (int i = 0; i < RT_ID_BYTES; i++) id[i] = (unsigned char)(rand() & 255);
  rt_id_msg m;
  ts_err e = {{0}, 0};
  rt_id_msg_ok(&m, id);
  memset(out, 0xa5, sizeof out);
  CU_ASSERT_EQUAL(rt_id_msg_take(&m, out, &e), 0);
  CU_ASSERT_EQUAL(memcmp(id, out, sizeof id), 0);
  rt_id_msg_fail(&m, "ncclGetUniqueId: unhandled system error (no network interface)");
  CU_ASSERT_EQUAL(rt_id_msg_take(&m, out, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0 could not create the NCCL id"));
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no network interface"));
  CU_ASSERT_EQUAL(e.bad_input, 0);
  rt_id_msg_fail(&m, NULL);
  CU_ASSERT_EQUAL(rt_id_msg_take(&m, out, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no reason given"));
}

static void test_file(void) {
  char path[512];
  tmp_path(path, sizeof path, "id");
  unlink(path);
  unsigned char id[RT_ID_BYTES], out[RT_ID_BYTES];
  for (int i = 0; i < RT_ID_BYTES; i++) id[i] = (unsigned char)(rand() & 255);
  rt_id_msg m, r;
  ts_err e = {{0}, 0};
  rt_id_msg_ok(&m, id);
  CU_ASSERT_EQUAL_FATAL(rt_id_file_write(path, &m, &e), 0);
  CU_ASSERT_EQUAL(rt_id_file_read(path, 1.0, &r, &e), 0);
  CU_ASSERT_EQUAL(rt_id_msg_take(&r, out, &e), 0);
  CU_ASSERT_EQUAL(memcmp(id, out, sizeof id), 0);
  /* rank 0 failed: the reader ends at once (well within its 30 s timeout) with rank 0's reason */
  rt_id_msg_fail(&m, "ncclGetUniqueId: internal error");
  CU_ASSERT_EQUAL_FATAL(rt_id_file_write(path, &m, &e), 0);
  double t0 = mono();
  int rc = rt_id_file_read(path, 30.0, &r, &e) || rt_id_msg_take(&r, out, &e);
  CU_ASSERT_EQUAL(rc, 1);
  CU_ASSERT(mono() - t0 < 5.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "rank 0 could not create the NCCL id: ncclGetUniqueId: internal error"));
  unlink(path);
}

static void test_missing(void) {
  char path[512];
  tmp_path(path, sizeof path, "missing");
  unlink(path);
  rt_id_msg r;
  ts_err e = {{0}, 0};
  double t0 = mono();
  CU_ASSERT_EQUAL(rt_id_file_read(path, 0.2, &r, &e), -1);
  double dt = mono() - t0;
  CU_ASSERT(dt >= 0.2 && dt < 5.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "no NCCL id from rank 0 within"));
  /* a truncated file (a writer that died mid-write without the rename) is not taken */
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("short", f);
  fclose(f);
  CU_ASSERT_EQUAL(rt_id_file_read(path, 0.1, &r, &e), -1);
  unlink(path);
  /* a directory that cannot be written: a named error */
  rt_id_msg m;
  rt_id_msg_fail(&m, "x");
  CU_ASSERT_EQUAL(rt_id_file_write("/nonexistent-dir/id", &m, &e), -1);
  CU_ASSERT_PTR_NOT_NULL(strstr(e.msg, "cannot write"));
}

int main(void) {
  srand(1234);
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("rt_idmsg", NULL, NULL);
  CU_add_test(s, "id or rank 0's failure through memory", test_memory);
  CU_add_test(s, "id or rank 0's failure through the id file", test_file);
  CU_add_test(s, "missing and truncated id files, bounded", test_missing);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  unsigned failed = CU_get_number_of_failures();
  CU_cleanup_registry();
  return failed ? 1 : 0;
}

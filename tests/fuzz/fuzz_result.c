/* fuzz_result.c — libFuzzer target for the result loader (`tacosim compare`
 * reads the files `tacosim simulate` and `tacorun execute` write, and a user
 * may hand it anything): any bytes must give a result or a "file: field:
 * reason" error, never a crash, a leak or undefined behaviour; a result that
 * loads must write as JSON that loads again with the same figures (to the
 * writer's 10 digits), and as CSV. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "result.h"

static int write_json(const schema_result *r, char **buf, size_t *len) {
  ts_err e;
  FILE *f = open_memstream(buf, len);
  if (!f) return -1;
  int rc = schema_result_write_json(r, f, &e);
  fclose(f);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  schema_result r;
  ts_err e;
  if (schema_result_from_json_text((const char *)data, size, "fuzz.json", &r, &e)) return 0;
  char *buf = NULL;
  size_t len = 0;
  if (write_json(&r, &buf, &len) == 0) {
    schema_result again;
    if (schema_result_from_json_text(buf, len, "again.json", &again, &e)) __builtin_trap();
    /* the writer keeps 10 significant digits */
    if (fabs(again.iteration_time_s - r.iteration_time_s) > 1e-9 * fabs(r.iteration_time_s) ||
        again.n_ops != r.n_ops || again.n_ranks != r.n_ranks)
      __builtin_trap();
    schema_result_free(&again);
  }
  free(buf);
  buf = NULL, len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (f) {
    schema_result_write_csv(&r, f, &e);
    fclose(f);
  }
  free(buf);
  schema_result_free(&r);
  return 0;
}

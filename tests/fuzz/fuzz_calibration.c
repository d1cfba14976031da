/* fuzz_calibration.c — libFuzzer target for the calibration loader: any bytes
 * must give either a calibration or a "file: field: reason" error, never a
 * crash, a leak or undefined behaviour; lookups on a calibration that loads
 * must give finite, non-negative times (or a named error); the writer's output
 * must load again. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "calibration.h"

static void require_time(int rc, double us) {
  if (rc == 0 && !(isfinite(us) && us >= 0)) __builtin_trap();
}

static bool b_of(int k) { return k % 2; }

static void exercise(const schema_calibration *c) {
  schema_roofline roof = {989e12, 4800e9, 450e9, 3, 1};
  schema_lookup l;
  schema_lookup_init(&l, c, &roof, NULL);
  ts_err e;
  double us;
  const double sizes[] = {1, 1e3, 1e6, 1e9, 1e12};
  for (int i = 0; i < 5; i++) {
    require_time(schema_lookup_gemm(&l, (long long)sizes[i] % 100000 + 1, 4096, 1024, &us, &e), us);
    require_time(schema_lookup_coll(&l, "allreduce", 2 + i, sizes[i], &us, &e), us);
    require_time(schema_lookup_coll(&l, "sendrecv", 2, sizes[i], &us, &e), us);
    schema_attn_shape q = {.head_dim = 64 << (i % 2), .seq = (int)((long long)sizes[i] % 9000) + 1, .batch = i + 1,
                           .heads = 8 * (i + 1), .kv_heads = i + 1, .causal = i % 2 == 0};
    for (int be = 0; be < SCHEMA_ATTN_NBACKENDS; be++) { /* the executor's points and every other backend's */
      int n;
      const schema_attn_point *pts = schema_attn_points(c, (schema_attn_backend)be, &n);
      for (int b = 0; b < 2; b++) require_time(schema_lookup_attn_backend(&l, (schema_attn_backend)be, &q, b, &us), us);
      for (int k = 0; k < n && k < 8; k++)
        require_time(schema_lookup_attn_backend(&l, (schema_attn_backend)be, &pts[k].s, b_of(k), &us), us);
    }
    for (int k = 0; k < c->n_kernels; k++)
      require_time(schema_lookup_kernel(&l, c->kernels[k].name, sizes[i], 128, &us, &e), us);
  }
  /* the FP8 GEMM lookups at and between the list's points: a point's time, two neighbours' interpolation, the
   * FP8 / BF16 ratio at the nearest m or k */
  for (int i = 0; i < c->n_gemm_fp8 && i < 16; i++) {
    const schema_gemm_point *g = &c->gemm_fp8[i];
    const long long ms[] = {g->m, g->m + 1, g->m > 1 ? g->m - 1 : 1, 3 * g->m / 2 + 1};
    for (int j = 0; j < 4; j++) {
      long long lo, hi, at;
      double r;
      if (schema_gemm_fp8_us(c, ms[j], g->n, g->k, &us)) require_time(0, us);
      if (schema_gemm_fp8_between_us(c, ms[j], g->n, g->k, &us, &lo, &hi) &&
          !(isfinite(us) && us > 0 && lo < ms[j] && ms[j] < hi))
        __builtin_trap();
      if (schema_gemm_fp8_ratio(c, ms[j], g->n, g->k, 4.0, &r, &at) && !(isfinite(r) && r > 0)) __builtin_trap();
    }
  }
  if (c->has_host && !(c->host_launch_us > 0 && c->host_gemm_launch_us > 0)) __builtin_trap();
  for (int i = 0; i < 5; i++)
    if (c->has_host && !(schema_host_sync_gap(c, sizes[i]) > 0)) __builtin_trap();
  /* the power-cap clock model of a section that loads (and so fitted): a clock in (0, f_max], finite speeds */
  if (c->power.n > 0) {
    const double mix[4][3] = {{1, 0, 0}, {0, 1, 0}, {0.5, 0.5, 0}, {0.3, 0.2, 0.5}};
    for (int i = 0; i < 4; i++) {
      double f = schema_power_clock(&c->power, mix[i][0], mix[i][1], mix[i][2]), g, m;
      if (!(f >= 0 && f <= c->power.f_max_mhz)) __builtin_trap();
      schema_power_speeds(&c->power, f, &g, &m);
      if (f > 0 && !(isfinite(g) && isfinite(m) && g > 0 && m > 0)) __builtin_trap();
    }
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return;
  int rc = schema_calibration_write(c, f, &e);
  fclose(f);
  schema_calibration again;
  if (rc == 0) {
    if (schema_calibration_from_json_text(buf, len, "rewritten", &again, &e)) __builtin_trap();
    schema_calibration_free(&again);
  }
  free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  schema_calibration c;
  ts_err e;
  if (schema_calibration_from_json_text((const char *)data, size, "fuzz.json", &c, &e) == 0) {
    exercise(&c);
    schema_calibration_free(&c);
  }
  return 0;
}

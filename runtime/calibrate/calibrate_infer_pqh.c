/* calibrate_infer_pqh.c — the per-query-head decode attention tables (calibrate_infer_pqh.h). */
#include "calibrate_infer_pqh.h"

#include <cuda_runtime_api.h>
#include <stdio.h>

#include "infer_decode.h"
#include "infer_decode_pqh.h"
#include "infer_kv8.h"
#include "rt_nccl.h"
#include "rt_ops.h"

#define PQH_D 128

/* One layout (hl = G x kvl query heads over kvl KV heads) over the grid, both caches. */
static int pqh_layout(schema_calibration *cal, infer_decode_timing *c, const calib_dec_grid *grid,
                      const calib_budget *bud, int g, int kvl, const char *name, const char *name8, int *n,
                      ts_err *e) {
  int dev = 0;
  void *stream = NULL;
  RT_CUDA(e, cudaGetDevice(&dev));
  c->a.hl = g * kvl, c->a.kvl = kvl;
  for (int b = 0; b < grid->nb; b++)
    for (int l = 0; l < grid->nl; l++) {
      c->a.batch = grid->batches[b], c->a.max_seq = grid->lens[l], c->len = grid->lens[l];
      c->set_bytes = (size_t)grid->batches[b] * kvl * grid->lens[l] * PQH_D * 2;
      if (c->set_bytes > grid->big_pool) continue;
      c->sets = (int)((c->set_bytes <= grid->pool ? grid->pool : grid->big_pool) / c->set_bytes);
      for (int fp8 = 0; fp8 < 2; fp8++) {
        c->kernel = fp8 ? INFER_DEC_PQH_FP8 : INFER_DEC_PQH;
        double us;
        if (calib_time_us(infer_decode_timing_launch, c, &stream, &dev, 1, bud, &us, e)) return -1;
        /* the unique KV bytes (each KV head's once, whatever the G readers): BF16 2 B an element; FP8 1 B and
         * a 4 B scale a head vector of 128 */
        double kv_bytes =
            fp8 ? 2.0 * (double)c->set_bytes / 2 * (PQH_D + 4) / PQH_D : 2.0 * (double)c->set_bytes;
        if (schema_calibration_add_kernel(cal, fp8 ? name8 : name, false, kv_bytes, grid->batches[b] * kvl, us))
          return ts_fail_sys(e, "out of memory");
      }
      (*n)++;
    }
  return 0;
}

int calib_infer_pqh_tables(schema_calibration *cal, const int *gs, int ng, const calib_dec_grid *grid,
                           const calib_budget *bud, ts_err *e) {
  int max_g = 1;
  for (int i = 0; i < ng; i++)
    if (gs[i] > max_g) max_g = gs[i];
  const int max_hl = max_g * grid->max_kvl, max_batch = grid->batches[grid->nb - 1];
  const size_t pool = grid->big_pool, qo_bytes = (size_t)max_batch * max_hl * PQH_D * 2;
  const long long rows = (long long)(pool / 2 / PQH_D);
  size_t part_bytes = 0;
  for (int b = 0; b < grid->nb; b++)
    for (int l = 0; l < grid->nl; l++)
      for (int kvl = 1; kvl <= grid->max_kvl; kvl *= 2)
        for (int i = 0; i < ng; i++) {
          infer_attn_dims a = {.batch = grid->batches[b], .hl = gs[i] * kvl, .kvl = kvl, .head_dim = PQH_D,
                               .max_seq = grid->lens[l]};
          size_t p = infer_decode_pqh_partial_bytes(&a, grid->lens[l]);
          if (p > part_bytes) part_bytes = p;
        }
  infer_decode_timing c = {.kernel = INFER_DEC_PQH, .a = {.head_dim = PQH_D}};
  int rc = -1;
  if (cudaMalloc((void **)&c.k, pool) != cudaSuccess || cudaMalloc((void **)&c.v, pool) != cudaSuccess ||
      cudaMalloc((void **)&c.q, qo_bytes) != cudaSuccess || cudaMalloc((void **)&c.out, qo_bytes) != cudaSuccess ||
      cudaMalloc((void **)&c.part, part_bytes) != cudaSuccess || cudaMalloc((void **)&c.k8, pool / 2) != cudaSuccess ||
      cudaMalloc((void **)&c.v8, pool / 2) != cudaSuccess || cudaMalloc((void **)&c.ks, (size_t)rows * 4) != cudaSuccess ||
      cudaMalloc((void **)&c.vs, (size_t)rows * 4) != cudaSuccess) {
    ts_fail_sys(e, "per-query-head decode attention tables: cudaMalloc failed (%s)",
                cudaGetErrorString(cudaGetLastError()));
    goto fail;
  }
  if (rt_fill_random_bf16(c.k, (long long)(pool / 2), 3, 1.0f, NULL, e) ||
      rt_fill_random_bf16(c.v, (long long)(pool / 2), 4, 1.0f, NULL, e) ||
      rt_fill_random_bf16(c.q, (long long)(qo_bytes / 2), 5, 1.0f, NULL, e) ||
      infer_kv8_quantize(c.k, c.k8, c.ks, rows, PQH_D, NULL, e) ||
      infer_kv8_quantize(c.v, c.v8, c.vs, rows, PQH_D, NULL, e))
    goto fail;
  for (int i = 0; i < ng; i++) {
    char name[64], name8[64];
    snprintf(name, sizeof name, "attention_decode_pqh.g%d", gs[i]);
    snprintf(name8, sizeof name8, "attention_decode_pqh_fp8.g%d", gs[i]);
    int n = 0;
    for (int kvl = 1; kvl <= grid->max_kvl; kvl *= 2)
      if (pqh_layout(cal, &c, grid, bud, gs[i], kvl, name, name8, &n, e)) goto fail;
    fprintf(stderr, "calibrate-infer: %s and %s (per query head), %d timings each (1-%d KV heads, %.0f s)\n", name,
            name8, n, grid->max_kvl, calib_elapsed_s());
  }
  rc = 0;
fail:
  cudaFree(c.vs), cudaFree(c.ks), cudaFree(c.v8), cudaFree(c.k8), cudaFree(c.part);
  cudaFree(c.out), cudaFree(c.q), cudaFree(c.v), cudaFree(c.k);
  return rc;
}

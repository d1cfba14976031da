/* calibrate_infer_pqh.h — `tacorun calibrate-infer --per-query-head`: the tables of decode attention
 * read once per query head ("attention_decode_pqh.g<G>", "attention_decode_pqh_fp8.g<G>"), which
 * price a plan's "decode_attention": "per-query-head" (sim/INFERENCE.md, "Decode attention read
 * per query head"; calibration/README.md). */
#ifndef CALIBRATE_INFER_PQH_H
#define CALIBRATE_INFER_PQH_H

#include <stddef.h>

#include "calibrate_time.h"
#include "calibration.h"
#include "ts_error.h"

/* The batch x length grid of the decode attention tables (calibrate_infer.c's): a point's K (or V)
 * cache of set bytes rotates through `pool` bytes when set <= pool, else through `big_pool`;
 * points beyond big_pool are left out. KV heads a GPU 1, 2, 4 .. max_kvl. */
typedef struct {
  const int *batches;
  int nb;
  const long long *lens;
  int nl;
  size_t pool, big_pool;
  int max_kvl;
} calib_dec_grid;

/* For each G of gs (query heads a KV head, head dim 128): infer_decode_pqh over a BF16 cache into
 * "attention_decode_pqh.g<G>" and infer_decode_pqh_fp8 over the FP8 cache into
 * "attention_decode_pqh_fp8.g<G>", at every point of the grid and 1 .. max_kvl KV heads (G x kvl
 * query heads), keyed by the UNIQUE KV bytes read (K and V of the kvl heads; FP8: codes and
 * scales), grouped by batch x kvl, as the "attention_decode[_fp8].g<G>" tables are. On GPU 0
 * (current device); progress on standard error. */
int calib_infer_pqh_tables(schema_calibration *cal, const int *gs, int ng, const calib_dec_grid *grid,
                           const calib_budget *bud, ts_err *e);

#endif

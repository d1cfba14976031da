/* calibrate.h — the phases of `tacorun calibrate`, shared by its files.
 *
 * calibrate.c parses options, writes the metadata and saves the file through
 * schema/calibration.h; each phase below measures one family of costs on the
 * GPU(s) and adds its points to the schema_calibration being built. */
#ifndef CALIBRATE_H
#define CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>

#include "calibrate_shapes.h"
#include "calibrate_time.h"
#include "calibration.h"
#include "ts_error.h"

#define CALIB_MAX_GPUS 16

typedef struct {
  int quick;
  calib_budget budget;      /* compute kernels */
  calib_budget comm_budget; /* collectives: one warm-up, fewer batches for long transfers */
  int devices[CALIB_MAX_GPUS], ndev;
  size_t comm_max_bytes;    /* largest collective size (1 GiB) */
  int groups[8], n_groups;  /* TACO group sizes for the codec kernels */
  int coll_groups[8], n_coll_groups; /* TACO group sizes for the compressed collectives */
} calib_config;

/* Adds a kernel point; a point already at the same (x, group) is averaged
 * with it (two shapes can move the same bytes), so tables keep unique x. */
int calib_add_kernel(schema_calibration *c, const char *name, bool by_flops, double x, int group, double us);

int calib_run_gemms(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e);
int calib_run_attention(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e);
int calib_run_memops(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e);
/* TACO and CAAT-Net kernels (calibrate_codec.c). */
int calib_run_codec(const calib_config *cfg, schema_calibration *c, ts_err *e);
/* NCCL BF16 (compressed = 0) or TACO-compressed (1) collectives for every
 * group size 2, 4, ... <= ndev (calibrate_comm.c). */
int calib_run_comm(const calib_config *cfg, int compressed, schema_calibration *c, ts_err *e);

#endif

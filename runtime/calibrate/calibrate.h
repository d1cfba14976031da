/* calibrate.h — the phases of `tacorun calibrate`, shared by its files.
 *
 * calibrate.c parses options, writes the metadata and saves the file through
 * schema/calibration.h; each phase below measures one family of costs on the
 * GPU(s) and adds its points to the schema_calibration being built. */
#ifndef CALIBRATE_H
#define CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "calibrate_power.h"
#include "calibrate_shapes.h"
#include "calibrate_time.h"
#include "calibration.h"
#include "ts_error.h"

#define CALIB_MAX_GPUS 16
#define CALIB_MAX_GEMM_PASSES 8 /* --gemm-passes at most */

/* Per-size spread of a collective's timed batches (calibrate_comm.c). */
typedef struct {
  char name[48];
  int nranks, reps, batch;
  double bytes, median_us, min_us, max_us;
} calib_spread_row;

typedef struct {
  calib_spread_row *rows;
  int n, cap;
} calib_spread;

typedef struct {
  int quick;
  calib_budget budget;      /* compute kernels */
  calib_budget comm_budget; /* collectives: one warm-up, fewer batches for long transfers */
  int devices[CALIB_MAX_GPUS], ndev;
  size_t comm_max_bytes;    /* largest collective size (1 GiB) */
  int groups[8], n_groups;  /* TACO group sizes for the codec kernels */
  int coll_groups[8], n_coll_groups; /* TACO group sizes for the compressed collectives */
  int gemm_passes;          /* passes over every GEMM shape, alternating direction (geometric mean kept) */
  const char *gemm_tsv;     /* NULL, or a file for every pass's time of every GEMM */
  const char *gemm_fp8_tsv; /* NULL, or the same for every FP8 GEMM key (with its roles and accumulation) */
  const char *clock_tsv;    /* NULL, or a file for every point of the clock section */
  const char *attn_tsv;     /* NULL, or a file for both timings of every attention shape */
  int attn_alone;           /* --attn-context alone: attention_shapes timed back to back, not between GEMMs */
  const char *power_json;   /* --power-json: the power phase's output (required by it) */
  const char *power_tsv;    /* NULL, or a file for every measured column of every power pattern */
  double power_settle_s;    /* each power pattern runs untimed this long first */
  double power_timed_s;     /* then its timed window */
  long long power_gemms[CALIB_POWER_MAX_SHAPES][3]; /* --power-gemm M x N x K: shapes also run back to back */
  int n_power_gemms;
  long long power_attns[CALIB_POWER_MAX_SHAPES][5]; /* --power-prefill-attn HL x KVL x D x B x S */
  int n_power_attns;
  /* One process per GPU (mpirun, or TACORUN_RANK/NRANKS/ID_FILE): rank 0
   * measures the compute phases and writes the file; every rank takes part in
   * the collectives, over the world communicator `world` (opened once: MPI
   * cannot be initialised twice). */
  int multi, rank, nranks;
  void *world;              /* rt_nccl * (kept opaque: this header is also built without CUDA) */
  int transport;            /* coll_transport asked for (--transport; 0: auto) */
  calib_spread *spread;     /* filled by the collective phases */
  int comm_passes;          /* sweeps over every collective size, median of them kept (1: one sweep) */
} calib_config;

/* Adds a kernel point; a point already at the same (x, group) is averaged
 * with it (two shapes can move the same bytes), so tables keep unique x. */
int calib_add_kernel(schema_calibration *c, const char *name, bool by_flops, double x, int group, double us);

/* GEMM passes: pass p times the shapes forward when p is even, in reverse
 * when odd; calib_gemm_pass_shape is the shape timed j-th in pass p of n. */
int calib_gemm_pass_shape(int p, int j, int n);
/* The table's value of one shape from its passes t[0..passes-1] (0: not
 * measured): their geometric mean, so that a drift of the GPU's speed over
 * the run, seen forward in one pass and in reverse in the next, cancels in
 * the ratio between shapes. 0 when no pass measured it. */
double calib_gemm_combine_passes(const double *t, int passes);
/* How far passes 1 and 2 differ: the median over shapes of |t1 - t2| / their mean, t[i * passes + p]
 * the time of shape i in pass p, over the shapes of mean >= min_us measured in both (their count in
 * *count); 0 with fewer than 2 passes. */
double calib_gemm_pass_difference(const double *t, int n, int passes, double min_us, int *count);

/* Collective passes (--comm-passes): the sweep of every collective table is
 * repeated n times, so that a transport whose speed wanders over seconds to
 * minutes (loopback sockets: experiments/validation/README.md) is sampled
 * across the whole calibration instead of in one second per size. Adds to
 * `out`, for every table and size of passes[0], the median over the passes
 * of their values (a pass without that point is left out). -1 on OOM. */
int calib_comm_combine_passes(const schema_calibration *passes, int n, schema_calibration *out);

int calib_run_gemms(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e);
/* The FP8 GEMM (runtime/ops/exec_gemm_fp8.h) against its plain-C reference (calibrate_fp8.h) at a few odd
 * shapes, both accumulations, each line to log (NULL: none); then "gemm_fp8": every FP8 key of sh timed
 * as the BF16 GEMMs are (calibrate_fp8.c). */
int calib_gemm_fp8_check(FILE *log, ts_err *e);
int calib_run_gemm_fp8(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e);
int calib_run_attention(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e);
/* "attention_shapes" (calibrate_attn.c) */
int calib_run_attention_shapes(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e);
int calib_run_memops(const calib_config *cfg, const calib_shapes *sh, schema_calibration *c, ts_err *e);
/* The clock section: GEMM and memory-bound speeds at compute duty cycles
 * below 1 against back to back, and the power controller's window
 * (calibrate_clock.c, calibration/README.md). */
int calib_run_clock(const calib_config *cfg, schema_calibration *c, ts_err *e);
/* The power phase: the power drawn and the SM clock of patterns of the
 * reference GEMM, add and idle, to cfg->power_json (and power_tsv); writes no
 * calibration table (calibrate_power.c, calibration/power/README.md). */
int calib_run_power(const calib_config *cfg, ts_err *e);
/* Mixture-of-experts tables: grouped expert GEMMs and the routing kernels at
 * the shapes of the MoE models among `models` ("all" or a list), checked
 * against their references first; tsv_path (NULL: none) gets every point
 * with the grouped-batched and dense comparisons (calibrate_moe.c). */
int calib_run_moe(const calib_config *cfg, const char *models, const char *tsv_path, schema_calibration *c,
                  ts_err *e);
/* The routing kernels (calibrate_moe_route.c): every kernel of
 * kernels/moe_route.h against its reference at (t tokens, E experts, top k,
 * hidden h) on fresh random inputs with poisoned outputs; then the five
 * tables' points at t tokens of a model (E, k, h), rows added to tsv (NULL: none). */
int calib_moe_route_check(int t, int E, int k, int h, unsigned long long seed, ts_err *e);
int calib_moe_route_time(const calib_config *cfg, int t, int E, int k, int h, schema_calibration *c, FILE *tsv,
                         ts_err *e);
/* The "host" section: the executor's launch costs and its wait after a
 * device-to-host copy, with the GPU idle (calibrate_host.c). */
int calib_run_host(const calib_config *cfg, schema_calibration *c, ts_err *e);
/* TACO and CAAT-Net kernels (calibrate_codec.c). */
int calib_run_codec(const calib_config *cfg, schema_calibration *c, ts_err *e);
/* NCCL BF16 (compressed = 0) or TACO-compressed (1) collectives for every
 * group size 2, 4, ... <= ndev (calibrate_comm.c). */
int calib_run_comm(const calib_config *cfg, int compressed, schema_calibration *c, ts_err *e);
/* One-process-per-GPU mode: opens cfg->world (every rank calls it). */
int calib_world_open(calib_config *cfg, ts_err *e);
void calib_world_close(calib_config *cfg, int failed);
/* Spread rows (calibrate_table.c): add one (-1 on OOM), write them as a
 * table (TSV), summarise them in `sum` ("... x% median, y% p90 over n sizes"). */
int calib_spread_add(calib_spread *s, const calib_spread_row *r);
void calib_spread_free(calib_spread *s);
int calib_spread_write(const calib_spread *s, const char *path, ts_err *e);
void calib_spread_summary(const calib_spread *s, char *sum, size_t n);

/* The commands (argv[0] is the command's name; each returns the exit status). */
int cmd_calibrate(int argc, char **argv);       /* calibrate: calibrate.c */
int cmd_calibrate_infer(int argc, char **argv); /* calibrate-infer: calibrate_infer.c */

#endif

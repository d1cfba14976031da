/* bench_decode_step_grid.h — the plain-C half of `tacorun bench-decode-step` (bench_decode_step.c, which
 * times the inference executor's whole decode step over a batch x KV-length grid, issue 24): its options, what
 * a point needs in GPU memory, its read floor, the median of its step times, and its rows (stdout and CSV).
 * No CUDA here: tests/test_decode_grid.c checks all of it without a GPU. */
#ifndef BENCH_DECODE_STEP_GRID_H
#define BENCH_DECODE_STEP_GRID_H

#include <stdio.h>

#include "model.h"
#include "ts_error.h"

#define DGRID_MAX_POINTS 32  /* entries of --batches and of --kv */
#define DGRID_TARGET_PCT 80.0 /* issue 24: time per output token >= 80 % of the read floor */
/* Rows of random BF16 head vectors at a time when the FP8 cache is filled (quantized by the executor's own
 * quantizer): a scratch of DGRID_FILL_ROWS x head_dim x 2 bytes beside the model. */
#define DGRID_FILL_ROWS 65536LL

typedef struct {
  const char *model;  /* --model: zoo name or path [llama3-8b] */
  int tp;             /* --tp [1]: one GPU only */
  int kv_fp8;         /* --kv-cache bf16|fp8 [bf16] */
  long long batches[DGRID_MAX_POINTS], kv[DGRID_MAX_POINTS];
  int nb, nkv;        /* --batches [1,2,4,8,16,32,64], --kv [128,...,8192]: strictly increasing */
  int steps, warmup;  /* --steps [20] timed after --warmup [5] */
  int decode_attn;    /* --decode-attention v1..v5 [the executor's default, INFER_DECODE_DEFAULT] */
  int eager;          /* --eager: one launch a kernel [off: the step as one CUDA graph launch] */
  double peak_gbps;   /* --peak-gbps [0: the GPU catalogue's hbm_gbps of the device found] */
  const char *csv;    /* --csv FILE [not written] */
  unsigned long long seed; /* --seed [1234]: weights, cache contents, first tokens */
} dgrid_opts;

void dgrid_usage(FILE *out);
/* argv[0] is the command's name. Returns -1 to go on, 0 after --help (usage on out), 2 on bad input (the option
 * named on err). */
int dgrid_parse(int argc, char **argv, dgrid_opts *o, FILE *out, FILE *err);

/* What one decode-step model of `batch` sequences with `max_seq` cache positions needs on one GPU, bytes: the
 * executor's memory model of itself (plan_infer_memory_per_gpu of a plan of prompt 1 and prompt + generate =
 * max_seq: weights, KV cache, its working buffers, the runtime's share), plus what only this benchmark holds:
 * the weight initialisation's scratch (infer_model.c, init_weights: the largest full tensor) and, FP8 cache, the
 * fill scratch. sms: the device's SMs (decode attention's partials). */
typedef struct {
  double weights, kv_cache, buffers, runtime, init_scratch, fill_scratch, total;
} dgrid_need;
int dgrid_need_bytes(const model_config *mc, int batch, long long max_seq, int kv_fp8, int sms, dgrid_need *n,
                     ts_err *e);
/* The index of the largest kv[i] (kv increasing) at which batch fits free_bytes (dgrid_need_bytes' total <=
 * free_bytes), its need in *n; -1 when not even kv[0] fits (*n: kv[0]'s need). */
int dgrid_fit(const model_config *mc, int batch, const long long *kv, int nkv, int kv_fp8, int sms, double free_bytes,
              dgrid_need *n, ts_err *e);

/* The read floor of one decode step of `batch` sequences attending over kv positions on one GPU:
 * plan_infer_decode_floor_bytes (the count `tacorun execute` prints) of a plan of prompt kv and generate 0. */
int dgrid_floor_bytes(const model_config *mc, int batch, long long kv, int kv_fp8, double *weight_bytes,
                      double *kv_bytes, ts_err *e);

/* The median of v[0..n) (sorted in place); 0 when n is 0. */
double dgrid_median(double *v, int n);

/* One measured point. */
typedef struct {
  int batch;
  long long kv;
  double step_s;                   /* median step time */
  double weight_bytes, kv_bytes;   /* dgrid_floor_bytes */
} dgrid_point;

/* The bytes a step reads / its time, GB/s; the floor's time at peak_gbps as a % of the step (0: peak unknown). */
double dgrid_gbps(const dgrid_point *p);
double dgrid_pct(const dgrid_point *p, double peak_gbps);

/* The table, nccl-tests' style: a header of two '#' lines, then one row a point (peak_gbps 0: % and the verdict
 * read "n/a"). */
void dgrid_header(FILE *out);
void dgrid_row(const dgrid_point *p, double peak_gbps, char *buf, size_t cap);
/* "# N points: % of floor min A / median B / max C; K of N >= 80 %" (peak unknown: GB/s min / median / max). */
void dgrid_summary(const dgrid_point *pts, int n, double peak_gbps, char *buf, size_t cap);
/* The same rows as CSV with a header line; fails naming the file. */
int dgrid_csv_write(const char *path, const dgrid_point *pts, int n, double peak_gbps, ts_err *e);

#endif

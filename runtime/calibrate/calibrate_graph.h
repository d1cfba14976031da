/* calibrate_graph.h — the inference executor's decode layer timed three ways
 * (alone, queued in a stream the host is ahead of, inside one CUDA graph):
 * the measurement behind `tacorun bench-graph` (runtime/calibrate/bench_graph.c,
 * which prints its tables) and behind the host section's graph_gap_us of
 * `tacorun calibrate` (calibrate_host.c), so that both use one method.
 *
 * The layer is infer_forward's decode layer at TP 1 without bias
 * (Llama-style): RMSNorm, qkv GEMM, RoPE + KV scatter, decode attention v3
 * (split + combine kernels), attention-output GEMM, residual add, RMSNorm,
 * FC1 GEMM, SwiGLU, FC2 GEMM, residual add; every layer has its own weights
 * and KV cache, so a GEMM reads its weights from HBM as in the executor. Per
 * op, N = layers launches (launch i on layer i's buffers):
 *   alone   calib_time_us (the calibration's timing: batches of back-to-back
 *           launches from the host, median per launch);
 *   queued  a spin kernel of spin_us first, then the N launches, timed
 *           between events around them: the host has queued them all before
 *           the GPU reaches them, so the time is the GPU's (kernel plus the
 *           stream's gap between dependent kernels);
 *   graph   the N launches captured into one CUDA graph, launched behind the
 *           same spin kernel, timed between events around the launch.
 * A spin kernel of ref_us is the reference. Medians of reps repetitions.
 * Timing only: the kernels' results are checked by `tacorun execute
 * --infer-check` and `bench-decode`. */
#ifndef CALIBRATE_GRAPH_H
#define CALIBRATE_GRAPH_H

#include <stdio.h>

#include "model.h"
#include "ts_error.h"

#define CALIB_GRAPH_MAX_LAYERS 128
#define CALIB_GRAPH_MAX_REPS 15
#define CALIB_GRAPH_MAX_POINTS 8

typedef struct {
  const model_config *mc; /* the model whose decode layer is timed */
  int layers;             /* 1..CALIB_GRAPH_MAX_LAYERS */
  int n_points;           /* 1..CALIB_GRAPH_MAX_POINTS (batch, KV length) pairs */
  long long batch[CALIB_GRAPH_MAX_POINTS], len[CALIB_GRAPH_MAX_POINTS];
  int reps;               /* 1..CALIB_GRAPH_MAX_REPS */
  double spin_us, ref_us; /* the spin ahead of the queued / graph launches; the reference kernel */
} calib_graph_opts;

/* bench-graph's defaults: llama3-8b's 32 layers at batch 1 x 4,096, 16 x 1,024
 * and 64 x 2,048, 5 repetitions, a 4,000 us spin, a 20 us reference (set
 * o->mc yourself). */
calib_graph_opts calib_graph_defaults(void);

/* GPU bytes the opts' weights and largest KV cache take (to check they fit). */
double calib_graph_bytes(const calib_graph_opts *o);

/* Runs every point: prints its table (markdown, as bench-graph always did)
 * to out unless out is NULL; *gap_us (unless gap_us is NULL): the graph gap,
 * the median over the points of "queued - graph" per launch of the
 * table-timed decode kernels: the four GEMMs (one launch each) and the
 * decode attention (two launches, split and combine, each counted with half
 * its op's difference): calibration/merge_graph_gap.py's rule on a printed
 * bench-graph output. *n_launches: how many values the median is of. */
int calib_graph_run(const calib_graph_opts *o, FILE *out, double *gap_us, int *n_launches, ts_err *e);

/* What calib_time_behind_spin times: enqueue the work on the stream given there (0 or -1 with e set). */
typedef int (*calib_issue_fn)(void *ctx, ts_err *e);
/* The queued / graph timing above, for any work: *us = the median over reps (1..CALIB_GRAPH_MAX_REPS)
 * of the GPU time of what issue(ctx) enqueues on stream, behind a spin kernel of spin_us; graph 0:
 * issued from the host each time (after one warm-up issue), graph 1: captured once into a CUDA graph
 * (and launched once as a warm-up), then launched. Also the small kernels' tables (calibrate_small.c). */
int calib_time_behind_spin(void *stream, calib_issue_fn issue, void *ctx, int graph, double spin_us, int reps,
                           double *us, ts_err *e);

/* `tacorun bench-graph` (bench_graph.c; argv[0] is the command's name; returns the exit status). */
int bench_graph_main(int argc, char **argv);

#endif

/* taco_reshape.h — data-driven reshaping: how to cut a [tokens x hidden]
 * tensor into TACO groups (group size and axis), chosen by measuring the
 * codec's error on sample tensors and its cost, not fixed in advance.
 *
 * Groups along HIDDEN are rows' consecutive elements (what the kernels encode
 * directly); groups along TOKENS take G consecutive tokens of one channel, so
 * an outlier channel stays in its own groups, at the price of a transpose
 * (one more read and write of the tensor) that the cost counts. */
#ifndef TACO_RESHAPE_H
#define TACO_RESHAPE_H

#include <stddef.h>

#include "taco_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TACO_AXIS_HIDDEN, TACO_AXIS_TOKENS } taco_axis;

/* Time in microseconds to encode + decode n elements with this group and axis
 * (a measured table or a timing callback); NULL uses a bandwidth model. */
typedef double (*taco_cost_fn)(int group, taco_axis axis, size_t n, void *ctx);

typedef enum {
  TACO_METRIC_POOLED,     /* ||y - x|| / ||x|| over the whole tensor */
  TACO_METRIC_PER_CHANNEL /* the same per hidden channel, averaged over channels */
} taco_error_metric;

typedef struct {
  taco_fp8 fp8;
  taco_error_metric metric;
  double max_rel_err;  /* accept candidates whose relative L2 error is at most this */
  double link_gbps;    /* GB/s of the link the message crosses (wire time counts) */
  double hbm_gbps;     /* bandwidth model when cost is NULL (e.g. 0.9 * 4276) */
  taco_cost_fn cost;
  void *cost_ctx;
} taco_reshape_options;

typedef struct {
  int group;
  taco_axis axis;
  double rel_err;   /* measured on the samples, by opt->metric */
  double cost_us;   /* codec time + wire time for one sample-sized message */
} taco_reshape_choice;

#define TACO_RESHAPE_CANDIDATES 10 /* 5 group sizes x 2 axes */

/* samples: nsamples tensors of rows x cols FP32 (row-major, cols = hidden).
 * Fills best and, if all != NULL, all candidates in the order tried.
 * Returns 0, or -1 (taco_last_error) on bad arguments. Picks the cheapest
 * candidate within max_rel_err; if none is, the one with the least error. */
int taco_reshape_choose(const float *const *samples, int nsamples, size_t rows, size_t cols,
                        const taco_reshape_options *opt, taco_reshape_choice *best,
                        taco_reshape_choice all[TACO_RESHAPE_CANDIDATES]);

/* The choice as a plan codec setting, e.g.
 * {"kind": "taco", "group": 128, "fp8": "e4m3", "axis": "hidden"}. */
int taco_reshape_format(const taco_reshape_choice *c, taco_fp8 fp8, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif

/* taco_reshape.c — choose TACO's group size and axis from sample tensors by
 * measured error (the reference codec) and cost (codec time + wire time). */
#include "taco_reshape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "taco_internal.h"
#include "taco_ref.h"

static const int groups[] = {32, 64, 128, 256, 512};

/* bandwidth model: encode reads 2N + writes the wire, decode the reverse;
 * the tokens axis adds a transpose on each side (read + write 2N twice) */
static double model_cost_us(int group, taco_axis axis, size_t n, double hbm_gbps) {
  double wire = (double)taco_wire_bytes(n, group), bytes = 2.0 * (2.0 * (double)n + wire);
  if (axis == TACO_AXIS_TOKENS) bytes += 2.0 * (4.0 * (double)n);
  return bytes / (hbm_gbps * 1e3);
}

/* error of one candidate over the samples, by the chosen metric */
static int measure(const float *const *samples, int nsamples, size_t rows, size_t cols, int group, taco_axis axis,
                   const taco_reshape_options *opt, double *rel_err) {
  size_t n = rows * cols;
  float *in = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
  double *err2 = calloc(cols, sizeof(double)), *norm2 = calloc(cols, sizeof(double));
  int rc = 0;
  if (!in || !out || !err2 || !norm2) rc = TACO_FAIL("reshape: out of memory for %zu elements", n);
  taco_params p = {group, opt->fp8};
  for (int s = 0; s < nsamples && !rc; s++) {
    const float *x = samples[s];
    if (axis == TACO_AXIS_HIDDEN) {
      for (size_t i = 0; i < n; i++) in[i] = x[i];
    } else { /* channel-major: G consecutive tokens of one channel form a group */
      for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) in[c * rows + r] = x[r * cols + c];
    }
    rc = taco_ref_roundtrip(TACO_CODEC_TACO, in, n, p, out);
    for (size_t i = 0; i < n && !rc; i++) {
      size_t ch = axis == TACO_AXIS_HIDDEN ? i % cols : i / rows;
      double d = (double)out[i] - (double)in[i];
      err2[ch] += d * d;
      norm2[ch] += (double)in[i] * (double)in[i];
    }
  }
  if (!rc) {
    double e = 0.0, nn = 0.0, mean = 0.0;
    for (size_t c = 0; c < cols; c++) {
      e += err2[c], nn += norm2[c];
      mean += norm2[c] > 0.0 ? sqrt(err2[c] / norm2[c]) : sqrt(err2[c]);
    }
    *rel_err = opt->metric == TACO_METRIC_PER_CHANNEL ? mean / (double)cols : (nn > 0.0 ? sqrt(e / nn) : sqrt(e));
  }
  free(in);
  free(out);
  free(err2);
  free(norm2);
  return rc;
}

int taco_reshape_choose(const float *const *samples, int nsamples, size_t rows, size_t cols,
                        const taco_reshape_options *opt, taco_reshape_choice *best,
                        taco_reshape_choice all[TACO_RESHAPE_CANDIDATES]) {
  if (!samples || nsamples < 1 || rows == 0 || cols == 0 || !opt || !best)
    return TACO_FAIL("reshape: need at least one sample of rows x cols > 0");
  if (opt->link_gbps <= 0.0 || (!opt->cost && opt->hbm_gbps <= 0.0))
    return TACO_FAIL("reshape: link_gbps and hbm_gbps (or a cost callback) must be > 0");
  taco_reshape_choice cand[TACO_RESHAPE_CANDIDATES];
  int count = 0;
  size_t n = rows * cols;
  for (int a = 0; a < 2; a++)
    for (int gi = 0; gi < 5; gi++) {
      taco_axis axis = a ? TACO_AXIS_TOKENS : TACO_AXIS_HIDDEN;
      double err = 0.0;
      if (measure(samples, nsamples, rows, cols, groups[gi], axis, opt, &err)) return -1;
      taco_reshape_choice *c = &cand[count++];
      c->group = groups[gi];
      c->axis = axis;
      c->rel_err = err;
      double codec = opt->cost ? opt->cost(groups[gi], axis, n, opt->cost_ctx)
                               : model_cost_us(groups[gi], axis, n, opt->hbm_gbps);
      c->cost_us = codec + (double)taco_wire_bytes(n, groups[gi]) / (opt->link_gbps * 1e3);
    }
  int pick = -1;
  for (int i = 0; i < count; i++) {
    if (cand[i].rel_err > opt->max_rel_err) continue;
    if (pick < 0 || cand[i].cost_us < cand[pick].cost_us ||
        (cand[i].cost_us == cand[pick].cost_us && cand[i].rel_err < cand[pick].rel_err))
      pick = i;
  }
  if (pick < 0) /* nothing meets the bound: least error */
    for (int i = 0; i < count; i++)
      if (pick < 0 || cand[i].rel_err < cand[pick].rel_err) pick = i;
  *best = cand[pick];
  if (all)
    for (int i = 0; i < count; i++) all[i] = cand[i];
  return 0;
}

int taco_reshape_format(const taco_reshape_choice *c, taco_fp8 fp8, char *buf, size_t len) {
  int w = snprintf(buf, len, "{\"kind\": \"taco\", \"group\": %d, \"fp8\": \"%s\", \"axis\": \"%s\"}", c->group,
                   fp8 == TACO_FP8_E4M3 ? "e4m3" : "e5m2", c->axis == TACO_AXIS_HIDDEN ? "hidden" : "tokens");
  return (w < 0 || (size_t)w >= len) ? TACO_FAIL("reshape: buffer of %zu bytes too small", len) : 0;
}

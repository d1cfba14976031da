/* train_reshape.c — `tacorun train --reshape DIR`: the data-driven reshaping
 * (kernels/taco_reshape.h) run on the tensors a training run dumped
 * (--dump-at; train_emu.h): per tensor class (attn_out, fc2_out, fc1_dgrad,
 * qkv_dgrad), the measured error and the cost of every group size and axis,
 * and the choice. Plain C, no GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "taco_reshape.h"
#include "ts_error.h"

int train_reshape_report(const char *dir, double max_err, double link_gbps, ts_err *e);

#define RS_MAX_SAMPLES 16

static const char *classes[] = {"attn_out", "fc2_out", "fc1_dgrad", "qkv_dgrad"};

int train_reshape_report(const char *dir, double max_err, double link_gbps, ts_err *e) {
  char path[1200], line[512];
  snprintf(path, sizeof path, "%s/dump-index.csv", dir);
  FILE *idx = fopen(path, "r");
  if (!idx) return ts_fail(e, path, NULL, "cannot open (dump tensors with tacorun train --tp-emulate K --dump-at STEP)");
  /* chosen: the reshaping's pick among all candidates; runnable: what the executor's TACO can run
   * (groups along hidden dividing it); chosen_runnable: the same rule among those */
  printf("tensor,samples,rows,cols,group,axis,rel_err,cost_us,chosen,runnable,chosen_runnable\n");
  int rc = 0;
  for (size_t c = 0; c < sizeof classes / sizeof *classes && !rc; c++) {
    float *samples[RS_MAX_SAMPLES];
    int ns = 0;
    size_t rows = 0, cols = 0;
    rewind(idx);
    if (!fgets(line, sizeof line, idx)) break; /* header */
    while (fgets(line, sizeof line, idx) && ns < RS_MAX_SAMPLES && !rc) {
      char file[256], tensor[64];
      int step, layer;
      size_t r, k;
      line[strcspn(line, "\r\n")] = 0;
      if (sscanf(line, "%255[^,],%d,%d,%63[^,],%zu,%zu", file, &step, &layer, tensor, &r, &k) != 6) {
        rc = ts_fail(e, path, NULL, "malformed line '%.60s'", line);
        break;
      }
      if (!r || !k || r > (1u << 20) || k > (1u << 20) || r * k > ((size_t)1 << 28)) {
        rc = ts_fail(e, path, NULL, "%s: %zu x %zu is not a tensor shape the reshaping reads (at most 2^28 elements)",
                     file, r, k);
        break;
      }
      if (strcmp(tensor, classes[c])) continue;
      if (ns && (r != rows || k != cols)) continue; /* one shape per class */
      rows = r, cols = k;
      char fp[1500];
      snprintf(fp, sizeof fp, "%s/%s", dir, file);
      FILE *f = fopen(fp, "rb");
      float *x = malloc(r * k * sizeof *x);
      if (!f || !x || fread(x, sizeof *x, r * k, f) != r * k) {
        if (f) fclose(f);
        free(x);
        rc = ts_fail(e, fp, NULL, "cannot read %zu floats", r * k);
        break;
      }
      fclose(f);
      samples[ns++] = x;
    }
    if (!rc && ns) {
      taco_reshape_options o = {TACO_FP8_E4M3, TACO_METRIC_PER_CHANNEL, max_err, link_gbps, 0.9 * 4800.0, NULL, NULL};
      taco_reshape_choice best, all[TACO_RESHAPE_CANDIDATES];
      if (taco_reshape_choose((const float *const *)samples, ns, rows, cols, &o, &best, all))
        rc = ts_fail(e, path, NULL, "reshaping: %s", taco_last_error());
      /* the same rule (cheapest within the bound, else the least error) over the runnable ones */
      int pick = -1, within = 0;
      for (int i = 0; i < TACO_RESHAPE_CANDIDATES && !rc; i++) {
        if (all[i].axis != TACO_AXIS_HIDDEN || cols % (size_t)all[i].group) continue;
        int ok = all[i].rel_err <= max_err;
        if (pick < 0 || (ok && !within) ||
            (ok == within && (ok ? all[i].cost_us < all[pick].cost_us : all[i].rel_err < all[pick].rel_err)))
          pick = i, within = ok;
      }
      for (int i = 0; i < TACO_RESHAPE_CANDIDATES && !rc; i++)
        printf("%s,%d,%zu,%zu,%d,%s,%.5f,%.2f,%s,%s,%s\n", classes[c], ns, rows, cols, all[i].group,
               all[i].axis == TACO_AXIS_HIDDEN ? "hidden" : "tokens", all[i].rel_err, all[i].cost_us,
               all[i].group == best.group && all[i].axis == best.axis ? "yes" : "",
               all[i].axis == TACO_AXIS_HIDDEN && cols % (size_t)all[i].group == 0 ? "yes" : "no",
               i == pick ? "yes" : "");
    }
    for (int i = 0; i < ns; i++) free(samples[i]);
  }
  fclose(idx);
  return rc;
}

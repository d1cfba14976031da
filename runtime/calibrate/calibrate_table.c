/* calibrate_table.c — adding measured points to a calibration being built,
 * and the collectives' batch spread that goes with it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate.h"

int calib_add_kernel(schema_calibration *c, const char *name, bool by_flops, double x, int group, double us) {
  for (int t = 0; t < c->n_kernels; t++) {
    schema_kernel_table *tab = &c->kernels[t];
    if (strcmp(tab->name, name)) continue;
    for (int i = 0; i < tab->n; i++)
      if (tab->pts[i].x == x && tab->pts[i].group == group) { /* two shapes moving the same bytes */
        tab->pts[i].us = 0.5 * (tab->pts[i].us + us);
        return 0;
      }
  }
  return schema_calibration_add_kernel(c, name, by_flops, x, group, us);
}

int calib_gemm_pass_shape(int p, int j, int n) { return p % 2 ? n - 1 - j : j; }

double calib_gemm_combine_passes(const double *t, int passes) {
  double log_sum = 0;
  int n = 0;
  for (int p = 0; p < passes; p++)
    if (t[p] > 0) log_sum += log(t[p]), n++;
  return n ? exp(log_sum / n) : 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double calib_gemm_pass_difference(const double *t, int n, int passes, double min_us, int *count) {
  double *d = malloc((size_t)(n > 0 ? n : 1) * sizeof *d);
  *count = 0;
  if (!d || passes < 2) {
    free(d);
    return 0;
  }
  for (int i = 0; i < n; i++) {
    double x = t[(size_t)i * passes], y = t[(size_t)i * passes + 1];
    if (x > 0 && y > 0 && 0.5 * (x + y) >= min_us) d[(*count)++] = fabs(x - y) / (0.5 * (x + y));
  }
  double med = *count ? (qsort(d, (size_t)*count, sizeof *d, cmp_double), d[*count / 2]) : 0;
  free(d);
  return med;
}

static int cmp_us(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int calib_comm_combine_passes(const schema_calibration *passes, int n, schema_calibration *out) {
  if (n < 1) return -1;
  double *v = malloc((size_t)n * sizeof *v);
  if (!v) return -1;
  const schema_calibration *first = &passes[0];
  for (int t = 0; t < first->n_colls; t++) {
    const schema_coll_table *tab = &first->colls[t];
    for (int i = 0; i < tab->n; i++) {
      int m = 0;
      for (int p = 0; p < n; p++) /* the same table and size in every pass that has it */
        for (int u = 0; u < passes[p].n_colls; u++) {
          const schema_coll_table *o = &passes[p].colls[u];
          if (o->nranks != tab->nranks || strcmp(o->name, tab->name)) continue;
          for (int j = 0; j < o->n; j++)
            if (o->pts[j].bytes == tab->pts[i].bytes) v[m++] = o->pts[j].us;
        }
      qsort(v, (size_t)m, sizeof *v, cmp_us);
      double med = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
      if (schema_calibration_add_coll(out, tab->name, tab->nranks, tab->pts[i].bytes, med)) {
        free(v);
        return -1;
      }
    }
  }
  free(v);
  return 0;
}

int calib_spread_add(calib_spread *s, const calib_spread_row *r) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 256;
    calib_spread_row *p = realloc(s->rows, (size_t)cap * sizeof *p);
    if (!p) return -1;
    s->rows = p, s->cap = cap;
  }
  s->rows[s->n++] = *r;
  return 0;
}

void calib_spread_free(calib_spread *s) {
  free(s->rows);
  memset(s, 0, sizeof *s);
}

static double spread_pct(const calib_spread_row *r) {
  return r->median_us > 0 ? 100.0 * (r->max_us - r->min_us) / r->median_us : 0.0;
}

int calib_spread_write(const calib_spread *s, const char *path, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail_sys(e, "%s: cannot write", path);
  fprintf(f, "# per-size spread of the timed batches, (max - min) / median; the calibration file holds the median\n");
  fprintf(f, "op\tnranks\tbytes\tmedian_us\tmin_us\tmax_us\tspread_pct\tbatches\tlaunches_per_batch\n");
  for (int i = 0; i < s->n; i++) {
    const calib_spread_row *r = &s->rows[i];
    fprintf(f, "%s\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.2f\t%d\t%d\n", r->name, r->nranks, r->bytes, r->median_us, r->min_us,
            r->max_us, spread_pct(r), r->reps, r->batch);
  }
  if (fclose(f) != 0) return ts_fail_sys(e, "%s: write failed", path);
  return 0;
}

void calib_spread_summary(const calib_spread *s, char *sum, size_t n) {
  if (!s || s->n == 0) {
    snprintf(sum, n, "no collective measured");
    return;
  }
  double *v = malloc((size_t)s->n * sizeof *v);
  if (!v) {
    snprintf(sum, n, "batch spread not summarised (out of memory)");
    return;
  }
  for (int i = 0; i < s->n; i++) v[i] = spread_pct(&s->rows[i]);
  qsort(v, (size_t)s->n, sizeof *v, cmp_double);
  snprintf(sum, n, "batch spread (max-min)/median %.1f%% median, %.1f%% p90 over %d sizes", v[(s->n - 1) / 2],
           v[(int)(0.9 * (s->n - 1))], s->n);
  free(v);
}

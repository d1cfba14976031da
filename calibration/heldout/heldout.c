/* heldout.c — held-out check of a calibration file.
 *
 * Splits every table into a training half and a held-out half and predicts
 * each held-out point from the training half with schema/'s lookups, the
 * same code the simulator uses; prints the median, 90th percentile and
 * maximum relative error per family.
 *
 * 1-D tables (kernels, collectives): every other point, the first and last
 * always training, so held-out points lie inside the measured range.
 * GEMMs: each point joins the larger family of points that share (n, k) or
 * (m, n), so that m or k, the token count (m for forward and dgrad, k for
 * wgrad), varies; n when both are smaller than three. Within a family of
 * three or more, every other interior point is held out. Every held-out
 * point is predicted by schema_lookup_gemm itself (the simulator's rule: one
 * interpolation in the project); the family only decides what is held out
 * and which row of the table the error lands in.
 *
 *   calib_heldout [--max-median PCT] [--points TSV] FILE...
 * exits 1 when the GEMMs' or a collective family's median error exceeds PCT.
 * --points writes every held-out GEMM (m, n, k, varying dimension, measured
 * and predicted us) of the last FILE, for heldout/passes.py to compare runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"

typedef struct {
  double *err, *w; /* w: the point's measured time, for the time-weighted median */
  int n, cap;
} errors;

static void push_w(errors *s, double e, double w) {
  if (s->n == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 256;
    double *p = realloc(s->err, (size_t)s->cap * sizeof *p), *q = p ? realloc(s->w, (size_t)s->cap * sizeof *q) : NULL;
    if (!p || !q) {
      fprintf(stderr, "calib_heldout: out of memory\n");
      exit(1);
    }
    s->err = p, s->w = q;
  }
  s->err[s->n] = e;
  s->w[s->n++] = w;
}
static void push(errors *s, double e) { push_w(s, e, 1.0); }

/* the collectives of every FILE given, for the pooled rows printed last */
static errors pooled_plain, pooled_taco;

/* (Call before median()/quantile(), which sort err without w.)
 * The error below which half of the held-out time lies: what an iteration's
 * sum of GEMM times sees, where long GEMMs weigh more than launch-bound ones. */
static double weighted_median(const errors *s) {
  double total = 0, acc = 0, best = NAN;
  for (int i = 0; i < s->n; i++) total += s->w[i];
  for (;;) { /* selection by repeated minimum: n is small */
    int next = -1;
    for (int i = 0; i < s->n; i++)
      if (s->err[i] > best || isnan(best))
        if (next < 0 || s->err[i] < s->err[next]) next = i;
    if (next < 0) return best;
    double e = s->err[next];
    for (int i = 0; i < s->n; i++)
      if (s->err[i] == e) acc += s->w[i];
    best = e;
    if (acc >= 0.5 * total) return best;
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double quantile(errors *s, double q) {
  if (!s->n) return NAN;
  qsort(s->err, (size_t)s->n, sizeof *s->err, cmp_double);
  int i = (int)ceil(q * s->n) - 1;
  return s->err[i < 0 ? 0 : (i >= s->n ? s->n - 1 : i)];
}

static double median(errors *s) {
  if (!s->n) return NAN;
  qsort(s->err, (size_t)s->n, sizeof *s->err, cmp_double);
  return s->n % 2 ? s->err[s->n / 2] : 0.5 * (s->err[s->n / 2 - 1] + s->err[s->n / 2]);
}

static void row(const char *what, errors *s) {
  if (!s->n) {
    printf("| %-34s | %5d | %8s | %8s | %8s |\n", what, 0, "-", "-", "-");
    return;
  }
  double med = median(s), p90 = quantile(s, 0.9), mx = quantile(s, 1.0);
  printf("| %-34s | %5d | %7.2f%% | %7.2f%% | %7.2f%% |\n", what, s->n, 100 * med, 100 * p90, 100 * mx);
}

static int check_file(const char *path, double max_median, const schema_roofline *roof, FILE *points) {
  schema_calibration full, train;
  ts_err e;
  if (schema_calibration_load(path, &full, &e)) {
    fprintf(stderr, "calib_heldout: %s\n", e.msg);
    return 2;
  }
  memset(&train, 0, sizeof train);
  errors gemm_schema = {0}, kernels = {0}, colls_plain = {0}, colls_taco = {0};

  /* GEMMs: families along one dimension; every other interior point held out */
  int *dim = calloc((size_t)full.n_gemm + 1, sizeof *dim), *held = calloc((size_t)full.n_gemm + 1, sizeof *held);
  if (!dim || !held) {
    fprintf(stderr, "calib_heldout: out of memory\n");
    exit(1);
  }
  for (int i = 0; i < full.n_gemm; i++) {
    const long long pi[3] = {full.gemm[i].m, full.gemm[i].n, full.gemm[i].k};
    int count[3] = {0, 0, 0};
    for (int d = 0; d < 3; d++)
      for (int j = 0; j < full.n_gemm; j++) {
        const long long pj[3] = {full.gemm[j].m, full.gemm[j].n, full.gemm[j].k};
        count[d] += pj[(d + 1) % 3] == pi[(d + 1) % 3] && pj[(d + 2) % 3] == pi[(d + 2) % 3];
      }
    /* the token dimension (m or k) first: a plan's token count is what varies most */
    dim[i] = count[2] > count[0] ? 2 : 0;
    if (count[dim[i]] < 3 && count[1] > count[dim[i]]) dim[i] = 1;
  }
  for (int i = 0; i < full.n_gemm; i++) {
    /* position of i among the points of its family, ordered by the varying dimension */
    const long long pi[3] = {full.gemm[i].m, full.gemm[i].n, full.gemm[i].k};
    int d = dim[i], below = 0, above = 0;
    for (int j = 0; j < full.n_gemm; j++) {
      const long long pj[3] = {full.gemm[j].m, full.gemm[j].n, full.gemm[j].k};
      if (dim[j] != d || pj[(d + 1) % 3] != pi[(d + 1) % 3] || pj[(d + 2) % 3] != pi[(d + 2) % 3]) continue;
      below += pj[d] < pi[d];
      above += pj[d] > pi[d];
    }
    held[i] = below > 0 && above > 0 && below % 2 == 1;
  }
  for (int i = 0; i < full.n_gemm; i++)
    if (!held[i]) schema_calibration_add_gemm(&train, full.gemm[i].m, full.gemm[i].n, full.gemm[i].k, full.gemm[i].us);
  /* kernel tables: per (table, group), every other point, ends kept */
  for (int t = 0; t < full.n_kernels; t++) {
    const schema_kernel_table *k = &full.kernels[t];
    for (int i = 0; i < k->n; i++) {
      int first = i == 0 || k->pts[i - 1].group != k->pts[i].group;
      int last = i == k->n - 1 || k->pts[i + 1].group != k->pts[i].group;
      int pos = 0;
      for (int j = i - 1; j >= 0 && k->pts[j].group == k->pts[i].group; j--) pos++;
      if (first || last || pos % 2 == 0)
        schema_calibration_add_kernel(&train, k->name, k->by_flops, k->pts[i].x, k->pts[i].group, k->pts[i].us);
    }
  }
  for (int t = 0; t < full.n_colls; t++) {
    const schema_coll_table *c = &full.colls[t];
    for (int i = 0; i < c->n; i++)
      if (i % 2 == 0 || i == c->n - 1)
        schema_calibration_add_coll(&train, c->name, c->nranks, c->pts[i].bytes, c->pts[i].us);
  }
  schema_calibration_sort(&train);

  schema_lookup l;
  schema_lookup_init(&l, &train, roof, NULL);
  errors by_dim[3] = {{0}};
  for (int i = 0; i < full.n_gemm; i++) {
    if (!held[i]) continue;
    const schema_gemm_point *g = &full.gemm[i];
    double us;
    if (schema_lookup_gemm(&l, g->m, g->n, g->k, &us, &e)) {
      fprintf(stderr, "calib_heldout: %s\n", e.msg);
      exit(1);
    }
    double err = fabs(us - g->us) / g->us;
    if (points) fprintf(points, "%lld\t%lld\t%lld\t%c\t%.4f\t%.4f\n", g->m, g->n, g->k, "mnk"[dim[i]], g->us, us);
    push_w(&gemm_schema, err, g->us);
    push(&by_dim[dim[i]], err);
  }
  free(dim), free(held);
  double gemm_weighted = gemm_schema.n ? weighted_median(&gemm_schema) : NAN; /* before row() sorts the errors */
  printf("\n%s (%s, %s, NCCL %s, %s)\n\n", path, full.gpu, full.transport, full.nccl, full.measured_at);
  printf("| %-34s | %5s | %9s | %9s | %9s |\n", "held-out family", "n", "median", "p90", "max");
  printf("|%s|%s|%s|%s|%s|\n", "------------------------------------", "-------", "-----------", "-----------",
         "-----------");
  row("gemm (schema_lookup_gemm)", &gemm_schema);
  row("  of which m varies (fwd, dgrad)", &by_dim[0]);
  row("  of which n varies", &by_dim[1]);
  row("  of which k varies (wgrad)", &by_dim[2]);
  if (gemm_schema.n)
    printf("| %-34s | %5d | %7.2f%% | %9s | %9s |\n", "gemm, time-weighted median", gemm_schema.n,
           100 * gemm_weighted, "", "");

  for (int t = 0; t < full.n_kernels; t++) {
    const schema_kernel_table *k = &full.kernels[t];
    errors one = {0};
    for (int i = 0; i < k->n; i++) {
      int first = i == 0 || k->pts[i - 1].group != k->pts[i].group;
      int last = i == k->n - 1 || k->pts[i + 1].group != k->pts[i].group;
      int pos = 0;
      for (int j = i - 1; j >= 0 && k->pts[j].group == k->pts[i].group; j--) pos++;
      if (first || last || pos % 2 == 0) continue;
      double us;
      if (schema_lookup_kernel(&l, k->name, k->pts[i].x, k->pts[i].group, &us, &e)) continue;
      double err = fabs(us - k->pts[i].us) / k->pts[i].us;
      push(&one, err);
      push(&kernels, err);
    }
    free(one.err), free(one.w);
  }
  row("kernels (all tables)", &kernels);

  double worst_coll = 0;
  for (int t = 0; t < full.n_colls; t++) {
    const schema_coll_table *c = &full.colls[t];
    errors one = {0};
    for (int i = 1; i < c->n - 1; i += 2) {
      double us;
      if (schema_lookup_coll(&l, c->name, c->nranks, c->pts[i].bytes, &us, &e)) continue;
      double err = fabs(us - c->pts[i].us) / c->pts[i].us;
      push(&one, err);
      push(strstr(c->name, ".taco") ? &colls_taco : &colls_plain, err);
      push(strstr(c->name, ".taco") ? &pooled_taco : &pooled_plain, err);
    }
    char what[80];
    snprintf(what, sizeof what, "  %s, %d ranks", c->name, c->nranks);
    row(what, &one);
    free(one.err), free(one.w);
  }
  row("collectives, NCCL BF16 (all)", &colls_plain);
  row("collectives, TACO (all)", &colls_taco);

  int rc = 0;
  double g = gemm_schema.n ? median(&gemm_schema) : 0, cp = colls_plain.n ? median(&colls_plain) : 0;
  double ct = colls_taco.n ? median(&colls_taco) : 0;
  worst_coll = cp > ct ? cp : ct;
  if (max_median > 0 && (100 * g > max_median || 100 * worst_coll > max_median)) {
    printf("\nmedian error above %.1f%% (gemm %.2f%%, collectives %.2f%%)\n", max_median, 100 * g, 100 * worst_coll);
    rc = 1;
  }
  for (int d = 0; d < 3; d++) free(by_dim[d].err), free(by_dim[d].w);
  free(gemm_schema.w), free(kernels.w), free(colls_plain.w), free(colls_taco.w);
  free(gemm_schema.err), free(kernels.err), free(colls_plain.err), free(colls_taco.err);
  schema_calibration_free(&train);
  schema_calibration_free(&full);
  return rc;
}

int main(int argc, char **argv) {
  double max_median = 0;
  const char *points_path = NULL;
  int first = 1;
  while (first + 1 < argc && (!strcmp(argv[first], "--max-median") || !strcmp(argv[first], "--points"))) {
    if (!strcmp(argv[first], "--points")) {
      points_path = argv[first + 1];
    } else {
      char *end;
      max_median = strtod(argv[first + 1], &end);
      if (*end || max_median <= 0) {
        fprintf(stderr, "calib_heldout: --max-median: '%s' must be a positive percentage\n", argv[first + 1]);
        return 2;
      }
    }
    first += 2;
  }
  if (first >= argc) {
    fprintf(stderr, "usage: calib_heldout [--max-median PCT] [--points TSV] FILE...\n");
    return 2;
  }
  /* used only outside a table's measured range, which held-out points avoid */
  schema_roofline roof = {.peak_flops = 790e12, .hbm_bytes_per_s = 4.276e12, .link_bytes_per_s = 300e9,
                          .launch_us = 5.0, .coll_latency_us = 10.0};
  int rc = 0;
  for (int i = first; i < argc; i++) {
    FILE *points = NULL;
    if (points_path && i == argc - 1 && !(points = fopen(points_path, "w"))) {
      fprintf(stderr, "calib_heldout: %s: cannot write\n", points_path);
      return 2;
    }
    if (points) fprintf(points, "m\tn\tk\tvaries\tmeasured_us\tpredicted_us\n");
    int r = check_file(argv[i], max_median, &roof, points);
    if (points && fclose(points) != 0) {
      fprintf(stderr, "calib_heldout: %s: write failed\n", points_path);
      return 2;
    }
    if (r > rc) rc = r;
  }
  if (argc - first > 1) { /* one figure per family over the files: the transports together */
    printf("\nall %d files\n\n| held-out family                    |     n |    median |       p90 |       max |\n"
           "|------------------------------------|-------|-----------|-----------|-----------|\n",
           argc - first);
    row("collectives, NCCL BF16 (all)", &pooled_plain);
    row("collectives, TACO (all)", &pooled_taco);
  }
  free(pooled_plain.err), free(pooled_plain.w), free(pooled_taco.err), free(pooled_taco.w);
  return rc;
}

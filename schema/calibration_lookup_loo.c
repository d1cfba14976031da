/* calibration_lookup_loo.c — leave-one-out check of schema_lookup_gemm.
 *
 * Each point of a calibration's GEMM list is taken out in turn and predicted
 * by schema_lookup_gemm from all the others (the simulator's own lookup, with
 * the index it builds at load time); prints the median, p90 and maximum
 * relative error, the time-weighted median (each point weighted by its
 * measured time, as an iteration's sum of GEMM times weighs them), the same
 * split by the rule that priced the point (interpolation along one
 * dimension, the roofline from the end of a family, the nearest shapes'
 * efficiency), and the mean time of one lookup (with the index build).
 *
 *   calib_lookup_loo [--list gemm|gemm_infer|both] [--without-families]
 *                    [--peak-tflops X] [--hbm-gbps Y] [--max-median PCT] FILE
 *
 * --without-families also leaves out every point that shares two dimensions
 * with the one predicted, as if its model had never been measured: what the
 * lookup meets on a model outside the calibration's zoo (it then prices by
 * the nearest shapes' efficiency).
 * The roofline is the GPU's (defaults: the catalogue's H200-SXM, 989 TFLOP/s
 * BF16 and 4,800 GB/s; the efficiency of a shape is measured against it).
 * Exits 1 when the median error exceeds --max-median PCT (ctest holds the
 * nearest-shape rule to it), 2 on bad arguments or an unreadable file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "calibration.h"


static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double weighted_median(const double *err, const double *w, int n) {
  int *idx = malloc((size_t)n * sizeof *idx);
  double total = 0, acc = 0, r = NAN;
  if (!idx) return NAN;
  for (int i = 0; i < n; i++) idx[i] = i, total += w[i];
  for (int i = 1; i < n; i++) /* insertion sort by error: n is a few thousand */
    for (int j = i; j > 0 && err[idx[j - 1]] > err[idx[j]]; j--) {
      int t = idx[j];
      idx[j] = idx[j - 1], idx[j - 1] = t;
    }
  for (int i = 0; i < n; i++) {
    acc += w[idx[i]];
    if (acc >= 0.5 * total) {
      r = err[idx[i]];
      break;
    }
  }
  free(idx);
  return r;
}

static void row(const char *what, double *err, const double *w, int n) {
  if (!n) {
    printf("| %-40s | %5d | %8s | %8s | %8s | %8s |\n", what, 0, "-", "-", "-", "-");
    return;
  }
  double wm = weighted_median(err, w, n);
  qsort(err, (size_t)n, sizeof *err, cmp_double);
  double med = n % 2 ? err[n / 2] : 0.5 * (err[n / 2 - 1] + err[n / 2]);
  int i90 = (int)ceil(0.9 * n) - 1;
  printf("| %-40s | %5d | %7.2f%% | %7.2f%% | %7.2f%% | %7.2f%% |\n", what, n, 100 * med, 100 * err[i90 < 0 ? 0 : i90],
         100 * err[n - 1], 100 * wm);
}

/* The rule schema_lookup_gemm prices point `skip` by when it is left out:
 * 0 a measured neighbour on each side along m, n or k; 1 the roofline from
 * the end of a family sharing two dimensions with it; 2 the nearest shapes. */
static int rule_of(const schema_gemm_point *g, int n, int skip, int families) {
  if (families) return 2;
  const long long q[3] = {g[skip].m, g[skip].n, g[skip].k};
  int family = 0;
  for (int d = 0; d < 3; d++) {
    int lo = 0, hi = 0;
    for (int i = 0; i < n; i++) {
      const long long p[3] = {g[i].m, g[i].n, g[i].k};
      if (i == skip || p[(d + 1) % 3] != q[(d + 1) % 3] || p[(d + 2) % 3] != q[(d + 2) % 3]) continue;
      lo |= p[d] < q[d], hi |= p[d] > q[d];
      family = 1;
    }
    if (lo && hi) return 0;
  }
  return family ? 1 : 2;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int usage(const char *why) {
  fprintf(stderr,
          "calib_lookup_loo: %s\nusage: calib_lookup_loo [--list gemm|gemm_infer|both (gemm)] [--without-families (off)]\n"
          "                        [--peak-tflops X (989)] [--hbm-gbps Y (4800)] [--max-median PCT (none)] FILE\n",
          why);
  return 2;
}

static int positive(const char *opt, const char *v, double *out) {
  char *end;
  *out = strtod(v, &end);
  if (*end || !(*out > 0)) {
    fprintf(stderr, "calib_lookup_loo: %s: '%s' must be a positive number\n", opt, v);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *list = "gemm", *path = NULL;
  double tflops = 989, gbps = 4800;
  int families = 0;
  double max_median = 0;
  for (int i = 1; i < argc; i++) {
    if (i + 1 < argc && !strcmp(argv[i], "--list")) {
      list = argv[++i];
      if (strcmp(list, "gemm") && strcmp(list, "gemm_infer") && strcmp(list, "both"))
        return usage("--list: must be gemm, gemm_infer or both");
    } else if (i + 1 < argc && !strcmp(argv[i], "--peak-tflops")) {
      if (positive("--peak-tflops", argv[++i], &tflops)) return 2;
    } else if (i + 1 < argc && !strcmp(argv[i], "--hbm-gbps")) {
      if (positive("--hbm-gbps", argv[++i], &gbps)) return 2;
    } else if (i + 1 < argc && !strcmp(argv[i], "--max-median")) {
      if (positive("--max-median", argv[++i], &max_median)) return 2;
    } else if (!strcmp(argv[i], "--without-families")) {
      families = 1;
    } else if (argv[i][0] == '-' || path) {
      return usage("unexpected argument");
    } else {
      path = argv[i];
    }
  }
  if (!path) return usage("no calibration file");
  schema_calibration full;
  ts_err e;
  if (schema_calibration_load(path, &full, &e)) {
    fprintf(stderr, "calib_lookup_loo: %s\n", e.msg);
    return 2;
  }
  int n = (strcmp(list, "gemm_infer") ? full.n_gemm : 0) + (strcmp(list, "gemm") ? full.n_gemm_infer : 0);
  schema_gemm_point *pts = malloc((size_t)(n ? n : 1) * sizeof *pts);
  double *err = malloc(3 * (size_t)(n ? n : 1) * sizeof *err);
  schema_calibration train;
  memset(&train, 0, sizeof train);
  train.gemm = malloc((size_t)(n ? n : 1) * sizeof *train.gemm);
  if (!pts || !err || !train.gemm) {
    fprintf(stderr, "calib_lookup_loo: out of memory\n");
    return 1;
  }
  int np = 0;
  if (strcmp(list, "gemm_infer"))
    for (int i = 0; i < full.n_gemm; i++) pts[np++] = full.gemm[i];
  if (strcmp(list, "gemm"))
    for (int i = 0; i < full.n_gemm_infer; i++) pts[np++] = full.gemm_infer[i];
  double *w = err + n;
  double *e_by = malloc(3 * (size_t)(n ? n : 1) * sizeof *e_by), *w_by = malloc(3 * (size_t)(n ? n : 1) * sizeof *w_by);
  if (!e_by || !w_by) {
    fprintf(stderr, "calib_lookup_loo: out of memory\n");
    return 1;
  }
  schema_roofline roof = {.peak_flops = tflops * 1e12, .hbm_bytes_per_s = gbps * 1e9, .link_bytes_per_s = 1,
                          .launch_us = 3.0, .coll_latency_us = 1};
  int n_by[3] = {0, 0, 0};
  double lookup_s = 0, build_s = 0;
  for (int i = 0; i < np; i++) {
    /* the list without point i (and, --without-families, every point sharing
     * two dimensions with it), indexed as a loaded calibration is */
    train.n_gemm = 0;
    for (int j = 0; j < np; j++) {
      int shared = (pts[j].m == pts[i].m) + (pts[j].n == pts[i].n) + (pts[j].k == pts[i].k);
      if (j != i && !(families && shared >= 2)) train.gemm[train.n_gemm++] = pts[j];
    }
    double t0 = now_s();
    if (schema_gemm_index_build(&train)) {
      fprintf(stderr, "calib_lookup_loo: out of memory\n");
      return 1;
    }
    double t1 = now_s();
    schema_lookup l;
    schema_lookup_init(&l, &train, &roof, NULL);
    double us;
    if (schema_lookup_gemm(&l, pts[i].m, pts[i].n, pts[i].k, &us, &e)) {
      fprintf(stderr, "calib_lookup_loo: %s\n", e.msg);
      return 1;
    }
    lookup_s += now_s() - t1, build_s += t1 - t0;
    err[i] = fabs(us - pts[i].us) / pts[i].us;
    w[i] = pts[i].us;
    int r = rule_of(pts, np, i, families);
    e_by[r * n + n_by[r]] = err[i], w_by[r * n + n_by[r]++] = w[i];
  }
  printf("%s: list %s, %d points%s, roofline %.0f TFLOP/s, %.0f GB/s\n\n", path, list, np,
         families ? " (each predicted without the points sharing two dimensions with it)" : "", tflops, gbps);
  printf("| %-40s | %5s | %8s | %8s | %8s | %8s |\n", "left-out GEMM", "n", "median", "p90", "max", "t-wt med");
  printf("|------------------------------------------|-------|----------|----------|----------|----------|\n");
  row("all", err, w, np); /* sorts err */
  double median = np ? (np % 2 ? err[np / 2] : 0.5 * (err[np / 2 - 1] + err[np / 2])) : 0;
  row("  interpolated along m, n or k", e_by, w_by, n_by[0]);
  row("  roofline from the end of a family", e_by + n, w_by + n, n_by[1]);
  row("  nearest shapes' efficiency", e_by + 2 * n, w_by + 2 * n, n_by[2]);
  printf("\nmean time per lookup %.2f us; index build %.0f us for %d points\n", np ? 1e6 * lookup_s / np : 0,
         np ? 1e6 * build_s / np : 0, np - 1);
  int rc = 0;
  if (max_median > 0 && 100 * median > max_median) {
    printf("median error %.2f%% above %.2f%%\n", 100 * median, max_median);
    rc = 1;
  }
  free(pts), free(err), free(e_by), free(w_by);
  schema_calibration_free(&train);
  schema_calibration_free(&full);
  return rc;
}

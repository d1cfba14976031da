/* fp8_interp_loo.c — leave-one-out study of how to price an FP8 GEMM whose m lies between two measured
 * "gemm_fp8" points of the same (n, k) (experiments/fp8-interp/README.md).
 *
 *   fp8_interp_loo --cluster NAME [--view infer|train] [--split-m M] FILE
 *
 * Every "gemm_fp8" point with a measured point of the same (n, k) below and above it in m is taken out in turn
 * and predicted from the rest of the list by three rules:
 *   ratio   (the simulator's rule for these shapes until 2026-12-07) the BF16 time of the shape, as the
 *           simulator's GEMM lookup gives it (schema_lookup_gemm over the BF16 list of the view: the point's
 *           own BF16 measurement where the list has it), times the FP8 / BF16 ratio at the nearest remaining
 *           FP8 m (schema_gemm_fp8_ratio: within SIM_FP8_RATIO_M_FACTOR, else sim_gemm_fp8_transfer_us);
 *   interp  (the simulator's rule since) log(time) interpolated against log(m) between the two bracketing FP8
 *           points (schema_gemm_fp8_between_us), the interpolation the BF16 lookup uses along m;
 *   ratio-interp  the BF16 time of the shape times the FP8 / BF16 ratio interpolated the same way between the
 *           bracketing points (both need their BF16 shape in the list; else the point is counted under the
 *           ratio rule's price).
 * Prints, per regime (m <= M: decode sizes; m > M: prefill sizes) and rule, the number of points and the
 * median, 90th percentile and maximum of |predicted / measured - 1|, and the median signed error.
 * --view infer (default) prices BF16 GEMMs from "gemm" and "gemm_infer" joined, as an inference prediction
 * reads them (sim_infer_calibration_view); --view train from "gemm" alone, as a training prediction does.
 * --cluster names the cluster whose GPU gives the roofline and the transfer rule's peaks (as tacosim's plan
 * would). Exits 2 on bad arguments or an unreadable file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "sim.h"
#include "sim_costs.h"
#include "sim_infer.h"
#include "topo.h"

enum { RULE_RATIO, RULE_INTERP, RULE_RATIO_INTERP, N_RULES };
static const char *const rule_name[N_RULES] = {"(a) ratio at the nearest m", "(b) FP8 interpolated in m",
                                               "(c) ratio interpolated in m"};

typedef struct {
  double *err; /* signed predicted / measured - 1 */
  int n;
} errs;

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double quantile(const double *sorted, int n, double q) {
  int i = (int)ceil(q * n) - 1;
  return sorted[i < 0 ? 0 : i];
}

static double median(const double *sorted, int n) {
  return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

static void row(const char *regime, const char *rule, const errs *s) {
  if (!s->n) {
    printf("| %s | %s | 0 | - | - | - | - |\n", regime, rule);
    return;
  }
  double *a = malloc((size_t)s->n * sizeof *a), *sg = malloc((size_t)s->n * sizeof *sg);
  if (!a || !sg) {
    free(a), free(sg);
    fprintf(stderr, "fp8_interp_loo: out of memory\n");
    exit(2);
  }
  for (int i = 0; i < s->n; i++) a[i] = fabs(s->err[i]), sg[i] = s->err[i];
  qsort(a, (size_t)s->n, sizeof *a, cmp_double);
  qsort(sg, (size_t)s->n, sizeof *sg, cmp_double);
  printf("| %s | %s | %d | %.2f %% | %.2f %% | %.1f %% | %+.2f %% |\n", regime, rule, s->n, 100 * median(a, s->n),
         100 * quantile(a, s->n, 0.9), 100 * a[s->n - 1], 100 * median(sg, s->n));
  free(a), free(sg);
}

static double log_interp(double x0, double t0, double x1, double t1, double x) {
  double f = (log(x) - log(x0)) / (log(x1) - log(x0));
  return exp(log(t0) + f * (log(t1) - log(t0)));
}

/* The BF16 time of a shape in the list, 1 when the list has it. */
static int bf16_exact(const schema_calibration *c, const schema_gemm_point *g, double *us) {
  for (int i = 0; i < c->n_gemm; i++)
    if (c->gemm[i].m == g->m && c->gemm[i].n == g->n && c->gemm[i].k == g->k) {
      *us = c->gemm[i].us;
      return 1;
    }
  return 0;
}

static int usage(const char *why) {
  fprintf(stderr,
          "fp8_interp_loo: %s\nusage: fp8_interp_loo --cluster NAME [--view infer|train (infer)] [--split-m M (64)] "
          "FILE\n",
          why);
  return 2;
}

int main(int argc, char **argv) {
  const char *cluster = NULL, *view_name = "infer", *file = NULL;
  long long split = 64;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--cluster") == 0 && i + 1 < argc) cluster = argv[++i];
    else if (strcmp(argv[i], "--view") == 0 && i + 1 < argc) view_name = argv[++i];
    else if (strcmp(argv[i], "--split-m") == 0 && i + 1 < argc) split = atoll(argv[++i]);
    else if (argv[i][0] == '-') return usage("unknown option");
    else file = argv[i];
  }
  if (!file || !cluster) return usage("a FILE and --cluster are required");
  if (strcmp(view_name, "infer") && strcmp(view_name, "train")) return usage("--view: must be infer or train");
  if (split < 1) return usage("--split-m: must be a positive integer");
  ts_err e = {0};
  topo_cluster cl;
  schema_calibration full, view;
  if (topo_load(cluster, NULL, &cl, &e)) return fprintf(stderr, "fp8_interp_loo: %s\n", e.msg), 2;
  if (schema_calibration_load(file, &full, &e)) return fprintf(stderr, "fp8_interp_loo: %s\n", e.msg), 2;
  const bool infer = strcmp(view_name, "infer") == 0;
  if (infer) {
    if (sim_infer_calibration_view(&full, &view, &e)) return fprintf(stderr, "fp8_interp_loo: %s\n", e.msg), 2;
  } else {
    view = full;
  }
  schema_roofline roof;
  sim_roofline_of(&cl, &roof);
  schema_lookup lk;
  const int n = full.n_gemm_fp8;
  schema_gemm_point *rest = malloc((size_t)(n > 1 ? n - 1 : 1) * sizeof *rest);
  errs s[2][N_RULES];
  for (int r = 0; r < 2; r++)
    for (int u = 0; u < N_RULES; u++) {
      s[r][u].n = 0;
      s[r][u].err = malloc((size_t)(n ? n : 1) * sizeof(double));
      if (!s[r][u].err) return fprintf(stderr, "fp8_interp_loo: out of memory\n"), 2;
    }
  if (!rest) return fprintf(stderr, "fp8_interp_loo: out of memory\n"), 2;
  int n_transfer = 0, n_ratio_far = 0;
  for (int i = 1; i + 1 < n; i++) {
    const schema_gemm_point *g = &full.gemm_fp8[i], *lo = &full.gemm_fp8[i - 1], *hi = &full.gemm_fp8[i + 1];
    if (lo->n != g->n || lo->k != g->k || hi->n != g->n || hi->k != g->k) continue; /* not bracketed in m */
    memcpy(rest, full.gemm_fp8, (size_t)i * sizeof *rest);
    memcpy(rest + i, full.gemm_fp8 + i + 1, (size_t)(n - i - 1) * sizeof *rest);
    schema_calibration held = view;
    held.gemm_fp8 = rest, held.n_gemm_fp8 = n - 1;
    schema_lookup_init(&lk, &held, &roof, NULL);
    double bf16, pred[N_RULES];
    long long at;
    if (schema_lookup_gemm(&lk, g->m, g->n, g->k, &bf16, &e)) return fprintf(stderr, "fp8_interp_loo: %s\n", e.msg), 2;
    double ratio;
    at = 0;
    if (schema_gemm_fp8_ratio(&held, g->m, g->n, g->k, SIM_FP8_RATIO_M_FACTOR, &ratio, &at)) {
      pred[RULE_RATIO] = bf16 * ratio;
      if (at != lo->m && at != hi->m) n_ratio_far++;
    } else {
      pred[RULE_RATIO] = sim_gemm_fp8_transfer_us(&cl.gpu, g->m, g->n, g->k, bf16);
      n_transfer++;
    }
    long long lo_m, hi_m; /* the simulator's interpolation (schema_gemm_fp8_between_us) */
    if (!schema_gemm_fp8_between_us(&held, g->m, g->n, g->k, &pred[RULE_INTERP], &lo_m, &hi_m) || lo_m != lo->m ||
        hi_m != hi->m)
      return fprintf(stderr, "fp8_interp_loo: m=%lld n=%lld k=%lld: not bracketed by the lookup\n", g->m, g->n, g->k), 2;
    double blo, bhi;
    pred[RULE_RATIO_INTERP] = pred[RULE_RATIO];
    if (bf16_exact(&held, lo, &blo) && bf16_exact(&held, hi, &bhi))
      pred[RULE_RATIO_INTERP] = bf16 * log_interp((double)lo->m, lo->us / blo, (double)hi->m, hi->us / bhi, (double)g->m);
    const int regime = g->m <= split ? 0 : 1;
    for (int u = 0; u < N_RULES; u++) s[regime][u].err[s[regime][u].n++] = pred[u] / g->us - 1;
  }
  printf("%s (%s view, cluster %s): %d \"gemm_fp8\" points, %d bracketed in m; the ratio rule fell to the "
         "transfer for %d and took a ratio from beyond the bracket for %d\n\n",
         file, view_name, cluster, n, s[0][0].n + s[1][0].n, n_transfer, n_ratio_far);
  printf("| m | rule | n | median | p90 | max | median signed |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
  char regime[2][32];
  snprintf(regime[0], sizeof regime[0], "<= %lld (decode)", split);
  snprintf(regime[1], sizeof regime[1], "> %lld (prefill)", split);
  for (int r = 0; r < 2; r++)
    for (int u = 0; u < N_RULES; u++) row(regime[r], rule_name[u], &s[r][u]);
  for (int r = 0; r < 2; r++)
    for (int u = 0; u < N_RULES; u++) free(s[r][u].err);
  free(rest);
  if (infer) sim_infer_calibration_view_free(&view);
  schema_calibration_free(&full);
  return 0;
}

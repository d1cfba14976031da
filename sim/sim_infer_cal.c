/* sim_infer_cal.c — the calibration an inference prediction reads (see
 * sim_infer.h): the file's tables, with each "<name>.infer" kernel or
 * collective table (measured the way the inference executor runs: `tacorun
 * calibrate-infer`) standing in for "<name>". The training simulator never
 * reads the ".infer" tables, so they cannot move a training prediction.
 * Likewise the decode GEMMs of "gemm_infer" join the "gemm" list here only
 * (the joined list sorted as the file's lists are).
 * The view shares the file's table points; the table lists, the joined
 * GEMM list and its index are its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim_infer.h"

#define INFER_SUFFIX ".infer"

/* Length of name without the suffix when it ends with it, else -1. */
static int infer_base_len(const char *name) {
  size_t n = strlen(name), s = strlen(INFER_SUFFIX);
  return n > s && strcmp(name + n - s, INFER_SUFFIX) == 0 ? (int)(n - s) : -1;
}

/* True when t names "<base>.infer". */
static bool is_twin(const char *t, const char *base) {
  int b = infer_base_len(t);
  return b >= 0 && (size_t)b == strlen(base) && strncmp(t, base, (size_t)b) == 0;
}
static bool kernel_has_twin(const schema_calibration *cal, const char *name) {
  for (int i = 0; i < cal->n_kernels; i++)
    if (is_twin(cal->kernels[i].name, name)) return true;
  return false;
}
static bool coll_has_twin(const schema_calibration *cal, const char *name, int nranks) {
  for (int i = 0; i < cal->n_colls; i++)
    if (cal->colls[i].nranks == nranks && is_twin(cal->colls[i].name, name)) return true;
  return false;
}

int sim_infer_calibration_view(const schema_calibration *cal, schema_calibration *view, ts_err *e) {
  *view = *cal;
  view->kernels = NULL, view->colls = NULL, view->n_kernels = view->n_colls = 0;
  /* GEMMs: the training shapes and the decode shapes of "gemm_infer", as one list */
  view->gemm = NULL, view->n_gemm = 0, view->gemm_infer = NULL, view->n_gemm_infer = 0;
  if (cal->n_gemm + cal->n_gemm_infer > 0) {
    view->gemm = malloc((size_t)(cal->n_gemm + cal->n_gemm_infer) * sizeof *view->gemm);
    if (!view->gemm) return ts_fail_sys(e, "out of memory");
    if (cal->n_gemm) memcpy(view->gemm, cal->gemm, (size_t)cal->n_gemm * sizeof *cal->gemm);
    if (cal->n_gemm_infer)
      memcpy(view->gemm + cal->n_gemm, cal->gemm_infer, (size_t)cal->n_gemm_infer * sizeof *cal->gemm_infer);
    view->n_gemm = cal->n_gemm + cal->n_gemm_infer;
    /* one list in the file's order (n, k, m): the exact-shape lookups search it by halves (the FP8 / BF16
     * ratio's BF16 shape, schema_gemm_fp8_ratio); two sorted lists end to end are not one */
    schema_gemm_list_sort(view->gemm, view->n_gemm);
  }
  view->gemm_index = NULL; /* the file's index is over its own list; the joined one gets its own */
  if (view->n_gemm) schema_gemm_index_build(view); /* on OOM lookups scan the points instead */
  schema_kernel_table *k = calloc((size_t)(cal->n_kernels ? cal->n_kernels : 1), sizeof *k);
  schema_coll_table *c = calloc((size_t)(cal->n_colls ? cal->n_colls : 1), sizeof *c);
  if (!k || !c) {
    schema_gemm_index_free(view);
    free(k), free(c), free(view->gemm);
    view->gemm = NULL, view->n_gemm = 0;
    return ts_fail_sys(e, "out of memory");
  }
  for (int i = 0; i < cal->n_kernels; i++) {
    const schema_kernel_table *t = &cal->kernels[i];
    int b = infer_base_len(t->name);
    if (b < 0 && kernel_has_twin(cal, t->name)) continue;
    k[view->n_kernels] = *t;
    if (b >= 0) k[view->n_kernels].name[b] = '\0';
    view->n_kernels++;
  }
  for (int i = 0; i < cal->n_colls; i++) {
    const schema_coll_table *t = &cal->colls[i];
    int b = infer_base_len(t->name);
    if (b < 0 && coll_has_twin(cal, t->name, t->nranks)) continue;
    c[view->n_colls] = *t;
    if (b >= 0) c[view->n_colls].name[b] = '\0';
    view->n_colls++;
  }
  view->kernels = k, view->colls = c;
  return 0;
}

void sim_infer_calibration_view_free(schema_calibration *view) {
  schema_gemm_index_free(view);
  free(view->gemm);
  view->gemm = NULL, view->n_gemm = 0;
  free(view->kernels);
  free(view->colls);
  view->kernels = NULL, view->colls = NULL;
  view->n_kernels = view->n_colls = 0;
}

/* ---- the phase views: the small kernels timed as a decode step runs them ---- */

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n > k && strcmp(s + n - k, suffix) == 0;
}

/* "<name>.eager" / "<name>.graph" (calibrate-infer --small-only) */
static bool is_mode_table(const char *name) { return ends_with(name, ".eager") || ends_with(name, ".graph"); }

static const schema_kernel_table *twin_of(const schema_calibration *cal, const char *base, const char *suffix) {
  char want[64];
  snprintf(want, sizeof want, "%s%s", base, suffix);
  return schema_kernel_table_of(cal, want);
}

static int cmp_point(const void *a, const void *b) {
  const schema_kernel_point *x = a, *y = b;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  return (x->x > y->x) - (x->x < y->x);
}

/* The twin's group nearest to width (by ratio; the larger on a tie). */
static int nearest_group(const schema_kernel_table *twin, int width) {
  int best = -1;
  double bd = 0;
  for (int i = 0; i < twin->n; i++) {
    int g = twin->pts[i].group;
    if (g <= 0) continue;
    double d = fabs(log((double)g / width));
    if (best < 0 || d < bd - 1e-12 || (fabs(d - bd) <= 1e-12 && g > best)) best = g, bd = d;
  }
  return best;
}

/* The twin's points, then base's points of each group above the twin's
 * largest point of that group (all of base's points of groups the twin lacks).
 * width > 0 (a width-keyed twin of a bytes-keyed table): only the twin's points
 * of the group nearest to width, as group 0; a base keyed by width as well
 * (rope_scatter_fwd, the prefill's RoPE + KV scatter: merge_small.py) gives its
 * points of the group nearest to width as group 0 too. */
static int merge_twin(const schema_kernel_table *base, const schema_kernel_table *twin, int width,
                      schema_kernel_table *out) {
  int n = twin->n + (base ? base->n : 0);
  out->pts = malloc((size_t)(n ? n : 1) * sizeof *out->pts);
  if (!out->pts) return -1;
  out->n = 0;
  int g = width > 0 ? nearest_group(twin, width) : -1;
  for (int i = 0; i < twin->n; i++)
    if (g < 0 || twin->pts[i].group == g) {
      out->pts[out->n] = twin->pts[i];
      if (g >= 0) out->pts[out->n].group = 0;
      out->n++;
    }
  const schema_kernel_table own = {.n = out->n, .pts = out->pts};
  twin = &own; /* the points kept, for the comparison below (out->pts only grows past them) */
  const int bg = g >= 0 && base ? nearest_group(base, width) : -1; /* a width-keyed base's group, or -1 */
  for (int i = 0; base && i < base->n; i++) {
    schema_kernel_point p = base->pts[i];
    if (bg >= 0) {
      if (p.group != bg) continue;
      p.group = 0;
    }
    bool above = true;
    for (int j = 0; j < twin->n; j++)
      if (twin->pts[j].group == p.group && twin->pts[j].x >= p.x) above = false;
    if (above) out->pts[out->n++] = p;
  }
  qsort(out->pts, (size_t)out->n, sizeof *out->pts, cmp_point);
  return 0;
}

/* Each table of out owns a copy of its points (a few thousand: cheap beside a prediction). */
static int width_of(const sim_infer_width *w, int n, const char *table) {
  for (int i = 0; i < n; i++)
    if (strcmp(w[i].table, table) == 0) return w[i].width;
  return 0;
}

int sim_infer_phase_view(const schema_calibration *view, const char *suffix, bool lone_twins,
                         const sim_infer_width *widths, int n_widths, schema_calibration *out, ts_err *e) {
  *out = *view;
  out->kernels = calloc((size_t)(view->n_kernels ? view->n_kernels : 1), sizeof *out->kernels);
  out->n_kernels = 0;
  if (!out->kernels) return ts_fail_sys(e, "out of memory");
  for (int pass = 0; pass < (lone_twins ? 2 : 1); pass++) /* 0: the file's tables; 1: twins with no table of their base name */
    for (int i = 0; i < view->n_kernels; i++) {
      const schema_kernel_table *t = &view->kernels[i], *base = t, *twin;
      char name[48];
      if (pass == 0) {
        if (is_mode_table(t->name)) continue;
        twin = twin_of(view, t->name, suffix);
        snprintf(name, sizeof name, "%s", t->name);
      } else {
        if (!ends_with(t->name, suffix)) continue;
        snprintf(name, sizeof name, "%.*s", (int)(strlen(t->name) - strlen(suffix)), t->name);
        if (schema_has_kernel(view, name)) continue;
        base = NULL, twin = t;
      }
      schema_kernel_table *o = &out->kernels[out->n_kernels];
      *o = *t;
      snprintf(o->name, sizeof o->name, "%s", name);
      o->pts = NULL, o->n = 0;
      int rc;
      if (twin) {
        rc = merge_twin(base, twin, width_of(widths, n_widths, name), o);
      } else {
        o->pts = malloc((size_t)(t->n ? t->n : 1) * sizeof *o->pts);
        if ((rc = o->pts ? 0 : -1) == 0) memcpy(o->pts, t->pts, (size_t)t->n * sizeof *t->pts), o->n = t->n;
      }
      out->n_kernels++;
      if (rc) {
        sim_infer_phase_view_free(out);
        return ts_fail_sys(e, "out of memory");
      }
    }
  return 0;
}

void sim_infer_phase_view_free(schema_calibration *out) {
  for (int i = 0; out->kernels && i < out->n_kernels; i++) free(out->kernels[i].pts);
  free(out->kernels);
  out->kernels = NULL, out->n_kernels = 0;
}

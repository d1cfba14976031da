/* sim_infer_cal.c — the calibration an inference prediction reads (see
 * sim_infer.h): the file's tables, with each "<name>.infer" kernel or
 * collective table (measured the way the inference executor runs: `tacorun
 * calibrate-infer`) standing in for "<name>". The training simulator never
 * reads the ".infer" tables, so they cannot move a training prediction.
 * Likewise the decode GEMMs of "gemm_infer" join the "gemm" list here only.
 * The view shares the file's table points; the table lists, the joined
 * GEMM list and its index are its own. */
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

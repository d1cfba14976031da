/* infer_prof.c — the inference executor's per-op profile (infer_prof.h). */
#include "infer_prof.h"

#include <stdlib.h>
#include <string.h>

int infer_prof_init(infer_prof *p, int cap, ts_err *e) {
  memset(p, 0, sizeof *p);
  p->ev = calloc((size_t)cap + 1, sizeof *p->ev);
  p->name = calloc((size_t)cap + 1, sizeof *p->name);
  if (!p->ev || !p->name) {
    infer_prof_free(p);
    return ts_fail_sys(e, "infer_prof: out of host memory for %d events", cap + 1);
  }
  for (int i = 0; i <= cap; i++) {
    if (cudaEventCreate(&p->ev[i]) != cudaSuccess) {
      infer_prof_free(p);
      return ts_fail_sys(e, "infer_prof: cudaEventCreate failed (event %d of %d)", i, cap + 1);
    }
    p->cap = i; /* events 0..i exist: freed from there */
  }
  return 0;
}

void infer_prof_free(infer_prof *p) {
  if (p->ev)
    for (int i = p->cap; i >= 0; i--)
      if (p->ev[i]) cudaEventDestroy(p->ev[i]);
  free(p->name);
  free(p->ev);
  memset(p, 0, sizeof *p);
}

int infer_prof_start(infer_prof *p, cudaStream_t st, ts_err *e) {
  p->n = 0;
  if (cudaEventRecord(p->ev[0], st) != cudaSuccess) return ts_fail_sys(e, "infer_prof: cudaEventRecord failed");
  p->on = 1;
  return 0;
}

int infer_prof_mark(infer_prof *p, const char *name, cudaStream_t st, ts_err *e) {
  if (!p || !p->on) return 0;
  if (p->n >= p->cap)
    return ts_fail_sys(e, "infer_prof: more than %d ops in one pass (op %s)", p->cap, name);
  p->name[++p->n] = name;
  if (cudaEventRecord(p->ev[p->n], st) != cudaSuccess) return ts_fail_sys(e, "infer_prof: cudaEventRecord failed");
  return 0;
}

static infer_prof_sum *sum_of(infer_prof *p, const char *phase, const char *name) {
  char full[sizeof p->sum[0].name];
  snprintf(full, sizeof full, "%s.%s", phase, name);
  for (int j = 0; j < p->nsum; j++)
    if (!strcmp(p->sum[j].name, full)) return &p->sum[j];
  if (p->nsum == INFER_PROF_MAX_NAMES) return NULL;
  infer_prof_sum *s = &p->sum[p->nsum++];
  snprintf(s->name, sizeof s->name, "%s", full);
  return s;
}

int infer_prof_stop(infer_prof *p, const char *phase, cudaStream_t st, ts_err *e) {
  p->on = 0;
  if (cudaStreamSynchronize(st) != cudaSuccess) return ts_fail_sys(e, "infer_prof: the profiled pass failed");
  for (int i = 1; i <= p->n; i++) {
    float ms;
    if (cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]) != cudaSuccess)
      return ts_fail_sys(e, "infer_prof: cudaEventElapsedTime failed");
    infer_prof_sum *s = sum_of(p, phase, p->name[i]);
    if (!s) return ts_fail_sys(e, "infer_prof: more than %d op names", INFER_PROF_MAX_NAMES);
    s->count++;
    s->s += ms * 1e-3;
  }
  return 0;
}

static int cmp_desc(const void *a, const void *b) {
  double x = ((const infer_prof_sum *)a)->s, y = ((const infer_prof_sum *)b)->s;
  return x < y ? 1 : x > y ? -1 : 0;
}

int infer_prof_write(const infer_prof *p, int passes, const char *header, const double timed_s[2], const char *path,
                     ts_err *e) {
  static const char *phase[2] = {"prefill.", "decode."};
  static const char *figure[2] = {"TTFT", "eager TPOT"};
  infer_prof_sum sorted[INFER_PROF_MAX_NAMES];
  memcpy(sorted, p->sum, sizeof sorted[0] * (size_t)p->nsum);
  qsort(sorted, (size_t)p->nsum, sizeof sorted[0], cmp_desc);
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail(e, path, NULL, "cannot open for writing");
  fprintf(f, "# op count total_ms mean_us pct (%s; the mean of %d profiled passes a phase)\n", header, passes);
  for (int ph = 0; ph < 2; ph++) {
    double total = 0;
    for (int j = 0; j < p->nsum; j++)
      if (!strncmp(sorted[j].name, phase[ph], strlen(phase[ph]))) total += sorted[j].s / passes;
    for (int j = 0; j < p->nsum; j++) {
      const infer_prof_sum *s = &sorted[j];
      if (strncmp(s->name, phase[ph], strlen(phase[ph]))) continue;
      fprintf(f, "%s %d %.4f %.2f %.3f\n", s->name, s->count / passes, s->s / passes * 1e3, s->s / s->count * 1e6,
              total > 0 ? 100 * s->s / passes / total : 0);
    }
    if (total > 0)
      fprintf(f, "# %.*s total %.4f ms profiled (%s %.4f ms, timed without events)\n", (int)strlen(phase[ph]) - 1,
              phase[ph], total * 1e3, figure[ph], timed_s[ph] * 1e3);
  }
  if (fclose(f)) return ts_fail(e, path, NULL, "write failed");
  return 0;
}

/* calibration_io.c — strict loader and writer of calibration files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "ts_coll.h"
#include "ts_json.h"


/* ---- building in memory ---- */

static void *grow(void *ptr, int n, size_t elem) {
  /* Grows arrays in powers of two: capacity is implied by n. */
  if (n & (n - 1)) return ptr;
  size_t cap = n ? (size_t)n * 2 : 4;
  return realloc(ptr, cap * elem);
}

static int push_gemm(schema_gemm_point **list, int *count, long long m, long long n, long long k, double us) {
  schema_gemm_point *g = grow(*list, *count, sizeof *g);
  if (!g) return -1;
  *list = g;
  g[(*count)++] = (schema_gemm_point){m, n, k, us};
  return 0;
}

int schema_calibration_add_gemm(schema_calibration *c, long long m, long long n, long long k, double us) {
  return push_gemm(&c->gemm, &c->n_gemm, m, n, k, us);
}

int schema_calibration_add_gemm_infer(schema_calibration *c, long long m, long long n, long long k, double us) {
  return push_gemm(&c->gemm_infer, &c->n_gemm_infer, m, n, k, us);
}

int schema_calibration_add_gemm_wgrad(schema_calibration *c, long long m, long long n, long long k, double us) {
  return push_gemm(&c->gemm_wgrad, &c->n_gemm_wgrad, m, n, k, us);
}

int schema_calibration_add_gemm_fp8(schema_calibration *c, long long m, long long n, long long k, double us) {
  return push_gemm(&c->gemm_fp8, &c->n_gemm_fp8, m, n, k, us);
}

static schema_kernel_table *append_kernel_table(schema_calibration *c, const char *name, bool by_flops) {
  schema_kernel_table *t = grow(c->kernels, c->n_kernels, sizeof *t);
  if (!t) return NULL;
  c->kernels = t;
  t = &c->kernels[c->n_kernels++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->by_flops = by_flops;
  return t;
}

static schema_kernel_table *kernel_table(schema_calibration *c, const char *name, bool by_flops) {
  for (int i = 0; i < c->n_kernels; i++)
    if (strcmp(c->kernels[i].name, name) == 0) return &c->kernels[i];
  return append_kernel_table(c, name, by_flops);
}

static int add_kernel_point(schema_kernel_table *t, double x, int group, double us) {
  schema_kernel_point *p = grow(t->pts, t->n, sizeof *p);
  if (!p) return -1;
  t->pts = p;
  t->pts[t->n++] = (schema_kernel_point){x, group, us};
  return 0;
}

int schema_calibration_add_kernel(schema_calibration *c, const char *name, bool by_flops, double x, int group,
                                  double us) {
  schema_kernel_table *t = kernel_table(c, name, by_flops);
  return t ? add_kernel_point(t, x, group, us) : -1;
}

static schema_coll_table *append_coll_table(schema_calibration *c, const char *name, int nranks) {
  schema_coll_table *t = grow(c->colls, c->n_colls, sizeof *t);
  if (!t) return NULL;
  c->colls = t;
  t = &c->colls[c->n_colls++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s", name);
  t->nranks = nranks;
  return t;
}

static schema_coll_table *coll_table(schema_calibration *c, const char *name, int nranks) {
  for (int i = 0; i < c->n_colls; i++)
    if (c->colls[i].nranks == nranks && strcmp(c->colls[i].name, name) == 0) return &c->colls[i];
  return append_coll_table(c, name, nranks);
}

static int add_coll_point(schema_coll_table *t, double bytes, double us) {
  schema_size_point *p = grow(t->pts, t->n, sizeof *p);
  if (!p) return -1;
  t->pts = p;
  t->pts[t->n++] = (schema_size_point){bytes, us};
  return 0;
}

int schema_calibration_add_coll(schema_calibration *c, const char *name, int nranks, double bytes, double us) {
  schema_coll_table *t = coll_table(c, name, nranks);
  return t ? add_coll_point(t, bytes, us) : -1;
}

int schema_calibration_add_fit(schema_calibration *c, const char *name, double latency_us, double gbps) {
  schema_fit *f = grow(c->fits, c->n_fits, sizeof *f);
  if (!f) return -1;
  c->fits = f;
  f = &c->fits[c->n_fits++];
  snprintf(f->name, sizeof f->name, "%s", name);
  f->latency_us = latency_us;
  f->gbps = gbps;
  return 0;
}

int schema_calibration_add_clock(schema_calibration *c, double duty, double period_us, double gemm_speed,
                                 double mem_speed) {
  schema_clock_point *p = grow(c->clock, c->n_clock, sizeof *p);
  if (!p) return -1;
  c->clock = p;
  c->clock[c->n_clock++] = (schema_clock_point){duty, period_us, gemm_speed, mem_speed};
  return 0;
}

void schema_calibration_copy_host(schema_calibration *dst, const schema_calibration *src) {
  if (src->fw_host.framework[0]) dst->fw_host = src->fw_host; /* the framework's host time: the same machine */
  if (!src->has_host) return;
  dst->has_host = true;
  dst->host_launch_us = src->host_launch_us, dst->host_gemm_launch_us = src->host_gemm_launch_us;
  dst->host_event_us = src->host_event_us, dst->host_graph_gap_us = src->host_graph_gap_us;
  dst->n_host_sync = src->n_host_sync;
  memcpy(dst->host_sync_wait_us, src->host_sync_wait_us, sizeof dst->host_sync_wait_us);
  memcpy(dst->host_sync_gap_us, src->host_sync_gap_us, sizeof dst->host_sync_gap_us);
}

void schema_calibration_copy_tpo_sm(schema_calibration *dst, const schema_calibration *src) {
  if (!src->n_tpo_sm) return;
  dst->n_tpo_sm = src->n_tpo_sm, dst->tpo_sm_sms = src->tpo_sm_sms, dst->tpo_sm_priced = src->tpo_sm_priced;
  memcpy(dst->tpo_sm_measured_on, src->tpo_sm_measured_on, sizeof dst->tpo_sm_measured_on);
  memcpy(dst->tpo_sm_source, src->tpo_sm_source, sizeof dst->tpo_sm_source);
  memcpy(dst->tpo_sm_held, src->tpo_sm_held, sizeof dst->tpo_sm_held);
  memcpy(dst->tpo_sm_margin, src->tpo_sm_margin, sizeof dst->tpo_sm_margin);
  memcpy(dst->tpo_sm_nomargin, src->tpo_sm_nomargin, sizeof dst->tpo_sm_nomargin);
}

int schema_calibration_copy_compute(schema_calibration *c, const schema_calibration *src) {
  int rc = 0;
  for (int i = 0; i < src->n_gemm && !rc; i++)
    rc = schema_calibration_add_gemm(c, src->gemm[i].m, src->gemm[i].n, src->gemm[i].k, src->gemm[i].us);
  for (int i = 0; i < src->n_gemm_infer && !rc; i++)
    rc = schema_calibration_add_gemm_infer(c, src->gemm_infer[i].m, src->gemm_infer[i].n, src->gemm_infer[i].k,
                                           src->gemm_infer[i].us);
  for (int i = 0; i < src->n_gemm_wgrad && !rc; i++)
    rc = schema_calibration_add_gemm_wgrad(c, src->gemm_wgrad[i].m, src->gemm_wgrad[i].n, src->gemm_wgrad[i].k,
                                           src->gemm_wgrad[i].us);
  for (int i = 0; i < src->n_gemm_fp8 && !rc; i++)
    rc = schema_calibration_add_gemm_fp8(c, src->gemm_fp8[i].m, src->gemm_fp8[i].n, src->gemm_fp8[i].k,
                                         src->gemm_fp8[i].us);
  for (int t = 0; t < src->n_kernels && !rc; t++)
    for (int i = 0; i < src->kernels[t].n && !rc; i++)
      rc = schema_calibration_add_kernel(c, src->kernels[t].name, src->kernels[t].by_flops, src->kernels[t].pts[i].x,
                                         src->kernels[t].pts[i].group, src->kernels[t].pts[i].us);
  for (int b = 0; b < SCHEMA_ATTN_NBACKENDS && !rc; b++) { /* attention per shape, every backend */
    int n;
    const schema_attn_point *pt = schema_attn_points(src, (schema_attn_backend)b, &n);
    for (int i = 0; i < n && !rc; i++)
      rc = schema_calibration_add_attn_backend(c, (schema_attn_backend)b, &pt[i].s, pt[i].fwd_us, pt[i].bwd_us);
  }
  /* the clock section belongs to the GPUs, like the compute tables */
  for (int i = 0; i < src->n_clock && !rc; i++)
    rc = schema_calibration_add_clock(c, src->clock[i].duty, src->clock[i].period_us, src->clock[i].gemm_speed,
                                      src->clock[i].mem_speed);
  if (src->n_clock) c->clock_window_us = src->clock_window_us;
  c->n_burst = src->n_burst; /* its burst profile too (merge_burst.py) */
  if (src->power.n) c->power = src->power; /* and its power section (merge_power.py) */
  if (src->op_power.n_attn) c->op_power = src->op_power; /* and its op classes' power (merge_op_power.py) */
  memcpy(c->burst, src->burst, sizeof c->burst);
  schema_calibration_copy_tpo_sm(c, src); /* a property of the GPU, like the host's costs */
  schema_calibration_copy_host(c, src); /* and the host's costs, graph_gap_us among them (same machine) */
  return rc ? -1 : 0;
}

void schema_calibration_free(schema_calibration *c) {
  for (int i = 0; i < c->n_kernels; i++) free(c->kernels[i].pts);
  for (int i = 0; i < c->n_colls; i++) free(c->colls[i].pts);
  free(c->gemm);
  free(c->gemm_infer);
  free(c->gemm_wgrad);
  free(c->gemm_fp8);
  schema_attn_free(c);
  free(c->kernels);
  free(c->colls);
  free(c->fits);
  free(c->clock);
  schema_gemm_index_free(c);
  memset(c, 0, sizeof *c);
}

/* ---- sorting (deterministic order for lookups and for the writer) ---- */

static int cmp_gemm(const void *a, const void *b) {
  const schema_gemm_point *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? -1 : 1;
  if (x->k != y->k) return x->k < y->k ? -1 : 1;
  if (x->m != y->m) return x->m < y->m ? -1 : 1;
  return 0;
}
static int cmp_kernel_point(const void *a, const void *b) {
  const schema_kernel_point *x = a, *y = b;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  if (x->x != y->x) return x->x < y->x ? -1 : 1;
  return 0;
}
static int cmp_size_point(const void *a, const void *b) {
  const schema_size_point *x = a, *y = b;
  return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}
static int cmp_kernel_table(const void *a, const void *b) {
  return strcmp(((const schema_kernel_table *)a)->name, ((const schema_kernel_table *)b)->name);
}
static int cmp_coll_table(const void *a, const void *b) {
  const schema_coll_table *x = a, *y = b;
  int s = strcmp(x->name, y->name);
  return s ? s : (x->nranks > y->nranks) - (x->nranks < y->nranks);
}
static int cmp_clock_point(const void *a, const void *b) {
  const schema_clock_point *x = a, *y = b;
  if (x->period_us != y->period_us) return x->period_us < y->period_us ? -1 : 1;
  return (x->duty > y->duty) - (x->duty < y->duty);
}
static int cmp_fit(const void *a, const void *b) {
  return strcmp(((const schema_fit *)a)->name, ((const schema_fit *)b)->name);
}

void schema_gemm_list_sort(schema_gemm_point *pts, int n) {
  if (n > 1) qsort(pts, (size_t)n, sizeof *pts, cmp_gemm);
}

void schema_calibration_sort(schema_calibration *c) {
  schema_gemm_list_sort(c->gemm, c->n_gemm);
  if (c->n_gemm_infer) qsort(c->gemm_infer, (size_t)c->n_gemm_infer, sizeof *c->gemm_infer, cmp_gemm);
  if (c->n_gemm_wgrad) qsort(c->gemm_wgrad, (size_t)c->n_gemm_wgrad, sizeof *c->gemm_wgrad, cmp_gemm);
  if (c->n_gemm_fp8) qsort(c->gemm_fp8, (size_t)c->n_gemm_fp8, sizeof *c->gemm_fp8, cmp_gemm);
  schema_attn_sort(c);
  for (int i = 0; i < c->n_kernels; i++)
    if (c->kernels[i].n) qsort(c->kernels[i].pts, (size_t)c->kernels[i].n, sizeof *c->kernels[i].pts, cmp_kernel_point);
  for (int i = 0; i < c->n_colls; i++)
    if (c->colls[i].n) qsort(c->colls[i].pts, (size_t)c->colls[i].n, sizeof *c->colls[i].pts, cmp_size_point);
  if (c->n_kernels) qsort(c->kernels, (size_t)c->n_kernels, sizeof *c->kernels, cmp_kernel_table);
  if (c->n_colls) qsort(c->colls, (size_t)c->n_colls, sizeof *c->colls, cmp_coll_table);
  if (c->n_fits) qsort(c->fits, (size_t)c->n_fits, sizeof *c->fits, cmp_fit);
  if (c->n_clock) qsort(c->clock, (size_t)c->n_clock, sizeof *c->clock, cmp_clock_point);
  schema_gemm_index_build(c); /* on OOM lookups scan the points instead */
}

/* ---- loader ---- */

#define MAX_US 1e9     /* 1000 s: no single op takes longer */
/* Significant digits the writer keeps of a value that is not an integer. */
#define WRITE_DIGITS 8

/* A table's key (bytes, FLOPs) as the writer will write it: integers exactly,
 * others to WRITE_DIGITS significant digits. Points are keyed by this value,
 * so two that the written file could not tell apart are duplicates here too
 * and a written file always loads again (found by fuzz_calibration). */
static double as_written(double v) {
  if (v == (double)(long long)v && v < 9e15) return v;
  char buf[40];
  snprintf(buf, sizeof buf, "%.*g", WRITE_DIGITS, v);
  return strtod(buf, NULL);
}
#define MAX_BYTES 1e15 /* 1 PB */

/* ---- duplicate points: sort the keys, compare neighbours ----
 * A table's points are checked for repeated keys once the table is read,
 * in O(n log n): each point's key and its place in the file are sorted, and
 * equal neighbours are repeats. The point reported is the first one in file
 * order that repeats an earlier one, as a point-by-point check would find. */
typedef struct {
  double k[3]; /* the key: (m, n, k), (x, group), (bytes), (duty, period_us) */
  size_t at;   /* index in the file's array */
} point_key;

typedef struct {
  point_key *v;
  size_t n, cap;
} point_keys;

static int keys_push(point_keys *s, double a, double b, double c) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 64;
    point_key *v = realloc(s->v, cap * sizeof *v);
    if (!v) return -1;
    s->v = v, s->cap = cap;
  }
  s->v[s->n] = (point_key){{a, b, c}, s->n};
  s->n++;
  return 0;
}

static int cmp_point_key(const void *pa, const void *pb) {
  const point_key *a = pa, *b = pb;
  for (int i = 0; i < 3; i++)
    if (a->k[i] != b->k[i]) return a->k[i] < b->k[i] ? -1 : 1;
  return (a->at > b->at) - (a->at < b->at);
}

/* The point that first repeats an earlier point's key (NULL: none); sorts s. */
static const point_key *first_repeat(point_keys *s) {
  if (s->n < 2) return NULL;
  qsort(s->v, s->n, sizeof *s->v, cmp_point_key);
  const point_key *best = NULL;
  for (size_t i = 1; i < s->n; i++) {
    const point_key *a = &s->v[i - 1], *b = &s->v[i];
    if (a->k[0] == b->k[0] && a->k[1] == b->k[1] && a->k[2] == b->k[2] && (!best || b->at < best->at)) best = b;
  }
  return best;
}

static void keys_free(point_keys *s) {
  free(s->v);
  memset(s, 0, sizeof *s);
}

typedef int (*gemm_adder)(schema_calibration *, long long, long long, long long, double);

/* "gemm", "gemm_infer" or "gemm_wgrad" (key), each point added by `add`: the
 * same points, each list free of repeats. */
static int load_gemm(json_t *root, const char *file, const char *key, gemm_adder add, schema_calibration *c,
                     ts_err *e) {
  json_t *arr = json_object_get(root, key);
  if (!arr) return 0; /* optional: a collectives-only calibration is allowed */
  if (!json_is_array(arr)) return ts_fail(e, file, key, "must be an array");
  size_t i;
  json_t *pt;
  static const char *const keys[] = {"m", "n", "k", "us", NULL};
  point_keys seen = {0};
  int rc = 0;
  json_array_foreach(arr, i, pt) {
    char path[64];
    snprintf(path, sizeof path, "%s[%zu]", key, i);
    long long m, n, k;
    double us;
    if (!json_is_object(pt)) rc = ts_fail(e, file, path, "must be an object");
    else if (tsj_only_keys(pt, keys, file, path, e) || tsj_int(pt, "m", 1, 1LL << 31, &m, file, path, e) ||
             tsj_int(pt, "n", 1, 1LL << 31, &n, file, path, e) || tsj_int(pt, "k", 1, 1LL << 31, &k, file, path, e) ||
             tsj_real(pt, "us", 1e-3, MAX_US, &us, file, path, e))
      rc = -1;
    else if (keys_push(&seen, (double)m, (double)n, (double)k) ||
             add(c, m, n, k, us)) {
      keys_free(&seen);
      return ts_fail_sys(e, "out of memory");
    }
    if (rc) break;
  }
  const point_key *d = first_repeat(&seen); /* before the failing point, if any: reported first */
  if (d) {
    char path[64];
    snprintf(path, sizeof path, "%s[%zu]", key, d->at);
    rc = ts_fail(e, file, path, "duplicate shape %lldx%lldx%lld", (long long)d->k[0], (long long)d->k[1],
                 (long long)d->k[2]);
  }
  keys_free(&seen);
  return rc;
}

static int valid_name(const char *s) {
  if (!*s || strlen(s) >= 48) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '.')) return 0;
  return 1;
}

/* One kernel table: the points of kernels.NAME (path), checked and then checked for repeats. */
static int load_kernel_table(json_t *arr, const char *name, const char *path, const char *file,
                             schema_calibration *c, ts_err *e) {
  bool by_flops = json_is_object(json_array_get(arr, 0)) && json_object_get(json_array_get(arr, 0), "flops");
  static const char *const kb[] = {"bytes", "group", "us", NULL};
  static const char *const kf[] = {"flops", "group", "us", NULL};
  int ti = c->n_kernels; /* names are unique (duplicate JSON keys are refused): a new table */
  if (!append_kernel_table(c, name, by_flops)) return ts_fail_sys(e, "out of memory");
  point_keys seen = {0};
  int rc = 0;
  size_t i;
  json_t *pt;
  json_array_foreach(arr, i, pt) {
    char p[160];
    snprintf(p, sizeof p, "%s[%zu]", path, i);
    double x, us;
    long long group;
    if (!json_is_object(pt)) rc = ts_fail(e, file, p, "must be an object");
    else if (tsj_only_keys(pt, by_flops ? kf : kb, file, p, e) ||
             tsj_real(pt, by_flops ? "flops" : "bytes", 1, by_flops ? 1e18 : MAX_BYTES, &x, file, p, e) ||
             tsj_int_opt(pt, "group", 0, 1 << 20, 0, &group, file, p, e) ||
             tsj_real(pt, "us", 1e-3, MAX_US, &us, file, p, e))
      rc = -1;
    else {
      x = as_written(x);
      if (keys_push(&seen, x, (double)group, 0) || add_kernel_point(&c->kernels[ti], x, (int)group, us)) {
        keys_free(&seen);
        return ts_fail_sys(e, "out of memory");
      }
    }
    if (rc) break;
  }
  const point_key *d = first_repeat(&seen);
  if (d) {
    char p[160];
    snprintf(p, sizeof p, "%s[%zu]", path, d->at);
    rc = ts_fail(e, file, p, "duplicate point (%s %g, group %lld)", by_flops ? "flops" : "bytes", d->k[0],
                 (long long)d->k[1]);
  }
  keys_free(&seen);
  return rc;
}

static int load_kernels(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  json_t *obj = json_object_get(root, "kernels");
  if (!obj) return 0;
  if (!json_is_object(obj)) return ts_fail(e, file, "kernels", "must be an object");
  const char *name;
  json_t *arr;
  json_object_foreach(obj, name, arr) {
    char path[128];
    snprintf(path, sizeof path, "kernels.%.60s", name);
    if (!valid_name(name)) return ts_fail(e, file, path, "kernel name must be 1-47 of [a-z0-9_.]");
    if (!json_is_array(arr)) return ts_fail(e, file, path, "must be an array");
    if (json_array_size(arr) == 0) return ts_fail(e, file, path, "must not be empty");
    if (load_kernel_table(arr, name, path, file, c, e)) return -1;
    if (!strncmp(name, "gemm_grouped.", 13)) { /* the grouped-GEMM families (calibration.h) */
      int g;
      bool tk;
      long long a, b;
      if (schema_grouped_gemm_parse(name, &g, &tk, &a, &b))
        return ts_fail(e, file, path, "grouped-GEMM table name must read gemm_grouped.g<G>.n<N>.k<K> or "
                                      "gemm_grouped.g<G>.m<M>.n<N> (G in 2..4096, positive sizes)");
      if (!c->kernels[c->n_kernels - 1].by_flops)
        return ts_fail(e, file, path, "grouped-GEMM points are keyed by \"flops\", not \"bytes\"");
    }
  }
  return 0;
}

/* "allreduce", "allreduce.taco128" (G a power of two in 32..512) or
 * "allreduce.taco128.fp32" (TACO on FP32 payloads, keyed by FP32 bytes), each
 * optionally followed by ".infer" (timed the way the inference executor runs
 * it; only inference predictions read it, sim/sim_infer_cal.c). */
static int valid_coll_name_core(const char *name);
static int valid_coll_name(const char *name) {
  char core[48];
  size_t n = strlen(name), s = strlen(".infer");
  if (n > s && n < sizeof core && strcmp(name + n - s, ".infer") == 0) {
    memcpy(core, name, n - s);
    core[n - s] = '\0';
    return valid_coll_name_core(core);
  }
  return valid_coll_name_core(name);
}
static int valid_coll_name_core(const char *name) {
  char base[48];
  const char *dot = strchr(name, '.');
  size_t len = dot ? (size_t)(dot - name) : strlen(name);
  if (len >= sizeof base) return 0;
  memcpy(base, name, len);
  base[len] = '\0';
  ts_coll coll;
  if (ts_coll_parse(base, &coll)) return 0;
  if (!dot) return 1;
  if (strncmp(dot + 1, "taco", 4) != 0) return 0;
  char *end;
  errno = 0;
  long g = strtol(dot + 5, &end, 10);
  return (*end == '\0' || strcmp(end, ".fp32") == 0) && errno == 0 && g >= 32 && g <= 512 && (g & (g - 1)) == 0;
}

/* One collective table: the points of collectives.NAME.NRANKS (path). */
static int load_coll_table(json_t *arr, const char *name, int nranks, const char *path, const char *file,
                           schema_calibration *c, ts_err *e) {
  static const char *const keys[] = {"bytes", "us", NULL};
  int ti = c->n_colls; /* (name, nranks) is unique: names are JSON keys, ranks keys are canonical */
  if (!append_coll_table(c, name, nranks)) return ts_fail_sys(e, "out of memory");
  point_keys seen = {0};
  int rc = 0;
  size_t i;
  json_t *pt;
  json_array_foreach(arr, i, pt) {
    char q[200];
    snprintf(q, sizeof q, "%s[%zu]", path, i);
    double bytes, us;
    if (!json_is_object(pt)) rc = ts_fail(e, file, q, "must be an object");
    else if (tsj_only_keys(pt, keys, file, q, e) || tsj_real(pt, "bytes", 1, MAX_BYTES, &bytes, file, q, e) ||
             tsj_real(pt, "us", 1e-3, MAX_US, &us, file, q, e))
      rc = -1;
    else {
      bytes = as_written(bytes);
      if (keys_push(&seen, bytes, 0, 0) || add_coll_point(&c->colls[ti], bytes, us)) {
        keys_free(&seen);
        return ts_fail_sys(e, "out of memory");
      }
    }
    if (rc) break;
  }
  const point_key *d = first_repeat(&seen);
  if (d) {
    char q[200];
    snprintf(q, sizeof q, "%s[%zu]", path, d->at);
    rc = ts_fail(e, file, q, "duplicate size %g", d->k[0]);
  }
  keys_free(&seen);
  return rc;
}

static int load_collectives(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  json_t *obj = json_object_get(root, "collectives");
  if (!obj) return 0;
  if (!json_is_object(obj)) return ts_fail(e, file, "collectives", "must be an object");
  const char *name;
  json_t *per_n;
  json_object_foreach(obj, name, per_n) {
    char path[128];
    snprintf(path, sizeof path, "collectives.%.60s", name);
    if (!valid_coll_name(name))
      return ts_fail(e, file, path,
                     "unknown collective (allreduce, allgather, reducescatter, alltoall, sendrecv, "
                     "optionally followed by .taco<G>, G = 32..512, and .fp32, then .infer)");
    if (!json_is_object(per_n)) return ts_fail(e, file, path, "must be an object keyed by the number of ranks");
    if (json_object_size(per_n) == 0) return ts_fail(e, file, path, "must not be empty");
    const char *nkey;
    json_t *arr;
    json_object_foreach(per_n, nkey, arr) {
      char p[160], canonical[16];
      snprintf(p, sizeof p, "%s.%.16s", path, nkey);
      char *end;
      errno = 0;
      long nr = strtol(nkey, &end, 10);
      if (*nkey == '\0' || *end != '\0' || errno || nr < 2 || nr > 1 << 20)
        return ts_fail(e, file, p, "key must be a number of ranks (2..1048576)");
      snprintf(canonical, sizeof canonical, "%ld", nr);
      if (strcmp(canonical, nkey) != 0) /* "08" and "8" would be one table under two keys */
        return ts_fail(e, file, p, "write the number of ranks as %s (no sign, spaces or leading zeros)", canonical);
      if (!json_is_array(arr)) return ts_fail(e, file, p, "must be an array");
      if (json_array_size(arr) == 0) return ts_fail(e, file, p, "must not be empty");
      if (load_coll_table(arr, name, (int)nr, p, file, c, e)) return -1;
    }
  }
  return 0;
}

static int load_fits(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  json_t *obj = json_object_get(root, "fits");
  if (!obj) return 0;
  if (!json_is_object(obj)) return ts_fail(e, file, "fits", "must be an object");
  const char *name;
  json_t *f;
  static const char *const keys[] = {"latency_us", "gbps", NULL};
  json_object_foreach(obj, name, f) {
    char path[128];
    snprintf(path, sizeof path, "fits.%.60s", name);
    if (!valid_name(name)) return ts_fail(e, file, path, "fit name must be 1-47 of [a-z0-9_.]");
    if (!json_is_object(f)) return ts_fail(e, file, path, "must be an object");
    double lat, gbps;
    if (tsj_only_keys(f, keys, file, path, e) || tsj_real(f, "latency_us", 0, MAX_US, &lat, file, path, e) ||
        tsj_real(f, "gbps", 1e-6, 1e6, &gbps, file, path, e))
      return -1;
    if (schema_calibration_add_fit(c, name, lat, gbps)) return ts_fail_sys(e, "out of memory");
  }
  return 0;
}

/* Speeds outside this range are not clocks: no GPU runs 1000x faster or slower. */
#define MIN_SPEED 1e-3
#define MAX_SPEED 1e3

/* "clock"."burst" (optional): bins sorted, contiguous or with gaps, never
 * overlapping, the first from 0, each from_us < to_us. */
static int load_burst(json_t *clock, const char *file, schema_calibration *c, ts_err *e) {
  json_t *arr = json_object_get(clock, "burst");
  if (!arr) return 0;
  if (!json_is_array(arr)) return ts_fail(e, file, "clock.burst", "must be an array");
  size_t n = json_array_size(arr);
  if (n == 0 || n > SCHEMA_BURST_MAX)
    return ts_fail(e, file, "clock.burst", "must have 1 to %d bins (has %zu)", SCHEMA_BURST_MAX, n);
  static const char *const bkeys[] = {"from_us", "to_us", "gemm_speed", NULL};
  size_t i;
  json_t *b;
  json_array_foreach(arr, i, b) {
    char p[64];
    snprintf(p, sizeof p, "clock.burst[%zu]", i);
    schema_burst_bin *x = &c->burst[i];
    if (!json_is_object(b)) return ts_fail(e, file, p, "must be an object");
    if (tsj_only_keys(b, bkeys, file, p, e) || tsj_real(b, "from_us", 0, MAX_US, &x->from_us, file, p, e) ||
        tsj_real(b, "to_us", 0, MAX_US, &x->to_us, file, p, e) ||
        tsj_real(b, "gemm_speed", MIN_SPEED, MAX_SPEED, &x->gemm_speed, file, p, e))
      return -1;
    if (!(x->to_us > x->from_us)) return ts_fail(e, file, p, "to_us (%g) must be above from_us (%g)", x->to_us, x->from_us);
    if (i == 0 && x->from_us != 0) return ts_fail(e, file, p, "the first bin must start at from_us 0 (the burst's start)");
    if (i > 0 && x->from_us < c->burst[i - 1].to_us)
      return ts_fail(e, file, p, "from_us (%g) is before the previous bin's to_us (%g): bins sorted, not overlapping",
                     x->from_us, c->burst[i - 1].to_us);
  }
  c->n_burst = (int)n;
  return 0;
}

static int load_clock(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  json_t *obj = json_object_get(root, "clock");
  if (!obj) return 0; /* optional: no clock model */
  if (!json_is_object(obj)) return ts_fail(e, file, "clock", "must be an object");
  static const char *const keys[] = {"window_us", "points", "burst", NULL};
  double window;
  if (tsj_only_keys(obj, keys, file, "clock", e) || tsj_real(obj, "window_us", 0, MAX_US, &window, file, "clock", e))
    return -1;
  if (!(window > 0)) return ts_fail(e, file, "clock.window_us", "must be > 0");
  json_t *arr = json_object_get(obj, "points");
  if (!arr) return ts_fail(e, file, "clock.points", "missing (an array is required)");
  if (!json_is_array(arr)) return ts_fail(e, file, "clock.points", "must be an array");
  if (json_array_size(arr) == 0) return ts_fail(e, file, "clock.points", "must not be empty");
  static const char *const pkeys[] = {"duty", "period_us", "gemm_speed", "mem_speed", NULL};
  point_keys seen = {0};
  int rc = 0;
  size_t i;
  json_t *pt;
  json_array_foreach(arr, i, pt) {
    char p[64], f[96];
    snprintf(p, sizeof p, "clock.points[%zu]", i);
    double duty, period, gs, ms;
    if (!json_is_object(pt)) rc = ts_fail(e, file, p, "must be an object");
    else if (tsj_only_keys(pt, pkeys, file, p, e) || tsj_real(pt, "duty", 0, 1, &duty, file, p, e) ||
             tsj_real(pt, "period_us", 0, MAX_US, &period, file, p, e) ||
             tsj_real(pt, "gemm_speed", MIN_SPEED, MAX_SPEED, &gs, file, p, e) ||
             tsj_real(pt, "mem_speed", MIN_SPEED, MAX_SPEED, &ms, file, p, e))
      rc = -1;
    else if (!(duty > 0)) rc = ts_fail(e, file, (snprintf(f, sizeof f, "%s.duty", p), f), "must be > 0");
    else if (!(period > 0)) rc = ts_fail(e, file, (snprintf(f, sizeof f, "%s.period_us", p), f), "must be > 0");
    else {
      duty = as_written(duty);
      period = as_written(period);
      if (keys_push(&seen, duty, period, 0) || schema_calibration_add_clock(c, duty, period, gs, ms)) {
        keys_free(&seen);
        return ts_fail_sys(e, "out of memory");
      }
    }
    if (rc) break;
  }
  const point_key *d = first_repeat(&seen);
  if (d) {
    char p[64];
    snprintf(p, sizeof p, "clock.points[%zu]", d->at);
    rc = ts_fail(e, file, p, "duplicate point (duty %g, period_us %g)", d->k[0], d->k[1]);
  }
  keys_free(&seen);
  if (rc) return -1;
  c->clock_window_us = window;
  return load_burst(obj, file, c, e);
}

/* Above this a "host" time is no launch: 10 ms. */
#define MAX_HOST_US 1e4

static int load_host(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  json_t *obj = json_object_get(root, "host");
  if (!obj) return 0; /* optional: no host clock */
  if (!json_is_object(obj)) return ts_fail(e, file, "host", "must be an object");
  static const char *const keys[] = {"launch_us", "gemm_launch_us", "sync", "event_us", "graph_gap_us", NULL};
  double v[2];
  if (tsj_only_keys(obj, keys, file, "host", e)) return -1;
  for (int i = 0; i < 2; i++) {
    if (tsj_real(obj, keys[i], 0, MAX_HOST_US, &v[i], file, "host", e)) return -1;
    if (!(v[i] > 0)) {
      char f[32];
      snprintf(f, sizeof f, "host.%s", keys[i]);
      return ts_fail(e, file, f, "must be > 0 (microseconds)");
    }
  }
  double ev;
  if (tsj_real_opt(obj, "event_us", 0, MAX_HOST_US, 0, &ev, file, "host", e)) return -1;
  if (json_object_get(obj, "event_us") && !(ev > 0)) return ts_fail(e, file, "host.event_us", "must be > 0 (microseconds)");
  double gg;
  if (tsj_real_opt(obj, "graph_gap_us", 0, MAX_HOST_US, 0, &gg, file, "host", e)) return -1;
  if (json_object_get(obj, "graph_gap_us") && !(gg > 0))
    return ts_fail(e, file, "host.graph_gap_us", "must be > 0 (microseconds)");
  json_t *arr = json_object_get(obj, "sync");
  if (!arr) return ts_fail(e, file, "host.sync", "missing (an array is required)");
  if (!json_is_array(arr)) return ts_fail(e, file, "host.sync", "must be an array");
  size_t n = json_array_size(arr);
  if (n == 0 || n > SCHEMA_HOST_SYNC_POINTS)
    return ts_fail(e, file, "host.sync", "must hold 1 to %d points (%zu given)", SCHEMA_HOST_SYNC_POINTS, n);
  static const char *const pkeys[] = {"wait_us", "gap_us", NULL};
  for (size_t i = 0; i < n; i++) {
    char p[32];
    snprintf(p, sizeof p, "host.sync[%zu]", i);
    json_t *pt = json_array_get(arr, i);
    if (!json_is_object(pt)) return ts_fail(e, file, p, "must be an object");
    double w, g;
    if (tsj_only_keys(pt, pkeys, file, p, e) || tsj_real(pt, "wait_us", 0, MAX_HOST_US, &w, file, p, e) ||
        tsj_real(pt, "gap_us", 0, MAX_HOST_US, &g, file, p, e))
      return -1;
    if (!(g > 0)) return ts_fail(e, file, p, "gap_us must be > 0");
    if (i > 0 && !(w > c->host_sync_wait_us[i - 1]))
      return ts_fail(e, file, p, "wait_us must grow from point to point (%g after %g)", w, c->host_sync_wait_us[i - 1]);
    c->host_sync_wait_us[i] = w, c->host_sync_gap_us[i] = g;
  }
  c->n_host_sync = (int)n;
  c->has_host = true;
  c->host_launch_us = v[0], c->host_gemm_launch_us = v[1], c->host_event_us = ev, c->host_graph_gap_us = gg;
  return 0;
}

/* "tp_comm_overlap_sm": a ratio below 0.5 or above 10 is no SM cost (a fault of the run). */
#define TPO_RATIO_MIN 0.5
#define TPO_RATIO_MAX 10.0

static int load_tpo_sm(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  const char *sec = "tp_comm_overlap_sm";
  json_t *obj = json_object_get(root, sec);
  if (!obj) return 0; /* optional: the proportional rule */
  if (!json_is_object(obj)) return ts_fail(e, file, sec, "must be an object");
  static const char *const keys[] = {"measured_on", "sms", "source", "points", "priced", NULL};
  long long sms;
  if (tsj_only_keys(obj, keys, file, sec, e) ||
      tsj_string(obj, "measured_on", c->tpo_sm_measured_on, sizeof c->tpo_sm_measured_on, file, sec, e) ||
      tsj_string(obj, "source", c->tpo_sm_source, sizeof c->tpo_sm_source, file, sec, e) ||
      tsj_int(obj, "sms", 2, 1 << 16, &sms, file, sec, e))
    return -1;
  json_t *priced = json_object_get(obj, "priced");
  if (priced && !json_is_boolean(priced)) return ts_fail(e, file, "tp_comm_overlap_sm.priced", "must be true or false");
  c->tpo_sm_priced = !priced || json_is_true(priced);
  json_t *arr = json_object_get(obj, "points");
  if (!arr) return ts_fail(e, file, "tp_comm_overlap_sm.points", "missing (an array is required)");
  if (!json_is_array(arr)) return ts_fail(e, file, "tp_comm_overlap_sm.points", "must be an array");
  size_t n = json_array_size(arr);
  if (n == 0 || n > SCHEMA_TPO_SM_POINTS)
    return ts_fail(e, file, "tp_comm_overlap_sm.points", "must hold 1 to %d points (%zu given)", SCHEMA_TPO_SM_POINTS, n);
  static const char *const pkeys[] = {"held", "margin", "nomargin", NULL};
  for (size_t i = 0; i < n; i++) {
    char p[48];
    snprintf(p, sizeof p, "tp_comm_overlap_sm.points[%zu]", i);
    json_t *pt = json_array_get(arr, i);
    if (!json_is_object(pt)) return ts_fail(e, file, p, "must be an object");
    long long h;
    double m, nm;
    if (tsj_only_keys(pt, pkeys, file, p, e) || tsj_int(pt, "held", 1, sms - 1, &h, file, p, e) ||
        tsj_real(pt, "margin", TPO_RATIO_MIN, TPO_RATIO_MAX, &m, file, p, e) ||
        tsj_real(pt, "nomargin", TPO_RATIO_MIN, TPO_RATIO_MAX, &nm, file, p, e))
      return -1;
    if (i > 0 && h <= c->tpo_sm_held[i - 1])
      return ts_fail(e, file, p, "held must grow from point to point (%lld after %d)", h, c->tpo_sm_held[i - 1]);
    c->tpo_sm_held[i] = (int)h, c->tpo_sm_margin[i] = m, c->tpo_sm_nomargin[i] = nm;
  }
  c->n_tpo_sm = (int)n, c->tpo_sm_sms = (int)sms;
  return 0;
}

double schema_tpo_sm_ratio(const schema_calibration *c, int sms, int held, bool margin) {
  if (held <= 0) return 1.0;
  const double rule = sms > held ? (double)sms / (sms - held) : 1.0;
  const int n = c ? c->n_tpo_sm : 0;
  if (n == 0 || !c->tpo_sm_priced || sms != c->tpo_sm_sms) return rule;
  const int *h = c->tpo_sm_held;
  const double *r = margin ? c->tpo_sm_margin : c->tpo_sm_nomargin;
  if (held < h[0] || held > h[n - 1]) return rule;
  for (int i = 0; i + 1 < n; i++) {
    if (held == h[i]) return r[i];
    if (held < h[i + 1]) return r[i] + (r[i + 1] - r[i]) * (double)(held - h[i]) / (h[i + 1] - h[i]);
  }
  return r[n - 1];
}

double schema_host_sync_gap(const schema_calibration *c, double wait_us) {
  const int n = c->has_host ? c->n_host_sync : 0;
  if (n == 0) return 0;
  const double *w = c->host_sync_wait_us, *g = c->host_sync_gap_us;
  if (!(wait_us > w[0])) return g[0];
  for (int i = 1; i < n; i++)
    if (wait_us <= w[i]) return g[i - 1] + (g[i] - g[i - 1]) * (wait_us - w[i - 1]) / (w[i] - w[i - 1]);
  return g[n - 1];
}

static int load_root(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  static const char *const keys[] = {"schema", "gpu", "driver", "cuda", "nccl", "transport", "measured_at",
                                     "derived", "notes", "gemm", "gemm_infer", "gemm_wgrad", "gemm_fp8", "attention_shapes", "attention_backends", "kernels", "collectives", "fits",
                                     "clock", "host", "tp_comm_overlap_sm", "framework_host", "attention_fp8", "power", "op_power", NULL};
  if (tsj_schema(root, SCHEMA_CALIBRATION_VERSION, file, e) || tsj_only_keys(root, keys, file, "", e) ||
      tsj_string(root, "gpu", c->gpu, sizeof c->gpu, file, "", e) ||
      tsj_string(root, "driver", c->driver, sizeof c->driver, file, "", e) ||
      tsj_string(root, "cuda", c->cuda, sizeof c->cuda, file, "", e) ||
      tsj_string(root, "nccl", c->nccl, sizeof c->nccl, file, "", e) ||
      tsj_string(root, "transport", c->transport, sizeof c->transport, file, "", e) ||
      tsj_string(root, "measured_at", c->measured_at, sizeof c->measured_at, file, "", e) ||
      tsj_bool_opt(root, "derived", false, &c->derived, file, "", e) ||
      tsj_string_opt(root, "notes", "", c->notes, sizeof c->notes, file, "", e))
    return -1;
  if (load_gemm(root, file, "gemm", schema_calibration_add_gemm, c, e) ||
      load_gemm(root, file, "gemm_infer", schema_calibration_add_gemm_infer, c, e) ||
      load_gemm(root, file, "gemm_wgrad", schema_calibration_add_gemm_wgrad, c, e) ||
      load_gemm(root, file, "gemm_fp8", schema_calibration_add_gemm_fp8, c, e) ||
      schema_attn_load(root, file, c, e) || load_kernels(root, file, c, e) || load_collectives(root, file, c, e) ||
      load_fits(root, file, c, e) || load_clock(root, file, c, e) || load_host(root, file, c, e) ||
      load_tpo_sm(root, file, c, e) || schema_framework_host_load(root, file, c, e) ||
      schema_attn_fp8_load(root, file, c, e) || schema_power_load(root, file, c, e) ||
      schema_op_power_load(root, file, c, e))
    return -1;
  /* a clock section alone is allowed: `tacorun calibrate --only clock` writes one (and --only gemm_fp8 a
   * gemm_fp8 list alone) */
  int n_other = 0;
  for (int b = SCHEMA_ATTN_EXECUTOR + 1; b < SCHEMA_ATTN_NBACKENDS; b++) n_other += c->attn_by[b].n;
  if (!c->n_gemm && !c->n_gemm_fp8 && !c->n_attn && !n_other && !c->n_kernels && !c->n_colls && !c->n_clock &&
      !c->has_host)
    return ts_fail(e, file, NULL,
                   "no tables: at least one of gemm, gemm_fp8, attention_shapes, attention_backends, kernels, collectives, "
                   "clock, host is required");
  schema_calibration_sort(c);
  return 0;
}

static int load_json(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  memset(c, 0, sizeof *c);
  snprintf(c->path, sizeof c->path, "%s", file);
  int rc = load_root(root, file, c, e);
  json_decref(root);
  if (rc) schema_calibration_free(c);
  return rc;
}

int schema_calibration_load(const char *path, schema_calibration *c, ts_err *e) {
  memset(c, 0, sizeof *c);
  json_t *root = tsj_load_file(path, e);
  if (!root) return -1;
  return load_json(root, path, c, e);
}

int schema_calibration_from_json_text(const char *text, size_t len, const char *what, schema_calibration *c,
                                      ts_err *e) {
  memset(c, 0, sizeof *c);
  json_t *root = tsj_load_string(text, len, what, e);
  if (!root) return -1;
  return load_json(root, what, c, e);
}

/* ---- writer ---- */

static json_t *num(double v) { return tsj_number(v); }

static json_t *gemm_json(const schema_gemm_point *g, int n) {
  json_t *arr = json_array();
  for (int i = 0; i < n; i++)
    json_array_append_new(arr, json_pack("{s:I,s:I,s:I,s:o}", "m", (json_int_t)g[i].m, "n", (json_int_t)g[i].n, "k",
                                         (json_int_t)g[i].k, "us", num(g[i].us)));
  return arr;
}

/* "kernels": {name: [{flops|bytes, group?, us}, ...]} */
static json_t *kernels_json(const schema_calibration *c) {
  json_t *obj = json_object();
  for (int i = 0; i < c->n_kernels; i++) {
    const schema_kernel_table *t = &c->kernels[i];
    json_t *arr = json_array();
    for (int j = 0; j < t->n; j++) {
      json_t *pt = json_object();
      json_object_set_new(pt, t->by_flops ? "flops" : "bytes", num(t->pts[j].x));
      if (t->pts[j].group) json_object_set_new(pt, "group", json_integer(t->pts[j].group));
      json_object_set_new(pt, "us", num(t->pts[j].us));
      json_array_append_new(arr, pt);
    }
    json_object_set_new(obj, t->name, arr);
  }
  return obj;
}

/* "collectives": {name: {nranks: [{bytes, us}, ...]}} */
static json_t *colls_json(const schema_calibration *c) {
  json_t *obj = json_object();
  for (int i = 0; i < c->n_colls; i++) {
    const schema_coll_table *t = &c->colls[i];
    json_t *per_n = json_object_get(obj, t->name);
    if (!per_n) {
      per_n = json_object();
      json_object_set_new(obj, t->name, per_n);
    }
    json_t *arr = json_array();
    for (int j = 0; j < t->n; j++)
      json_array_append_new(arr, json_pack("{s:o,s:o}", "bytes", num(t->pts[j].bytes), "us", num(t->pts[j].us)));
    char key[16];
    snprintf(key, sizeof key, "%d", t->nranks);
    json_object_set_new(per_n, key, arr);
  }
  return obj;
}

/* "fits": {name: {latency_us, gbps}} */
static json_t *fits_json(const schema_calibration *c) {
  json_t *obj = json_object();
  for (int i = 0; i < c->n_fits; i++)
    json_object_set_new(obj, c->fits[i].name,
                        json_pack("{s:o,s:o}", "latency_us", num(c->fits[i].latency_us), "gbps", num(c->fits[i].gbps)));
  return obj;
}

/* "clock": {window_us, points: [{duty, period_us, gemm_speed, mem_speed}], burst?: [{from_us, to_us,
 * gemm_speed}]} */
static json_t *clock_json(const schema_calibration *c) {
  json_t *arr = json_array();
  for (int i = 0; i < c->n_clock; i++) {
    const schema_clock_point *q = &c->clock[i];
    json_array_append_new(arr, json_pack("{s:o,s:o,s:o,s:o}", "duty", num(q->duty), "period_us", num(q->period_us),
                                         "gemm_speed", num(q->gemm_speed), "mem_speed", num(q->mem_speed)));
  }
  json_t *clock = json_pack("{s:o,s:o}", "window_us", num(c->clock_window_us), "points", arr);
  if (c->n_burst) {
    json_t *bins = json_array();
    for (int i = 0; i < c->n_burst; i++)
      json_array_append_new(bins, json_pack("{s:o,s:o,s:o}", "from_us", num(c->burst[i].from_us), "to_us",
                                            num(c->burst[i].to_us), "gemm_speed", num(c->burst[i].gemm_speed)));
    json_object_set_new(clock, "burst", bins);
  }
  return clock;
}

/* "host": {launch_us, gemm_launch_us, event_us?, graph_gap_us?, sync: [{wait_us, gap_us}]} */
static json_t *host_json(const schema_calibration *c) {
  json_t *arr = json_array();
  for (int i = 0; i < c->n_host_sync; i++)
    json_array_append_new(arr, json_pack("{s:o,s:o}", "wait_us", num(c->host_sync_wait_us[i]), "gap_us",
                                         num(c->host_sync_gap_us[i])));
  json_t *host = json_pack("{s:o,s:o}", "launch_us", num(c->host_launch_us), "gemm_launch_us",
                           num(c->host_gemm_launch_us));
  if (c->host_event_us > 0) json_object_set_new(host, "event_us", num(c->host_event_us));
  if (c->host_graph_gap_us > 0) json_object_set_new(host, "graph_gap_us", num(c->host_graph_gap_us));
  json_object_set_new(host, "sync", arr);
  return host;
}

/* "tp_comm_overlap_sm": {measured_on, sms, source, priced, points: [{held, margin, nomargin}]} */
static json_t *tpo_sm_json(const schema_calibration *c) {
  json_t *arr = json_array();
  for (int i = 0; i < c->n_tpo_sm; i++)
    json_array_append_new(arr, json_pack("{s:i,s:o,s:o}", "held", c->tpo_sm_held[i], "margin",
                                         num(c->tpo_sm_margin[i]), "nomargin", num(c->tpo_sm_nomargin[i])));
  return json_pack("{s:s,s:i,s:s,s:b,s:o}", "measured_on", c->tpo_sm_measured_on, "sms", c->tpo_sm_sms,
                   "source", c->tpo_sm_source, "priced", c->tpo_sm_priced, "points", arr);
}

/* The whole file, its sections in the order the loader lists them; a section without points is
 * left out. */
static json_t *calibration_json(const schema_calibration *c) {
  json_t *root = json_object();
  json_object_set_new(root, "schema", json_integer(SCHEMA_CALIBRATION_VERSION));
  json_object_set_new(root, "gpu", json_string(c->gpu));
  json_object_set_new(root, "driver", json_string(c->driver));
  json_object_set_new(root, "cuda", json_string(c->cuda));
  json_object_set_new(root, "nccl", json_string(c->nccl));
  json_object_set_new(root, "transport", json_string(c->transport));
  json_object_set_new(root, "measured_at", json_string(c->measured_at));
  json_object_set_new(root, "derived", json_boolean(c->derived));
  if (c->notes[0]) json_object_set_new(root, "notes", json_string(c->notes));
  if (c->n_gemm) json_object_set_new(root, "gemm", gemm_json(c->gemm, c->n_gemm));
  if (c->n_gemm_infer) json_object_set_new(root, "gemm_infer", gemm_json(c->gemm_infer, c->n_gemm_infer));
  if (c->n_gemm_wgrad) json_object_set_new(root, "gemm_wgrad", gemm_json(c->gemm_wgrad, c->n_gemm_wgrad));
  if (c->n_gemm_fp8) json_object_set_new(root, "gemm_fp8", gemm_json(c->gemm_fp8, c->n_gemm_fp8));
  if (c->n_attn) json_object_set_new(root, "attention_shapes", schema_attn_json(c));
  json_t *by = schema_attn_backends_json(c);
  if (by) json_object_set_new(root, "attention_backends", by);
  json_t *fp8 = schema_attn_fp8_json(c);
  if (fp8) json_object_set_new(root, "attention_fp8", fp8);
  if (c->n_kernels) json_object_set_new(root, "kernels", kernels_json(c));
  if (c->n_colls) json_object_set_new(root, "collectives", colls_json(c));
  if (c->n_fits) json_object_set_new(root, "fits", fits_json(c));
  if (c->n_clock) json_object_set_new(root, "clock", clock_json(c));
  json_t *power = schema_power_json(c);
  if (power) json_object_set_new(root, "power", power);
  json_t *op_power = schema_op_power_json(c);
  if (op_power) json_object_set_new(root, "op_power", op_power);
  if (c->has_host) json_object_set_new(root, "host", host_json(c));
  if (c->n_tpo_sm) json_object_set_new(root, "tp_comm_overlap_sm", tpo_sm_json(c));
  json_t *fw = schema_framework_host_json(c);
  if (fw) json_object_set_new(root, "framework_host", fw);
  return root;
}

int schema_calibration_write(const schema_calibration *c_in, FILE *out, ts_err *e) {
  schema_calibration *c = (schema_calibration *)c_in; /* sorted in place: order is not state */
  schema_calibration_sort(c);
  if (c->n_clock && !(c->clock_window_us > 0))
    return ts_fail_sys(e, "calibration has clock points but no clock window (clock_window_us must be > 0)");
  json_t *root = calibration_json(c);
  /* one table point per line (common/ts_json.h) */
  int rc = tsj_dump_data(root, out, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(WRITE_DIGITS));
  json_decref(root);
  if (rc) return ts_fail_sys(e, "cannot write calibration");
  return 0;
}

int schema_calibration_save(const schema_calibration *c, const char *path, ts_err *e) {
  FILE *f = fopen(path, "w");
  if (!f) return ts_fail(e, path, NULL, "cannot open for writing (%s)", strerror(errno));
  int rc = schema_calibration_write(c, f, e);
  if (fclose(f) && !rc) rc = ts_fail_sys(e, "%s: cannot write (%s)", path, strerror(errno));
  return rc;
}

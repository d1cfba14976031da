/* calibration_attn.c — the calibration's "attention_shapes" section (the
 * executor's attention) and "attention_backends" section (other
 * implementations', one array per backend, the same points): attention timed
 * per shape (head dimension, sequence, batch, heads / key-value heads,
 * causal; forward and backward), their strict loader, writer and the one
 * nearest-shape lookup both use (calibration.h, schema/README.md). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "ts_json.h"

#define ATTN_MAX_US 1e9 /* as the other tables: no single op takes 1000 s */

static const char *const backend_names[SCHEMA_ATTN_NBACKENDS] = {"executor", "fused", "flash", "fused_dropout",
                                                                  "flash_dropout"};

const char *schema_attn_backend_name(schema_attn_backend b) {
  return b >= 0 && b < SCHEMA_ATTN_NBACKENDS ? backend_names[b] : "?";
}

int schema_prefill_attention_parse(const char *name, int *head_dim, long long *seq) {
  static const char prefix[] = "attention_prefill.";
  if (strncmp(name, prefix, sizeof prefix - 1)) return -1;
  const char *s = name + sizeof prefix - 1;
  long long d, n;
  if (!(s = schema_name_field(s, 'd', &d, '.')) || !schema_name_field(s, 's', &n, '\0')) return -1;
  *head_dim = (int)d, *seq = n;
  return 0;
}

int schema_attn_backend_parse(const char *name, schema_attn_backend *b) {
  for (int i = 0; i < SCHEMA_ATTN_NBACKENDS; i++)
    if (strcmp(name, backend_names[i]) == 0) {
      *b = (schema_attn_backend)i;
      return 0;
    }
  return -1;
}

/* The points of one backend: the executor's are "attention_shapes" (c->attn),
 * the others' "attention_backends"."<name>" (c->attn_by[b]). */
static void points_of(const schema_calibration *c, schema_attn_backend b, int **n, schema_attn_point ***pts) {
  schema_calibration *m = (schema_calibration *)c;
  if (b == SCHEMA_ATTN_EXECUTOR) *n = &m->n_attn, *pts = &m->attn;
  else *n = &m->attn_by[b].n, *pts = &m->attn_by[b].pts;
}

const schema_attn_point *schema_attn_points(const schema_calibration *c, schema_attn_backend b, int *n) {
  int *np;
  schema_attn_point **pts;
  points_of(c, b, &np, &pts);
  *n = *np;
  return *pts;
}

int schema_calibration_add_attn_backend(schema_calibration *c, schema_attn_backend b, const schema_attn_shape *s,
                                        double fwd_us, double bwd_us) {
  int *np;
  schema_attn_point **pts;
  points_of(c, b, &np, &pts);
  int n = *np;
  if ((n & (n - 1)) == 0) { /* capacity doubles at powers of two (as calibration_io.c's tables) */
    schema_attn_point *p = realloc(*pts, (size_t)(n ? 2 * n : 4) * sizeof *p);
    if (!p) return -1;
    *pts = p;
  }
  (*pts)[(*np)++] = (schema_attn_point){*s, fwd_us, bwd_us};
  return 0;
}

int schema_calibration_add_attn(schema_calibration *c, const schema_attn_shape *s, double fwd_us, double bwd_us) {
  return schema_calibration_add_attn_backend(c, SCHEMA_ATTN_EXECUTOR, s, fwd_us, bwd_us);
}

static int cmp_shape(const schema_attn_shape *a, const schema_attn_shape *b) {
  const int x[6] = {a->causal, a->head_dim, a->seq, a->heads, a->kv_heads, a->batch};
  const int y[6] = {b->causal, b->head_dim, b->seq, b->heads, b->kv_heads, b->batch};
  for (int i = 0; i < 6; i++)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}
static int cmp_point(const void *a, const void *b) {
  return cmp_shape(&((const schema_attn_point *)a)->s, &((const schema_attn_point *)b)->s);
}

void schema_attn_sort(schema_calibration *c) {
  for (int b = 0; b < SCHEMA_ATTN_NBACKENDS; b++) {
    int *n;
    schema_attn_point **pts;
    points_of(c, (schema_attn_backend)b, &n, &pts);
    if (*n > 1) qsort(*pts, (size_t)*n, sizeof **pts, cmp_point);
  }
}

void schema_attn_free(schema_calibration *c) {
  for (int b = 0; b < SCHEMA_ATTN_NBACKENDS; b++) {
    int *n;
    schema_attn_point **pts;
    points_of(c, (schema_attn_backend)b, &n, &pts);
    free(*pts);
    *pts = NULL, *n = 0;
  }
}

/* ---- loader ---- */

static int load_point(json_t *pt, const char *file, const char *path, schema_attn_point *out, ts_err *e) {
  static const char *const keys[] = {"head_dim", "seq", "batch", "heads", "kv_heads", "causal", "fwd_us", "bwd_us",
                                     NULL};
  if (!json_is_object(pt)) return ts_fail(e, file, path, "must be an object");
  if (tsj_only_keys(pt, keys, file, path, e)) return -1;
  long long d, s, b, h, kv;
  schema_attn_point p;
  if (tsj_int(pt, "head_dim", 1, 1024, &d, file, path, e) || tsj_int(pt, "seq", 1, 1LL << 24, &s, file, path, e) ||
      tsj_int(pt, "batch", 1, 1LL << 20, &b, file, path, e) || tsj_int(pt, "heads", 1, 4096, &h, file, path, e) ||
      tsj_int(pt, "kv_heads", 1, 4096, &kv, file, path, e) || tsj_bool(pt, "causal", &p.s.causal, file, path, e) ||
      tsj_real(pt, "fwd_us", 1e-3, ATTN_MAX_US, &p.fwd_us, file, path, e) ||
      tsj_real(pt, "bwd_us", 1e-3, ATTN_MAX_US, &p.bwd_us, file, path, e))
    return -1;
  if (kv > h || h % kv) {
    char f[160];
    snprintf(f, sizeof f, "%s.kv_heads", path);
    return ts_fail(e, file, f, "%lld must divide heads (%lld)", kv, h);
  }
  p.s.head_dim = (int)d, p.s.seq = (int)s, p.s.batch = (int)b, p.s.heads = (int)h, p.s.kv_heads = (int)kv;
  *out = p;
  return 0;
}

typedef struct {
  schema_attn_shape s;
  int at; /* index in the file's array */
} at_shape;
static int cmp_at_shape(const void *a, const void *b) {
  const at_shape *x = a, *y = b;
  int r = cmp_shape(&x->s, &y->s);
  return r ? r : (x->at > y->at) - (x->at < y->at);
}

/* One backend's array (section: "attention_shapes" or "attention_backends.<name>"). */
static int load_array(json_t *arr, const char *file, const char *section, schema_calibration *c, schema_attn_backend be,
                      ts_err *e) {
  if (!json_is_array(arr)) return ts_fail(e, file, section, "must be an array");
  size_t i;
  json_t *pt;
  json_array_foreach(arr, i, pt) {
    char path[96];
    snprintf(path, sizeof path, "%s[%zu]", section, i);
    schema_attn_point p = {0}; /* filled by load_point; zeroed so no path reads it unset */
    if (load_point(pt, file, path, &p, e)) return -1;
    if (schema_calibration_add_attn_backend(c, be, &p.s, p.fwd_us, p.bwd_us)) return ts_fail_sys(e, "out of memory");
  }
  /* repeats: the points sorted by (shape, place in the file), equal neighbours */
  int n, dup = -1;
  const schema_attn_point *pts = schema_attn_points(c, be, &n);
  if (n < 2) return 0;
  at_shape *v = malloc((size_t)n * sizeof *v);
  if (!v) return ts_fail_sys(e, "out of memory");
  for (int k = 0; k < n; k++) v[k] = (at_shape){pts[k].s, k};
  qsort(v, (size_t)n, sizeof *v, cmp_at_shape);
  for (int k = 1; k < n; k++)
    if (cmp_shape(&v[k - 1].s, &v[k].s) == 0 && (dup < 0 || v[k].at < dup)) dup = v[k].at;
  free(v);
  if (dup >= 0) {
    char path[96];
    const schema_attn_shape *s = &pts[dup].s;
    snprintf(path, sizeof path, "%s[%d]", section, dup);
    return ts_fail(e, file, path, "duplicate shape (head_dim %d, seq %d, batch %d, heads %d, kv_heads %d, %s)",
                   s->head_dim, s->seq, s->batch, s->heads, s->kv_heads, s->causal ? "causal" : "full");
  }
  return 0;
}

int schema_attn_load(json_t *root, const char *file, schema_calibration *c, ts_err *e) {
  json_t *arr = json_object_get(root, "attention_shapes");
  if (arr && load_array(arr, file, "attention_shapes", c, SCHEMA_ATTN_EXECUTOR, e)) return -1; /* optional */
  json_t *by = json_object_get(root, "attention_backends");
  if (!by) return 0; /* optional */
  if (!json_is_object(by)) return ts_fail(e, file, "attention_backends", "must be an object");
  const char *key;
  json_t *v;
  json_object_foreach(by, key, v) {
    char section[96];
    snprintf(section, sizeof section, "attention_backends.%.60s", key);
    schema_attn_backend be;
    if (schema_attn_backend_parse(key, &be) || be == SCHEMA_ATTN_EXECUTOR)
      return ts_fail(e, file, section, "unknown backend (fused, flash, fused_dropout or flash_dropout; the "
                                       "executor's points are \"attention_shapes\")");
    if (load_array(v, file, section, c, be, e)) return -1;
  }
  return 0;
}

/* ---- writer ---- */

static json_t *num(double v) { return tsj_number(v); }

static json_t *points_json(const schema_attn_point *pts, int n) {
  json_t *arr = json_array();
  for (int i = 0; i < n; i++) {
    const schema_attn_point *p = &pts[i];
    json_array_append_new(arr, json_pack("{s:i,s:i,s:i,s:i,s:i,s:b,s:o,s:o}", "head_dim", p->s.head_dim, "seq",
                                         p->s.seq, "batch", p->s.batch, "heads", p->s.heads, "kv_heads",
                                         p->s.kv_heads, "causal", p->s.causal, "fwd_us", num(p->fwd_us), "bwd_us",
                                         num(p->bwd_us)));
  }
  return arr;
}

json_t *schema_attn_json(const schema_calibration *c) {
  return points_json(c->attn, c->n_attn);
}

json_t *schema_attn_backends_json(const schema_calibration *c) {
  json_t *obj = NULL;
  for (int b = SCHEMA_ATTN_EXECUTOR + 1; b < SCHEMA_ATTN_NBACKENDS; b++) {
    if (!c->attn_by[b].n) continue;
    if (!obj) obj = json_object();
    json_object_set_new(obj, backend_names[b], points_json(c->attn_by[b].pts, c->attn_by[b].n));
  }
  return obj;
}

/* ---- lookup ---- */

/* FLOPs the kernel does: Q.K^T and P.V over the scores it computes (half
 * the square when causal), 2.5x that backward (dV, dP, dQ, dK and the
 * recomputed Q.K^T). */
double schema_attn_flops(const schema_attn_shape *q, bool bwd) {
  double f = 4.0 * q->batch * (double)q->heads * (double)q->seq * (double)q->seq * q->head_dim;
  if (q->causal) f *= 0.5;
  return bwd ? 2.5 * f : f;
}

/* Bytes it must move at least: Q, K, V read and the output written forward
 * (K, V kv_heads wide); backward Q, K, V, O, dO read and dQ, dK, dV written. */
double schema_attn_bytes(const schema_attn_shape *q, bool bwd) {
  double tok = (double)q->batch * q->seq * q->head_dim * 2.0; /* bf16, one head */
  return bwd ? tok * (4.0 * q->heads + 4.0 * q->kv_heads) : tok * (2.0 * q->heads + 2.0 * q->kv_heads);
}

double schema_attn_roof_us(const schema_roofline *r, const schema_attn_shape *q, bool bwd) {
  double tf = schema_attn_flops(q, bwd) / r->peak_flops, tb = schema_attn_bytes(q, bwd) / r->hbm_bytes_per_s;
  return (tf > tb ? tf : tb) * 1e6;
}

static double coords_d2(const schema_attn_shape *a, const schema_attn_shape *b) {
  const double x[4] = {log((double)a->head_dim), log((double)a->seq), log((double)a->batch * a->heads),
                       log((double)a->heads / a->kv_heads)};
  const double y[4] = {log((double)b->head_dim), log((double)b->seq), log((double)b->batch * b->heads),
                       log((double)b->heads / b->kv_heads)};
  double d2 = 0;
  for (int i = 0; i < 4; i++) d2 += (x[i] - y[i]) * (x[i] - y[i]);
  return d2;
}

int schema_lookup_attn_backend(schema_lookup *l, schema_attn_backend be, const schema_attn_shape *q, bool bwd,
                               double *us) {
  int np;
  const schema_attn_point *pts = schema_attn_points(l->cal, be, &np);
  int idx[SCHEMA_ATTN_NEIGHBOURS];
  double d2[SCHEMA_ATTN_NEIGHBOURS];
  int n = 0;
  for (int i = 0; i < np; i++) {
    const schema_attn_point *p = &pts[i];
    if (p->s.causal != q->causal) continue;
    if (cmp_shape(&p->s, q) == 0) {
      *us = bwd ? p->bwd_us : p->fwd_us;
      return 0;
    }
    double d = coords_d2(&p->s, q);
    if (n == SCHEMA_ATTN_NEIGHBOURS && !(d < d2[n - 1])) continue; /* ties: the earlier (sorted) point stays */
    int j = n < SCHEMA_ATTN_NEIGHBOURS ? n++ : n - 1;
    while (j > 0 && d2[j - 1] > d) idx[j] = idx[j - 1], d2[j] = d2[j - 1], j--;
    idx[j] = i, d2[j] = d;
  }
  if (n == 0) return 1;
  const double launch = l->roof.launch_us;
  double wsum = 0, esum = 0;
  bool zero = d2[0] == 0; /* the same work split differently: those points alone, equally weighted */
  for (int j = 0; j < n && (!zero || d2[j] == 0); j++) {
    const schema_attn_point *p = &pts[idx[j]];
    double t = bwd ? p->bwd_us : p->fwd_us, busy = t - launch, w = zero ? 1.0 : 1.0 / d2[j];
    wsum += w;
    esum += busy > 0 ? w * schema_attn_roof_us(&l->roof, &p->s, bwd) / busy : 0;
  }
  *us = launch + (esum > 0 ? schema_attn_roof_us(&l->roof, q, bwd) * wsum / esum : 0);
  return 0;
}

int schema_lookup_attn(schema_lookup *l, const schema_attn_shape *q, bool bwd, double *us) {
  return schema_lookup_attn_backend(l, SCHEMA_ATTN_EXECUTOR, q, bwd, us);
}

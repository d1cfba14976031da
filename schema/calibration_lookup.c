/* calibration_lookup.c — time of an op from a calibration: log-space
 * interpolation inside the measured range, an anchored roofline outside;
 * GEMMs of shapes with no measured neighbour sharing two dimensions by the
 * efficiency of the nearest measured shapes (k-d tree; schema/README.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "calibration.h"
#include "ts_coll.h"

void schema_lookup_init(schema_lookup *l, const schema_calibration *cal, const schema_roofline *roof, FILE *warn) {
  memset(l, 0, sizeof *l);
  l->cal = cal;
  l->roof = *roof;
  l->warn = warn;
}

/* Warns once per key. */
static void warn_once(schema_lookup *l, const char *key, const char *fmt, double a, double b) {
  for (int i = 0; i < l->warned_n; i++)
    if (strcmp(l->warned[i], key) == 0) return;
  if (l->warned_n < (int)(sizeof l->warned / sizeof l->warned[0]))
    snprintf(l->warned[l->warned_n++], sizeof l->warned[0], "%s", key);
  if (!l->warn) return;
  fprintf(l->warn, "tacosim: warning: %s: %s: ", l->cal->path[0] ? l->cal->path : "calibration", key);
  fprintf(l->warn, fmt, a, b);
  fputc('\n', l->warn);
}

static const char *cal_name(const schema_lookup *l) { return l->cal->path[0] ? l->cal->path : "calibration"; }

/* Interpolates log(t) against log(x) between (x0,t0) and (x1,t1). */
static double log_interp(double x0, double t0, double x1, double t1, double x) {
  if (x1 <= x0) return t0;
  double f = (log(x) - log(x0)) / (log(x1) - log(x0));
  return exp(log(t0) + f * (log(t1) - log(t0)));
}

/* A 1-D lookup over n points sorted by x; roof(x) is the roofline time (us) used,
 * scaled to the nearest measured point, outside [x_0, x_{n-1}]. */
typedef double (*roof_fn)(const schema_roofline *r, double x, const void *ctx);

static double lookup_1d(schema_lookup *l, const char *key, const double *xs, const double *ts, int n, double x,
                        roof_fn roof, const void *ctx) {
  if (x <= 0) return 0;
  if (x < xs[0] || x > xs[n - 1] || n == 1) {
    int edge = x < xs[0] ? 0 : n - 1;
    if (x != xs[edge])
      warn_once(l, key, "%g outside the measured range, roofline anchored at the nearest point (%g)", x, xs[edge]);
    double r_edge = roof(&l->roof, xs[edge], ctx);
    return r_edge > 0 ? ts[edge] * roof(&l->roof, x, ctx) / r_edge : ts[edge];
  }
  int lo = 0, hi = n - 1; /* binary search: xs[lo] <= x <= xs[hi] */
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    if (xs[mid] <= x)
      lo = mid;
    else
      hi = mid;
  }
  return log_interp(xs[lo], ts[lo], xs[hi], ts[hi], x);
}

static double roof_flops(const schema_roofline *r, double flops, const void *ctx) {
  (void)ctx;
  return r->launch_us + flops / r->peak_flops * 1e6;
}
static double roof_bytes(const schema_roofline *r, double bytes, const void *ctx) {
  (void)ctx;
  return r->launch_us + bytes / r->hbm_bytes_per_s * 1e6;
}

typedef struct {
  const char *name;
  int nranks;
} coll_ctx;
static double roof_coll(const schema_roofline *r, double bytes, const void *ctx) {
  const coll_ctx *c = ctx;
  ts_coll coll;
  double steps = ts_coll_of_key(c->name, &coll) ? 0.0 : ts_coll_steps(coll, c->nranks);
  return steps * r->coll_latency_us + bytes * schema_busbw_factor(c->name, c->nranks) / r->link_bytes_per_s * 1e6;
}

/* Scratch arrays for the 1-D lookups. */
typedef struct {
  double *x, *t;
  int n;
} series;
static int series_alloc(series *s, int n) {
  s->x = malloc(sizeof(double) * (size_t)(n ? n : 1));
  s->t = malloc(sizeof(double) * (size_t)(n ? n : 1));
  s->n = 0;
  return s->x && s->t ? 0 : -1;
}
static void series_free(series *s) {
  free(s->x);
  free(s->t);
}

/* GEMM along one dimension (0: m, 1: n, 2: k) with the other two fixed. */
typedef struct {
  int dim;
  long long other[2]; /* the fixed dimensions, in (m, n, k) order without dim */
} gemm_family;
/* The roofline of a GEMM is its FLOPs at the peak or its bf16 operands and
 * result (2(mk + kn + mn) bytes) at the HBM bandwidth, whichever is longer: a
 * decode GEMM of m = 1 reads its whole weight matrix. */
static double roof_gemm_dim(const schema_roofline *r, double x, const void *ctx) {
  const gemm_family *f = ctx;
  double d[3];
  d[f->dim] = x;
  d[(f->dim + 1) % 3] = (double)f->other[0]; /* other[] holds q[(dim + 1) % 3], q[(dim + 2) % 3] */
  d[(f->dim + 2) % 3] = (double)f->other[1];
  double m = d[0], n = d[1], k = d[2];
  double tf = 2.0 * m * n * k / r->peak_flops, tb = 2.0 * (m * k + k * n + m * n) / r->hbm_bytes_per_s;
  return r->launch_us + (tf > tb ? tf : tb) * 1e6;
}

/* The family of points sharing the two dimensions other than `dim` with q:
 * its size, and the nearest measured neighbours of q[dim] below and above
 * (index -1 when there is none). */
typedef struct {
  int n, lo, hi;
} gemm_bracket;
static long long gemm_dim(const schema_gemm_point *g, int dim) { return dim == 0 ? g->m : dim == 1 ? g->n : g->k; }
static gemm_bracket gemm_bracket_of(const schema_calibration *c, const long long q[3], int dim) {
  gemm_bracket b = {0, -1, -1};
  for (int i = 0; i < c->n_gemm; i++) {
    const long long p[3] = {c->gemm[i].m, c->gemm[i].n, c->gemm[i].k};
    if (p[(dim + 1) % 3] != q[(dim + 1) % 3] || p[(dim + 2) % 3] != q[(dim + 2) % 3]) continue;
    b.n++;
    const long long x = p[dim];
    if (x < q[dim] && (b.lo < 0 || x > gemm_dim(&c->gemm[b.lo], dim))) b.lo = i;
    if (x > q[dim] && (b.hi < 0 || x < gemm_dim(&c->gemm[b.hi], dim))) b.hi = i;
  }
  return b;
}

/* ---- the nearest measured shapes ----
 * Distance between shapes: Euclidean in (ln m, ln n, ln k). The index keeps
 * the points ordered by ln m, so a search walks outwards from the query's m
 * and stops once ln m alone is farther than the K-th nearest found. Ties in
 * distance go to the lower point index, so the index and the plain scan pick
 * the same neighbours. */
/* ---- the nearest measured shapes ----
 * Distance between shapes: Euclidean in (ln m, ln n, ln k). The index is a
 * k-d tree laid out in one array: a node owns positions [lo, hi); its split
 * point sits at mid = (lo + hi) / 2, positions before it are no larger along
 * the node's axis, positions after it no smaller; ranges of up to KD_LEAF
 * points are scanned. Ties in distance go to the lower point index, so the
 * tree and the plain scan (used when there is no index for the points) pick
 * the same neighbours. Build O(n log^2 n), a search about O(log n). */
#define KD_LEAF 8

struct schema_gemm_index {
  const schema_gemm_point *src; /* the list it was built over */
  int n;
  int *order;          /* point index at each position */
  double (*ln)[3];     /* ln m, ln n, ln k of order[i] */
  unsigned char *axis; /* split axis of the node whose split point is at i */
};

void schema_gemm_index_free(schema_calibration *c) {
  if (!c->gemm_index) return;
  free(c->gemm_index->order);
  free(c->gemm_index->ln);
  free(c->gemm_index->axis);
  free(c->gemm_index);
  c->gemm_index = NULL;
}

static void kd_swap(struct schema_gemm_index *x, int i, int j) {
  int o = x->order[i];
  x->order[i] = x->order[j], x->order[j] = o;
  for (int d = 0; d < 3; d++) {
    double t = x->ln[i][d];
    x->ln[i][d] = x->ln[j][d], x->ln[j][d] = t;
  }
}

/* Puts the nth smallest along axis a of [lo, hi) at nth, smaller ones before
 * it, larger after (quickselect, three-way partition around a median of three). */
static void kd_select(struct schema_gemm_index *x, int lo, int hi, int nth, int a) {
  while (hi - lo > 1) {
    double p0 = x->ln[lo][a], p1 = x->ln[(lo + hi) / 2][a], p2 = x->ln[hi - 1][a];
    double p = p0 < p1 ? (p1 < p2 ? p1 : (p0 < p2 ? p2 : p0)) : (p0 < p2 ? p0 : (p1 < p2 ? p2 : p1));
    int lt = lo, i = lo, gt = hi;
    while (i < gt) {
      if (x->ln[i][a] < p)
        kd_swap(x, lt++, i++);
      else if (x->ln[i][a] > p)
        kd_swap(x, i, --gt);
      else
        i++;
    }
    if (nth < lt)
      hi = lt;
    else if (nth >= gt)
      lo = gt;
    else
      return;
  }
}

/* Splits along the axis of widest spread. */
static void kd_build(struct schema_gemm_index *x, int lo, int hi) {
  if (hi - lo <= KD_LEAF) return;
  double mn[3] = {INFINITY, INFINITY, INFINITY}, mx[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (int i = lo; i < hi; i++)
    for (int d = 0; d < 3; d++) {
      if (x->ln[i][d] < mn[d]) mn[d] = x->ln[i][d];
      if (x->ln[i][d] > mx[d]) mx[d] = x->ln[i][d];
    }
  int a = 0;
  for (int d = 1; d < 3; d++)
    if (mx[d] - mn[d] > mx[a] - mn[a]) a = d;
  int mid = (lo + hi) / 2;
  kd_select(x, lo, hi, mid, a);
  x->axis[mid] = (unsigned char)a;
  kd_build(x, lo, mid);
  kd_build(x, mid + 1, hi);
}

int schema_gemm_index_build(schema_calibration *c) {
  schema_gemm_index_free(c);
  if (c->n_gemm <= 0) return 0;
  struct schema_gemm_index *x = calloc(1, sizeof *x);
  if (!x) return -1;
  x->order = malloc((size_t)c->n_gemm * sizeof *x->order);
  x->ln = malloc((size_t)c->n_gemm * sizeof *x->ln);
  x->axis = calloc((size_t)c->n_gemm, sizeof *x->axis);
  if (!x->order || !x->ln || !x->axis) {
    free(x->order), free(x->ln), free(x->axis), free(x);
    return -1;
  }
  for (int i = 0; i < c->n_gemm; i++) {
    const schema_gemm_point *g = &c->gemm[i];
    x->order[i] = i;
    x->ln[i][0] = log((double)g->m), x->ln[i][1] = log((double)g->n), x->ln[i][2] = log((double)g->k);
  }
  kd_build(x, 0, c->n_gemm);
  x->src = c->gemm;
  x->n = c->n_gemm;
  c->gemm_index = x;
  return 0;
}

typedef struct {
  int n;
  double d2[SCHEMA_GEMM_NEIGHBOURS];
  int idx[SCHEMA_GEMM_NEIGHBOURS];
} nearest;

static bool nearer(double d2, int i, double d2b, int ib) { return d2 < d2b || (d2 == d2b && i < ib); }

/* Keeps the K nearest, sorted by (distance, index). */
static void nearest_offer(nearest *s, double d2, int i) {
  if (s->n == SCHEMA_GEMM_NEIGHBOURS && !nearer(d2, i, s->d2[s->n - 1], s->idx[s->n - 1])) return;
  int j = s->n < SCHEMA_GEMM_NEIGHBOURS ? s->n++ : s->n - 1;
  for (; j > 0 && nearer(d2, i, s->d2[j - 1], s->idx[j - 1]); j--) s->d2[j] = s->d2[j - 1], s->idx[j] = s->idx[j - 1];
  s->d2[j] = d2, s->idx[j] = i;
}

static double sq(double x) { return x * x; }

static void kd_offer(const struct schema_gemm_index *x, int i, const double q[3], nearest *s) {
  nearest_offer(s, sq(x->ln[i][0] - q[0]) + sq(x->ln[i][1] - q[1]) + sq(x->ln[i][2] - q[2]), x->order[i]);
}

static void kd_search(const struct schema_gemm_index *x, int lo, int hi, const double q[3], nearest *s) {
  if (hi - lo <= KD_LEAF) {
    for (int i = lo; i < hi; i++) kd_offer(x, i, q, s);
    return;
  }
  int mid = (lo + hi) / 2, a = x->axis[mid];
  double diff = q[a] - x->ln[mid][a];
  kd_offer(x, mid, q, s);
  if (diff < 0) {
    kd_search(x, lo, mid, q, s);
    if (s->n < SCHEMA_GEMM_NEIGHBOURS || sq(diff) <= s->d2[s->n - 1]) kd_search(x, mid + 1, hi, q, s);
  } else {
    kd_search(x, mid + 1, hi, q, s);
    if (s->n < SCHEMA_GEMM_NEIGHBOURS || sq(diff) <= s->d2[s->n - 1]) kd_search(x, lo, mid, q, s);
  }
}

static void nearest_shapes(const schema_calibration *c, const double q[3], nearest *s) {
  s->n = 0;
  const struct schema_gemm_index *x = c->gemm_index;
  if (x && x->src == c->gemm && x->n == c->n_gemm) {
    kd_search(x, 0, x->n, q, s);
    return;
  }
  for (int i = 0; i < c->n_gemm; i++) { /* no index for these points: scan them all */
    const schema_gemm_point *g = &c->gemm[i];
    nearest_offer(s, sq(log((double)g->m) - q[0]) + sq(log((double)g->n) - q[1]) + sq(log((double)g->k) - q[2]), i);
  }
}

/* The roofline time (us, no launch cost) of a GEMM: its FLOPs at the peak or
 * its bf16 operands and result at the HBM bandwidth, whichever is longer. */
static double gemm_roof_us(const schema_roofline *r, double m, double n, double k) {
  double tf = 2.0 * m * n * k / r->peak_flops, tb = 2.0 * (m * k + k * n + m * n) / r->hbm_bytes_per_s;
  return (tf > tb ? tf : tb) * 1e6;
}

/* The GEMM list's latency floor: the smallest (measured - roofline) time,
 * 0 when some point reaches its roofline. The calibration transfer
 * (sim/sim_transfer.c) keeps the same floor, so the efficiencies below are
 * the same before and after it. Cached per list. */
static double gemm_floor_us(schema_lookup *l) {
  const schema_calibration *c = l->cal;
  if (l->floor_of == c->gemm && l->floor_n == c->n_gemm) return l->gemm_floor_us;
  double f = INFINITY;
  for (int i = 0; i < c->n_gemm; i++) {
    const schema_gemm_point *g = &c->gemm[i];
    double d = g->us - gemm_roof_us(&l->roof, (double)g->m, (double)g->n, (double)g->k);
    if (d < f) f = d;
  }
  l->gemm_floor_us = f > 0 && isfinite(f) ? f : 0;
  l->floor_of = c->gemm, l->floor_n = c->n_gemm;
  return l->gemm_floor_us;
}

/* A shape that shares no two dimensions with a measured one (a model the
 * calibration never saw): the list's latency floor plus its roofline time
 * over the efficiency of the nearest measured shapes, efficiency =
 * roofline time / (measured time - floor), averaged with weights
 * 1 / distance^2. Efficiency rather than time: a neighbour of another size
 * lends how well the GPU runs such a shape, not how long it took. Because
 * the transfer to another GPU keeps each point's efficiency and the floor,
 * pricing a shape here on the transferred list gives what transferring its
 * price on the measured list would. */
static int gemm_by_neighbours(schema_lookup *l, long long m, long long n, long long k, double *us) {
  const schema_calibration *c = l->cal;
  const double q[3] = {log((double)m), log((double)n), log((double)k)};
  double floor_us = gemm_floor_us(l);
  nearest s;
  nearest_shapes(c, q, &s);
  double wsum = 0, esum = 0;
  for (int j = 0; j < s.n; j++) {
    const schema_gemm_point *g = &c->gemm[s.idx[j]];
    double w = 1.0 / s.d2[j], busy = g->us - floor_us; /* d2 > 0: exact matches were taken before */
    wsum += w;
    esum += busy > 0 ? w * gemm_roof_us(&l->roof, (double)g->m, (double)g->n, (double)g->k) / busy : 0;
  }
  double roof = gemm_roof_us(&l->roof, (double)m, (double)n, (double)k);
  *us = floor_us + (esum > 0 ? roof * wsum / esum : 0);
  warn_once(l, "gemm (nearest shapes)",
            "a shape of %g FLOPs shares no two dimensions with a measured one: priced by the efficiency of its "
            "%g nearest measured shapes",
            2.0 * (double)m * (double)n * (double)k, (double)s.n);
  return 0;
}

int schema_lookup_gemm(schema_lookup *l, long long m, long long n, long long k, double *us, ts_err *e) {
  const schema_calibration *c = l->cal;
  if (!c->n_gemm) return ts_fail(e, cal_name(l), "gemm", "missing: needed for a %lldx%lldx%lld GEMM", m, n, k);
  for (int i = 0; i < c->n_gemm; i++)
    if (c->gemm[i].m == m && c->gemm[i].n == n && c->gemm[i].k == k) {
      *us = c->gemm[i].us;
      return 0;
    }
  /* Interpolate along the one dimension that varies between the nearest
   * measured neighbours that share the other two dimensions with the query.
   * A plan's token count is m for forward and dgrad GEMMs but k for wgrad
   * GEMMs, and the calibration sweeps it densely in both, so m is tried
   * first, then k, then n. (Choosing the dimension with the tightest bracket
   * instead, or averaging all bracketing dimensions, predicted the held-out
   * points worse: brackets along a weight dimension join shapes of different
   * models, which cuBLASLt runs with different kernels; calibration/README.md.) */
  const long long q[3] = {m, n, k};
  static const int order[3] = {0, 2, 1};
  gemm_bracket b[3];
  int best = -1, widest = -1;
  for (int o = 0; o < 3; o++) {
    int d = order[o];
    b[d] = gemm_bracket_of(c, q, d);
    if (b[d].n && (widest < 0 || b[d].n > b[widest].n)) widest = d;
    if (best < 0 && b[d].lo >= 0 && b[d].hi >= 0) best = d;
  }
  if (best >= 0) {
    const schema_gemm_point *lo = &c->gemm[b[best].lo], *hi = &c->gemm[b[best].hi];
    *us = log_interp((double)gemm_dim(lo, best), lo->us, (double)gemm_dim(hi, best), hi->us, (double)q[best]);
    return 0;
  }
  if (widest < 0) return gemm_by_neighbours(l, m, n, k, us);
  /* Outside the measured range of every family: the roofline along the
   * largest family, anchored at its nearest point (lookup_1d warns). */
  series s;
  if (series_alloc(&s, b[widest].n)) return ts_fail_sys(e, "out of memory");
  for (int i = 0; i < c->n_gemm; i++) {
    const long long p[3] = {c->gemm[i].m, c->gemm[i].n, c->gemm[i].k};
    if (p[(widest + 1) % 3] != q[(widest + 1) % 3] || p[(widest + 2) % 3] != q[(widest + 2) % 3]) continue;
    int j = s.n; /* insertion by the varying dimension */
    while (j > 0 && s.x[j - 1] > (double)p[widest]) j--;
    memmove(s.x + j + 1, s.x + j, sizeof(double) * (size_t)(s.n - j));
    memmove(s.t + j + 1, s.t + j, sizeof(double) * (size_t)(s.n - j));
    s.x[j] = (double)p[widest];
    s.t[j] = c->gemm[i].us;
    s.n++;
  }
  gemm_family fam = {widest, {q[(widest + 1) % 3], q[(widest + 2) % 3]}};
  char key[64];
  static const char dim_name[3] = {'m', 'n', 'k'};
  snprintf(key, sizeof key, "gemm along %c (%c=%lld %c=%lld)", dim_name[widest], dim_name[(widest + 1) % 3],
           fam.other[0], dim_name[(widest + 2) % 3], fam.other[1]);
  *us = lookup_1d(l, key, s.x, s.t, s.n, (double)q[widest], roof_gemm_dim, &fam);
  series_free(&s);
  return 0;
}

const schema_kernel_table *schema_kernel_table_of(const schema_calibration *c, const char *name) {
  for (int i = 0; i < c->n_kernels; i++)
    if (strcmp(c->kernels[i].name, name) == 0) return &c->kernels[i];
  return NULL;
}

bool schema_has_kernel(const schema_calibration *c, const char *name) { return schema_kernel_table_of(c, name) != NULL; }

bool schema_has_coll(const schema_calibration *c, const char *name) {
  for (int i = 0; i < c->n_colls; i++)
    if (strcmp(c->colls[i].name, name) == 0) return true;
  return false;
}

/* One group's curve of a kernel table at x (lookup_1d: interpolated, an anchored roofline outside). */
static int kernel_group_us(schema_lookup *l, const schema_kernel_table *t, const char *key, int group, double x,
                           double *us, ts_err *e) {
  series s;
  if (series_alloc(&s, t->n)) return ts_fail_sys(e, "out of memory");
  for (int i = 0; i < t->n; i++)
    if (t->pts[i].group == group) {
      s.x[s.n] = t->pts[i].x;
      s.t[s.n++] = t->pts[i].us;
    }
  *us = lookup_1d(l, key, s.x, s.t, s.n, x, t->by_flops ? roof_flops : roof_bytes, NULL);
  series_free(&s);
  return 0;
}

/* Whether a table's groups count units of parallel work that share its bytes: the decode attention tables
 * ("attention_decode", "attention_decode_fp8" and their ".g<G>" layouts), whose points are keyed by the KV
 * bytes read over `group` (sequence, KV head) pairs (tacorun calibrate-infer; sim/INFERENCE.md). The other
 * grouped tables' group is a row width or a codec group, of which no such reading holds. */
static bool groups_share_bytes(const char *name) { return strncmp(name, "attention_decode", 16) == 0; }

/* A decode attention table looked up at more (sequence, KV head) pairs than its largest measured group G:
 * the time of `group` pairs each of x / group bytes, extrapolated along the group axis at that per-pair size
 * from the two largest measured groups G1 < G (both full GPUs: thousands of pairs over the SMs): t(G) + (group
 * - G) x (t(G) - t(G1)) / (G - G1), each t read at G x (x / group) bytes; t(G) x group / G where the two do
 * not rise with the group. Taking the largest group's curve at the same total bytes instead prices `group`
 * short rows as G long ones, at the long rows' higher rate (experiments/published/dense-infer/README.md, "The
 * H200 short-prompt rows"). 1 with *us set where it applies, 0 where not, -1 on error. */
static int beyond_groups_us(schema_lookup *l, const schema_kernel_table *t, const char *key, double x, int group,
                            int largest, double *us, ts_err *e) {
  int below = 0;
  for (int i = 0; i < t->n; i++)
    if (t->pts[i].group < largest && t->pts[i].group > below) below = t->pts[i].group;
  if (!groups_share_bytes(t->name) || group <= largest || below < 1) return 0;
  const double per = x / group;
  double hi, lo;
  if (kernel_group_us(l, t, key, largest, per * largest, &hi, e) ||
      kernel_group_us(l, t, key, below, per * below, &lo, e))
    return -1;
  *us = hi > lo ? hi + (group - largest) * (hi - lo) / (largest - below) : hi * group / largest;
  warn_once(l, key, "group %g beyond the measured range; extrapolated along groups at equal bytes a group from "
            "groups %g and the largest", (double)group, (double)below);
  return 1;
}

int schema_lookup_kernel(schema_lookup *l, const char *name, double x, int group, double *us, ts_err *e) {
  const schema_kernel_table *t = schema_kernel_table_of(l->cal, name);
  if (!t) return ts_fail(e, cal_name(l), "kernels", "missing table \"%s\"", name);
  /* Pick the group: exact, else the nearest in log2. */
  int best = t->pts[0].group, largest = t->pts[0].group;
  for (int i = 0; i < t->n; i++) {
    double d_new = fabs(log2((t->pts[i].group + 1.0) / (group + 1.0)));
    double d_best = fabs(log2((best + 1.0) / (group + 1.0)));
    if (d_new < d_best) best = t->pts[i].group;
    if (t->pts[i].group > largest) largest = t->pts[i].group;
  }
  char key[64];
  snprintf(key, sizeof key, "kernel %s", name);
  if (x > 0) {
    int rc = beyond_groups_us(l, t, key, x, group, largest, us, e);
    if (rc) return rc < 0 ? -1 : 0;
  }
  if (best != group) warn_once(l, key, "group %g not measured, using group %g", (double)group, (double)best);
  return kernel_group_us(l, t, key, best, x, us, e);
}

double schema_busbw_factor(const char *name, int nranks) {
  ts_coll coll;
  if (nranks < 2 || ts_coll_of_key(name, &coll)) return 0; /* a table of one rank moves nothing */
  return ts_coll_busbw_factor(coll, nranks);
}

int schema_lookup_coll(schema_lookup *l, const char *name, int nranks, double bytes, double *us, ts_err *e) {
  const schema_coll_table *t = NULL;
  for (int i = 0; i < l->cal->n_colls; i++) {
    const schema_coll_table *c = &l->cal->colls[i];
    if (strcmp(c->name, name) != 0) continue;
    if (!t || abs(c->nranks - nranks) < abs(t->nranks - nranks) ||
        (abs(c->nranks - nranks) == abs(t->nranks - nranks) && c->nranks > t->nranks))
      t = c;
  }
  if (!t) return ts_fail(e, cal_name(l), "collectives", "missing table \"%s\"", name);
  char key[64];
  snprintf(key, sizeof key, "%s.%d", name, nranks);
  series s;
  if (series_alloc(&s, t->n)) return ts_fail_sys(e, "out of memory");
  for (int i = 0; i < t->n; i++) {
    s.x[s.n] = t->pts[i].bytes;
    s.t[s.n++] = t->pts[i].us;
  }
  coll_ctx ctx = {name, t->nranks};
  double v = lookup_1d(l, key, s.x, s.t, s.n, bytes, roof_coll, &ctx);
  series_free(&s);
  if (t->nranks != nranks) {
    /* Same bus bandwidth, different algorithmic factor. */
    warn_once(l, key, "%g ranks not measured, scaled from %g ranks by bus bandwidth", nranks, t->nranks);
    v *= schema_busbw_factor(name, nranks) / schema_busbw_factor(name, t->nranks);
  }
  *us = v;
  return 0;
}

void schema_clock_speed(const schema_calibration *c, double duty, double cycle_us, double *gemm_speed,
                        double *mem_speed) {
  *gemm_speed = *mem_speed = 1.0;
  if (c->n_clock == 0) return;
  /* the period nearest the cycle in log scale; the smallest when no cycle is given */
  double period = c->clock[0].period_us;
  for (int i = 1; i < c->n_clock; i++) {
    double q = c->clock[i].period_us;
    if (cycle_us > 0 ? fabs(log(q / cycle_us)) < fabs(log(period / cycle_us)) : q < period) period = q;
  }
  /* Neighbours in duty among that period's points (no order assumed: built in memory). */
  const schema_clock_point *lo = NULL, *hi = NULL, *first = NULL, *last = NULL;
  for (int i = 0; i < c->n_clock; i++) {
    const schema_clock_point *q = &c->clock[i];
    if (q->period_us != period) continue;
    if (!first || q->duty < first->duty) first = q;
    if (!last || q->duty > last->duty) last = q;
    if (q->duty <= duty && (!lo || q->duty > lo->duty)) lo = q;
    if (q->duty >= duty && (!hi || q->duty < hi->duty)) hi = q;
  }
  if (!lo) lo = hi = first; /* below the measured range: clamped */
  if (!hi) lo = hi = last;  /* above it */
  double f = hi->duty > lo->duty ? (duty - lo->duty) / (hi->duty - lo->duty) : 0.0;
  *gemm_speed = lo->gemm_speed + f * (hi->gemm_speed - lo->gemm_speed);
  *mem_speed = lo->mem_speed + f * (hi->mem_speed - lo->mem_speed);
}

double schema_burst_advance(const schema_calibration *c, double t_s, double work_s) {
  double t = t_s, left = work_s;
  for (int i = 0; i < c->n_burst && left > 0; i++) {
    const schema_burst_bin *b = &c->burst[i];
    double from = b->from_us * 1e-6, to = b->to_us * 1e-6;
    if (t >= to) continue;
    if (t < from) { /* a gap between bins, or before the first: speed 1 */
      if (t + left <= from) return t + left;
      left -= from - t;
      t = from;
    }
    double can = (to - t) * b->gemm_speed; /* sustained-speed work this bin's rest holds */
    if (left <= can) return t + left / b->gemm_speed;
    left -= can;
    t = to;
  }
  return t + left;
}

/* The exact shape in a GEMM list sorted by (n, k, m) (schema_calibration_sort). */
static int exact_gemm_us(const schema_gemm_point *pts, int npts, long long m, long long n, long long k, double *us) {
  int lo = 0, hi = npts - 1;
  while (lo <= hi) {
    int mid = lo + (hi - lo) / 2;
    const schema_gemm_point *g = &pts[mid];
    int cmp = g->n != n ? (g->n < n ? -1 : 1) : g->k != k ? (g->k < k ? -1 : 1) : g->m != m ? (g->m < m ? -1 : 1) : 0;
    if (cmp == 0) {
      *us = g->us;
      return 1;
    }
    if (cmp < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return 0;
}

int schema_gemm_wgrad_us(const schema_calibration *c, long long m, long long n, long long k, double *us) {
  return exact_gemm_us(c->gemm_wgrad, c->n_gemm_wgrad, m, n, k, us);
}

int schema_gemm_fp8_us(const schema_calibration *c, long long m, long long n, long long k, double *us) {
  return exact_gemm_us(c->gemm_fp8, c->n_gemm_fp8, m, n, k, us);
}

/* The "gemm_fp8" points of (n, k) in the list sorted by (n, k, m): the first index whose (n, k, m) is not
 * below (n, k, m). */
static int fp8_lower_bound(const schema_calibration *c, long long m, long long n, long long k) {
  int lo = 0, hi = c->n_gemm_fp8;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    const schema_gemm_point *g = &c->gemm_fp8[mid];
    bool below = g->n != n ? g->n < n : g->k != k ? g->k < k : g->m < m;
    if (below) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

int schema_gemm_fp8_between_us(const schema_calibration *c, long long m, long long n, long long k, double *us,
                               long long *lo_m, long long *hi_m) {
  const int at = fp8_lower_bound(c, m, n, k); /* the first point of (n, k) at or above m, if any */
  if (at <= 0 || at >= c->n_gemm_fp8) return 0;
  const schema_gemm_point *lo = &c->gemm_fp8[at - 1], *hi = &c->gemm_fp8[at];
  if (lo->n != n || lo->k != k || hi->n != n || hi->k != k || hi->m == m || lo->us <= 0 || hi->us <= 0) return 0;
  *us = log_interp((double)lo->m, lo->us, (double)hi->m, hi->us, (double)m);
  *lo_m = lo->m, *hi_m = hi->m;
  return 1;
}

/* The FP8 / BF16 ratio at "gemm_fp8" point i when it is of (n, k) and "gemm" holds its shape: 1, else 0. */
static int fp8_ratio_at(const schema_calibration *c, int i, long long n, long long k, double *ratio) {
  const schema_gemm_point *g = &c->gemm_fp8[i];
  double bf16;
  if (g->n != n || g->k != k || g->us <= 0) return 0;
  if (!exact_gemm_us(c->gemm, c->n_gemm, g->m, n, k, &bf16) || bf16 <= 0) return 0;
  *ratio = g->us / bf16;
  return 1;
}

int schema_gemm_fp8_ratio(const schema_calibration *c, long long m, long long n, long long k, double max_m_factor,
                          double *ratio, long long *at_m) {
  const int at = fp8_lower_bound(c, m, n, k);
  double best = 0;
  int found = 0;
  for (int dir = -1; dir <= 1; dir += 2) { /* the nearest usable point below m, then at or above it */
    for (int i = dir < 0 ? at - 1 : at; i >= 0 && i < c->n_gemm_fp8; i += dir) {
      const schema_gemm_point *g = &c->gemm_fp8[i];
      double r;
      if (g->n != n || g->k != k) break;
      if (!fp8_ratio_at(c, i, n, k, &r)) continue;
      const double dist = fabs(log((double)g->m / (double)m));
      if (dist <= log(max_m_factor) + 1e-12 && (!found || dist < best)) {
        best = dist;
        *ratio = r;
        *at_m = g->m;
        found = 1;
      }
      break;
    }
  }
  if (found) return 1;
  /* none along m: a weight gradient's tokens are its k, so the nearest k of the same (m, n) (a scan: the list
   * is sorted by n, k, m) */
  for (int i = 0; i < c->n_gemm_fp8; i++) {
    const schema_gemm_point *g = &c->gemm_fp8[i];
    double r;
    if (g->m != m || g->n != n || !fp8_ratio_at(c, i, n, g->k, &r)) continue;
    const double dist = fabs(log((double)g->k / (double)k));
    if (dist <= log(max_m_factor) + 1e-12 && (!found || dist < best)) {
      best = dist;
      *ratio = r;
      *at_m = g->m;
      found = 1;
    }
  }
  return found;
}

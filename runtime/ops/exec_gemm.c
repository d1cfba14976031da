/* exec_gemm.c — cuBLASLt GEMM with leading dimensions and FP32 output (see exec_gemm.h).
 *
 * cuBLASLt is column-major: a row-major C[m x n] is a column-major C^T, and
 * C^T = op(B)^T . op(A)^T, so the B buffer goes first and the A buffer second,
 * each keeping its own transpose flag. Descriptors and the heuristic's choice
 * are cached per shape, so the timed iterations never query the heuristic;
 * the cache is found through a hash of the shape (--variant gemm-cache=scan:
 * the linear scan before 2026-12-04, whose cost grew with the MoE expert
 * GEMMs' thousands of row counts: runtime/RESULTS-exec.md). */
#include "exec_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_check.h"
#include "lt_handle.h"
#include "ops_variants.h"

#define EXEC_GEMM_WORKSPACE ((size_t)32 << 20)

typedef struct {
  exec_gemm_shape s;
  int align_a, align_b, align_c; /* bytes the heuristic may assume, part of the key */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
} cached_gemm;

struct exec_gemm {
  cublasLtHandle_t handle;
  void *workspace;
  cached_gemm *cache;
  int count, cap;
  int *index;     /* open addressing over cache[]: entry + 1, 0 empty; index_cap a power of two */
  int index_cap;
  exec_gemm_stats stats;
};

#define LT_CHECK(call) CUBLAS_CHECK(e, call)

exec_gemm_shape exec_gemm_packed(exec_gemm_layout layout, long long m, long long n, long long k) {
  exec_gemm_shape s = {.m = m, .n = n, .k = k, .ldc = n, .batch = 1};
  switch (layout) {
  case EXEC_GEMM_NN: s.lda = k, s.ldb = n; break;
  case EXEC_GEMM_NT: s.trans_b = 1, s.lda = k, s.ldb = k; break;
  case EXEC_GEMM_TN_ACC: s.trans_a = 1, s.lda = m, s.ldb = n, s.c_fp32 = 1; break;
  }
  return s;
}

float exec_gemm_packed_beta(exec_gemm_layout layout) { return layout == EXEC_GEMM_TN_ACC ? 1.f : 0.f; }

int exec_gemm_create(exec_gemm **out, ts_err *e) {
  *out = NULL;
  exec_gemm *g = calloc(1, sizeof *g);
  if (!g) return ts_fail_sys(e, "exec_gemm_create: out of memory");
  if (lt_handle_open(&g->handle, &g->workspace, EXEC_GEMM_WORKSPACE, "exec_gemm_create", e)) {
    free(g);
    return -1;
  }
  *out = g;
  return 0;
}

static void cached_release(cached_gemm *c) {
  if (c->la) cublasLtMatrixLayoutDestroy(c->la);
  if (c->lb) cublasLtMatrixLayoutDestroy(c->lb);
  if (c->lc) cublasLtMatrixLayoutDestroy(c->lc);
  if (c->op) cublasLtMatmulDescDestroy(c->op);
}

void exec_gemm_destroy(exec_gemm *g) {
  if (!g) return;
  for (int i = 0; i < g->count; i++) cached_release(&g->cache[i]);
  free(g->cache);
  free(g->index);
  lt_handle_close(g->handle, g->workspace);
  free(g);
}

static int layout(cublasLtMatrixLayout_t *l, cudaDataType_t type, long long rows, long long cols, long long ld,
                  long long batch, long long stride, ts_err *e) {
  LT_CHECK(cublasLtMatrixLayoutCreate(l, type, (uint64_t)rows, (uint64_t)cols, ld));
  if (batch > 1) {
    int32_t count = (int32_t)batch;
    int64_t off = stride;
    LT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    LT_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &off, sizeof off));
  }
  return 0;
}

static int build(cached_gemm *c, ts_err *e) {
  const exec_gemm_shape *s = &c->s;
  cublasOperation_t op_first = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  /* the B buffer */
  cublasOperation_t op_second = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* the A buffer */
  LT_CHECK(cublasLtMatmulDescCreate(&c->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT_CHECK(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
  LT_CHECK(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
  if (s->sm_count > 0) {
    int32_t sms = s->sm_count;
    LT_CHECK(cublasLtMatmulDescSetAttribute(c->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
  }
  /* Column-major views: B buffer is n x k (row-major k x n) or k x n when transposed. */
  if (layout(&c->la, CUDA_R_16BF, s->trans_b ? s->k : s->n, s->trans_b ? s->n : s->k, s->ldb, s->batch,
             s->stride_b, e) ||
      layout(&c->lb, CUDA_R_16BF, s->trans_a ? s->m : s->k, s->trans_a ? s->k : s->m, s->lda, s->batch,
             s->stride_a, e) ||
      layout(&c->lc, s->c_fp32 ? CUDA_R_32F : CUDA_R_16BF, s->n, s->m, s->ldc, s->batch, s->stride_c, e))
    return -1;
  return 0;
}

/* The heuristic's first algorithm for c's descriptors. */
static int pick_algo(exec_gemm *g, cached_gemm *c, ts_err *e) {
  const exec_gemm_shape *s = &c->s;
  g->stats.heuristics++;
  /* cuBLASLt's first operand is our B buffer and its second our A buffer. */
  const unsigned align[4] = {(unsigned)c->align_b, (unsigned)c->align_a, (unsigned)c->align_c, (unsigned)c->align_c};
  int st;
  if (lt_first_algo(g->handle, c->op, c->la, c->lb, c->lc, c->lc, EXEC_GEMM_WORKSPACE, align, &c->algo, &st))
    return ts_fail_sys(e, "%s:%d: cuBLASLt has no algorithm for m=%lld n=%lld k=%lld batch=%lld (status %d)",
                       __FILE__, __LINE__, s->m, s->n, s->k, s->batch, st);
  return 0;
}

/* --variant gemm-algo=bucket (the default): a new packed shape marked
 * rows_vary (the MoE expert GEMMs, whose rows follow the routing) that
 * differs from a cached rows_vary one only within the same powers of two of
 * m, n and k reuses its algorithm when cuBLASLt accepts it for the new shape
 * (cublasLtMatmulAlgoCheck), instead of a heuristic query (tens to hundreds
 * of microseconds of host time each, on the critical path after the routing's
 * synchronisation: runtime/RESULTS-exec.md, 2026-12-04 MoE section). */
static int is_packed(const exec_gemm_shape *s) {
  exec_gemm_layout lay = s->trans_a ? EXEC_GEMM_TN_ACC : s->trans_b ? EXEC_GEMM_NT : EXEC_GEMM_NN;
  exec_gemm_shape p = exec_gemm_packed(lay, s->m, s->n, s->k);
  return s->batch <= 1 && s->lda == p.lda && s->ldb == p.ldb && s->ldc == p.ldc && s->trans_a == p.trans_a &&
         s->trans_b == p.trans_b;
}
static int log2_of(long long x) {
  int b = 0;
  while (x > 1) x >>= 1, b++;
  return b;
}
static const cached_gemm *bucket_match(const exec_gemm *g, const cached_gemm *c) {
  const exec_gemm_shape *s = &c->s;
  if (!s->rows_vary || !is_packed(s)) return NULL;
  for (int i = 0; i < g->count; i++) {
    const cached_gemm *o = &g->cache[i];
    const exec_gemm_shape *t = &o->s;
    if (t->rows_vary && is_packed(t) && t->trans_a == s->trans_a && t->trans_b == s->trans_b &&
        t->c_fp32 == s->c_fp32 && t->sm_count == s->sm_count && log2_of(t->m) == log2_of(s->m) && log2_of(t->n) == log2_of(s->n) &&
        log2_of(t->k) == log2_of(s->k) && o->align_a == c->align_a && o->align_b == c->align_b &&
        o->align_c == c->align_c)
      return o;
  }
  return NULL;
}
static int reuse_algo(exec_gemm *g, cached_gemm *c, const cached_gemm *from) {
  cublasLtMatmulHeuristicResult_t r;
  if ((int)cublasLtMatmulAlgoCheck(g->handle, c->op, c->la, c->lb, c->lc, c->lc, &from->algo, &r) != 0 ||
      r.workspaceSize > EXEC_GEMM_WORKSPACE)
    return -1;
  c->algo = from->algo;
  g->stats.reused++;
  return 0;
}

static int same_shape(const exec_gemm_shape *a, const exec_gemm_shape *b) {
  return a->trans_a == b->trans_a && a->trans_b == b->trans_b && a->m == b->m && a->n == b->n && a->k == b->k &&
         a->lda == b->lda && a->ldb == b->ldb && a->ldc == b->ldc && a->batch == b->batch &&
         a->stride_a == b->stride_a && a->stride_b == b->stride_b && a->stride_c == b->stride_c &&
         a->c_fp32 == b->c_fp32 && a->sm_count == b->sm_count && a->rows_vary == b->rows_vary;
}

/* ---- the cache's index: a hash of every field same_shape compares and the alignments ---- */
static unsigned long long mix(unsigned long long h, long long v) {
  h ^= (unsigned long long)v;
  return h * 0x100000001b3ULL; /* FNV-1a's prime, a word at a time */
}
static unsigned long long key_hash(const exec_gemm_shape *s, int al_a, int al_b, int al_c) {
  const long long v[] = {s->trans_a, s->trans_b, s->m, s->n, s->k, s->lda, s->ldb, s->ldc, s->batch, s->stride_a,
                         s->stride_b, s->stride_c, s->c_fp32, s->sm_count, s->rows_vary, al_a, al_b, al_c};
  unsigned long long h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) h = mix(h, v[i]);
  return h ^ (h >> 29);
}
static int is_key(const cached_gemm *c, const exec_gemm_shape *s, int al_a, int al_b, int al_c) {
  return same_shape(&c->s, s) && c->align_a == al_a && c->align_b == al_b && c->align_c == al_c;
}
static void index_put(int *index, int cap, const cached_gemm *c, int i) {
  unsigned long long at = key_hash(&c->s, c->align_a, c->align_b, c->align_c) & (unsigned long long)(cap - 1);
  while (index[at]) at = (at + 1) & (unsigned long long)(cap - 1);
  index[at] = i + 1;
}
/* Adds cache[i] (kept at most half full: rebuilt at twice the size). -1: out of memory. */
static int index_add(exec_gemm *g, int i) {
  if (2 * g->count > g->index_cap) {
    int cap = g->index_cap ? 2 * g->index_cap : 256;
    int *ix = calloc((size_t)cap, sizeof *ix);
    if (!ix) return -1;
    for (int j = 0; j < i; j++) index_put(ix, cap, &g->cache[j], j);
    free(g->index);
    g->index = ix, g->index_cap = cap;
  }
  index_put(g->index, g->index_cap, &g->cache[i], i);
  return 0;
}
static cached_gemm *find(exec_gemm *g, const exec_gemm_shape *s, int al_a, int al_b, int al_c) {
  if (ops_variant_is(OPS_V_GEMM_CACHE, "scan")) {
    for (int i = 0; i < g->count; i++)
      if (is_key(&g->cache[i], s, al_a, al_b, al_c)) return &g->cache[i];
    return NULL;
  }
  if (!g->index_cap) return NULL;
  const unsigned long long mask = (unsigned long long)(g->index_cap - 1);
  for (unsigned long long at = key_hash(s, al_a, al_b, al_c) & mask; g->index[at]; at = (at + 1) & mask)
    if (is_key(&g->cache[g->index[at] - 1], s, al_a, al_b, al_c)) return &g->cache[g->index[at] - 1];
  return NULL;
}

/* Largest power of two (up to 256) dividing the address and, for batches, the stride in bytes:
 * the heuristic must not pick a kernel that needs more alignment than the buffers have. */
static int alignment_of(const void *p, long long stride, long long batch, int esize) {
  unsigned long long bits = (unsigned long long)(uintptr_t)p | 256ULL;
  if (batch > 1) bits |= (unsigned long long)(stride * esize);
  return (int)(bits & (~bits + 1ULL));
}

static int run(exec_gemm *g, const exec_gemm_shape *s_in, float alpha, const void *A, const void *B, float beta,
               void *C, void *stream, ts_err *e) {
  exec_gemm_shape s = *s_in;
  if (s.batch < 1) s.batch = 1;
  if (s.batch == 1) s.stride_a = s.stride_b = s.stride_c = 0;
  if (s.m <= 0 || s.n <= 0 || s.k <= 0)
    return ts_fail_sys(e, "exec_gemm: bad shape m=%lld n=%lld k=%lld", s.m, s.n, s.k);
  int al_a = alignment_of(A, s.stride_a, s.batch, 2), al_b = alignment_of(B, s.stride_b, s.batch, 2);
  int al_c = alignment_of(C, s.stride_c, s.batch, s.c_fp32 ? 4 : 2);
  cached_gemm *c = find(g, &s, al_a, al_b, al_c);
  if (!c) {
    if (g->count == g->cap) {
      int cap = g->cap ? 2 * g->cap : 64;
      cached_gemm *nc = realloc(g->cache, (size_t)cap * sizeof *nc);
      if (!nc) return ts_fail_sys(e, "exec_gemm: out of memory");
      g->cache = nc;
      g->cap = cap;
    }
    c = &g->cache[g->count];
    memset(c, 0, sizeof *c);
    c->s = s;
    c->align_a = al_a, c->align_b = al_b, c->align_c = al_c;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const cached_gemm *from = ops_variant_is(OPS_V_GEMM_ALGO, "bucket") ? bucket_match(g, c) : NULL;
    if (build(c, e) || ((!from || reuse_algo(g, c, from)) && pick_algo(g, c, e))) {
      cached_release(c);
      return -1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    g->stats.plans++;
    g->stats.plan_s += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    g->count++;
    if (index_add(g, g->count - 1)) return ts_fail_sys(e, "exec_gemm: out of memory");
  }
  int st = (int)cublasLtMatmul(g->handle, c->op, &alpha, B, c->la, A, c->lb, &beta, C, c->lc, C, c->lc, &c->algo,
                               g->workspace, EXEC_GEMM_WORKSPACE, (cudaStream_t)stream);
  if (st != 0)
    return ts_fail_sys(e, "%s:%d: cublasLtMatmul(m=%lld n=%lld k=%lld batch=%lld): cuBLAS status %d", __FILE__,
                       __LINE__, s.m, s.n, s.k, s.batch, st);
  return 0;
}

/* Every call's host time (the lookup, a new shape's plan, the cublasLtMatmul enqueue): the executor's
 * counterpart of the host calibration's gemm_launch_us, which times one cached shape. */
int exec_gemm_run(exec_gemm *g, const exec_gemm_shape *s, float alpha, const void *A, const void *B, float beta,
                  void *C, void *stream, ts_err *e) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int rc = run(g, s, alpha, A, B, beta, C, stream, e);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  g->stats.calls++;
  g->stats.call_s += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  return rc;
}

exec_gemm_stats exec_gemm_get_stats(const exec_gemm *g) { return g->stats; }

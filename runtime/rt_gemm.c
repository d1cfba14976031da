/* rt_gemm.c — cuBLASLt BF16 GEMM wrapper (see rt_gemm.h).
 *
 * Row-major C = op(A).op(B) is column-major C^T = op(B)^T . op(A)^T, so we
 * hand cuBLASLt the B buffer as its first operand and the A buffer as its
 * second; each keeps its own transpose flag. */
#include "rt_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt_ops_check.h"

typedef struct {
  long long m, n, k, batch, stride_a, stride_b, stride_c;
  int trans_a, trans_b;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
} gemm_plan;

/* Plans live in an array; an open-addressing hash of their indices finds
 * one in O(1), so the host cost of a call does not grow with the number of
 * shapes seen (calibration sees thousands). */
struct rt_gemm {
  cublasLtHandle_t handle;
  void *workspace;
  size_t workspace_bytes;
  gemm_plan *plans;
  int count, cap;
  int *slots; /* index + 1 into plans, 0 = empty; nslots is a power of two */
  int nslots;
};

int rt_gemm_create(rt_gemm **out, size_t workspace_bytes, ts_err *e) {
  *out = NULL;
  rt_gemm *g = calloc(1, sizeof *g);
  if (!g) return ts_fail_sys(e, "rt_gemm_create: out of memory");
  g->workspace_bytes = workspace_bytes ? workspace_bytes : (size_t)32 << 20;
  int rc = (int)cublasLtCreate(&g->handle);
  if (rc != 0) {
    free(g);
    return ts_fail_sys(e, "%s:%d: cublasLtCreate: cuBLAS status %d", __FILE__, __LINE__, rc);
  }
  cudaError_t ce = cudaMalloc(&g->workspace, g->workspace_bytes);
  if (ce != cudaSuccess) {
    cublasLtDestroy(g->handle);
    free(g);
    return ts_fail_sys(e, "%s:%d: cudaMalloc(workspace): %s", __FILE__, __LINE__, cudaGetErrorString(ce));
  }
  *out = g;
  return 0;
}

static void plan_release(gemm_plan *p) {
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
  if (p->op) cublasLtMatmulDescDestroy(p->op);
}

void rt_gemm_destroy(rt_gemm *g) {
  if (!g) return;
  for (int i = 0; i < g->count; i++) plan_release(&g->plans[i]);
  free(g->plans);
  free(g->slots);
  cudaFree(g->workspace);
  cublasLtDestroy(g->handle);
  free(g);
}

int rt_gemm_cached_shapes(const rt_gemm *g) { return g ? g->count : 0; }

static int layout(cublasLtMatrixLayout_t *l, long long rows, long long cols, long long ld, long long batch,
                  long long stride, ts_err *e) {
  RT_CHECK_CUBLAS(e, cublasLtMatrixLayoutCreate(l, CUDA_R_16BF, (uint64_t)rows, (uint64_t)cols, ld));
  if (batch > 1) {
    int32_t count = (int32_t)batch;
    int64_t off = stride;
    RT_CHECK_CUBLAS(e, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
    RT_CHECK_CUBLAS(e, cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &off,
                                                  sizeof off));
  }
  return 0;
}

/* Builds descriptors and asks the heuristic once for this shape (strides are
 * part of the layouts, so they are part of the cache key). */
static int plan_build(rt_gemm *g, gemm_plan *p, long long sa, long long sb, long long sc, ts_err *e) {
  cublasOperation_t op_first = p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  /* B buffer */
  cublasOperation_t op_second = p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N; /* A buffer */
  RT_CHECK_CUBLAS(e, cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  RT_CHECK_CUBLAS(e, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first));
  RT_CHECK_CUBLAS(e, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second));
  /* column-major views: B buffer is n x k (op N) or k x n (op T); A buffer k x m or m x k */
  RT_TRY(layout(&p->la, p->trans_b ? p->k : p->n, p->trans_b ? p->n : p->k, p->trans_b ? p->k : p->n, p->batch,
                sb, e));
  RT_TRY(layout(&p->lb, p->trans_a ? p->m : p->k, p->trans_a ? p->k : p->m, p->trans_a ? p->m : p->k, p->batch,
                sa, e));
  RT_TRY(layout(&p->lc, p->n, p->m, p->n, p->batch, sc, e));
  cublasLtMatmulPreference_t pref;
  RT_CHECK_CUBLAS(e, cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = g->workspace_bytes;
  int rc = (int)cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  if (rc == 0)
    rc = (int)cublasLtMatmulAlgoGetHeuristic(g->handle, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &result,
                                             &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (rc != 0)
    return ts_fail_sys(e, "%s:%d: cublasLtMatmulAlgoGetHeuristic(m=%lld n=%lld k=%lld): cuBLAS status %d",
                       __FILE__, __LINE__, p->m, p->n, p->k, rc);
  if (found < 1)
    return ts_fail_sys(e, "%s:%d: cuBLASLt has no algorithm for m=%lld n=%lld k=%lld", __FILE__, __LINE__, p->m,
                       p->n, p->k);
  p->algo = result.algo;
  return 0;
}

static uint64_t plan_hash(int ta, int tb, long long m, long long n, long long k, long long batch, long long sa,
                          long long sb, long long sc) {
  const long long v[9] = {ta, tb, m, n, k, batch, sa, sb, sc};
  uint64_t h = 1469598103934665603ULL; /* FNV-1a over the words, then a final mix */
  for (int i = 0; i < 9; i++) h = (h ^ (uint64_t)v[i]) * 1099511628211ULL;
  return h ^ (h >> 29);
}

static int plan_matches(const gemm_plan *p, int ta, int tb, long long m, long long n, long long k, long long batch,
                        long long sa, long long sb, long long sc) {
  return p->m == m && p->n == n && p->k == k && p->batch == batch && p->stride_a == sa && p->stride_b == sb &&
         p->stride_c == sc && p->trans_a == ta && p->trans_b == tb;
}

/* Rebuilds the hash for twice the plans' capacity. */
static int rehash(rt_gemm *g, ts_err *e) {
  int nslots = 64;
  while (nslots < 2 * g->cap) nslots *= 2;
  int *slots = calloc((size_t)nslots, sizeof *slots);
  if (!slots) return ts_fail_sys(e, "rt_gemm: out of memory");
  for (int i = 0; i < g->count; i++) {
    const gemm_plan *p = &g->plans[i];
    uint64_t h = plan_hash(p->trans_a, p->trans_b, p->m, p->n, p->k, p->batch, p->stride_a, p->stride_b, p->stride_c);
    size_t s = (size_t)h & (size_t)(nslots - 1);
    while (slots[s]) s = (s + 1) & (size_t)(nslots - 1);
    slots[s] = i + 1;
  }
  free(g->slots);
  g->slots = slots;
  g->nslots = nslots;
  return 0;
}

static int plan_get(rt_gemm *g, int ta, int tb, long long m, long long n, long long k, long long batch,
                    long long sa, long long sb, long long sc, gemm_plan **out, ts_err *e) {
  uint64_t h = plan_hash(ta, tb, m, n, k, batch, sa, sb, sc);
  size_t s = 0;
  if (g->nslots) {
    for (s = (size_t)h & (size_t)(g->nslots - 1); g->slots[s]; s = (s + 1) & (size_t)(g->nslots - 1)) {
      gemm_plan *p = &g->plans[g->slots[s] - 1];
      if (plan_matches(p, ta, tb, m, n, k, batch, sa, sb, sc)) {
        *out = p;
        return 0;
      }
    }
  }
  if (g->count == g->cap) {
    int cap = g->cap ? 2 * g->cap : 64;
    gemm_plan *np = realloc(g->plans, (size_t)cap * sizeof *np);
    if (!np) return ts_fail_sys(e, "rt_gemm: out of memory");
    g->plans = np;
    g->cap = cap;
    RT_TRY(rehash(g, e));
    s = (size_t)h & (size_t)(g->nslots - 1); /* the key is absent: find its empty slot in the new table */
    while (g->slots[s]) s = (s + 1) & (size_t)(g->nslots - 1);
  }
  gemm_plan *p = &g->plans[g->count];
  memset(p, 0, sizeof *p);
  p->m = m, p->n = n, p->k = k, p->batch = batch, p->trans_a = ta;
  p->stride_a = sa, p->stride_b = sb, p->stride_c = sc, p->trans_b = tb;
  if (plan_build(g, p, sa, sb, sc, e) != 0) {
    plan_release(p);
    return -1;
  }
  g->slots[s] = ++g->count; /* s: the empty slot the probe ended on */
  *out = p;
  return 0;
}

int rt_gemm_bf16_batched(rt_gemm *g, int trans_a, int trans_b, long long m, long long n, long long k,
                         long long batch, float alpha, const void *A, long long stride_a, const void *B,
                         long long stride_b, float beta, void *C, long long stride_c, void *stream,
                         ts_err *e) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0)
    return ts_fail_sys(e, "rt_gemm: bad shape m=%lld n=%lld k=%lld batch=%lld", m, n, k, batch);
  gemm_plan *p = NULL;
  RT_TRY(plan_get(g, trans_a ? 1 : 0, trans_b ? 1 : 0, m, n, k, batch, stride_a, stride_b, stride_c, &p, e));
  int rc = (int)cublasLtMatmul(g->handle, p->op, &alpha, B, p->la, A, p->lb, &beta, C, p->lc, C, p->lc, &p->algo,
                               g->workspace, g->workspace_bytes, (cudaStream_t)stream);
  if (rc != 0)
    return ts_fail_sys(e, "%s:%d: cublasLtMatmul(m=%lld n=%lld k=%lld batch=%lld): cuBLAS status %d", __FILE__,
                       __LINE__, m, n, k, batch, rc);
  return 0;
}

int rt_gemm_bf16(rt_gemm *g, int trans_a, int trans_b, long long m, long long n, long long k, float alpha,
                 const void *A, const void *B, float beta, void *C, void *stream, ts_err *e) {
  return rt_gemm_bf16_batched(g, trans_a, trans_b, m, n, k, 1, alpha, A, 0, B, 0, beta, C, 0, stream, e);
}

/* exec_gemm_fp8.c — cuBLASLt FP8 GEMM, E4M3 A and B scaled per tensor, BF16 D (see exec_gemm_fp8.h).
 *
 * cuBLASLt is column-major: the row-major D[m x n] is the column-major D^T[n x m] = B . A^T, so, as in
 * exec_gemm.c, the B buffer goes first and the A buffer second. Row-major B[n x k] with leading dimension
 * k is the column-major k x n matrix B^T: cuBLASLt's first operand, transposed (op = T) to n x k.
 * Row-major A[m x k] is the column-major k x m matrix A^T: the second operand, not transposed (op = N).
 * That is the "TN" layout cuBLASLt's FP8 kernels require. The first operand's scale (cuBLASLt's A scale)
 * is therefore b_scale, the second's a_scale. */
#include "exec_gemm_fp8.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"
#include "lt_handle.h"

#define FP8_WORKSPACE ((size_t)32 << 20) /* as exec_gemm.c */

typedef struct {
  exec_gemm_fp8_shape s;
  int align_a, align_b, align_d; /* bytes the heuristic may assume, part of the key */
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, ld; /* the B buffer, the A buffer, D (and C: beta is 0) */
  cublasLtMatmulAlgo_t algo;
} fp8_plan;

struct exec_gemm_fp8 {
  cublasLtHandle_t handle;
  void *workspace;
  fp8_plan *plans;
  int count, cap;
  int last; /* the plan of the previous call: a timing loop runs one shape many times */
};

#define LT_CHECK(call) CUBLAS_CHECK(e, call)

int exec_gemm_fp8_create(exec_gemm_fp8 **out, ts_err *e) {
  *out = NULL;
  exec_gemm_fp8 *g = calloc(1, sizeof *g);
  if (!g) return ts_fail_sys(e, "exec_gemm_fp8_create: out of memory");
  if (lt_handle_open(&g->handle, &g->workspace, FP8_WORKSPACE, "exec_gemm_fp8_create", e)) {
    free(g);
    return -1;
  }
  *out = g;
  return 0;
}

static void plan_release(fp8_plan *p) {
  if (p->la) cublasLtMatrixLayoutDestroy(p->la);
  if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
  if (p->ld) cublasLtMatrixLayoutDestroy(p->ld);
  if (p->op) cublasLtMatmulDescDestroy(p->op);
  memset(p, 0, sizeof *p);
}

void exec_gemm_fp8_destroy(exec_gemm_fp8 *g) {
  if (!g) return;
  for (int i = 0; i < g->count; i++) plan_release(&g->plans[i]);
  free(g->plans);
  lt_handle_close(g->handle, g->workspace);
  free(g);
}

/* The descriptors of p->s (the scale pointers are set per call). */
static int build(fp8_plan *p, ts_err *e) {
  const exec_gemm_fp8_shape *s = &p->s;
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  const int8_t fast = s->fast_accum ? 1 : 0;
  LT_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
  LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
  LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  LT_CHECK(cublasLtMatrixLayoutCreate(&p->la, CUDA_R_8F_E4M3, (uint64_t)s->k, (uint64_t)s->n, s->k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&p->lb, CUDA_R_8F_E4M3, (uint64_t)s->k, (uint64_t)s->m, s->k));
  LT_CHECK(cublasLtMatrixLayoutCreate(&p->ld, CUDA_R_16BF, (uint64_t)s->n, (uint64_t)s->m, s->n));
  return 0;
}

/* The heuristic's first algorithm for p's descriptors and alignments. */
static int pick_algo(exec_gemm_fp8 *g, fp8_plan *p, ts_err *e) {
  /* cuBLASLt's first operand is the B buffer, its second the A buffer */
  const unsigned align[4] = {(unsigned)p->align_b, (unsigned)p->align_a, (unsigned)p->align_d, (unsigned)p->align_d};
  int st;
  if (lt_first_algo(g->handle, p->op, p->la, p->lb, p->ld, p->ld, FP8_WORKSPACE, align, &p->algo, &st))
    return ts_fail_sys(e, "%s:%d: cuBLASLt has no FP8 algorithm for m=%lld n=%lld k=%lld (status %d)", __FILE__,
                       __LINE__, p->s.m, p->s.n, p->s.k, st);
  return 0;
}

/* Largest power of two, up to 256, dividing the address. */
static int alignment_of(const void *ptr) {
  unsigned long long bits = (unsigned long long)(uintptr_t)ptr | 256ULL;
  return (int)(bits & (~bits + 1ULL));
}

static int is_key(const fp8_plan *p, const exec_gemm_fp8_shape *s, int al_a, int al_b, int al_d) {
  return p->s.m == s->m && p->s.n == s->n && p->s.k == s->k && p->s.fast_accum == s->fast_accum &&
         p->align_a == al_a && p->align_b == al_b && p->align_d == al_d;
}

/* The cached plan of the key, or a new one (descriptors and algorithm). NULL: e says why. */
static fp8_plan *plan_for(exec_gemm_fp8 *g, const exec_gemm_fp8_shape *s, int al_a, int al_b, int al_d, ts_err *e) {
  if (g->count && is_key(&g->plans[g->last], s, al_a, al_b, al_d)) return &g->plans[g->last];
  for (int i = 0; i < g->count; i++)
    if (is_key(&g->plans[i], s, al_a, al_b, al_d)) return &g->plans[g->last = i];
  if (g->count == g->cap) {
    int cap = g->cap ? 2 * g->cap : 64;
    fp8_plan *np = realloc(g->plans, (size_t)cap * sizeof *np);
    if (!np) {
      ts_fail_sys(e, "exec_gemm_fp8: out of memory");
      return NULL;
    }
    g->plans = np, g->cap = cap;
  }
  fp8_plan *p = &g->plans[g->count];
  memset(p, 0, sizeof *p);
  p->s = *s;
  p->s.fast_accum = s->fast_accum ? 1 : 0;
  p->align_a = al_a, p->align_b = al_b, p->align_d = al_d;
  if (build(p, e) || pick_algo(g, p, e)) {
    plan_release(p);
    return NULL;
  }
  g->last = g->count++;
  return p;
}

int exec_gemm_fp8_run(exec_gemm_fp8 *g, const exec_gemm_fp8_shape *s, const void *A, const float *a_scale,
                      const void *B, const float *b_scale, void *D, void *stream, ts_err *e) {
  if (s->m <= 0 || s->n <= 0 || s->k <= 0)
    return ts_fail_sys(e, "exec_gemm_fp8: bad shape m=%lld n=%lld k=%lld", s->m, s->n, s->k);
  if (s->n % 16 || s->k % 16)
    return ts_fail_sys(e, "exec_gemm_fp8: m=%lld n=%lld k=%lld: cuBLASLt's FP8 GEMM needs n and k multiples of 16",
                       s->m, s->n, s->k);
  if (!a_scale || !b_scale) return ts_fail_sys(e, "exec_gemm_fp8: a scale pointer is NULL");
  if (alignment_of(a_scale) < 16 || alignment_of(b_scale) < 16)
    return ts_fail_sys(e, "exec_gemm_fp8: the scale pointers must be 16-byte aligned (they are %d, %d)",
                       alignment_of(a_scale), alignment_of(b_scale));
  const int al_a = alignment_of(A), al_b = alignment_of(B), al_d = alignment_of(D);
  if (al_a < 16 || al_b < 16 || al_d < 16)
    return ts_fail_sys(e, "exec_gemm_fp8: A, B and D must be 16-byte aligned (they are %d, %d, %d)", al_a, al_b, al_d);
  fp8_plan *p = plan_for(g, s, al_a, al_b, al_d, e);
  if (!p) return -1;
  /* cuBLASLt's first operand is the B buffer (its scale is b_scale), its second the A buffer */
  LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale, sizeof b_scale));
  LT_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof a_scale));
  const float alpha = 1.0f, beta = 0.0f;
  int st = (int)cublasLtMatmul(g->handle, p->op, &alpha, B, p->la, A, p->lb, &beta, D, p->ld, D, p->ld, &p->algo,
                               g->workspace, FP8_WORKSPACE, (cudaStream_t)stream);
  if (st != 0)
    return ts_fail_sys(e, "%s:%d: cublasLtMatmul(FP8 m=%lld n=%lld k=%lld): cuBLAS status %d", __FILE__, __LINE__,
                       s->m, s->n, s->k, st);
  return 0;
}

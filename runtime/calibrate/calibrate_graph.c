/* calibrate_graph.c — the decode layer alone, queued and in a CUDA graph
 * (calibrate_graph.h): `tacorun bench-graph` and the host section's
 * graph_gap_us. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calibrate_graph.h"
#include "calibrate_time.h"
#include "exec_gemm.h"
#include "gpu_check.h"
#include "infer_decode.h"
#include "infer_kernels.h"
#include "rt_ops.h"

int calib_clock_spin(double us, void *stream, ts_err *e); /* calibrate_clock_spin.cu */

#define N_OPS 12 /* the 11 ops of a layer and the spin reference */
enum { OP_QKV = 1, OP_ATTENTION = 3, OP_ATTN_OUT = 4, OP_FC1 = 7, OP_FC2 = 9 };

typedef struct {
  void *wqkv, *wo, *w1, *w2, *ln1, *ln2, *kc, *vc;
} layer_buf;

typedef struct {
  model_config mc;
  int layers, batch, hl, kvl, d, f;
  long long len, qcl;
  layer_buf L[CALIB_GRAPH_MAX_LAYERS];
  void *x, *xn, *qkv, *qh, *attn, *proj, *fbuf, *act, *partial;
  float *rstd;
  exec_gemm *g;
  cudaStream_t st;
  infer_attn_dims ad;
  int op; /* the op launch() runs */
  double ref_us;
} bench;

static const char *op_name[N_OPS] = {"ln1",     "qkv",  "rope", "attention", "attn_out", "attn_residual",
                                     "ln2",     "fc1",  "act",  "fc2",       "mlp_residual", "spin"};

static int gemm(bench *b, long long M, long long N, long long K, const void *A, const void *B, void *C, ts_err *e) {
  exec_gemm_shape s = exec_gemm_packed(EXEC_GEMM_NN, M, N, K);
  return exec_gemm_run(b->g, &s, 1.f, A, B, 0.f, C, b->st, e);
}

/* Op `op` of layer l (the executor's call, infer_model.c infer_forward). */
static int run_op(bench *b, int op, int l, ts_err *e) {
  const layer_buf *w = &b->L[l];
  const long long T = b->batch, h = b->mc.hidden;
  switch (op) {
  case 0: return rt_rmsnorm_fwd(b->x, w->ln1, b->xn, b->rstd, T, (int)h, 1e-5f, b->st, e);
  case 1: return gemm(b, T, b->qcl, h, b->xn, w->wqkv, b->qkv, e);
  case 2: return infer_rope_scatter(b->qkv, b->qh, w->kc, w->vc, &b->ad, 1, b->len - 1, b->st, e);
  case 3: return infer_decode_attention3(b->qh, w->kc, w->vc, b->attn, b->partial, &b->ad, b->len, b->st, e);
  case 4: return gemm(b, T, h, (long long)b->hl * b->d, b->attn, w->wo, b->proj, e);
  case 5: return rt_add(b->x, b->proj, b->x, T * h, b->st, e);
  case 6: return rt_rmsnorm_fwd(b->x, w->ln2, b->xn, b->rstd, T, (int)h, 1e-5f, b->st, e);
  case 7: return gemm(b, T, 2LL * b->f, h, b->xn, w->w1, b->fbuf, e);
  case 8: return rt_swiglu_fwd(b->fbuf, b->act, T, b->f, b->st, e);
  case 9: return gemm(b, T, h, b->f, b->act, w->w2, b->proj, e);
  case 10: return rt_add(b->x, b->proj, b->x, T * h, b->st, e);
  default: return calib_clock_spin(b->ref_us, b->st, e);
  }
}

static int launch(void *ctx, long long iter, ts_err *e) {
  bench *b = ctx;
  return run_op(b, b->op, (int)(iter % b->layers), e);
}

/* ops [op0, op1) of every layer, in the executor's order */
static int issue(bench *b, int op0, int op1, ts_err *e) {
  for (int l = 0; l < b->layers; l++)
    for (int op = op0; op < op1; op++)
      if (run_op(b, op, l, e)) return -1;
  return 0;
}

static int cmp_d(const void *a, const void *c) {
  double x = *(const double *)a, y = *(const double *)c;
  return (x > y) - (x < y);
}

int calib_time_behind_spin(void *stream, calib_issue_fn issue, void *ctx, int graph, double spin_us, int reps,
                           double *us, ts_err *e) {
  cudaStream_t st = (cudaStream_t)stream;
  cudaEvent_t ev[2] = {NULL, NULL};
  cudaGraph_t gr = NULL;
  cudaGraphExec_t gx = NULL;
  double t[CALIB_GRAPH_MAX_REPS];
  int rc = -1;
  if (reps < 1 || reps > CALIB_GRAPH_MAX_REPS)
    return ts_fail_sys(e, "calib_time_behind_spin: reps %d outside 1..%d", reps, CALIB_GRAPH_MAX_REPS);
  CUDA_CHECK_GOTO(e, cudaEventCreate(&ev[0]), out);
  CUDA_CHECK_GOTO(e, cudaEventCreate(&ev[1]), out);
  if (graph) {
    CUDA_CHECK_GOTO(e, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), out);
    int irc = issue(ctx, e);
    cudaError_t ce = cudaStreamEndCapture(st, &gr);
    if (irc) goto out;
    CUDA_CHECK_GOTO(e, ce, out);
    CUDA_CHECK_GOTO(e, cudaGraphInstantiate(&gx, gr, 0), out);
    CUDA_CHECK_GOTO(e, cudaGraphLaunch(gx, st), out); /* warm-up */
  } else if (issue(ctx, e)) {
    goto out;
  }
  for (int r = 0; r < reps; r++) {
    if (calib_clock_spin(spin_us, st, e)) goto out;
    CUDA_CHECK_GOTO(e, cudaEventRecord(ev[0], st), out);
    if (graph) CUDA_CHECK_GOTO(e, cudaGraphLaunch(gx, st), out);
    else if (issue(ctx, e)) goto out;
    CUDA_CHECK_GOTO(e, cudaEventRecord(ev[1], st), out);
    CUDA_CHECK_GOTO(e, cudaEventSynchronize(ev[1]), out);
    float ms = 0;
    CUDA_CHECK_GOTO(e, cudaEventElapsedTime(&ms, ev[0], ev[1]), out);
    t[r] = 1e3 * ms;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp_d);
  *us = t[reps / 2];
  rc = 0;
out:
  if (gx) cudaGraphExecDestroy(gx);
  if (gr) cudaGraphDestroy(gr);
  if (ev[1]) cudaEventDestroy(ev[1]);
  if (ev[0]) cudaEventDestroy(ev[0]);
  return rc;
}

/* ops [op0, op1) of every layer, as calib_time_behind_spin issues them */
typedef struct {
  bench *b;
  int op0, op1;
} span_ctx;

static int issue_span(void *ctx, ts_err *e) {
  span_ctx *c = ctx;
  return issue(c->b, c->op0, c->op1, e);
}

/* GPU time (us) of ops [op0, op1) of every layer behind a spin of spin_us: queued launches, or
 * (graph) one launch of the captured graph. Median of reps. */
static int time_span(bench *b, int op0, int op1, int graph, double spin_us, int reps, double *us, ts_err *e) {
  span_ctx c = {b, op0, op1};
  return calib_time_behind_spin(b->st, issue_span, &c, graph, spin_us, reps, us, e);
}

static int dmalloc(void **p, size_t bytes, ts_err *e) {
  CUDA_CHECK(e, cudaMalloc(p, bytes));
  CUDA_CHECK(e, cudaMemset(*p, 0, bytes));
  return 0;
}

static void free_caches(bench *b) {
  for (int l = 0; l < b->layers; l++) {
    if (b->L[l].vc) cudaFree(b->L[l].vc);
    if (b->L[l].kc) cudaFree(b->L[l].kc);
    b->L[l].kc = b->L[l].vc = NULL;
  }
  if (b->partial) cudaFree(b->partial);
  b->partial = NULL;
}

static void free_all(bench *b) {
  free_caches(b);
  void *act[] = {b->rstd, b->act, b->fbuf, b->proj, b->attn, b->qh, b->qkv, b->xn, b->x};
  for (size_t i = 0; i < sizeof act / sizeof *act; i++)
    if (act[i]) cudaFree(act[i]);
  for (int l = b->layers - 1; l >= 0; l--) {
    void *w[] = {b->L[l].ln2, b->L[l].ln1, b->L[l].w2, b->L[l].w1, b->L[l].wo, b->L[l].wqkv};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
      if (w[i]) cudaFree(w[i]);
  }
  if (b->g) exec_gemm_destroy(b->g);
  if (b->st) cudaStreamDestroy(b->st);
}

/* Weights (zeros: the GEMMs' time does not depend on the values) and activations for max_batch rows. */
static int alloc_model(bench *b, int max_batch, ts_err *e) {
  const size_t h = (size_t)b->mc.hidden, bf = 2;
  CUDA_CHECK(e, cudaStreamCreateWithFlags(&b->st, cudaStreamNonBlocking));
  if (exec_gemm_create(&b->g, e)) return -1;
  for (int l = 0; l < b->layers; l++) {
    layer_buf *w = &b->L[l];
    if (dmalloc(&w->wqkv, h * (size_t)b->qcl * bf, e) || dmalloc(&w->wo, (size_t)b->hl * b->d * h * bf, e) ||
        dmalloc(&w->w1, h * 2 * (size_t)b->f * bf, e) || dmalloc(&w->w2, (size_t)b->f * h * bf, e) ||
        dmalloc(&w->ln1, h * bf, e) || dmalloc(&w->ln2, h * bf, e))
      return -1;
  }
  const size_t B = (size_t)max_batch;
  if (dmalloc(&b->x, B * h * bf, e) || dmalloc(&b->xn, B * h * bf, e) || dmalloc(&b->qkv, B * b->qcl * bf, e) ||
      dmalloc(&b->qh, B * b->hl * b->d * bf, e) || dmalloc(&b->attn, B * b->hl * b->d * bf, e) ||
      dmalloc(&b->proj, B * h * bf, e) || dmalloc(&b->fbuf, B * 2 * b->f * bf, e) ||
      dmalloc(&b->act, B * b->f * bf, e) || dmalloc((void **)&b->rstd, B * sizeof(float), e))
    return -1;
  return 0;
}

static int alloc_caches(bench *b, int batch, long long len, ts_err *e) {
  b->batch = batch, b->len = len;
  b->ad = (infer_attn_dims){.batch = batch, .hl = b->hl, .kvl = b->kvl, .head_dim = b->d, .max_seq = len,
                            .rope_theta = b->mc.rope_theta > 0 ? b->mc.rope_theta : 10000.0};
  const size_t kv = (size_t)batch * len * b->kvl * b->d * 2;
  for (int l = 0; l < b->layers; l++)
    if (dmalloc(&b->L[l].kc, kv, e) || dmalloc(&b->L[l].vc, kv, e)) return -1;
  size_t pb = infer_decode3_partial_bytes(&b->ad, len);
  return dmalloc(&b->partial, pb ? pb : 16, e);
}

/* One (batch, length) point: its table to out (NULL: none); the per-launch
 * queued - graph values of the table-timed kernels appended to gap[*n]. */
static int one_point(bench *b, const calib_budget *bud, double spin_us, int reps, FILE *out, double *gap, int *n,
                     ts_err *e) {
  int dev = 0;
  void *streams[1] = {b->st};
  CUDA_CHECK(e, cudaGetDevice(&dev));
  double sum[3] = {0, 0, 0};
  if (out) {
    fprintf(out, "batch %d, KV length %lld, %d layers (%s: %d/%d heads of %d, FFN %d)\n", b->batch, b->len, b->layers,
            b->mc.name, b->hl, b->kvl, b->d, b->f);
    fprintf(out, "| op | alone us | queued us | graph us | alone - graph | queued - graph |\n");
    fprintf(out, "| --- | ---: | ---: | ---: | ---: | ---: |\n");
  }
  for (int op = 0; op < N_OPS; op++) {
    double a, q, g;
    b->op = op;
    if (calib_time_us(launch, b, streams, &dev, 1, bud, &a, e)) return -1;
    int o0 = op, o1 = op + 1;
    if (time_span(b, o0, o1, 0, spin_us, reps, &q, e) || time_span(b, o0, o1, 1, spin_us, reps, &g, e)) return -1;
    q /= b->layers, g /= b->layers;
    if (op < N_OPS - 1) sum[0] += a, sum[1] += q, sum[2] += g;
    if (op == OP_QKV || op == OP_ATTN_OUT || op == OP_FC1 || op == OP_FC2) gap[(*n)++] = q - g;
    if (op == OP_ATTENTION) gap[(*n)++] = (q - g) / 2, gap[(*n)++] = (q - g) / 2;
    if (out) fprintf(out, "| %s | %.2f | %.2f | %.2f | %+.2f | %+.2f |\n", op_name[op], a, q, g, a - g, q - g);
  }
  double sq, sg;
  if (time_span(b, 0, N_OPS - 1, 0, spin_us, reps, &sq, e) || time_span(b, 0, N_OPS - 1, 1, spin_us, reps, &sg, e))
    return -1;
  if (out) {
    fprintf(out, "| **a layer (sum of the ops)** | %.2f | %.2f | %.2f | %+.2f | %+.2f |\n", sum[0], sum[1], sum[2],
            sum[0] - sum[2], sum[1] - sum[2]);
    fprintf(out, "| **a layer (the %d layers run as one sequence)** | | %.2f | %.2f | | %+.2f |\n\n", b->layers,
            sq / b->layers, sg / b->layers, (sq - sg) / b->layers);
    fflush(out);
  }
  return 0;
}

calib_graph_opts calib_graph_defaults(void) {
  return (calib_graph_opts){.layers = 32, .n_points = 3, .batch = {1, 16, 64}, .len = {4096, 1024, 2048},
                            .reps = 5, .spin_us = 4000, .ref_us = 20};
}

static void shape_of(bench *b, const calib_graph_opts *o) {
  b->mc = *o->mc;
  b->layers = o->layers, b->ref_us = o->ref_us;
  b->hl = b->mc.heads, b->kvl = b->mc.kv_heads, b->d = model_head_dim(&b->mc), b->f = (int)b->mc.ffn_hidden;
  b->qcl = (long long)(b->hl + 2 * b->kvl) * b->d;
}

double calib_graph_bytes(const calib_graph_opts *o) {
  bench b;
  memset(&b, 0, sizeof b);
  shape_of(&b, o);
  const double h = (double)b.mc.hidden;
  double w = 2.0 * (h * (double)b.qcl + (double)b.hl * b.d * h + h * 2.0 * b.f + (double)b.f * h + 2 * h);
  double kv = 0;
  for (int i = 0; i < o->n_points; i++) {
    double k = 2.0 * 2.0 * (double)o->batch[i] * (double)o->len[i] * b.kvl * b.d;
    if (k > kv) kv = k;
  }
  return (double)b.layers * (w + kv);
}

static int cmp_gap(const void *a, const void *c) {
  double x = *(const double *)a, y = *(const double *)c;
  return (x > y) - (x < y);
}

int calib_graph_run(const calib_graph_opts *o, FILE *out, double *gap_us, int *n_launches, ts_err *e) {
  if (!o->mc || o->layers < 1 || o->layers > CALIB_GRAPH_MAX_LAYERS || o->n_points < 1 ||
      o->n_points > CALIB_GRAPH_MAX_POINTS || o->reps < 1 || o->reps > CALIB_GRAPH_MAX_REPS || o->spin_us <= 0 ||
      o->ref_us <= 0)
    return ts_fail_sys(e, "graph timing: bad options (layers 1..%d, points 1..%d, reps 1..%d, spins > 0)",
                       CALIB_GRAPH_MAX_LAYERS, CALIB_GRAPH_MAX_POINTS, CALIB_GRAPH_MAX_REPS);
  static bench b; /* its layer table is large */
  memset(&b, 0, sizeof b);
  shape_of(&b, o);
  int max_batch = 1;
  for (int i = 0; i < o->n_points; i++)
    if (o->batch[i] > max_batch) max_batch = (int)o->batch[i];
  double gap[CALIB_GRAPH_MAX_POINTS * 6];
  int n = 0, rc = -1;
  calib_budget bud = calib_budget_default(0);
  if (alloc_model(&b, max_batch, e)) goto fail;
  for (int i = 0; i < o->n_points; i++) {
    if (alloc_caches(&b, (int)o->batch[i], o->len[i], e) ||
        one_point(&b, &bud, o->spin_us, o->reps, out, gap, &n, e))
      goto fail;
    free_caches(&b);
  }
  qsort(gap, (size_t)n, sizeof *gap, cmp_gap);
  if (gap_us) *gap_us = n % 2 ? gap[n / 2] : 0.5 * (gap[n / 2 - 1] + gap[n / 2]);
  if (n_launches) *n_launches = n;
  rc = 0;
fail:
  free_all(&b);
  return rc;
}

/* bench_graph.c — `tacorun bench-graph`: what each kernel of the inference
 * executor's decode step costs on the GPU when it is timed alone (as the
 * calibration times it), when it runs in a stream the host keeps ahead of (as
 * the executor's eager steps run), and inside a CUDA graph (as
 * `tacorun execute --decode-graph` runs the step: infer_graph.c), and what the
 * whole step costs in the last two.
 *
 * The step is infer_forward's decode layer at TP 1 without bias (Llama-style):
 * RMSNorm, qkv GEMM, RoPE + KV scatter, decode attention v3 (split + combine
 * kernels), attention-output GEMM, residual add, RMSNorm, FC1 GEMM, SwiGLU,
 * FC2 GEMM, residual add; every layer has its own weights and KV cache, so a
 * GEMM reads its weights from HBM as in the executor. Per op, N = layers
 * launches (launch i on layer i's buffers):
 *   alone   calib_time_us (the calibration's timing: batches of back-to-back
 *           launches from the host, median per launch);
 *   queued  a spin kernel of --spin-us first, then the N launches, timed
 *           between events around them: the host has queued them all before
 *           the GPU reaches them, so the time is the GPU's (kernel plus the
 *           stream's gap between dependent kernels);
 *   graph   the N launches captured into one CUDA graph, launched behind the
 *           same spin kernel, timed between events around the launch.
 * The spin kernel alone (--ref-us) gives the gaps of a kernel of known length.
 * Medians of --reps repetitions. Timing only: the kernels' results are checked
 * by `tacorun execute --infer-check` and `bench-decode`. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "calibrate_time.h"
#include "exec_gemm.h"
#include "gpu_check.h"
#include "infer_decode.h"
#include "infer_kernels.h"
#include "model.h"
#include "rt_ops.h"
#include "ts_args.h"

int calib_clock_spin(double us, void *stream, ts_err *e); /* runtime/calibrate/calibrate_clock_spin.cu */

#define MAX_LAYERS 128
#define MAX_REPS 15
#define N_OPS 12 /* the 11 ops of a layer and the spin reference */

typedef struct {
  void *wqkv, *wo, *w1, *w2, *ln1, *ln2, *kc, *vc;
} layer_buf;

typedef struct {
  model_config mc;
  int layers, batch, hl, kvl, d, f;
  long long len, qcl;
  layer_buf L[MAX_LAYERS];
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

/* GPU time (us) of ops [op0, op1) of every layer behind a spin of spin_us: queued launches, or
 * (graph) one launch of the captured graph. Median of reps. */
static int time_span(bench *b, int op0, int op1, int graph, double spin_us, int reps, double *us, ts_err *e) {
  cudaEvent_t ev[2] = {NULL, NULL};
  cudaGraph_t gr = NULL;
  cudaGraphExec_t gx = NULL;
  double t[MAX_REPS];
  int rc = -1;
  CUDA_CHECK_GOTO(e, cudaEventCreate(&ev[0]), out);
  CUDA_CHECK_GOTO(e, cudaEventCreate(&ev[1]), out);
  if (graph) {
    CUDA_CHECK_GOTO(e, cudaStreamBeginCapture(b->st, cudaStreamCaptureModeThreadLocal), out);
    int irc = issue(b, op0, op1, e);
    cudaError_t ce = cudaStreamEndCapture(b->st, &gr);
    if (irc) goto out;
    CUDA_CHECK_GOTO(e, ce, out);
    CUDA_CHECK_GOTO(e, cudaGraphInstantiate(&gx, gr, 0), out);
    CUDA_CHECK_GOTO(e, cudaGraphLaunch(gx, b->st), out); /* warm-up */
  } else if (issue(b, op0, op1, e)) {
    goto out;
  }
  for (int r = 0; r < reps; r++) {
    if (calib_clock_spin(spin_us, b->st, e)) goto out;
    CUDA_CHECK_GOTO(e, cudaEventRecord(ev[0], b->st), out);
    if (graph) CUDA_CHECK_GOTO(e, cudaGraphLaunch(gx, b->st), out);
    else if (issue(b, op0, op1, e)) goto out;
    CUDA_CHECK_GOTO(e, cudaEventRecord(ev[1], b->st), out);
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

static int one_point(bench *b, const calib_budget *bud, double spin_us, int reps, ts_err *e) {
  int dev = 0;
  void *streams[1] = {b->st};
  CUDA_CHECK(e, cudaGetDevice(&dev));
  double sum[3] = {0, 0, 0};
  printf("batch %d, KV length %lld, %d layers (%s: %d/%d heads of %d, FFN %d)\n", b->batch, b->len, b->layers,
         b->mc.name, b->hl, b->kvl, b->d, b->f);
  printf("| op | alone us | queued us | graph us | alone - graph | queued - graph |\n");
  printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (int op = 0; op < N_OPS; op++) {
    double a, q, g;
    b->op = op;
    if (calib_time_us(launch, b, streams, &dev, 1, bud, &a, e)) return -1;
    int o0 = op, o1 = op + 1;
    if (time_span(b, o0, o1, 0, spin_us, reps, &q, e) || time_span(b, o0, o1, 1, spin_us, reps, &g, e)) return -1;
    q /= b->layers, g /= b->layers;
    if (op < N_OPS - 1) sum[0] += a, sum[1] += q, sum[2] += g;
    printf("| %s | %.2f | %.2f | %.2f | %+.2f | %+.2f |\n", op_name[op], a, q, g, a - g, q - g);
  }
  double sq, sg;
  if (time_span(b, 0, N_OPS - 1, 0, spin_us, reps, &sq, e) || time_span(b, 0, N_OPS - 1, 1, spin_us, reps, &sg, e))
    return -1;
  printf("| **a layer (sum of the ops)** | %.2f | %.2f | %.2f | %+.2f | %+.2f |\n", sum[0], sum[1], sum[2],
         sum[0] - sum[2], sum[1] - sum[2]);
  printf("| **a layer (the %d layers run as one sequence)** | | %.2f | %.2f | | %+.2f |\n\n", b->layers,
         sq / b->layers, sg / b->layers, (sq - sg) / b->layers);
  fflush(stdout);
  return 0;
}

int bench_graph_main(int argc, char **argv) {
  const char *model = "llama3-8b", *models_dir = NULL, *batch_s = "1,16,64", *len_s = "4096,1024,2048";
  int layers = 32, reps = 5;
  double spin_us = 4000, ref_us = 20;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      printf("usage: tacorun bench-graph [--model NAME|FILE (llama3-8b)] [--models DIR] [--batch LIST (1,16,64)]\n"
             "         [--len LIST (4096,1024,2048: one KV length per batch)] [--layers N (32)] [--reps N (5)]\n"
             "         [--spin-us US (4000)] [--ref-us US (20)]\n"
             "Times each kernel of the inference executor's decode layer (TP 1, no bias, decode attention v3)\n"
             "alone (the calibration's timing), queued behind a spin kernel (the GPU's time in a stream the\n"
             "host is ahead of: the eager steps) and in one CUDA graph (the --decode-graph steps), and the\n"
             "layers as one sequence both ways; a spin kernel of --ref-us is the reference. Timing only.\n"
             "reads:  the model zoo (the --model's shapes)\n"
             "writes: one table per batch on standard output (experiments/infer/v3/graph/bench-graph.txt keeps one run)\n");
      return 0;
    }
    if (!v) {
      fprintf(stderr, "bench-graph: %s: missing value or unknown option (--help)\n", a);
      return 2;
    }
    if (!strcmp(a, "--model")) model = v;
    else if (!strcmp(a, "--models")) models_dir = v;
    else if (!strcmp(a, "--batch")) batch_s = v;
    else if (!strcmp(a, "--len")) len_s = v;
    else if (!strcmp(a, "--layers")) layers = atoi(v);
    else if (!strcmp(a, "--reps")) reps = atoi(v);
    else if (!strcmp(a, "--spin-us")) spin_us = atof(v);
    else if (!strcmp(a, "--ref-us")) ref_us = atof(v);
    else {
      fprintf(stderr, "bench-graph: unknown option %s (--help)\n", a);
      return 2;
    }
    i++;
  }
  long long batches[8], lens[8];
  const int nb = ts_arg_ll_list(batch_s, 1, 1024, batches, 8), nl = ts_arg_ll_list(len_s, 2, 1 << 20, lens, 8);
  if (nb < 1 || nl != nb || layers < 1 || layers > MAX_LAYERS || reps < 1 || reps > MAX_REPS || spin_us <= 0 ||
      ref_us <= 0) {
    fprintf(stderr, "bench-graph: --batch and --len: lists of equal length (batch 1..1024, length >= 2); "
                    "--layers 1..%d; --reps 1..%d; --spin-us, --ref-us > 0\n", MAX_LAYERS, MAX_REPS);
    return 2;
  }
  static bench b;
  memset(&b, 0, sizeof b);
  ts_err e = {{0}, 0};
  if (model_load(model, models_dir, &b.mc, &e)) {
    fprintf(stderr, "bench-graph: %s\n", e.msg);
    return 2;
  }
  b.layers = layers, b.ref_us = ref_us;
  b.hl = b.mc.heads, b.kvl = b.mc.kv_heads, b.d = model_head_dim(&b.mc), b.f = (int)b.mc.ffn_hidden;
  b.qcl = (long long)(b.hl + 2 * b.kvl) * b.d;
  int max_batch = 1;
  for (int i = 0; i < nb; i++)
    if (batches[i] > max_batch) max_batch = (int)batches[i];
  calib_budget bud = calib_budget_default(0);
  int rc = 1;
  if (alloc_model(&b, max_batch, &e)) goto fail;
  for (int i = 0; i < nb; i++) {
    if (alloc_caches(&b, (int)batches[i], lens[i], &e) || one_point(&b, &bud, spin_us, reps, &e)) goto fail;
    free_caches(&b);
  }
  rc = 0;
fail:
  if (rc) fprintf(stderr, "bench-graph: %s\n", e.msg);
  free_all(&b);
  return rc;
}
